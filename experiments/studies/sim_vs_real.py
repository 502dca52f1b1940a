"""The ``sim_vs_real`` study: the simulator with a fitted profile against a recorded real run.

Calibration fits a profile on half of the recorded tasks; this study compares on the other half,
so the comparison never scores the simulator on the tasks it was fitted to.
"""

from __future__ import annotations


def held_out(task_id: str) -> bool:
    """True iff ``task_id``'s index (the integer after its last '-') is odd: the tasks
    sim_vs_real compares on; calibration fits on the even ones, so the two never overlap."""
    return int(task_id.rsplit("-", 1)[-1]) % 2 == 1

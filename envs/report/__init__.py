"""The ``report`` task family: each competitor's annual figures for one year, then a summary.

``world`` holds the task's documents and the tools over them (and the queries a careful or a
hasty model writes), ``oracle`` the right remaining steps, and ``env`` the tasks, the grader and
:class:`ReportEnv`, which the ``env=report`` config instantiates. Each module imports only the
ones listed before it.
"""

from planarena.envs.report.env import ReportEnv, generate_tasks, grade
from planarena.envs.report.oracle import ReportOracle
from planarena.envs.report.world import LATENCY, SPECS, Branch, ReportWorld, branches_of

__all__ = [
    "LATENCY",
    "SPECS",
    "Branch",
    "ReportEnv",
    "ReportOracle",
    "ReportWorld",
    "branches_of",
    "generate_tasks",
    "grade",
]

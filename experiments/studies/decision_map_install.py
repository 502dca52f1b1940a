"""Copy a decision map measured by ``experiment=decision_map`` into the package.

``python -m planarena.experiments.studies.decision_map_install RUN_DIR`` checks the run dir's
``decision_map.json`` (the format ``planner=auto`` reads) and writes it over
``planners/data/decision_map.json``, the map ``planner=auto`` uses when ``planner.auto.map_path``
is not set. ``--to PATH`` writes it elsewhere instead (a map for your own model profile, passed
to auto as ``planner.auto.map_path=PATH``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from planarena.planners.auto import SHIPPED_MAP, MapError, load_map


def install(run_dir: Path, to: Path = SHIPPED_MAP) -> Path:
    """Check ``run_dir/decision_map.json`` and copy it to ``to``; returns ``to``."""
    source = run_dir / "decision_map.json" if run_dir.is_dir() else run_dir
    load_map.cache_clear()
    load_map(str(source))  # refuses a file auto could not read
    to.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, to)
    load_map.cache_clear()
    return to


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m planarena.experiments.studies.decision_map_install",
        description="Copy a decision_map study's map into the package (planner=auto's map).",
    )
    parser.add_argument("run_dir", type=Path, help="the study's run dir (or its decision_map.json)")
    parser.add_argument("--to", type=Path, default=SHIPPED_MAP, help="where to write it")
    args = parser.parse_args(argv)
    try:
        path = install(args.run_dir, args.to)
    except MapError as exc:
        print(f"decision_map_install: {exc}", file=sys.stderr)
        return 2
    print(f"decision map installed: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

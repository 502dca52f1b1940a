"""``planarena-calibrate RUN_DIR [RUN_DIR ...] --out profile.yaml``: fit the simulated LLM's
skill profile to the runs' decisions (docs/calibration.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from planarena.experiments.calibrate.calibrate import calibrate
from planarena.experiments.calibrate.observe import SPLITS, CacheMiss, RunDirError
from planarena.experiments.calibrate.registry import FitOptions
from planarena.experiments.calibrate.report import markdown, write_profile
from planarena.planners.llm.profiles import SkillProfile


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="planarena-calibrate",
        description="Fit the simulated LLM's skill profile to the decisions of recorded runs.",
    )
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run dirs made by planarena")
    p.add_argument("--out", required=True, help="the profile to write (YAML)")
    p.add_argument("--report", help="the fit report to write (markdown)")
    p.add_argument(
        "--split",
        choices=SPLITS,
        default="fit",
        help="tasks to fit on: fit (default: those not held out), held_out (task index plus "
        "complexity rank odd, simple 0 medium 1 complex 2: what sim_vs_real compares on), all",
    )
    p.add_argument("--boot", type=int, default=200, help="bootstrap resamples over tasks")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    p.add_argument("--cache", help="response cache of a real-model run (else its llm.cache_dir)")
    p.add_argument("--name", default="calibrated", help="the profile's name")
    p.add_argument(
        "--min-tasks",
        type=int,
        default=FitOptions.min_tasks,
        help="fewest tasks (the bootstrap's unit) for a parameter to count as identified",
    )
    p.add_argument(
        "--exact-boot",
        action="store_true",
        help="refit every bootstrap resample (slow) instead of one Newton step",
    )
    p.add_argument(
        "--no-groups", action="store_true", help="skip the per-role and per-kind fits of the report"
    )
    return p  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.boot < 10:
        print("planarena-calibrate: --boot must be at least 10", file=sys.stderr)
        return 2
    if args.min_tasks < 2:
        print("planarena-calibrate: --min-tasks must be at least 2", file=sys.stderr)
        return 2
    options = FitOptions(
        boot=args.boot,
        seed=args.seed,
        min_tasks=args.min_tasks,
        extra={"exact_boot": args.exact_boot, "groups": not args.no_groups},
    )
    try:
        cal = calibrate(args.runs, cache=args.cache, split=args.split, options=options)
    except (CacheMiss, RunDirError) as exc:
        print(f"planarena-calibrate: {exc}", file=sys.stderr)
        return 2
    if cal.table.empty:
        print(f"planarena-calibrate: no LLM request on the {args.split} split", file=sys.stderr)
        return 2
    write_profile(cal, args.out, args.name)
    text = markdown(cal, args.out)
    if args.report:
        with open(args.report, "w") as f:
            f.write(text)
    pooled = cal.pooled()
    fields = set(SkillProfile.model_fields)
    ident = sorted(p for p, e in pooled.items() if e.identified and p in fields)
    print(f"wrote {args.out}: {len(ident)} identified ({', '.join(ident) or 'none'}); "
          f"{cal.episodes} episodes, {len(cal.table)} rows"
          + (f"; report {args.report}" if args.report else ""))  # fmt: skip
    return 0


def cli() -> None:
    sys.exit(main())

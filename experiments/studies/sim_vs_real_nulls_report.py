"""``sim_vs_real``'s page sections and files for the null profiles, the completion per planner
and the cross-planner hold-out (:mod:`sim_vs_real_nulls`): every sentence is generated from the
numbers, none typed by hand."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from planarena.experiments.studies.sim_vs_real_config import (
    FITTED,
    HOLDOUT,
    Settings,
    split,
)
from planarena.experiments.studies.sim_vs_real_nulls import (
    LOWER_IS_BETTER,
    STATISTICS,
    ProfileComparison,
    compare_profiles,
    completion_by_planner,
)
from planarena.experiments.studies.sim_vs_real_stats import (
    common_tasks,
    failure_modes,
    on_tasks,
    repeats,
    tokens_column,
    with_task_key,
)

CELL = "cell"
"""The records' column naming the profile's cell (absent in a run made before the nulls: all
its records are the fitted profile's)."""


def by_profile(records: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The simulator's records per profile (cell), the fitted one first."""
    if CELL not in records.columns:
        return {FITTED: records.reset_index(drop=True)}
    out = {
        str(k): v.drop(columns=[CELL]).reset_index(drop=True)
        for k, v in records.groupby(records[CELL].astype(str), sort=False)
    }
    return {k: out[k] for k in sorted(out, key=lambda k: k != FITTED)}


@dataclass(frozen=True)
class Extras:
    """What the page shows beyond the fitted profile's own comparison."""

    nulls: ProfileComparison | None
    completion: pd.DataFrame
    holdout: ProfileComparison | None
    holdout_fit: Mapping[str, Any] | None
    labels: dict[str, str]
    repeated: bool


def extras(
    profiles: Mapping[str, pd.DataFrame],
    real: pd.DataFrame,
    planners: Sequence[str],
    s: Settings,
    *,
    seed: int,
) -> Extras:
    """The null comparison, completion per planner and the hold-out, on the held-out tasks."""
    real = split(with_task_key(real), held=True)
    held = {k: split(with_task_key(v), held=True) for k, v in profiles.items()}
    present = [
        p
        for p in planners
        if all(p in set(d["planner"].astype(str)) for d in (real, *held.values()))
    ]
    tasks = common_tasks({"real": real, **held}, present)
    real = on_tasks(real, tasks)
    held = {k: on_tasks(v, tasks) for k, v in held.items()}
    main = {k: v for k, v in held.items() if k != HOLDOUT}
    modes = failure_modes({"real": real, **held})
    tokens = tokens_column(real, held[FITTED]) if FITTED in held else "tokens_total"
    nulls = [n.name for n in s.nulls if n.name in held]
    comparison = None
    if FITTED in main and len(main) > 1:
        comparison = compare_profiles(
            real, main, present, modes, tokens, tested=FITTED, nulls=nulls, seed=seed,
            n_boot=s.n_boot,
        )  # fmt: skip
    completion = completion_by_planner(real, main, present, seed=seed, n_boot=s.n_boot)
    holdout = None
    fit = s.holdout_fitted
    if HOLDOUT in held and s.holdout is not None:
        fit_planners = list((fit or {}).get("planners") or s.holdout.fit)
        predict = [p for p in present if p in s.holdout.predict and p not in fit_planners]
        if len(predict) >= 2:
            ordered = {HOLDOUT: held[HOLDOUT], **main}
            only = {k: v[v["planner"].astype(str).isin(predict)] for k, v in ordered.items()}
            r = real[real["planner"].astype(str).isin(predict)]
            holdout = compare_profiles(
                r, only, predict, modes, tokens, tested=HOLDOUT, nulls=nulls, seed=seed,
                n_boot=s.n_boot, label="holdout_planners",
            )  # fmt: skip
    labels = {FITTED: f"fitted (`{Path(s.profile).name}`)"}
    labels.update({n.name: f"{n.name}: {n.describe()}" for n in s.nulls})
    if fit:
        labels[HOLDOUT] = (
            f"hold-out: fitted on {', '.join(fit.get('planners') or [])} only "
            f"({fit.get('episodes', '?')} episodes)"
        )
    return Extras(comparison, completion, holdout, fit, labels, repeats({"real": real, **held}))


# --------------------------------------------------------------------------- formatting


def _cell(value: float, lo: float, hi: float, name: str, *, signed: bool = True) -> str:
    if math.isnan(value):
        return "undefined"
    if name in LOWER_IS_BETTER:
        sign = "+" if signed else ""
        return f"{100 * value:{sign}.0f} [{100 * lo:{sign}.0f}, {100 * hi:{sign}.0f}]"
    return f"{value:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def _pct(x: float) -> str:
    return "–" if math.isnan(x) else f"{100 * x:.0f} %"


def _pp(x: float) -> str:
    return "–" if math.isnan(x) else f"{round(100 * x) + 0:+d}"


def _header(first: str, distance_note: str = "") -> list[str]:
    """A table's two header lines: ``first``, then each statistic with its interval."""
    cells = [
        f"{v}, pp [95 % CI]{distance_note}" if k in LOWER_IS_BETTER else f"{v} [95 % CI]"
        for k, v in STATISTICS.items()
    ]
    return [f"| {first} | " + " | ".join(cells) + " |", "| --- |" + " --- |" * len(STATISTICS)]


def profile_table(pc: ProfileComparison, labels: Mapping[str, str]) -> list[str]:
    """Per profile: each statistic with its 95 % interval (the distance in pp, with what
    chance gives)."""
    lines = _header("profile", " (chance)")
    stats = pc.stats.set_index(["profile", "statistic"])
    for prof in [pc.tested, *pc.nulls, *pc.others]:
        cells = []
        for name in STATISTICS:
            r = stats.loc[(prof, name)]
            text = _cell(r["value"], r["lo"], r["hi"], name, signed=False)
            if name in LOWER_IS_BETTER and not math.isnan(r["chance_95"]):
                text += f" ({100 * r['chance_95']:.0f})"
            cells.append(text)
        lines.append(f"| {labels.get(prof, prof)} | " + " | ".join(cells) + " |")
    return lines


def diff_table(pc: ProfileComparison, labels: Mapping[str, str]) -> list[str]:
    """Per other profile: the tested profile's statistic minus its, paired; a bold cell is
    one where the tested profile beats it with the interval clear of 0."""
    tested = labels.get(pc.tested, pc.tested).split(" (")[0].split(":")[0]
    lines = _header(f"{tested} − profile")
    diffs = pc.diffs.set_index(["profile", "statistic"])
    for prof in [*pc.nulls, *pc.others]:
        cells = []
        for name in STATISTICS:
            r = diffs.loc[(prof, name)]
            text = _cell(r["diff"], r["lo"], r["hi"], name)
            cells.append(f"**{text}**" if r["beats"] else text)
        kind = "" if prof in pc.nulls else " (not a null)"
        lines.append(f"| {labels.get(prof, prof)}{kind} | " + " | ".join(cells) + " |")
    return lines


def evidence_sentence(pc: ProfileComparison, labels: Mapping[str, str], tested: str) -> str:
    """The one sentence saying which statistics are evidence for the calibration: those where
    ``tested`` beats every null with the paired interval clear of 0."""
    if not pc.nulls:
        return (
            f"No null profile ran (`sim_vs_real.nulls` is empty), so nothing here counts as "
            f"evidence for the calibration of the {tested}."
        )
    names = ", ".join(f"`{n}`" for n in pc.nulls)
    ev = pc.evidence()
    diffs = pc.diffs.set_index(["profile", "statistic"])
    yes = [STATISTICS[k] for k, v in ev.items() if v]
    no = []
    for name, ok in ev.items():
        if ok:
            continue
        failing = [n for n in pc.nulls if not diffs.loc[(n, name), "beats"]]
        r = diffs.loc[(failing[0], name)]
        if math.isnan(r["diff"]):
            why = "undefined"
        else:
            why = f"not clear of `{failing[0]}`: {_cell(r['diff'], r['lo'], r['hi'], name)}"
            if name in LOWER_IS_BETTER:
                why += " pp"
            if len(failing) > 1:
                why += f", nor of {len(failing) - 1} other null(s)"
        no.append(f"{STATISTICS[name]} ({why})")
    head = f"Against the nulls {names} over {pc.tasks} tasks and {len(pc.planners)} planners, "
    if yes:
        text = head + f"**evidence for the calibration** of the {tested}: {', '.join(yes)}"
        if no:
            text += "; not evidence: " + "; ".join(no)
    else:
        text = (
            head + f"**nothing is evidence for the calibration** of the {tested}: " + "; ".join(no)
        )
    return text + "."


def completion_lines(x: Extras) -> list[str]:
    """The completion-per-planner table: real and each profile (Wilson 95 % each, or a task
    bootstrap when tasks repeat) and sim − real (paired task bootstrap), with a line saying
    whether completion can rank the planners at all."""
    t = x.completion
    if t.empty:
        return ["No planner ran every held-out task in every source."]
    profiles = list(dict.fromkeys(t["profile"]))
    real_any = (t.drop_duplicates("planner")["real"] > 0).any()
    ci = "task-bootstrap 95 %" if x.repeated else "Wilson 95 %"
    lines = []
    if not real_any:
        lines.append(
            "**No completion in the real run: completion cannot rank planners.** Every planner "
            "completed 0 of its held-out episodes; the table shows how far each profile is from "
            "that, not a ranking."
        )
    else:
        lines.append(
            f"Completion share per planner ({ci} each), real against each profile, and sim − "
            "real in pp with a paired task-bootstrap 95 % interval (the same resampled tasks "
            "for both)."
        )
    lines += [
        "",
        "| planner | real [95 % CI] | "
        + " | ".join(f"{p} [95 % CI] | {p} − real, pp [95 % CI]" for p in profiles)
        + " |",
        "| --- | --- |" + " --- | --- |" * len(profiles),
    ]
    rows = t.set_index(["planner", "profile"])
    for planner in dict.fromkeys(t["planner"]):
        first = rows.loc[(planner, profiles[0])]
        cells = [f"{_pct(first['real'])} [{_pct(first['real_lo'])}, {_pct(first['real_hi'])}]"]
        for p in profiles:
            r = rows.loc[(planner, p)]
            cells.append(f"{_pct(r['sim'])} [{_pct(r['sim_lo'])}, {_pct(r['sim_hi'])}]")
            cells.append(f"{_pp(r['diff'])} [{_pp(r['diff_lo'])}, {_pp(r['diff_hi'])}]")
        lines.append(f"| {planner} | " + " | ".join(cells) + " |")
    return lines


def markdown_sections(x: Extras) -> tuple[list[str], list[str], list[str]]:
    """(the nulls and completion sections, placed after the ranking; the hold-out section,
    placed before the verdict; the verdict's lines on the evidence)."""
    top: list[str] = []
    if x.nulls is not None:
        pc = x.nulls
        top += [
            "## Against unfitted profiles (nulls)",
            "",
            "Each profile ran the same tasks with the same seeds in this job. Statistics per "
            f"profile on the held-out tasks ({pc.tasks} tasks, {len(pc.planners)} planners), "
            "every one on the same bootstrap resamples of the tasks; the failure-mode distance "
            "is the mean over planners (chance: what swapping each task's real and simulated "
            "episodes at random stays under 95 % of the time):",
            "",
            *profile_table(pc, x.labels),
            "",
            "The fitted profile minus each other, paired over the same task resamples (τ_b: "
            "positive is the fitted profile ahead; distance: negative is). **Bold**: the fitted "
            "profile beats that profile with the paired 95 % interval clear of 0.",
            "",
            *diff_table(pc, x.labels),
            "",
            evidence_sentence(pc, x.labels, "fitted profile"),
            "",
        ]
    top += ["## Completion per planner (held-out tasks)", "", *completion_lines(x), ""]
    bottom: list[str] = []
    if x.holdout is not None:
        pc = x.holdout
        fit = x.holdout_fit or {}
        not_id = fit.get("not_identified") or []
        bottom += [
            "## Cross-planner hold-out",
            "",
            f"A profile fitted on the episodes of {', '.join(fit.get('planners') or [])} only "
            f"({fit.get('episodes', '?')} episodes of the fit split; {len(not_id)} field(s) it "
            f"could not identify keep `strong`'s value or the fit's estimate) predicts the "
            f"planners it never saw: {', '.join(pc.planners)}, on the held-out tasks "
            f"({pc.tasks}). The same statistics over those planners only; the fully fitted "
            "profile, which saw them, is shown for reference and is not a null.",
            "",
            *profile_table(pc, x.labels),
            "",
            *diff_table(pc, x.labels),
            "",
            evidence_sentence(pc, x.labels, "hold-out profile"),
            "",
        ]
    verdict = []
    if x.nulls is not None:
        verdict.append("- " + evidence_sentence(x.nulls, x.labels, "fitted profile"))
    if x.holdout is not None:
        sentence = evidence_sentence(x.holdout, x.labels, "hold-out profile")
        verdict.append("- Cross-planner hold-out: " + sentence[0].lower() + sentence[1:])
    return top, bottom, verdict


# --------------------------------------------------------------------------- CSV


def profiles_csv(x: Extras) -> pd.DataFrame:
    """One row per comparison x profile x statistic: its value and interval, and the tested
    profile minus it (paired), whether the tested one beats it, and the evidence verdict."""
    frames = []
    for scope, pc in (("all_planners", x.nulls), ("holdout_planners", x.holdout)):
        if pc is None:
            continue
        stats = pc.stats.merge(
            pc.diffs.rename(columns={"lo": "diff_lo", "hi": "diff_hi"}),
            on=["profile", "statistic"],
            how="left",
        )
        ev = pc.evidence()
        stats.insert(0, "comparison", scope)
        stats.insert(1, "tested", pc.tested)
        stats["evidence_for_calibration"] = stats["statistic"].map(ev)
        stats["tasks"] = pc.tasks
        stats["planners"] = " ".join(pc.planners)
        frames.append(stats)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def write_extras(x: Extras, out_dir: Path) -> None:
    """``sim_vs_real_profiles.csv`` and ``sim_vs_real_completion.csv``."""
    profiles_csv(x).to_csv(out_dir / "sim_vs_real_profiles.csv", index=False)
    x.completion.to_csv(out_dir / "sim_vs_real_completion.csv", index=False)

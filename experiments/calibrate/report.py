"""The fit report (markdown) and the profile file (YAML) a calibration writes."""

from __future__ import annotations

import math
from pathlib import Path

import yaml
from planarena.experiments.calibrate.calibrate import BASE, Calibration
from planarena.experiments.calibrate.registry import Estimate


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    if not math.isfinite(v) or abs(v) >= 1e6:
        return "inf" if v > 0 else "-inf"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3f}"


def _row(e: Estimate) -> str:
    interval = "-" if e.lo is None else f"[{_num(e.lo)}, {_num(e.hi)}]"
    flag = "yes" if e.identified else "**no**"
    return (
        f"| `{e.parameter}` | {e.group} | {_num(e.value)} | {interval} | {e.n} | {e.tasks} "
        f"| {flag} | {e.reason} |"
    )


HEADER = (
    "| parameter | group | estimate | 95 % interval | n | tasks | identified | why |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- |"
)


def markdown(cal: Calibration, profile_path: str | None = None) -> str:
    """The fit report: what was replayed, which parameters the data identify (and which
    not, and why), n per parameter, the per-role and per-kind breakdown."""
    pooled = [e for e in cal.estimates if e.group == "pooled"]
    groups = [e for e in cal.estimates if e.group != "pooled"]
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(cal.requests.items()))
    lines = [
        "# Calibration fit report",
        "",
        f"Run dirs: {', '.join(f'`{r}`' for r in cal.runs)}; split `{cal.split}`; "
        f"{cal.episodes} episodes replayed; requests by kind: {kinds or 'none'}.",
        "",
        "Intervals are 95 % task-bootstrap intervals (tasks resampled with replacement, all "
        "their decisions with them). A parameter is *identified* when it was observed at "
        "least the minimum number of times and its interval is narrow (probabilities: width "
        "at most 0.5; scales and weights: upper bound at most 3x the lower). Only pooled, "
        f"identified estimates enter the profile; every other field keeps `{BASE}`'s value, "
        f"or takes the estimate where its interval (wide, from enough data) excludes "
        f"`{BASE}`'s.",
        "",
        "## Pooled estimates",
        "",
        HEADER,
        *[_row(e) for e in pooled],
        "",
    ]
    ident = [e.parameter for e in pooled if e.identified]
    not_ident = [f"`{e.parameter}` ({e.reason})" for e in pooled if not e.identified]
    lines += [
        f"**Identified:** {', '.join(f'`{p}`' for p in ident) or 'none'}.",
        "",
        f"**Not identified:** {'; '.join(not_ident) or 'none'}.",
        "",
    ]
    notes = [f"- `{e.parameter}`: {e.note}" for e in pooled if e.note]
    if notes:
        lines += ["How each was measured:", "", *dict.fromkeys(notes), ""]
    if groups:
        lines += [
            "## Per role, kind and format",
            "",
            "The same fits on each group's decisions alone (the profile takes the pooled "
            "value; a group that differs says where one number per model is a simplification).",
            "",
            HEADER,
            *[_row(e) for e in groups],
            "",
        ]
    if profile_path:
        lines += [f"The profile: `{profile_path}` (`llm.skill={profile_path}`).", ""]
    return "\n".join(lines)


def write_profile(cal: Calibration, path: str | Path, name: str = "calibrated") -> None:
    """The profile as YAML: top-level SkillProfile fields, the unidentified ones listed in
    a comment, so ``llm.skill=<path>`` loads it."""
    values, kept = cal.profile(name)
    head = [
        f"# Skill profile fitted by planarena-calibrate from {', '.join(cal.runs)} "
        f"(split {cal.split}).",
        f"# Fields the data do not identify keep {BASE}'s value (the fit's estimate where "
        f"the data exclude {BASE}'s):",
        *[f"#   {k}" for k in kept],
    ]
    text = "\n".join(head) + "\n" + yaml.safe_dump(values, sort_keys=False)
    Path(path).write_text(text)

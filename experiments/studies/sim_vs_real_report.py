"""``sim_vs_real``'s files: ``sim_vs_real.md``, ``sim_vs_real.csv`` and its figure, from the
simulator's records and the real run's."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from planarena.experiments.records import EPISODES, load_records, measured
from planarena.experiments.studies.sim_vs_real_config import Settings, split
from planarena.experiments.studies.sim_vs_real_stats import (
    MEAN_ROW,
    PAIR_VERDICTS,
    RANKED_BY,
    common_tasks,
    completion_gaps,
    disagreements,
    failure_distance,
    failure_modes,
    on_tasks,
    pair_comparisons,
    repeats,
    side_by_side,
    task_key,
    taus_by_measure,
    tokens_column,
    with_task_key,
)


@dataclass(frozen=True)
class Comparison:
    """Everything the files show, computed once."""

    table: pd.DataFrame
    """One row per planner x source (held-out tasks)."""
    gaps: pd.DataFrame
    """Per planner: sim minus real completion with its paired interval."""
    tau: dict[str, Any]
    """Held-out tau and its interval."""
    tau_fit: dict[str, Any]
    """The same on the fitted half (in-sample)."""
    disagree: pd.DataFrame
    """Per planner, the failure modes whose shares differ most, and their mechanisms."""
    modes: list[str]
    tokens: str
    planners: list[str]
    real_label: str
    sim_label: str
    dropped: int
    """Held-out tasks of the real run left out: not run by every planner in both sources."""
    repeated: bool
    """Some task ran more than once per planner: completion intervals are task bootstraps."""
    level: dict[str, float]
    """The mean over planners of sim minus real completion, with its interval."""
    taus: dict[str, dict[str, Any]]
    """Held-out tau per measure the planners are ranked by (:data:`RANKED_BY`; completion
    first, the same as :attr:`tau`)."""
    taus_fit: dict[str, dict[str, Any]]
    """The same on the fitted half."""
    distance: pd.DataFrame
    """Per planner (and their mean), the total-variation distance between the two failure-mode
    mixes, its interval and what chance gives (:func:`failure_distance`)."""
    pairs: pd.DataFrame
    """Per pair of planners, the completion difference in each source and whether the
    simulator's comes out as the real one's (:func:`pair_comparisons`)."""


def compare(
    sim: pd.DataFrame, real: pd.DataFrame, planners: Sequence[str], s: Settings, *, seed: int
) -> Comparison:
    """The comparison of ``sim``'s records with ``real``'s on the held-out tasks."""
    present = [
        p
        for p in planners
        if p in set(real["planner"].astype(str)) and p in set(sim["planner"].astype(str))
    ]
    real, sim = with_task_key(real), with_task_key(sim)
    held = _complete({"real": split(real, held=True), "sim": split(sim, held=True)}, present)
    fit = _complete({"real": split(real, held=False), "sim": split(sim, held=False)}, present)
    dropped = int(task_key(split(real, held=True)).nunique()) - int(
        task_key(held["real"]).nunique()
    )
    modes = failure_modes(held)
    tokens = tokens_column(held["real"], held["sim"])
    table = side_by_side(held, present, modes, tokens, seed=seed, n_boot=s.n_boot)
    gaps, level = completion_gaps(held["real"], held["sim"], present, seed=seed, n_boot=s.n_boot)
    taus = taus_by_measure(held["real"], held["sim"], present, tokens, seed=seed, n_boot=s.n_boot)
    taus_fit = taus_by_measure(
        fit["real"], fit["sim"], present, tokens, seed=seed, n_boot=s.n_boot, label="fit"
    )
    disagree = disagreements(table, modes, top=s.top_gaps, min_gap=s.min_gap)
    distance = failure_distance(held, present, modes, seed=seed, n_boot=s.n_boot)
    pairs = pair_comparisons(held["real"], held["sim"], present)
    return Comparison(
        table,
        gaps,
        taus["completion"],
        taus_fit["completion"],
        disagree,
        modes,
        tokens,
        present,
        _label(real),
        _label(sim),
        dropped,
        repeats(held),
        level,
        taus,
        taus_fit,
        distance,
        pairs,
    )


def _complete(sources: dict[str, pd.DataFrame], planners: Sequence[str]) -> dict[str, pd.DataFrame]:
    """``sources`` on the tasks every planner ran in both (:func:`common_tasks`)."""
    tasks = common_tasks(sources, planners)
    return {k: on_tasks(v, tasks) for k, v in sources.items()}


def _label(df: pd.DataFrame) -> str:
    values = sorted(set(df["llm"].astype(str))) if "llm" in df.columns else []
    return ", ".join(values) or "?"


def write_comparison(
    records: pd.DataFrame, config: Mapping[str, Any], s: Settings, out_dir: Path, *, seed: int
) -> str:
    """Write the study's files into ``out_dir``; returns the Markdown."""
    from planarena.experiments.studies.sim_vs_real_config import FITTED, real_config
    from planarena.experiments.studies.sim_vs_real_nulls_report import (
        by_profile,
        extras,
        markdown_sections,
        write_extras,
    )

    real = measured(load_records(s.real_run / EPISODES))
    order = list(real_config(s.real_run).get("planner") or config.get("planner") or {})
    profiles = by_profile(records)
    c = compare(profiles[FITTED], real, order, s, seed=seed)
    x = extras(profiles, real, c.planners, s, seed=seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv = c.table.merge(c.gaps, on="planner", how="left")
    per_planner = c.distance[c.distance["planner"] != MEAN_ROW]
    csv = csv.merge(
        per_planner.add_prefix("failure_").rename(columns={"failure_planner": "planner"}),
        on="planner",
        how="left",
    )
    csv.insert(2, "tokens_basis", c.tokens)
    for name, t in c.taus.items():  # study-wide: the same on every row
        for key, suffix in (("tau", ""), ("tau_lo", "_lo"), ("tau_hi", "_hi")):
            csv[f"tau_{name}{suffix}"] = t[key]
    csv.to_csv(out_dir / "sim_vs_real.csv", index=False)
    c.pairs.to_csv(out_dir / "sim_vs_real_pairs.csv", index=False)
    write_extras(x, out_dir)
    text = markdown(c, s, sections=markdown_sections(x))
    (out_dir / "sim_vs_real.md").write_text(text)
    from planarena.experiments.studies.sim_vs_real_figure import write_sim_vs_real_figures

    title = f"completion {_tau_short(c.tau)}"
    if "tokens" in c.taus:
        title += f"\ntokens {_tau_short(c.taus['tokens'])}"
    write_sim_vs_real_figures(c.table, c.planners, out_dir / "figures", tau=title)
    return text


# --------------------------------------------------------------------------- Markdown


def _pct(x: float) -> str:
    return "–" if x is None or math.isnan(x) else f"{100 * x:.0f} %"


def _pp(x: float) -> str:
    """Percentage points, signed; a value that rounds to 0 is "+0", never "-0"."""
    return "–" if math.isnan(x) else f"{round(100 * x) + 0:+d}"


def _pp_end(x: float) -> str:
    """An interval's end in percentage points: as :func:`_pp`, but an end within half a
    point of 0 and not on it keeps a decimal (-0.2), so an end that does not clear 0 never
    reads "+0" beside a verdict that says it does not."""
    if math.isnan(x) or x == 0 or round(100 * x) != 0:
        return _pp(x)
    return f"{100 * x:+.1f}"


def _num(x: float) -> str:
    return "–" if math.isnan(x) else f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}"


def _why_undefined(t: Mapping[str, Any]) -> str:
    """Why tau is undefined: which source ranks every planner equal (and at what value)."""
    tied = t.get("tied", "")
    if not tied:
        return "fewer than two planners or no common task"
    value = t.get("value")
    means = t.get("real_mean" if tied != "sim" else "sim_mean") or [math.nan]
    at = _pct(means[0]) if value in ("success", "progress") else _num(means[0])
    who = {"real": "the real run ranks", "sim": "the simulator ranks", "both": "both sources rank"}
    return f"{who[tied]} every planner equal, all at {at}"


def _tau(t: Mapping[str, Any]) -> str:
    if math.isnan(t["tau"]):
        return f"undefined ({_why_undefined(t)})"
    return f"{t['tau']:+.2f} [{t['tau_lo']:+.2f}, {t['tau_hi']:+.2f}]"


def _tau_short(t: Mapping[str, Any]) -> str:
    if math.isnan(t["tau"]):
        return "τ_b undefined"
    return f"τ_b = {t['tau']:+.2f} [{t['tau_lo']:+.2f}, {t['tau_hi']:+.2f}]"


def ranking_sentence(t: Mapping[str, Any], fit: Mapping[str, Any]) -> str:
    """Tau on the held-out tasks with how its interval was made, then tau in-sample."""
    how = (
        f"95 % percentile bootstrap over held-out tasks, {t['n_boot']} resamples, both "
        "rankings recomputed on the same drawn tasks"
    )
    if t["undefined"]:
        how += f"; {t['undefined']} resamples with an all-tied ranking left out"
    head = "Kendall τ_b of the planners by completion, real against sim: "
    if math.isnan(t["tau"]):
        text = head + f"**undefined** ({_why_undefined(t)})."
    else:
        text = head + f"**{_tau(t)}** ({how})."
    return text + f" On the fitted half (in-sample, {fit['tasks']} tasks): {_tau(fit)}."


def _measure(c: Comparison, name: str) -> str:
    label = RANKED_BY[name]
    return f"{label} (`{c.tokens}`)" if name == "tokens" else label


def rankings_table(c: Comparison) -> list[str]:
    """Tau per measure the planners are ranked by, held-out and in-sample, as table lines."""
    lines = [
        "| ranked by | τ_b held-out [95 % CI] | all-tied resamples | τ_b in-sample (fitted half) |",
        "| --- | --- | ---: | --- |",
    ]
    for name, t in c.taus.items():
        fit = c.taus_fit.get(name, {"tau": math.nan})
        lines.append(
            f"| {_measure(c, name)} | {_tau(t)} | {t['undefined']} of {t['n_boot']} | {_tau(fit)} |"
        )
    return lines


def ranking_verdict(c: Comparison) -> str:
    """One line: the measures on which the simulator's ranking agrees with the real one beyond
    chance (tau's interval clear of 0), those where it does not at this n, and those that
    cannot be compared. Beating chance is not beating an unfitted profile: the nulls' line
    says which agreement is evidence for the calibration."""
    yes, no, undefined = [], [], []
    for name, t in c.taus.items():
        if math.isnan(t["tau"]):
            undefined.append(f"{_measure(c, name)} ({_why_undefined(t)})")
        elif t["tau_lo"] > 0:
            how = "exactly" if t["tau"] == 1 and t["tau_lo"] == 1 else "better than chance"
            yes.append(f"{_measure(c, name)} ({how}: τ_b = {_tau(t)})")
        else:
            no.append(f"{_measure(c, name)} (τ_b = {_tau(t)})")
    n = c.tau["tasks"]
    if yes:
        text = (
            f"- **The simulator's ranking of the planners agrees with this model's by "
            f"{'; by '.join(yes)}**, the interval clear of 0 over {n} held-out tasks (against "
            "chance; against unfitted profiles, see the nulls)."
        )
    else:
        text = f"- **The simulator's ranking agrees with none of this model's at this n** ({n} "
        text += "held-out tasks)."
    if no:
        text += " Not beyond chance at this n (the interval includes 0): by " + "; by ".join(no)
        text += "."
    if undefined:
        text += " Cannot be compared: by " + "; by ".join(undefined) + "."
    return text


def verdict(c: Comparison) -> list[str]:
    """The closing note: whether the simulator predicts the ranking, which planners it gets
    wrong, and where the mechanisms point."""
    lines: list[str] = [ranking_verdict(c)]
    lv = c.level
    if not math.isnan(lv["gap"]):
        lines.append(
            f"- Level: averaged over the planners, the simulator's completion is "
            f"{_pp(lv['gap'])} pp [{_pp(lv['gap_lo'])}, {_pp(lv['gap_hi'])}] off the real "
            "model's (sim − real); an offset shared by every planner leaves the ranking intact."
        )
    wrong = c.gaps[c.gaps["rel_verdict"] != "in line"]
    if wrong.empty:
        lines.append(
            "- No planner is ranked wrong beyond the noise: every planner's gap is in line "
            "with the average gap (each paired interval of its difference includes 0)."
        )
    else:
        parts = [
            f"{r.planner} ({r.rel_verdict.removeprefix('sim ')}: {_pp(r.rel_gap)} pp beyond "
            f"the average gap [{_pp(r.rel_lo)}, {_pp(r.rel_hi)}])"
            for r in wrong.itertuples()
        ]
        lines.append("- Planners it ranks wrong: " + "; ".join(parts) + ".")
    off = c.gaps[c.gaps["verdict"] != "agrees"]
    if not off.empty:
        lines.append(
            "- Completion off beyond the noise (paired interval of sim − real clear of 0): "
            + ", ".join(f"{r.planner} ({r.verdict.removeprefix('sim ')})" for r in off.itertuples())
            + "."
        )
    ranks = c.table.pivot(index="planner", columns="source", values="rank").reindex(c.planners)
    moved = (ranks["sim"] - ranks["real"]).abs().sort_values(ascending=False, kind="stable")
    moved = moved[moved >= 2]
    if not moved.empty:
        lines.append(
            "- Largest rank moves (real → sim): "
            + ", ".join(
                f"{p} {ranks.at[p, 'real']:g} → {ranks.at[p, 'sim']:g}" for p in moved.index[:4]
            )
            + "."
        )
    pairs_line = pairs_verdict(c.pairs)
    if pairs_line:
        lines.append(pairs_line)
    distance_line = distance_verdict(c)
    if distance_line:
        lines.append(distance_line)
    if not c.disagree.empty:
        top = c.disagree.reindex(c.disagree["gap"].abs().sort_values(ascending=False).index)
        counts = top["failure_mode"].value_counts()
        mode = str(counts.index[0])
        n = int(counts.iloc[0])
        sign = top[top["failure_mode"] == mode]["gap"].mean()
        lines.append(
            f"- The gap most planners share: `{mode}` ({n} planner(s), the simulator "
            f"{'too often' if sign > 0 else 'too rarely'}), which points to "
            f"{top[top['failure_mode'] == mode]['mechanism'].iloc[0]}."
        )
    return lines


def pairs_section(pairs: pd.DataFrame) -> list[str]:
    """Each pair of planners by completion, real against sim: the comparisons a user of the
    simulator would draw, and which of them the real model bears out."""
    if pairs.empty:
        return []
    n = int(pairs["real_tasks"].max())
    lines = [
        "## Planner pairs by completion (held-out tasks)",
        "",
        "For each pair, the first planner's completion minus the second's on the same tasks, "
        f"with Newcombe's paired 95 % interval over {n} tasks (square-and-add: each "
        "planner's Wilson interval, less what the pairing explains), in the real runs and in "
        "the simulator's; "
        "*directions* compares the two point estimates' signs. A pair is *right* "
        "when both intervals clear 0 on the same side, *wrong* when they clear it on opposite "
        "sides; *sim only* is a difference the simulator shows and the real runs do not "
        "(a comparison the simulator would make that this model does not bear out).",
        "",
        "| pair | real, pp [95 % CI] | sim, pp [95 % CI] | directions | verdict |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in pairs.itertuples():
        signs = {math.copysign(1, x) if x else 0 for x in (r.real_diff, r.sim_diff)}
        directions = "a tie in one" if 0 in signs else "same" if len(signs) == 1 else "opposite"
        lines.append(
            f"| {r.planner_a} − {r.planner_b} | {_pp(r.real_diff)} [{_pp_end(r.real_lo)}, "
            f"{_pp_end(r.real_hi)}] | {_pp(r.sim_diff)} [{_pp_end(r.sim_lo)}, "
            f"{_pp_end(r.sim_hi)}] | "
            f"{directions} | {r.verdict} |"
        )
    return lines


def pairs_verdict(pairs: pd.DataFrame) -> str | None:
    """One line: how many pairs of planners the simulator gets right, and which it gets
    wrong or separates alone."""
    if pairs.empty:
        return None
    counts = pairs["verdict"].value_counts()
    tally = ", ".join(f"{counts[v]} {v}" for v in PAIR_VERDICTS if v in counts)
    line = f"- Planner pairs by completion ({len(pairs)}): {tally}."
    for verdict in ("wrong", "sim only", "real only"):
        named = pairs[pairs["verdict"] == verdict]
        if not named.empty:
            line += (
                f" {PAIR_VERDICTS[verdict].capitalize()}: "
                + ", ".join(
                    f"{r.planner_a} − {r.planner_b} (real {_pp(r.real_diff)}, "
                    f"sim {_pp(r.sim_diff)} pp)"
                    for r in named.itertuples()
                )
                + "."
            )
    return line


def _distance_cells(dist: pd.DataFrame, planner: str) -> list[str]:
    if planner not in dist.index:
        return ["–", "–"]
    d = dist.loc[planner]
    return [
        f"{100 * d['distance']:.0f} [{100 * d['distance_lo']:.0f}, {100 * d['distance_hi']:.0f}]",
        f"{100 * d['chance_95']:.0f}",
    ]


def _p_value(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def distance_verdict(c: Comparison) -> str | None:
    """One line: how far the failure-mode mixes are, against chance, and for how many
    planners the gap is beyond it."""
    dist = c.distance.set_index("planner")
    if MEAN_ROW not in dist.index:
        return None
    mean = dist.loc[MEAN_ROW]
    per = dist.drop(index=MEAN_ROW)
    beyond = per[per["distance"] > per["chance_95"]]
    text = (
        f"- Failure modes: the real and simulated mixes are {100 * mean['distance']:.0f} pp "
        f"apart on average [{100 * mean['distance_lo']:.0f}, {100 * mean['distance_hi']:.0f}] "
        f"(total variation); chance alone stays under {100 * mean['chance_95']:.0f} pp "
        f"({_p_value(mean['p_value'])})."
    )
    if beyond.empty:
        return text + " No planner's mix differs beyond chance."
    names = ", ".join(str(p) for p in beyond.index)
    return text + f" Beyond chance for {len(beyond)} of {len(per)} planners: {names}."


def markdown(c: Comparison, s: Settings, sections: tuple[list[str], list[str]] = ([], [])) -> str:
    """The study's page; ``sections``: lines placed after the ranking and before the
    verdict (the nulls, completion per planner and the hold-out)."""
    t = c.tau
    table = c.table
    by = {(r["planner"], r["source"]): r for r in table.to_dict("records")}
    gaps = c.gaps.set_index("planner") if not c.gaps.empty else pd.DataFrame()
    lines = [
        "# Simulator against a real model",
        "",
        f"Real run: `{s.real_run}` ({c.real_label}); simulator: {c.sim_label}, profile "
        f"`{s.profile}`. Compared on the **held-out** tasks (task index plus complexity rank "
        f"odd; calibration fits on the others): {t['tasks']} tasks, {len(c.planners)} planners"
        + (
            f" ({c.dropped} held-out task(s) left out: not run by every planner in both)"
            if c.dropped
            else ""
        )
        + f". Tokens per episode are `{c.tokens}`; completion intervals are "
        + ("task-bootstrap 95 % (tasks ran more than once)." if c.repeated else "Wilson 95 %."),
        "",
        "## Ranking",
        "",
        ranking_sentence(t, c.tau_fit),
        "",
        "The planners ranked by other measures too, real against sim (Kendall τ_b of the "
        "planners' per-episode means, the same paired task bootstrap; these still rank the "
        "planners when every planner completes the same share). Completion's row repeats the "
        "line above:",
        "",
        *rankings_table(c),
        "",
        *sections[0],
        "## Side by side (held-out tasks)",
        "",
        "| planner | completion real [95 % CI] | completion sim [95 % CI] | sim − real, pp "
        "[95 % CI] | beyond the average gap, pp [95 % CI] | rank real | rank sim | "
        "tokens/episode real | sim | LLM calls/episode real | sim |",
        "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in c.planners:
        r, m = by[(p, "real")], by[(p, "sim")]
        g = gaps.loc[p] if p in gaps.index else None
        gap = rel = "–"
        if g is not None:
            gap = f"{_pp(g['gap'])} [{_pp(g['gap_lo'])}, {_pp(g['gap_hi'])}]"
            rel = f"{_pp(g['rel_gap'])} [{_pp(g['rel_lo'])}, {_pp(g['rel_hi'])}]"
        lines.append(
            f"| {p} | {_pct(r['completion'])} [{_pct(r['completion_lo'])}, "
            f"{_pct(r['completion_hi'])}] | {_pct(m['completion'])} [{_pct(m['completion_lo'])}, "
            f"{_pct(m['completion_hi'])}] | {gap} | {rel} | {r['rank']:g} | {m['rank']:g} | "
            f"{_num(r['tokens_mean'])} | {_num(m['tokens_mean'])} | {_num(r['calls_mean'])} | "
            f"{_num(m['calls_mean'])} |"
        )
    lines += ["", *pairs_section(c.pairs)]
    failing = [m for m in c.modes if m != "none"]
    lines += [
        "",
        "## Failure modes (share of the planner's held-out episodes, real / sim)",
        "",
        "*Distance* is the total-variation distance between the two mixes, completion "
        "included (0: the same shares; 100 pp: no mode in common), with its paired task-"
        "bootstrap 95 % interval. *Chance* is the distance that swapping each task's real and "
        "simulated episodes at random stays under 95 % of the time: at this many episodes two "
        "samples of one mix are that far apart, so only a distance above it says the mixes "
        "differ.",
        "",
        "| planner | "
        + " | ".join(f"`{m}`" for m in failing)
        + " | distance, pp [95 % CI] | chance, pp |",
        "| --- |" + " ---: |" * len(failing) + " --- | ---: |",
    ]
    dist = c.distance.set_index("planner")
    for p in c.planners:
        r, m = by[(p, "real")], by[(p, "sim")]
        cells = [f"{_pct(r[f'share_{k}'])} / {_pct(m[f'share_{k}'])}" for k in failing]
        cells += _distance_cells(dist, p)
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    if MEAN_ROW in dist.index:
        blank = ["" for _ in failing]
        lines.append(
            f"| {MEAN_ROW} | " + " | ".join([*blank, *_distance_cells(dist, MEAN_ROW)]) + " |"
        )
    lines += [
        "",
        "## Where they disagree",
        "",
        f"Per planner the failure modes whose shares differ most (sim − real, at least "
        f"{100 * s.min_gap:g} pp, at most {s.top_gaps}), and the simulator mechanism each "
        "points to: a positive gap says the simulator makes that failure too often for this "
        "model (the mechanism's probability is set too high), a negative one too rarely.",
        "",
    ]
    if c.disagree.empty:
        lines.append("No failure mode's share differs by that much for any planner.")
    else:
        lines += [
            "| planner | failure mode | real | sim | gap, pp | points to |",
            "| --- | --- | ---: | ---: | ---: | --- |",
        ]
        for r in c.disagree.itertuples():
            lines.append(
                f"| {r.planner} | `{r.failure_mode}` | {_pct(r.real_share)} | "
                f"{_pct(r.sim_share)} | {_pp(r.gap)} | {r.mechanism} |"
            )
    if sections[1]:
        lines += ["", *sections[1][:-1]]
    judged = verdict(c)
    lines += ["", "## Verdict", "", *judged[:1], *sections[2], *judged[1:]]
    return "\n".join(lines) + "\n"

"""The few lines a job prints after its completion table, and ``summary.md``'s first section:
where the outputs are, and per env x complexity which planner is best and which planners are
separable from it.

The family of tests is chosen for the question asked ("is anyone worse than the best
here?"): per cell, the best planner against each other planner, Holm-adjusted over those
comparisons only. That is (planners - 1) tests per cell instead of comparisons.csv's every
pair, so a large difference is not drowned by hundreds of tests nobody asked about. For a
planner not separable from the best, :func:`~planarena.experiments.analysis.power.tasks_for_power`
estimates the tasks per cell that would separate the observed difference.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from planarena.experiments.analysis.cells import (
    iter_groups,
    pair_keys,
    planner_order_of,
    require_columns,
    sort_cells,
    success_bool,
    swept_keys,
)
from planarena.experiments.analysis.comparisons import (
    _rate_columns,
    _task_rates,
    paired_difference,
)
from planarena.experiments.analysis.power import tasks_for_power
from planarena.experiments.analysis.stats import derive_seed, holm, sign_test_p
from planarena.experiments.records.runs import with_swept_columns
from planarena.experiments.records.schema import measured

ALPHA = 0.05
"""Family-wise error rate of the headline's tests (the tables' too)."""

POWER = 0.8
"""Power the task estimate aims at."""

GROUP_ABOVE = 9
"""More cells than this print one line per env (the per-cell detail stays in summary.md)."""

WIDTH = 100
"""Printed lines are wrapped at this width."""

NBSP = "\xa0"  # textwrap breaks at ASCII whitespace only


@dataclass
class Versus:
    """The best planner of a cell against one other planner, on the tasks both ran."""

    planner: str
    rate: float
    n_tasks: int
    wins_best: int
    wins_other: int
    p: float
    p_holm: float = math.nan
    tasks_needed: float = math.nan  # for 80% power, when not separable
    diff: float = math.nan  # best minus this planner, mean over the tasks both ran
    diff_low: float = math.nan  # its 95% paired task-bootstrap interval (separable ones)
    diff_high: float = math.nan

    @property
    def separable(self) -> bool:
        return self.p_holm < ALPHA


@dataclass
class Cell:
    """One env x complexity (x swept key) cell: its best planner and the others against it."""

    key: dict[str, Hashable]
    best: str
    rate: float
    n_tasks: int
    others: list[Versus] = field(default_factory=list)


@dataclass
class Headline:
    """Every cell of the job, the size of the test family and Holm's level for a tie."""

    cells: list[Cell]
    n_tests: int
    tie_alpha: float


def best_vs_others(df: pd.DataFrame, *, planner_order: Sequence[str] | None = None) -> Headline:
    """Per cell the planner with the highest completion rate (ties: the first in planner
    order) against each other planner: exact sign test on the tasks both ran (McNemar when
    each task ran once), Holm-adjusted over every test of the headline. For the planners not
    separable, the tasks per cell for 80 % power at the level Holm would test them at next,
    ``alpha / (m - k)`` (m tests, k separable), taking the observed discordance as true."""
    df = with_swept_columns(measured(df))
    require_columns(df, ("planner", "success"))
    planners = planner_order_of(df, planner_order)
    cell_keys = [k for k in ("env", "complexity") if k in df.columns]
    groups = [*cell_keys, *(k for k in swept_keys(df) if k != "seed")]
    if not groups or df.empty:
        return Headline([], 0, ALPHA)
    on = pair_keys(df)
    work = df.assign(_s=success_bool(df["success"]).astype(np.float64))
    cells: list[Cell] = []
    for key, sub in iter_groups(work, groups):
        rate = sub.groupby("planner", observed=True)["_s"].mean()
        present = [p for p in planners if p in rate.index]
        if not present:
            continue
        best = max(present, key=lambda p: (rate[p], -present.index(p)))
        rates = _task_rates(sub, on)
        cell = Cell(dict(zip(groups, key, strict=True)), best, float(rate[best]), len(rates))
        columns = _rate_columns(rates)
        for other in present:
            if other == best:
                continue
            a, b = columns[best], columns[other]
            ran = ~(np.isnan(a) | np.isnan(b))  # the tasks both ran
            if not ran.any():  # no task both ran: nothing to compare (as in comparisons.csv)
                continue
            diff = a[ran] - b[ran]
            wins_b, wins_o = int((diff > 0).sum()), int((diff < 0).sum())
            p = sign_test_p(wins_b, wins_o)
            versus = Versus(other, float(rate[other]), int(ran.sum()), wins_b, wins_o, p)
            versus.diff = float(diff.mean())
            cell.others.append(versus)
        cells.append(cell)
    cells = _sorted(cells, groups)
    tests = [v for c in cells for v in c.others]
    for v, adjusted in zip(tests, holm([v.p for v in tests]), strict=True):
        v.p_holm = adjusted
    k = sum(v.separable for v in tests)
    tie_alpha = ALPHA / max(len(tests) - k, 1)
    for cell in cells:  # the separable differences get their paired interval
        for v in cell.others:
            if v.separable:
                v.diff_low, v.diff_high = _paired_interval(work, cell, v.planner, on, groups)
    for v in tests:
        if not v.separable:
            p10, p01 = v.wins_best / v.n_tasks, v.wins_other / v.n_tasks
            v.tasks_needed = tasks_for_power(p10, p01, alpha=tie_alpha, power=POWER)
    return Headline(cells, len(tests), tie_alpha)


def _paired_interval(
    work: pd.DataFrame, cell: Cell, other: str, on: Sequence[str], groups: Sequence[str]
) -> tuple[float, float]:
    """The 95% paired task-bootstrap interval of ``best - other`` in ``cell`` (seeded by the
    cell and the pair, as :func:`~planarena.experiments.analysis.comparisons.paired_difference`
    computes it), so a headline quotes the same interval on every rerun."""
    mask = np.ones(len(work), dtype=bool)
    for k in groups:
        mask &= (work[k] == cell.key[k]).to_numpy()
    sub = work[mask & work["planner"].isin([cell.best, other]).to_numpy()]
    seed = derive_seed(0, *map(str, cell.key.values()), cell.best, other, "headline")
    stats = paired_difference(sub, cell.best, other, seed=seed, on=on)
    return float(stats["ci_low"]), float(stats["ci_high"])


def _where(cell: Cell) -> str:
    return " ".join(str(v) for v in cell.key.values())


def headline_sentence(h: Headline) -> str:
    """One sentence: the separable differences, largest first (at most two named, with their
    paired intervals in points), and that nothing else is separable at this n."""
    found = sorted(
        ((c, v) for c in h.cells for v in c.others if v.separable),
        key=lambda cv: (-cv[1].diff, _where(cv[0]), cv[1].planner),
    )
    n = sorted({c.n_tasks for c in h.cells})
    at = f"{n[0]}" if len(n) == 1 else f"{n[0]}-{n[-1]}"
    if not h.cells:
        return "No measured episode: nothing to compare."
    if not found:
        return (
            f"No planner completes separably more than another in any of {len(h.cells)} "
            f"cell(s) at this n ({at} tasks per cell; {h.n_tests} tests, Holm, alpha {ALPHA})."
        )
    named = [
        f"{c.best} completes more than {v.planner} on {_where(c)}, "
        f"{100 * v.diff:+.0f} pp [{100 * v.diff_low:+.0f}, {100 * v.diff_high:+.0f}]"
        for c, v in found[:2]
    ]
    rest = len(found) - len(named)
    tail = (
        f"{rest} more separable pair(s) in the table below"
        if rest
        else "nothing else is separable at this n"
    )
    return f"{'; '.join(named)}; {tail} ({at} tasks per cell; {h.n_tests} tests, Holm)."


def _sorted(cells: list[Cell], groups: list[str]) -> list[Cell]:
    """Cells in the tables' order (env, then simple < medium < complex)."""
    if not cells:
        return cells
    frame = pd.DataFrame([{**c.key, "_i": i} for i, c in enumerate(cells)])
    return [cells[i] for i in sort_cells(frame, groups)["_i"]]


def _n_text(n: float) -> str:
    """``~140`` tasks; ``~inf`` when the observed rates are equal (no size separates them)."""
    if math.isnan(n):
        return "~?"
    return "~inf" if math.isinf(n) else f"~{int(n):,}"


def _pct(rate: float) -> str:
    return f"{100 * rate:.0f}%"


def _method(h: Headline) -> list[str]:
    """The legend: what '>' and '=' mean, the family of tests and the power estimate's level."""
    return [
        "Best planner per cell by completion; '>' separable from it, '=' not separable "
        f"(~n: tasks per cell that would separate it at {POWER:.0%} power, an estimate "
        "taking the observed rates as true).",
        f"Tests: the best vs each other planner on the same tasks, exact sign test, Holm over "
        f"these {h.n_tests} tests (not over every pair of comparisons.csv), alpha {ALPHA}; "
        f"~n at alpha {h.tie_alpha:.2g}, the level Holm tests the next one at.",
    ]


def _cell_label(cell: Cell) -> list[str]:
    return [str(v) for v in cell.key.values()]


def headline_text(h: Headline, out_dir: Path, *, width: int = WIDTH) -> str:
    """The printed lines: where the outputs are, then one line per cell (wrapped under its
    verdicts), or per env when there are more than :data:`GROUP_ABOVE` cells, naming only
    the planners below the best."""
    lines = [
        f"Outputs in {Path(out_dir)}/: summary.md (summary first, then every table), "
        "report.html, figures/"
    ]
    if not h.cells:
        return "\n".join([*lines, "No measured episode: nothing to compare."])
    lines += textwrap.wrap(headline_sentence(h), width)
    lines += [wrapped for text in _method(h) for wrapped in textwrap.wrap(text, width)]
    labels = [_cell_label(c) for c in h.cells]
    if len(h.cells) <= GROUP_ABOVE:
        widths = [max(len(lab[i]) for lab in labels) for i in range(len(labels[0]))]
        best_w = max(len(f"{c.best} {_pct(c.rate)}") for c in h.cells)
        for cell, lab in zip(h.cells, labels, strict=True):
            head = "  ".join(s.ljust(w) for s, w in zip(lab, widths, strict=True))
            head = f"  {head}  {cell.best} {_pct(cell.rate)}".ljust(len(head) + best_w + 4)
            below = [v.planner for v in cell.others if v.separable]
            ties = [
                f"{v.planner}{NBSP}{_n_text(v.tasks_needed)}"
                for v in cell.others
                if not v.separable
            ]  # NBSP: a planner and its ~n stay on one line
            verdicts = [
                *([f">{NBSP}" + ", ".join(below)] if below else []),
                *([f"={NBSP}" + ", ".join(ties)] if ties else []),
            ]
            wrapped = textwrap.wrap(
                "  ".join(verdicts),
                width,
                initial_indent=head + "  ",
                subsequent_indent=" " * (len(head) + 4),
                break_on_hyphens=False,
            )
            lines += [line.replace(NBSP, " ") for line in wrapped] or [head.rstrip()]
        n = sorted({c.n_tasks for c in h.cells})
        tasks = f"{n[0]}" if len(n) == 1 else f"{n[0]}-{n[-1]}"
        lines.append(f"  ({tasks} tasks per cell; the rates are in the table above)")
        return "\n".join(lines)
    by_env: dict[str, list[str]] = {}
    for cell, lab in zip(h.cells, labels, strict=True):
        below = [v.planner for v in cell.others if v.separable]
        text = f"{' '.join(lab[1:])} {cell.best}" + (f" > {', '.join(below)}" if below else "")
        by_env.setdefault(lab[0], []).append(text)
    env_w = max(len(e) for e in by_env)
    for env, texts in by_env.items():
        lines += textwrap.wrap(
            "; ".join(texts),
            width,
            initial_indent=f"  {env.ljust(env_w)}  ",
            subsequent_indent=" " * (env_w + 4),
            break_on_hyphens=False,
        )
    lines.append(
        "  (the planners not named are not separable from the best; summary.md lists them with ~n)"
    )
    return "\n".join(lines)


def headline_markdown(h: Headline) -> list[str]:
    """``summary.md``'s opening section: the same cells as a table, ties with their ~n."""
    rows = []
    for cell in h.cells:
        below = [f"{v.planner} {_pct(v.rate)}" for v in cell.others if v.separable]
        ties = [
            f"{v.planner} {_pct(v.rate)} ({_n_text(v.tasks_needed)})"
            for v in cell.others
            if not v.separable
        ]
        rows.append(
            {
                **{k: str(v) for k, v in cell.key.items()},
                "best (tasks)": f"{cell.best} {_pct(cell.rate)} ({cell.n_tasks})",
                "separable from it": ", ".join(below) or "--",
                "not separable (~n for 80% power)": ", ".join(ties) or "--",
            }
        )
    table = pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True) if rows else ""
    return [
        "## Summary",
        "",
        "Beside this file: `report.html` (the report) and `figures/`; the full tables follow.",
        "",
        f"**{headline_sentence(h)}**" if rows else "",
        "",
        *(_method(h) if rows else ["No measured episode: nothing to compare."]),
        "",
        *([table, ""] if table else []),
    ]


def headline(df: pd.DataFrame, out_dir: Path, *, seed: int) -> str:
    """The lines a job prints after its completion table (``df``: the job's records frame).

    No resampling is involved (exact tests and exact power), so ``seed`` changes nothing; it
    is taken like every table's so a later bootstrap here stays reproducible."""
    del seed
    return headline_text(best_vs_others(df), Path(out_dir))


__all__ = [
    "ALPHA",
    "Cell",
    "Headline",
    "POWER",
    "Versus",
    "best_vs_others",
    "headline",
    "headline_markdown",
    "headline_sentence",
    "headline_text",
]

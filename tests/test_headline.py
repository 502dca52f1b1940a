"""The job's headline (best planner per cell, who is separable from it, ~n for the ties), the
paired power estimate behind ~n (checked against simulated reruns), summary.md's opening
summary, and the default job's size against preset=full."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import CONFIGS
from hydra import compose, initialize_config_dir
from planarena.configs import default_choices, options
from planarena.experiments.analysis.headline import best_vs_others, headline
from planarena.experiments.analysis.power import (
    mcnemar_n_normal,
    sign_test_power,
    tasks_for_power,
)
from planarena.experiments.analysis.stats import holm, sign_test_p
from planarena.experiments.analysis.tables import write_summaries

N = 30


def records(
    outcomes: dict[str, list[int]], env: str = "report", cx: str = "medium"
) -> pd.DataFrame:
    """One episode per planner and task (task i: the i-th outcome), measured records."""
    rows = [
        {
            "planner": planner,
            "env": env,
            "complexity": cx,
            "task_id": f"t{i}",
            "seed": 0,
            "trial": 0,
            "success": bool(s),
            "failure_mode": "" if s else "dead_end",
            "progress": float(s),
            "latency_s": 1.0 + i,
            "cost_usd": 0.001,
            "faults_injected": 0,
            **dict.fromkeys(("tokens_total", "tokens_prompt", "tokens_completion"), 100),
            **dict.fromkeys(("llm_calls", "tool_calls"), 1),
            **dict.fromkeys(("retries", "fallbacks", "replans"), 0),
        }
        for planner, seq in outcomes.items()
        for i, s in enumerate(seq)
    ]
    return pd.DataFrame(rows)


def hand_made() -> pd.DataFrame:
    """strong completes 27 of 30, weak 5 (of strong's 27: 22 discordant, all strong's), twin
    equals strong but for 2 tasks each way (28 of 30 agree)."""
    strong = [1] * 27 + [0] * 3
    weak = [1] * 5 + [0] * 25
    twin = [0, 0] + [1] * 25 + [1, 1, 0]
    return records({"strong": strong, "weak": weak, "twin": twin})


def test_a_clearly_separable_pair_is_separable_and_an_equal_one_is_not() -> None:
    h = best_vs_others(hand_made())
    (cell,) = h.cells
    assert cell.best == "strong" and h.n_tests == 2
    by = {v.planner: v for v in cell.others}
    assert by["weak"].separable and (by["weak"].wins_best, by["weak"].wins_other) == (22, 0)
    twin = by["twin"]
    assert not twin.separable and (twin.wins_best, twin.wins_other) == (2, 2)
    assert math.isinf(twin.tasks_needed)  # equal discordance: no size separates them
    text = headline(hand_made(), Path("/runs/x"), seed=0)
    assert "/runs/x/: summary.md" in text and "report.html" in text and "figures/" in text
    assert "strong 90%" in text and "> weak" in text and "= twin ~inf" in text


def test_a_tie_with_a_difference_reports_more_tasks_than_it_has() -> None:
    strong = [1] * 24 + [0] * 6
    close = [1] * 20 + [0] * 4 + [1] + [0] * 5  # 4 tasks strong's, 1 close's
    h = best_vs_others(records({"strong": strong, "close": close}))
    (v,) = h.cells[0].others
    assert not v.separable and (v.wins_best, v.wins_other) == (4, 1)
    assert N < v.tasks_needed < math.inf
    assert v.tasks_needed == tasks_for_power(4 / N, 1 / N, alpha=0.05)  # one test: alpha itself


def test_the_family_is_best_vs_others_across_cells() -> None:
    """Two cells of three planners: 2 tests each, Holm over the 4 (not every pair: 6)."""
    df = pd.concat([hand_made(), hand_made().assign(complexity="complex")])
    h = best_vs_others(df)
    assert h.n_tests == 4 and [c.key["complexity"] for c in h.cells] == ["medium", "complex"]
    p = [v.p for c in h.cells for v in c.others]
    assert [v.p_holm for c in h.cells for v in c.others] == holm(p)
    assert h.tie_alpha == 0.05 / 2  # two separable, two left: Holm's next level


def test_summary_md_starts_with_the_summary(tmp_path: Path) -> None:
    write_summaries(hand_made(), tmp_path)
    md = (tmp_path / "summary.md").read_text(encoding="utf-8")
    first = md.split("\n## ")[1]
    assert first.startswith("Summary\n") and "report.html" in first and "figures/" in first
    assert "| strong 90% (30)" in first and "weak 17%" in first and "twin 90% (~inf)" in first
    assert md.index("## Summary") < md.index("## Completion rate")


def test_powered_n_on_hand_values() -> None:
    # Connor: (1.96 sqrt(.4) + 0.8416 sqrt(.4 - .04))^2 / .04
    expected = (1.959964 * math.sqrt(0.4) + 0.841621 * math.sqrt(0.36)) ** 2 / 0.04
    assert mcnemar_n_normal(0.3, 0.1) == pytest.approx(expected, rel=1e-5)
    assert math.isinf(mcnemar_n_normal(0.1, 0.1))
    # all-one-way discordance: power = P(D >= 6 discordant tasks), 2 * 0.5**6 < 0.05
    n, p = 12, 0.5
    tail = sum(math.comb(n, d) * p**d * (1 - p) ** (n - d) for d in range(6, n + 1))
    assert sign_test_power(n, 0.5, 0.0) == pytest.approx(tail)
    k = int(tasks_for_power(0.3, 0.1))
    assert sign_test_power(k, 0.3, 0.1) >= 0.8 > sign_test_power(k - 1, 0.3, 0.1)


def simulated_power(n: int, p10: float, p01: float, alpha: float, reruns: int) -> float:
    """Share of reruns (each its own seed) in which Holm over this pair and two clearly
    separated ones separates the pair at alpha, tasks' outcomes drawn as (1,0), (0,1) or
    concordant with probabilities p10, p01 and the rest."""
    hits = 0
    for seed in range(reruns):
        u = np.random.default_rng(seed).random(n)
        wins, losses = int((u < p10).sum()), int(((u >= p10) & (u < p10 + p01)).sum())
        adjusted = holm([1e-9, 1e-9, sign_test_p(wins, losses)])
        hits += adjusted[2] < alpha
    return hits / reruns


@pytest.mark.slow
@pytest.mark.parametrize(("p10", "p01"), [(0.3, 0.1), (0.25, 0.05), (0.5, 0.0)])
def test_predicted_n_separates_the_pair_in_about_80_percent_of_reruns(
    p10: float, p01: float
) -> None:
    # Holm with two separated tests before it: the pair is tested at alpha / 1 (the next level)
    n = int(tasks_for_power(p10, p01, alpha=0.05))
    assert 0.70 <= simulated_power(n, p10, p01, 0.05, 400) <= 0.90


@pytest.mark.slow
def test_predicted_n_at_a_holm_level_of_a_larger_family() -> None:
    alpha = 0.05 / 12  # a tie in a family with 12 tests left, as the headline passes it
    n = int(tasks_for_power(0.2, 0.05, alpha=alpha))
    hits = 0
    for seed in range(400):
        u = np.random.default_rng(1000 + seed).random(n)
        wins, losses = int((u < 0.2).sum()), int(((u >= 0.2) & (u < 0.25)).sum())
        hits += sign_test_p(wins, losses) < alpha
    assert 0.70 <= hits / 400 <= 0.90


def composed(*overrides: str):  # noqa: ANN201 - a DictConfig
    with initialize_config_dir(version_base="1.3", config_dir=str(CONFIGS)):
        return compose(config_name="config", overrides=list(overrides))


def test_default_size_and_preset_full() -> None:
    cfg = composed()
    assert list(cfg.env) == ["report", "research"] and cfg.n_tasks == 20
    assert list(cfg.planner) == default_choices("planner")
    full = composed("preset=full")
    assert cfg.n_tasks == 20 and full.n_tasks == 20
    assert sorted(full.env) == sorted(e for e in options("env") if e != "file")
    assert len(full.env) == 6 and list(full.planner) == list(cfg.planner)
    assert composed("preset=full", "n_tasks=3").n_tasks == 3  # the command line still wins


def test_a_pair_significant_alone_is_not_separable_after_holm() -> None:
    """6 discordant tasks all one way: p = 0.031 alone, 0.062 Holm-adjusted over two cells."""
    one = records({"best": [1] * N, "other": [0] * 6 + [1] * (N - 6)})
    h = best_vs_others(pd.concat([one, one.assign(complexity="complex")]))
    for cell in h.cells:
        (v,) = cell.others
        assert v.p == pytest.approx(0.03125) and v.p_holm == pytest.approx(0.0625)
        assert not v.separable and N < v.tasks_needed < math.inf

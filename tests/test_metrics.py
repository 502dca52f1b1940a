"""analysis.metrics and analysis.stats: every reported number must be recomputable from raw rows."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from planarena.experiments.analysis.cells import COMPLEXITY_ORDER
from planarena.experiments.analysis.comparisons import paired_difference
from planarena.experiments.analysis.metrics import (
    failure_distribution,
    pass_at_k,
    pass_hat_k,
    summarize,
)
from planarena.experiments.analysis.stats import (
    PERCENTILE_METHOD,
    bootstrap_ci,
    derive_seed,
    percentile,
    percentile_stat,
    wilson_interval,
)
from planarena.experiments.records.columns import FAILURE_MODES, SUMMARY_COLUMNS

KEYS = ["planner", "env", "complexity"]


def make_episodes(seed: int = 7, n_trials: int = 5) -> pd.DataFrame:
    """Synthetic episode table; rows deliberately start with 'complex' and planner 'zeta'."""
    rng = np.random.default_rng(seed)
    rows = []
    for planner, base in (("zeta", 0.8), ("alpha", 0.5), ("react", 0.3)):
        for env in ("web", "blocks"):
            for complexity in ("complex", "simple", "medium"):
                for task in range(4):
                    for trial in range(n_trials):
                        success = bool(rng.random() < base)
                        mode = "none" if success else str(rng.choice(FAILURE_MODES))
                        prompt = int(rng.integers(100, 2000))
                        completion = int(rng.integers(10, 500))
                        rows.append(
                            {
                                "planner": planner,
                                "env": env,
                                "complexity": complexity,
                                "task_id": f"{env}-{complexity}-{task}",
                                "seed": 0,
                                "trial": trial,
                                "llm": "mock",
                                "success": success,
                                "progress": 1.0 if success else float(rng.random()),
                                "failure_mode": mode,
                                "tokens_prompt": prompt,
                                "tokens_completion": completion,
                                "tokens_total": prompt + completion,
                                "tokens_planner": prompt // 2,
                                "tokens_executor": completion,
                                "llm_calls": int(rng.integers(1, 10)),
                                "tool_calls": int(rng.integers(0, 20)),
                                "retries": int(rng.integers(0, 3)),
                                "fallbacks": int(rng.integers(0, 2)),
                                "replans": int(rng.integers(0, 3)),
                                "faults_injected": int(rng.integers(0, 3)),
                                "latency_s": float(rng.lognormal(1.0, 0.6)),
                                "cost_usd": float(rng.random() / 100),
                                "wall_s": float(rng.random()),
                            }
                        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- Wilson


def test_wilson_hand_computed() -> None:
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-3)
    assert high == pytest.approx(0.9433, abs=1e-3)


@pytest.mark.parametrize("n", [1, 5, 20, 1000])
def test_wilson_edges_stay_in_unit_interval(n: int) -> None:
    low0, high0 = wilson_interval(0, n)
    assert low0 == 0.0 and 0.0 < high0 <= 1.0
    lown, highn = wilson_interval(n, n)
    assert highn == 1.0 and 0.0 <= lown < 1.0


def test_wilson_empty_and_invalid() -> None:
    assert all(math.isnan(v) for v in wilson_interval(0, 0))
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
    with pytest.raises(ValueError):
        wilson_interval(1, 2, confidence=1.0)


# --------------------------------------------------------------------------- percentile / bootstrap


@pytest.mark.parametrize("q", [0, 1, 25, 50, 90, 99, 100])
def test_percentile_matches_numpy_and_pandas(q: float) -> None:
    values = np.random.default_rng(1).lognormal(size=37)
    assert PERCENTILE_METHOD == "linear"
    assert percentile(values, q) == np.percentile(values, q)
    assert percentile(values, q) == pytest.approx(pd.Series(values).quantile(q / 100), abs=1e-12)
    assert math.isnan(percentile([], 50))


def test_bootstrap_deterministic_and_contains_estimate() -> None:
    values = np.random.default_rng(3).normal(10.0, 2.0, size=50)
    ci1 = bootstrap_ci(values, np.mean, seed=42)
    ci2 = bootstrap_ci(values, np.mean, seed=42)
    assert ci1 == ci2
    assert bootstrap_ci(values, np.mean, seed=43) != ci1
    assert ci1[0] < float(np.mean(values)) < ci1[1]
    # Row-by-row evaluation uses the same resamples as the vectorized path.
    slow = bootstrap_ci(values, np.mean, seed=42, vectorized=False)
    assert slow == pytest.approx(ci1, abs=1e-12)
    p50 = bootstrap_ci(values, percentile_stat(50), seed=42)
    assert p50[0] <= percentile(values, 50) <= p50[1]


def test_bootstrap_edge_cases() -> None:
    assert all(math.isnan(v) for v in bootstrap_ci([], np.mean, seed=0))
    assert bootstrap_ci([2.5], np.mean, seed=0) == (2.5, 2.5)


def test_derive_seed_is_stable() -> None:
    # crc32 is process-independent (unlike hash()); pin the value so it never drifts.
    assert derive_seed(0, "a", "b") != derive_seed(1, "a", "b")
    import zlib

    assert derive_seed(0, "p", "e", "simple", "latency_p50") == zlib.crc32(
        b"0|p|e|simple|latency_p50"
    )


# --------------------------------------------------------------------------- pass@k


def _task_frame() -> pd.DataFrame:
    outcomes = {"t1": [True, False, True, False], "t2": [True]}  # t2 has n=1 < k=2
    rows = [
        {"planner": "p", "env": "e", "complexity": "simple", "task_id": t, "success": s}
        for t, outs in outcomes.items()
        for s in outs
    ]
    return pd.DataFrame(rows)


def test_pass_at_k_and_pass_hat_k_hand_example() -> None:
    df = _task_frame()
    at = pass_at_k(df, 2)
    hat = pass_hat_k(df, 2)
    assert at.loc[0, "pass_at_k"] == pytest.approx(5 / 6)
    assert hat.loc[0, "pass_hat_k"] == pytest.approx(1 / 6)
    assert at.loc[0, "n_tasks"] == 1 and at.loc[0, "n_tasks_excluded"] == 1
    # k=1 reduces to the plain per-task success rate averaged over tasks.
    assert pass_at_k(df, 1).loc[0, "pass_at_k"] == pytest.approx((0.5 + 1.0) / 2)
    assert pass_hat_k(df, 1).loc[0, "pass_hat_k"] == pytest.approx((0.5 + 1.0) / 2)
    with pytest.raises(ValueError):
        pass_at_k(df, 0)


# --------------------------------------------------------------------------- summarize


def test_summarize_matches_direct_recomputation() -> None:
    df = make_episodes()
    summary = summarize(df, seed=0)

    g = df.groupby(KEYS)
    expected = pd.DataFrame(
        {
            "n": g.size(),
            "completion_rate": g["success"].mean(),
            "latency_p50": g["latency_s"].quantile(0.5),
            "latency_p99": g["latency_s"].agg(lambda s: np.percentile(s, 99)),
            "tokens_mean": g["tokens_total"].mean(),
            "cost_mean": g["cost_usd"].mean(),
            "harness_errors": g["failure_mode"].agg(lambda s: int((s == "harness_error").sum())),
        }
    )
    got = summary.set_index(KEYS)
    for col in expected.columns:
        for key, value in expected[col].items():
            assert got.loc[key, col] == pytest.approx(value, rel=1e-12, abs=1e-12), (col, key)

    def closed_form_wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
        p = k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        return centre - half, centre + half

    for rec in summary.to_dict("records"):
        low, high = closed_form_wilson(int(rec["successes"]), int(rec["n"]))
        assert rec["completion_ci_method"] == "task_bootstrap"  # 5 trials per task
        assert rec["completion_ci_low"] <= low + 1e-12 and rec["completion_ci_high"] >= high - 1e-12
        assert rec["n_tasks"] == 4 and rec["trials_max"] == 5
        for q in ("p50", "p99"):
            assert rec[f"latency_{q}_ci_low"] <= rec[f"latency_{q}_ci_high"]
        cell = df[(df[KEYS] == [rec[k] for k in KEYS]).all(axis=1)]
        faulted = cell[cell["faults_injected"] > 0]
        assert rec["n_faulted"] == len(faulted)
        assert rec["recovery_rate_conditional"] == pytest.approx(faulted["success"].mean())


def test_summarize_columns_and_order() -> None:
    df = make_episodes()
    summary = summarize(df)
    prefix = [*KEYS, *SUMMARY_COLUMNS]
    assert list(summary.columns[: len(prefix)]) == prefix
    assert list(summary.columns[len(prefix) :]) == [
        "tokens_planner_mean",
        "tokens_executor_mean",
        "recovery_rate_conditional",
        "n_faulted",
    ]
    assert list(dict.fromkeys(summary["planner"])) == ["zeta", "alpha", "react"]
    for _, cell in summary.groupby(["planner", "env"], sort=False):
        assert list(cell["complexity"]) == list(COMPLEXITY_ORDER)
    ordered = summarize(df, planner_order=["react"])
    assert list(dict.fromkeys(ordered["planner"])) == ["react", "zeta", "alpha"]


def test_summarize_deterministic_and_row_order_invariant() -> None:
    df = make_episodes()
    a = summarize(df, seed=5)
    b = summarize(df, seed=5)
    pd.testing.assert_frame_equal(a, b)
    shuffled = df.sample(frac=1.0, random_state=0).reset_index(drop=True)
    c = summarize(shuffled, seed=5, planner_order=["zeta", "alpha", "react"])
    pd.testing.assert_frame_equal(a, c)


def test_unreachable_is_not_completion_and_roles_default_to_zero() -> None:
    df = make_episodes().head(5).copy()
    df["success"] = False
    df["failure_mode"] = "correctly_reported_unreachable"
    df["faults_injected"] = 0
    df.loc[0, "tokens_planner"] = np.nan
    df = df.drop(columns=["tokens_executor"])
    summary = summarize(df)
    row = summary.iloc[0]
    assert row["successes"] == 0 and row["completion_rate"] == 0.0
    assert math.isnan(row["recovery_rate_conditional"]) and row["n_faulted"] == 0
    assert "tokens_executor_mean" not in summary.columns
    expected = df["tokens_planner"].fillna(0).mean()
    assert row["tokens_planner_mean"] == pytest.approx(expected)


def test_summarize_rejects_non_boolean_success() -> None:
    df = make_episodes().head(3).copy()
    df["success"] = df["success"].astype(object)
    df.loc[0, "success"] = None
    with pytest.raises(ValueError):
        summarize(df)


# --------------------------------------------------------------------------- failures / paired


def test_failure_distribution_rows_sum_to_one() -> None:
    df = make_episodes()
    dist = failure_distribution(df)
    assert list(dist.columns) == ["planner", "n_failed", *FAILURE_MODES]
    shares = dist[list(FAILURE_MODES)]
    assert np.allclose(shares.sum(axis=1), 1.0)
    assert list(dist["n_failed"]) == [
        int((~g["success"]).sum()) for _, g in df.groupby("planner", sort=False)
    ]
    # A group without failures is kept, with NaN shares.
    clean = df.copy()
    clean.loc[clean["planner"] == "zeta", "success"] = True
    zeta = failure_distribution(clean).set_index("planner").loc["zeta"]
    assert zeta["n_failed"] == 0 and shares.columns.size == 10
    assert np.isnan(zeta[list(FAILURE_MODES)].to_numpy(dtype=float)).all()


def _paired_frame() -> pd.DataFrame:
    rows = []
    for i in range(40):
        key = {"env": "e", "complexity": "simple", "task_id": f"t{i % 10}", "trial": i // 10}
        rows.append({**key, "planner": "good", "success": i % 10 != 0})  # 36/40
        rows.append({**key, "planner": "weak", "success": i % 2 == 0})  # 20/40
    rows.append(
        {
            "env": "e",
            "complexity": "simple",
            "task_id": "t99",
            "trial": 0,
            "planner": "good",
            "success": True,
        }
    )  # a task only one planner ran: must be ignored
    return pd.DataFrame(rows)


def test_paired_difference_sign_and_ci() -> None:
    df = _paired_frame()
    res = paired_difference(df, "good", "weak", seed=0)
    # the unit is the task: 10 tasks, each planner's rate over its 4 trials
    # good: t0 0/4, others 4/4; weak: even tasks 4/4, odd 0/4 -> d = -1, 0 x4, +1 x5
    assert res["n_pairs"] == 10
    assert res["mean_diff"] == pytest.approx(0.4)
    assert (res["wins_a"], res["wins_b"]) == (5, 1)
    assert res["p_value"] == pytest.approx(2 * (1 + 6) / 2**6)  # exact sign test by hand
    assert -1.0 <= res["ci_low"] < 0.4 < res["ci_high"] <= 1.0
    assert not res["degenerate"]
    rev = paired_difference(df, "weak", "good", seed=0)
    assert rev["mean_diff"] == pytest.approx(-0.4)
    assert (rev["ci_low"], rev["ci_high"]) == pytest.approx((-res["ci_high"], -res["ci_low"]))
    assert paired_difference(df, "good", "weak", seed=0) == res


def test_paired_difference_rejects_duplicates() -> None:
    df = _paired_frame()
    df = pd.concat([df, df.iloc[[0]]], ignore_index=True)
    with pytest.raises(ValueError):
        paired_difference(df, "good", "weak", seed=0)

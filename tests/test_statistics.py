"""Statistics with the task as the unit, on hand-made record sets whose answer is known.

Every expected number here is computed independently of planarena.experiments.analysis.stats:
closed-form Wilson written out below, hand counts, binomial sums, np.repeat for weighted
percentiles.
"""

from __future__ import annotations

import json
import math
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from planarena.experiments.analysis.cells import cell_keys
from planarena.experiments.analysis.comparisons import paired_difference, pairwise_comparisons
from planarena.experiments.analysis.metrics import consistency_k, pass_at_k, pass_hat_k, summarize
from planarena.experiments.analysis.reliability import recovery_by_fault, robustness
from planarena.experiments.analysis.stats import (
    holm,
    kaplan_meier,
    km_median,
    paired_difference_interval,
    sign_test_p,
    task_bootstrap_percentile,
    task_bootstrap_ratio,
    weighted_percentile_rows,
)
from planarena.experiments.analysis.tables import write_summaries
from planarena.experiments.records.runs import with_swept_columns


def wilson(c: int, n: int) -> tuple[float, float]:
    """Wilson 95% interval, written out from the textbook formula (z = 1.959963984540054)."""
    z = 1.959963984540054
    p = c / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def record(planner: str, task: str, success: bool, **extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "planner": planner,
        "env": "report",
        "complexity": "simple",
        "task_id": task,
        "seed": 0,
        "trial": 0,
        "llm": "sim:strong",
        "faults": "default",
        "success": success,
        "progress": 1.0 if success else 0.0,
        "failure_mode": "none" if success else "dead_end",
        "tokens_prompt": 100,
        "tokens_completion": 10,
        "tokens_total": 110,
        "llm_calls": 1,
        "tool_calls": 1,
        "retries": 0,
        "fallbacks": 0,
        "replans": 0,
        "faults_injected": 0,
        "latency_s": 1.0,
        "cost_usd": 0.01,
    }
    base.update(extra)
    return base


# --------------------------------------------------------------------------- keys with seed


def two_seed_frame() -> pd.DataFrame:
    """Task ids t0..t3 repeat in seeds 0 and 1 (different tasks); one trial each."""
    rows = []
    for seed in (0, 1):
        for i in range(4):
            for planner in ("a", "b"):
                ok = (i + seed) % 2 == 0 if planner == "a" else i == 0
                rows.append(record(planner, f"t{i}", ok, seed=seed))
    return pd.DataFrame(rows)


def test_seed_is_part_of_every_task_key() -> None:
    df = two_seed_frame()
    # one trial per task: pass@2 has no task with two trials, nothing is treated as a trial
    assert pass_at_k(df, 2)["n_tasks"].tolist() == [0, 0, 0, 0]
    assert pass_at_k(df, 1)["n_tasks"].tolist() == [4, 4, 4, 4]
    d = paired_difference(df, "a", "b", seed=0)  # no duplicate-key error across seeds
    assert d["n_pairs"] == 8
    # a succeeds on (s0: t0 t2) (s1: t1 t3) = 4/8; b on t0 of each seed = 2/8
    assert d["rate_a"] == 0.5 and d["rate_b"] == 0.25
    summary = summarize(df)
    assert list(summary.columns[:4]) == ["planner", "env", "complexity", "seed"]
    assert summary["n"].tolist() == [4, 4, 4, 4] and summary["n_tasks"].tolist() == [4, 4, 4, 4]


def test_swept_override_becomes_a_column_and_a_group_key() -> None:
    df = two_seed_frame()
    df = df[df.seed == 0].copy()
    df["overrides"] = ["llm.skill=weak planner=a" if p == "a" else "planner=b" for p in df.planner]
    both = pd.concat(
        [df, df.assign(overrides=df["overrides"].str.replace("weak", "strong"))],
        ignore_index=True,
    )
    both.loc[both.planner == "b", "overrides"] = ["llm.skill=weak planner=b"] * 4 + [
        "llm.skill=strong planner=b"
    ] * 4
    wide = with_swept_columns(both)
    assert set(wide["llm.skill"]) == {"weak", "strong"}
    assert cell_keys(wide) == ["planner", "env", "complexity", "llm.skill"]
    summary = summarize(both)
    assert len(summary) == 4 and set(summary["n"]) == {4}


def test_swept_n_tasks_does_not_clash_with_the_count_column() -> None:
    df = two_seed_frame()
    df = df[df.seed == 0].copy()
    df["overrides"] = ["n_tasks=4" if i < 4 else "n_tasks=8" for i in range(len(df))]
    summary = summarize(df)
    assert "config.n_tasks" in summary.columns and "n_tasks" in summary.columns


# --------------------------------------------------------------------------- task as the unit


def correlated_frame(trials: int = 5) -> pd.DataFrame:
    """10 tasks; trials of a task agree (tasks 0-5 always succeed, 6-9 always fail)."""
    return pd.DataFrame(
        [
            record("a", f"t{i}", i < 6, trial=k, latency_s=float(i + 1))
            for i in range(10)
            for k in range(trials)
        ]
    )


def test_completion_interval_widens_when_trials_are_correlated() -> None:
    summary = summarize(correlated_frame(), seed=3)
    row = summary.iloc[0]
    assert row["completion_ci_method"] == "task_bootstrap"
    assert row["n"] == 50 and row["n_tasks"] == 10 and row["trials_max"] == 5
    low, high = wilson(30, 50)
    assert row["completion_ci_low"] < low - 0.05 and row["completion_ci_high"] > high + 0.05
    # with one trial per task it is Wilson
    single = summarize(correlated_frame(1)).iloc[0]
    assert single["completion_ci_method"] == "wilson"
    assert (single["completion_ci_low"], single["completion_ci_high"]) == pytest.approx(
        wilson(6, 10)
    )


def test_completion_interval_never_narrower_than_wilson_when_trials_disagree() -> None:
    rng = np.random.default_rng(0)
    rows = [
        record("a", f"t{i}", bool(rng.random() < 0.5), trial=k) for i in range(12) for k in range(5)
    ]
    row = summarize(pd.DataFrame(rows), seed=1).iloc[0]
    low, high = wilson(int(row["successes"]), 60)
    assert row["completion_ci_low"] <= low + 1e-12 and row["completion_ci_high"] >= high - 1e-12


def test_weighted_percentile_equals_the_repeated_sample() -> None:
    rng = np.random.default_rng(1)
    values = np.sort(rng.random(9))
    weights = rng.integers(0, 4, size=(6, 9))
    weights[:, 0] += 1  # no empty resample
    for q in (0, 10, 50, 99, 100):
        got = weighted_percentile_rows(values, weights, q)
        want = [np.percentile(np.repeat(values, w), q) for w in weights]
        assert got == pytest.approx(want, rel=1e-12)


def test_task_bootstrap_keeps_trials_together() -> None:
    # two tasks, each with identical latencies: any resample's median is 1, 2 or 1.5
    values = [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]
    tasks = [0, 0, 0, 1, 1, 1]
    low, high = task_bootstrap_percentile(
        values, tasks, 50, rng=np.random.default_rng(0), n_boot=200
    )
    assert low == 1.0 and high == 2.0
    # ratio bootstrap of task sums: resamples can only be 0, 1/2 or 1 of the episodes
    lo, hi = task_bootstrap_ratio([0, 3], [3, 3], rng=np.random.default_rng(0), n_boot=200)
    assert lo == 0.0 and hi == 1.0


def test_bootstrap_memory_is_bounded_at_100k_episodes() -> None:
    rng = np.random.default_rng(0)
    n = 100_000
    values = rng.lognormal(1.0, 0.5, n)
    tasks = np.arange(n) // 5
    tracemalloc.start()
    task_bootstrap_percentile(values, tasks, 99, rng=np.random.default_rng(1), n_boot=200)
    task_bootstrap_ratio(
        np.bincount(tasks, weights=values), np.bincount(tasks), rng=np.random.default_rng(2)
    )
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 150 * 2**20, peak  # 1000 x n index arrays alone would be 800 MB


def test_paired_difference_resamples_tasks_and_flags_degenerate_intervals() -> None:
    rows = []
    for i in range(6):
        for k in range(3):
            rows.append(record("a", f"t{i}", True, trial=k))
            rows.append(record("b", f"t{i}", True, trial=k))
    d = paired_difference(pd.DataFrame(rows), "a", "b", seed=0)
    assert d["n_pairs"] == 6 and d["mean_diff"] == 0.0
    assert (d["ci_low"], d["ci_high"]) == (0.0, 0.0) and d["degenerate"]
    assert d["p_value"] == 1.0


# --------------------------------------------------------------------------- tests, Holm


def test_sign_test_and_holm_by_hand() -> None:
    assert sign_test_p(8, 2) == pytest.approx(2 * (1 + 10 + 45) / 1024)
    assert sign_test_p(0, 5) == pytest.approx(2 / 32)
    assert sign_test_p(0, 0) == 1.0
    assert holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    out = holm([0.02, math.nan])
    assert out[0] == pytest.approx(0.02) and math.isnan(out[1])


def test_pairwise_verdicts_and_holm_family() -> None:
    rows = []
    for i in range(30):
        rows.append(record("strong", f"t{i}", True))
        rows.append(record("weak", f"t{i}", i < 3))
        rows.append(record("twin", f"t{i}", i < 4))
    comps = pairwise_comparisons(pd.DataFrame(rows), seed=0)
    got = {(r["planner_a"], r["planner_b"]): r for r in comps.to_dict("records")}
    sw = got[("strong", "weak")]
    assert (sw["wins_a"], sw["wins_b"]) == (27, 0)
    assert sw["p_value"] == pytest.approx(2 / 2**27)
    assert sw["p_holm"] == pytest.approx(3 * 2 / 2**27) and sw["verdict"] == "better"
    wt = got[("weak", "twin")]
    assert (wt["wins_a"], wt["wins_b"]) == (0, 1) and wt["verdict"] == "no difference"


# --------------------------------------------------------------------------- cost of success


def test_cost_of_success_and_kaplan_meier_by_hand() -> None:
    rows = [
        record("a", "t0", True, tokens_total=100, cost_usd=0.1, latency_s=2.0),
        record("a", "t1", False, tokens_total=10, cost_usd=0.01, latency_s=1.0),
        record("a", "t2", True, tokens_total=300, cost_usd=0.3, latency_s=4.0),
        record("a", "t3", False, tokens_total=20, cost_usd=0.02, latency_s=5.0),
    ]
    row = summarize(pd.DataFrame(rows)).iloc[0]
    assert row["tokens_mean"] == pytest.approx(107.5)
    assert row["successes_tokens_mean"] == pytest.approx(200.0)
    assert row["successes_cost_mean"] == pytest.approx(0.2)
    assert row["cost_per_success"] == pytest.approx(0.43 / 2)
    assert row["successes_latency_p50"] == pytest.approx(3.0)
    # KM: t=2: 3 at risk (t1 censored at 1), 1 event -> 2/3; t=4: 2 at risk -> 1/3
    times, surv = kaplan_meier([2.0, 1.0, 4.0, 5.0], [True, False, True, False])
    assert times.tolist() == [2.0, 4.0] and surv == pytest.approx([2 / 3, 1 / 3])
    assert row["time_to_success_km_median"] == 4.0 == km_median([2, 1, 4, 5], [1, 0, 1, 0])


# --------------------------------------------------------------------------- reliability


def test_recovery_by_exposed_fault_has_one_denominator_per_kind() -> None:
    exposed = ["", "invalid_api_key", "invalid_api_key+password_protected", "password_protected"]
    rows = []
    for i, kinds in enumerate(exposed * 2):
        task = f"t{i}"
        rows.append(record("a", task, i % 2 == 0, exposed_faults=kinds))
        rows.append(record("b", task, True, exposed_faults=kinds))
    rec = recovery_by_fault(pd.DataFrame(rows))
    table = rec.set_index(["planner", "fault"])
    # invalid_api_key exposed in tasks 1, 2, 5, 6 -> a succeeds on 2 and 6; b on all 4
    assert table.loc[("a", "invalid_api_key"), "n"] == 4 == table.loc[("b", "invalid_api_key"), "n"]
    assert table.loc[("a", "invalid_api_key"), "successes"] == 2
    assert table.loc[("b", "invalid_api_key"), "rate"] == 1.0
    assert table.loc[("a", "(none)"), "n"] == 2
    low, high = wilson(2, 4)
    assert table.loc[("a", "invalid_api_key"), "ci_low"] == pytest.approx(low)
    assert table.loc[("a", "invalid_api_key"), "ci_high"] == pytest.approx(high)
    assert recovery_by_fault(pd.DataFrame(rows).drop(columns="exposed_faults")).empty


def test_robustness_pairs_tasks_across_fault_configs() -> None:
    rows = []
    for i in range(10):
        rows.append(record("a", f"t{i}", i < 8, faults="none"))
        rows.append(record("a", f"t{i}", i < 4, faults="default"))
    rob = robustness(pd.DataFrame(rows), seed=0)
    row = rob.iloc[0]
    assert row["n_tasks"] == 10 and row["faults"] == "default"
    assert row["robustness"] == pytest.approx(0.4 / 0.8)
    assert row["ci_low"] < 0.5 < row["ci_high"]
    assert robustness(pd.DataFrame(rows[::2])).empty  # one faults config only


def test_consistency_and_pass_k_by_hand() -> None:
    # task x: 2 of 4 trials succeed; task y: 4 of 4
    rows = [record("a", "x", k < 2, trial=k) for k in range(4)]
    rows += [record("a", "y", True, trial=k) for k in range(4)]
    df = pd.DataFrame(rows)
    # k = 2: x agrees in C(2,2)+C(2,2)=2 of C(4,2)=6 pairs, y always
    assert consistency_k(df, 2)["consistency"].iloc[0] == pytest.approx((2 / 6 + 1) / 2)
    assert pass_hat_k(df, 2)["pass_hat_k"].iloc[0] == pytest.approx((1 / 6 + 1) / 2)
    assert pass_at_k(df, 2)["pass_at_k"].iloc[0] == pytest.approx((1 - 1 / 6 + 1) / 2)


def test_summary_md_has_every_reliability_section(tmp_path: Path) -> None:
    rows = []
    for faults in ("none", "default"):
        for i in range(6):
            for k in range(2):
                kinds = "invalid_api_key" if faults == "default" and i % 2 else ""
                for planner, ok in (("a", i < 5), ("b", i < 2 and faults == "none")):
                    rows.append(
                        record(planner, f"t{i}", ok, trial=k, faults=faults, exposed_faults=kinds)
                    )
    write_summaries(pd.DataFrame(rows), tmp_path)
    md = (tmp_path / "summary.md").read_text()
    for section in (
        "## Robustness",
        "## Consistency",
        "## Recoverability",
        "## Cost of success",
        "## Comparison matrix",
    ):
        assert section in md
    assert "Needs" not in md  # every section has data here
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert set(summary["faults"]) == {"none", "default"}  # swept: never pooled
    assert (tmp_path / "comparisons.csv").exists()


def test_time_from_first_fault_to_next_success_by_hand(tmp_path: Path) -> None:
    from planarena.experiments.analysis.reliability import (
        first_recovery_time,
        read_recovery_times,
        time_to_recover,
    )

    calls = [
        {"t0": 0.0, "t1": 1.0, "ok": True, "injected": False},
        {"t0": 1.0, "t1": 1.5, "ok": False, "injected": True},  # first fault ends at 1.5
        {"t0": 1.5, "t1": 2.0, "ok": False, "injected": True},
        {"t0": 2.0, "t1": 4.0, "ok": True, "injected": False},  # next success ends at 4.0
    ]
    assert first_recovery_time(calls) == 2.5
    assert math.isnan(first_recovery_time(calls[:1]))  # no fault
    assert math.isnan(first_recovery_time(calls[:3]))  # nothing succeeded after it
    run = tmp_path / "run"
    run.mkdir()
    docs = [
        {"planner": "a", "task_id": "t0", "trial": 0, "tool_calls": calls},
        {"planner": "a", "task_id": "t1", "trial": 0, "tool_calls": calls[:1]},  # skipped
        {"planner": "a", "task_id": "t2", "trial": 0, "tool_calls": calls[:3]},
    ]
    (run / "traces.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    times = read_recovery_times([run])
    assert times["task_id"].tolist() == ["t0", "t2"]
    df = pd.DataFrame([record("a", f"t{i}", True, run_dir=str(run)) for i in range(3)])
    table = time_to_recover(df, times).iloc[0]
    assert (table["n_faulted"], table["n_resumed"], table["recover_s_p50"]) == (2, 1, 2.5)


def test_a_wrong_result_is_a_fault_in_both_recovery_tables(tmp_path: Path) -> None:
    """A "200 but wrong" call (ok and injected) is a fault, not a success: time to recover
    runs from its end to the next ok call that was not itself injected, and the Time to
    recover table counts its episode in n_faulted as Conditional recovery does (by the
    record's faults_injected), cell by cell."""
    from planarena.experiments.analysis.reliability import first_recovery_time

    wrong = [
        {"t0": 0.0, "t1": 1.0, "ok": True, "injected": False},
        {"t0": 1.0, "t1": 2.0, "ok": True, "injected": True, "error_kind": "wrong_result"},
        {"t0": 2.0, "t1": 3.0, "ok": True, "injected": True, "error_kind": "wrong_result"},
        {"t0": 3.0, "t1": 5.0, "ok": True, "injected": False},  # the recovery: 5 - 2
    ]
    raised = [
        {"t0": 0.0, "t1": 0.5, "ok": False, "injected": True, "error_kind": "http_503"},
        {"t0": 0.5, "t1": 1.5, "ok": True, "injected": False},
    ]
    clean = [{"t0": 0.0, "t1": 1.0, "ok": True, "injected": False}]
    assert first_recovery_time(wrong) == 3.0
    assert math.isnan(first_recovery_time(wrong[:3]))  # a wrong result does not recover
    run = tmp_path / "run"
    run.mkdir()
    # (planner, task, complexity, trace calls, success); faults_injected = injected calls
    episodes = [
        ("a", "t0", "simple", wrong, True),
        ("a", "t1", "simple", raised, False),
        ("a", "t2", "simple", clean, True),
        ("a", "t3", "medium", wrong[:2], False),  # only a wrong result: faulted, not resumed
        ("a", "t4", "medium", clean, True),
        ("b", "t0", "simple", clean, True),
        ("b", "t1", "simple", wrong, True),
    ]
    docs, rows = [], []
    for planner, task, complexity, calls, ok in episodes:
        docs.append({"planner": planner, "task_id": task, "trial": 0, "tool_calls": calls})
        rows.append(
            record(
                planner,
                task,
                ok,
                complexity=complexity,
                faults_injected=sum(c["injected"] for c in calls),
                run_dir=str(run),
            )
        )
    (run / "traces.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    write_summaries(pd.DataFrame(rows), tmp_path, n_boot=50)
    md = (tmp_path / "summary.md").read_text()

    def n_faulted(section: str, column: str) -> dict[tuple[str, str], int]:
        lines = md.split(f"## {section}\n")[1].split("\n## ")[0].splitlines()
        table = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines if "|" in ln]
        head = table[0]
        return {
            (r[head.index("planner")], r[head.index("complexity")]): int(r[head.index(column)])
            for r in table[2:]
        }

    conditional = n_faulted("Conditional recovery", "faulted episodes")
    assert conditional == {("a", "simple"): 2, ("a", "medium"): 1, ("b", "simple"): 1}
    assert n_faulted("Time to recover", "n_faulted") == conditional


def test_runs_without_overrides_or_exposure_merge_cleanly() -> None:
    df = two_seed_frame()
    df["overrides"] = ["llm.skill=weak" if i < 4 else math.nan for i in range(len(df))]
    assert sorted(set(with_swept_columns(df)["llm.skill"])) == ["", "weak"]
    # records without exposed_faults (older runs) are left out, not counted as unexposed
    df["exposed_faults"] = [math.nan if i % 2 else "" for i in range(len(df))]
    rec = recovery_by_fault(df.drop(columns="overrides"))
    assert rec["n"].sum() == len(df) // 2 and set(rec["fault"]) == {"(none)"}


def test_paired_difference_interval_matches_a_published_example_and_never_pins_itself() -> None:
    """Newcombe's square-and-add interval for paired data on a published table (complete
    response before and after consolidation therapy, 59/6/16/80: estimate -0.0621, 95 % CI
    -0.1186 to -0.0046, Fagerland, Lydersen & Laake 2017, ch. 8), and the two cases where the
    exact conditional interval collapses: no task differs, and every task that differs goes
    one way."""
    low, high = paired_difference_interval(59, 6, 16, 80)
    assert (round(low, 4), round(high, 4)) == (-0.1186, -0.0046)
    low, high = paired_difference_interval(0, 0, 0, 10)  # ten ties: not a certainty of 0
    assert low < -0.2 and high > 0.2 and math.isclose(low, -high)
    low, high = paired_difference_interval(0, 2, 0, 8)  # both discordant pairs favour a
    assert low < 0 < 0.2 < high  # the far end reaches past the estimate
    # a weak positive pairing (ad - bc = 1, at most n / 2) counts as none: the margins' own
    # Wilson distances added in quadrature
    low, high = paired_difference_interval(2, 1, 1, 1)
    w_low, w_high = wilson(3, 5)
    assert high == pytest.approx(math.hypot(0.6 - w_low, w_high - 0.6)) and low == -high
    assert all(math.isnan(x) for x in paired_difference_interval(0, 0, 0, 0))
    with pytest.raises(ValueError):
        paired_difference_interval(1, -1, 0, 0)

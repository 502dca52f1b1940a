"""experiment=sim_vs_real's null profiles, completion per planner and cross-planner hold-out,
with a simulated run standing in for the real one: the nulls appear with their paired
differences; a null that is the fitted profile leaves nothing as evidence; the completion
table says when the real run completes nothing; the hold-out fits only on its planners."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from planarena.experiments.studies.sim_vs_real_config import (
    HOLDOUT_FIT_KEY,
    Settings,
    mirror_into,
    split,
)
from planarena.experiments.studies.sim_vs_real_nulls import STATISTICS, compare_profiles
from planarena.experiments.studies.sim_vs_real_nulls_report import (
    by_profile,
    completion_lines,
    evidence_sentence,
    extras,
)
from planarena.experiments.studies.sim_vs_real_stats import (
    failure_modes,
    tokens_column,
    with_task_key,
)
from test_sim_vs_real import GRID  # the same small grid of real-run planners

from planarena import api

PLANNERS = ["react", "plan_execute_replan", "tot", "topo"]


@pytest.fixture(scope="module")
def weak_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulated run playing the real model (``weak``)."""
    run_dir = tmp_path_factory.mktemp("svr-nulls") / "real-weak"
    api.run([*GRID, "llm.skill=weak"], run_dir=run_dir)
    return run_dir


def compared(out: Path, real_run: Path, *extra: str) -> Path:
    """``experiment=sim_vs_real`` with the fitted profile ``weak`` (the one that made the
    run) and the default nulls (``strong``, ``weak``, ``crude``) unless ``extra`` says."""
    cfg = api.compose(
        [
            "experiment=sim_vs_real",
            f"sim_vs_real.real_run={real_run}",
            "sim_vs_real.profile=weak",
            "sim_vs_real.n_boot=200",
            "sim_vs_real.holdout=null",
            "progress=false",
            "workers=1",
            "figures=false",
            "write_traces=false",
            *extra,
        ]
    )
    mirror_into(cfg)
    api.run(config=cfg, run_dir=out)
    return out


@pytest.fixture(scope="module")
def with_nulls(weak_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compared(tmp_path_factory.mktemp("svr-nulls") / "sim", weak_run)


def test_the_nulls_appear_with_their_paired_differences(with_nulls: Path) -> None:
    md = (with_nulls / "sim_vs_real.md").read_text()
    section = md.split("## Against unfitted profiles (nulls)")[1].split("## ")[0]
    for name in ("strong", "weak", "crude"):
        # one row in the statistics table and one in the paired differences
        assert len(re.findall(rf"^\| {name}: `", section, re.M)) == 2, name
    assert "`strong` with `p_correct` 0.1, `p_malformed` 0.4" in section  # crude, described
    t = pd.read_csv(with_nulls / "sim_vs_real_profiles.csv")
    assert set(t["profile"]) == {"fitted", "strong", "weak", "crude"}
    assert set(t["statistic"]) == set(STATISTICS)
    fitted = t[t["profile"] == "fitted"].set_index("statistic")
    # the fitted profile made the run: tau 1 and distance 0, on every resample
    assert (fitted.loc[["tokens", "calls"], ["value", "lo", "hi"]] == 1.0).all().all()
    assert (fitted.loc["distance", ["value", "lo", "hi"]] == 0.0).all()
    # the null `weak` is the fitted profile itself: paired over the same resamples, every
    # difference is exactly 0 (an unpaired difference would scatter around it)
    weak = t[t["profile"] == "weak"].set_index("statistic")
    for name in ("tokens", "calls", "distance"):
        assert (weak.loc[name, "diff"], weak.loc[name, "diff_lo"], weak.loc[name, "diff_hi"]) == (
            0.0,
            0.0,
            0.0,
        ), name
    # strong is far from a weak model's failure modes: the fitted profile beats it
    strong = t[t["profile"] == "strong"].set_index("statistic")
    assert strong.loc["distance", "diff_hi"] < 0 and bool(strong.loc["distance", "beats"])
    # with a null equal to the fitted profile nothing is evidence for the calibration
    assert not t["evidence_for_calibration"].any()
    assert "**nothing is evidence for the calibration** of the fitted profile" in section
    assert "not clear of `weak`" in section
    # the completion table has a column pair per profile
    comp = pd.read_csv(with_nulls / "sim_vs_real_completion.csv")
    assert set(comp["profile"]) == {"fitted", "strong", "weak", "crude"}
    assert set(comp["planner"]) == set(PLANNERS)


def _comparison(run_dir: Path, real_run: Path, nulls: list[str]):  # noqa: ANN202
    profiles = by_profile(api.load(run_dir))
    real = split(with_task_key(api.load(real_run)), held=True)
    held = {k: split(with_task_key(v), held=True) for k, v in profiles.items()}
    modes = failure_modes({"real": real, **held})
    tokens = tokens_column(real, held["fitted"])
    return compare_profiles(
        real, held, PLANNERS, modes, tokens, tested="fitted", nulls=nulls, seed=0, n_boot=200
    )


def test_the_evidence_sentence_flips_when_a_null_is_the_fitted_profile(
    with_nulls: Path, weak_run: Path
) -> None:
    apart = _comparison(with_nulls, weak_run, ["strong", "crude"])
    assert apart.evidence()["distance"]
    text = evidence_sentence(apart, {}, "fitted profile")
    found = re.search(r"\*\*evidence for the calibration\*\* of the fitted profile: ([^;.]+)", text)
    assert found and "failure-mode distance" in found[1], text
    same = _comparison(with_nulls, weak_run, ["strong", "crude", "weak"])
    assert not any(same.evidence().values())
    text = evidence_sentence(same, {}, "fitted profile")
    assert "**nothing is evidence for the calibration**" in text
    assert "failure-mode distance (not clear of `weak`: +0 [+0, +0] pp)" in text
    none = _comparison(with_nulls, weak_run, [])
    assert not any(none.evidence().values())
    assert "nothing here counts as evidence" in evidence_sentence(none, {}, "fitted profile")


def test_the_difference_is_paired_over_the_same_resamples(with_nulls: Path, weak_run: Path) -> None:
    """Two copies of one profile that is not the real model: each statistic scatters over
    the resamples, yet their difference is 0 on every resample when both are read off the
    same resampled tasks (independent resamples would give an interval around 0)."""
    profiles = by_profile(api.load(with_nulls))
    real = split(with_task_key(api.load(weak_run)), held=True)
    strong = split(with_task_key(profiles["strong"]), held=True)
    sims = {"strong": strong, "again": strong.copy()}
    modes = failure_modes({"real": real, **sims})
    pc = compare_profiles(
        real, sims, PLANNERS, modes, "tokens_total", tested="strong", nulls=["again"], seed=0,
        n_boot=200,
    )  # fmt: skip
    stats = pc.stats.set_index(["profile", "statistic"])
    assert stats.at[("strong", "distance"), "hi"] > stats.at[("strong", "distance"), "lo"]
    diffs = pc.diffs.set_index("statistic")
    for name in ("tokens", "calls", "distance"):
        assert (diffs.at[name, "lo"], diffs.at[name, "hi"]) == (0.0, 0.0), name
        assert not diffs.at[name, "beats"]


def _records(wins: dict[str, int], n_tasks: int = 8) -> pd.DataFrame:
    """Held-out records: planner p completes its first ``wins[p]`` tasks."""
    return pd.DataFrame(
        [
            {
                "planner": p,
                "env": "e",
                "complexity": "simple",
                "task_id": f"e-simple-{2 * i + 1:04d}",
                "success": i < k,
                "failure_mode": "none" if i < k else "malformed_output",
                "tokens_total": 100.0 * (j + 1) + i,
                "llm_calls": float(j + 1),
                "llm": "x",
            }
            for j, (p, k) in enumerate(wins.items())
            for i in range(n_tasks)
        ]
    )


def test_the_completion_table_renders_when_the_real_run_completes_nothing(
    tmp_path: Path,
) -> None:
    s = Settings(tmp_path, "weak", 200, 3, 0.05)
    real = _records({"a": 0, "b": 0, "c": 0})
    sims = {
        "fitted": _records({"a": 0, "b": 0, "c": 0}),
        "other": _records({"a": 3, "b": 0, "c": 1}),
    }
    x = extras(sims, real, ["a", "b", "c"], s, seed=0)
    lines = completion_lines(x)
    assert lines[0].startswith(
        "**No completion in the real run: completion cannot rank planners.**"
    )
    rows = [line for line in lines if line.startswith("| a |") or line.startswith("| b |")]
    assert len(rows) == 2
    # a share of 0 of 8 keeps its Wilson interval; a difference of 0 on every resample is 0
    assert rows[1].startswith("| b | 0 % [0 %, 32 %] | 0 % [0 %, 32 %] | +0 [+0, +0] |")
    assert "| 38 % [14 %, 69 %] | +38 [" in rows[0]  # the other profile's 3 of 8
    csv = x.completion.set_index(["planner", "profile"])
    assert csv.at[("a", "other"), "diff"] == pytest.approx(3 / 8)
    assert csv.at[("b", "fitted"), "diff_lo"] == 0 and csv.at[("b", "fitted"), "diff_hi"] == 0
    # a real run that completes something is a ranking: no such line
    x = extras(sims, _records({"a": 2, "b": 0, "c": 1}), ["a", "b", "c"], s, seed=0)
    assert not any("No completion in the real run" in line for line in completion_lines(x))


@pytest.mark.slow  # two calibration fits of a small sim run: about 20 s
def test_the_holdout_fits_only_on_the_chosen_planners(
    weak_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fit replays only the hold-out's fit planners' episodes (read off the decisions the
    calibration itself receives), and the job predicts the others from that fit."""
    import planarena.experiments.calibrate.calibrate as calibration

    seen: list[str] = []
    original = calibration.decisions

    def watched(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        for d in original(*args, **kwargs):
            seen.append(d.planner)
            yield d

    monkeypatch.setattr(calibration, "decisions", watched)
    out = compared(
        tmp_path / "sim",
        weak_run,
        "sim_vs_real.holdout=planners",
        "sim_vs_real.nulls=[strong]",
    )
    assert seen and set(seen) == {"react"}  # reflexion is not in this run
    md = (out / "sim_vs_real.md").read_text()
    section = md.split("## Cross-planner hold-out")[1].split("## Verdict")[0]
    assert "fitted on react only" in section
    assert "predicts the planners it never saw: plan_execute_replan, tot, topo" in section
    t = pd.read_csv(out / "sim_vs_real_profiles.csv")
    hold = t[t["comparison"] == "holdout_planners"]
    assert set(hold["profile"]) == {"holdout", "fitted", "strong"}
    assert set(hold["planners"]) == {"plan_execute_replan tot topo"}
    assert set(hold[hold["null"].fillna(False).astype(bool)]["profile"]) == {"strong"}
    # the fit travels in the run's config: a report made again plays the same profile
    import json

    block = json.loads((out / "run.json").read_text())["config"]["sim_vs_real"]
    assert block[HOLDOUT_FIT_KEY]["planners"] == ["react"]
    assert block[HOLDOUT_FIT_KEY]["episodes"] > 0
    # the fit with two planners reads both: the filter is the chosen planners, not react
    from planarena.experiments.studies.sim_vs_real_holdout import fit_on_planners

    seen.clear()
    fitted = fit_on_planners(weak_run, ["react", "tot"])
    assert set(seen) == {"react", "tot"} and fitted["planners"] == ["react", "tot"]

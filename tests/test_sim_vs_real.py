"""experiment=sim_vs_real with a simulated run standing in for the real one: against the
profile that made it, the comparison is exact; against a very different one, the failure-mode
gaps point to the mechanisms that differ; the held-out split; a missing real run refused."""

from __future__ import annotations

import itertools
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from planarena.experiments.studies.sim_vs_real import held_out
from planarena.experiments.studies.sim_vs_real_config import Settings, mirror_into, profile_of
from planarena.experiments.studies.sim_vs_real_report import compare, pairs_section, verdict
from planarena.experiments.studies.sim_vs_real_stats import (
    MEAN_ROW,
    MECHANISMS,
    common_tasks,
    completion_gaps,
    failure_distance,
    kendall_tau_b,
    kendall_tau_b_rows,
    on_tasks,
    pair_comparisons,
    tau_with_interval,
)
from planarena.planners.llm.profiles import SKILLS, SkillProfile

from planarena import api

BIN = Path(sys.executable).parent
GRID = [
    "planner=[react,plan_execute_replan,tot,topo]",
    "env=[report]",
    "n_tasks=6",
    "progress=false",
    "workers=1",
    "figures=false",
    "write_traces=false",
]
PRIMARY = {
    "malformed_output": "p_malformed",
    "false_success": "p_miss_signal",
    "hallucinated_tool_call": "w_hallucinate",
    "plan_logic_error": "w_dependency",
    "precondition_unverified": "w_premise",
    "dead_end": "p_trap",
    "gave_up_after_tool_failure": "w_stop",
    "budget_exhausted": "p_correct",
}
"""The simulator field each failure mode is first of all about (docs/simulator.md)."""
ERROR_MODES = (
    "hallucinated_tool_call",
    "plan_logic_error",
    "malformed_output",
    "false_success",
    "precondition_unverified",
)
"""Failure modes a perfect model never makes for a reason of its own."""


def recorded(tmp: Path, skill: str) -> Path:
    """A simulated run playing the real model (``skill``)."""
    run_dir = tmp / f"real-{skill}"
    api.run([*GRID, f"llm.skill={skill}"], run_dir=run_dir)
    return run_dir


def compared(tmp: Path, real_run: Path, profile: str) -> Path:
    """``experiment=sim_vs_real`` against ``real_run`` with ``profile``; the job's overrides
    name none of the real run's settings (they are copied from it)."""
    cfg = api.compose(
        [
            "experiment=sim_vs_real",
            f"sim_vs_real.real_run={real_run}",
            f"sim_vs_real.profile={profile}",
            "sim_vs_real.n_boot=200",
            "sim_vs_real.holdout=null",  # the hold-out: tests/test_sim_vs_real_nulls.py
            "progress=false",
            "workers=1",
            "figures=false",
            "write_traces=false",
        ]
    )
    mirror_into(cfg)
    run_dir = tmp / f"sim-{profile}-vs-{real_run.name}"
    api.run(config=cfg, run_dir=run_dir)
    return run_dir


@pytest.fixture(scope="module")
def weak_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return recorded(tmp_path_factory.mktemp("svr"), "weak")


def table(run_dir: Path) -> pd.DataFrame:
    return pd.read_csv(run_dir / "sim_vs_real.csv")


def tau_of(run_dir: Path) -> tuple[float, float, float]:
    text = (run_dir / "sim_vs_real.md").read_text()
    m = re.search(r"\*\*([+-]\d\.\d\d) \[([+-]\d\.\d\d), ([+-]\d\.\d\d)\]\*\*", text)
    assert m, text[:800]
    return float(m[1]), float(m[2]), float(m[3])


def test_against_the_profile_that_made_the_run_the_comparison_is_exact(
    weak_run: Path, tmp_path: Path
) -> None:
    out = compared(tmp_path, weak_run, "weak")
    t = table(out)
    real = t[t["source"] == "real"].set_index("planner")
    sim = t[t["source"] == "sim"].set_index("planner")
    assert list(real.index) == ["react", "plan_execute_replan", "tot", "topo"]
    cols = ["episodes", "completion", "tokens_mean", "calls_mean", "rank"]
    cols += [c for c in t.columns if c.startswith("share_")]
    pd.testing.assert_frame_equal(real[cols], sim[cols])
    assert real["completion"].nunique() > 1  # a ranking to correlate, not all ties
    assert (real["episodes"] == 3 * 3).all()  # held-out only: tasks 1, 3, 5 of 3 levels
    assert tau_of(out) == (1.0, 1.0, 1.0)
    # the other rankings too: tokens and calls per episode, defined and exact
    for name in ("tokens", "calls"):
        assert (t[[f"tau_{name}", f"tau_{name}_lo", f"tau_{name}_hi"]] == 1.0).all().all(), name
    md = (out / "sim_vs_real.md").read_text()
    assert re.search(
        r"^\| tokens per episode \(`tokens_\w+`\) \| \+1\.00 \[\+1\.00, \+1\.00\]", md, re.M
    )
    assert "ranking of the planners agrees with this model's by completion (exactly" in md
    assert (t["verdict"] == "agrees").all()
    assert "No failure mode's share differs" in (out / "sim_vs_real.md").read_text()
    assert (t["failure_distance"] == 0).all() and (t["failure_p_value"] == 1).all()
    assert "No planner's mix differs beyond chance." in md
    for name in ("sim_vs_real.png", "sim_vs_real-1col.png", "sim_vs_real.pdf"):
        assert (out / "figures" / name).stat().st_size > 1000
    # the job ran the real run's settings, though its overrides named none of them
    sim_records, real_records = api.load(out), api.load(weak_run)
    assert list(dict.fromkeys(sim_records["cell"])) == ["fitted", "strong", "weak", "crude"]
    for _cell, one in sim_records.groupby("cell"):  # every profile: the same episodes
        for key in ("planner", "env", "complexity", "task_id"):
            assert set(one[key]) == set(real_records[key]), key
        assert len(one) == len(real_records)


def _fields(text: str) -> set[str]:
    return {f for f in SkillProfile.model_fields if re.search(rf"\b{f}\b", text)}


def test_every_mapped_mode_names_real_skill_fields() -> None:
    for mode, mechanism in MECHANISMS.items():
        assert _fields(mechanism), f"{mode}: {mechanism} names no SkillProfile field"


@pytest.mark.parametrize(
    ("real_skill", "sim_skill", "sign"), [("weak", "perfect", -1), ("perfect", "weak", +1)]
)
def test_against_a_different_profile_the_gaps_point_to_the_mechanisms_that_differ(
    weak_run: Path, tmp_path: Path, real_skill: str, sim_skill: str, sign: int
) -> None:
    real_run = weak_run if real_skill == "weak" else recorded(tmp_path, real_skill)
    out = compared(tmp_path, real_run, sim_skill)
    text = (out / "sim_vs_real.md").read_text()
    rows = text.split("## Where they disagree")[1].split("## Verdict")[0]
    listed = re.findall(
        r"^\| (\w+) \| `(\w+)` \| (\d+) % \| (\d+) % \| ([+-]\d+) \| (.+) \|$", rows, re.M
    )
    assert listed, rows
    differ = {
        f
        for f in SkillProfile.model_fields
        if getattr(SKILLS["weak"], f) != getattr(SKILLS["perfect"], f)
    }
    errors = [r for r in listed if r[1] in ERROR_MODES]
    assert errors, listed  # a weak model's own mistakes are where the two differ
    for _planner, mode, _real, _sim, gap, mechanism in errors:
        # a perfect simulator makes a weak model's mistakes too rarely, and the reverse
        assert int(gap) * sign > 0, (mode, gap)
        # and the mechanism named is one whose value differs between the two profiles
        assert _fields(mechanism) & differ, (mode, mechanism)
        assert mechanism == MECHANISMS[mode]
        assert re.match(rf"{PRIMARY[mode]}\b", mechanism), (mode, mechanism)
    t = table(out)
    wrong = t[(t["source"] == "sim") & (t["verdict"] != "agrees")]
    assert len(wrong) >= 2  # completion far apart, beyond the paired interval
    assert all(
        v == ("sim under-predicts" if sign > 0 else "sim over-predicts") for v in wrong["verdict"]
    )


def test_held_out_is_index_plus_complexity_rank_odd() -> None:
    assert held_out("report-simple-0003")
    assert not held_out("report-simple-0004")
    assert not held_out("research-complex-0000")
    assert held_out("research-complex-0001")
    assert held_out("report-medium-0000") and not held_out("report-medium-0001")
    assert not held_out("my-family-with-dashes-medium-0011")
    assert [held_out(f"x-{i:04d}") for i in range(6)] == [False, True] * 3  # unknown: rank 0
    # one task per cell: the medium ones are held out, the fit sees simple and complex
    one = [f"report-{c}-0000" for c in ("simple", "medium", "complex")]
    assert [held_out(t) for t in one] == [False, True, False]
    # two or more per cell: every cell splits in half
    for c in ("simple", "medium", "complex"):
        for n in (2, 4, 6):
            assert sum(held_out(f"e-{c}-{i:04d}") for i in range(n)) == n // 2, (c, n)


def test_kendall_tau_b_matches_its_definition_with_ties() -> None:
    def reference(x: list[float], y: list[float]) -> float:
        nc = nd = tx = ty = 0
        for (a, b), (c, d) in itertools.combinations(zip(x, y, strict=True), 2):
            s = np.sign(a - c) * np.sign(b - d)
            nc, nd = nc + (s > 0), nd + (s < 0)
            tx, ty = tx + (a == c), ty + (b == d)
        n0 = len(x) * (len(x) - 1) // 2
        return (nc - nd) / math.sqrt((n0 - tx) * (n0 - ty))

    assert kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == -1.0
    rng = np.random.default_rng(0)
    for _ in range(50):
        x, y = rng.integers(0, 4, 7).tolist(), rng.integers(0, 4, 7).tolist()
        if len(set(x)) > 1 and len(set(y)) > 1:
            assert kendall_tau_b(x, y) == pytest.approx(reference(x, y))
    assert math.isnan(kendall_tau_b([0.5, 0.5, 0.5], [1, 2, 3]))  # no ranking to correlate
    rows = kendall_tau_b_rows(np.array([[1.0, 2, 3], [1, 1, 1]]), np.array([[1.0, 2, 3]] * 2))
    assert rows[0] == 1.0 and math.isnan(rows[1])


def test_a_missing_real_run_is_one_line_and_exit_2_with_nothing_written(tmp_path: Path) -> None:
    run_dir = tmp_path / "out"
    proc = subprocess.run(
        [
            BIN / "planarena",
            "experiment=sim_vs_real",
            f"sim_vs_real.real_run={tmp_path / 'no-such-run'}",
            f"hydra.run.dir={run_dir}",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "no such" in lines[0]
    # refused by the experiment's callback, before Hydra makes the run dir (the study's own
    # check would refuse it too, later, as "study=sim_vs_real: ...")
    assert lines[0].startswith("planarena: sim_vs_real.real_run="), lines[0]
    assert not run_dir.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_config_that_is_not_the_real_runs_is_refused(weak_run: Path, tmp_path: Path) -> None:
    cfg = api.compose(
        ["experiment=sim_vs_real", f"sim_vs_real.real_run={weak_run}", "sim_vs_real.profile=weak"]
    )  # not mirrored: the default planners, envs and tasks
    with pytest.raises(api.RunError, match=r"sim_vs_real: planner is .* in the real run") as err:
        api.run(config=cfg, run_dir=tmp_path / "out")
    assert err.value.exit_status == 2
    assert not (tmp_path / "out" / "episodes.jsonl").exists()


def test_the_default_profile_sits_beside_the_real_run(weak_run: Path, tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match=r"no fitted profile at .*profile\.yaml.*planarena-calibrate"
    ):
        profile_of({}, tmp_path / "run")
    (tmp_path / "profile.yaml").write_text("name: fitted\n")
    assert profile_of({}, tmp_path / "run") == str(tmp_path / "profile.yaml")
    assert profile_of({"profile": "strong"}, weak_run) == "strong"


def _records(
    rates: dict[str, float], n_tasks: int, *, skip: tuple[str, int] | None = None
) -> pd.DataFrame:
    """Synthetic records: planner p succeeds on the first ``rates[p] * n_tasks`` tasks."""
    rows = [
        {
            "planner": p,
            "env": "e",
            "complexity": "simple",
            "task_id": f"e-simple-{2 * i + 1:04d}",
            "success": i < round(rate * n_tasks),
        }
        for p, rate in rates.items()
        for i in range(n_tasks)
        if skip != (p, i)
    ]
    return pd.DataFrame(rows)


def test_a_common_offset_is_a_level_not_a_ranking_error() -> None:
    real = _records({"a": 0.2, "b": 0.5, "c": 0.3}, 40)
    sim = _records({"a": 0.5, "b": 0.8, "c": 0.6}, 40)  # every planner +30 pp
    gaps, level = completion_gaps(real, sim, ["a", "b", "c"], seed=0, n_boot=400)
    assert level["gap"] == pytest.approx(0.3) and level["gap_lo"] > 0
    assert (gaps["verdict"] == "sim over-predicts").all()
    assert (gaps["rel_verdict"] == "in line").all()
    assert gaps["rel_gap"].abs().max() < 1e-12
    tilted = _records({"a": 0.5, "b": 0.8, "c": 0.95}, 40)  # c gains far more than the others
    gaps, _ = completion_gaps(real, tilted, ["a", "b", "c"], seed=0, n_boot=400)
    assert gaps.set_index("planner").at["c", "rel_verdict"] == "sim ranks it too high"


def test_only_tasks_every_planner_ran_in_both_are_compared() -> None:
    real = _records({"a": 0.5, "b": 0.5}, 6, skip=("b", 2))  # a recording cut short
    sim = _records({"a": 0.5, "b": 0.5}, 6)
    tasks = common_tasks({"real": real, "sim": sim}, ["a", "b"])
    assert len(tasks) == 5 and "e/simple/e-simple-0005" not in tasks
    assert set(on_tasks(sim, tasks)["task_id"]) == {
        f"e-simple-{2 * i + 1:04d}" for i in (0, 1, 3, 4, 5)
    }


def _costly(tokens: dict[str, float], n_tasks: int, *, shift: float = 0.0) -> pd.DataFrame:
    """Synthetic held-out records where nothing completes: planner p spends about
    ``tokens[p]`` per episode (varying by task, ``shift`` added) and a tenth as many calls."""
    rows = []
    for p, base in tokens.items():
        for i in range(n_tasks):
            spent = base + 50 * (i % 3) + shift
            rows.append(
                {
                    "planner": p,
                    "env": "e",
                    "complexity": "simple",
                    "task_id": f"e-simple-{2 * i + 1:04d}",
                    "success": False,
                    "failure_mode": "budget_exhausted",
                    "tokens_total": spent,
                    "llm_calls": spent / 10,
                    "progress": 0.0,
                    "llm": "x",
                }
            )
    return pd.DataFrame(rows)


def test_when_nothing_completes_the_token_ranking_is_still_compared(tmp_path: Path) -> None:
    spent = {"a": 1000.0, "b": 3000.0, "c": 2000.0, "d": 5000.0}
    real = _costly(spent, 8)
    sim = _costly(spent, 8, shift=400.0)  # a level offset: the same order
    assert math.isnan(tau_with_interval(real, sim, list(spent), seed=0, n_boot=200)["tau"])
    tok = tau_with_interval(real, sim, list(spent), seed=0, n_boot=200, value="tokens_total")
    assert (tok["tau"], tok["tau_lo"], tok["tau_hi"]) == (1.0, 1.0, 1.0)
    s = Settings(tmp_path, "weak", 200, 3, 0.05)
    c = compare(sim, real, list(spent), s, seed=0)
    assert math.isnan(c.taus["completion"]["tau"]) and c.taus["completion"]["tied"] == "both"
    assert c.taus["tokens"]["tau"] == 1.0 and c.taus["calls"]["tau"] == 1.0
    assert math.isnan(c.taus["progress"]["tau"])  # 0 everywhere: no ranking either
    line = verdict(c)[0]
    assert "ranking of the planners agrees with this model's by tokens per episode" in line
    assert "LLM calls per episode (exactly" in line
    assert re.search(r"Cannot be compared: by completion \(both sources rank", line), line
    reversed_ = _costly({p: 6000.0 - v for p, v in spent.items()}, 8)
    c = compare(reversed_, real, list(spent), s, seed=0)
    assert c.taus["tokens"]["tau"] == -1.0
    assert "ranking agrees with none of this model's" in verdict(c)[0]


def _moded(mixes: dict[str, list[str]], n_tasks: int, seed: int) -> pd.DataFrame:
    """Synthetic records: each planner's episode of each task ends in a mode drawn from its
    list (uniformly; repeat a mode to weight it)."""
    rng = np.random.default_rng(seed)
    rows = [
        {
            "planner": p,
            "env": "e",
            "complexity": "simple",
            "task_id": f"e-simple-{2 * i + 1:04d}",
            "failure_mode": str(rng.choice(modes)),
        }
        for p, modes in mixes.items()
        for i in range(n_tasks)
    ]
    return pd.DataFrame(rows)


def test_the_failure_mode_distance_is_zero_for_one_mix_and_one_for_disjoint_mixes() -> None:
    real = _moded({"a": ["x"], "b": ["x", "y"]}, 10, seed=1)
    same = failure_distance({"real": real, "sim": real}, ["a", "b"], ["x", "y"], seed=0, n_boot=200)
    assert (same["distance"] == 0).all() and (same["p_value"] == 1).all()
    other = _moded({"a": ["y"], "b": ["z"]}, 10, seed=2)
    far = failure_distance(
        {"real": real, "sim": other}, ["a", "b"], ["x", "y", "z"], seed=0, n_boot=200
    ).set_index("planner")
    assert far.at["a", "distance"] == 1.0 and far.at["b", "distance"] == 1.0
    assert far.at[MEAN_ROW, "distance"] == 1.0
    assert (far["distance"] > far["chance_95"]).all() and (far["p_value"] < 0.01).all()


def test_two_samples_of_one_mix_differ_only_by_chance_and_two_mixes_beyond_it() -> None:
    """The chance column is a valid test: samples of one mix (12 tasks, fewer than the
    shipped recording's 18 held out) are rarely beyond it, while two different mixes usually
    are. Without the paired swap, chance would be the observed distance itself and nothing
    would ever count."""
    mix = ["x", "x", "y", "z"]
    false_alarms = power = 0
    trials = 40
    for seed in range(trials):
        real = _moded({"a": mix, "b": mix}, 12, seed=2 * seed)
        sim = _moded({"a": mix, "b": mix}, 12, seed=2 * seed + 1)
        d = failure_distance(
            {"real": real, "sim": sim}, ["a", "b"], ["x", "y", "z"], seed=seed, n_boot=400
        )
        false_alarms += int(d.iloc[-1]["p_value"] <= 0.05)
        shifted = _moded(
            {"a": ["y", "z", "z", "z"], "b": ["y", "y", "y", "z"]}, 12, seed=2 * seed + 1
        )
        d = failure_distance(
            {"real": real, "sim": shifted}, ["a", "b"], ["x", "y", "z"], seed=seed, n_boot=400
        )
        power += int(d.iloc[-1]["p_value"] <= 0.05)
    assert false_alarms <= 0.15 * trials, false_alarms
    assert power >= 0.8 * trials, power


def test_a_real_model_answered_every_role_so_no_role_is_simulated_weaker() -> None:
    """Against a real run every role's error_scale is 1 (the shipped sim config simulates a
    weaker replanner); against a simulated stand-in its own model profiles are kept."""
    from omegaconf import DictConfig, OmegaConf
    from planarena.experiments.studies.sim_vs_real_config import same_roles

    def sim_cfg() -> DictConfig:
        return OmegaConf.create(
            {"llm": {"models": {"default": {"name": "a"}, "replanner": {"error_scale": 1.5}}}}
        )

    cfg = sim_cfg()
    same_roles(cfg, {"llm": {"backend": "openai", "model": "m"}})
    assert [cfg.llm.models[r].error_scale for r in ("default", "replanner")] == [1.0, 1.0]
    cfg = sim_cfg()
    stand_in = {"backend": "sim", "models": {"replanner": {"error_scale": 2.0}}}
    same_roles(cfg, {"llm": stand_in})
    assert OmegaConf.to_container(cfg.llm.models) == {"replanner": {"error_scale": 2.0}}


def test_a_recording_is_compared_on_the_tasks_it_was_made_on() -> None:
    """The shipped recording carries its family files: the simulated side reads them, not
    the shipped families edited since (code_gen's approaches and widths), so a task id
    names the same task on both sides."""
    from hydra.utils import instantiate
    from planarena.envs.family import FamilyEnv

    rec = Path(__file__).parent / "data" / "recordings" / "qwen2.5-coder-0.5b"
    cfg = api.compose(
        ["experiment=sim_vs_real", f"sim_vs_real.real_run={rec / 'run'}",
         "sim_vs_real.profile=strong"]
    )  # fmt: skip
    mirror_into(cfg)
    assert Path(cfg.env.code_gen.path) == (rec / "families" / "code_gen.yaml").resolve()
    mirrored = instantiate(cfg.env.code_gen).generate(5, seed=0, complexity="simple")
    recorded = FamilyEnv(name="code_gen", path=str(rec / "families" / "code_gen.yaml"))
    shipped = FamilyEnv(name="code_gen")
    goals = [t.goal for t in mirrored]
    assert goals == [t.goal for t in recorded.generate(5, seed=0, complexity="simple")]
    assert goals != [t.goal for t in shipped.generate(5, seed=0, complexity="simple")]


def test_the_docs_result_is_rendered_from_its_shipped_run() -> None:
    """docs/sim-vs-real.md's result on the shipped recording is a render of
    docs/data/sim_vs_real/ (one run of the study), never pasted or typed."""
    from planarena.experiments.studies.rendered_docs import pages
    from planarena.experiments.studies.sim_vs_real_docs import SIM_VS_REAL

    page = SIM_VS_REAL.path.read_text(encoding="utf-8")
    assert "<!-- rendered: sim_vs_real -->" in page and "### Verdict" in page
    assert SIM_VS_REAL.render(page) == page
    assert SIM_VS_REAL in pages()


def _completing(done: dict[str, int], n_tasks: int) -> pd.DataFrame:
    """Synthetic records: each planner completes every task (1) or none (0)."""
    rows = [
        {"env": "report", "complexity": "simple", "task_id": f"t{i:02d}", "planner": p,
         "success": bool(v)}
        for i in range(n_tasks)
        for p, v in done.items()
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_each_pair_of_planners_is_right_wrong_or_separated_by_one_source_only() -> None:
    real = _completing({"a": 1, "b": 0, "c": 1, "d": 0}, 30)
    sim = _completing({"a": 0, "b": 1, "c": 1, "d": 0}, 30)
    pairs = pair_comparisons(real, sim, ["a", "b", "c", "d"])
    got = {(r.planner_a, r.planner_b): r.verdict for r in pairs.itertuples()}
    assert got == {
        ("a", "b"): "wrong",  # both separate them, opposite ways
        ("a", "c"): "sim only",
        ("a", "d"): "real only",
        ("b", "c"): "real only",
        ("b", "d"): "sim only",
        ("c", "d"): "right",
    }
    assert set(pairs["real_tasks"]) == {30}
    # 30 tied tasks are not a certainty of no difference: the interval has width either side
    tied = pairs.set_index(["planner_a", "planner_b"]).loc[("a", "c")]
    assert tied["real_diff"] == 0 and tied["real_lo"] < -0.05 and tied["real_hi"] > 0.05
    # a few tasks apart is no separation: 2 of 30 tasks differ
    few = _completing({"a": 0, "b": 0}, 30)
    few.loc[(few["planner"] == "a") & few["task_id"].isin(["t00", "t01"]), "success"] = True
    assert pair_comparisons(few, few, ["a", "b"])["verdict"].tolist() == ["neither"]


def test_a_pairs_interval_end_short_of_zero_never_reads_plus_zero() -> None:
    row = {"planner_a": "a", "planner_b": "b", "real_diff": 0.4, "real_lo": -0.0024,
           "real_hi": 0.68, "real_tasks": 10, "sim_diff": 0.0, "sim_lo": 0.0, "sim_hi": 0.004,
           "verdict": "neither"}  # fmt: skip
    assert "| +40 [-0.2, +68] | +0 [+0, +0.4] |" in "\n".join(pairs_section(pd.DataFrame([row])))


def test_the_simulator_reads_plans_and_grades_answers_as_the_real_run_did() -> None:
    """Grading, the plan revision and the recovery budgets make episodes what they are: the
    simulated side takes the real run's, and a run made before a key existed its value then
    (the 0.5B recording: revision 1, graded by wording), never today's default."""
    from planarena.experiments.studies.sim_vs_real_config import mirrored

    before = mirrored({})
    assert (before["plan_revision"], before["grading"], before["recovery"]) == (
        1,
        "exact",
        "article",
    )
    made = mirrored({"plan_revision": 2, "grading": "facts", "recovery": "equal"})
    assert (made["plan_revision"], made["grading"], made["recovery"]) == (2, "facts", "equal")
    for name, want in (("qwen2.5-coder-0.5b", (1, "exact")), ("qwen2.5-coder-1.5b", (3, "facts"))):
        rec = Path(__file__).parent / "data" / "recordings" / name
        cfg = api.compose(
            ["experiment=sim_vs_real", f"sim_vs_real.real_run={rec / 'run'}",
             "sim_vs_real.profile=strong", "sim_vs_real.holdout=null"]
        )  # fmt: skip
        mirror_into(cfg)
        assert (cfg.plan_revision, cfg.grading) == want, name

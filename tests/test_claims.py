"""Claims get verdicts from the data over the assumption space, never from their wording.

The verdict logic (:mod:`planarena.experiments.claims.verdicts`) on designed differences: a
claim true everywhere holds throughout, false everywhere fails, true on one side of an
assumption holds where that assumption is on that side (the boundary in its own units), and
no difference at all is unresolved. The study runs end to end with a user's claims file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from planarena.experiments.claims.claims import ClaimsError, load_claims, read_claims
from planarena.experiments.claims.verdicts import FAILS, HOLDS, HOLDS_WHERE, UNRESOLVED, Axis, judge
from planarena.experiments.studies.sensitivity import two_level

ROOT = Path(__file__).resolve().parents[1]
AXES = [Axis("max_replans", 1, 20, integer=True), Axis("error_scale", 1.0, 3.0), Axis("x", 0, 1)]


def design() -> np.ndarray:
    """The centre (signs 0) and an 8-run two-level design over three factors."""
    table = two_level(3, 8, seed=0)
    return np.vstack([np.zeros((1, 3)), table]).astype(float)


def tasks_by_cells(per_cell: np.ndarray, n_tasks: int = 60, seed: int = 1) -> np.ndarray:
    """Per-task differences in {-1, 0, 1} whose mean in each cell is about ``per_cell``."""
    rng = np.random.default_rng(seed)
    p_win = np.clip(0.5 + per_cell / 2.0, 0.0, 1.0)
    wins = rng.random((n_tasks, per_cell.size)) < p_win
    return np.where(wins, 1.0, -1.0)


def test_true_everywhere_holds_false_everywhere_fails_nothing_is_unresolved() -> None:
    signs = design()
    cells = signs.shape[0]
    assert judge(tasks_by_cells(np.full(cells, 0.6)), signs, AXES).verdict == HOLDS
    assert judge(tasks_by_cells(np.full(cells, -0.6)), signs, AXES).verdict == FAILS
    flat = np.zeros((60, cells))
    unresolved = judge(flat, signs, AXES)
    assert unresolved.verdict == UNRESOLVED and unresolved.share_holds == 0.0


def test_a_claim_true_on_one_side_of_an_assumption_holds_where_it_is_on_that_side() -> None:
    """The difference is +0.8 where max_replans is low and -0.8 where it is high: the claim
    holds only while max_replans is at most the middle of its range, and that one
    assumption decides it (the others have no effect)."""
    signs = design()
    per_cell = -0.8 * signs[:, 0]  # high max_replans: the claim reverses
    v = judge(tasks_by_cells(per_cell, n_tasks=200), signs, AXES)
    assert v.verdict == HOLDS_WHERE, v
    assert v.deciding() == ["max_replans"]
    (condition,) = v.conditions
    name, op, value = condition.split()
    assert (name, op) == ("max_replans", "<=") and 9 <= float(value) <= 12
    assert 0.3 < v.share_holds < 0.7 and 0.3 < v.share_fails < 0.7


def test_the_shipped_claims_read_and_a_bad_claim_is_one_line(tmp_path: Path) -> None:
    shipped = load_claims()
    assert shipped and all(c.a != c.b for c in shipped)
    bad = tmp_path / "mine.yaml"
    bad.write_text("claims:\n  - {id: c1, statement: s, source: me, a: react, b: react}\n")
    with pytest.raises(ClaimsError) as err:
        read_claims(bad)
    assert str(err.value).startswith(f"{bad}: claim c1: ") and "both react" in str(err.value)
    twice = tmp_path / "twice.yaml"
    twice.write_text(
        f"claims:\n  - {{id: {shipped[0].id}, statement: s, source: me, a: react, b: tot}}\n"
    )
    with pytest.raises(ClaimsError, match="used twice"):
        load_claims([twice])


def test_a_users_claims_file_runs_through_the_study(tmp_path: Path) -> None:
    """``claims.files=[...]`` adds a claims file written outside the repository: the study
    tests it beside the shipped ones and writes its verdict."""
    mine = tmp_path / "my_claims.yaml"
    mine.write_text(
        "claims:\n"
        "  - id: mine_react_over_replan\n"
        "    statement: ReAct completes more than replanning on report tasks\n"
        "    source: my paper draft\n"
        "    a: react\n"
        "    b: plan_execute_replan\n"
        "    population: {env: [report]}\n"
    )
    run = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "planarena.experiments.run.runner", "experiment=claims",
        "planner=[react,plan_execute_replan]", "env=report", "complexity=simple", "n_tasks=2",
        f"claims.files=[{mine}]", "claims.n_boot=200", "progress=false", "figures=false",
        f"hydra.run.dir={run}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_csv(run / "claims.csv")
    row = table[table["claim"] == "mine_react_over_replan"].iloc[0]
    assert row["verdict"] in {HOLDS, HOLDS_WHERE, FAILS, UNRESOLVED}
    assert row["n_tasks"] == 2 and row["source"] == "my paper draft"
    assert (
        "mine_react_over_replan"
        not in (ROOT / "experiments" / "claims" / "claims.yaml").read_text()
    )
    assert "Claims:" in proc.stdout and (run / "claims.md").exists()


def test_the_docs_claims_page_is_rendered_from_the_runs_output() -> None:
    """docs/claims.md is the shipped copy of a default run's output rendered, never typed:
    every verdict it states comes from docs/data/claims/, and every shipped claim has one."""
    from planarena.experiments.studies.claims import DOCS_HEADER, render_results

    data = ROOT / "docs" / "data" / "claims"
    page = (ROOT / "docs" / "claims.md").read_text()
    assert page == DOCS_HEADER + render_results(data)
    table = pd.read_csv(data / "claims.csv")
    assert set(table["claim"]) == {c.id for c in load_claims()}


def test_a_bad_claims_file_stops_the_run_before_any_episode(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("claims:\n  - {id: c1, statement: s, source: me, a: react, b: react}\n")
    cmd = [
        sys.executable, "-m", "planarena.experiments.run.runner", "experiment=claims",
        "planner=[react,plan_execute_replan]", "env=report", "complexity=simple", "n_tasks=1",
        f"claims.files=[{bad}]", f"hydra.run.dir={tmp_path / 'run'}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("planarena:")]
    assert f"{bad}: claim c1:" in line and "Traceback" not in proc.stderr
    assert not (tmp_path / "run" / "episodes.jsonl").exists()


def test_the_confirmatory_stage_runs_each_undecided_claims_corners_on_fresh_tasks(
    tmp_path: Path,
) -> None:
    """A screen's 'holds where' claim is run again at the four corners of its two deciding
    assumptions (the others at their defaults), one paired interval per corner; a claim the
    screen decided is not run again."""
    from planarena.experiments.studies.claims_confirm import confirm_cells, plan

    screen = tmp_path / "screen"
    screen.mkdir()
    pd.DataFrame(
        [
            {"claim": "react_over_replan_4_8", "verdict": HOLDS_WHERE,
             "deciding": "replan_max_replans, replanner_error_scale, p_correct"},
            {"claim": "react_over_replan_long", "verdict": HOLDS, "deciding": "p_correct"},
        ]
    ).to_csv(screen / "claims.csv", index=False)  # fmt: skip
    config = {"claims_confirm": {"screen": str(screen)}}
    assert list(plan(config)) == ["react_over_replan_4_8"]
    cells = confirm_cells(config)
    assert [c.label for c in cells][0] == "defaults" and len(cells) == 5
    assert cells[1].overrides == {
        "planner.plan_execute_replan.max_replans": 1,
        "llm.models.replanner.error_scale": 1.0,
    }
    assert cells[4].overrides == {
        "planner.plan_execute_replan.max_replans": 20,
        "llm.models.replanner.error_scale": 3.0,
    }
    run = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "planarena.experiments.run.runner", "experiment=claims_confirm",
        f"claims_confirm.screen={screen}", "planner=[react,plan_execute_replan]", "env=report",
        "complexity=simple", "n_tasks=3", "claims_confirm.n_boot=200", "progress=false",
        "figures=false", f"hydra.run.dir={run}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_csv(run / "claims_confirmed.csv")
    assert list(table["claim"].unique()) == ["react_over_replan_4_8"]
    assert len(table) == 4 and (table["n_tasks"] == 3).all()
    assert set(table["verdict"]) <= {"holds", "fails", UNRESOLVED}
    assert (table["low"] <= table["mean"]).all() and (table["mean"] <= table["high"]).all()
    assert "Confirmation:" in proc.stdout


def test_the_confirmatory_stage_needs_its_screen(tmp_path: Path) -> None:
    cmd = [
        sys.executable, "-m", "planarena.experiments.run.runner", "experiment=claims_confirm",
        "planner=[react,plan_execute_replan]", "env=report", "complexity=simple", "n_tasks=1",
        f"hydra.run.dir={tmp_path / 'run'}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("planarena:")]
    assert "claims_confirm.screen" in line and "Traceback" not in proc.stderr


def test_no_finding_about_planners_is_typed_by_hand() -> None:
    """Every sentence of the README and docs that compares planners names a registered claim,
    sits on a rendered or quoting page or block, or is on the shrinking list of findings typed
    before this check; a listed sentence no longer in the docs must leave the list."""
    from planarena.experiments.claims.lint import pending, unregistered

    left = {f.key() for f in unregistered(ROOT, (c.id for c in load_claims()))}
    listed = pending()
    assert sorted(left - listed) == [], "register these as claims or render them"
    assert sorted(listed - left) == [], "these are gone from the docs: drop them from the list"


def test_the_findings_check_sees_a_typed_finding_and_accepts_a_registered_one(
    tmp_path: Path,
) -> None:
    from planarena.experiments.claims.lint import findings

    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\nSome prose. ReAct completes more than ToT on long tasks.\n\n"
        "Replanning leads by 9 points (claim `react_over_replan_long`).\n\n"
        "```\nReAct beats ToT in a code block\n```\n\n"
        "<!-- quoted: the article -->\nPlan-and-Execute beats ReAct.\n<!-- /quoted -->\n"
        "| ReAct | wins | a table row |\n"
    )
    found = [(f.line, f.claim) for f in findings(page)]
    assert found == [(3, None), (5, "react_over_replan_long"), (14, None)]

"""Grading by facts (envs/grading.py, ``grading=facts``, the default): an answer that states
the task's facts in its own words completes the task; a wrong, swapped or missing figure, or a
stale one, does not; ``grading=exact`` keeps the answer tool's wording as the only form."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from planarena.envs.grading import Fact, carries, count_carried, normalise, windows
from planarena.envs.report.env import ReportEnv, grade
from planarena.envs.report.world import ReportWorld

ROOT = Path(__file__).resolve().parents[1]
ACME = [Fact("Acme Corp", "revenue", 41.2), Fact("Acme Corp", "profit", 5.3)]
BETA = [Fact("Beta Inc", "revenue", 12.0), Fact("Beta Inc", "profit", 1.1)]


@pytest.mark.parametrize(
    "answer",
    [
        "Acme Corp FY2025: revenue 41.2 B USD; profit 5.3 B USD\n"
        "Beta Inc FY2025: revenue 12.0 B USD; profit 1.1 B USD",
        "Acme Corp's revenue was $41.2 billion in FY2025 and its profit $5.3 billion. "
        "Beta Inc reported revenue of 12 billion and a profit of 1.10 billion.",
        "## Acme Corp\n- Revenue: 41.2\n- Profit: 5.3\n\n"
        "## Beta Inc\n- Revenue: 12.0\n- Profit: 1.1",
        '{"Acme Corp": {"revenue": 41.2, "profit": 5.3}, '
        '"Beta Inc": {"revenue": 12, "profit": 1.1}}',
    ],
)
def test_the_same_facts_in_other_words_are_carried(answer: str) -> None:
    assert count_carried(answer, ACME + BETA) == 4


@pytest.mark.parametrize(
    ("answer", "carried"),
    [
        ("Report sent successfully.", 0),
        ("Acme Corp revenue 5.3, profit 41.2. Beta Inc revenue 12.0, profit 1.1.", 2),  # swapped
        ("Acme Corp revenue 41.9, profit 5.3. Beta Inc revenue 1.1, profit 12.0.", 1),  # wrong
        ("Acme Corp revenue 41.2, profit 5.3. Beta Inc: no figures found.", 2),  # missing
        ("Beta Inc revenue 41.2 and profit 5.3; Acme Corp revenue 12.0, profit 1.1.", 0),
    ],
)
def test_wrong_swapped_or_missing_facts_are_not_carried(answer: str, carried: int) -> None:
    assert count_carried(answer, ACME + BETA) == carried


def test_one_numeric_fact_needs_no_field_word_and_strings_and_booleans_are_read() -> None:
    assert carries("There are 421 units of Widget A left.", Fact("Widget A", "stock", 421))
    assert not carries("Widget A: 420 units.", Fact("Widget A", "stock", 421))
    assert carries("sort_pairs -> C-Sort-Pairs-2", Fact("sort_pairs", "code_id", "c-sort-pairs-2"))
    assert carries("sort_pairs: all tests passed", Fact("sort_pairs", "passed", True))
    assert not carries("sort_pairs: tests failed", Fact("sort_pairs", "passed", True))
    assert normalise("Acme, Inc. — 1,200.5 units!") == "acme inc 1200.5 units"


def test_a_figure_is_read_at_its_written_precision_even_when_whole() -> None:
    """60.0 has one decimal: 60 and 60.0 state it, 60.4 does not (read as the whole number
    60, a stale 60.0 once made the right answer 60.4 a trap)."""
    fact = Fact("Acme", "revenue", 60.0)
    assert carries("Acme revenue 60.0", fact) and carries("Acme: revenue 60 B USD", fact)
    assert not carries("Acme revenue 60.4", fact)
    assert carries("Acme: 421 units", Fact("Acme", "stock", 421))
    assert carries("Acme: 10000000000000000 units", Fact("Acme", "stock", 1e16))  # repr 1e+16


def _report_task():  # noqa: ANN202 - a Task
    """A report task with a stale press release for one of its companies."""
    tasks = ReportEnv().generate(40, seed=0, complexity="simple")
    return next(t for t in tasks if any(b.stale_trap for b in ReportWorld.of(t).branches))


def test_the_report_family_grades_own_words_by_facts_and_the_stale_figure_as_a_trap() -> None:
    task = _report_task()
    branches = ReportWorld.of(task).branches
    own_words = " ".join(
        f"{b.company} had revenue of ${b.revenue} billion and a profit of ${b.profit} billion."
        for b in branches
    )
    assert grade(task, own_words, [], "facts").success
    assert not grade(task, own_words, [], "exact").success  # the tool's wording only
    tool = "\n".join(
        f"{b.company} FY{b.year}: revenue {b.revenue}; profit {b.profit}" for b in branches
    )
    assert grade(task, tool, [], "facts").success and grade(task, tool, [], "exact").success
    b = next(b for b in branches if b.stale_trap)
    stale = own_words.replace(f"revenue of ${b.revenue}", f"revenue of ${b.stale_revenue}")
    result = grade(task, stale, [], "facts")
    assert not result.success and result.trap_in_answer


def test_a_trap_value_in_another_entitys_stretch_is_not_a_trap_in_the_answer() -> None:
    """A stale or decoy figure counts only in its own entity's stretch of the answer: the
    same number stated for another entity is that entity's fact (the graders once read each
    trap over the whole answer and failed right answers)."""
    task = next(
        t
        for t in ReportEnv().generate(40, seed=0, complexity="medium")
        if ReportWorld.of(t).branches[0].stale_trap
    )
    a, b = ReportWorld.of(task).branches
    right = (
        f"{a.company} had revenue of ${a.revenue} billion and a profit of ${a.profit} billion. "
        f"{b.company} had revenue of ${b.revenue} billion and a profit of ${b.profit} billion."
    )
    assert grade(task, right, [], "facts").success
    other = right + f" {b.company}'s revenue two years before was ${a.stale_revenue} billion."
    assert not grade(task, other, [], "facts").trap_in_answer
    own = right + f" {a.company}'s revenue was also reported as ${a.stale_revenue} billion."
    assert grade(task, own, [], "facts").trap_in_answer
    # a family: a stock_check task where one item's decoy stock is another item's real one
    from planarena.envs.family import FamilyEnv
    from planarena.envs.family.oracle import FamilyOracle

    env = FamilyEnv(name="stock_check", path="examples/stock_check.yaml")
    for family_task in env.generate(40, seed=0, complexity="complex"):
        index = env.index(family_task)
        facts = FamilyOracle(env.decl, family_task, index).required_facts()
        shared = [
            d
            for d in env._decoy_facts(index)
            if any(f.value == d.value and f.entity != d.entity for f in facts)
        ]
        if shared:
            break
    assert shared, "no task with a decoy value shared across items: pick another seed"
    answer = "\n".join(f"item: {f.entity}; stock: {f.value}; warehouse: south" for f in facts)
    assert env.grade(family_task, answer, []).success, (family_task.task_id, shared)


def test_the_same_answer_judged_again_beside_other_entities_is_judged_anew() -> None:
    """The grader caches what it reads of an answer (its stretches per entity): a second
    question about the same answer and entity, with other entities named, must not get the
    first one's stretches, nor a verdict that depends on which was asked first."""
    answer = "Acme revenue 41.2. Beta revenue 50.0 and Acme profit 5.3"
    # alone, a mention's stretch runs to the end; beside Beta, it stops where Beta is named
    alone = [
        "acme revenue 41.2 | beta revenue 50.0 and acme profit 5.3",
        " beta revenue 50.0 and acme profit 5.3",
    ]
    beside = ["acme revenue 41.2 | ", "acme profit 5.3"]
    assert windows(answer, "Acme") == alone
    assert windows(answer, "Acme", ["Beta"]) == beside
    assert windows(answer, "Acme") == alone  # and back
    wrong = Fact("Acme", "revenue", 50.0)  # Beta's figure, stated in Beta's stretch
    profit = Fact("Acme", "profit", 5.3)
    assert carries(answer, wrong, [wrong, profit], ["Acme"])  # no Beta named: all of it is Acme's
    assert not carries(answer, wrong, [wrong, profit], ["Acme", "Beta"])
    assert carries(answer, wrong, [wrong, profit], ["Acme"])


def test_the_policy_is_a_checked_key_recorded_in_the_run(tmp_path: Path) -> None:
    base = [
        sys.executable, "-m", "planarena.experiments.run.runner", "planner=react",
        "env=report", "complexity=simple", "n_tasks=1", "progress=false", "figures=false",
    ]  # fmt: skip
    bad = subprocess.run([*base, "grading=loose", f"hydra.run.dir={tmp_path / 'bad'}"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)  # fmt: skip
    assert bad.returncode == 2 and "grading" in bad.stderr and "Traceback" not in bad.stderr
    ok = subprocess.run([*base, "grading=exact", f"hydra.run.dir={tmp_path / 'ok'}"],
                        capture_output=True, text=True, cwd=ROOT, timeout=120)  # fmt: skip
    assert ok.returncode == 0, ok.stderr[-1500:]
    run = json.loads((tmp_path / "ok" / "run.json").read_text())
    assert run["config"]["grading"] == "exact"

"""Search planners size themselves to the episode's token budget (planners/search_support.py
TokenLedger): with a budget a cheaper search fits, bfs, dfs, mcts and tot execute a plan
instead of being cut off mid-search, within the cap; without a budget nothing is measured."""

from __future__ import annotations

import math
from typing import Any

import pytest
from conftest import MODELS, make_planner, tasks
from planarena.envs.report.env import ReportEnv
from planarena.experiments.run.episode import simulate
from planarena.planners.llm.base import Budget, EpisodeLLM
from planarena.planners.llm.profiles import SKILLS
from planarena.planners.search_support import TokenLedger

# the cheapest setting of each search planner: the "cheaper search" a budget must still allow
CHEAPEST: dict[str, dict[str, Any]] = {
    "bfs": {"beam_width": 1, "branching": 1},
    "dfs": {"branching": 1},
    "mcts": {"iterations": 1},
    "tot": {"beam_width": 1},
}


def _run(name: str, task: Any, budget: int | None = None, **knobs: Any) -> tuple[Any, Any]:
    return simulate(
        name,
        make_planner(name, **knobs),
        ReportEnv(),
        task,
        skill=SKILLS["strong"],
        models=MODELS,
        budget=Budget(max_tokens=budget),
    )


def _executed_plan(name: str, trace: dict[str, Any]) -> bool:
    """A plan planner validated a plan and began executing it; dfs ran its chosen actions."""
    if name == "dfs":
        return bool(trace["tool_calls"])
    return any(e.get("event") == "plan" for e in trace["events"])


@pytest.mark.parametrize("name", sorted(CHEAPEST))
def test_a_budget_the_cheapest_search_fits_is_not_cut_off(name: str) -> None:
    """Budget = 1.5 x what the planner's cheapest setting spends without one (per task), and
    at most 3/4 of what the configured search spends (dfs's cheapest setting still asks its
    judge about its one candidate, so costs about as much as the configured one: a search
    without the judge is the cheaper one that fits). The configured search, given that
    budget, executes a plan and stays under the cap; unsized it would spend more (the cap
    binds)."""
    checked = 0
    for task in tasks("complex", n=4):
        cheap, _ = _run(name, task, **CHEAPEST[name])
        if cheap.stop_reason != "answered":
            continue  # the cheapest search itself finds no working plan: nothing to fit
        full, _ = _run(name, task)
        cap = math.ceil(min(1.5 * cheap.tokens_total, 0.75 * full.tokens_total))
        if full.tokens_total <= cap:
            continue  # the configured search fits anyway: no sizing needed
        sized, trace = _run(name, task, budget=cap)
        assert sized.tokens_total <= cap, (name, task.task_id, sized.tokens_total, cap)
        assert sized.stop_reason != "budget" or _executed_plan(name, trace), (
            name,
            task.task_id,
            sized.stop_reason,
            sized.detail,
        )
        checked += 1
    assert checked >= 2, f"{name}: too few tasks where the cap binds ({checked})"


@pytest.mark.parametrize("name", sorted(CHEAPEST))
def test_without_a_budget_nothing_is_measured(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No budget, no ledger: the sizing code is never entered (so the search is the
    configured one, call for call)."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a search measured its costs without a budget")

    monkeypatch.setattr(TokenLedger, "measure", refuse)
    monkeypatch.setattr(TokenLedger, "unit", refuse)
    record, _ = _run(name, tasks("medium", n=1)[0])
    assert record.stop_reason != "harness_error"
    assert record.failure_mode != "harness_error"


def test_the_ledger_exists_only_under_a_token_budget() -> None:
    class _Backend:
        name = "none"

    llm = EpisodeLLM(_Backend(), MODELS)  # type: ignore[arg-type]
    assert TokenLedger.of(llm, horizon=5, reserve_calls=1) is None
    llm = EpisodeLLM(_Backend(), MODELS, budget=Budget(max_tokens=1000))  # type: ignore[arg-type]
    ledger = TokenLedger.of(llm, horizon=5, reserve_calls=1)
    assert ledger is not None and ledger.remaining() == 1000


def test_the_ledger_predicts_from_measured_costs_and_keeps_the_reserve() -> None:
    """unit(): the deepest measured cost plus the measured growth per step; greedy(): the sum
    to the horizon; affords(): width only while the greedy finish and the reserve fit."""

    class _Backend:
        name = "none"

    llm = EpisodeLLM(_Backend(), MODELS, budget=Budget(max_tokens=10_000))  # type: ignore[arg-type]
    ledger = TokenLedger(llm, 10_000, horizon=6, reserve_calls=1)
    ledger.costs["propose"] = {0: 500, 2: 700}  # +100 a step
    ledger.largest_call = 900
    assert ledger.unit("propose", 4) == 900
    assert ledger.unit("judge", 3) == 800  # a judge not yet measured: as a proposal
    assert ledger.greedy(3, 10) == 800 + 900 + 1000  # capped at the horizon (6 steps)
    assert ledger.reserve() == 900
    room = 10_000 - (800 + 900 + 1000) - 900
    assert ledger.affords(room, 3, 10)
    assert not ledger.affords(room + 1, 3, 10)

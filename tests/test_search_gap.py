"""The generator-verifier gap: width pays when, and only when, the judge sees for itself.

A search planner proposes several candidates and keeps what its judge scores best. When the
judge reads the proposer's own belief (``judge_correlation`` 1), it prefers what the proposer
would have written anyway, so width repairs only what a fresh sample does differently by
chance (slips, output the validator rejects). When the judge's view is partly its own and
more often right than the proposer (``judge_accuracy``), width lets it pick a better
candidate the proposer also wrote. These tests hold the other sources of difference still
(no slips, no judge noise, no prompt-length effect, no malformed output, every check
written) so the judge is the only thing that differs.
"""

from __future__ import annotations

from functools import cache

import pytest
from planarena.experiments.run.episode import EpisodeRecord
from planarena.planners.llm.profiles import SKILLS, SkillProfile

from tests.conftest import episode, make_planner, tasks

N = 30
COMPLEXITY = "complex"
QUIET = {
    "judge_accuracy": 0.95,  # the judge on its own is right more often than the proposer
    "sample_diversity": 1.0,
    "p_trap": 0.6,  # the proposer often prefers a locally attractive wrong step
    "p_miss_signal": 0.0,
    "systematic_share": 1.0,  # no sampling slips: every error is a belief
    "evaluator_noise": 0.0,
    "check_coverage": 1.0,
    "p_malformed": 0.0,
    "p_sloppy_json": 0.0,
    "context_scale_tokens": 1e12,  # a longer prompt does not change the belief
}
WIDTH = {  # narrow, wide; no replanning, so the plan the search picks is the one that runs
    "tot": ({"beam_width": 1, "max_replans": 0}, {"beam_width": 3, "max_replans": 0}),
    "bfs": (
        {"beam_width": 1, "branching": 1, "max_replans": 0},
        {"beam_width": 3, "branching": 3, "max_replans": 0},
    ),
}


def skill(correlation: float) -> SkillProfile:
    return SKILLS["strong"].model_copy(update={**QUIET, "judge_correlation": correlation})


@cache
def runs(planner: str, wide: bool, correlation: float) -> tuple[EpisodeRecord, ...]:
    knobs = WIDTH[planner][wide]
    return tuple(
        episode(make_planner(planner, **knobs), task, skill=skill(correlation))[0]
        for task in tasks(COMPLEXITY, n=N)
    )


@pytest.mark.parametrize("planner", sorted(WIDTH))
def test_width_helps_when_the_judge_sees_for_itself(planner: str) -> None:
    narrow, wide = runs(planner, False, 0.2), runs(planner, True, 0.2)
    wins = sum(w.success and not n.success for n, w in zip(narrow, wide, strict=True))
    losses = sum(n.success and not w.success for n, w in zip(narrow, wide, strict=True))
    assert wins >= losses + 3, (planner, wins, losses)


@pytest.mark.parametrize("planner", sorted(WIDTH))
def test_width_changes_nothing_when_the_judge_reads_the_proposers_belief(planner: str) -> None:
    narrow, wide = runs(planner, False, 1.0), runs(planner, True, 1.0)
    for n, w in zip(narrow, wide, strict=True):
        if n.failure_mode in ("plan_logic_error", "malformed_output"):
            continue  # the validator rejected the one candidate: width lets another through
        assert n.success == w.success, (planner, n.task_id, n.failure_mode, w.failure_mode)

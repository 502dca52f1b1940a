"""Search planners: mechanisms that must emerge from what they do, not from constants."""

from __future__ import annotations

from planarena.planners.llm.profiles import SKILLS

from tests.conftest import episode, make_planner, tasks


def test_topo_overlaps_independent_branches_in_simulated_time() -> None:
    pool = tasks("complex", n=12)
    topo = [episode("topo", t)[0].latency_s for t in pool]
    linear = [episode("plan_execute", t)[0].latency_s for t in pool]
    # the same plan with its independent branches overlapped can only be faster, and is
    # strictly faster on a complex task (3-4 independent branches)
    assert all(a < b for a, b in zip(topo, linear, strict=True))
    # the same plan, run sequentially, loses the overlap: parallelism is the only difference
    serial = [episode(make_planner("topo", parallel=False), t)[0].latency_s for t in pool]
    assert serial == linear


def test_parallel_is_an_ablation_switch_not_a_speed_constant() -> None:
    task = tasks("complex", n=1)[0]
    on = episode(make_planner("plan_execute_replan", parallel=True), task)[0]
    off = episode(make_planner("plan_execute_replan", parallel=False), task)[0]
    assert on.success and off.success and on.latency_s < off.latency_s
    assert on.tokens_total == off.tokens_total and on.tool_calls == off.tool_calls


def test_search_planners_record_their_tree_and_roles() -> None:
    task = tasks("medium", n=1)[0]
    for name, roles in {
        "tot": {"planner", "evaluator"},
        "bfs": {"planner", "evaluator"},
        "dfs": {"planner", "evaluator"},
        "mcts": {"planner", "rollout"},
    }.items():
        record, trace = episode(name, task)
        tree = [e for e in trace["events"] if e["event"] == "search_tree"]
        assert len(tree) == 1 and tree[0]["nodes"], name
        node = tree[0]["nodes"][-1]
        assert {"node", "parent", "action", "score", "visits"} <= set(node)
        used = {r for r in ("planner", "evaluator", "rollout") if getattr(record, f"tokens_{r}")}
        assert used == roles, (name, used)


def test_tot_gains_from_a_sharper_judge() -> None:
    """ToT's judge picks among sampled plans. Proposals are keyed by their request, so they
    are identical whatever the judge's noise: only the choice among them differs. With every
    error a sampling slip (systematic_share 0), a noise-free judge picks the plan the model
    believes right, so it completes at least as often as a very noisy one, and more on 40
    tasks where slips are frequent (p_correct 0.85)."""
    pool = tasks("medium", n=40)

    def completed(noise: float) -> int:
        skill = SKILLS["perfect"].model_copy(
            update={"p_correct": 0.85, "systematic_share": 0.0, "evaluator_noise": noise}
        )
        return sum(episode("tot", t, skill=skill)[0].success for t in pool)

    assert completed(0.0) > completed(1.5)


def test_mcts_rollout_optimism_lets_false_plans_through() -> None:
    pool = tasks("medium", n=20)
    honest = SKILLS["strong"].model_copy(update={"rollout_optimism": 0.0})
    dreamy = SKILLS["strong"].model_copy(update={"rollout_optimism": 0.9})
    ok_honest = sum(episode("mcts", t, skill=honest)[0].success for t in pool)
    ok_dreamy = sum(episode("mcts", t, skill=dreamy)[0].success for t in pool)
    assert ok_honest > ok_dreamy

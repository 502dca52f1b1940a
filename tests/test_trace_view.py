"""planarena-trace on a real small run: every format renders, reproducibly, for any planner."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from planarena.experiments.analysis.trace_load import EpisodeTrace, load_trace
from planarena.experiments.analysis.trace_plan import plan_graph
from planarena.experiments.analysis.trace_timeline import assign_lanes
from planarena.experiments.analysis.trace_tree import action_label, search_tree
from planarena.experiments.analysis.trace_view import main, render_episode


@pytest.fixture(scope="module")
def run_dir(small_run_dir: Path) -> Path:
    return small_run_dir


def test_png_pdf_and_html_render_reproducibly(run_dir: Path, tmp_path: Path) -> None:
    """HTML twice (its inline PNG must match byte for byte); PNG and PDF once each."""
    task = "report-medium-0001"
    argv = [str(run_dir), task, "--planner", "plan_execute_replan"]
    outputs = {"a.html": "html", "b.html": "html", "a.png": "png", "a.pdf": "pdf"}
    for name, fmt in outputs.items():
        assert main([*argv, "--format", fmt, "--out", str(tmp_path / name)]) == 0
    assert (tmp_path / "a.html").read_bytes() == (tmp_path / "b.html").read_bytes()
    assert (tmp_path / "a.png").read_bytes().startswith(b"\x89PNG")
    pdf = (tmp_path / "a.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and b"/CreationDate" not in pdf
    page = (tmp_path / "a.html").read_text(encoding="utf-8")
    trace = load_trace(run_dir, task, planner="plan_execute_replan")
    assert page.count('<tr class="ev">') == len(trace.events) > 0
    png = page.split("data:image/png;base64,")[1].split('"')[0]
    assert base64.b64decode(png).startswith(b"\x89PNG")
    assert 'src="http' not in page and "<script" not in page  # self-contained


def test_default_output_goes_under_the_run_dir(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(run_dir), "report-simple-0000", "--planner", "react"]) == 0
    out = Path(capsys.readouterr().out.strip())
    assert out == run_dir / "trace_views" / "report-simple-0000__react__trial0.png"
    assert out.stat().st_size > 0
    # --help names that default as it is (it said <task>__<planner>, without the trial)
    with pytest.raises(SystemExit):
        main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "default: <task>__<planner>__trial<N>.<format> in RUN_DIR/trace_views/" in shown


def test_ambiguous_or_unknown_episodes_exit_with_the_choices(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main([str(run_dir), "report-simple-0000"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--planner react" in err and "--planner mcts" in err
    with pytest.raises(SystemExit):
        main([str(run_dir), "no-such-task"])
    assert "tasks include" in capsys.readouterr().err
    # a planner (or trial) the task did not run with: the ones it ran with, and their trials
    for wrong in (["--planner", "dfz"], ["--planner", "react", "--trial", "1"]):
        with pytest.raises(SystemExit) as exc:
            main([str(run_dir), "report-simple-0000", *wrong])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert f"with {' '.join(wrong)};" in err, err
        ran = "dfs (trial 0); mcts (trial 0); plan_execute_replan (trial 0); react (trial 0)"
        assert f"it ran with: {ran}" in err, err


def test_search_planners_show_their_tree(run_dir: Path) -> None:
    for planner in ("dfs", "mcts"):
        trace = load_trace(run_dir, "report-medium-0001", planner=planner)
        tree = search_tree(trace.events)
        assert tree is not None and tree.number_of_nodes() > 1, planner
        fig = render_episode(trace)
        panels = [ax for ax in fig.axes if ax.get_label() not in ("<colorbar>", "<notes>")]
        assert len(panels) == 3
    react = load_trace(run_dir, "report-medium-0001", planner="react")
    assert search_tree(react.events) is None
    assert len([a for a in render_episode(react).axes if a.get_label() != "<notes>"]) == 2


def _texts(fig: Any) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def test_the_png_says_why_steps_failed_and_which_tools_were_invented() -> None:
    events = [
        {"event": "plan", "steps": [{"id": "s1", "tool": "parse_pdf", "depends_on": []}]},
        {
            "event": "step",
            "id": "s1",
            "tool": "parse_pdf",
            "t0": 0.0,
            "t1": 1.0,
            "ok": False,
            "failure": "postcondition",
            "error_kind": None,
        },
        {"event": "hallucinated_tool", "tool": "fact_check"},
    ]
    calls = [
        {
            "tool": "extract_entities_from_report",
            "args": {},
            "t0": 0.0,
            "t1": 4.0,
            "ok": True,
            "error_kind": None,
            "injected": False,
        },
        {
            "tool": "parse_pdf",
            "args": {},
            "t0": 4.0,
            "t1": 40.0,
            "ok": False,
            "error_kind": "timeout",
            "injected": True,
        },
    ]
    fig = render_episode(EpisodeTrace("plan_execute", "t-1", 0, "", events, calls))
    text = "\n".join(_texts(fig))
    assert "failed: postcondition" in text  # on the failed node of the plan DAG
    assert "s1 (parse_pdf): postcondition" in text  # and in the notes
    assert "parse_pdf at 4.0 s: timeout (injected)" in text
    assert "invented tools (not in the env): fact_check" in text
    # the long name does not fit its bar: a number on the bar, the whole name in the key
    assert "1 = extract_entities_from_report" in text
    assert not [t for t in _texts(fig) if t.endswith(".") or t.startswith("extract_entities_f")]


def test_plan_graph_marks_outcomes_retries_and_replans() -> None:
    steps = [
        {"id": "step_1", "tool": "search_web", "depends_on": []},
        {"id": "step_2", "tool": "parse_pdf", "depends_on": ["step_1"]},
        {"id": "step_3", "tool": "summarize", "depends_on": ["step_2"]},
    ]
    events = [
        {"event": "plan", "steps": steps, "t": 1.0},
        {"event": "retry", "id": "step_1", "t": 2.0},
        {"event": "step", "id": "step_1", "ok": True, "t0": 1.0, "t1": 3.0},
        {"event": "step", "id": "step_2", "ok": False, "t0": 3.0, "t1": 4.0},
        {
            "event": "replan",
            "t": 5.0,
            "steps": [
                {"id": "step_4", "tool": "fetch_filing", "depends_on": ["step_1"]},
                {"id": "step_5", "tool": "summarize", "depends_on": ["step_4"]},
            ],
        },
        {"event": "step", "id": "step_4", "ok": True, "t0": 5.0, "t1": 6.0},
    ]
    g = plan_graph(events)
    status = {n: d["status"] for n, d in g.nodes(data=True)}
    assert status == {
        "step_1": "ok",
        "step_2": "failed",
        "step_3": "not run",
        "step_4": "ok",
        "step_5": "not run",
    }
    assert g.nodes["step_1"]["retries"] == 1 and g.nodes["step_4"]["replan"]
    assert g.edges["step_1", "step_4"]["kind"] == "dep"
    # the replan hangs off the step whose failure triggered it
    assert g.edges["step_2", "step_4"]["kind"] == "replan"
    assert ("step_2", "step_5") not in g.edges  # step_5 depends on a replanned step


def test_overlapping_calls_get_separate_lanes() -> None:
    assert assign_lanes([(0, 2), (2, 3), (1, 4), (1.5, 2.5), (4, 5)]) == [0, 0, 1, 2, 0]
    assert assign_lanes([]) == []


def test_synthetic_search_tree_event_and_action_labels() -> None:
    nodes = [
        {"node": 0, "parent": None, "action": None, "score": None, "visits": 9},
        {
            "node": 1,
            "parent": 0,
            "action": json.dumps({"tool": "search_web"}),
            "score": 0.8,
            "visits": 5,
        },
        {
            "node": 2,
            "parent": 0,
            "action": "ActionTurn(action='parse_pdf')",
            "score": 0.1,
            "visits": 4,
            "pruned": True,
        },
        {"node": 3, "parent": 1, "action": json.dumps({"done": True}), "score": 1.0, "visits": 5},
    ]
    trace = EpisodeTrace("mcts", "t-1", 0, "", [{"event": "search_tree", "nodes": nodes}], [])
    tree = search_tree(trace.events)
    assert tree is not None and sorted(tree.edges) == [("0", "1"), ("0", "2"), ("1", "3")]
    assert action_label(json.dumps({"tool": "summarize_report"})) == "summarize_\nreport"
    assert [action_label(tree.nodes[n]["action"]) for n in "0123"] == [
        "root",
        "search_web",
        "parse_pdf",
        "done",
    ]
    assert action_label(json.dumps({"goal": "g", "steps": [{}, {}]})) == "plan: 2 steps"
    assert len(render_episode(trace).axes) == 4  # plan, timeline, tree, colorbar


def test_mcts_nodes_are_coloured_by_value_else_score_else_visits() -> None:
    from planarena.experiments.analysis.trace_tree import node_value, tree_colour_key

    nodes = [
        {"node": 0, "parent": None, "action": None, "score": None, "visits": 4, "value_sum": 2.0},
        {"node": 1, "parent": 0, "action": "a", "score": None, "visits": 3, "value_sum": 3.0},
        {"node": 2, "parent": 0, "action": "b", "score": None, "visits": 1, "value": 0.25},
    ]
    tree = search_tree([{"event": "search_tree", "nodes": nodes}])
    assert tree is not None and tree_colour_key(tree) == "value"
    assert [node_value(tree.nodes[n]) for n in "012"] == [0.5, 1.0, 0.25]
    visits_only = [{k: v for k, v in n.items() if k not in ("value", "value_sum")} for n in nodes]
    tree = search_tree([{"event": "search_tree", "nodes": visits_only}])
    assert tree is not None and tree_colour_key(tree) == "visits"
    trace = EpisodeTrace("mcts", "t", 0, "", [{"event": "search_tree", "nodes": nodes}], [])
    fig = render_episode(trace)
    tree_ax = next(ax for ax in fig.axes if "search tree" in ax.get_title(loc="left"))
    assert "colour = value (mean reward), size = visits" in tree_ax.get_title(loc="left")
    colours = {tuple(c) for coll in tree_ax.collections for c in coll.get_facecolors()}
    assert len(colours) == 3  # three values, three colours (none grey)


def test_sweep_choices_name_each_jobs_overrides(tmp_path: Path) -> None:
    for job, seed in (("0", 0), ("1", 1)):
        d = tmp_path / job
        (d / ".hydra").mkdir(parents=True)
        (d / ".hydra" / "overrides.yaml").write_text(f"- planner=react\n- seed={seed}\n")
        doc = {"planner": "react", "task_id": "t-1", "trial": 0, "events": [], "tool_calls": []}
        (d / "traces.jsonl").write_text(json.dumps(doc) + "\n")
    with pytest.raises(LookupError) as exc:
        load_trace(tmp_path, "t-1")
    message = str(exc.value)
    assert "[job: planner=react seed=0]" in message and "[job: planner=react seed=1]" in message
    assert "give that job's dir as RUN_DIR" in message
    assert load_trace(tmp_path / "1", "t-1").planner == "react"  # one planner: picked alone

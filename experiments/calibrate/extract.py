"""The proposer side's extractors: what a model did at each decision point of a request that
asks it to act or to plan (``act``, ``propose_actions``, ``plan``, ``revise_plan``,
``propose_steps``), and whether its output could be read.

A decision's answer is parsed with the planners' own parsers and classified against the
options the oracle view enumerates. Where the answer alone does not say how the model read
the observations (a subtle warning sign taken at face value or not), or whether a plan started
on the attractive wrong line, every reading is kept as a *branch* of the decision, each with
what the answer means under it: the likelihood (:mod:`.fit`) sums over them.

Rows (``quantity``):

- ``choice``: one choice of one branch of one decision unit (``unit``, ``branch``,
  ``ctype`` action / step / line / persist, ``avail`` the options on offer, ``matches`` the
  options the answer is, ``n_subtle`` / ``n_missed`` the reading);
- ``malformed`` (``format`` action, candidates, plan_json, replan_json, steps_json),
  ``sloppy_json``, ``malformed_text``, ``sloppy_text``: 0/1 per answer;
- ``prose_condition``: 0/1 per condition a freshly written plan carries (1: words, no
  expression);
- ``restart_ids``: 0/1 per freshly written plan whose request shows step ids (1: its steps
  numbered from below the first free number, as if nothing had run);
- ``invented_fallback``: 0/1 per step of a freshly written plan (1: its fallback names a tool
  the catalogue lacks, a placeholder or an invented name, which the plan reader refuses);
- ``answer_garbled``: 0/1 per final answer the model wrote itself (a finish with status
  success, first asking) after the answer tool had returned a result carrying the task's
  facts (1: the written answer does not carry them all, by the env's fact grading);
- ``right_move``, ``trap``, ``persist``, ``miss_signal``: descriptive 0/1 rates for the report
  (the attentive reading's classification; the fits use ``choice`` rows).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from planarena.envs.family.oracle import FamilyOracle
from planarena.envs.grading import count_carried
from planarena.envs.oracle import GoldStep, Obs, Oracle
from planarena.envs.rag.env import grade as rag_grade
from planarena.envs.rag.oracle import RagOracle
from planarena.envs.report.env import grade as report_grade
from planarena.envs.report.oracle import ReportOracle
from planarena.experiments.calibrate.oracle_view import ActionPoint, OracleView
from planarena.experiments.calibrate.registry import Decision, Row, register_extractor
from planarena.planners.conditions import is_expression
from planarena.planners.executor import MALFORMED_REASONS
from planarena.planners.formats import (
    FINISH,
    PLAN_REVISION,
    OutputParseError,
    dumps,
    parse_action_turn,
    parse_candidates,
    parse_step_candidates,
)
from planarena.planners.llm.protocol import RequestKind
from planarena.planners.llm.sim_decider import Decider
from planarena.planners.llm.sim_reading import step_core
from planarena.planners.plan import PlanError, parse_plan, read_condition, tool_as_read
from planarena.planners.plan_model import canonical_step_id
from planarena.planners.plan_prose import load_prose
from planarena.planners.plan_text import load_json

_units = itertools.count()


def _sep(kinds: Sequence[str]) -> str:
    return ",".join(sorted(set(kinds)))


def fresh(d: Decision) -> bool:
    """A first sample with no critique in view: what the proposer's belief alone decides (a
    repeated prompt may take the runner-up, ``sample_diversity``; a critique may correct the
    belief, ``reflection_gain``: both are other fits' business)."""
    return d.occurrence == 0 and not (d.context is not None and d.context.reflections)


# --- actions ---------------------------------------------------------------------------------


def _action_rows(d: Decision, tool: str, args: Any) -> list[Row]:
    """The branches of one action decision: one per reading of the subtle observations."""
    view = d.view
    obs = view.transcript(d.context.observations or ()) if d.context else []
    subtle = view.subtle_keys(obs)
    unit = next(_units)
    rows: list[Row] = []
    attentive: tuple[ActionPoint, str] | None = None
    for b, reading in enumerate(view.readings(subtle)):
        point = view.action_point(obs, reading)
        if len(point.options) < 2 and b == 0 and len(subtle) == 0:
            return []  # one option only (the work is done): nothing was decided
        matches = [k for k, (t, a) in point.options.items() if t == tool and a == args]
        if not matches:
            matches = [view.action_kind(tool, args, point)]
        if b == 0:
            attentive = (point, matches[0])
        rows.append(
            d.row(
                "choice", _sep(matches), unit=unit, branch=b, ctype="action",
                avail=_sep(point.options), matches=_sep(matches),
                n_subtle=min(len(subtle), 3), n_missed=len(reading),
            )
        )  # fmt: skip
    assert attentive is not None
    point, kind = attentive
    rows.append(d.row("right_move", int(kind == "right"), ctype="action"))
    if "trap" in point.options:
        rows.append(d.row("trap", int(kind == "trap"), ctype="action"))
    if "persist" in point.options:
        rows.append(d.row("persist", int(kind == "persist"), ctype="action"))
    if subtle:
        missed = any(
            r["branch"] > 0 and r["matches"] == "right"
            for r in rows
            if r.get("quantity") == "choice"
        )
        rows.append(d.row("miss_signal", int(missed and kind != "right"), ctype="action"))
    return rows


def extract_act(d: Decision) -> list[Row]:
    """An ``act`` turn: whether it parsed, and what it chose."""
    try:
        turn = parse_action_turn(d.text)
    except OutputParseError:
        return [d.row("malformed", 1, format="action")]
    rows = [d.row("malformed", 0, format="action")]
    rows += answer_garbled_rows(d, turn.action, turn.action_input)
    if fresh(d):
        rows += _action_rows(d, turn.action, turn.action_input)
    return rows


def extract_propose_actions(d: Decision) -> list[Row]:
    """``propose_actions``: the first candidate is a sample of the belief, like an ``act``."""
    turns = parse_candidates(d.text)
    if not turns:
        return [d.row("malformed", 1, format="candidates")]
    rows = [d.row("malformed", 0, format="candidates")]
    rows += answer_garbled_rows(d, turns[0].action, turns[0].action_input)
    if fresh(d):
        rows += _action_rows(d, turns[0].action, turns[0].action_input)
    return rows


# --- final answers the model writes ----------------------------------------------------------


def carries_facts(oracle: Oracle, answer: str) -> bool | None:
    """Whether ``answer`` carries every fact its task asks for, by the env's fact grading
    (``grading=facts``, whatever the run graded by; a decoy's figure beside them aside).
    None: an env whose grading this does not know (a plugin's): no row."""
    if isinstance(oracle, FamilyOracle):
        facts = oracle.required_facts()
        return count_carried(answer, facts) == len(facts)
    if isinstance(oracle, ReportOracle):
        return report_grade(oracle.task, answer, (), "facts").progress >= 1.0
    if isinstance(oracle, RagOracle):
        return rag_grade(oracle.task, answer, (), "facts").progress >= 1.0
    return None


def answer_garbled_rows(d: Decision, tool: str, args: Any) -> list[Row]:
    """One 0/1 row for a final answer the model wrote itself (a finish with status success,
    as the ReAct loop reads one: no status is success) where the answer tool had already
    returned a result carrying the task's facts (the oracle's ``answer``): 1 when the written
    answer does not carry them all. A prompt asked again is left out (its answer is the
    first asking's, or a fresh sample of it: ``p_same_answer``'s business)."""
    if tool != FINISH or not isinstance(args, dict) or d.occurrence > 0 or d.context is None:
        return []
    answer = str(args.get("answer", "") or "")
    if str(args.get("status", "success")).lower() != "success" or not answer:
        return []
    obs = d.view.transcript(d.context.observations or ())
    if d.view.oracle.answer(obs) is None:
        return []
    carried = carries_facts(d.view.oracle, answer)
    return [] if carried is None else [d.row("answer_garbled", int(not carried))]


# --- plans -----------------------------------------------------------------------------------


def step_matches(
    view: OracleView, step: Any, g: GoldStep, ids: dict[str, str], tools: frozenset[str]
) -> list[str]:
    """The kinds of step the simulator could have written at ``g`` that are the written
    ``step`` (several when they coincide: a guessed argument with nothing to guess is the
    right step); ``other`` when none is."""
    if not isinstance(step, dict):
        return ["other"]
    if step.get("done"):
        return ["stop"]
    rendered = view.render(g, ids)
    core = step_core(step)
    right = step_core(rendered)
    cores = {
        "right": right,
        "premise": step_core({**rendered, "args": view.mind.guess(g.args)}),
        "dependency": (right[0], right[1], ()),
    }
    if g.trap is not None:
        cores["trap"] = step_core(view.render(g.trap, ids))
    found = [k for k, c in cores.items() if c == core]
    if "right" in found:
        found.append("unchecked")  # a right step's checks are check_coverage's business
    if step.get("tool") not in tools:
        found.append("invented")
    return found or ["other"]


def step_avail(g: GoldStep, step: Any) -> list[str]:
    """The step options the simulator offers at ``g`` (``Decider._step_options``), with
    ``unchecked`` where the written step shows the model writes a check there."""
    options = ["right", "invented", "premise", "stop", "dependency", "unchecked"]
    if g.trap is not None:
        options.append("trap")
    if not g.deps:
        options.remove("dependency")
    if not (isinstance(step, dict) and step.get("post_conditions")):
        options.remove("unchecked")
    return options


def _steps_rows(
    d: Decision, unit: int, branch: int, view: OracleView, gold: Sequence[GoldStep],
    steps: Sequence[Any], first: int, persisted: bool, covariates: dict[str, Any],
) -> list[Row]:  # fmt: skip
    """The step choices of one branch: step i against gold step i, the plan ending early
    a ``stop`` at its end, a persisted first step standing for whatever was sampled there."""
    ids = {g.key: f"step_{first + i}" for i, g in enumerate(gold)}
    tools = view.tool_names()
    rows = []
    for i, g in enumerate(gold):
        step = steps[i] if i < len(steps) else {"done": True}
        if i == 0 and persisted:
            continue  # written in place as the failed call: the sample is not seen
        matches = step_matches(view, step, g, ids, tools)
        avail = step_avail(g, step)
        rows.append(
            d.row(
                "choice", _sep(matches), unit=unit, branch=branch, ctype="step",
                avail=_sep(avail), matches=_sep(matches), **covariates,
            )
        )  # fmt: skip
        if i >= len(steps):
            break
    return rows


def read_plan(
    text: str, plan_format: str, tools: Iterable[str], revision: int = PLAN_REVISION
) -> tuple[list[Any] | None, bool]:
    """(the raw steps, or None when the planner cannot use the text: no reader loads it, or
    the planner's parser refuses it as malformed; whether it was repaired)."""
    if planner_refuses(text, tools, plan_format, revision):
        return None, False
    notes: list[str] = []
    try:
        if plan_format == "text":
            data, repaired = load_prose(text, notes, revision=revision)
        else:
            data, repaired = load_json(text, notes)
    except PlanError as err:
        if err.reason == "empty_plan":
            return [], False
        return None, False
    steps = data.get("steps") if isinstance(data, dict) else None
    if not isinstance(steps, list):
        return None, False
    known = frozenset(tools)
    return [as_read(s, known) for s in steps], bool(repaired or notes)


def as_read(step: Any, tools: frozenset[str]) -> Any:
    """A written step with its tool as the plan parser reads it (a tool written as its
    signature line is that tool, :func:`~planarena.planners.plan.tool_as_read`)."""
    if not isinstance(step, dict):
        return step
    read = tool_as_read(step.get("tool"), tools)
    return step if read == step.get("tool") else {**step, "tool": read}


def extract_plan(d: Decision) -> list[Row]:
    """A whole plan (``plan``, ``revise_plan``): whether it parsed in its format (and was
    repaired), and per reading x start on the wrong line x persisted failed call, what each
    step was."""
    ctx = d.context
    fmt = ctx.plan_format if ctx is not None else "json"
    steps, sloppy = read_plan(d.text, fmt, d.view.tool_names(), d.plan_revision)
    if fmt == "text":
        rows = [d.row("malformed_text", int(steps is None), format="plan_text")]
        if steps is not None:
            rows.append(d.row("sloppy_text", int(sloppy), format="plan_text"))
    else:
        own = "replan_json" if d.kind == RequestKind.REVISE_PLAN else "plan_json"
        rows = [d.row("malformed", int(steps is None), format=own)]
        if steps is not None:
            rows.append(d.row("sloppy_json", int(sloppy), format="plan_json"))
    if steps is None or (ctx is not None and ctx.plan is not None):
        return rows  # a revision of a candidate plan keeps steps: not freshly written
    rows += prose_condition_rows(d, steps, "plan_text" if fmt == "text" else "plan_json")
    rows += restart_rows(d, steps, "plan_text" if fmt == "text" else "plan_json")
    rows += invented_fallback_rows(d, steps, "plan_text" if fmt == "text" else "plan_json")
    if not fresh(d):
        return rows
    return rows + _plan_rows(d, steps)


def planner_refuses(
    text: str, tools: Iterable[str], plan_format: str, revision: int = PLAN_REVISION
) -> bool:
    """Whether the planner's own parser refuses ``text`` as malformed output (the executor's
    :data:`MALFORMED_REASONS`: a step with no tool, an id that is not one). The fit reads an
    answer as the planner does, so a plan the planner cannot use is malformed here too, as the
    simulator's malformed draw is; a plan that parses with a logic error is not."""
    try:
        parse_plan(text, tools, plan_format=plan_format, revision=revision)
    except PlanError as err:
        return err.reason in MALFORMED_REASONS
    return False


def prose_condition_rows(d: Decision, steps: list[Any], fmt: str) -> list[Row]:
    """One 0/1 row per pre- or post-condition the plan's steps carry: 1 when it is no
    expression the executor can evaluate (written in words)."""
    rows = []
    for step in steps:
        if not isinstance(step, dict):
            continue
        for field in ("pre_conditions", "post_conditions"):
            written = step.get(field) or []
            for condition in written if isinstance(written, list) else [written]:
                read = read_condition(condition, d.plan_revision)
                prose = int(not is_expression(read))
                rows.append(d.row("prose_condition", prose, format=fmt))
    return rows


def invented_fallback_rows(d: Decision, steps: list[Any], fmt: str) -> list[Row]:
    """One 0/1 row per written step: 1 when it names a fallback the catalogue lacks (a
    placeholder such as ``{{step_1.result.item_id}}``, an invented ``get_stock_backup``)."""
    tools = frozenset(d.view.tool_names())
    rows = []
    for step in steps:
        if isinstance(step, dict):
            fallback = step.get("fallback")
            invented = isinstance(fallback, str) and fallback not in tools
            rows.append(d.row("invented_fallback", int(invented), format=fmt))
    return rows


def free_number(d: Decision, obs: list[Obs] | None = None) -> int:
    """The first step number after every id the request shows (1: it shows none); ``obs``:
    the execution log, where the caller has read it already."""
    if d.context is None:
        return 1
    if obs is None:
        obs, _ = d.view.execution_log(d.context.observations or ())
    return Decider._first_free_number(obs, d.context)  # noqa: SLF001


def written_number(steps: Sequence[Any]) -> int | None:
    """The number of a written plan's first step id (None: no step, or no readable id)."""
    head = steps[0] if steps else None
    if not isinstance(head, dict):
        return None
    try:
        return int(canonical_step_id(head.get("id")).removeprefix("step_"))
    except PlanError:
        return None


def restart_rows(d: Decision, steps: list[Any], fmt: str) -> list[Row]:
    """One 0/1 row for a plan written where the request shows step ids: 1 when its steps
    are numbered from below the first free number (as if nothing had run)."""
    first, number = free_number(d), written_number(steps)
    if first <= 1 or number is None:
        return []
    return [d.row("restart_ids", int(number < first), format=fmt)]


def _plan_rows(d: Decision, steps: list[Any]) -> list[Row]:
    view, ctx = d.view, d.context
    observed = (ctx.observations or ()) if ctx is not None else ()
    obs, checked = view.execution_log(observed)
    failed_id = ctx.failed_step if ctx is not None else None
    flagged = frozenset(checked | ({failed_id} if failed_id else set()))
    subtle = view.subtle_keys(obs, flagged)
    failed = next((o for o in reversed(obs) if o.key == failed_id), None)
    can_persist = failed is not None and failed.error is not None and failed.error != "precondition"
    number = written_number(steps)  # the ids as the model numbered them
    first = free_number(d, obs) if number is None else number
    unit = next(_units)
    rows: list[Row] = []
    branch = 0
    for reading in view.readings(subtle):
        gold = view.plan_gold(obs, reading)
        line = gold[0].trap_plan if gold else None
        line_on = (
            bool(line)
            and line[0].tool != "finish"  # type: ignore[index]
            and not any(dep in flagged for g in line for dep in g.deps)  # type: ignore[union-attr]
        )
        for took_line in (False, True) if line_on else (False,):
            plan_gold = list(line) if took_line else list(gold)  # type: ignore[arg-type]
            if view.is_unreachable(plan_gold):
                plan_gold = []
            for persisted in (False, True) if can_persist else (False,):
                cov = {"n_subtle": min(len(subtle), 3), "n_missed": len(reading)}
                head: list[Row] = []
                if line_on:
                    head.append(d.row(
                        "choice", "trap" if took_line else "right", unit=unit, branch=branch,
                        ctype="line", avail="right,trap",
                        matches="trap" if took_line else "right", **cov,
                    ))  # fmt: skip
                if can_persist:
                    head.append(d.row(
                        "choice", "persist" if persisted else "right", unit=unit,
                        branch=branch, ctype="persist", avail="persist,right",
                        matches="persist" if persisted else "right", **cov,
                    ))  # fmt: skip
                body = _branch_body(d, unit, branch, view, plan_gold, steps, first, failed,
                                    persisted, cov)  # fmt: skip
                if body is None:
                    continue  # this branch cannot have written these steps
                rows += head + body
                branch += 1
    if branch == 0:
        return []
    rows += _plan_summary(d, view, obs, steps, first, failed if can_persist else None)
    return rows


def _branch_body(
    d: Decision, unit: int, branch: int, view: OracleView, gold: list[GoldStep],
    steps: list[Any], first: int, failed: Obs | None, persisted: bool, cov: dict[str, Any],
) -> list[Row] | None:  # fmt: skip
    """The step rows of one branch, or None when the branch cannot produce ``steps``."""
    if persisted:
        assert failed is not None
        s0 = steps[0] if steps else None
        if not (isinstance(s0, dict) and s0.get("tool") == failed.tool
                and (s0.get("args") or {}) == dict(failed.args)):  # fmt: skip
            return None
        if not gold:
            return [] if len(steps) == 1 else None
    elif not gold:
        return [] if not steps else None
    return _steps_rows(d, unit, branch, view, gold, steps, first, persisted, cov)


def _plan_summary(
    d: Decision, view: OracleView, obs: list[Obs], steps: list[Any], first: int,
    failed: Obs | None,
) -> list[Row]:  # fmt: skip
    """Descriptive rates of the attentive reading: the first step right, a trap taken."""
    gold = view.plan_gold(obs)
    if view.is_unreachable(gold) or not gold:
        return []
    ids = {g.key: f"step_{first + i}" for i, g in enumerate(gold)}
    s0 = steps[0] if steps else {"done": True}
    matches = step_matches(view, s0, gold[0], ids, view.tool_names())
    rows = [d.row("right_move", int("right" in matches), ctype="step")]
    if gold[0].trap is not None or view.line_starts_wrong(gold):
        line = gold[0].trap_plan
        took = "trap" in matches or (
            bool(line)
            and isinstance(s0, dict)
            and s0.get("tool") == line[0].tool  # type: ignore[index]
            and line[0].tool != gold[0].tool  # type: ignore[index]
        )
        rows.append(d.row("trap", int(took), ctype="step"))
    if failed is not None:
        again = (
            isinstance(s0, dict)
            and s0.get("tool") == failed.tool
            and (s0.get("args") or {}) == dict(failed.args)
        )
        rows.append(d.row("persist", int(again), ctype="step"))
    return rows


def extract_propose_steps(d: Decision) -> list[Row]:
    """``propose_steps``: the first candidate is a sample of the belief about the next step
    of the plan written before anything ran."""
    try:
        candidates = parse_step_candidates(d.text)
    except OutputParseError:
        return [d.row("malformed", 1, format="steps_json")]
    first = as_read(candidates[0], d.view.tool_names()) if candidates else {"done": True}
    if not first.get("done") and planner_refuses(
        dumps({"goal": "", "steps": [first]}), d.view.tool_names(), "json", d.plan_revision
    ):  # the step the belief wrote cannot enter a plan (a done marker is no step)
        return [d.row("malformed", 1, format="steps_json")]
    rows = [d.row("malformed", 0, format="steps_json")]
    if not candidates or not fresh(d) or d.context is None:
        return rows
    init = d.view.initial_gold()
    i = len(d.context.plan or ())
    if i >= len(init.gold):
        return rows
    g = init.gold[i]
    matches = step_matches(d.view, first, g, init.ids, d.view.tool_names())
    unit = next(_units)
    rows.append(
        d.row(
            "choice", _sep(matches), unit=unit, branch=0, ctype="step",
            avail=_sep(step_avail(g, first)), matches=_sep(matches),
            n_subtle=0, n_missed=0,
        )
    )  # fmt: skip
    rows.append(d.row("right_move", int("right" in matches), ctype="step"))
    if g.trap is not None:
        rows.append(d.row("trap", int("trap" in matches), ctype="step"))
    return rows


def extract_same_answer(d: Decision) -> list[Row]:
    """A prompt asked again in the episode: 1 when the answer is the first asking's (a
    greedy decoder repeats itself; a sampler draws afresh), for every request kind."""
    if d.same_as_first is None:
        return []
    return [d.row("same_answer", int(d.same_as_first))]


for _kind in RequestKind:
    register_extractor(_kind, extract_same_answer)
register_extractor(RequestKind.ACT, extract_act)
register_extractor(RequestKind.PROPOSE_ACTIONS, extract_propose_actions)
register_extractor(RequestKind.PLAN, extract_plan)
register_extractor(RequestKind.REVISE_PLAN, extract_plan)
register_extractor(RequestKind.PROPOSE_STEPS, extract_propose_steps)

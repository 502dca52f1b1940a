"""Rows of the judge side of calibration: what a judge scored, which checks a plan step wrote,
what a rollout imagined, what a decision made with a reflection in view chose, and the
proposer's choices at the same decision points (the evidence that tells a judge's own view
from the proposer's belief).

Every answer is classified against the oracle's view of its decision point (skill-free: the
options the env's oracle offers there), read with the planners' own parsers. A decision point
is named the way the simulated model shares its belief: ``step:<i>`` is step ``i`` of the plan
written before anything ran, ``line`` is taking the attractive wrong line from the start, and
``act:<signature>`` is a transcript's point (its calls and their errors). Which option a
right-looking step without post-conditions is (the right step, or the right step with its
checks dropped) depends on whether the model writes any check for that step at all; the rows
keep that open (``bare``) and the fit settles it from the checks the model wrote elsewhere.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from planarena.envs.oracle import GoldStep, Ref
from planarena.experiments.calibrate.registry import Decision, Row, register_extractor
from planarena.planners.formats import (
    _SCORE_N,  # noqa: PLC2701 - the planners' own score reader, to count what was scored
    FINISH,
    OutputParseError,
    dumps,
    parse_action_turn,
    parse_candidates,
    parse_outcome,
    parse_score,
    parse_scores,
    parse_step_candidates,
)
from planarena.planners.llm.protocol import Observed
from planarena.planners.llm.sim_belief import PLAN_MISTAKES, digest
from planarena.planners.llm.sim_reading import step_core
from planarena.planners.plan_prose import written_steps

LINE = "line"
# The fresh plans (written before anything ran, improving none) of each episode, by its
# oracle view: a judge's score of one of them is a score of steps no earlier score selected.
FRESH: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
# How a step of a plan is read when it lies past the right plan's end (no decision point of
# the right plan): the simulator's model believes a "done" there and nothing else.
PAST_END = "past_end"


def _key(steps: Sequence[Any]) -> str:
    return dumps(list(steps))


def step_options(g: GoldStep) -> tuple[str, ...]:
    """The options at a plan step's decision point, as the simulator lists them, but for
    ``unchecked`` (on offer only if the model writes a check for the step: the fit decides)."""
    options = ["right", *(k for k in PLAN_MISTAKES if k != "unchecked")]
    if g.trap is not None:
        options.append("trap")
    if not g.deps:
        options.remove("dependency")
    return tuple(options)


def _step_term(d: Decision, step: Any, i: int) -> tuple[str, str, bool]:
    """(point, kind, bare) of step ``i`` of a plan written before anything ran. ``bare``: the
    right step with no post-condition where its pool has one (``unchecked`` or ``right``)."""
    gold = d.view.initial_gold().gold
    if i >= len(gold):
        done = isinstance(step, dict) and step.get("done") is True
        return PAST_END, "right" if done else "other", False
    kind = d.view.step_kind(step, i)
    return f"step:{i}", kind, kind == "unchecked"


def plan_terms(d: Decision, steps: Sequence[Any], start: int = 0) -> list[tuple[str, str, bool]]:
    """The decision points a (partial) plan's steps stand on, with the option each step is
    (the simulator's ``_plan_values``: a plan that starts on the attractive wrong line is that
    one decision, whatever follows)."""
    init = d.view.initial_gold()
    if start == 0 and steps and init.line_core and step_core(steps[0]) == init.line_core:
        return [(LINE, "trap", False)]
    return [_step_term(d, s, i) for i, s in enumerate(steps, start)]


def point_options(d: Decision, point: str) -> tuple[tuple[str, ...], bool]:
    """(the options at a plan point but ``unchecked``, whether its pool has a check)."""
    if point == LINE:
        return ("right", "trap"), False
    if point == PAST_END:
        return ("right",), False
    g = d.view.initial_gold().gold[int(point.split(":")[1])]
    options = step_options(g)
    if d.view.mind.other_tool(g) is None:
        options = tuple(k for k in options if k != "other")
    return options, bool(g.checks)


def _point_covariates(d: Decision, terms: list[tuple[str, str, bool]]) -> dict[str, Any]:
    """Covariates naming a score's or rollout's decision points: per term its point, kind,
    bareness, options and whether the step's pool has a check."""
    options = [point_options(d, p) for p, _, _ in terms]
    return {
        "points": tuple(p for p, _, _ in terms),
        "kinds": tuple(k for _, k, _ in terms),
        "bare": tuple(b for _, _, b in terms),
        "options": tuple(o for o, _ in options),
        "pooled_checks": tuple(c for _, c in options),
    }


# --- the transcript's points -----------------------------------------------------------------


def action_point(d: Decision, observed: Sequence[Observed]) -> tuple[str, dict] | None:
    """(point, options) of a transcript's point, or None where the oracle calls an
    observation subtle (a model may have taken it at face value: its options are then not
    the attentive reader's, and which the model saw is a skill)."""
    obs = d.view.transcript(observed)
    if d.view.subtle_keys(obs):
        return None
    point = d.view.action_point(obs)
    return "act:" + d.view.mind.signature(obs), point.options


def action_kind(tool: str, args: Any, options: dict) -> str:
    """The option an action is (exactly one on offer; a finish by its status), else other."""
    args = args if isinstance(args, dict) else {}
    for kind, (t, a) in options.items():
        if t == tool and a == args:
            return kind
    for kind, (t, a) in options.items():
        if tool == FINISH == t and a.get("status") == args.get("status"):
            return kind
    return "other"


# --- extractors ------------------------------------------------------------------------------


def rate_rows(d: Decision) -> list[Row]:
    """One ``judge_score`` row per scored candidate (its score and the decision points it
    stands on: a score is the weakest of them, as the judge sees it), and one
    ``judge_prefers_right`` row per request that scored a right and a wrong option."""
    ctx = d.context
    if ctx is None:
        return []
    if d.kind == "rate_plan":
        steps = list(ctx.plan or ())
        selected = _key(steps) not in FRESH.get(d.view, set())
        try:
            scores = [parse_score(d.text)]
        except OutputParseError:
            return []
        terms = plan_terms(d, steps)
        on_line = bool(terms) and terms[0][0] == LINE
        if not on_line and len(steps) < len(d.view.initial_gold().gold):
            terms.append((f"step:{len(steps)}", "stop", False))  # a plan that ends too soon
        listed = [terms]
    else:
        candidates = list(ctx.candidates or ())
        if not candidates or len(list(_SCORE_N.finditer(d.text))) < len(candidates):
            return []  # a score missing (cut off): the planner reads it as 0, not the judge
        scores = parse_scores(d.text, len(candidates))
        if ctx.plan is not None:
            partial = list(ctx.plan)
            selected = bool(partial)
            prefix = plan_terms(d, partial)
            listed = [prefix + plan_terms(d, [c], len(partial)) for c in candidates]
        else:
            found = action_point(d, ctx.observations or ())
            if found is None:
                return []
            point, options = found
            rows = [
                d.row(
                    "judge_score",
                    float(s),
                    points=(point,),
                    kinds=(action_kind(tool, args, options),),
                    bare=(False,),
                    options=(tuple(options),),
                    pooled_checks=(False,),
                    candidate=n,
                    request=d.index,
                    selected=False,
                )
                for n, (s, (tool, args)) in enumerate(zip(scores, candidates, strict=True))
            ]
            return rows + _prefers(d, scores, [r["kinds"][0] for r in rows])
    rows = [
        d.row(
            "judge_score",
            float(s),
            candidate=n,
            request=d.index,
            selected=selected,
            **_point_covariates(d, t),
        )
        for n, (s, t) in enumerate(zip(scores, listed, strict=True))
    ]
    if d.kind == "rate_candidates":
        rows += _prefers(d, scores, [t[-1][1] if t else "other" for t in listed])
    return rows


def _prefers(d: Decision, scores: Sequence[float], kinds: Sequence[str]) -> list[Row]:
    """Whether the judge scored the right option above every wrong one (a request that listed
    both), for the report."""
    right = [s for s, k in zip(scores, kinds, strict=True) if k == "right"]
    wrong = [s for s, k in zip(scores, kinds, strict=True) if k not in ("right", "unchecked")]
    if not right or not wrong:
        return []
    return [d.row("judge_prefers_right", int(max(right) > max(wrong)), request=d.index)]


def evidence_rows(d: Decision) -> list[Row]:
    """What the proposer chose at a decision point (first samples only: a repeated prompt's
    further samples depart from the belief on purpose), as ``belief_evidence`` rows; and, for
    a decision made with reflections in view, a ``reflected_choice`` row."""
    ctx = d.context
    if ctx is None or d.occurrence > 0:
        return []
    reflected = bool(ctx.reflections)
    if d.kind in ("act", "propose_actions"):
        found = action_point(d, ctx.observations or ())
        if found is None:
            return []
        point, options = found
        try:
            if d.kind == "act":
                turn = parse_action_turn(d.text)
            else:
                turns = parse_candidates(d.text)
                if not turns:
                    return []
                turn = turns[0]
        except OutputParseError:
            return []
        kind = action_kind(turn.action, turn.action_input, options)
        quantity = "reflected_choice" if reflected else "belief_evidence"
        return [
            d.row(
                quantity,
                kind,
                point=point,
                bare=False,
                lessons=digest(*sorted(ctx.reflections)),
                request=d.index,
            )
        ]
    if reflected:
        return []
    if d.kind == "propose_steps":
        try:
            candidates = parse_step_candidates(d.text)
        except OutputParseError:
            return []
        if not candidates:
            return []
        i = len(ctx.plan or ())
        point, kind, bare = _step_term(d, candidates[0], i)
        if point == PAST_END:
            return []
        return [d.row("belief_evidence", kind, point=point, bare=bare, request=d.index)]
    if d.kind == "plan" and not (ctx.observations or ()):
        steps = written_steps(d.text, ctx.plan_format, revision=d.plan_revision)
        if steps is None:
            return []
        if ctx.plan is None:  # a fresh plan: no judge's score chose any of its steps
            FRESH.setdefault(d.view, set()).add(_key(steps))
        init = d.view.initial_gold()
        rows = []
        if init.line_core is not None:
            took = bool(steps) and step_core(steps[0]) == init.line_core
            rows.append(
                d.row("belief_evidence", "trap" if took else "right", point=LINE, bare=False)
            )
            if took:
                return rows
        for i, step in enumerate(steps[: len(init.gold)]):
            point, kind, bare = _step_term(d, step, i)
            rows.append(d.row("belief_evidence", kind, point=point, bare=bare, request=d.index))
        if len(steps) < len(init.gold):  # the plan stopped where a step was needed
            rows.append(d.row("belief_evidence", "stop", point=f"step:{len(steps)}", bare=False))
        return rows
    return []


def rollout_rows(d: Decision) -> list[Row]:
    """A rollout's imagined outcome with the points its partial plan stands on."""
    ctx = d.context
    if ctx is None:
        return []
    try:
        success = parse_outcome(d.text)
    except OutputParseError:
        return []
    terms = plan_terms(d, list(ctx.plan or ()))
    return [
        d.row("rollout_says_success", int(success), request=d.index, **_point_covariates(d, terms))
    ]


# --- checks ----------------------------------------------------------------------------------


def _norm(check: Any) -> str:
    return " ".join(str(check).split())


def _gold_candidates(d: Decision) -> list[GoldStep]:
    """Every gold step a step of this plan request may be written from: the right steps left
    under each reading of the log, their traps, and the attractive wrong line's steps."""
    ctx = d.context
    observed = (ctx.observations or ()) if ctx is not None else ()
    if d.kind == "propose_steps" or not observed:
        golds = list(d.view.initial_gold().gold)
    else:
        obs, rejected = d.view.execution_log(observed)
        flagged = frozenset(rejected | ({ctx.failed_step} if ctx and ctx.failed_step else set()))
        golds = []
        for reading in d.view.readings(d.view.subtle_keys(obs, flagged)):
            golds += d.view.plan_gold(obs, reading)
    out: list[GoldStep] = []
    for g in golds:
        out += [g, *([g.trap] if g.trap else []), *(g.trap_plan or [])]
    return out


def _shape(value: Any) -> Any:
    """An argument value with every reference to another step's result blanked (a written
    ``{{step_2.result.url}}`` and the oracle's reference alike), so a step is matched to a
    gold step by its tool and literal arguments whatever the plan numbered its steps."""
    if isinstance(value, Ref) or (isinstance(value, str) and "{{" in value):
        return "<ref>"
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return value


def _match(step: dict, candidates: Sequence[GoldStep]) -> GoldStep | None:
    """The one gold step a written step is: by tool and literal arguments, else by tool
    alone when one gold step has it; None when that does not single one out."""
    tool = step.get("tool")
    same = {g.key: g for g in candidates if g.tool == tool}
    if len(same) > 1:
        shape = _shape(step.get("args") or {})
        same = {k: g for k, g in same.items() if _shape(g.args) == shape}
    if len(same) != 1:
        return None
    return next(iter(same.values()))


def _fresh_gold(
    d: Decision, steps: Sequence[Any], start: int, *, line: bool = True
) -> list[GoldStep | None]:
    """The gold step each step of a plan written before anything ran stands for, by its
    position: the right step (written right, without checks, with another argument, a
    dependency dropped or a made-up tool: every such step carries that step's checks), its
    trap, or the attractive wrong line's step; None for a stop or an unrelated step."""
    init = d.view.initial_gold()
    on_line = line and start == 0 and steps and init.line_core is not None
    if on_line and step_core(steps[0]) == init.line_core:
        wrong_line = init.gold[0].trap_plan or []
        return [wrong_line[j] if j < len(wrong_line) else None for j in range(len(steps))]
    out: list[GoldStep | None] = []
    for i, step in enumerate(steps, start):
        if i >= len(init.gold):
            out.append(None)
            continue
        kind = d.view.step_kind(step, i)
        g = init.gold[i]
        out.append(g.trap if kind == "trap" else g if kind in CARRY_CHECKS else None)
    return out


CARRY_CHECKS = frozenset({"right", "unchecked", "premise", "dependency", "invented"})


def check_rows(d: Decision) -> list[Row]:
    """One ``check_covers`` row per check of the pool of every step this answer wrote: whether
    the step's post-conditions include it. Steps are matched to the gold step they are (a
    step matching none, or several, is left out: its pool is unknown)."""
    ctx = d.context
    if d.kind == "propose_steps":
        try:
            steps: list[Any] | None = parse_step_candidates(d.text)
        except OutputParseError:
            return []
    else:
        fmt = ctx.plan_format if ctx is not None else "json"
        steps = written_steps(d.text, fmt, revision=d.plan_revision)
    if not steps:
        return []
    observed = ctx.observations if ctx is not None else None
    if d.kind == "propose_steps":  # k candidates for one position of the partial plan
        at = len(ctx.plan or ()) if ctx is not None else 0
        golds = [_fresh_gold(d, [c], at, line=False)[0] for c in steps]
    elif not observed:
        golds = _fresh_gold(d, steps, 0)
    else:
        candidates = _gold_candidates(d)
        golds = [_match(s, candidates) if isinstance(s, dict) else None for s in steps]
    rows = []
    for step, g in zip(steps, golds, strict=True):
        if not isinstance(step, dict) or step.get("done"):
            continue
        if g is None or not g.checks:
            continue
        written = {_norm(c) for c in step.get("post_conditions") or []}
        init = d.view.initial_gold().gold
        point = next((f"step:{i}" for i, h in enumerate(init) if h.key == g.key), None)
        for c in g.checks:
            rows.append(
                d.row(
                    "check_covers",
                    int(_norm(c) in written),
                    gkey=g.key,
                    check=_norm(c),
                    pool=len(g.checks),
                    point=point,
                    any_written=bool(written),
                    request=d.index,
                )
            )
    return rows


for _kind in ("rate_candidates", "rate_plan"):
    register_extractor(_kind, rate_rows)
for _kind in ("act", "propose_actions", "propose_steps", "plan"):
    register_extractor(_kind, evidence_rows)
for _kind in ("plan", "revise_plan", "propose_steps"):
    register_extractor(_kind, check_rows)
register_extractor("rollout", rollout_rows)

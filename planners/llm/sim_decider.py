"""How the simulated model answers one request: it decides like a fallible model.

Each decision is right with the skill's probability (lower as the prompt grows), may fall for a
locally attractive trap, may invent a tool, act on an unverified premise or stop early, and the
text may come out malformed. As a judge it sees how good a candidate looks, blurred by its
noise; as a rollout it imagines the outcome, optimistically. The episode's beliefs come from
:class:`~planarena.planners.llm.sim_mind.SimMind`; a :class:`Decider` adds one request's own
random stream and prompt length.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from planarena.envs.jsontext import encoder
from planarena.envs.oracle import REPORT_UNREACHABLE, SUBMIT_ANSWER, GoldStep, Obs, literal_args
from planarena.planners.formats import FINISH, dumps, render_candidates
from planarena.planners.llm.profiles import SkillProfile
from planarena.planners.llm.protocol import Observed, RequestContext
from planarena.planners.llm.sim_belief import (
    ACTION_MISTAKES,
    NO_OBSERVATION,
    PLAN_MISTAKES,
    PREFERRED,
    Belief,
    digest,
    pick,
)
from planarena.planners.llm.sim_mind import SimMind
from planarena.planners.llm.sim_reading import step_core
from planarena.planners.plan_prose import render_plan_text, run_on_text

_PLAN_JSON = encoder(ensure_ascii=False)  # json.dumps(..., ensure_ascii=False), built once
_STEP_NUMBER = re.compile(r"step_(\d+)")
# a figure as the fact grader reads one (envs/grading.py; its sign, if any, left in place)
_FIGURE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")


class Decider:
    """Answers one request: the model, its skill for this request's model profile, the
    request's own random stream and its prompt length."""

    def __init__(
        self,
        sim: SimMind,
        skill: SkillProfile,
        rng: random.Random,
        tokens: int,
        *,
        repeat: bool = False,
        reflections: Sequence[str] = (),
    ) -> None:
        self.sim = sim
        self.oracle = sim.oracle
        self.skill = skill
        self.rng = rng
        self.tokens = tokens
        self.err = skill.error_rate(tokens)
        self.repeat = repeat  # the same prompt was asked before: a further sample of it
        # what the reflections in view concern (those this model wrote; others carry nothing)
        self.lessons = tuple(sorted({sim.lessons[r] for r in reflections if r in sim.lessons}))

    # --- shared ------------------------------------------------------------------------------

    def _slip(self) -> bool:
        """A sampling slip: this sample departs from what the model believes."""
        return self.rng.random() < self.err * (1.0 - self.skill.systematic_share)

    def _sample(self, belief: Belief) -> str:
        """One proposal from a belief: its preferred option, or after a slip another option
        drawn in proportion to how good it looks. A further sample of the same prompt may
        land on the runner-up instead (``sample_diversity``)."""
        if not self._slip():
            if self.repeat and self.skill.sample_diversity > 0:
                return self._diverse(belief)
            return belief.top
        others = [(k, v) for k, v in belief.values.items() if k != belief.top]
        return self._draw(others) or belief.top

    def _diverse(self, belief: Belief) -> str:
        """A fresh sample of a decision: the runner-up (if it looks at least fair) with the
        chance ``sample_diversity`` times its share of the two options' looks."""
        runner = belief.runner_up()
        if runner is None:
            return belief.top
        kind, v = runner
        share = v / (v + belief.value(belief.top))
        return kind if self.rng.random() < self.skill.sample_diversity * share else belief.top

    def _draw(self, weighted: Sequence[tuple[str, float]]) -> str | None:
        return pick(weighted, self.rng.random())

    def _proposals(self, belief: Belief, k: int | None) -> list[str]:
        """The kinds of the ``k`` candidates a proposer asked for: one sample of the belief,
        then other options, each drawn in proportion to how good it looks."""
        k = 3 if k is None else k
        kinds = [self._sample(belief)]
        rest = [(kind, v) for kind, v in belief.values.items() if kind != kinds[0]]
        diversity = self.skill.sample_diversity
        while len(kinds) < k and rest:
            if diversity < 1 and self.rng.random() >= diversity:
                kinds.append(kinds[0])  # the same option again, in other words
                continue
            other = self._draw(rest)
            if other is None:
                break
            kinds.append(other)
            rest = [(kind, v) for kind, v in rest if kind != other]
        return kinds

    def _score(self, value: float) -> float:
        noise = self.skill.judge_noise(self.tokens)
        return min(1.0, max(0.0, value + self.rng.gauss(0.0, noise)))

    def _break(self, text: str, output_format: str | None = None) -> str:
        if not self._broken(output_format):
            return text
        cut = self.rng.randint(len(text) // 3, max(len(text) // 3, len(text) - 3))
        return text[:cut]

    def _broken(self, output_format: str | None) -> bool:
        """Whether this answer comes out beyond repair: a fresh draw at the format's rate, or,
        with the format's ``malformed_persistence``, the state of this model's last answer in
        the same format in the episode again (a model that cannot write a format here keeps
        failing at it; the rate over answers stays the format's). No extra draw at 0."""
        rate = self.skill.malformed_rate(output_format)
        rho = self.skill.persistence(output_format)
        if rho <= 0:
            return self.rng.random() < rate
        key = (output_format or "", self.skill.name)
        last = self.sim.last_broken.get(key)
        repeat = last is not None and self.rng.random() < rho
        broken = bool(last) if repeat else self.rng.random() < rate
        self.sim.last_broken[key] = broken
        return broken

    # --- actions (a Thought/Action turn, candidate actions, judging them) -------------------

    def _action_point(
        self, observed: Sequence[Observed]
    ) -> tuple[str, list[GoldStep], Belief, dict[str, tuple[str, dict[str, Any]]]]:
        """(the decision point, the right steps left, the belief there, every option seen)."""
        obs = self.sim.transcript(observed)
        overlooked = self.sim.overlooked(self.skill, obs)
        gold = self.oracle.remaining(obs, overlooked)
        options = self._action_options(gold, obs, overlooked)
        point = digest("act", self.sim.signature(obs), gold[0].key if gold else "done")
        options = self._written_answers(point, options)
        belief = self._reflected(
            point, self.sim.belief(self.skill, point, list(options), self.err, ACTION_MISTAKES)
        )
        return point, gold, belief, options

    def _written_answers(
        self, point: str, options: dict[str, tuple[str, dict[str, Any]]]
    ) -> dict[str, tuple[str, dict[str, Any]]]:
        """The options with each final answer as the model writes it at this point: with
        ``p_answer_garbled``, every finish with status success states the task's facts wrongly
        (:func:`garbled`). One draw per point (the same prompt, the same answer, whoever asks
        it); none at 0 or where no such finish is on offer."""
        p = self.skill.p_answer_garbled
        if p <= 0:
            return options
        answers = [
            k for k, (t, a) in options.items() if t == FINISH and a.get("status") == "success"
        ]
        if not answers or self.sim.draws.uniform01("answer_garbled", point) >= p:
            return options
        out = dict(options)
        for k in answers:
            tool, args = options[k]
            out[k] = (tool, {**args, "answer": garbled(str(args["answer"]))})
        return out

    def _reflected(self, point: str, belief: Belief) -> Belief:
        """The belief at a point with the reflections in view: a wrong belief is corrected
        with the chance ``reflection_gain`` (one draw per point and set of lessons, so the
        same reflections at the same point decide the same way)."""
        if not self.lessons or belief.top == "right":
            return belief
        u = self.sim.draws.uniform01("reflect", point, *self.lessons)
        return belief.corrected() if u < self.skill.reflection_gain else belief

    def _judged(self, point: str, belief: Belief, kind: str) -> float:
        """How an option looks to a judge: ``judge_correlation`` of it is the proposer's
        belief at the point, the rest the judge's own view (:meth:`SimMind.judge_view`)."""
        rho = self.skill.judge_correlation
        if rho >= 1.0:
            return belief.value(kind)
        own = self.sim.judge_view(self.skill, point, list(belief.values))
        return rho * belief.value(kind) + (1.0 - rho) * own.value(kind)

    def _action_options(
        self, gold: list[GoldStep], obs: list[Obs], overlooked: frozenset[str]
    ) -> dict[str, tuple[str, dict[str, Any]]]:
        """Every option the model can see at this point, as (tool, literal args)."""
        if not gold:  # it believes the work is done: answer with what it holds
            answer = self.oracle.answer(obs) or self.oracle.partial_answer(obs)
            return {"right": (FINISH, {"answer": answer, "status": "success"})}
        g = gold[0]
        early = (FINISH, {"answer": self.oracle.partial_answer(obs), "status": "success"})
        if g.tool == REPORT_UNREACHABLE:
            return {"right": (FINISH, {"answer": "", "status": "failure"}), "early": early}
        args = literal_args(g.args, obs)  # shared by the options below: only read
        options: dict[str, tuple[str, dict[str, Any]]] = {"right": (g.tool, args)}
        attractive = g.trap or (g.trap_plan[0] if g.trap_plan else None)
        if attractive is not None:
            if attractive.tool == SUBMIT_ANSWER:
                options["trap"] = early
            else:
                options["trap"] = (attractive.tool, literal_args(attractive.args, obs))
        if g.fallback:
            options["fallback"] = (g.fallback, args)
        failed = obs[-1] if obs and obs[-1].error is not None else None
        if failed is not None:
            again = (failed.tool, dict(failed.args))
            if again != options["right"]:
                options["persist"] = again
            options["stop"] = (FINISH, {"answer": "", "status": "failure"})
        ahead = gold[1] if len(gold) > 1 else g
        options["premise"] = (ahead.tool, self.sim.guess(ahead.args))
        if obs and options.get("trap") != early:
            options["early"] = early
        options["invented"] = (self.sim.invented_tool(g.key), args)
        other = self._other_tool(g, "w_other")
        if other is not None:
            options["other"] = (other, args)
        # options that coincide with the right move are the right move
        return {k: v for k, v in options.items() if k == "right" or v != options["right"]}

    def _other_tool(self, g: GoldStep, weight: str) -> str | None:
        """The env tool this model would call in place of ``g``, where its mistakes include a
        wrong call that runs (``weight`` positive; at 0 nothing is drawn, nothing offered)."""
        if self.skill.resolved(weight) <= 0:
            return None
        return self.sim.other_tool(g)

    @staticmethod
    def _thought(kind: str, tool: str, gold: list[GoldStep]) -> str:
        if not gold:
            return "The task is complete."
        if tool == FINISH:
            reason = gold[0].args.get("reason", "")
            return {
                "right": f"The goal cannot be reached: {reason}.",
                "stop": "The tool keeps failing; I cannot complete this.",
            }.get(kind, "I have enough to answer.")
        if kind == "persist":
            return f"{tool} failed; I will try it again."
        return f"Next I need {tool} to make progress on the task."

    def act(self, context: RequestContext) -> str:
        """One Thought/Action turn: a sample of the belief at the transcript's point."""
        _, gold, belief, options = self._action_point(context.observations or ())
        kind = self._sample(belief)
        tool, args = options[kind]
        text = (
            f"Thought: {self._thought(kind, tool, gold)}\nAction: {tool}\n"
            f"Action Input: {dumps(args)}"
        )
        return self._break(text, "action")

    def propose_actions(self, context: RequestContext) -> str:
        """Candidate next actions, the first as an actor would take it, the rest other options."""
        _, gold, belief, options = self._action_point(context.observations or ())
        chosen = []
        for n, kind in enumerate(self._proposals(belief, context.k)):
            tool, args = options[kind]
            thought = self._thought(kind, tool, gold)
            chosen.append((thought if n == 0 else f"Alternatively: {thought}", tool, args))
        return self._break(render_candidates(chosen), "candidates")

    def _action_kind(
        self, tool: str, args: dict[str, Any], options: dict[str, tuple[str, dict[str, Any]]]
    ) -> str:
        for kind, (t, a) in options.items():
            if t != tool:
                continue
            if a == args or (tool == FINISH and a.get("status") == args.get("status")):
                return kind
        if tool != FINISH and tool not in self.oracle.tool_names():
            return "invented"
        return "other"

    def reflect(self, context: RequestContext) -> str:
        """A critique of the last failed call of a transcript. The simulated model remembers
        what each critique it wrote concerns (the point of the failure), so a reflection that
        comes back in view can correct later beliefs (``reflection_gain``); the text names
        the failure, never the oracle's right move."""
        obs = self.sim.transcript(context.observations or ())
        at = next((i for i in range(len(obs) - 1, -1, -1) if obs[i].error is not None), None)
        if at is None:
            return "Reflection: nothing has failed so far; carry on with the plan."
        failed = obs[at]
        lesson = digest("lesson", self.sim.signature(obs[: at + 1]))
        text = (
            f"Reflection: calling {failed.tool} with {self.sim.json_of(failed.args)} failed "
            f"({failed.error}). Doing the same again will fail the same way; I should check "
            "what the task needs at this point and take another route to it."
        )
        self.sim.lessons.setdefault(text, lesson)
        return self._break(text)

    # --- plans -------------------------------------------------------------------------------

    def _step_point(self, state: str, g: GoldStep) -> str:
        if state == NO_OBSERVATION:  # a step of the plan before anything ran: asked often
            known = self.sim.first_points.get(g.key)
            if known is None:
                known = self.sim.first_points[g.key] = digest("step", state, g.key)
            return known
        return digest("step", state, g.key)

    def _step_options(self, g: GoldStep) -> list[str]:
        options = ["right", *PLAN_MISTAKES]
        if g.trap is not None:
            options.append("trap")
        if not g.deps:
            options.remove("dependency")
        if not self.sim.written_checks(self.skill, g):
            options.remove("unchecked")  # no check it would write: none to omit
        if self._other_tool(g, "w_other_plan") is None:
            options.remove("other")
        return options

    def _step_belief(self, state: str, g: GoldStep) -> Belief:
        point = self._step_point(state, g)
        belief = self.sim.belief(self.skill, point, self._step_options(g), self.err, PLAN_MISTAKES)
        return self._reflected(point, belief)

    def _write_step(
        self, kind: str, g: GoldStep, ids: dict[str, str]
    ) -> tuple[dict[str, Any], bool]:
        """The step of one kind as written: (step, whether the plan stops here)."""
        step = g.trap if kind == "trap" and g.trap is not None else g
        rendered = self.sim.render(self.skill, step, ids)
        if kind == "invented":
            rendered["tool"] = self.sim.invented_tool(g.key)
        elif kind == "other":
            rendered["tool"] = self.sim.other_tool(g)
        elif kind == "premise":
            rendered["args"] = self.sim.guess(step.args)
        elif kind == "stop":
            return rendered, True
        elif kind == "dependency":
            rendered["depends_on"] = []
            rendered["pre_conditions"] = list(self.sim.written_pre(self.skill, step))
        elif kind == "unchecked":
            rendered["post_conditions"] = []
        invented = self.sim.invented_fallback(self.skill, g)
        if invented is not None:
            rendered["fallback"] = invented
        return self._worded(rendered), False

    def _worded(self, rendered: dict[str, Any]) -> dict[str, Any]:
        """The step's conditions as written: each, with ``p_prose_condition``, in words the
        executor cannot evaluate (a format slip, like a sloppy JSON; no draw at 0)."""
        p = self.skill.p_prose_condition
        if p <= 0:
            return rendered
        for field in ("pre_conditions", "post_conditions"):
            written = rendered.get(field) or []
            rendered[field] = [
                in_words(field, rendered.get("tool")) if self.rng.random() < p else c
                for c in written
            ]
        return rendered

    def revise_plan(self, context: RequestContext) -> str:
        """A plan for the steps that remain after a failure: written as a plan is, broken at
        the replan's own rate (``p_malformed_replan``)."""
        return self.plan(context, output_format="replan_json")

    def plan(self, context: RequestContext, output_format: str = "plan_json") -> str:
        """A Plan JSON for what remains after the execution log (a first plan, a replan, or a
        revision of a candidate plan that keeps the steps the model still believes right);
        the same steps as a text plan when the request asks for ``plan_format`` text."""
        obs, checked = self.sim.execution_log(context.observations or ())
        failed_id = context.failed_step
        flagged = frozenset(checked | ({failed_id} if failed_id else set()))
        overlooked = self.sim.overlooked(self.skill, obs, flagged)
        gold = self.oracle.remaining(obs, overlooked)
        state = self.sim.signature(obs)
        trap_plan = gold[0].trap_plan if gold else None
        if (
            trap_plan
            and trap_plan[0].tool != SUBMIT_ANSWER
            # a result a check rejected cannot be built on: the executor says it failed
            and not any(d in flagged for g in trap_plan for d in g.deps)
            and self._sample(self._line_belief(state)) == "trap"
        ):
            gold = trap_plan
        if gold and gold[0].tool == REPORT_UNREACHABLE:
            gold = []  # the honest plan for an unreachable goal: no steps
        first = self._numbered_from(self._first_free_number(obs, context))
        ids = {g.key: f"step_{first + i}" for i, g in enumerate(gold)}
        old = context.plan
        steps: list[dict[str, Any]] = []
        persist = self._persisted(obs, failed_id, state) if obs else None
        if persist is not None and not gold:  # nothing left it believes in but the failed call
            steps.append(self._in_place({"id": f"step_{first}", "depends_on": []}, persist))
        for i, g in enumerate(gold):
            belief = self._step_belief(state, g)
            if (
                isinstance(old, (list, tuple))
                and i < len(old)
                and self._kind_of(old[i], i) == belief.top
            ):
                steps.append(old[i])  # a revision keeps what the model still believes right
                continue
            rendered, stop = self._write_step(self._sample(belief), g, ids)
            if i == 0 and persist is not None:
                rendered, stop = self._in_place(rendered, persist), False
            if stop:
                break
            steps.append(rendered)
        plan = {"goal": getattr(getattr(self.oracle, "task", None), "goal", ""), "steps": steps}
        if context.plan_format == "text":
            return self._write_text(plan["goal"], steps)
        text = _PLAN_JSON(plan)
        if self.rng.random() < self.skill.p_sloppy_json:
            head, _, tail = text.rpartition("]}")
            text = "```json\n" + head + ",]}" + tail + "\n```"
        return self._break(text, output_format)

    def _write_text(self, goal: str, steps: list[dict[str, Any]]) -> str:
        """The same plan as numbered steps in prose (the request's ``plan_format`` is text):
        with ``p_sloppy_text`` half-following the format (repaired, counted), with
        ``p_malformed_text`` one run-on paragraph no reader can split into steps. The two
        draws come in the same order as the JSON form's."""
        sloppy = self.rng.random() < self.skill.p_sloppy_text
        if self.rng.random() < self.skill.p_malformed_text:
            return run_on_text(goal, steps)
        return render_plan_text(goal, steps, sloppy=sloppy)

    def _line_belief(self, state: str) -> Belief:
        """The belief about taking the attractive wrong line from here, as a whole."""
        point = digest("line", state)
        return self._reflected(
            point, self.sim.belief(self.skill, point, ["right", "trap"], self.err, {})
        )

    def _numbered_from(self, first: int) -> int:
        """The number the plan's steps start from: ``first`` (after every id the request
        shows), or, with ``p_restart_ids``, 1 again as if nothing had run (a format slip: the
        ids clash with the log's; no draw where nothing ran or at 0)."""
        p = self.skill.p_restart_ids
        if first > 1 and p > 0 and self.rng.random() < p:
            return 1
        return first

    @staticmethod
    def _first_free_number(obs: list[Obs], context: RequestContext) -> int:
        """The next step number after every step id the request shows (run, failed, pending)."""
        ids = [o.key for o in obs] + list(context.pending) + [context.failed_step or ""]
        used = [int(m.group(1)) for i in ids if (m := _STEP_NUMBER.fullmatch(i))]
        return max(used, default=0) + 1

    def _persisted(self, obs: list[Obs], failed_id: str | None, state: str) -> Obs | None:
        """The failed call a replanner committed to its line writes again, unchanged (None:
        it changes course). A step blocked by its pre-condition is not a call to repeat."""
        failed = next((o for o in reversed(obs) if o.key == failed_id), None)
        if failed is None or failed.error is None or failed.error == "precondition":
            return None
        belief = self.sim.belief(
            self.skill, digest("persist", state), ["right", "persist"], self.err, {}
        )
        belief = self._reflected(digest("persist", state), belief)
        return failed if belief.top == "persist" else None

    def _in_place(self, rendered: dict[str, Any], failed: Obs) -> dict[str, Any]:
        """The next step written as the failed call again: its id, dependencies and checks
        stay, so the steps that depend on it still do."""
        return {
            **rendered,
            "tool": failed.tool,
            "args": json.loads(self.sim.json_of(failed.args)),  # as the log shows it
        }

    # --- partial plans (search planners) -----------------------------------------------------

    def _kind_of(self, step: Any, i: int) -> str:
        """How step ``i`` of a written plan compares with the right plan."""
        init = self.sim.initial_gold()
        if isinstance(step, dict) and step.get("done"):
            return "right" if i >= len(init.rendered) else "stop"
        if not isinstance(step, dict) or i >= len(init.rendered):
            return "other"
        if step.get("tool") not in self.oracle.tool_names():
            return "invented"
        core = step_core(step)
        if core == init.cores[i]:
            written = self.sim.written_checks(self.skill, init.gold[i])
            return "right" if step.get("post_conditions") or not written else "unchecked"
        if core == init.trap_cores[i]:
            return "trap"
        right = init.cores[i]
        if core[0] == right[0] and core[2] == right[2]:
            return "premise"  # the right tool with other arguments
        if core[0] == right[0] and core[1] == right[1]:
            return "dependency"
        return "other"

    def _point_belief(self, i: int) -> Belief:
        """The belief about step ``i`` of a plan written before anything ran (shared by a
        whole-plan writer, a step proposer, a judge and a rollout)."""
        init = self.sim.initial_gold()
        if i >= len(init.gold):
            return Belief("right", {"right": PREFERRED[0]})
        return self._step_belief(NO_OBSERVATION, init.gold[i])

    def _plan_values(
        self,
        steps: Sequence[Any],
        start: int = 0,
        so_far: tuple[float, bool] = (1.0, True),
        *,
        judge: bool = False,
    ) -> tuple[float, bool]:
        """(how good the plan looks: as good as its weakest step, to the proposer's belief or,
        for a ``judge``, to the judge's view; whether the model believes every step is what it
        would write). ``steps`` may continue a plan whose first ``start`` steps gave
        ``so_far``."""
        looks, believed = so_far
        init = self.sim.initial_gold()
        if start == 0 and steps and init.line_core and step_core(steps[0]) == init.line_core:
            # the attractive wrong line, taken from the start: judged as that one decision
            line = self._line_belief(NO_OBSERVATION)
            point = digest("line", NO_OBSERVATION)
            value = self._judged(point, line, "trap") if judge else line.value("trap")
            return min(looks, value), believed and line.top == "trap"
        for i, step in enumerate(steps, start):
            kind = self._kind_of(step, i)
            belief = self._point_belief(i)
            if judge and i < len(init.gold):
                point = self._step_point(NO_OBSERVATION, init.gold[i])
                looks = min(looks, self._judged(point, belief, kind))
            else:
                looks = min(looks, belief.value(kind))
            believed = believed and kind == belief.top
        return looks, believed

    def propose_steps(self, context: RequestContext) -> str:
        """Candidate next steps of a partial plan, distinct, or ``done`` past the last step."""
        partial = list(context.plan or ())
        init = self.sim.initial_gold()
        i = len(partial)
        if i >= len(init.gold):
            return self._break(json.dumps([{"done": True}]), "steps_json")
        g = init.gold[i]
        chosen: list[dict[str, Any]] = []
        for kind in self._proposals(self._point_belief(i), context.k):
            rendered, stop = self._write_step(kind, g, init.ids)
            candidate = {"done": True} if stop else rendered
            if candidate not in chosen:
                chosen.append(candidate)
        return self._break(_PLAN_JSON(chosen), "steps_json")

    def rate_candidates(self, context: RequestContext) -> str:
        """Scores of candidate steps or actions: how each looks to the belief, plus noise."""
        lines = []
        if context.plan is not None:  # candidate steps of a partial plan
            partial = list(context.plan)
            prefix = self._plan_values(partial, judge=True)  # shared by every candidate
            for n, step in enumerate(context.candidates or (), 1):
                looks, _ = self._plan_values([step], len(partial), prefix, judge=True)
                lines.append(f"Score {n}: {self._score(looks):.2f}")
        else:  # candidate actions at a point of a transcript
            point, _, belief, options = self._action_point(context.observations or ())
            for n, (tool, args) in enumerate(context.candidates or (), 1):
                kind = self._action_kind(tool, args, options)
                looks = self._judged(point, belief, kind)
                lines.append(f"Score {n}: {self._score(looks):.2f}")
        return self._break("\n".join(lines))

    def rate_plan(self, context: RequestContext) -> str:
        """A whole plan's score: how its weakest step looks to the judge, its end included
        (a plan that stops where a step is still needed ends on a "stop" decision, judged
        like any other). The judge never reads how long the right plan is."""
        steps = list(context.plan or ())
        end = {"done": True}
        ending = [end] if self._kind_of(end, len(steps)) == "stop" else []
        looks, _ = self._plan_values([*steps, *ending], judge=True)
        return self._break(f"Score: {self._score(looks):.2f}")

    def rollout(self, context: RequestContext) -> str:
        """An imagined outcome: success when the model believes every step, else by optimism."""
        steps = list(context.plan or ())
        _, believed = self._plan_values(steps)
        success = believed or self.rng.random() < self.skill.rollout_optimism
        return f"Outcome: {'success' if success else 'failure'}"


def in_words(field: str, tool: object) -> str:
    """A condition of a step as a model writes it in words instead of an expression (what a
    small real model does: "The search engine is slow and its own API key")."""
    if field == "pre_conditions":
        return f"the inputs of {tool} are ready before it runs"
    return f"the result of {tool} is what the task needs"


def garbled(answer: str) -> str:
    """A final answer as a model that garbles it writes it (``p_answer_garbled``): every
    figure with its decimal point one place to the left (467 as 46.7, 5.6 as 0.56, 1,200 as
    120.0, the id c-sort-9054 as c-sort-905.4). A figure read as a fact is then a tenth of
    its value, off by more than half a unit of its last digit unless it is 0, so the fact
    grader (envs/grading.py) finds no numeric fact stated, and a name that carries a figure
    (an id, a topic) no longer matches. (Ten times the figure would keep 9054 inside 90540,
    and the grader matches a name as a substring.) An answer with no figure but 0 is cut to
    its first half instead: the facts stated in the rest are lost."""
    if not any(re.search(r"[1-9]", f) for f in _FIGURE.findall(answer)):
        return answer[: max(1, len(answer) // 2)].rstrip()
    return _FIGURE.sub(
        lambda m: format(Decimal(m.group(0).replace(",", "")).scaleb(-1), "f"), answer
    )

"""The offline simulated LLM: a seeded model of an LLM's per-decision skill over a world.

It reads the prompt it is given (the transcript, the execution log, the partial plan, the
requested output format), reconstructs what has been observed, asks the env's oracle which
steps remain done right, and then *decides like a fallible model*: each decision is right with
the skill's probability (lower as the prompt grows), may fall for a locally attractive trap,
may invent a tool, act on an unverified premise or stop early, and the text may come out
malformed. As a judge it sees how good a candidate looks, blurred by its noise; as a rollout it
imagines the outcome, optimistically. It returns text only; planners parse it with the same
parsers they use for a real model.

Nothing here names or detects a planner: the same request format gets the same treatment
whoever sends it, and every difference between planners comes from how many decisions they
ask for, with what information, and what they do with the answers.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from envs.oracle import (
    REPORT_UNREACHABLE,
    SUBMIT_ANSWER,
    GoldStep,
    Obs,
    Oracle,
    Ref,
    literal_args,
)
from envs.rng import derive_rng
from planners.formats import (
    FINISH,
    OutputParseError,
    dumps,
    error_kind,
    parse_action_turn,
    parse_candidates,
    parse_step_lines,
    render_candidates,
)
from planners.llm.base import Completion, Message, Request
from planners.llm.profiles import ModelProfile, SkillProfile
from planners.llm.tokens import count_messages

_STEP_ID = re.compile(r"\bstep_(\d+)\b")
# How good a candidate *looks* to a judge before its noise: a trap looks nearly right (that is
# what makes it a trap); an invented tool looks wrong. These describe candidates, not planners.
PERCEIVED = {
    "right": 0.9,
    "unchecked": 0.85,
    "fallback": 0.75,
    "trap": 0.65,
    "early": 0.4,
    "premise": 0.3,
    "other": 0.3,
    "invented": 0.05,
}
# Mistake kinds that make sense for one action (a Thought/Action turn or candidate) and for
# one step written into a plan.
ACTION_MISTAKES = ("hallucinate", "premise", "stop")
PLAN_MISTAKES = ("hallucinate", "premise", "stop", "dependency", "unchecked")


@lru_cache(maxsize=65_536)
def _read_action(content: str) -> tuple[str, dict[str, Any]] | None:
    """(tool, args) of one assistant turn; cached because a transcript is re-read each turn.
    The cached args are shared: the simulator only reads them."""
    try:
        turn = parse_action_turn(content)
    except OutputParseError:
        return None
    return turn.action, turn.action_input


@lru_cache(maxsize=65_536)
def _read_result(text: str) -> tuple[Any, str | None]:
    """(result, error kind) of one observation text (cached and shared like the above)."""
    kind = error_kind(text)
    if kind is not None:
        return None, kind
    try:
        return json.loads(text), None
    except json.JSONDecodeError:
        return text, None


def _transcript_observations(messages: Sequence[Message]) -> list[Obs]:
    """Observations of a Thought/Action transcript: an assistant action, then 'Observation: ...'."""
    out: list[Obs] = []
    pending: tuple[str, dict[str, Any]] | None = None
    for m in messages:
        if m["role"] == "assistant":
            pending = _read_action(m["content"])
        elif (
            m["role"] == "user" and pending is not None and m["content"].startswith("Observation:")
        ):
            text = m["content"][len("Observation:") :].strip()
            out.append(_obs(f"obs_{len(out)}", pending[0], pending[1], text))
            pending = None
    return out


def _obs(key: str, tool: str, args: Any, text: str, ok: bool | None = None) -> Obs:
    result, kind = _read_result(text)
    args = args if isinstance(args, dict) else {}
    if ok is False or kind is not None:
        return Obs(key, tool, args, None, kind or "error")
    return Obs(key, tool, args, result, None)


def _json_after(prompt: str, marker: str) -> Any:
    """The JSON value that follows ``marker`` in the prompt (None if absent or broken)."""
    at = prompt.find(marker)
    if at < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(prompt[at + len(marker) :].lstrip())
    except json.JSONDecodeError:
        return None
    return value


def _core(step: Any) -> tuple[Any, str, tuple[str, ...]]:
    if not isinstance(step, dict):
        return (None, "", ())
    deps = step.get("depends_on") or []
    deps = deps if isinstance(deps, list) else [deps]
    return (step.get("tool"), dumps(step.get("args") or {}), tuple(sorted(map(str, deps))))


@dataclass
class _Gold:
    """The right plan before anything ran, rendered as a model would write it."""

    gold: list[GoldStep]
    ids: dict[str, str]
    rendered: list[dict[str, Any]]
    traps: list[dict[str, Any] | None]
    cores: list[tuple[Any, str, tuple[str, ...]]]
    trap_cores: list[tuple[Any, str, tuple[str, ...]] | None]


class SimLLM:
    """A simulated LLM bound to one task's oracle (one instance per episode)."""

    name = "sim"

    def __init__(self, skill: SkillProfile, oracle: Oracle, *, seed_keys: tuple[object, ...]):
        self.skill = skill
        self.oracle = oracle
        self.seed_keys = seed_keys
        self.calls = 0
        self._initial: _Gold | None = None

    async def generate(
        self, messages: Sequence[Message], *, role: str, model: ModelProfile, request: Request
    ) -> Completion:
        rng = derive_rng(*self.seed_keys, "llm", request.digest, request.occurrence)
        self.calls += 1
        # The requested format is stated in the system message or the last message; a growing
        # transcript in between is only read when the request needs its observations.
        system = messages[0]["content"] if messages else ""
        last = messages[-1]["content"] if messages else ""
        err = self.skill.error_rate(count_messages(messages))
        if "candidate next actions" in last:
            text = self._propose_actions(messages, rng, err, last)
        elif "candidate next steps for the plan" in last:
            text = self._propose_steps(last, rng, err)
        elif "Rate each candidate" in last:
            text = self._rate_candidates(messages, rng)
        elif "Rate this plan" in last:
            text = self._rate_plan(last, rng)
        elif "Imagine carrying out" in last:
            text = self._rollout(last, rng)
        elif "Action Input:" in system and "Respond in exactly this format" in system:
            text = self._act(messages, rng, err)
        elif "Respond with a Plan JSON" in system:
            text = self._plan(last, rng, err)
        else:
            text = "I am not sure what is being asked."
        return Completion(text=text)

    # --- shared decision machinery ---------------------------------------------------------

    def _mistake(self, rng: random.Random, kinds: Sequence[str]) -> str:
        s = self.skill
        weights = {
            "hallucinate": s.w_hallucinate,
            "premise": s.w_premise,
            "stop": s.w_stop,
            "dependency": s.w_dependency,
            "unchecked": s.w_unchecked,
        }
        pool = [(k, weights[k]) for k in kinds if weights[k] > 0]
        if not pool:
            return "none"
        x = rng.random() * sum(w for _, w in pool)
        for kind, w in pool:
            x -= w
            if x < 0:
                return kind
        return pool[-1][0]

    def _guess(self, value: Any) -> Any:
        """A made-up value standing where a not-yet-known result should be."""
        if isinstance(value, Ref):
            tail = "_".join(value.path) or "data"
            return f"{value.key.split(':')[-1]}-{tail}"
        if isinstance(value, dict):
            return {k: self._guess(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._guess(v) for v in value]
        return value

    def _maybe_break(self, text: str, rng: random.Random, malformed: bool) -> str:
        if not malformed:
            return text
        cut = rng.randint(len(text) // 3, max(len(text) // 3, len(text) - 3))
        return text[:cut]

    def _option(
        self, kind: str, gold: list[GoldStep], obs: list[Obs], rng: random.Random
    ) -> tuple[str, dict[str, Any]] | None:
        """The action of one kind at this point, as (tool, literal args); None if none."""
        if not gold:
            return FINISH, {"answer": self.oracle.answer(obs) or "", "status": "success"}
        g = gold[0]
        if kind == "early":  # submit the figures seen so far, believing them enough
            return FINISH, {"answer": self.oracle.partial_answer(obs), "status": "success"}
        if g.tool == REPORT_UNREACHABLE:
            return (FINISH, {"answer": "", "status": "failure"}) if kind == "right" else None
        if kind == "right":
            return g.tool, literal_args(g.args, obs)
        if kind == "trap":
            attractive = g.trap or (g.trap_plan[0] if g.trap_plan else None)
            if attractive is None:
                return None
            if attractive.tool == SUBMIT_ANSWER:
                return self._option("early", gold, obs, rng)
            return attractive.tool, literal_args(attractive.args, obs)
        if kind == "fallback":
            return (g.fallback, literal_args(g.args, obs)) if g.fallback else None
        if kind == "invented":
            return rng.choice(self.oracle.hallucinated_tools()), literal_args(g.args, obs)
        if kind == "premise":
            ahead = gold[1] if len(gold) > 1 else g
            return ahead.tool, self._guess(ahead.args)
        if kind == "stop":
            return FINISH, {"answer": "", "status": "failure"}
        return None

    def _decide_action(
        self, gold: list[GoldStep], obs: list[Obs], rng: random.Random, err: float
    ) -> tuple[str, str, str, dict[str, Any]]:
        """One acting decision: (kind, thought, tool, args)."""
        kind = "right"
        if gold and gold[0].tool == REPORT_UNREACHABLE:
            kind = "early" if rng.random() < err else "right"  # may paper over the gap
        elif gold:
            g = gold[0]
            if (g.trap or g.trap_plan) and rng.random() < self.skill.p_trap:
                kind = "trap"
            elif rng.random() < err:
                mistake = self._mistake(rng, ACTION_MISTAKES)
                kind = {"hallucinate": "invented", "premise": "premise"}.get(mistake, "stop")
                if kind == "stop" and not (obs and obs[-1].error is not None):
                    kind = "early"  # without a failure to give up on, it stops by answering
        option = self._option(kind, gold, obs, rng)
        assert option is not None
        tool, args = option
        if not gold:
            thought = "The report is complete."
        elif tool == FINISH:
            reason = gold[0].args.get("reason", "")
            thought = {
                "right": f"The goal cannot be reached: {reason}.",
                "stop": "The tool keeps failing; I cannot complete this.",
            }.get(kind, "I have enough to answer.")
        else:
            thought = f"Next I need {tool} to make progress on the report."
        return kind, thought, tool, args

    # --- acting (one Thought/Action turn, or several candidate actions) ------------------

    def _act(self, messages: Sequence[Message], rng: random.Random, err: float) -> str:
        obs = _transcript_observations(messages)
        malformed = rng.random() < self.skill.p_malformed
        _, thought, tool, args = self._decide_action(self.oracle.remaining(obs), obs, rng, err)
        text = f"Thought: {thought}\nAction: {tool}\nAction Input: {dumps(args)}"
        return self._maybe_break(text, rng, malformed)

    def _propose_actions(
        self, messages: Sequence[Message], rng: random.Random, err: float, last: str
    ) -> str:
        k = int(m.group(1)) if (m := re.search(r"Propose (\d+)", last)) else 3
        obs = _transcript_observations(messages)
        gold = self.oracle.remaining(obs)
        _, thought, tool, args = self._decide_action(gold, obs, rng, err)
        chosen = [(thought, tool, args)]
        kinds = ["right", "trap", "fallback", "invented", "premise", "early"]
        others = [o for k in kinds if (o := self._option(k, gold, obs, rng)) is not None]
        rng.shuffle(others)
        for t, a in others:
            if len(chosen) >= k:
                break
            if all((t, a) != (c[1], c[2]) for c in chosen):
                chosen.append((f"Alternatively, {t}.", t, a))
        text = render_candidates(chosen)
        return self._maybe_break(text, rng, rng.random() < self.skill.p_malformed)

    def _action_kind(
        self, tool: str, args: dict[str, Any], gold: list[GoldStep], obs: list[Obs]
    ) -> str:
        """Which kind of move a candidate is (judging draws nothing: it only compares)."""
        if tool != FINISH and tool not in self.oracle.tool_names():
            return "invented"
        for kind in ("right", "trap", "fallback", "premise", "early"):
            option = self._option(kind, gold, obs, random.Random(0))
            if option is None or option[0] != tool:
                continue
            if option[1] == args or (tool == FINISH and option[1]["status"] == args.get("status")):
                return kind
        return "other"

    # --- planning (plans, partial plans) ---------------------------------------------------

    def _initial_gold(self) -> _Gold:
        """The right plan before anything ran; it never changes within an episode, and
        partial-plan requests compare against it many times, so it is built once."""
        if self._initial is None:
            gold = self.oracle.remaining([])
            ids = {g.key: f"step_{1 + i}" for i, g in enumerate(gold)}
            rendered = [self._render_step(g, ids) for g in gold]
            traps = [self._render_step(g.trap, ids) if g.trap else None for g in gold]
            self._initial = _Gold(
                gold,
                ids,
                rendered,
                traps,
                cores=[_core(r) for r in rendered],
                trap_cores=[_core(t) if t else None for t in traps],
            )
        return self._initial

    def _plan(self, prompt: str, rng: random.Random, err: float) -> str:
        log_part = prompt.split("Execution log:", 1)[1] if "Execution log:" in prompt else ""
        obs = [
            _obs(sid, tool, args, text, ok)
            for sid, tool, args, ok, text in parse_step_lines(log_part)
        ]
        gold = self.oracle.remaining(obs)
        if (
            gold
            and gold[0].trap_plan
            and gold[0].trap_plan[0].tool != SUBMIT_ANSWER
            and (rng.random() < self.skill.p_trap)
        ):
            gold = gold[0].trap_plan
        if gold and gold[0].tool == REPORT_UNREACHABLE:
            gold = []  # the honest plan for an unreachable goal: no steps
        used = [int(n) for n in _STEP_ID.findall(prompt)] if obs else []
        first = max(used, default=0) + 1
        ids = {g.key: f"step_{first + i}" for i, g in enumerate(gold)}
        steps: list[dict[str, Any]] = []
        for g in gold:
            rendered, stop = self._decide_step(g, ids, rng, err)
            if stop:
                break
            steps.append(rendered)
        plan = {"goal": getattr(getattr(self.oracle, "task", None), "goal", ""), "steps": steps}
        text = json.dumps(plan, ensure_ascii=False, indent=2)
        if rng.random() < self.skill.p_sloppy_json:
            text = "```json\n" + text.replace("\n  ]\n}", ",\n  ]\n}") + "\n```"
        return self._maybe_break(text, rng, rng.random() < self.skill.p_malformed)

    def _decide_step(
        self, g: GoldStep, ids: dict[str, str], rng: random.Random, err: float
    ) -> tuple[dict[str, Any], bool]:
        """One plan-step decision: (the step as written, whether the plan stops here)."""
        step = g
        if g.trap is not None and rng.random() < self.skill.p_trap:
            step = g.trap
        rendered = self._render_step(step, ids)
        if rng.random() < err:
            kind = self._mistake(rng, PLAN_MISTAKES)
            if kind == "hallucinate":
                rendered["tool"] = rng.choice(self.oracle.hallucinated_tools())
            elif kind == "premise":
                rendered["args"] = self._guess(step.args)
            elif kind == "stop":
                return rendered, True
            elif kind == "dependency" and rendered["depends_on"]:
                rendered["depends_on"] = []
                rendered["pre_conditions"] = []
            else:
                rendered["post_conditions"] = []
        return rendered, False

    def _render_step(self, g: GoldStep, ids: dict[str, str]) -> dict[str, Any]:
        def ref_text(value: Any) -> Any:
            if isinstance(value, Ref):
                sid = ids.get(value.key, value.key)
                path = ".".join(("result", *value.path))
                return "{{" + f"{sid}.{path}" + "}}"
            if isinstance(value, dict):
                return {k: ref_text(v) for k, v in value.items()}
            if isinstance(value, list):
                return [ref_text(v) for v in value]
            return value

        deps = [ids.get(d, d) for d in g.deps]
        return {
            "id": ids[g.key],
            "tool": g.tool,
            "args": ref_text(g.args),
            "depends_on": deps,
            "pre_conditions": [f"{d}.status == success" for d in deps],
            "post_conditions": list(g.post),
            "retry_limit": 3,
            "fallback": g.fallback,
        }

    def _step_kind(self, step: Any, i: int) -> str:
        """How step ``i`` of a written plan compares with the right plan."""
        init = self._initial_gold()
        if isinstance(step, dict) and step.get("done"):
            return "right" if i >= len(init.rendered) else "early"
        if not isinstance(step, dict) or i >= len(init.rendered):
            return "other"
        if step.get("tool") not in self.oracle.tool_names():
            return "invented"
        core = _core(step)
        if core == init.cores[i]:
            return "right" if step.get("post_conditions") else "unchecked"
        if core == init.trap_cores[i]:
            return "trap"
        fallback = init.rendered[i].get("fallback")
        if fallback and core[0] == fallback and core[1:] == init.cores[i][1:]:
            return "fallback"
        return "other"

    def _propose_steps(self, last: str, rng: random.Random, err: float) -> str:
        k = int(m.group(1)) if (m := re.search(r"Propose (\d+)", last)) else 3
        partial = _json_after(last, "Plan so far:")
        partial = partial if isinstance(partial, list) else []
        init = self._initial_gold()
        gold, ids, rendered, traps = init.gold, init.ids, init.rendered, init.traps
        i = len(partial)
        if i >= len(gold):
            primary: dict[str, Any] = {"done": True}
        else:
            primary, stop = self._decide_step(gold[i], ids, rng, err)
            if stop:
                primary = {"done": True}
        chosen = [primary]
        options: list[dict[str, Any]] = []
        if i < len(gold):
            options.append(rendered[i])
            if traps[i]:
                options.append(traps[i])  # type: ignore[arg-type]
            if rendered[i].get("fallback"):
                options.append({**rendered[i], "tool": rendered[i]["fallback"], "fallback": None})
            options.append({**rendered[i], "tool": rng.choice(self.oracle.hallucinated_tools())})
            options.append({"done": True})
        rng.shuffle(options)
        for o in options:
            if len(chosen) >= k:
                break
            if all(_core(o) != _core(c) or o.get("done") != c.get("done") for c in chosen):
                chosen.append(o)
        text = json.dumps(chosen, ensure_ascii=False, indent=1)
        return self._maybe_break(text, rng, rng.random() < self.skill.p_malformed)

    # --- judging and imagining ---------------------------------------------------------------

    def _noisy(self, value: float, rng: random.Random) -> float:
        return min(1.0, max(0.0, value + rng.gauss(0.0, self.skill.evaluator_noise)))

    def _plan_quality(self, steps: list[Any]) -> tuple[float, bool]:
        """(how good the plan looks, whether it would truly work as far as it goes)."""
        rendered = self._initial_gold().rendered
        kinds = [self._step_kind(s, i) for i, s in enumerate(steps)]
        # a plan is as viable as its weakest step: one invented tool sinks it
        looks = min((PERCEIVED[k] for k in kinds), default=PERCEIVED["right"])
        if kinds and kinds[-1] == "early":  # declared complete too soon: visibly incomplete
            looks = PERCEIVED["early"] * min(1.0, (len(kinds) - 1) / max(len(rendered), 1))
        sound = all(k in ("right", "unchecked") for k in kinds)
        return looks, sound

    def _rate_candidates(self, messages: Sequence[Message], rng: random.Random) -> str:
        last = messages[-1]["content"]
        partial = _json_after(last, "Plan so far:")
        lines = []
        if isinstance(partial, list):  # candidate plan steps
            cands = [
                _json_after(block, ":") for block in re.split(r"\n(?=Candidate \d+:)", last)[1:]
            ]
            for n, cand in enumerate(cands, 1):
                looks, _ = self._plan_quality([*partial, cand])
                lines.append(f"Score {n}: {self._noisy(looks, rng):.2f}")
        else:  # candidate actions
            obs = _transcript_observations(messages)
            gold = self.oracle.remaining(obs)
            for n, turn in enumerate(parse_candidates(last), 1):
                kind = self._action_kind(turn.action, turn.action_input, gold, obs)
                lines.append(f"Score {n}: {self._noisy(PERCEIVED[kind], rng):.2f}")
        return "\n".join(lines)

    def _rate_plan(self, last: str, rng: random.Random) -> str:
        plan = _json_after(last, "Plan:")
        steps = plan.get("steps") if isinstance(plan, dict) else None
        if not isinstance(steps, list):
            return f"Score: {self._noisy(PERCEIVED['invented'], rng):.2f}"
        rendered = self._initial_gold().rendered
        looks, _ = self._plan_quality(steps)
        looks *= min(1.0, len(steps) / max(len(rendered), 1))  # a truncated plan looks worse
        return f"Score: {self._noisy(looks, rng):.2f}"

    def _rollout(self, last: str, rng: random.Random) -> str:
        partial = _json_after(last, "Plan so far:")
        steps = partial if isinstance(partial, list) else []
        _, sound = self._plan_quality(steps)
        success = sound or rng.random() < self.skill.rollout_optimism
        return f"Outcome: {'success' if success else 'failure'}"

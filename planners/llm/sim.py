"""The offline simulated LLM: a seeded model of an LLM's per-decision skill over a world.

It reads the prompt it is given (the transcript, the execution log, the requested output
format), reconstructs what has been observed, asks the env's oracle which steps remain done
right, and then *decides like a fallible model*: each decision is right with the skill's
probability (lower as the prompt grows), may fall for a locally attractive trap, may invent a
tool, act on an unverified premise or stop early, and the text may come out malformed. It
returns text only; planners parse it with the same parsers they use for a real model.

Nothing here names or detects a planner: the same request format gets the same treatment
whoever sends it, and every difference between planners comes from how many decisions they
ask for, with what information, and what they do with the answers.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from typing import Any

from envs.oracle import GoldStep, Obs, Oracle, Ref, literal_args
from envs.rng import derive_rng
from planners.formats import (
    FINISH,
    OutputParseError,
    dumps,
    error_kind,
    parse_react,
    parse_step_lines,
)
from planners.llm.base import Completion, Message
from planners.llm.profiles import ModelProfile, SkillProfile
from planners.llm.tokens import count_messages

_STEP_ID = re.compile(r"\bstep_(\d+)\b")


def _transcript_observations(messages: Sequence[Message]) -> list[Obs]:
    """Observations of a ReAct-style transcript: an assistant action, then 'Observation: ...'."""
    out: list[Obs] = []
    pending: tuple[str, dict[str, Any]] | None = None
    for m in messages:
        if m["role"] == "assistant":
            try:
                turn = parse_react(m["content"])
                pending = (turn.action, turn.action_input)
            except OutputParseError:
                pending = None
        elif (
            m["role"] == "user" and pending is not None and m["content"].startswith("Observation:")
        ):
            text = m["content"][len("Observation:") :].strip()
            out.append(_obs(f"obs_{len(out)}", pending[0], pending[1], text))
            pending = None
    return out


def _obs(key: str, tool: str, args: Any, text: str, ok: bool | None = None) -> Obs:
    kind = error_kind(text)
    if ok is False or kind is not None:
        return Obs(key, tool, args if isinstance(args, dict) else {}, None, kind or "error")
    try:
        result = json.loads(text)
    except json.JSONDecodeError:
        result = text
    return Obs(key, tool, args if isinstance(args, dict) else {}, result, None)


class SimLLM:
    """A simulated LLM bound to one task's oracle (one instance per episode)."""

    name = "sim"

    def __init__(self, skill: SkillProfile, oracle: Oracle, *, seed_keys: tuple[object, ...]):
        self.skill = skill
        self.oracle = oracle
        self.seed_keys = seed_keys
        self.calls = 0

    async def generate(
        self, messages: Sequence[Message], *, role: str, model: ModelProfile
    ) -> Completion:
        rng = derive_rng(*self.seed_keys, "llm", self.calls)
        self.calls += 1
        prompt = "\n".join(m["content"] for m in messages)
        err = self.skill.error_rate(count_messages(messages))
        if "Action Input:" in prompt and "Respond in exactly this format" in prompt:
            text = self._react(messages, rng, err)
        elif "Respond with a Plan JSON" in prompt:
            text = self._plan(prompt, rng, err)
        elif "Score:" in prompt:
            text = self._score(prompt, rng)
        else:
            text = "I am not sure what is being asked."
        return Completion(text=text)

    # --- decisions ---------------------------------------------------------------------

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
        total = sum(w for _, w in pool)
        x = rng.random() * total
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

    def _react(self, messages: Sequence[Message], rng: random.Random, err: float) -> str:
        obs = _transcript_observations(messages)
        gold = self.oracle.remaining(obs)
        last_error = obs[-1].error if obs else None
        malformed = rng.random() < self.skill.p_malformed
        if not gold:
            action, args, thought = (
                FINISH,
                {"answer": self.oracle.answer(obs) or "", "status": "success"},
                "The report is complete.",
            )
        else:
            step = gold[0]
            thought = f"Next I need {step.tool} to make progress on the report."
            attractive = step.trap or (step.trap_plan[0] if step.trap_plan else None)
            if attractive is not None and rng.random() < self.skill.p_trap:
                step = attractive
                if step.tool == FINISH:  # submit what it has, believing it done
                    return self._maybe_break(
                        "Thought: The report is written.\n"
                        f"Action: {FINISH}\nAction Input: "
                        + dumps({"answer": self.oracle.partial_answer(obs), "status": "success"}),
                        rng, malformed)
            elif rng.random() < err:
                kind = self._mistake(rng, ("hallucinate", "premise", "stop"))
                if kind == "hallucinate":
                    fakes = self.oracle.hallucinated_tools()
                    step = GoldStep(step.key, rng.choice(fakes), step.args)
                elif kind == "premise":
                    ahead = gold[1] if len(gold) > 1 else step
                    step = GoldStep(ahead.key, ahead.tool, self._guess(ahead.args))
                elif kind == "stop":
                    if last_error is not None:
                        return self._maybe_break(
                            "Thought: The tool keeps failing; I cannot complete this.\n"
                            f"Action: {FINISH}\nAction Input: "
                            + dumps({"answer": "", "status": "failure"}),
                            rng,
                            malformed,
                        )
                    return self._maybe_break(
                        "Thought: I have enough to answer.\n"
                        f"Action: {FINISH}\nAction Input: "
                        + dumps({"answer": self.oracle.partial_answer(obs), "status": "success"}),
                        rng,
                        malformed,
                    )
            action = step.tool
            args = literal_args(step.args, obs)
        text = f"Thought: {thought}\nAction: {action}\nAction Input: {dumps(args)}"
        return self._maybe_break(text, rng, malformed)

    def _maybe_break(self, text: str, rng: random.Random, malformed: bool) -> str:
        if not malformed:
            return text
        cut = rng.randint(len(text) // 3, max(len(text) // 3, len(text) - 3))
        return text[:cut]

    def _plan(self, prompt: str, rng: random.Random, err: float) -> str:
        log_part = prompt.split("Execution log:", 1)[1] if "Execution log:" in prompt else ""
        obs = [
            _obs(sid, tool, args, text, ok)
            for sid, tool, args, ok, text in parse_step_lines(log_part)
        ]
        gold = self.oracle.remaining(obs)
        if gold and gold[0].trap_plan and gold[0].trap_plan[0].tool != FINISH and (
            rng.random() < self.skill.p_trap
        ):
            gold = gold[0].trap_plan
        used = [int(n) for n in _STEP_ID.findall(prompt)] if obs else []
        first = max(used, default=0) + 1
        ids = {g.key: f"step_{first + i}" for i, g in enumerate(gold)}
        steps: list[dict[str, Any]] = []
        for g in gold:
            step = g
            if g.trap is not None and rng.random() < self.skill.p_trap:
                step = g.trap
            rendered = self._render_step(step, ids)
            if rng.random() < err:
                kind = self._mistake(
                    rng, ("hallucinate", "premise", "stop", "dependency", "unchecked")
                )
                if kind == "hallucinate":
                    rendered["tool"] = rng.choice(self.oracle.hallucinated_tools())
                elif kind == "premise":
                    rendered["args"] = self._guess(step.args)
                elif kind == "stop":
                    break
                elif kind == "dependency" and rendered["depends_on"]:
                    rendered["depends_on"] = []
                    rendered["pre_conditions"] = []
                else:
                    rendered["post_conditions"] = []
            steps.append(rendered)
        plan = {"goal": getattr(getattr(self.oracle, "task", None), "goal", ""), "steps": steps}
        text = json.dumps(plan, ensure_ascii=False, indent=2)
        if rng.random() < self.skill.p_sloppy_json:
            text = "```json\n" + text.replace("\n  ]\n}", ",\n  ]\n}") + "\n```"
        return self._maybe_break(text, rng, rng.random() < self.skill.p_malformed)

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

    def _score(self, prompt: str, rng: random.Random) -> str:
        return f"Score: {min(1.0, max(0.0, 0.5 + rng.gauss(0, self.skill.evaluator_noise))):.2f}"

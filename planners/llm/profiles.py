"""Skill profiles (how often a simulated model decides well) and model profiles (time, price).

A skill profile holds *per-decision* probabilities of an LLM, never anything about a planner:
every decision any planner asks for draws from the same numbers. A model profile holds what a
serving stack costs: time to first token, decode speed, prefill speed, and price per token.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SkillProfile(BaseModel):
    """Per-decision behaviour of a simulated LLM."""

    model_config = ConfigDict(extra="forbid")

    name: str = "custom"
    p_correct: float = Field(0.97, ge=0, le=1)  # picks the right next action / plan step
    context_scale_tokens: float = Field(4000, gt=0)  # error rate grows by 1x per this many
    # prompt tokens (long contexts degrade decisions)
    p_trap: float = Field(0.25, ge=0, le=1)  # falls for a locally attractive dead end
    w_hallucinate: float = Field(1.0, ge=0)  # among wrong decisions: invents a tool
    w_premise: float = Field(1.0, ge=0)  # ... acts on an unverified premise (guessed argument)
    w_stop: float = Field(1.0, ge=0)  # ... stops early (gives up after an error / finishes)
    w_dependency: float = Field(1.0, ge=0)  # ... in a plan: forgets a dependency
    w_unchecked: float = Field(1.0, ge=0)  # ... in a plan: omits a step's post-conditions
    # the first three for a step written into a plan, where a model's mistakes differ from
    # those it makes choosing one action (None: the shared weight above)
    w_hallucinate_plan: float | None = Field(None, ge=0)  # a plan step invents a tool
    w_premise_plan: float | None = Field(None, ge=0)  # ... takes a guessed argument
    w_stop_plan: float | None = Field(None, ge=0)  # ... ends the plan early
    w_other: float = Field(0.0, ge=0)  # ... calls another tool of the env than the right
    # one, with the right step's arguments: a wrong call that still runs, and the world
    # answers it (0: not on offer, and nothing is drawn for it)
    w_other_plan: float | None = Field(None, ge=0)  # ... the same for a plan step
    p_malformed: float = Field(0.01, ge=0, le=1)  # output that no parser can repair (every
    # answer but a plan asked as text: a Plan JSON, an Action Input, scores, steps)
    # the same per output format, where a model differs by what it is asked to write (None:
    # p_malformed); a judge's scores and a reflection keep p_malformed
    p_malformed_action: float | None = Field(None, ge=0, le=1)  # a ReAct turn
    p_malformed_candidates: float | None = Field(None, ge=0, le=1)  # candidate actions
    p_malformed_plan: float | None = Field(None, ge=0, le=1)  # a Plan JSON (plan, replan)
    p_malformed_replan: float | None = Field(None, ge=0, le=1)  # a Plan JSON revising the
    # steps that remain after a failure (None: p_malformed_plan)
    p_malformed_steps: float | None = Field(None, ge=0, le=1)  # candidate next plan steps
    malformed_persistence: float = Field(0.0, ge=0, le=1)  # a later answer in the same
    # format in an episode comes out broken (or not) as the last one did, else draws afresh:
    # the rate over answers stays the format's; 0: every answer draws afresh
    # the same per output format (None: malformed_persistence; a replan: the plan's)
    malformed_persistence_action: float | None = Field(None, ge=0, le=1)
    malformed_persistence_candidates: float | None = Field(None, ge=0, le=1)
    malformed_persistence_plan: float | None = Field(None, ge=0, le=1)
    malformed_persistence_replan: float | None = Field(None, ge=0, le=1)
    malformed_persistence_steps: float | None = Field(None, ge=0, le=1)
    p_sloppy_json: float = Field(0.05, ge=0, le=1)  # JSON in code fences / trailing commas
    p_malformed_text: float = Field(0.01, ge=0, le=1)  # a plan asked as text (plan_format
    # text) comes out as one run-on paragraph, no numbered steps: no reader can use it
    p_sloppy_text: float = Field(0.05, ge=0, le=1)  # a text plan half-follows its format
    # (markdown, "Step n:" headers, label synonyms): read leniently, counted as repaired
    p_prose_condition: float = Field(0.0, ge=0, le=1)  # a pre- or post-condition of a plan
    # step written in words, not as an expression the executor can evaluate (each condition
    # written); the executor refuses it: plan_logic_error, as for a real model's
    p_restart_ids: float = Field(0.0, ge=0, le=1)  # a plan written after steps ran or failed
    # numbers its steps from step_1 again, reusing ids the log shows; the executor refuses a
    # replan that reuses an executed id: plan_logic_error, as for a real model's
    p_invent_fallback: float = Field(0.0, ge=0, le=1)  # a plan step's fallback names a tool
    # the catalogue lacks (one draw a step an episode, whether or not the step has a
    # fallback); the plan reader refuses the plan (unknown_fallback), as a real model's
    p_answer_garbled: float = Field(0.0, ge=0, le=1)  # a final answer the model writes
    # itself (a finish with status success) states a fact of the task wrongly: its figures
    # off by a decimal place (Decider's ``garbled``); a plan's answer is the answer tool's
    # result, never written by the model, and keeps its facts
    p_same_answer: float = Field(0.0, ge=0, le=1)  # a prompt asked again in the episode gets
    # the very answer it got the first time (a model decoding greedily, at temperature 0,
    # on a server that repeats itself); else a fresh sample. 0: every asking is a sample
    evaluator_noise: float = Field(0.1, ge=0)  # sd of the judge's score noise (grows with
    # the prompt like the error rate)
    rollout_optimism: float = Field(0.3, ge=0, le=1)  # a simulated rollout assumes success
    p_miss_signal: float = Field(0.3, ge=0, le=1)  # overlooks a subtle warning sign in an
    # observation (a stale date, a null field) and takes it at face value
    p_persist: float = Field(0.3, ge=0, le=1)  # after a failed action, repeats it rather
    # than changing course (commitment to the current line)
    systematic_share: float = Field(0.5, ge=0, le=1)  # share of the error rate that is a
    # wrong *belief* at the decision point (shared by proposer and judge, not fixed by
    # sampling again) rather than a sampling slip (fixed by sampling again)
    # The mechanisms by which search, checks and reflection can pay (docs/simulator.md,
    # "Mechanisms"); their defaults are neutral middles that experiment=sensitivity sweeps.
    judge_correlation: float = Field(0.5, ge=0, le=1)  # how much a judge's view of a
    # candidate is the proposer's belief (1: it reads that belief; 0: its own view alone)
    judge_accuracy: float = Field(0.75, ge=0, le=1)  # the judge's own view prefers the
    # right option at a decision point with this chance (0.75 = 1 - the default p_trap)
    sample_diversity: float = Field(0.5, ge=0, le=1)  # a further sample of the same
    # decision (another candidate, the same prompt again) departs from the preferred option
    check_coverage: float = Field(0.5, ge=0, le=1)  # a step's written post-conditions
    # cover a given way its result can be wrong (one check of its pool)
    precondition_coverage: float = Field(0.5, ge=0, le=1)  # a plan step's written
    # pre-conditions include a given world fact it needs, and it names its fallback tool
    reflection_gain: float = Field(0.5, ge=0, le=1)  # a reflection in view corrects a wrong
    # belief at a later decision point

    def error_rate(self, prompt_tokens: int) -> float:
        """Chance a decision is wrong, growing with the prompt's length."""
        return min(0.95, (1.0 - self.p_correct) * (1.0 + prompt_tokens / self.context_scale_tokens))

    def resolved(self, field: str) -> float:
        """A field's value; an optional field left unset (:data:`SHARED`) takes its shared
        field's."""
        own = getattr(self, field)
        return self.resolved(SHARED[field]) if own is None else own

    def malformed_rate(self, output_format: str | None = None) -> float:
        """The chance an answer in ``output_format`` (:data:`MALFORMED_FORMATS`) comes out
        beyond repair: its own field when set, else ``p_malformed``."""
        return self.resolved(MALFORMED_FORMATS.get(output_format or "", "p_malformed"))

    def persistence(self, output_format: str | None = None) -> float:
        """The chance an answer in ``output_format`` is broken, or not, as the last one in
        that format was (:data:`PERSISTENCE_FORMATS`): its own field when set, else the one
        it falls back to."""
        return self.resolved(PERSISTENCE_FORMATS.get(output_format or "", "malformed_persistence"))

    def judge_noise(self, prompt_tokens: int) -> float:
        """The judge's noise, growing with the prompt's length like the error rate."""
        return self.evaluator_noise * (1.0 + prompt_tokens / self.context_scale_tokens)

    def scaled(self, factor: float) -> SkillProfile:
        """The same model family, ``factor`` times as error-prone (a smaller model): every
        error probability is multiplied (capped at 1), noise and optimism too."""
        if factor == 1.0:
            return self

        def up(p: float) -> float:
            return min(1.0, p * factor)

        own = {f: up(v) for f in MALFORMED_FORMATS.values() if (v := getattr(self, f)) is not None}

        return self.model_copy(
            update={
                "name": f"{self.name}x{factor:g}",
                "p_correct": max(0.0, 1.0 - (1.0 - self.p_correct) * factor),
                "p_trap": up(self.p_trap),
                "p_malformed": up(self.p_malformed),
                **own,
                "p_sloppy_json": up(self.p_sloppy_json),
                "p_malformed_text": up(self.p_malformed_text),
                "p_sloppy_text": up(self.p_sloppy_text),
                "p_prose_condition": up(self.p_prose_condition),
                "p_restart_ids": up(self.p_restart_ids),
                "p_invent_fallback": up(self.p_invent_fallback),
                "p_answer_garbled": up(self.p_answer_garbled),
                "evaluator_noise": self.evaluator_noise * factor,
                "rollout_optimism": up(self.rollout_optimism),
                "p_miss_signal": up(self.p_miss_signal),
                "p_persist": up(self.p_persist),
                "judge_accuracy": max(0.0, 1.0 - (1.0 - self.judge_accuracy) * factor),
                "check_coverage": max(0.0, 1.0 - (1.0 - self.check_coverage) * factor),
                "precondition_coverage": max(
                    0.0, 1.0 - (1.0 - self.precondition_coverage) * factor
                ),
            }
        )


MALFORMED_FORMATS: dict[str, str] = {
    "action": "p_malformed_action",
    "candidates": "p_malformed_candidates",
    "plan_json": "p_malformed_plan",
    "replan_json": "p_malformed_replan",
    "steps_json": "p_malformed_steps",
}
"""Each output format with its own malformed rate, to its skill field (calibration's names)."""
PERSISTENCE_FORMATS: dict[str, str] = {
    fmt: field.replace("p_malformed", "malformed_persistence")
    for fmt, field in MALFORMED_FORMATS.items()
}
"""Each output format with its own malformed persistence, to its skill field."""


PLAN_WEIGHTS: dict[str, str] = {
    "w_hallucinate_plan": "w_hallucinate",
    "w_premise_plan": "w_premise",
    "w_stop_plan": "w_stop",
    "w_other_plan": "w_other",
}
"""Each plan step's own mistake weight, to the shared weight it takes when unset."""
SHARED: dict[str, str] = {
    **{f: "p_malformed" for f in MALFORMED_FORMATS.values()},
    "p_malformed_replan": "p_malformed_plan",  # a replan is a plan first
    **{f: "malformed_persistence" for f in PERSISTENCE_FORMATS.values()},
    "malformed_persistence_replan": "malformed_persistence_plan",
    **PLAN_WEIGHTS,
}
"""Every optional skill field, to the field whose value it takes when unset."""


SKILLS: dict[str, SkillProfile] = {
    "perfect": SkillProfile(
        name="perfect",
        p_correct=1.0,
        p_trap=0.0,
        p_malformed=0.0,
        p_sloppy_json=0.0,
        p_malformed_text=0.0,
        p_sloppy_text=0.0,
        evaluator_noise=0.0,
        rollout_optimism=0.0,
        p_miss_signal=0.0,
        p_persist=0.0,
        judge_correlation=1.0,
        judge_accuracy=1.0,
        sample_diversity=0.0,
        check_coverage=1.0,
        precondition_coverage=1.0,
        reflection_gain=1.0,
    ),
    "strong": SkillProfile(name="strong"),
    "weak": SkillProfile(
        name="weak",
        p_correct=0.9,
        p_trap=0.5,
        p_malformed=0.04,
        p_sloppy_json=0.15,
        p_malformed_text=0.04,
        p_sloppy_text=0.15,
        evaluator_noise=0.3,
        rollout_optimism=0.6,
        p_miss_signal=0.5,
        p_persist=0.5,
        judge_accuracy=0.6,
        check_coverage=0.3,
        precondition_coverage=0.3,
        reflection_gain=0.3,
    ),
    # Decisions as strong's, JSON often broken, prose as strong's: p_malformed 0.17 is the
    # share of JSON outputs that failed their format in StructuredRAG (Shorten et al., 2024:
    # 82.55 % success on average over 24 experiments); p_sloppy_json 0.5 is a neutral middle.
    "weak_json": SkillProfile(name="weak_json", p_malformed=0.17, p_sloppy_json=0.5),
}
# A reasoning model: every error probability half of strong's (the neutral middle between
# strong and perfect; no measurement of these quantities exists). Its extra completion
# tokens and time per call are the model profile's ``reasoning_tokens`` (llm=sim_reasoning).
SKILLS["reasoning"] = SKILLS["strong"].scaled(0.5).model_copy(update={"name": "reasoning"})


class ModelProfile(BaseModel):
    """Latency and price of one served model."""

    model_config = ConfigDict(extra="forbid")

    name: str
    ttft_s: float = Field(0.5, ge=0)
    s_per_output_token: float = Field(0.012, ge=0)
    s_per_input_token: float = Field(0.00004, ge=0)
    usd_per_mtok_input: float = Field(2.5, ge=0)
    usd_per_mtok_output: float = Field(10.0, ge=0)
    error_scale: float = Field(1.0, ge=0)  # simulated LLM only: this model's error
    # probabilities are the skill profile's times this (a cheaper model is a weaker one)
    reasoning_tokens: int = Field(0, ge=0, strict=True)  # hidden reasoning a reasoning
    # model generates before every answer: charged as completion tokens (time and price),
    # never part of the answer's text

    def latency(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            self.ttft_s
            + prompt_tokens * self.s_per_input_token
            + completion_tokens * self.s_per_output_token
        )

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.usd_per_mtok_input + completion_tokens * self.usd_per_mtok_output
        ) / 1e6

"""Whether an env's tasks can be solved from what a model is shown (a check for env authors).

A real model sees the system prompt (each tool's signature line with its description), the
task's goal and the observations of its own calls; the simulated LLM reads the oracle, which
knows everything. A family whose tool needs a value that only the oracle knows (an exact
``approach`` name shown nowhere) is solved by the simulator and by no real model, and its
numbers measure nothing. This check finds such values before a run does.

The reference agent is no LLM: it follows the oracle's gold steps for *structure* (which tool
next) but every argument value it passes must be **visible**: shown (after light
normalisation: case, punctuation and spacing between words; letters and digits apart, so
``FY2025`` shows ``2025``; numbers as written) in the goal, in the tool catalogue or in an
earlier observation of the episode (any string, number or key of a result, any error
message). A value built by the oracle's placeholders from an earlier result (a ``Ref``, a
``{dep_result}``) is visible. A free-text argument (a search ``query``, a ``question``) is
written in the model's own words: it is visible when it is shown whole, or when none of its
words is a number not shown or a word of the task's hidden ground truth not shown.

The calls run against the env's tools without faults; the answer is the answer tool's text;
the env's grader judges it. A task fails when a value was not visible (the task, tool,
argument and value are named) or when the graded outcome is not a success.

    python -m planarena.envs.solvability [--env NAME_OR_PATH ...] [--n-tasks N] [--seed S]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from planarena.envs import clock
from planarena.envs.base import COMPLEXITIES, Env, EpisodeTools, Grade, Task
from planarena.envs.family.env import FAMILIES_DIR, FamilyEnv
from planarena.envs.oracle import REPORT_UNREACHABLE, SUBMIT_ANSWER, GoldStep, Obs, literal_args
from planarena.envs.tools import ToolError

# Arguments a model writes in its own words (the world reads them as text, not as a key).
FREE_TEXT_ARGS = frozenset({"query", "question"})
# Where an answer tool's result carries the answer's text.
ANSWER_FIELDS = ("answer", "summary")
PSEUDO_TOOLS = (REPORT_UNREACHABLE, SUBMIT_ANSWER)
DEP_RESULT = "{dep_result}"
MAX_CALLS = 200  # the longest gold walk is some 30 calls; more means the oracle is stuck
EXAMPLES_DIR = FAMILIES_DIR / "examples"
CONFIGS_DIR = Path(__file__).resolve().parent.parent / "configs" / "env"
# `file` runs examples/stock_check.yaml by default: checked once, as the example
SKIPPED_CONFIGS = frozenset({"file"})

_TOKEN = re.compile(r"[a-z]+|\d+(?:\.\d+)?")


def tokens(text: str) -> list[str]:
    """A text's words and numbers, lower case: the light normalisation of visibility."""
    return _TOKEN.findall(text.lower())


def _leaves(value: Any, keys: bool) -> Iterator[Any]:
    """Every string and number inside ``value`` (dict keys too when ``keys``)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if keys:
                yield k
            yield from _leaves(v, keys)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _leaves(v, keys)
    elif isinstance(value, str) or (isinstance(value, int | float) and not isinstance(value, bool)):
        yield value


class Seen:
    """What the model has been shown so far, as word sequences (one per text it read)."""

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self.chunks: list[str] = []
        self.words: set[str] = set()
        for text in texts:
            self.add_text(text)

    def add_text(self, text: str) -> None:
        words = tokens(text)
        if words:
            self.chunks.append(f" {' '.join(words)} ")
            self.words.update(words)

    def add(self, value: Any) -> None:
        """Everything an observation shows: its strings, numbers and keys."""
        for leaf in _leaves(value, keys=True):
            self.add_text(str(leaf))

    def shows(self, text: str) -> bool:
        """Whether ``text``'s words appear, in order and together, in one text shown."""
        words = tokens(text)
        if not words:
            return True
        needle = f" {' '.join(words)} "
        return any(needle in chunk for chunk in self.chunks)


@dataclass(frozen=True)
class Hidden:
    """An argument value the agent needed and had not been shown."""

    tool: str
    arg: str
    value: Any

    def __str__(self) -> str:
        return f"{self.tool}.{self.arg}={self.value!r} not visible"


@dataclass
class TaskCheck:
    """One task's verdict: the values it could not see, and the graded outcome."""

    task_id: str
    complexity: str
    hidden: list[Hidden] = field(default_factory=list)
    left_out: list[Hidden] = field(default_factory=list)  # words a free-text value lacks
    grade: Grade | None = None
    problem: str = ""  # the walk could not finish (the oracle stuck or gave up)

    @property
    def solved(self) -> bool:
        return (
            not self.hidden and not self.problem and self.grade is not None and self.grade.success
        )

    def reason(self) -> str:
        """Why the task failed, in one line (empty when solved)."""
        parts = [str(h) for h in self.hidden]
        if not self.solved:  # a query without them may still work: then they do not matter
            parts += [
                f"{h.tool}.{h.arg}: left out {h.value!r} (not visible)" for h in self.left_out
            ]
        if self.problem:
            parts.append(self.problem)
        if self.grade is not None and not self.grade.success:
            trap = ", a trap's value in the answer" if self.grade.trap_in_answer else ""
            parts.append(f"graded not a success ({self.grade.detail}{trap})")
        return "; ".join(parts)


def ground_words(task: Task) -> set[str]:
    """The words of the task's hidden ground truth (what only the oracle reads)."""
    return {w for leaf in _leaves(task.world, keys=False) for w in tokens(str(leaf))}


def _visible(value: Any, seen: Seen) -> bool:
    """Whether a literal value (a placeholder's part left out: it is filled) was shown."""
    if isinstance(value, str):
        return all(seen.shows(p) for p in value.split(DEP_RESULT))
    if isinstance(value, dict | list | tuple):
        return all(_visible(v, seen) for v in _leaves(value, keys=False))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return seen.shows(str(value))
    return True  # true, false, null; a Ref (a placeholder for an earlier result)


def own_words(text: str, seen: Seen, hidden_words: set[str]) -> tuple[str, list[str]]:
    """A free-text value as a model can write it, and the words it leaves out: any word of
    its own, but no number it was not shown and no ground-truth word it was not shown."""
    if seen.shows(text.replace(DEP_RESULT, " ")):
        return text, []
    kept, left = [], []
    for piece in text.split():
        words = [w for w in tokens(piece) if w not in seen.words]
        if DEP_RESULT in piece or not any(w[0].isdigit() or w in hidden_words for w in words):
            kept.append(piece)
        else:
            left.append(piece)
    return " ".join(kept), left


def written_args(
    step: GoldStep, seen: Seen, hidden_words: set[str], check: TaskCheck
) -> dict[str, Any]:
    """The step's args as the agent writes them; what it could not see goes on ``check``."""
    args = dict(step.args)
    for name, value in step.args.items():
        if name in FREE_TEXT_ARGS and isinstance(value, str):
            args[name], left = own_words(value, seen, hidden_words)
            if left:
                check.left_out.append(Hidden(step.tool, name, " ".join(left)))
        elif not _visible(value, seen):
            check.hidden.append(Hidden(step.tool, name, value))
    return args


def _dep_text(step: GoldStep, observations: Sequence[Obs]) -> str:
    """What ``{dep_result}`` is filled with: the dependencies' results, one a line (as the
    plan executor fills it)."""
    by_key = {o.key: o.result for o in observations if o.error is None}
    texts = []
    for dep in step.deps:
        value = by_key.get(dep)
        texts.append(value if isinstance(value, str) else json.dumps(value, default=str))
    return "\n".join(texts)


def call_args(step: GoldStep, observations: Sequence[Obs]) -> dict[str, Any]:
    """The literal args of a gold step: Refs and ``{dep_result}`` filled from observations."""
    args = literal_args(step.args, observations)
    if not any(isinstance(v, str) and DEP_RESULT in v for v in args.values()):
        return args
    text = _dep_text(step, observations)
    return {k: v.replace(DEP_RESULT, text) if isinstance(v, str) else v for k, v in args.items()}


async def _call(tools: EpisodeTools, tool: str, args: dict[str, Any]) -> tuple[Any, str | None]:
    """One call: its result, or the error text a model reads and the error's kind."""
    try:
        return await tools.toolbox.call(tool, args), None
    except ToolError as err:
        return err.observation(), err.kind


def answer_text(observations: Sequence[Obs]) -> str | None:
    """The final answer: the text of the last successful answer tool's result."""
    for o in reversed(observations):
        if o.error is None and isinstance(o.result, dict):
            for name in ANSWER_FIELDS:
                if isinstance(o.result.get(name), str):
                    return str(o.result[name])
    return None


async def _walk(env: Env, task: Task, check: TaskCheck) -> tuple[list[Obs], EpisodeTools]:
    """Follow the oracle's structure with visible values only; note what was not visible."""
    tools = env.make_tools(task, rules=[], seed_keys=(0, task.env, task.task_id))
    oracle = env.oracle(task)
    seen = Seen([task.goal, *(spec.signature() for spec in tools.toolbox.catalogue())])
    hidden_words = ground_words(task)
    observations: list[Obs] = []
    for i in range(MAX_CALLS):
        steps = oracle.remaining(observations)
        if not steps:
            return observations, tools
        step = steps[0]
        if step.tool in PSEUDO_TOOLS:
            check.problem = f"the oracle's next step is {step.tool}"
            return observations, tools
        written = replace(step, args=written_args(step, seen, hidden_words, check))
        args = call_args(written, observations)
        result, error = await _call(tools, step.tool, args)
        seen.add(result)
        observations.append(Obs(f"o{i}", step.tool, args, result, error))
    check.problem = f"no answer after {MAX_CALLS} calls"
    return observations, tools


def check_task(env: Env, task: Task) -> TaskCheck:
    """Walk one task with visible values only and grade the answer it ends with."""
    check = TaskCheck(task.task_id, task.complexity)

    async def run() -> tuple[list[Obs], EpisodeTools]:
        with clock.use_clock(clock.SimClock()):
            return await _walk(env, task, check)

    observations, tools = asyncio.run(run())
    check.grade = env.grade(task, answer_text(observations), tools.log.records)
    return check


@dataclass
class EnvCheck:
    """One env's verdicts at one complexity."""

    env: str
    complexity: str
    tasks: list[TaskCheck]

    @property
    def failures(self) -> list[TaskCheck]:
        return [t for t in self.tasks if not t.solved]


def check_env(env: Env, *, n_tasks: int = 5, seed: int = 0) -> list[EnvCheck]:
    """Every complexity of an env, ``n_tasks`` reachable tasks each."""
    out = []
    for complexity in COMPLEXITIES:
        tasks = env.generate(n_tasks, seed=seed, complexity=complexity, unreachable_rate=0.0)
        out.append(EnvCheck(str(env.name), complexity, [check_task(env, t) for t in tasks]))
    return out


def default_envs() -> list[str]:
    """Every env a run can name (its config group), then every YAML example."""
    configs = sorted(p.stem for p in CONFIGS_DIR.glob("*.yaml"))
    examples = sorted(p.stem for p in EXAMPLES_DIR.glob("*.yaml"))
    return [c for c in configs if c not in SKIPPED_CONFIGS] + examples


def load_env(name: str) -> Env:
    """An env by config name (``report``), example name (``stock_check``) or family file."""
    path = Path(name).expanduser()
    if path.suffix in (".yaml", ".yml"):
        return FamilyEnv(path=str(path))
    config = CONFIGS_DIR / f"{name}.yaml"
    if config.exists():
        from hydra.utils import instantiate
        from omegaconf import OmegaConf

        env: Env = instantiate(OmegaConf.load(config))
        return env
    example = EXAMPLES_DIR / f"{name}.yaml"
    if example.exists():
        return FamilyEnv(path=str(example))
    raise ValueError(f"no env {name!r} (known: {', '.join(default_envs())}; or a .yaml path)")


def table(checks: Sequence[EnvCheck]) -> str:
    """The verdicts as a table, one row per env and complexity, then each failure."""
    lines = [f"{'env':<14} {'complexity':<10} {'tasks':>5} {'solved':>6}"]
    failures = []
    for c in checks:
        lines.append(
            f"{c.env:<14} {c.complexity:<10} {len(c.tasks):>5} {len(c.tasks) - len(c.failures):>6}"
        )
        failures += [f"  {t.task_id}: {t.reason()}" for t in c.failures]
    if failures:
        lines += ["", "failures:", *failures]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The CLI: check envs, print the table; exit 1 when a task is not solvable."""
    parser = argparse.ArgumentParser(
        prog="python -m planarena.envs.solvability",
        description="Check that every task can be solved from what a model is shown.",
    )
    parser.add_argument("--env", action="append", help="env name or family .yaml (repeatable)")
    parser.add_argument("--n-tasks", type=int, default=5, help="tasks per complexity")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    checks = [
        c
        for name in args.env or default_envs()
        for c in check_env(load_env(name), n_tasks=args.n_tasks, seed=args.seed)
    ]
    print(table(checks))
    return 1 if any(c.failures for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())

"""The env of a family file: tasks, toolboxes, grader, fault rules and oracle in one object.

:class:`FamilyEnv` is what the ``env`` config group instantiates for a family (built-in by
name, or any file by path). It keeps what a task's episodes share (the task's index and
oracle, the fault rules mapped onto the family's tools, the latency profiles), built once.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planarena.envs.base import EpisodeTools, Grade, Task, wrap_tools
from planarena.envs.family.oracle import FamilyOracle
from planarena.envs.family.schema import IDENT, FamilyDecl, FamilyError
from planarena.envs.family.tasks import generate
from planarena.envs.family.templates import literal
from planarena.envs.family.validate import load_declaration
from planarena.envs.family.world import FamilyIndex, FamilyWorld
from planarena.envs.faults import FaultInjector, FaultRule
from planarena.envs.grading import Fact, carries, check_grading, count_carried
from planarena.envs.tools import LatencyProfile, ToolCallRecord

FAMILIES_DIR = Path(__file__).resolve().parent.parent / "families"
_KEPT_TASKS = 64  # tasks whose index and oracle are kept (a job runs a few at a time)


def family_path(name: str) -> Path:
    """The file of the built-in family ``name``."""
    return FAMILIES_DIR / f"{name}.yaml"


def family_file(name: str | None, path: str | None) -> Path:
    """The file a family env reads: the built-in ``name`` without a ``path``; else ``path``,
    looked up in the working directory, then in ``envs/families/``."""
    if path is None:
        return family_path(str(name))
    found = Path(path).expanduser()
    if not found.is_absolute() and not found.exists() and (FAMILIES_DIR / found).exists():
        return FAMILIES_DIR / found
    return found


@dataclass
class FamilyEnv:
    """An env from a family file. ``FamilyEnv(name="pipeline")``: a built-in family
    (``envs/families/pipeline.yaml``); ``FamilyEnv(path="my/family.yaml")``: any file, named
    by its own ``name``; with both, ``name`` names the env (records, task ids) whatever the
    file calls itself (``env=file`` runs any file as the env ``file``). A relative path is
    looked up in the working directory, then in ``envs/families/``."""

    name: str | None = None
    path: str | None = None
    grading: str = "facts"  # set from the run's ``grading`` (envs/grading.py)
    decl: FamilyDecl = field(init=False)
    # Built once and kept: the index of the tasks in use (every planner of a job runs the same
    # task object; make_tools, exposure, grade and the oracle each read it), the rules mapped
    # onto this family's tools (for the job's rule list) and the latency profiles.
    _indexes: OrderedDict[int, tuple[Task, FamilyIndex, FamilyOracle]] = field(
        default_factory=OrderedDict, init=False, repr=False, compare=False
    )
    _mapped: tuple[Sequence[FaultRule], list[FaultRule]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _latency: dict[str, LatencyProfile] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        check_grading(self.grading)
        if self.path is None and self.name is None:
            raise FamilyError("a family env needs a name (built-in) or a path (any file)")
        path = family_file(self.name, self.path)
        if self.path is None and not path.exists():
            known = sorted(p.stem for p in FAMILIES_DIR.glob("*.yaml"))
            raise FamilyError(f"no built-in family {self.name!r} (known: {known})")
        decl = load_declaration(path)
        if self.name is not None and self.name != decl.name:
            if not IDENT.match(self.name):
                raise FamilyError(f"{path}: env name {self.name!r}: expected an identifier")
            decl = decl.model_copy(update={"name": self.name})
        self.decl = decl
        self.name = decl.name

    @property
    def digest(self) -> str:
        """A hash of the declaration as loaded (not of the file's bytes: comments and
        layout do not count). A run's identity carries it for a family given by ``path``, so
        a run dir made from the file before an edit is not resumed with the edited one."""
        text = self.decl.model_dump_json()
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    # -- faults: the config's rules mapped onto the tools that declare each kind --

    def rules(self, rules: Sequence[FaultRule]) -> list[FaultRule]:
        """The first configured rule of each fault kind applies, at its rate and scope, to the
        family's tools that declare that kind (with the tool's own ``args_key`` /
        ``corrupt_fields``); rules that name tools of this family are kept as written, and
        then no other rule of their kind is mapped (so no kind ever applies twice)."""
        if self._mapped is not None and self._mapped[0] is rules:
            return self._mapped[1]
        self._mapped = (rules, self._map_rules(rules))
        return self._mapped[1]

    def _map_rules(self, rules: Sequence[FaultRule]) -> list[FaultRule]:
        mine = set(self.decl.tools)
        out: list[FaultRule] = [rule for rule in rules if mine & set(rule.tools)]
        mapped = {rule.kind for rule in out}
        for rule in rules:
            if rule.kind in mapped:
                continue
            mapped.add(rule.kind)
            groups: dict[tuple[Any, Any], list[str]] = {}
            for name, tool in self.decl.tools.items():
                fd = tool.faults.get(rule.kind)
                if fd is None:
                    continue
                ak = tuple(fd.args_key) if fd.args_key is not None else None
                cf = tuple(fd.corrupt_fields or self.decl.answer.facts)
                groups.setdefault((ak, cf), []).append(name)
            for (ak, cf), tools in groups.items():
                out.append(
                    rule.model_copy(
                        update={
                            "tools": tools,
                            "args_key": list(ak) if ak is not None else None,
                            "corrupt_fields": list(cf),
                            "match": None,
                        }
                    )
                )
        return out

    def latency(self) -> dict[str, LatencyProfile]:
        """Each tool's latency profile, as its declaration gives it."""
        if self._latency is None:
            self._latency = {
                n: LatencyProfile(t.latency.median_s, t.latency.sigma, t.latency.cap_s)
                for n, t in self.decl.tools.items()
            }
        return self._latency

    def index(self, task: Task) -> FamilyIndex:
        """The task's index, built once while the task is in use (the most recent kept)."""
        return self._indexed(task)[1]

    def _indexed(self, task: Task) -> tuple[Task, FamilyIndex, FamilyOracle]:
        """The task's index and oracle (which reads only the declaration and the task: the
        planners that run the task share them), built once while the task is in use."""
        known = self._indexes.get(id(task))
        if known is not None and known[0] is task:
            self._indexes.move_to_end(id(task))
            return known
        index = FamilyIndex(self.decl, task)
        built = (task, index, FamilyOracle(self.decl, task, index))
        self._indexes[id(task)] = built  # the task kept alive: its id stays its own
        if len(self._indexes) > _KEPT_TASKS:
            self._indexes.popitem(last=False)
        return built

    def generate(
        self,
        n: int,
        *,
        seed: int,
        complexity: str,
        unreachable_rate: float = 0.0,
        start: int = 0,
    ) -> list[Task]:
        return generate(
            self.decl,
            n,
            seed=seed,
            complexity=complexity,
            unreachable_rate=unreachable_rate,
            start=start,
        )

    def make_tools(
        self, task: Task, *, rules: Sequence[FaultRule], seed_keys: tuple[object, ...]
    ) -> EpisodeTools:
        return wrap_tools(
            FamilyWorld(self.decl, task, self.index(task)),
            latency=self.latency(),
            rules=self.rules(rules),
            seed_keys=seed_keys,
        )

    def grade(self, task: Task, answer: str | None, calls: Sequence[ToolCallRecord]) -> Grade:
        """Progress = share of required facts stated on a line naming their item; a decoy's
        wrong fact on its item's line is a trap in the answer."""
        index = self.index(task)
        oracle = FamilyOracle(self.decl, task, index)
        touched = False
        saw_missing = False
        for c in calls:
            entry = index.match(c.tool, c.args)
            if entry is None:
                continue
            touched = touched or entry.kind == "trap"
            saw_missing = saw_missing or (
                entry.kind == "right"
                and entry.node == index.missing
                and c.error_kind == "not_found"
                and not c.injected
            )
        if not answer:
            return Grade(
                False, 0.0, trap_touched=touched, saw_missing_data=saw_missing, detail="no answer"
            )
        needed = oracle.required()
        if self.grading == "facts":
            facts = oracle.required_facts()
            found = count_carried(answer, facts)
            entities = sorted({f.entity for f in facts})  # each item's stretch is its own
            trap_in_answer = any(
                carries(answer, f, [g for g in facts if g.entity == f.entity], entities)
                for f in self._decoy_facts(index)
            )
        else:
            lines = answer.lower().splitlines()
            found = sum(
                any(label.lower() in ln and fact.lower() in ln for ln in lines)
                for label, fact in needed
            )
            trap_in_answer = self._decoy_in_answer(index, lines)
        progress = found / len(needed) if needed else 1.0
        return Grade(
            found == len(needed) and not trap_in_answer,
            progress,
            trap_in_answer=trap_in_answer,
            trap_touched=touched,
            saw_missing_data=saw_missing,
            detail=f"{found}/{len(needed)} facts",
        )

    def _decoy_facts(self, index: FamilyIndex) -> list[Fact]:
        """A last-layer decoy's wrong facts, each for its item."""
        out = []
        for s in index.sinks:
            trap = index.nodes[s]["trap"]
            if trap is None or trap["kind"] != "decoy":
                continue
            label = str(index.nodes[s]["result"][self.decl.answer.label])
            for f in self.decl.answer.facts:
                wrong = trap["result"].get(f)
                if wrong is not None and wrong != index.nodes[s]["result"].get(f):
                    out.append(Fact(label, f, wrong))
        return out

    def _decoy_in_answer(self, index: FamilyIndex, lines: list[str]) -> bool:
        """A last-layer decoy's wrong fact stated on a line naming its item."""
        trap_in_answer = False
        for s in index.sinks:
            trap = index.nodes[s]["trap"]
            if trap is None or trap["kind"] != "decoy":
                continue
            label = str(index.nodes[s]["result"][self.decl.answer.label]).lower()
            for f in self.decl.answer.facts:
                wrong = trap["result"].get(f)
                if wrong is None or wrong == index.nodes[s]["result"].get(f):
                    continue
                if any(label in ln and f"{f}: {wrong}".lower() in ln for ln in lines):
                    trap_in_answer = True
        return trap_in_answer

    def exposure(
        self, task: Task, *, rules: Sequence[FaultRule], seed_keys: tuple[object, ...]
    ) -> list[str]:
        injector = FaultInjector(
            FamilyWorld(self.decl, task, self.index(task)), self.rules(rules), seed_keys=seed_keys
        )
        kinds: set[str] = set()
        for nd in task.world["nodes"]:
            way = nd["ways"][0]
            kinds.update(injector.predrawn(way["tool"], literal(way["args"])))
        return sorted(kinds)

    def oracle(self, task: Task) -> FamilyOracle:
        return self._indexed(task)[2]

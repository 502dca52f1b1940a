"""The project's import layers: what may import what, no old un-namespaced imports, no cycles.

Every import counts, at module level or inside a function (an import moved into a function
still couples the two modules, and hiding a cycle that way only defers it to run time).
Relative imports are resolved; ``from X import Y`` names the module ``X.Y`` when that is a
module of the project, else ``X``. A module is named as installed: ``envs/family/env.py`` is
``planarena.envs.family.env``, ``planarena/__init__.py`` is ``planarena``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("search", "envs", "planners", "experiments", "configs")  # as setup.py maps them
TOP = "planarena"  # the top package (planarena/*.py): may import everything, imported by none

# A module belongs to the longest layer its name starts with (after "planarena.") and may
# import its own layer and the layers on its row, nothing else of the project. A short name
# (process, records, ...) is the sub-package of experiments. The "experiments" row is the
# package's own __init__ only, a facade over its sub-packages; the top package (planarena/*.py)
# may import everything and nothing may import it.
RULES = """
layer                 may import
search                -
configs               -
envs                  search configs
planners              search configs envs
experiments.process   search configs envs planners
experiments.records   search configs envs planners process
experiments.analysis  search configs envs planners process records
experiments.claims    search configs envs planners process records analysis
experiments.studies   search configs envs planners process records analysis claims
experiments.run       search configs envs planners process records analysis claims studies
experiments.bench     search configs envs planners process records analysis claims studies run
experiments.calibrate search configs envs planners process records analysis claims studies run
experiments           search configs envs planners process records analysis claims studies run
                      bench calibrate
"""


def _rows(text: str) -> list[str]:
    """The table's rows; a line that starts with spaces continues the row above."""
    rows: list[str] = []
    for line in text.strip().split("\n")[1:]:
        if line.startswith(" ") and rows:
            rows[-1] += " " + line.strip()
        else:
            rows.append(line)
    return rows


LAYERS: dict[str, tuple[str, ...]] = {
    layer: tuple(name if name in FOLDERS else f"experiments.{name}" for name in allowed)
    for layer, *allowed in (row.replace("-", "").split() for row in _rows(RULES))
}


@dataclass(frozen=True)
class Import:
    """One imported project module: who imports it, where, and the statement as written."""

    importer: str
    file: str  # relative to the root
    line: int
    target: str
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.text}"


def project_modules(root: Path) -> dict[str, Path]:
    """Every .py file of the project, by its installed dotted name."""
    modules = {}
    for folder in (*FOLDERS, TOP):
        for path in sorted((root / folder).rglob("*.py")):
            parts = path.relative_to(root / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            prefix = (TOP,) if folder == TOP else (TOP, folder)
            modules[".".join((*prefix, *parts))] = path
    return modules


def _statements(path: Path) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The module a ``from ... import`` names, its dots resolved against ``module``."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_of(root: Path, modules: dict[str, Path]) -> list[Import]:
    """Every import of a project module (``planarena`` or below) by a project module."""
    found = []
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in _statements(path):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _absolute(node, module, is_package)
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    for a in node.names
                ]
            text = ast.unparse(node)
            file = str(path.relative_to(root))
            for target in dict.fromkeys(targets):  # once per statement and target
                if target == TOP or target.startswith(TOP + "."):
                    found.append(Import(module, file, node.lineno, target, text))
    return found


def layer_of(module: str) -> str:
    """The layer of a module name: ``TOP`` for the top package's own modules."""
    rest = module.removeprefix(TOP + ".") if module != TOP else ""
    if rest.split(".")[0] not in FOLDERS:
        return TOP
    return max((k for k in LAYERS if rest == k or rest.startswith(k + ".")), key=len)


def upward_imports(imports: list[Import]) -> list[str]:
    """Imports the layer table does not allow, each with the rule it breaks."""
    bad = []
    for imp in imports:
        mine, theirs = layer_of(imp.importer), layer_of(imp.target)
        if mine != TOP and theirs != mine and theirs not in LAYERS[mine]:
            bad.append(f"{imp} ({mine} may not import {theirs})")
    return sorted(set(bad))


def unlayered(modules: dict[str, Path], root: Path) -> list[str]:
    """Modules of experiments outside its sub-packages and ``process`` (they have no row)."""
    return [
        f"{path.relative_to(root)}: in no layer (move it into a sub-package of experiments)"
        for module, path in modules.items()
        if layer_of(module) == "experiments" and module != f"{TOP}.experiments"
    ]


def old_name_imports(paths: list[Path], root: Path) -> list[str]:
    """Imports that name a project folder without ``planarena.`` (``from envs.x import``)."""
    bad = []
    for path in paths:
        for node in _statements(path):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                names = [node.module or ""] if not node.level else []
            if any(name.split(".")[0] in FOLDERS for name in names):
                bad.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return bad


def import_cycles(imports: list[Import], modules: dict[str, Path]) -> list[str]:
    """One cycle per strongly connected group of modules, each step with its import."""
    graph = nx.DiGraph()
    for imp in imports:
        target = imp.target
        while target not in modules and "." in target:  # a name inside a module: that module
            target = target.rsplit(".", 1)[0]
        known = target in modules and target != imp.importer
        if known and not graph.has_edge(imp.importer, target):  # the first import names it
            graph.add_edge(imp.importer, target, imp=imp)
    cycles = []
    for group in nx.strongly_connected_components(graph):
        if len(group) > 1:
            cycle = nx.find_cycle(graph.subgraph(group))
            steps = "; ".join(str(graph.edges[a, b]["imp"]) for a, b in cycle)
            cycles.append(" -> ".join([a for a, _ in cycle] + [cycle[0][0]]) + f"  [{steps}]")
    return sorted(cycles)


def _check(root: Path) -> tuple[list[str], list[str], list[str]]:
    """(upward imports, old un-namespaced imports, cycles) of the tree at ``root``."""
    modules = project_modules(root)
    imports = imports_of(root, modules)
    files = [*modules.values(), *sorted((root / "tests").rglob("*.py"))]
    upward = unlayered(modules, root) + upward_imports(imports)
    return upward, old_name_imports(files, root), import_cycles(imports, modules)


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward, _, _ = _check(ROOT)
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_no_import_names_a_project_folder_without_planarena() -> None:
    _, old, _ = _check(ROOT)
    assert not old, "un-namespaced imports:\n" + "\n".join(old)


def test_no_import_cycle_among_project_modules() -> None:
    _, _, cycles = _check(ROOT)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_walk_names_modules_as_installed_and_every_layer_has_modules() -> None:
    """The checks are only as good as the walk: modules are named as installed, every layer
    of the table holds modules (a renamed folder would otherwise leave its rule checking
    nothing), and the walk finds the imports (the executor imports the plan parser)."""
    modules = project_modules(ROOT)
    assert modules[TOP] == ROOT / "planarena" / "__init__.py"
    assert modules[f"{TOP}.planners.llm.sim"] == ROOT / "planners" / "llm" / "sim.py"
    assert modules[f"{TOP}.experiments.process"] == ROOT / "experiments" / "process.py"
    assert {layer_of(m) for m in modules} == {*LAYERS, TOP}
    imports = imports_of(ROOT, modules)
    assert any(
        (i.file, i.target) == ("planners/executor.py", f"{TOP}.planners.plan") for i in imports
    )


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def test_the_checker_reports_an_upward_import_an_old_name_and_a_cycle(tmp_path: Path) -> None:
    """Sabotage proof: a tiny tree with one upward import (search imports planners, at module
    level), one inside a function (records imports analysis), one of the top package, an old
    un-namespaced import, a module of experiments in no layer, and a cycle closed by a relative
    import inside a function. Each is reported with its file and line; the allowed imports
    beside them (the top package importing planners, planners importing search) are not."""
    _write(
        tmp_path,
        {
            "planarena/__init__.py": "from planarena.planners import b\n",
            "search/__init__.py": "",
            "search/a.py": "import os\nfrom planarena.planners.b import thing\n",
            "planners/__init__.py": "",
            "planners/b.py": "from planarena.planners import c\nfrom planarena import search\n",
            "planners/c.py": "def f():\n    from . import b\n    return b\n",
            "envs/__init__.py": "from envs.x import y\n",
            "experiments/__init__.py": "",
            "experiments/loose.py": "",
            "experiments/records/__init__.py": "",
            "experiments/records/store.py": (
                "def load():\n    from ..analysis import metrics\n    return metrics\n"
            ),
            "experiments/analysis/__init__.py": "",
            "experiments/analysis/metrics.py": (
                "from planarena.experiments.records import store\nimport planarena\n"
            ),
        },
    )
    upward, old, cycles = _check(tmp_path)
    assert upward == [
        "experiments/loose.py: in no layer (move it into a sub-package of experiments)",
        "experiments/analysis/metrics.py:2: import planarena (experiments.analysis may not "
        "import planarena)",
        "experiments/records/store.py:2: from ..analysis import metrics (experiments.records "
        "may not import experiments.analysis)",
        "search/a.py:2: from planarena.planners.b import thing (search may not import planners)",
    ]
    assert old == ["envs/__init__.py:1: from envs.x import y"]
    assert len(cycles) == 2
    assert any(
        "planarena.planners.b" in c and "planners/c.py:2: from . import b" in c for c in cycles
    )
    assert any("experiments/records/store.py:2" in c for c in cycles)


def test_the_command_line_does_not_load_the_analysis_stack_before_it_needs_it() -> None:
    """Start-up: the runner, and Hydra's sweep callback, import no pandas or matplotlib at
    module level (a no-op rerun prints its stored outputs without them)."""
    import subprocess
    import sys

    code = (
        "import sys, planarena.experiments.run.runner, planarena.experiments.run.callbacks; "
        "print(sorted(m for m in ('pandas', 'matplotlib', 'pyarrow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

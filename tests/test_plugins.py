"""The plug-in route, from docs/extending.md as written: a user's planner, env and study in
their own package outside the repository, registered by entry points, run beside the built-in
planners, and checked in one line like the built-ins.

The package is the doc's code blocks (each names its file on a ``# file:`` line), written into
a temporary dir outside the repository; ``pip install -e ./my_pkg`` is emulated by putting
``my_pkg/src`` on ``PYTHONPATH`` with a ``my_pkg-0.1.dist-info`` whose ``entry_points.txt`` is
the doc's ``pyproject.toml``'s. Then every command of the doc's ```bash blocks runs there, each
with the exit status its line documents (``# exit status 2``). The helpers of the search path
(entry-point discovery, merging, the config dirs the checks read) are tested in-process.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from planarena.experiments.run.overrides import (
    CONFIG_DIR,
    search_path,
    unknown_group_choice,
    unknown_key_override,
)
from planarena.experiments.run.plugins import (
    discover,
    searchpath_override,
    with_plugin_searchpath,
)

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "extending.md"
FENCE = re.compile(r"^(```+)\s*([\w+-]*)\s*$")
FILE_MARK = re.compile(r"^# file: (\S+)$")
EXIT_STATUS = re.compile(r"#\s*exit status (\d+)")
INSTALL = "pip install"  # the doc's install block: emulated, not run
TIMEOUT_S = 240


@dataclass(frozen=True)
class Block:
    line: int
    lang: str
    code: str
    marker: str  # the HTML comment just before the fence, or ""


def doc_blocks() -> list[Block]:
    found: list[Block] = []
    lines = DOC.read_text(encoding="utf-8").splitlines()
    i, previous = 0, ""
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            previous = lines[i].strip() or previous
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and lines[i].strip() != m.group(1):
            body.append(lines[i])
            i += 1
        marker = previous if previous.startswith("<!--") else ""
        found.append(Block(start + 1, m.group(2), "\n".join(body) + "\n", marker))
        i, previous = i + 1, ""
    return found


def doc_files() -> dict[str, str]:
    """The files of the example, by path: blocks with a ``# file:`` line in their first two."""
    files: dict[str, str] = {}
    for b in doc_blocks():
        for line in b.code.splitlines()[:2]:
            m = FILE_MARK.match(line)
            if m:
                assert m.group(1) not in files, f"{m.group(1)} written twice in {DOC.name}"
                files[m.group(1)] = b.code
    return files


def doc_commands() -> list[str]:
    """Every command of the doc's ```bash blocks, in order (a line ending in ``\\`` goes on)."""
    out: list[str] = []
    for b in doc_blocks():
        if b.lang != "bash":
            continue
        pending = ""
        for line in b.code.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            pending += line
            if pending.rstrip().endswith("\\"):
                pending = pending.rstrip()[:-1] + " "
                continue
            out.append(pending)
            pending = ""
    return out


def write_package(where: Path, *, entry_points: bool = True) -> Path:
    """The doc's files under ``where``, and (``entry_points``) the emulated ``pip install -e``:
    a dist-info beside the package on ``PYTHONPATH``; returns the dir for ``PYTHONPATH``."""
    for rel, text in doc_files().items():
        path = where / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    src = where / "my_pkg" / "src"
    for init in ("my_pkg/__init__.py", "my_pkg/conf/__init__.py"):  # the doc's `touch` lines
        (src / init).touch()
    if entry_points:
        project = tomllib.loads((where / "my_pkg" / "pyproject.toml").read_text())["project"]
        info = src / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
        )
        (info / "top_level.txt").write_text("my_pkg\n")  # as setuptools writes it
        groups = project["entry-points"]
        (info / "entry_points.txt").write_text(
            "".join(
                f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
                for group, eps in groups.items()
            )
        )
    return src


def shell_env(pythonpath: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = str(pythonpath)
    env["MPLBACKEND"] = "Agg"
    return env


def sh(cmd: str, cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", cmd],
        cwd=cwd,
        env=shell_env(pythonpath),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = [x for x in proc.stderr.splitlines() if x.startswith("planarena:")]
    assert len(lines) == 1, proc.stderr[-2000:]
    return lines[0]


def records(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "episodes.jsonl").read_text().splitlines()]


@dataclass
class Example:
    cwd: Path
    pythonpath: Path
    ran: dict[str, subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Example:
    """The doc's package, installed (emulated), and every command of the doc run in order."""
    cwd = tmp_path_factory.mktemp("user")
    assert ROOT not in cwd.resolve().parents
    pythonpath = write_package(cwd)
    ran: dict[str, subprocess.CompletedProcess[str]] = {}
    for cmd in doc_commands():
        if cmd.startswith(INSTALL):
            continue
        proc = sh(cmd, cwd, pythonpath)
        m = EXIT_STATUS.search(cmd)
        want = int(m.group(1)) if m else 0
        assert proc.returncode == want, (
            f"{cmd}\nexited {proc.returncode}, expected {want}\n{proc.stdout[-2000:]}"
            f"\n{proc.stderr[-3000:]}"
        )
        ran[cmd] = proc
    return Example(cwd, pythonpath, ran)


def ran_with(example: Example, *parts: str) -> subprocess.CompletedProcess[str]:
    (proc,) = [p for cmd, p in example.ran.items() if all(x in cmd for x in parts)]
    return proc


# --------------------------------------------------------------------------- the doc


def test_the_doc_is_the_package() -> None:
    """Each file of the layout is one block of the doc; the install is its only skipped line."""
    assert set(doc_files()) == {
        "my_pkg/pyproject.toml",
        "my_pkg/src/my_pkg/planner.py",
        "my_pkg/src/my_pkg/forecast.py",
        "my_pkg/src/my_pkg/study.py",
        "my_pkg/src/my_pkg/conf/planner/my_planner.yaml",
        "my_pkg/src/my_pkg/conf/env/forecast.yaml",
        "my_pkg/src/my_pkg/conf/experiment/retry_check.yaml",
    }
    assert [c for c in doc_commands() if c.startswith(INSTALL)] == ["pip install -e ./my_pkg"]
    for b in doc_blocks():  # what the docs test leaves out, this test runs (or emulates)
        if b.lang == "bash" and b.marker:
            assert "tests/test_plugins.py" in b.marker, b


def test_the_example_code_is_lint_clean(tmp_path: Path) -> None:
    write_package(tmp_path, entry_points=False)
    cmd = [sys.executable, "-m", "ruff", "check", "--line-length", "100", "--isolated"]
    cmd += ["--select", "E,F,W,I,B,UP,SIM", str(tmp_path / "my_pkg")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


# --------------------------------------------------------------------------- running it


def test_their_planner_runs_beside_react_and_completes_episodes(example: Example) -> None:
    rows = records(example.cwd / "runs" / "side_by_side")
    by_planner = {p: [r for r in rows if r["planner"] == p] for p in ("react", "my_planner")}
    assert {r["planner"] for r in rows} == {"react", "my_planner"}
    assert all(len(v) == 2 for v in by_planner.values())
    assert any(r["success"] for r in by_planner["my_planner"])
    assert not [r for r in rows if r["failure_mode"] == "harness_error"]


def test_a_resume_under_edited_plugin_code_is_refused_naming_the_plugin(tmp_path: Path) -> None:
    """The plug-in's code is part of the run's identity: run.json names the distribution and
    a digest of its sources, and a rerun into the same dir after an edit of the plug-in's
    planner is refused (one line, exit 2) naming the plug-in and both digests, instead of
    reusing records the old code made."""
    pythonpath = write_package(tmp_path)
    cmd = (
        "planarena planner=my_planner env=report n_tasks=1 complexity=simple progress=false "
        "figures=false hydra.run.dir=runs/edited"
    )
    first = sh(cmd, tmp_path, pythonpath)
    assert first.returncode == 0, first.stderr[-2000:]
    run = json.loads((tmp_path / "runs" / "edited" / "run.json").read_text())
    (plugin,) = run["code"]["plugins"]
    assert plugin["package"] == "my_pkg" and plugin["distribution"] == "my-pkg"
    again = sh(cmd, tmp_path, pythonpath)  # the same code: resumed, nothing to run
    assert again.returncode == 0 and "0 to run" in again.stderr
    planner = pythonpath / "my_pkg" / "planner.py"
    planner.write_text(planner.read_text() + "\n# an edit that changes no behaviour\n")
    edited = sh(cmd, tmp_path, pythonpath)
    assert edited.returncode == 2, edited.stderr[-2000:]
    line = one_line(edited)
    old = plugin["source_sha256"][:8]
    new = json.loads((tmp_path / "runs" / "edited" / "run.json").read_text())  # kept
    assert new["code"]["plugins"] == [plugin]
    assert "plug-in my-pkg 0.1 (my_pkg)" in line and f"source {old} -> " in line, line
    assert line.split(f"source {old} -> ")[1][:8] != old


def test_their_python_env_runs_with_every_kind_of_planner(example: Example) -> None:
    """The forecast env under heavy faults: ReAct, the user's planner and a plan planner
    complete episodes, and the user's planner retried in code (records and trace agree)."""
    run_dir = example.cwd / "runs" / "forecast"
    rows = records(run_dir)
    assert {r["env"] for r in rows} == {"forecast"}
    assert {r["complexity"] for r in rows} == {"simple", "medium", "complex"}
    for planner in ("react", "my_planner", "plan_execute_replan"):
        mine = [r for r in rows if r["planner"] == planner]
        assert len(mine) == 15
        assert sum(r["success"] for r in mine) >= 8, planner
    assert not [r for r in rows if r["failure_mode"] == "harness_error"]
    retried = sum(r["retries"] for r in rows if r["planner"] == "my_planner")
    traces = [json.loads(x) for x in (run_dir / "traces.jsonl").read_text().splitlines()]
    events = [
        e for t in traces if t["planner"] == "my_planner" for e in t["events"]
        if e["event"] == "auto_retry"
    ]  # fmt: skip
    assert retried >= len(events) > 0
    episode = ran_with(example, "planarena.episode(")
    assert episode.stdout.split()[0] in ("none", "false_success", "gave_up_after_tool_failure")


def test_registration_is_visible(example: Example) -> None:
    assert "pkg://my_pkg.conf" in ran_with(example, "--info searchpath").stdout
    listed = ran_with(example, "planner_names()").stdout
    assert "my_planner" in listed and "react" in listed and "forecast" in listed
    assert (example.cwd / "runs" / "forecast" / "trace_views").is_dir()


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (("n_taks=3",), "planarena: n_taks=3: no key 'n_taks'; did you mean n_tasks?"),
        (("tpyo",), "no key 'tpyo' in planner.my_planner (keys: backoff_s, max_parse_failures"),
        (("backoff_s=[-1]",), "backoff_s[0]=-1: Input should be greater than or equal to 0"),
    ],
)
def test_with_the_plugin_a_mistake_is_one_line_exit_2(
    example: Example, parts: tuple[str, ...], expected: str
) -> None:
    proc = ran_with(example, *parts)
    assert proc.returncode == 2
    assert expected in one_line(proc)


def test_searchpath_and_config_dir_routes_ran(example: Example) -> None:
    for name in ("searchpath", "config_dir"):
        rows = records(example.cwd / "runs" / name)
        assert {r["planner"] for r in rows} == {"react", "my_planner"}, name


def test_their_study_runs_and_reports(example: Example) -> None:
    run_dir = example.cwd / "runs" / "retry_check"
    assert (run_dir / "retry_check.csv").is_file()
    assert {r["planner"] for r in records(run_dir)} == {"react", "my_planner"}
    assert "## Retries" in ran_with(example, "experiment=retry_check").stdout
    assert "## Retries" in ran_with(example, "planarena-report").stdout


# --------------------------------------------------------------------------- no entry point


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The doc's package on PYTHONPATH, not installed: no entry point names its tree."""
    cwd = tmp_path_factory.mktemp("bare")
    return cwd, write_package(cwd, entry_points=False)


def test_without_the_entry_point_the_tree_is_not_found(bare: tuple[Path, Path]) -> None:
    cwd, pythonpath = bare
    proc = sh("planarena 'planner=[react,my_planner]'", cwd, pythonpath)
    assert proc.returncode == 2
    assert "planner=my_planner: no such planner config; choose from auto, bfs," in one_line(proc)


ROUTES = {
    "searchpath": ["hydra.searchpath=[pkg://my_pkg.conf]"],
    "config-dir": ["--config-dir", "my_pkg/src/my_pkg/conf"],
}
MISTAKES = {
    "root-key": (["n_taks=3"], "n_taks=3: no key 'n_taks'; did you mean n_tasks?"),
    "option": (["planner=[react,my_plannr]"], "planner=my_plannr: no such planner config"),
    "planner-key": (
        ["planner=[react,my_planner]", "planner.my_planner.tpyo=1"],
        "no key 'tpyo' in planner.my_planner (keys: backoff_s, max_parse_failures, max_turns)",
    ),
    "env-key": (
        ["env=forecast", "env.forecast.forecast_median=2"],
        "did you mean forecast_median_s?",
    ),
}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("mistake", MISTAKES)
def test_with_an_extended_search_path_the_checks_read_its_trees(
    bare: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, route: str, mistake: str
) -> None:
    """Before, any ``hydra.searchpath``/``--config-dir`` switched the checks off (Hydra's
    block of text, exit status 1); now they read every tree on the path."""
    cwd, pythonpath = bare
    monkeypatch.chdir(cwd)  # --config-dir is relative to the working dir
    monkeypatch.syspath_prepend(str(pythonpath))
    args, expected = MISTAKES[mistake]
    line = unknown_group_choice([*ROUTES[route], *args]) or unknown_key_override(
        [*ROUTES[route], *args]
    )
    assert line is not None and expected in line
    if mistake == "option":  # the plugin's options are named among the choices
        assert "my_planner" in line
    fixed = [a.replace("my_plannr", "my_planner") for a in args]  # every option exists
    assert unknown_group_choice([*ROUTES[route], *fixed]) is None
    for name in [m for m in sys.modules if m == "my_pkg" or m.startswith("my_pkg.")]:
        del sys.modules[name]


@pytest.mark.parametrize(
    ("route", "mistake"), [("searchpath", "planner-key"), ("config-dir", "root-key")]
)
def test_with_an_extended_search_path_a_mistake_is_one_line_exit_2(
    bare: tuple[Path, Path], route: str, mistake: str
) -> None:
    cwd, pythonpath = bare
    args, expected = MISTAKES[mistake]
    proc = sh(shlex.join(["planarena", *ROUTES[route], *args]), cwd, pythonpath)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert expected in one_line(proc)


def test_a_searchpath_run_beside_react(bare: tuple[Path, Path]) -> None:
    cwd, pythonpath = bare
    cmd = (
        "planarena 'planner=[react,my_planner]' 'hydra.searchpath=[pkg://my_pkg.conf]' "
        "env=forecast n_tasks=1 complexity=simple progress=false figures=false "
        "hydra.run.dir=runs/bare"
    )
    proc = sh(cmd, cwd, pythonpath)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert {r["planner"] for r in records(cwd / "runs" / "bare")} == {"react", "my_planner"}


def test_an_option_file_without_its_package_line_is_one_line(tmp_path: Path) -> None:
    """Without ``# @package planner.<name>`` the file's keys land in ``planner`` itself and
    the job died on ``planner._target_`` (after composing); now refused by name at once."""
    (tmp_path / "conf" / "planner").mkdir(parents=True)
    (tmp_path / "conf" / "planner" / "bare.yaml").write_text("_target_: x.Y\nmax_turns: 3\n")
    proc = sh("planarena -cd conf 'planner=[react,bare]'", tmp_path, tmp_path)
    assert proc.returncode == 2
    assert "planner=bare: " in one_line(proc)
    assert "has no '# @package planner.bare' first line" in one_line(proc)


# --------------------------------------------------------------------------- in-process


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The doc's package importable in this process, with its entry points (and one of an
    uninstalled package)."""
    src = write_package(tmp_path)
    info = next(src.glob("*.dist-info"))
    text = (info / "entry_points.txt").read_text()
    (info / "entry_points.txt").write_text(
        text.replace("[planarena.configs]\n", "[planarena.configs]\ngone = gone_pkg.conf\n")
    )
    monkeypatch.syspath_prepend(str(src))
    yield src
    for name in [m for m in sys.modules if m == "my_pkg" or m.startswith("my_pkg.")]:
        del sys.modules[name]


def test_discover_finds_installed_trees_and_names_broken_ones(installed: Path) -> None:
    packages, problems = discover()
    assert "my_pkg.conf" in packages and "gone_pkg.conf" not in packages
    assert any(p.startswith("entry point gone = gone_pkg.conf") for p in problems)


def test_plugin_trees_join_the_search_path_the_checks_read(installed: Path) -> None:
    args = with_plugin_searchpath(["planner=[react,my_planner]"])
    assert args == ["planner=[react,my_planner]", "hydra.searchpath=[pkg://my_pkg.conf]"]
    path = search_path(args)
    assert path.complete and path.dirs[0] == CONFIG_DIR
    assert "my_planner" in path.options("planner") and "react" in path.options("planner")
    assert "retry_check" in path.options("experiment")
    assert unknown_group_choice(args) is None and unknown_key_override(args) is None
    wrong = [*args, "planner.my_planner.max_turn=3"]
    assert "did you mean max_turns?" in str(unknown_key_override(wrong))


@pytest.mark.parametrize(
    ("args", "refused"),
    [
        (["preset=full"], None),
        (["preset=full", "n_tasks=3", "experiment=robustness"], None),
        (["experiment=null"], "experiment=null: experiment cannot be null; to choose none"),
        (["preset=fulll"], "preset=fulll: no such preset config; choose from full"),
        (["preset=full", "n_taks=3"], "n_taks=3: no key 'n_taks'; did you mean n_tasks?"),
    ],
)
def test_every_group_of_the_root_defaults_is_a_checked_choice(
    args: list[str], refused: str | None
) -> None:
    """A group the root config's defaults list names (``preset``, added after these checks
    were written) is a choice, checked by name, not a misspelt key; ``group=null`` (which
    Hydra stops on with a traceback) is refused in one line."""
    line = unknown_group_choice(args) or unknown_key_override(args)
    if refused is None:
        assert line is None
    else:
        assert line is not None and refused in line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], ["hydra.searchpath=[pkg://p.conf]"]),
        (["--info"], ["hydra.searchpath=[pkg://p.conf]", "--info"]),  # not --info's value
        (["n=1", "-m", "x=2"], ["n=1", "hydra.searchpath=[pkg://p.conf]", "-m", "x=2"]),
        (["-cd", "a=b", "n=1"], ["-cd", "a=b", "n=1", "hydra.searchpath=[pkg://p.conf]"]),
        (["hydra.searchpath=[pkg://mine]"], ["hydra.searchpath=[pkg://mine,pkg://p.conf]"]),
        (["hydra.searchpath=[pkg://p.conf]"], ["hydra.searchpath=[pkg://p.conf]"]),
        (["hydra.searchpath=pkg://x"], ["hydra.searchpath=pkg://x"]),  # Hydra's to refuse
    ],
)
def test_the_plugin_searchpath_is_merged_beside_the_overrides(
    args: list[str], expected: list[str]
) -> None:
    """Hydra reads the first ``hydra.searchpath=`` only, and its parser takes the overrides
    as one run of arguments (``n=1 -m x=2 hydra.searchpath=...`` is refused)."""
    assert with_plugin_searchpath(args, ["p.conf"]) == expected


def test_search_path_entries_resolve_like_hydras(tmp_path: Path) -> None:
    conf = tmp_path / "my conf"
    (conf / "planner").mkdir(parents=True)
    (conf / "planner" / "x.yaml").write_text("# @package planner.x\n_target_: a.B\n")
    quoted = searchpath_override([f"file://{conf}"])
    assert quoted == f"hydra.searchpath=['file://{conf}']"
    for args in ([quoted], ["-cd", str(conf)], [f"--config-dir={conf}"]):
        path = search_path(args)
        assert path.complete and path.options("planner")[-1] == "x", args
        assert unknown_group_choice([*args, "planner=x"]) is None
    unknown = search_path(["hydra.searchpath=[pkg://no_such_pkg.conf]"])
    assert not unknown.complete and unknown.dirs == (CONFIG_DIR,)
    assert unknown_group_choice(["hydra.searchpath=[pkg://no_such_pkg.conf]", "env=x"]) is None
    # planarena's own option wins a clash (Hydra reads its search path in order)
    (conf / "planner" / "react.yaml").write_text("# @package planner.react\nfoo: 1\n")
    assert search_path(["-cd", str(conf)]).option_file("planner", "react") == (
        CONFIG_DIR / "planner" / "react.yaml"
    )


def test_the_install_block_is_the_only_line_not_run() -> None:
    """A sanity check of the parsing the fixture relies on: the doc has commands to run."""
    cmds = doc_commands()
    assert sum(c.startswith("planarena ") for c in cmds) >= 8
    assert shutil.which("bash") is not None

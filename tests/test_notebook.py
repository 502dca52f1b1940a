"""experiments/notebooks/analysis.ipynb runs headlessly on a fresh small run, and finds the
run a relative PLANARENA_RUN names (experiments/notebook.py) though its kernel runs in the
notebook's folder."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from planarena.experiments.analysis import notebook
from planarena.experiments.analysis.notebook import find_run

NOTEBOOK = Path(__file__).resolve().parents[1] / "experiments" / "notebooks" / "analysis.ipynb"
BIN = Path(sys.executable).parent


@pytest.mark.slow  # ~9 s: a planarena run plus a Jupyter kernel start
def test_analysis_notebook_executes_on_a_small_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    run = tmp_path / "run"
    cmd = [
        str(BIN / "planarena"),
        "n_tasks=2",
        "complexity=simple",
        f"hydra.run.dir={run}",
        "progress=false",
    ]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    monkeypatch.setenv("PLANARENA_RUN", str(run))  # the kernel inherits this environment
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        kernel_name="python3",
        timeout=120,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert f"run: {run}" in text
    tables = [o["data"]["text/plain"] for o in outputs if o.output_type == "execute_result"]
    assert any("simple" in t and "(n=2)" in t for t in tables)  # the completion table
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 1
    # the notebook rebuilt exactly the cells the run wrote to summary.md
    cells = re.findall(r"\d+\.\d% \[\d+\.\d, \d+\.\d\] \(n=2\)", "".join(tables))
    summary_md = (run / "summary.md").read_text(encoding="utf-8")
    raw = pd.read_json(run / "episodes.jsonl", lines=True)
    assert len(cells) == raw.groupby(["env", "planner"]).ngroups  # one row per (env,) planner
    assert all(c in summary_md for c in cells)


@pytest.mark.slow  # a Jupyter kernel start
def test_documented_nbconvert_command_executes_the_notebook(
    small_run_dir: Path, tmp_path: Path
) -> None:
    """The README's one command: ``jupyter nbconvert --to html --execute ...`` (dev extra)."""
    jupyter = BIN / "jupyter"
    if not jupyter.exists():
        pytest.skip("jupyter (nbconvert, from the dev extra) is not installed")
    cmd = [
        str(jupyter),
        "nbconvert",
        "--to",
        "html",
        "--execute",
        str(NOTEBOOK),
        "--output-dir",
        str(tmp_path),
    ]
    env = {**os.environ, "PLANARENA_RUN": str(small_run_dir)}
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300, env=env)
    html = (tmp_path / "analysis.html").read_text(encoding="utf-8")
    assert f"run: {small_run_dir}" in html and "Traceback" not in html


@pytest.mark.slow  # a Jupyter kernel start
def test_the_documented_command_finds_a_run_given_relative_to_the_repository(
    small_run_dir: Path, tmp_path: Path
) -> None:
    """The README's command as typed, from the repository root with a relative
    ``PLANARENA_RUN``: the kernel runs in experiments/notebooks/, the path still resolves."""
    jupyter = BIN / "jupyter"
    if not jupyter.exists():
        pytest.skip("jupyter (nbconvert, from the dev extra) is not installed")
    repo = NOTEBOOK.parents[2]
    relative = os.path.relpath(small_run_dir, repo)
    cmd = [
        str(jupyter),
        "nbconvert",
        "--to",
        "html",
        "--execute",
        "experiments/notebooks/analysis.ipynb",
        "--output-dir",
        str(tmp_path),
    ]
    env = {**os.environ, "PLANARENA_RUN": relative, "PWD": str(repo)}
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300, env=env, cwd=repo)
    html = (tmp_path / "analysis.html").read_text(encoding="utf-8")
    assert f"run: {small_run_dir.resolve()}" in html and "Traceback" not in html


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout with one run, as experiments/notebook.py sees it."""
    root = tmp_path / "repo"
    (root / "results" / "runs" / "r1").mkdir(parents=True)
    (root / "experiments" / "notebooks").mkdir(parents=True)
    monkeypatch.setattr(notebook, "REPO_ROOT", root)
    return root


def test_a_relative_planarena_run_resolves_against_the_repository_root(repo: Path) -> None:
    """The kernel's working directory is the notebook's folder (nbconvert starts it there):
    ``PLANARENA_RUN=results/runs/r1`` typed at the repository root still names that run."""
    kernel_cwd = repo / "experiments" / "notebooks"
    run = repo / "results" / "runs" / "r1"
    environ = {"PLANARENA_RUN": "results/runs/r1"}
    assert find_run(environ, cwd=kernel_cwd) == run
    # typed in another directory of the checkout: relative to it ($PWD, the shell's)
    environ = {"PLANARENA_RUN": "runs/r1", "PWD": str(repo / "results")}
    assert find_run(environ, cwd=kernel_cwd) == run
    assert find_run({"PLANARENA_RUN": str(run)}, cwd=kernel_cwd) == run  # absolute: as is
    with pytest.raises(FileNotFoundError, match="PLANARENA_RUN=results/runs/r2: no such run"):
        find_run({"PLANARENA_RUN": "results/runs/r2"}, cwd=kernel_cwd)


def test_the_notebook_finds_its_run_with_the_tested_helper() -> None:
    source = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    setup = "".join(next(c for c in source["cells"] if c.get("id") == "setup")["source"])
    assert "from planarena.experiments.analysis.notebook import find_run" in setup
    assert "def find_run" not in setup and "RUN = find_run()" in setup


def _notebook_code() -> str:
    """The notebook's code cells as one script (run in-process: no kernel needed)."""
    source = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    return "\n".join("".join(c["source"]) for c in source["cells"] if c["cell_type"] == "code")


def test_the_notebooks_numbers_equal_summary_csv_when_episodes_are_left_out(
    small_run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run with an infrastructure_error (the endpoint failed: left out of every table) and an
    episode its cost cap cut: the notebook's completion rates are summary.csv's, not rates that
    count those episodes as the agent's failures (it summarized experiments.load whole)."""
    from planarena.experiments.analysis.report import main as report

    run = tmp_path / "run"
    shutil.copytree(small_run_dir / ".hydra", run / ".hydra")
    shutil.copy(small_run_dir / "run.json", run / "run.json")
    rows = [json.loads(x) for x in (small_run_dir / "episodes.jsonl").read_text().splitlines()]
    successes = [r for r in rows if r["success"]]
    infra, capped = successes[0], successes[1]
    infra.update(success=False, failure_mode="infrastructure_error", stop_reason="infra")
    capped.update(success=False, failure_mode="budget_exhausted", stop_reason="job_cost_cap")
    (run / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert report([str(run)]) == 0
    expected = pd.read_csv(run / "summary.csv")
    monkeypatch.setenv("PLANARENA_RUN", str(run))
    monkeypatch.setattr("matplotlib.pyplot.show", lambda *a, **k: None)
    namespace: dict[str, object] = {}
    exec(compile(_notebook_code(), str(NOTEBOOK), "exec"), namespace)
    summary = namespace["summary"]
    assert isinstance(summary, pd.DataFrame)
    keys = ["planner", "env", "complexity"]
    got = summary.set_index(keys)[["n", "successes", "completion_rate"]]
    want = expected.set_index(keys)[["n", "successes", "completion_rate"]]
    pd.testing.assert_frame_equal(got.sort_index(), want.sort_index(), check_dtype=False)
    assert int(summary["n"].sum()) == len(rows) - 2

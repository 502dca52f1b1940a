"""experiments/notebooks/analysis.ipynb runs headlessly on a fresh small run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = Path(__file__).resolve().parents[1] / "experiments" / "notebooks" / "analysis.ipynb"
BIN = Path(sys.executable).parent


@pytest.mark.slow  # ~9 s: a planarena run plus a Jupyter kernel start
def test_analysis_notebook_executes_on_a_small_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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

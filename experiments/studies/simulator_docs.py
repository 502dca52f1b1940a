"""The rendered blocks of docs/simulator.md, from copies of runs under ``docs/data/``:

- ``sensitivity``: the verdicts of ``experiment=sensitivity`` (:mod:`.sensitivity_docs`);
- ``formats``: ``plan_execute`` per skill profile and plan format (``docs/data/formats/``:
  the merged ``episodes.parquet`` of one multirun and one job's ``run.json``);
- ``reasoning``: ``llm=sim`` against ``llm=sim_reasoning`` (``docs/data/reasoning/``, the same).

``python -m planarena.experiments.studies.rendered_docs`` renders them;
``tests/test_rendered_docs.py`` fails when the page and the data disagree.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from planarena.experiments.studies.rendered_blocks import DOCS, Page, measured_by
from planarena.experiments.studies.sensitivity_docs import verdicts

DATA = DOCS / "data"
FORMAT = "planner.plan_execute.plan_format"
PROFILES = ("perfect", "strong", "weak_json", "weak")


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _scope(episodes: pd.DataFrame) -> str:
    tasks = episodes.groupby(["env", "complexity"])["task_id"].nunique()
    return (
        f"{episodes['env'].nunique()} families x {episodes['complexity'].nunique()} "
        f"complexities, {tasks.max()} tasks each"
    )


def formats(data: Path = DATA) -> str:
    """Malformed plans and completion per skill profile, for a Plan JSON and a prose plan."""
    folder = data / "formats"
    episodes = pd.read_parquet(folder / "episodes.parquet")
    cells = episodes.groupby(["llm.skill", FORMAT])
    malformed = cells["failure_mode"].agg(lambda s: float((s == "malformed_output").mean()))
    completion, n = cells["success"].mean(), cells.size()
    lines = [
        f"{measured_by(folder, 'formats')} `plan_execute`, `faults=none`, seed 0, "
        f"{_scope(episodes)}:",
        "",
        "| profile | episodes per format | JSON: `malformed_output` | text: `malformed_output` "
        "| JSON completion | text completion |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for skill in [p for p in PROFILES if (p, "json") in n.index]:
        lines.append(
            f"| `{skill}` | {n[(skill, 'json')]} | {_pct(malformed[(skill, 'json')])} | "
            f"{_pct(malformed[(skill, 'text')])} | {_pct(completion[(skill, 'json')])} | "
            f"{_pct(completion[(skill, 'text')])} |"
        )
    return "\n".join(lines) + "\n"


def reasoning(data: Path = DATA) -> str:
    """Per planner: the default profile against the reasoning one (default faults)."""
    folder = data / "reasoning"
    episodes = pd.read_parquet(folder / "episodes.parquet")
    sums = episodes.groupby(["planner", "llm"], sort=False).agg(
        n=("success", "size"),
        completion=("success", "mean"),
        completion_tokens=("tokens_completion", "sum"),
        calls=("llm_calls", "sum"),
        latency=("latency_s", "mean"),
        cost=("cost_usd", "mean"),
    )
    lines = [
        f"{measured_by(folder, 'reasoning')} Default faults, seed 0, {_scope(episodes)}:",
        "",
        "| planner | `llm` | completion | completion tokens per call | episode latency (mean) "
        "| cost per episode |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for (planner, llm), r in sums.iterrows():
        lines.append(
            f"| `{planner}` | `{llm}` | {_pct(r['completion'])} | "
            f"{r['completion_tokens'] / r['calls']:,.0f} | {r['latency']:.1f} s | "
            f"${r['cost']:.4f} |"
        )
    return "\n".join(lines) + "\n"


SIMULATOR = Page(
    DOCS / "simulator.md",
    DATA,
    {
        "sensitivity": lambda data: verdicts(data / "sensitivity"),
        "formats": formats,
        "reasoning": reasoning,
    },
)

"""Where the shipped decision map makes ``planner=auto`` one fixed planner, rendered.

auto's choice on every task of the decision map's own task set (``experiment=decision_map``:
its envs, complexities, ``n_tasks`` and seed), at the map's default model profile and with no
token budget, as the planner makes it (the goal's features through the shipped map). No
episode runs: only the families' task generators and the map are read, so the blocks follow
a reinstalled map or an edited family the next time
``python -m planarena.experiments.studies.rendered_docs`` runs (a test fails until then).
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from planarena.experiments.studies.rendered_blocks import DOCS, Page

if TYPE_CHECKING:
    from omegaconf import DictConfig

ROOT = DOCS.parent
CELL = tuple[str, str]  # (env, complexity)


def _study_config() -> DictConfig:
    """``experiment=decision_map``'s composed config (Hydra's global state left as it was)."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    backup = get_gh_backup()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module("planarena.configs", version_base="1.3"):
            return compose("config", overrides=["experiment=decision_map"])
    finally:
        restore_gh_from_backup(backup)


@cache
def choices() -> dict[CELL, Counter[str]]:
    """Per (env, complexity) of the decision map's tasks, how often auto picks each planner."""
    from hydra.utils import instantiate
    from planarena.experiments.records.identity import FAMILY_DIGEST
    from planarena.planners.auto import AutoPlanner, features_of

    cfg = _study_config()
    auto = AutoPlanner()
    seed, n = int(cfg.seed), int(cfg.n_tasks)
    out: dict[CELL, Counter[str]] = {}
    for name, spec in cfg.env.items():
        env = instantiate({k: v for k, v in dict(spec).items() if k != FAMILY_DIGEST})
        for cx in cfg.complexity:
            picks: Counter[str] = Counter()
            for task in env.generate(n, seed=seed, complexity=cx):
                tools = env.make_tools(task, rules=[], seed_keys=(seed,)).toolbox.names()
                picks[auto.choose(features_of(task.goal, tools, None, auto.model))[0]] += 1
            out[(str(name), str(cx))] = picks
    return out


def _fixed() -> list[tuple[CELL, str]]:
    """The cells where auto picks one planner for every task, with that planner."""
    return [(cell, next(iter(p))) for cell, p in choices().items() if len(p) == 1]


def readme_line(data: Path) -> str:
    """One sentence for the README: where auto is one fixed planner, grouped by planner."""
    del data
    fixed = _fixed()
    all_cx = list(dict.fromkeys(cx for _, cx in choices()))
    by_planner: dict[str, dict[str, list[str]]] = {}
    for (env, cx), planner in fixed:
        by_planner.setdefault(planner, {}).setdefault(env, []).append(cx)

    def envs(cells: dict[str, list[str]]) -> str:
        return ", ".join(
            f"{env} ({'all' if cxs == all_cx else '/'.join(cxs)})" for env, cxs in cells.items()
        )

    where = "; ".join(f"{p} on {envs(c)}" for p, c in by_planner.items())
    return (
        f"With no token budget, at the default profile, auto is one fixed planner in "
        f"{len(fixed)} of the {len(choices())} family x complexity cells"
        f"{': ' + where if fixed else ''} "
        "([every cell](docs/decision-map.md#where-auto-is-one-planner)).\n"
    )


def cell_table(data: Path) -> str:
    """auto's picks per family and complexity (docs/decision-map.md)."""
    del data
    cfg_cx = list(dict.fromkeys(cx for _, cx in choices()))
    envs = list(dict.fromkeys(env for env, _ in choices()))
    lines = ["| family | " + " | ".join(cfg_cx) + " |", "| --- |" + " --- |" * len(cfg_cx)]
    for env in envs:
        cells = []
        for cx in cfg_cx:
            picks = choices()[(env, cx)]
            text = ", ".join(f"{p} {k}" for p, k in sorted(picks.items(), key=lambda x: -x[1]))
            cells.append(f"**{text.rsplit(' ', 1)[0]} only**" if len(picks) == 1 else text)
        lines.append(f"| {env} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


README = Page(ROOT / "README.md", DOCS / "data", {"auto_fixed": readme_line})

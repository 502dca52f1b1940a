"""The Hydra config tree (``planarena.configs``): its groups are the registry."""

from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent
"""Where the tree is, installed or in a checkout."""


def default_choices(group: str) -> list[str]:
    """The options ``config.yaml``'s defaults list chooses for ``group`` (the default planner
    set, the default envs): defined there once, read here by whoever needs the list."""
    import yaml

    defaults = yaml.safe_load((CONFIG_DIR / "config.yaml").read_text(encoding="utf-8"))["defaults"]
    for entry in defaults:
        if isinstance(entry, dict) and group in entry:
            chosen = entry[group]
            return [str(c) for c in (chosen if isinstance(chosen, list) else [chosen])]
    raise KeyError(f"config.yaml chooses no default for group {group!r}")


def options(group: str) -> list[str]:
    """Every option file of ``group`` shipped with planarena."""
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))

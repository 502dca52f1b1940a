"""Reading episode records into the tidy table notebooks use."""

from __future__ import annotations

import glob
from pathlib import Path

import pandas as pd


def load_records(path: str | Path) -> pd.DataFrame:
    """One row per episode from an ``episodes.jsonl`` (or ``.parquet``) file."""
    path = Path(path)
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    df = pd.read_json(path, lines=True, dtype=False)
    if df.empty:
        return df
    return df


def load(path_or_glob: str | Path) -> pd.DataFrame:
    """All episodes under a run dir, a sweep dir, a file, or a glob of any of these."""
    matches = sorted(glob.glob(str(path_or_glob), recursive=True)) or [str(path_or_glob)]
    files: list[Path] = []
    for m in matches:
        p = Path(m)
        if p.is_dir():
            files += sorted(p.rglob("episodes.jsonl"))
        elif p.exists():
            files.append(p)
    if not files:
        raise FileNotFoundError(f"no episodes.jsonl under {path_or_glob}")
    frames = []
    for f in files:
        frame = load_records(f)
        frame["run_dir"] = str(f.parent)
        overrides = f.parent / ".hydra" / "overrides.yaml"
        if overrides.exists():  # the command-line overrides that made this run, as a column
            import yaml

            frame["overrides"] = " ".join(map(str, yaml.safe_load(overrides.read_text()) or []))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)

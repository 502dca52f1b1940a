"""How a table cell and a table are written: percentages, money, intervals, Markdown and
LaTeX (booktabs, one table per env), with fixed number formats and no timestamps, so
regenerated tables diff byte for byte.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

MISSING = "--"
"""Placeholder for cells without data (ASCII so it is safe in Markdown and LaTeX)."""


def _is_missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _pct(value: float) -> str:
    return MISSING if _is_missing(value) else f"{100.0 * value:.1f}"


def format_completion_cell(rate: float, low: float, high: float, n: int) -> str:
    """Render ``85.0% [76.2, 91.0] (n=20)``: rate and Wilson CI in percent, cell size."""
    if _is_missing(rate):
        return f"{MISSING} (n={int(n)})"
    return f"{_pct(rate)}% [{_pct(low)}, {_pct(high)}] (n={int(n)})"


def _format_with_ci(value: float, low: float, high: float, digits: int = 2) -> str:
    if _is_missing(value):
        return MISSING
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _money(value: float) -> str:
    return MISSING if _is_missing(value) else f"{value:.4f}"


def _num(value: float, digits: int = 1) -> str:
    return MISSING if _is_missing(value) else f"{value:,.{digits}f}"


def _flatten(table: pd.DataFrame) -> pd.DataFrame:
    """Move row labels into ordinary columns so every writer shows them the same way."""
    flat = table.reset_index()
    flat.columns = [str(c) for c in flat.columns]
    return flat


def _markdown(table: pd.DataFrame) -> str:
    return table.to_markdown(index=False, disable_numparse=True)


HUMAN_HEADERS: dict[str, str] = {
    "planner": "Planner",
    "env": "Env",
    "complexity": "Complexity",
    "seed": "Seed",
    "llm": "LLM",
    "faults": "Faults",
    "n": "n",
    "tasks": "Tasks",
    "n_failed": "Failed (n)",
    "simple": "Simple",
    "medium": "Medium",
    "complex": "Complex",
}


def human_header(column: str) -> str:
    """A LaTeX-friendly column header: known names mapped, others de-snake-cased."""
    return HUMAN_HEADERS.get(column, column.replace("_", " "))


def _latex(table: pd.DataFrame, caption: str, label: str, *, wide: bool = False) -> str:
    """A booktabs tabular with human headers, scaled to the column (``table``) or, when
    ``wide``, to the text width (``table*``) with ``\\resizebox`` (needs graphicx), so it
    never overflows; LaTeX special characters are escaped."""
    shown = table.rename(columns={c: human_header(str(c)) for c in table.columns})
    body = shown.to_latex(index=False, escape=True)
    env = "table*" if wide else "table"
    width = "\\textwidth" if wide else "\\columnwidth"
    return (
        f"\\begin{{{env}}}[t]\n\\centering\n\\caption{{{caption}}}\n\\label{{{label}}}\n"
        f"\\resizebox{{{width}}}{{!}}{{%\n{body.rstrip()}\n}}\n\\end{{{env}}}\n"
    )


def _tex_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "_%&#$" else ch for ch in text)


def _latex_per_env(table: pd.DataFrame, caption: str, label: str, *, wide: bool) -> str:
    """One LaTeX table per env when several envs are present (a page holds one env's rows),
    else one table; see :func:`_latex`."""
    if "env" not in table.columns or table["env"].nunique() < 2:
        return _latex(table, caption, label, wide=wide)
    parts = []
    for env in dict.fromkeys(table["env"]):
        sub = table[table["env"] == env].drop(columns="env").reset_index(drop=True)
        safe = "".join(ch if ch.isalnum() else "-" for ch in str(env))
        parts.append(
            _latex(sub, f"{caption} Env: {_tex_escape(str(env))}.", f"{label}-{safe}", wide=wide)
        )
    return "\n".join(parts)


def _diff_text(d: float, lo: float, hi: float, degenerate: bool) -> str:
    d, lo, hi = (v + 0.0 if v != 0 else 0.0 for v in (d, lo, hi))  # no "-0.0"
    text = f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
    return text + " (degenerate: every resample equal)" if degenerate else text


def _p_text(p: float) -> str:
    return MISSING if _is_missing(p) else ("<0.001" if p < 0.001 else f"{p:.3f}")


def _optional_section(title: str, note: str, table: pd.DataFrame) -> list[str]:
    if table.empty:
        return []
    return [f"## {title}", "", note, "", _markdown(table), ""]


def _section_or_note(title: str, note: str, table: pd.DataFrame, missing: str) -> list[str]:
    if table.empty:
        return [f"## {title}", "", missing, ""]
    return _optional_section(title, note, table)


def _write_text(path: Path, text: str) -> None:
    """UTF-8 with '\\n' newlines on every platform so files are byte-identical."""
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)

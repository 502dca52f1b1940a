"""``report.html``: a run's outputs as one self-contained page a researcher can open and send.

One file beside the records, readable from ``file://`` with no server and no network (inline
CSS and JS, figures as base64 PNG): the headline and tables of ``summary.md`` rendered, every PNG
of ``figures/`` grouped by name, a sortable and filterable table of every episode, and the run's
provenance (``run.json``: code version, commit, source digest, packages, configuration) and
``status.json``. Each episode row opens that episode's trace: what went wrong (failed steps and
why, retries, fallbacks, rejected plans), the steps of each plan with their outcome, its tool
calls, events and record as ``planarena-trace --format html`` tabulates them, and that command
for the plan/timeline figure.

Why the traces are compressed JSON rendered on click, not per-episode HTML files: the figure of
``planarena-trace``'s page takes 0.5-2.5 s an episode to draw (a default run has 2,880), and its
page is ~200 KB, so per-episode pages would add tens of minutes and hundreds of MB to every
run. ``traces.jsonl`` of a default run is 34 MB of JSON that gzip brings to ~2 MB: the traces and
records are stored in gzip chunks (base64, ~1 MB of JSON each) that the browser inflates with
its built-in ``DecompressionStream`` only when a row is opened. The page of a default run is
~7 MB, of which the figures are about half.

The page is reproducible: the same run dir gives the same bytes (gzip without a timestamp, no
clock, paths relative to the page).
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planarena.experiments.analysis.report_assets import CSS, JS
from planarena.experiments.records.store import iter_jsonl, record_files, record_lines

REPORT_FILE = "report.html"
CHUNK_BYTES = 1 << 20
# The episode table of a page lists at most this many episodes (a study of 100,000 episodes
# would make a page of tens of MB that no browser filters smoothly); beyond it the failed
# episodes are listed first, and the page says how many it left out (episodes.jsonl has all).
MAX_LISTED = 20_000
"""JSON bytes of traces and records per gzip chunk: big enough for gzip to find the repeats
across episodes (~15x), small enough that opening one episode inflates ~1 MB, not the run."""

TABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("planner", "planner"),
    ("env", "env"),
    ("complexity", "complexity"),
    ("task_id", "task"),
    ("trial", "trial"),
    ("success", "success"),
    ("failure_mode", "failure mode"),
    ("tokens_total", "tokens"),
    ("latency_s", "latency (s)"),
    ("cost_usd", "cost ($)"),
)
"""The episode table's record columns and headers (swept ones are added when they vary)."""

VARYING_COLUMNS: tuple[str, ...] = ("cell", "seed", "llm", "faults")
"""Record columns shown only when they take several values (a study's cells, a sweep)."""

FILTER_COLUMNS: tuple[str, ...] = (
    "run",
    "cell",
    "seed",
    "llm",
    "faults",
    "planner",
    "env",
    "complexity",
    "success",
    "failure_mode",
)
"""Columns given a drop-down filter; the URL may preset any of them (``?planner=react``)."""


@dataclass
class RunFiles:
    """One dir holding ``episodes.jsonl`` and what the page reads beside it."""

    path: Path
    label: str  # "" for a single run; else its path relative to the page's dir

    @property
    def episodes(self) -> Path:
        return self.path / "episodes.jsonl"

    @property
    def traces(self) -> Path:
        return self.path / "traces.jsonl"


@dataclass
class Episodes:
    """The episode table's rows and the trace chunks its rows point into."""

    columns: list[tuple[str, str]]
    rows: list[dict[str, Any]] = field(default_factory=list)
    chunks: list[str] = field(default_factory=list)  # base64 of gzip of a JSON array
    total: int = 0  # the records of the runs, listed or not
    # each (planner, env, complexity, task_id) of the runs once, listed or not, as met
    shape: list[dict[str, Any]] = field(default_factory=list)


# ---------------------------------------------------------------- Markdown (summary.md)


def _inline(text: str) -> str:
    """Escaped inline Markdown: `code`, **bold**, *italic*, [text](link). Underscores are left
    alone (planner names such as plan_execute_replan are full of them)."""
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for part in parts:
        if len(part) >= 2 and part.startswith("`") and part.endswith("`"):
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
            continue
        s = html.escape(part, quote=False)
        s = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", s)
        s = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", s)
        s = re.sub(
            r"\[([^\]]+)\]\(([^)\s]+)\)",
            lambda m: f'<a href="{html.escape(m.group(2))}">{m.group(1)}</a>',
            s,
        )
        out.append(s)
    return "".join(out)


def _cells(line: str) -> list[str]:
    """A pipe-table row's cells (``\\|`` is a literal bar)."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body)]


def _is_separator(line: str) -> bool:
    return bool(re.fullmatch(r"\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*", line))


def _table(lines: list[str]) -> str:
    """A GitHub pipe table (header, separator, rows) as an HTML table, alignment kept."""
    head, aligns = _cells(lines[0]), []
    for spec in _cells(lines[1]):
        left, right = spec.startswith(":"), spec.endswith(":")
        aligns.append("center" if left and right else "right" if right else "")

    def row(cells: list[str], tag: str) -> str:
        tds = []
        for i, c in enumerate(cells):
            align = aligns[i] if i < len(aligns) and aligns[i] else ""
            style = f' style="text-align:{align}"' if align else ""
            tds.append(f"<{tag}{style}>{_inline(c)}</{tag}>")
        return "<tr>" + "".join(tds) + "</tr>"

    body = "\n".join(row(_cells(x), "td") for x in lines[2:])
    return (
        f'<div class="scroll"><table class="md">\n<thead>{row(head, "th")}</thead>\n'
        f"<tbody>\n{body}\n</tbody></table></div>"
    )


_LIST_ITEM = re.compile(r"^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$")


def markdown_to_html(text: str) -> str:
    """The Markdown summary.md uses (headings, pipe tables, lists, fenced code, paragraphs) as
    HTML: the project takes no Markdown package as a dependency, and its own output needs
    no more."""
    lines = text.splitlines()
    out: list[str] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            out.append(f"<p>{_inline(' '.join(s.strip() for s in para))}</p>")
            para.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        heading = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if line.strip().startswith("```"):
            flush()
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            out.append(f"<pre><code>{html.escape(chr(10).join(lines[i + 1 : j]))}</code></pre>")
            i = j + 1
        elif heading:
            flush()
            level = len(heading.group(1))
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
            i += 1
        elif line.lstrip().startswith("|") and i + 1 < len(lines) and _is_separator(lines[i + 1]):
            flush()
            j = i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                j += 1
            out.append(_table(lines[i:j]))
            i = j
        elif _LIST_ITEM.match(line):
            flush()
            i = _list(lines, i, out)
        elif not line.strip():
            flush()
            i += 1
        else:
            para.append(line)
            i += 1
    flush()
    return "\n".join(out)


def _list(lines: list[str], i: int, out: list[str]) -> int:
    """One flat list from ``lines[i]`` (continuation lines indented); returns the next line."""
    first = _LIST_ITEM.match(lines[i])
    assert first is not None
    tag = "ol" if first.group(2) else "ul"
    items: list[list[str]] = []
    while i < len(lines):
        m = _LIST_ITEM.match(lines[i])
        if m:
            items.append([m.group(3)])
        elif lines[i].startswith((" ", "\t")) and lines[i].strip() and items:
            items[-1].append(lines[i].strip())
        else:
            break
        i += 1
    out.append(f"<{tag}>" + "".join(f"<li>{_inline(' '.join(it))}</li>" for it in items))
    out[-1] += f"</{tag}>"
    return i


def split_summary(text: str) -> tuple[str, str, list[tuple[str, str]]]:
    """(title, headline, [(heading, body), ...]) of summary.md.

    The headline is what precedes the first ``## `` heading (the one-page summary summary.md
    opens with); if that is empty and the first section is itself titled as a headline or
    summary, that section is the headline. Fenced code never splits a section."""
    title, head, sections = "", [], []
    current: list[str] | None = None
    fenced = False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
        if not fenced and not title and not sections and line.startswith("# "):
            title = line[2:].strip()
            continue
        if not fenced and line.startswith("## "):
            current = []
            sections.append((line[3:].strip(), current))
            continue
        (head if current is None else current).append(line)
    parts = [(h, "\n".join(body).strip()) for h, body in sections]
    headline = "\n".join(head).strip()
    if not headline and parts and re.search(r"headline|summary|at a glance", parts[0][0], re.I):
        headline = f"### {parts[0][0]}\n\n{parts[0][1]}"
        parts = parts[1:]
    return title, headline, parts


# ---------------------------------------------------------------- the run's files


def _read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object file, or None when absent or unreadable (the page says so)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _runs(run_dirs: Sequence[Path], out_dir: Path) -> list[RunFiles]:
    """Every dir holding records under ``run_dirs`` (a sweep's jobs), labelled when several."""
    dirs: list[Path] = []
    for d in run_dirs:
        for f in record_files(d):
            if f.parent not in dirs:
                dirs.append(f.parent)
    if len(dirs) == 1:
        return [RunFiles(dirs[0], "")]
    return [RunFiles(d, _relative(d, out_dir)) for d in dirs]


def _relative(path: Path, start: Path) -> str:
    """``path`` relative to ``start``, POSIX style (absolute paths are machine-specific)."""
    return Path(os.path.relpath(path.resolve(), start.resolve())).as_posix()


def _trace_key(doc: dict[str, Any]) -> tuple[str, str, str, int]:
    """What pairs a trace line with its record within one run (a study's cell included)."""
    cell = doc.get("cell")
    planner, task = str(doc.get("planner")), str(doc.get("task_id"))
    return (str(cell or ""), planner, task, int(doc.get("trial", 0)))


class _TraceReader:
    """The trace lines of ``wanted`` keys, looked up in the records' order.

    A run writes a record and its trace line in the same order, so the file is read forward
    only as far as the next key asked for; a line met early (a file written out of order) is
    kept until it is asked for. The page thus holds about one line at a time, not the text of
    every listed episode's trace (2-3 KB each: 50 MB for 20,000 ReAct episodes)."""

    def __init__(self, path: Path, wanted: set[tuple[str, str, str, int]]) -> None:
        self._wanted = wanted
        self._early: dict[tuple[str, str, str, int], str] = {}
        self._lines = self._read(path) if path.is_file() and wanted else iter(())

    def _read(self, path: Path) -> Iterator[tuple[tuple[str, str, str, int], str]]:
        with path.open(encoding="utf-8") as fh:
            for raw in fh:
                if not raw.endswith("\n") or not raw.strip():
                    continue  # a torn last line: the run's records skip it too
                try:
                    key = _trace_key(json.loads(raw))
                except (ValueError, KeyError, TypeError):
                    continue
                if key in self._wanted:
                    yield key, raw.strip()

    def pop(self, key: tuple[str, str, str, int]) -> str | None:
        """The trace line of ``key`` (once), or None when the file has none."""
        if key in self._early:
            return self._early.pop(key)
        for found, line in self._lines:
            if found == key:
                return line
            self._early[found] = line
        return None


def episode_key(rec: dict[str, Any], label: str = "") -> str:
    """The episode's id in the page and its URL: ``[run|][cell|]planner/task_id/trial``."""
    prefix = "".join(f"{p}|" for p in (label, str(rec.get("cell") or "")) if p)
    return f"{prefix}{rec.get('planner')}/{rec.get('task_id')}/{int(rec.get('trial', 0))}"


def _gzip_b64(text: str) -> str:
    """gzip (no timestamp: the same run gives the same page) then base64. Level 6, not 9: the
    page is written by every job, and level 9 took several times longer for a few % less."""
    return base64.b64encode(gzip.compress(text.encode("utf-8"), 6, mtime=0)).decode("ascii")


Listed = dict[int, tuple[str, str, str, int]]  # a record's position -> its trace key


SHAPE_KEYS = ("planner", "env", "complexity", "task_id")
"""What the page's title and its planner count read of every record (listed or not)."""


def _scan(runs: list[RunFiles], limit: int) -> tuple[list[Listed], Episodes]:
    """One pass over the records: per run, the records the table lists, by position (every
    one up to ``limit``; beyond it the failed episodes first, then the rest, in file order);
    and the episodes, no row read yet, with their columns (the optional ones that take more
    than one value across the records), the total and the shape of every record."""
    seen: dict[str, set[str]] = {c: set() for c in VARYING_COLUMNS}
    shape: dict[tuple[Any, ...], None] = {}
    failed: list[list[tuple[int, tuple[str, str, str, int]]]] = []
    passed: list[list[tuple[int, tuple[str, str, str, int]]]] = []
    for run in runs:
        f, p = [], []
        for i, rec in enumerate(iter_jsonl(run.episodes)):
            for c in VARYING_COLUMNS:
                seen[c].add(str(rec.get(c)))
            shape[tuple(rec.get(k) for k in SHAPE_KEYS)] = None
            (p if rec.get("success") else f).append((i, _trace_key(rec)))
        failed.append(f)
        passed.append(p)
    cols = [("run", "run")] if len(runs) > 1 else []
    varying = cols + [(c, c) for c in VARYING_COLUMNS if len(seen[c]) > 1]
    total = sum(len(f) + len(p) for f, p in zip(failed, passed, strict=True))
    room = limit
    chosen: list[Listed] = [{} for _ in runs]
    for pool in (failed, passed):
        for k, entries in enumerate(pool):
            take = entries[: max(room, 0)]
            chosen[k].update(take)
            room -= len(take)
    episodes = Episodes(columns=[*varying, *TABLE_COLUMNS], total=total)
    episodes.shape = [dict(zip(SHAPE_KEYS, key, strict=True)) for key in shape]
    return chosen, episodes


def _listed_records(run: RunFiles, listed: Listed) -> Iterator[dict[str, Any]]:
    """The records at the ``listed`` positions, in file order, parsed (the others are not:
    :func:`_scan` has read them all once)."""
    for i, (_, raw) in enumerate(record_lines(run.episodes)):
        if i in listed:
            yield json.loads(raw)


def read_episodes(runs: list[RunFiles], limit: int = MAX_LISTED) -> Episodes:
    """The records of ``runs`` as table rows (at most ``limit``: :func:`_scan`), each
    row's record and trace packed in a chunk."""
    listed, episodes = _scan(runs, limit)
    pending: list[str] = []
    size = 0
    for k, run in enumerate(runs):
        traces = _TraceReader(run.traces, set(listed[k].values()))
        for rec in _listed_records(run, listed[k]):
            trace = traces.pop(_trace_key(rec))
            key = episode_key(rec, run.label)
            item = json.dumps(
                {"key": key, "run": run.label, "record": rec}, sort_keys=True, default=str
            )
            item = item[:-1] + f',"trace":{trace or "null"}}}'
            row = {c: rec.get(c) for c, _ in episodes.columns}
            row |= {"run": run.label, "_key": key, "_trace": trace is not None}
            row["_at"] = f"{len(episodes.chunks)}.{len(pending)}"
            episodes.rows.append(row)
            pending.append(item)
            size += len(item)
            if size >= CHUNK_BYTES:
                episodes.chunks.append(_gzip_b64("[" + ",".join(pending) + "]"))
                pending, size = [], 0
    if pending:
        episodes.chunks.append(_gzip_b64("[" + ",".join(pending) + "]"))
    return episodes


# ---------------------------------------------------------------- page sections


def _fmt(column: str, value: Any) -> str:
    """A table cell's text: numbers at the precision the summary tables use."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if column == "success":
        return "yes" if value is True or value == 1 else "no"
    if column == "latency_s":
        return f"{float(value):.1f}"
    if column == "cost_usd":
        return f"{float(value):.4f}"
    if column == "tokens_total":
        return str(int(value))
    return str(value)


def _episode_table(episodes: Episodes) -> str:
    """The episode table (rows in the records' order) and its filter bar."""
    esc = html.escape
    cols = episodes.columns
    options: dict[str, list[str]] = {}
    for c, _ in cols:
        if c in FILTER_COLUMNS:
            values = dict.fromkeys(_fmt(c, r.get(c)) for r in episodes.rows)
            options[c] = list(values)
    selects = "".join(
        f'<label>{esc(title)} <select data-col="{esc(c)}"><option value="">all</option>'
        + "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in options[c])
        + "</select></label>"
        for c, title in cols
        if c in options
    )
    head = "".join(f'<th data-col="{esc(c)}" title="sort">{esc(t)}</th>' for c, t in cols)
    body = []
    for r in episodes.rows:
        tds = []
        for c, _ in cols:
            text = esc(_fmt(c, r.get(c)))
            if c == "task_id":
                text = f'<a href="#episode={esc(_url_quote(r["_key"]))}">{text}</a>'
            elif c == "success":
                text = f'<span class="{"ok" if text == "yes" else "bad"}">{text}</span>'
            tds.append(f"<td>{text}</td>")
        body.append(f'<tr data-k="{esc(r["_key"])}" data-at="{r["_at"]}">' + "".join(tds))
    return (
        '<div id="filters"><label>search <input id="q" type="search" '
        'placeholder="words in any column"></label>'
        f'{selects}<button id="reset" type="button">reset</button></div>\n'
        '<p id="count" class="muted"></p>\n'
        '<div class="scroll tall"><table id="episodes"><thead><tr>'
        f"{head}</tr></thead>\n<tbody>\n" + "</tr>\n".join(body) + "</tr>\n</tbody></table></div>"
    )


def _url_quote(text: str) -> str:
    """Percent-encode what a URL fragment must not hold (JS decodes with decodeURIComponent)."""
    from urllib.parse import quote

    return quote(text, safe="/-_.~")


def _png_width(data: bytes) -> int:
    """A PNG's pixel width from its IHDR chunk, 0 if it is not a PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or len(data) < 24:
        return 0
    return int.from_bytes(data[16:20], "big")


def _figure_group(path: Path, root: Path) -> str:
    """A figure's group: its subdir under figures/, else its name before the first ``-``."""
    rel = path.relative_to(root)
    if len(rel.parts) > 1:
        return "/".join(rel.parts[:-1])
    return path.stem.split("-", 1)[0]


def _figures(fig_dir: Path) -> str:
    """Every PNG under ``figures/`` inline, grouped by name (whatever names the figures have)."""
    pngs = sorted(fig_dir.rglob("*.png")) if fig_dir.is_dir() else []
    if not pngs:
        return '<p class="muted">No figures (figures/ holds no PNG).</p>'
    groups: dict[str, list[Path]] = {}
    for p in pngs:
        groups.setdefault(_figure_group(p, fig_dir), []).append(p)
    out = []
    for name, paths in groups.items():
        figs = []
        for p in paths:
            data = p.read_bytes()
            width = _png_width(data)
            size = f' width="{width // 2}"' if width else ""  # one scale: text sizes match
            figs.append(
                f'<figure><img alt="{html.escape(p.relative_to(fig_dir).as_posix())}"{size} '
                f'src="data:image/png;base64,{base64.b64encode(data).decode("ascii")}" '
                'title="click: full size"><figcaption>'
                f"{html.escape(p.relative_to(fig_dir).as_posix())}</figcaption></figure>"
            )
        figs = "".join(figs)
        out.append(f'<h3>{html.escape(name)}</h3><div class="figs">{figs}</div>')
    return "\n".join(out)


def _kv_table(items: Iterable[tuple[str, Any]]) -> str:
    rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_plain(v))}</td></tr>"
        for k, v in items
    )
    return f'<table class="kv">{rows}</table>'


def _plain(value: Any) -> str:
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    if value is None:
        return "null"
    return str(value)


def _provenance(run: RunFiles) -> str:
    """One run's ``run.json`` (code, config id, configuration) and ``status.json``."""
    import yaml

    info = _read_json(run.path / "run.json")
    status = _read_json(run.path / "status.json")
    parts = []
    if info is None:
        parts.append('<p class="muted">No readable run.json.</p>')
    else:
        code = dict(info.get("code") or {})
        packages = code.pop("packages", {}) or {}
        top = [(k, v) for k, v in info.items() if k not in ("code", "config")]
        parts.append("<h4>Code</h4>" + _kv_table([*code.items(), *top]))
        parts.append("<h4>Packages</h4>" + _kv_table(sorted(packages.items())))
        config = yaml.safe_dump(info.get("config"), sort_keys=False, default_flow_style=False)
        parts.append(f"<h4>Configuration</h4><pre>{html.escape(config)}</pre>")
    if status is None:
        parts.append('<h4>Status</h4><p class="muted">No status.json (still running?)</p>')
    else:
        parts.append("<h4>Status</h4>" + _kv_table(status.items()))
    return "\n".join(parts)


def _code_line(info: dict[str, Any] | None) -> str:
    """``planarena 0.2.0, commit 1a2b3c4 (dirty), source 748d84f0``: the page's subtitle."""
    if not info:
        return "code unknown (no run.json)"
    code = info.get("code") or {}
    commit = code.get("git_commit")
    where = f"commit {str(commit)[:12]}" if commit else "no git commit"
    where += " (dirty)" if code.get("git_dirty") else ""
    digest = str(code.get("source_sha256") or "")[:12]
    return f"planarena {code.get('planarena', '?')}, {where}, source {digest or '?'}"


def _summary_section(summary: Path) -> tuple[str, str]:
    """(headline HTML, tables HTML) from summary.md; each table section collapsible."""
    if not summary.is_file():
        missing = '<p class="muted">No summary.md in this dir.</p>'
        return missing, missing
    _, headline, sections = split_summary(summary.read_text(encoding="utf-8"))
    if not headline and sections:  # summary.md without a headline: its first table leads
        first, sections = sections[0], sections[1:]
        headline = f"### {first[0]}\n\n{first[1]}"
    head = markdown_to_html(headline) if headline else '<p class="muted">(empty summary.md)</p>'
    tables = "\n".join(
        f'<details class="sec"><summary>{_inline(h)}</summary>{markdown_to_html(body)}</details>'
        for h, body in sections
    )
    return head, tables


def _sections(runs: list[RunFiles], out_dir: Path, episodes: Episodes) -> Iterator[str]:
    """The page's body, section by section."""
    main = runs[0].path if len(runs) == 1 else out_dir
    summary = out_dir / "summary.md"
    headline, tables = _summary_section(summary if summary.is_file() else main / "summary.md")
    figures = out_dir / "figures"
    yield f'<section id="headline"><h2>Headline</h2>{headline}</section>'
    yield (
        '<section id="tables"><h2>Tables <small>(summary.md; click a section to open it; '
        f'<a href="#" id="expand">open all</a>)</small></h2>{tables}</section>'
    )
    yield (
        '<section id="figures"><h2>Figures</h2>'
        f"{_figures(figures if figures.is_dir() else main / 'figures')}</section>"
    )
    listed = len(episodes.rows)
    count = f"{listed}" if listed >= episodes.total else f"{listed:,} of {episodes.total:,}"
    left_out = (
        ""
        if listed >= episodes.total
        else f"<p><b>{episodes.total - listed:,} episodes are not listed</b> (a page lists at "
        f"most {MAX_LISTED:,}: the failed ones first); episodes.jsonl holds every record, "
        "and <code>planarena-trace</code> opens any episode's trace.</p>"
    )
    yield (
        f'<section id="episodes-sec"><h2>Episodes ({count})</h2>{left_out}'
        "<p class=muted>Click a header to sort, a task to open its trace. The URL keeps the "
        "open episode (#episode=...); filters can be preset: "
        "<code>report.html?planner=react&amp;q=timeout</code>.</p>"
        f"{_episode_table(episodes)}</section>"
    )
    blocks = []
    for i, run in enumerate(runs):
        name = html.escape(run.label or run.path.name)
        opened = " open" if i == 0 else ""
        blocks.append(
            f'<details class="sec"{opened}><summary>{name} &mdash; '
            f"{html.escape(_code_line(_read_json(run.path / 'run.json')))}</summary>"
            f"{_provenance(run)}</details>"
        )
    yield '<section id="provenance"><h2>Provenance</h2>' + "\n".join(blocks) + "</section>"


_DATE = re.compile(r"(\d{4}-\d{2}-\d{2})")


def page_title(rows: Sequence[Mapping[str, Any]], dirs: Sequence[Path]) -> str:
    """What ran, not where: ``11 planners x 2 envs x 3 complexities, 20 tasks per cell,
    2026-12-05`` (the date from the run dir's path, as Hydra names it; none when the path
    has none, so the same records give the same page)."""

    def count(key: str, noun: str) -> str:
        n = len({str(r.get(key)) for r in rows if r.get(key) is not None})
        return f"{n} {noun}{'' if n == 1 else 's'}"

    cells: dict[tuple[str, ...], set[str]] = {}
    for r in rows:
        key = (str(r.get("env")), str(r.get("complexity")), str(r.get("planner")))
        cells.setdefault(key, set()).add(str(r.get("task_id")))
    sizes = sorted({len(t) for t in cells.values()})
    tasks = "" if not sizes else (f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}")
    what = " x ".join(
        [count("planner", "planner"), count("env", "env"), count("complexity", "complexity")]
    ).replace("complexitys", "complexities")
    parts = [what, *([f"{tasks} tasks per cell"] if tasks else [])]
    dates = sorted({m.group(1) for d in dirs if (m := _DATE.search(str(Path(d).resolve())))})
    if dates:
        parts.append(dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}")
    return ", ".join(parts)


def render_page(run_dirs: Sequence[Path], out_dir: Path) -> str:
    """The whole page as text (``write_*`` write it): one string, no external reference."""
    return "".join(page_parts(run_dirs, out_dir))


def page_parts(run_dirs: Sequence[Path], out_dir: Path) -> Iterator[str]:
    """The page, piece by piece (their concatenation is :func:`render_page`), so a writer
    never holds the whole page, nor every chunk twice, at once."""
    out_dir = Path(out_dir)
    runs = _runs([Path(d) for d in run_dirs], out_dir)
    episodes = read_episodes(runs)
    title = page_title(episodes.shape, [r.path for r in runs] or [out_dir])
    first = _read_json(runs[0].path / "run.json")
    status = _read_json(runs[0].path / "status.json") if len(runs) == 1 else None
    planners = list(dict.fromkeys(str(r.get("planner")) for r in episodes.shape))
    where = runs[0].path.name if len(runs) == 1 else out_dir.resolve().name
    sub = f"{where}: {episodes.total} episodes of {len(planners)} planners"
    sub += f" in {len(runs)} runs" if len(runs) > 1 else ""
    sub += f"; {_code_line(first)}" if len(runs) == 1 else ""
    if status:
        sub += f"; status {status.get('status')}"
    trace_cmd = {r.label: _relative(r.path, out_dir) for r in runs}
    yield (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>planarena report: {html.escape(title)}</title>\n<style>{CSS}</style>\n"
        "</head>\n<body>\n<nav><strong>planarena report</strong> "
        '<a href="#headline">headline</a> <a href="#tables">tables</a> '
        '<a href="#figures">figures</a> <a href="#episodes-sec">episodes</a> '
        '<a href="#provenance">provenance</a></nav>\n<main>\n'
        f"<h1>{html.escape(title)}</h1>\n<p class=muted>{html.escape(sub)}</p>\n"
    )
    yield "\n".join(_sections(runs, out_dir, episodes))
    yield (
        "\n</main>\n"
        '<div id="trace" hidden><div class="panel"><button id="close" type="button" '
        'title="close (Esc)">&times;</button><div id="trace-body"></div></div></div>\n'
    )
    episodes.rows.clear()  # the table is written: only the chunks are left to write
    for i, chunk in enumerate(episodes.chunks):
        episodes.chunks[i] = ""  # handed on once: not held while the rest is written
        sep = "\n" if i else ""
        yield f'{sep}<script type="application/gzip+base64" id="chunk-{i}">{chunk}</script>'
    yield (
        f'\n<script type="application/json" id="run-dirs">{_script_json(trace_cmd)}</script>\n'
        f"<script>{JS}</script>\n</body>\n</html>\n"
    )


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element (no ``</`` can end it early)."""
    return json.dumps(value, sort_keys=True).replace("</", "<\\/")


def write_merged_report_html(run_dirs: Sequence[Path], out_dir: Path) -> Path:
    """``out_dir/report.html`` over the records of several run or sweep dirs (planarena-report
    with --out); the summary and figures are ``out_dir``'s, the provenance every run's."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dest = out_dir / REPORT_FILE
    tmp = dest.with_name(f".{REPORT_FILE}.tmp")
    with tmp.open("w", encoding="utf-8", newline="\n") as fh:
        for part in page_parts(run_dirs, out_dir):
            fh.write(part)
    tmp.replace(dest)  # a reader never sees half a page
    return dest


def write_report_html(run_dir: Path, out_dir: Path | None = None) -> Path:
    """Write ``report.html`` for ``run_dir`` (a run or a sweep dir) into ``out_dir`` (default:
    the run dir itself) and return its path."""
    run_dir = Path(run_dir)
    return write_merged_report_html([run_dir], run_dir if out_dir is None else Path(out_dir))

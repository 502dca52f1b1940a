"""report.html: one self-contained page per run, checked against the run's own files.

Fast: the page is one file with nothing fetched from elsewhere, holds every episode as a row
(each row's stored trace is that episode's line of traces.jsonl), every planner, the
provenance of run.json and status.json, and every PNG of figures/ inline. Slow: headless
Chromium opens the page with a filter and an episode preset in the URL; the DOM after its
script ran must show only the filtered rows and that episode's trace, and screenshots of the
page and of an opened trace must not be blank.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from planarena.experiments.analysis.report import main as report_main
from planarena.experiments.analysis.report_html import (
    markdown_to_html,
    split_summary,
    write_merged_report_html,
    write_report_html,
)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _key(rec: dict[str, Any]) -> str:
    """The episode id as the page's docs define it (written out here, not imported)."""
    return f"{rec['planner']}/{rec['task_id']}/{int(rec['trial'])}"


class _Page(HTMLParser):
    """The parts of the page the tests read: episode rows (key, cells, hidden), filter
    options, images, external references, chunks and the trace panel."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[dict[str, Any]] = []
        self.options: dict[str, list[str]] = {}
        self.imgs: list[str] = []
        self.refs: list[str] = []  # src/href attributes
        self.chunks: dict[str, str] = {}
        self.trace: dict[str, str | None] | None = None
        self.trace_text: list[str] = []
        self._select: str | None = None
        self._chunk: str | None = None
        self._cell: list[str] | None = None
        self._in_trace = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for name in ("src", "href"):
            if a.get(name) is not None:
                self.refs.append(str(a[name]))
        if tag == "img":
            self.imgs.append(str(a.get("src")))
        if tag == "tr" and a.get("data-k"):
            self.rows.append({"key": a["data-k"], "at": a.get("data-at"), "hidden": "hidden" in a})
            self.rows[-1]["cells"] = []
        if tag == "td" and self.rows and not self._in_trace:
            self._cell = []
        if tag == "select":
            self._select = str(a.get("data-col"))
            self.options[self._select] = []
        if tag == "option" and self._select is not None:
            self.options[self._select].append(str(a.get("value")))
        if tag == "script" and a.get("type") == "application/gzip+base64":
            self._chunk = str(a.get("id"))
            self.chunks[self._chunk] = ""
        if tag == "div" and a.get("id") == "trace":
            self.trace = a
        if tag == "div":
            self._in_trace += 1 if self._in_trace or a.get("id") == "trace" else 0

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.rows[-1]["cells"].append("".join(self._cell).strip())
            self._cell = None
        if tag == "select":
            self._select = None
        if tag == "script":
            self._chunk = None
        if tag == "div" and self._in_trace:
            self._in_trace -= 1

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._chunk is not None:
            self.chunks[self._chunk] += data
        if self._in_trace:
            self.trace_text.append(data)


def parse(page: str) -> _Page:
    p = _Page()
    p.feed(page)
    return p


@pytest.fixture(scope="module")
def run_dir(small_run_dir: Path) -> Path:
    return small_run_dir


@pytest.fixture(scope="module")
def page_file(run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page of the shared small run, written beside a copy (the run dir is shared)."""
    out = tmp_path_factory.mktemp("report_html")
    return write_report_html(run_dir, out)


@pytest.fixture(scope="module")
def page(page_file: Path) -> str:
    return page_file.read_text(encoding="utf-8")


def test_the_page_is_one_file_referencing_nothing_outside(page_file: Path, run_dir: Path) -> None:
    page = page_file.read_text(encoding="utf-8")
    assert sorted(p.name for p in page_file.parent.iterdir()) == ["report.html"]
    parsed = parse(page)
    for ref in parsed.refs:  # only inline data and in-page anchors
        assert ref.startswith(("data:image/png;base64,", "#")), ref[:80]
    assert not re.search(r"<link\b|<script[^>]*\bsrc=|@import|url\(", page, re.I)
    user_data = "".join(
        (run_dir / n).read_text(encoding="utf-8")
        for n in ("run.json", "status.json", "summary.md", "episodes.jsonl", "traces.jsonl")
    )
    for url in re.findall(r"https?://[^\s\"'<>)]+", page):  # only inside the run's own data
        assert html.unescape(url) in user_data, url


def test_every_episode_is_a_row_and_opens_its_own_trace(page: str, run_dir: Path) -> None:
    records = _jsonl(run_dir / "episodes.jsonl")
    traces = {_key(t): t for t in _jsonl(run_dir / "traces.jsonl")}
    parsed = parse(page)
    assert [r["key"] for r in parsed.rows] == [_key(r) for r in records]
    chunks = {
        int(name.split("-")[1]): json.loads(gzip.decompress(base64.b64decode(text)))
        for name, text in parsed.chunks.items()
    }
    for row, rec in zip(parsed.rows, records, strict=True):
        c, at = map(int, row["at"].split("."))
        item = chunks[c][at]
        assert item["key"] == row["key"] and item["record"] == rec
        assert item["trace"] == traces[row["key"]]  # what the row opens is its own trace
        planner, env, complexity, task, trial, success = row["cells"][:6]
        assert (planner, env, complexity, task) == (
            rec["planner"],
            rec["env"],
            rec["complexity"],
            rec["task_id"],
        )
        assert (int(trial), success == "yes") == (rec["trial"], rec["success"])
        assert row["cells"][6] == rec["failure_mode"]
        assert int(row["cells"][7]) == rec["tokens_total"]
        assert float(row["cells"][8]) == pytest.approx(rec["latency_s"], abs=0.05)
        # half the last digit shown, plus float noise (0.05505 is shown 0.0551)
        assert float(row["cells"][9]) == pytest.approx(rec["cost_usd"], abs=5e-5 + 1e-12)


def test_each_row_gets_its_own_trace_when_the_traces_are_in_another_order(
    run_dir: Path, tmp_path: Path
) -> None:
    """The page reads traces.jsonl forward in the records' order, keeping a line met early:
    a trace file in reverse order (and with a line no record has) still pairs each row with
    its own trace, and a record without a trace line gets none."""
    from planarena.experiments.analysis.report_html import RunFiles, read_episodes

    copy = tmp_path / "run"
    copy.mkdir()
    records = (run_dir / "episodes.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    traces = (run_dir / "traces.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (copy / "episodes.jsonl").write_text("".join(records), encoding="utf-8")
    stray = json.loads(traces[0]) | {"task_id": "no-such-task"}
    kept = [*reversed(traces[1:]), json.dumps(stray) + "\n"]  # the first record's line gone
    (copy / "traces.jsonl").write_text("".join(kept), encoding="utf-8")
    episodes = read_episodes([RunFiles(copy, "")])
    by_key = {_key(t): t for t in _jsonl(run_dir / "traces.jsonl")}
    chunks = [json.loads(gzip.decompress(base64.b64decode(c))) for c in episodes.chunks]
    first = _key(json.loads(records[0]))
    for row in episodes.rows:
        c, at = map(int, row["_at"].split("."))
        item = chunks[c][at]
        want = None if row["_key"] == first else by_key[row["_key"]]
        assert item["trace"] == want and row["_trace"] == (want is not None)


def test_a_large_run_lists_its_failures_first_and_says_what_it_left_out(run_dir: Path) -> None:
    """Beyond the cap the table lists the failed episodes first, then the rest in file order,
    and the page names how many it left out; every listed row still opens its own record."""
    from planarena.experiments.analysis.report_html import RunFiles, read_episodes

    records = _jsonl(run_dir / "episodes.jsonl")
    limit = sum(not r["success"] for r in records) + 3
    episodes = read_episodes([RunFiles(run_dir, "")], limit=limit)
    assert episodes.total == len(records) and len(episodes.rows) == limit
    listed = {row["_key"] for row in episodes.rows}
    failed = {_key(r) for r in records if not r["success"]}
    assert failed <= listed  # every failure kept
    passed = [_key(r) for r in records if r["success"]]
    assert listed - failed == set(passed[:3])  # then the successes in file order


def test_a_page_listing_one_episode_still_titles_and_counts_every_record(
    run_dir: Path, page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The title (planners x envs x complexities, tasks per cell) and the count under it
    describe the run, not the rows the table had room for."""
    from planarena.experiments.analysis import report_html

    records = _jsonl(run_dir / "episodes.jsonl")
    whole = report_html.read_episodes
    monkeypatch.setattr(report_html, "read_episodes", lambda runs: whole(runs, limit=1))
    one_row = report_html.render_page([run_dir], tmp_path)
    heading = re.compile(r"<h1>.*?</h1>\n<p class=muted>[^:]*: ([^;]*);")
    full, cut = heading.search(page), heading.search(one_row)
    assert full is not None and cut is not None
    assert cut.group(0).split("\n")[0] == full.group(0).split("\n")[0]  # the title
    planners = len({r["planner"] for r in records})
    assert cut.group(1) == full.group(1) == f"{len(records)} episodes of {planners} planners"


def test_every_planner_and_the_provenance_are_on_the_page(page: str, run_dir: Path) -> None:
    records = _jsonl(run_dir / "episodes.jsonl")
    parsed = parse(page)
    planners = list(dict.fromkeys(r["planner"] for r in records))
    assert parsed.options["planner"] == ["", *planners]  # "" is "all"
    info = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    code = info["code"]
    text = html.unescape(page)
    for value in (
        code["planarena"],
        code["source_sha256"],
        code["python"],
        info["config_id"],
        *(c for c in [code.get("git_commit")] if c),
    ):
        assert str(value) in text, value
    for name, version in code["packages"].items():
        assert f"<th>{name}</th><td>{version}</td>" in page, name
    assert f"<th>git_dirty</th><td>{code['git_dirty']}</td>" in page
    assert f"n_tasks: {info['config']['n_tasks']}" in text  # the configuration, as YAML
    status = json.loads((run_dir / "status.json").read_text(encoding="utf-8"))
    assert f"<th>status</th><td>{status['status']}</td>" in page


def test_every_png_of_figures_is_embedded(page: str, run_dir: Path) -> None:
    pngs = sorted((run_dir / "figures").rglob("*.png"))
    assert pngs, "the small run draws figures"
    parsed = parse(page)
    embedded = {src.removeprefix("data:image/png;base64,") for src in parsed.imgs}
    assert len(parsed.imgs) == len(pngs)
    for png in pngs:
        assert base64.b64encode(png.read_bytes()).decode("ascii") in embedded, png.name
        assert f'alt="{png.relative_to(run_dir / "figures").as_posix()}"' in page


def test_the_headline_and_tables_of_summary_md_are_rendered(page: str, run_dir: Path) -> None:
    summary = (run_dir / "summary.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", summary, re.M)
    for heading in headings:  # the headline's, or a table section's
        assert html.escape(heading, quote=False) in page, heading
    headline = page.split('<section id="headline">')[1].split("</section>")[0]
    assert "<table" in headline and "<th" in headline
    first_row = next(x for x in summary.splitlines() if x.startswith("| "))
    cells = [c.strip() for c in first_row.strip("|").split("|")]
    assert all(f">{html.escape(c, quote=False)}</th>" in page for c in cells)


def test_the_page_is_reproducible(run_dir: Path, page: str, tmp_path: Path) -> None:
    """Same records, same bytes (gzip without its timestamp, no clock, relative paths)."""
    assert write_report_html(run_dir, tmp_path).read_text(encoding="utf-8") == page


def test_the_page_stays_small(page_file: Path, run_dir: Path) -> None:
    """Traces stored compressed (a default run's 34 MB of traces weigh ~2 MB here): the page
    is the figures, the compressed traces and ~0.5 KB a row, not the raw traces."""
    figures = sum(p.stat().st_size for p in (run_dir / "figures").rglob("*.png")) * 4 / 3
    traces = len(gzip.compress((run_dir / "traces.jsonl").read_bytes())) * 4 / 3
    records = len(gzip.compress((run_dir / "episodes.jsonl").read_bytes())) * 4 / 3
    n = len(_jsonl(run_dir / "episodes.jsonl"))
    summary = (run_dir / "summary.md").stat().st_size
    budget = figures + 1.3 * (traces + records) + 600 * n + 3 * summary + 100_000
    assert page_file.stat().st_size < budget


def test_planarena_report_writes_it(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert report_main([str(run_dir), "--out", str(out)]) == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert len(parse(page).rows) == len(_jsonl(run_dir / "episodes.jsonl"))
    dirs = json.loads(page.split('id="run-dirs">')[1].split("</script>")[0])
    assert dirs == {"": os.path.relpath(run_dir, out)}  # the trace command's run dir


def test_several_runs_merge_into_one_page_with_every_runs_provenance(
    run_dir: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    shutil.copytree(run_dir, other, ignore=shutil.ignore_patterns("figures", "report.html"))
    out = tmp_path / "merged"
    page = write_merged_report_html([run_dir, other], out).read_text(encoding="utf-8")
    parsed = parse(page)
    n = len(_jsonl(run_dir / "episodes.jsonl"))
    assert len(parsed.rows) == 2 * n and len({r["key"] for r in parsed.rows}) == 2 * n
    labels = [os.path.relpath(d, out) for d in (run_dir, other)]
    assert parsed.options["run"] == ["", *labels]
    assert {r["key"].split("|")[0] for r in parsed.rows} == set(labels)
    assert page.count("<h4>Packages</h4>") == 2


def test_markdown_tables_lists_and_headline_split() -> None:
    text = (
        "# title\n\n## Summary\n\nBest is **react**, see `figures/`.\n\n"
        "| env | rate |\n|:--|--:|\n| rag | 50% |\n\n## Completion rate\n\n- one\n- two\n"
    )
    title, headline, sections = split_summary(text)
    assert title == "title" and "**react**" in headline
    assert [h for h, _ in sections] == ["Completion rate"]
    out = markdown_to_html(headline)
    assert "<strong>react</strong>" in out and "<code>figures/</code>" in out
    assert '<th style="text-align:right">rate</th>' in out and "<td>rag</td>" in out
    assert markdown_to_html(sections[0][1]) == "<ul><li>one</li><li>two</li></ul>"
    assert markdown_to_html("a <b> & plan_execute_replan") == (
        "<p>a &lt;b&gt; &amp; plan_execute_replan</p>"
    )
    # a summary.md with text before its first ## heading: that text is the headline
    assert split_summary("# t\n\nlead\n\n## A\n\nx\n")[1:] == ("lead", [("A", "x")])


# ---------------------------------------------------------------- in a browser

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=10000",  # the trace is inflated asynchronously: let it finish
)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no chromium on PATH (Debian: apt-get install -y chromium)")


def _browse(page_file: Path, query: str, tmp_path: Path, *args: str) -> str:
    url = page_file.resolve().as_uri() + query
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    cmd = [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, url]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _failed_episode(run_dir: Path, planner: str) -> tuple[str, dict[str, Any]]:
    """An episode of ``planner`` with a failed step, and that step's event."""
    for doc in _jsonl(run_dir / "traces.jsonl"):
        if doc["planner"] != planner:
            continue
        for ev in doc["events"]:
            if ev["event"] == "step" and not ev["ok"]:
                return _key(doc), ev
    pytest.skip(f"no failed step of {planner} in the small run")


def _not_blank(png: Path) -> None:
    import matplotlib.image

    pixels = matplotlib.image.imread(png)
    assert pixels.shape[:2] == (2000, 1400)
    assert pixels.std() > 0.05, f"{png} is blank"


@pytest.mark.slow
def test_chromium_filters_the_rows_and_opens_a_trace(
    page_file: Path, run_dir: Path, tmp_path: Path
) -> None:
    planner = "plan_execute_replan"
    key, step = _failed_episode(run_dir, planner)
    dom = _browse(page_file, f"?planner={planner}&open={quote(key)}", tmp_path, "--dump-dom")
    parsed = parse(dom)
    records = _jsonl(run_dir / "episodes.jsonl")
    shown = [r for r in parsed.rows if not r["hidden"]]
    assert len(parsed.rows) == len(records)
    assert {r["cells"][0] for r in shown} == {planner}
    assert len(shown) == sum(r["planner"] == planner for r in records)
    assert parsed.trace is not None and "hidden" not in parsed.trace
    assert parsed.trace.get("data-rendered") == key  # inflated and drawn, not "loading..."
    text = " ".join(parsed.trace_text)
    assert "What went wrong" in text and key.split("/")[1] in text
    why = dom.split('<table class="why">', 1)[1].split("</table>", 1)[0]  # what went wrong
    failed_row = f"<td>{step['id']}</td><td>{step['tool']}</td><td>{step['failure']}"
    assert failed_row in why  # the failed step, with why it failed
    assert f"{len(shown)} of {len(records)} episodes shown" in dom


@pytest.mark.slow
def test_chromium_text_filter_and_sort(page_file: Path, run_dir: Path, tmp_path: Path) -> None:
    """Free text: every word must be in the row (``mcts medium``: mcts's medium tasks)."""
    dom = _browse(page_file, "?q=mcts+MEDIUM&sort=latency_s&desc=1", tmp_path, "--dump-dom")
    parsed = parse(dom)
    shown = [r for r in parsed.rows if not r["hidden"]]
    records = _jsonl(run_dir / "episodes.jsonl")
    wanted = [r for r in records if r["planner"] == "mcts" and r["complexity"] == "medium"]
    assert wanted and len(wanted) < len(records)
    assert sorted(r["key"] for r in shown) == sorted(_key(r) for r in wanted)
    latencies = [float(r["cells"][8]) for r in parsed.rows]
    assert latencies == sorted(latencies, reverse=True)
    assert parsed.trace is not None and "hidden" in parsed.trace  # nothing opened


@pytest.mark.slow
def test_chromium_screenshots_are_not_blank(page_file: Path, run_dir: Path, tmp_path: Path) -> None:
    key, _ = _failed_episode(run_dir, "plan_execute_replan")
    shots = tmp_path / "shots"
    shots.mkdir()
    for name, query in (("page", ""), ("trace", f"?open={quote(key)}")):
        png = shots / f"{name}.png"
        _browse(page_file, query, tmp_path, f"--screenshot={png}", "--window-size=1400,2000")
        _not_blank(png)

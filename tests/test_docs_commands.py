"""The documentation's promises: a short README, links that resolve, commands that run.

Fast: README.md is at most 12,288 bytes; every relative link in README.md, docs/*.md and
results/README.md points at an existing file (and, for a link into a Markdown file with a
``#fragment``, at one of its headings).

Slow: every command of every fenced ```bash block of README.md (and of docs/extending.md when
it exists) runs and exits 0, or with the status its line documents (``# exit status 2``). A
block right after ``<!-- not run: why -->`` is skipped (install lines, real models, the full
preset); one right after ``<!-- run from the repository root -->`` runs there, every other in
a fresh temporary dir. The commands of one block run in one shell, in order, so a ``cd`` or an
``export`` carries to the next line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
README_MAX_BYTES = 12_288
# the pages whose ```bash blocks are run (docs/extending.md is written elsewhere: if present)
COMMAND_PAGES = [README, REPO / "docs" / "extending.md"]
LINK_PAGES = [README, REPO / "results" / "README.md", *sorted((REPO / "docs").glob("*.md"))]

FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(?P<why>.*?)\s*-->$")
FROM_REPO = re.compile(r"^<!--\s*run from the repository root\s*-->$")
EXIT_STATUS = re.compile(r"#\s*exit status (\d+)")
HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
BLOCK_TIMEOUT_S = 300


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown page."""

    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    marker: str  # the HTML comment on the last non-blank line before the fence, or ""

    @property
    def label(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, each with the comment that precedes it."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i, previous = 0, ""
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].strip():
                previous = lines[i].strip()
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2), i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        marker = previous if previous.startswith("<!--") else ""
        found.append(Block(page, start + 1, lang, "\n".join(body), marker))
        i, previous = i + 1, ""
    return found


def commands(code: str) -> list[str]:
    """The shell commands of a block: a line ending in a backslash continues on the next, a
    here-document runs to its delimiter; blank and comment-only lines are not commands."""
    out: list[str] = []
    lines = code.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [line]
        while parts[-1].rstrip().endswith("\\") and i < len(lines):
            parts.append(lines[i])
            i += 1
        heredoc = HEREDOC.search(" ".join(parts))
        if heredoc:
            delimiter = heredoc.group(2)
            while i < len(lines):
                parts.append(lines[i])
                i += 1
                if parts[-1].strip() == delimiter:
                    break
        out.append("\n".join(parts))
    return out


def expected_status(command: str) -> int:
    m = EXIT_STATUS.search(command)
    return int(m.group(1)) if m else 0


def script(cmds: list[str]) -> str:
    """One bash script running ``cmds`` in order; it stops at the first command whose exit
    status is not the documented one, naming it."""
    lines = ["set -u"]
    for n, cmd in enumerate(cmds, 1):
        want = expected_status(cmd)
        lines += [
            cmd,
            f"rc=$?; if [ $rc -ne {want} ]; then "
            f'echo "DOCS: command {n} exited $rc, expected {want}" >&2; exit 97; fi',
            f'echo "DOCS: command {n} ok (status {want})" >&2',
        ]
    return "\n".join(lines) + "\n"


def run_blocks() -> list[Block]:
    return [
        b
        for page in COMMAND_PAGES
        if page.exists()
        for b in blocks(page)
        if b.lang in ("bash", "sh", "shell") and not NOT_RUN.match(b.marker)
    ]


# --- fast --------------------------------------------------------------------------------


def test_readme_is_at_most_12_kib() -> None:
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes (at most {README_MAX_BYTES})"


def slug(heading: str) -> str:
    """A heading's anchor as GitHub writes it: lower case, punctuation dropped (hyphens and
    underscores kept), spaces to hyphens."""
    text = INLINE_CODE.sub(lambda m: m.group(0).strip("`"), heading.strip()).lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in ("L", "N"))
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a Markdown page (repeats get -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            in_code = not in_code
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if in_code or not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def prose(page: Path) -> str:
    """A page's text without its fenced blocks and inline code, where a link is not a link."""
    kept: list[str] = []
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            in_code = not in_code
            continue
        if not in_code:
            kept.append(INLINE_CODE.sub("", line))
    return "\n".join(kept)


def relative_links(page: Path) -> list[str]:
    return [
        target
        for target in LINK.findall(prose(page))
        if not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)  # http:, mailto:, ...
    ]


@pytest.mark.parametrize("page", LINK_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_point_at_existing_files(page: Path) -> None:
    broken: list[str] = []
    for target in relative_links(page):
        path, _, fragment = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file {resolved}")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{target}: no heading #{fragment} in {resolved.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}:\n" + "\n".join(broken)


def test_readme_links_every_docs_page() -> None:
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in relative_links(README)}
    missing = [
        str(p.relative_to(REPO))
        for p in sorted((REPO / "docs").glob("*.md"))
        if p.resolve() not in linked
    ]
    assert not missing, f"README.md links no docs page of: {missing}"


def test_bash_blocks_are_run_or_say_why_not() -> None:
    """Every ```bash block of the README is run by the slow test, or names its reason not to
    be; and the README keeps commands that are run (the slow test is not vacuous)."""
    readme = [b for b in blocks(README) if b.lang == "bash"]
    for b in readme:
        m = NOT_RUN.match(b.marker)
        assert not b.marker or m or FROM_REPO.match(b.marker), f"{b.label}: {b.marker!r}"
        assert m is None or m.group("why"), f"{b.label}: 'not run' without a reason"
        assert commands(b.code), f"{b.label}: a bash block with no command"
    ran = [c for b in run_blocks() if b.page == README for c in commands(b.code)]
    assert sum(c.lstrip().startswith("planarena ") for c in ran) >= 5


def test_command_splitting() -> None:
    code = (
        "# a comment\n"
        "planarena a=1   # trailing\n"
        "\n"
        "planarena b=2 \\\n"
        "  c=3\n"
        "cat > f.yaml <<'EOF'\n"
        "x: 1\n"
        "EOF\n"
        "planarena n_taks=3   # exit status 2: refused\n"
    )
    cmds = commands(code)
    assert cmds == [
        "planarena a=1   # trailing",
        "planarena b=2 \\\n  c=3",
        "cat > f.yaml <<'EOF'\nx: 1\nEOF",
        "planarena n_taks=3   # exit status 2: refused",
    ]
    assert [expected_status(c) for c in cmds] == [0, 0, 0, 2]


# --- slow --------------------------------------------------------------------------------


def shell_env() -> dict[str, str]:
    """The test's environment, with this interpreter's scripts (planarena, planarena-report,
    planarena-trace) first on PATH, no API key (a dry run needs none) and no display."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["MPLBACKEND"] = "Agg"
    env["REPO"] = str(REPO)
    return env


@pytest.mark.slow
@pytest.mark.parametrize("block", run_blocks(), ids=lambda b: b.label)
def test_documented_commands_run(block: Block, tmp_path: Path) -> None:
    cmds = commands(block.code)
    cwd = REPO if FROM_REPO.match(block.marker) else tmp_path
    done = subprocess.run(
        ["bash", "-c", script(cmds)],
        cwd=cwd,
        env=shell_env(),
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
    )
    assert done.returncode == 0, (
        f"{block.label} (in {cwd}):\n{block.code}\n--- stdout (tail)\n{done.stdout[-3000:]}"
        f"\n--- stderr (tail)\n{done.stderr[-3000:]}"
    )

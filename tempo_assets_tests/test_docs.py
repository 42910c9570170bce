"""The README and docs/ keep their promises: a README of one screen whose five tasks come first,
the two commands CI runs, links that resolve, and every page under docs/ reachable from its index.

Pure file reading: no graph, no network.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
DOCS_INDEX = DOCS / "README.md"
CI_RUN = REPO / ".ci" / "run"

README_MAX_LINES = 200
TASKS_WITHIN_LINES = 120
# the five tasks a user comes for, as the README's headings name them
TASKS = ("Run the demo", "Read a TEST score", "Add a release", "Add a method", "Make a CAFA submission")

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) and ![alt](target); the target may carry a "title"
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"`[^`]*`")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` outside fenced code blocks, inline code blanked out."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)))
    return out


def fenced_blocks(text: str) -> list[list[str]]:
    """The lines of each fenced code block, in order."""
    blocks, current = [], None
    for line in text.splitlines():
        if FENCE.match(line):
            if current is None:
                current = []
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: link text kept, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file (repeated headings get ``-1``, ``-2``, ...)."""
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            slug = github_slug(match.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def relative_links(path: Path) -> list[tuple[int, str]]:
    """``(line, target)`` of every link in ``path`` that is not a URL."""
    out = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for match in LINK.finditer(line):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:, ...
                continue
            out.append((number, target))
    return out


def broken_links(path: Path) -> list[str]:
    """``file:line: target (why)`` for each relative link of ``path`` that does not resolve."""
    problems = []
    for number, target in relative_links(path):
        where, _, anchor = target.partition("#")
        resolved = (path.parent / where).resolve() if where else path
        label = f"{path.relative_to(REPO)}:{number}: {target}"
        if not resolved.exists():
            problems.append(f"{label} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{label} (no heading with anchor #{anchor} in {resolved.relative_to(REPO)})")
    return problems


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def reachable_from(start: Path) -> set[Path]:
    """Every file reached by following relative links from ``start``, through Markdown pages."""
    seen, todo = set(), [start.resolve()]
    while todo:
        page = todo.pop()
        if page in seen or not page.is_file():
            continue
        seen.add(page)
        if page.suffix == ".md":
            for _, target in relative_links(page):
                where = target.partition("#")[0]
                if where:
                    todo.append((page.parent / where).resolve())
    return seen


def command_lines(lines: list[str]) -> list[str]:
    """Shell lines that run something: no blank lines, comments, or shell settings."""
    out = []
    for line in lines:
        line = line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if not line or line.startswith(("set ", "cd ", "export ")):
            continue
        out.append(" ".join(shlex.split(line)))
    return out


# --------------------------------------------------------------------------------------------


def test_readme_is_one_screen():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, more than {README_MAX_LINES}: move the detail to a page "
        f"under docs/ and link it from docs/README.md")


def test_the_five_tasks_come_within_the_first_lines():
    headings = {}
    for number, line in prose_lines(README.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if match:
            headings.setdefault(match.group(2).strip().lower(), number)
    late = {task: headings.get(task.lower()) for task in TASKS
            if headings.get(task.lower()) is None or headings[task.lower()] > TASKS_WITHIN_LINES}
    assert not late, (f"README.md: these task headings are missing (None) or below line "
                      f"{TASKS_WITHIN_LINES}: {late}")


def test_the_first_block_holds_the_two_commands_ci_runs():
    blocks = fenced_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "README.md has no fenced code block"
    readme = command_lines(blocks[0])
    ci = command_lines(CI_RUN.read_text(encoding="utf-8").splitlines())
    assert len(readme) == 2, f"README.md's first block should hold exactly two commands, holds {readme}"
    main, tests = readme
    # the test command is the very line .ci/run runs
    assert tests in ci, f"README.md's test command {tests!r} is not a command of .ci/run: {ci}"
    # the main command: set up, then steps each of which .ci/run runs, one of them the main job
    setup, *steps = [step.strip() for step in main.split("&&")]
    assert setup.startswith("bash scripts/setup.sh"), f"README.md's first command does not set up: {main!r}"
    assert any("tempo materialize --all" in step for step in steps), f"not the main job: {main!r}"
    missing = [step for step in steps if step not in ci]
    assert not missing, f"README.md's main command runs {missing}, which .ci/run does not: {ci}"


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    problems = broken_links(page)
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_every_file_under_docs_is_reachable_from_its_index():
    assert DOCS_INDEX.is_file(), "docs/README.md, the index of docs/, is missing"
    reached = reachable_from(DOCS_INDEX)
    orphans = sorted(str(p.relative_to(REPO)) for p in DOCS.rglob("*") if p.is_file() and p.resolve() not in reached)
    assert not orphans, "not reachable from docs/README.md by links: " + ", ".join(orphans)


def test_the_checker_sees_a_broken_link_and_a_wrong_anchor(tmp_path, monkeypatch):
    """The link check itself can fail: a missing file and a missing heading are both reported."""
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    (tmp_path / "a.md").write_text("# Title\n\n## Two words: `code`\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#two-words-code) [gone](missing.md) [bad](a.md#nowhere)\n"
                    "`[not a link](x.md)` [web](https://example.org/x.md)\n"
                    "```\n[in a fence](y.md)\n```\n", encoding="utf-8")
    problems = broken_links(page)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "missing.md (no such file)", "a.md#nowhere (no heading with anchor #nowhere in a.md)"]

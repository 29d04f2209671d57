"""The README and docs/ as a reader follows them: every relative link leads to a file (and a heading
where it names one), and the Quick start is the two commands a new user copies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")


def _anchors(text: str) -> set[str]:
    """GitHub's anchors of a page's headings: none for a line in fenced code (a shell comment starts with
    ``#`` too), and a repeated heading's followed by -1, -2... in the order they come."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fence = None  # the fence of the code block the line is in
    for line in text.splitlines():
        mark = FENCE.match(line)
        if fence is None and mark:
            fence = mark.group(1)
        elif fence is not None:
            closing = mark and mark.group(1)[0] == fence[0] and len(mark.group(1)) >= len(fence)
            if closing and not line[mark.end():].strip():  # as long as the opening fence, with nothing after it
                fence = None
        elif heading := HEADING.fullmatch(line):
            anchor = _anchor(heading.group(1) or "")
            anchors.add(f"{anchor}-{seen[anchor]}" if anchor in seen else anchor)
            seen[anchor] = seen.get(anchor, 0) + 1
    return anchors


def test_anchors_are_githubs_for_headings_outside_code_with_repeats_numbered() -> None:
    text = "\n".join([
        "# Quick start", "## Options", "```", "# a shell comment, not a heading", "```",
        "~~~~python", "## inside a tilde fence", "~~~", "```", "~~~~", "## Options", "### Options",
        "#not-a-heading", "    # indented code", "## Closing hashes ##"])
    assert _anchors(text) == {"quick-start", "options", "options-1", "options-2", "closing-hashes"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # an address outside the repository
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file.read_text()):
            broken.append(target)
    assert broken == [], f"{page.name}: links to nothing: {broken}"


def test_quick_start_is_two_commands_that_set_up_what_they_run() -> None:
    text = (ROOT / "README.md").read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```\n(.*?)\n```", quick, re.DOTALL)
    assert len(commands) == 2, commands
    launch, tests = commands
    assert "python3 -m venv .venv" in launch and "pip install" in launch and launch.endswith(".venv/bin/neuronviz")
    assert "'.[test]'" in tests and "ruff check" in tests and "pytest" in tests
    # CI runs the same command, with the display variable exported instead of prefixed
    assert tests.replace("QT_QPA_PLATFORM=offscreen ", "") in (ROOT / ".ci" / "run").read_text()

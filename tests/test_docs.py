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


def _anchors(page: Path) -> set[str]:
    return {_anchor(line.lstrip("#")) for line in page.read_text().splitlines() if line.startswith("#")}


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
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
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

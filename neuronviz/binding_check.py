"""A Qt binding that cannot run on this Python, told in one line before the app or a Qt command uses it.

PySide6's stable-ABI wheels from 6.12 on are built with the headers of Python 3.12+, where None and
True are immortal, and hand them back without a reference of their own (python/cpython#134989): on
Python 3.11 every void C++ method and every ``Signal.emit`` takes one of the interpreter's references
away, and after a few thousand calls the app aborts ("bool_dealloc: deallocating True or False").
pyproject.toml keeps Python 3.11 on PySide6 < 6.12, but an environment installed before that marker
may still hold 6.12; installing the project again replaces it. The version is read from the
distribution's ``.dist-info`` folder name, a few milliseconds, without importing the binding; on
Python 3.12+ nothing is read at all.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

FIXED_PYTHON = (3, 12)  # None and True are immortal: every build of the binding runs
FIRST_AFFECTED = (6, 12)  # the first PySide6 whose stable-ABI wheels are built for Python 3.12+


def python_version() -> tuple[int, int]:
    return sys.version_info[0], sys.version_info[1]


def binding_version() -> tuple[int, int] | None:
    """PySide6's version from its installed distribution's ``.dist-info`` folder name (beside the
    package; the wheel standard puts the name and version in it), without importing the binding or
    :mod:`importlib.metadata` (80 ms); None when PySide6 is not installed."""
    from importlib import util

    spec = util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    site = Path(next(iter(spec.submodule_search_locations))).parent
    versions = {}
    for info in site.glob("*.dist-info"):  # pip may write the name in lower case
        found = re.fullmatch(r"(pyside6(?:_essentials)?)-(\d+)\.(\d+)[^-]*\.dist-info", info.name, re.IGNORECASE)
        if found:
            versions[found.group(1).lower()] = int(found.group(2)), int(found.group(3))
    for dist in ("pyside6_essentials", "pyside6"):
        if dist in versions:
            return versions[dist]
    return _metadata_version()  # installed some other way: ask the slow, general way


def _metadata_version() -> tuple[int, int] | None:
    from importlib import metadata

    for dist in ("PySide6-Essentials", "PySide6"):
        try:
            major, minor = metadata.version(dist).split(".")[:2]
            return int(major), int(minor)
        except (metadata.PackageNotFoundError, ValueError):
            continue
    return None


def binding_problem() -> str | None:
    """One line telling the user how to replace a binding that would abort the app on this Python;
    None when the binding runs here."""
    python = python_version()
    if python >= FIXED_PYTHON:
        return None
    binding = binding_version()
    if binding is None or binding < FIRST_AFFECTED:
        return None
    return (f"PySide6 {binding[0]}.{binding[1]} aborts on Python {python[0]}.{python[1]} (it drops references to "
            "None and True): run `pip install -e .` again, which installs the PySide6 6.11 this Python needs")

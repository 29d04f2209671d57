"""A workaround for a Qt binding that drops Python's references to None, True and False.

PySide6's stable-ABI wheels from 6.12 on are built with the headers of Python 3.12+, where None,
True and False are immortal, so its ``Py_RETURN_NONE`` and ``Py_RETURN_TRUE`` hand them back
without a reference of their own (python/cpython#134989). On Python 3.11 every void C++ method and
every ``Signal.emit`` then takes one of the interpreter's references away, and after a few thousand
calls the app aborts with "none_dealloc: deallocating None". Giving these singletons a reserve of
references makes them as good as immortal for the life of the process, as they are on 3.12+; the
interpreter never frees them anyway. Applied once, when :mod:`neuronviz` is imported, before any Qt
call, and only where it is needed.
"""

from __future__ import annotations

import ctypes
import re
import sys
from importlib import util
from pathlib import Path

RESERVE = 1 << 40  # references: a million calls a second would use them up in 35 years
SINGLETONS = (None, True, False, NotImplemented, Ellipsis)
_FIXED_PYTHON = (3, 12)  # immortal singletons: nothing to work around
_FIRST_AFFECTED = (6, 12)


def _binding_version() -> tuple[int, ...] | None:
    """PySide6's version from its installed distribution's ``.dist-info`` folder name (beside the
    package; the name and version are in it by the wheel standard), without importing the binding
    or :mod:`importlib.metadata` (which takes 80 ms of the app's start)."""
    spec = util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return _metadata_version()
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


def _metadata_version() -> tuple[int, ...] | None:
    from importlib import metadata

    for dist in ("PySide6-Essentials", "PySide6"):
        try:
            return tuple(int(p) for p in metadata.version(dist).split(".")[:2])
        except (metadata.PackageNotFoundError, ValueError):
            continue
    return None


def needed() -> bool:
    version = _binding_version()
    return sys.version_info < _FIXED_PYTHON and version is not None and version >= _FIRST_AFFECTED


def keep_singletons_alive() -> None:
    """Adds :data:`RESERVE` references to each of :data:`SINGLETONS` (their reference count is
    the first field of the object, as CPython lays it out)."""
    for obj in SINGLETONS:
        ctypes.c_ssize_t.from_address(id(obj)).value += RESERVE

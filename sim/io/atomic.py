"""Atomic saves: write beside the target, then rename over it.

The temporary file is ``.NAME.PID.XXXXXXXX.tmp`` in the target's folder, NAME shortened as far as
the file system's limit on a name needs (a target's name may itself be near the limit). A target
that is a symbolic link is written through: the file it points to is replaced and the link stays a
link. A save killed before it could rename leaves its temporary file; the next save to the same
target removes it once its process is gone (the CLI makes SIGTERM an exit that removes it at once).
"""

from __future__ import annotations

import glob
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from sim.errors import TraceFileError

NAME_MAX = 255  # bytes in a file name on Linux, macOS and Windows file systems, when the folder does not say
PID_DIGITS = 10  # room kept in a temporary name for any process id (Linux's pid_max is at most 2**22)
RANDOM_CHARS = 8  # what tempfile.mkstemp adds to make a name unique
SUFFIX = ".tmp"


def _real_target(target: Path) -> Path:
    """The file a save to ``target`` replaces: ``target``, or the file its symbolic links lead to."""
    real = Path(os.path.realpath(target)) if target.is_symlink() else target
    if real.exists() and not real.is_file():
        raise TraceFileError(f"cannot write {target}: not a regular file (a directory, device or pipe)")
    return real


def _prefix(target: Path) -> str:
    """The start of the names of the temporary files of saves to ``target``, short enough that any
    of them fits the folder's limit on a name; without the process id, so that saves of every
    process to ``target`` share it."""
    folder = target.parent
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = NAME_MAX
    room = limit - len(".") - len(".") - PID_DIGITS - len(".") - RANDOM_CHARS - len(SUFFIX)
    name = target.name
    while len(os.fsencode(name)) > room:
        name = name[:-1]
    return f".{name}."


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """The name of a new, empty temporary file beside ``target`` for a writer that wants a name (Qt,
    Pillow); it replaces ``target`` when the block ends without error. On any failure it is removed
    and ``target`` is untouched; I/O and encoding problems become one-line :class:`TraceFileError`."""
    real = _real_target(Path(target))
    prefix = _prefix(real)
    _remove_stale_temporaries(real.parent, prefix)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{prefix}{os.getpid()}.", suffix=SUFFIX, dir=real.parent)
    except OSError as exc:
        raise TraceFileError(f"cannot write {target}: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; a saved file is an ordinary file
        yield Path(tmp)
        os.replace(tmp, real)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, (OSError, ValueError, TypeError)):
            problem = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise TraceFileError(f"cannot write {target}: {problem}".replace("\n", " ")) from None
        raise


@contextmanager
def atomic_file(target: Path) -> Iterator[BinaryIO]:
    """A binary file that replaces ``target`` when the block ends without error (written to disk
    first), as :func:`atomic_path`."""
    with atomic_path(target) as tmp, open(tmp, "wb") as f:
        yield f
        f.flush()
        os.fsync(f.fileno())


def _remove_stale_temporaries(folder: Path, prefix: str) -> None:
    """Temporary files of earlier saves to the same target (``PREFIX.PID.XXXXXXXX.tmp``) that were
    killed before they could rename: removed when the process that wrote them is gone."""
    for tmp in folder.glob(f"{glob.escape(prefix)}*{SUFFIX}"):
        pid = tmp.name[len(prefix):].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

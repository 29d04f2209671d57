"""Atomic saves: write beside the target, then rename over it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from sim.errors import TraceFileError


@contextmanager
def atomic_file(target: Path) -> Iterator[BinaryIO]:
    """A binary file that replaces ``target`` when the block ends without error. On any failure the
    temporary file is removed and ``target`` is untouched; I/O and encoding problems become one-line
    :class:`TraceFileError`."""
    if target.exists() and not target.is_file():
        raise TraceFileError(f"cannot write {target}: not a regular file (a directory, device or pipe)")
    _remove_stale_temporaries(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=target.parent or ".")
    except OSError as exc:
        raise TraceFileError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; a saved trace is an ordinary file
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, (OSError, ValueError, TypeError)):
            problem = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise TraceFileError(f"cannot write {target}: {problem}".replace("\n", " ")) from None
        raise


def _remove_stale_temporaries(target: Path) -> None:
    """Temporary files of earlier saves to ``target`` that were killed before they could rename
    (``.NAME.PID.XXXX.tmp``): removed when the process that wrote them is gone."""
    for tmp in (target.parent or Path(".")).glob(f".{target.name}.*.tmp"):
        pid = tmp.name[len(target.name) + 2:].split(".", 1)[0]
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

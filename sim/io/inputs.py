"""Opening the files a user names: regular files only, so that a pipe, a device or a directory
is an error at once instead of a read that waits or never ends."""

from __future__ import annotations

import os
import stat
from typing import BinaryIO


class NotRegularFileError(OSError):
    """The path names a pipe, device, socket or directory."""


def open_regular(path: str | os.PathLike) -> BinaryIO:
    """``path`` opened for binary reading, provided it is a regular file. The open itself does not
    block on a FIFO (no writer needed); anything but a regular file raises
    :class:`NotRegularFileError` (an :class:`OSError` whose ``strerror`` says what it is)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = "a directory" if stat.S_ISDIR(mode) else "a pipe" if stat.S_ISFIFO(mode) else "a device or socket"
            raise NotRegularFileError(0, f"not a regular file ({what})")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise

"""Opening the files a user names: regular files only, so that a pipe, a device or a directory
is an error at once instead of a read that waits or never ends (a directory of a Neuron Explorer
profile's Parquet tables is told apart by its tables); and their names as text that a saved file
can hold whatever the locale."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from sim.errors import TraceFileError


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


class Fail:
    """Raises the one-line error of one file: ``label: problem``, on one line, at most 500
    characters (what every reader says of a file it refuses)."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __call__(self, problem: str) -> NoReturn:
        text = f"{self.label}: {problem}".replace("\r", " ").replace("\n", " ")
        raise TraceFileError(text[:500])


def name_text(name: str) -> str:
    """A file name (or text holding one) as text that any file can hold: under a C or ASCII locale
    Python reads a non-ASCII name's bytes as lone surrogates, which UTF-8 cannot encode; they are
    read as the UTF-8 they almost always are, any that is not replaced."""
    if name.isascii():
        return name
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that stands for no byte
        raw = name.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "replace")


def valid_texts(value: Any) -> Any:
    """``value`` (of JSON's types) with every text in it made one UTF-8 can hold (:func:`name_text`):
    what a saved file's metadata must be to be read back."""
    if isinstance(value, str):
        return name_text(value)
    if isinstance(value, dict):
        return {valid_texts(k): valid_texts(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [valid_texts(v) for v in value]
    return value


def table_files(directory: Path) -> dict[str, list[Path]]:
    """The profile's tables by name, each its files in order (a split table's numbered parts)."""
    tables: dict[str, list[tuple[int, Path]]] = {}
    for entry in directory.iterdir():
        m = re.fullmatch(r"([A-Za-z][A-Za-z0-9]*?)(?:_(\d+))?\.parquet", entry.name)
        if m and entry.is_file():
            tables.setdefault(m[1], []).append((int(m[2]) if m[2] is not None else -1, entry))
    return {name: [p for _, p in sorted(parts)] for name, parts in tables.items()}


def is_profile(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a profile directory (it holds a ``Metadata`` table)."""
    p = Path(path)
    try:
        return p.is_dir() and "Metadata" in table_files(p)
    except OSError:  # a directory that cannot be listed: the reader says why
        return False


def profile_of(path: str | os.PathLike) -> Path | None:
    """The profile directory ``path`` names: itself, or the directory of one of its tables (a
    user who picks ``Summary.parquet`` in a file dialog means the profile)."""
    p = Path(path)
    if p.suffix.lower() == ".parquet" and is_profile(p.parent):
        return p.parent
    return p if is_profile(p) else None


# the tables Neuron Explorer's UI exports as CSV (its Device Trace Viewer's Export to CSV)
CSV_TABLES = ("Instruction", "DmaPacket", "DmaPacketAggregated", "CcInstruction", "SemaphoreUpdate")


def csv_export_of(path: str | os.PathLike) -> list[Path] | None:
    """The CSV files of a Neuron Explorer CSV export ``path`` names: a directory holding some of
    them, or one of them (named after its table); None for anything else."""
    p = Path(path)
    try:
        if p.is_dir():
            found = [p / f"{t}.csv" for t in CSV_TABLES if (p / f"{t}.csv").is_file()]
            return found or None
    except OSError:
        return None
    return [p] if p.suffix.lower() == ".csv" and p.stem in CSV_TABLES else None


# what ``neuron-explorer view --output-format json`` writes (aws-neuron-sdk tools/neuron-explorer/get-started.rst,
# "Export to JSON"): a system profile and a device profile a compiled model; its documentation shows
# sample events, not the files' layout
EXPLORER_JSON = re.compile(r"(system_profile|device_profile_model_[^/\\]*)\.json", re.IGNORECASE)


def explorer_json_export(path: str | os.PathLike) -> str | None:
    """What to say of a file named as Neuron Explorer's JSON export names one, when it is no trace
    neuronviz reads (None for any other name)."""
    m = EXPLORER_JSON.fullmatch(Path(path).name)
    if m is None:
        return None
    what = "system profile" if m[1].lower() == "system_profile" else "device profile"
    return (f"is Neuron Explorer's JSON export of a {what} (--output-format json), whose layout is not "
            "documented and which neuronviz does not read: open the profile's directory of Parquet tables "
            "(neuron-explorer view's default output) instead")

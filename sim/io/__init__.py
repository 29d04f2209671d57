"""Trace files: the native ``.nvtrace`` format, Chrome/Perfetto JSON and Perfetto's protobuf
interchange, and the profiles a Neuron device measured (Neuron Explorer's directories of Parquet
tables).

:func:`load_file` recognises a file by its first bytes, not its name (a zip is native, JSON or gzip
is Chrome trace JSON, a protobuf packet is a Perfetto trace; a directory with a Metadata table, or
one of its tables, is a profile); :func:`save_file` picks the format from the name (``.json`` or
``.json.gz`` writes Chrome JSON, ``.pftrace`` Perfetto's protobuf, anything else native) or is
told it (``explorer``: the tables Neuron Explorer reads). Both raise one-line
:class:`TraceFileError`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from sim.errors import TraceFileError
from sim.io.inputs import csv_export_of, explorer_json_export, open_regular, profile_of
from sim.io.native import load_traces, read_problem, save_traces
from sim.trace import Trace

NATIVE_SUFFIX = ".nvtrace"
CHROME_SUFFIXES = (".json", ".json.gz")
ZIP_MAGIC = b"PK"
PERFETTO_SUFFIXES = (".pftrace", ".perfetto-trace")
FORMATS = ("nvtrace", "chrome", "perfetto", "explorer")


def format_for(path: str | os.PathLike) -> str:
    """The format a file of this name is saved in: ``chrome`` for .json(.gz), ``perfetto`` for
    .pftrace, ``explorer`` for a Neuron Explorer profile directory that exists, else ``nvtrace``."""
    if profile_of(path) == Path(path):
        return "explorer"
    if str(path).lower().endswith(PERFETTO_SUFFIXES):
        return "perfetto"
    return "chrome" if str(path).lower().endswith(CHROME_SUFFIXES) else "nvtrace"


def load_file(path: str | os.PathLike, progress: Callable[[float], None] | None = None) -> list[Trace]:
    """Every run in a native or Chrome JSON trace file. ``progress`` hears the share of a Chrome
    file read as it goes (a native file loads in one go); an exception it raises stops the load."""
    label = str(path)
    if profile_of(path) is not None:  # a Neuron Explorer profile: a directory of Parquet tables, or one of them
        from sim.io.explorer import load_profile  # pyarrow loads when a profile is opened

        return load_profile(path, progress)
    if csv_export_of(path) is not None:  # the CSV files Neuron Explorer's UI exports
        from sim.io.explorer import load_csv_export

        return load_csv_export(path, progress)
    if os.path.isdir(path):
        raise TraceFileError(f"{label}: is a directory, not a trace file or a Neuron Explorer profile "
                             "(no Metadata.parquet in it)")
    try:
        with open_regular(path) as f:
            head = f.read(64)
    except OSError as exc:
        raise TraceFileError(f"{label}: {read_problem(exc)}") from None
    if head.startswith(ZIP_MAGIC):
        return load_traces(path)
    from sim.io.chrome import GZIP_MAGIC, load_chrome  # JSON support loads when such a file is opened
    from sim.io.perfetto import looks_like_perfetto

    if looks_like_perfetto(head):
        from sim.io.perfetto import load_pftrace

        return load_pftrace(path, progress)
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if text[:1] == b"{":
        from sim.io.explorer import is_legacy_json, load_legacy_json

        if is_legacy_json(head):  # neuron-profile's JSON of a device profile (before Neuron Explorer)
            return load_legacy_json(path, progress)
    if head.startswith(GZIP_MAGIC) or text[:1] in (b"{", b"["):
        try:
            return load_chrome(path, progress)
        except TraceFileError:
            export = explorer_json_export(path)  # not Chrome JSON but named as Neuron Explorer names its JSON
            if export is None:
                raise
            raise TraceFileError(f"{label}: {export}") from None
    if not head:
        raise TraceFileError(f"{label}: the file is empty")
    raise TraceFileError(f"{label}: not a trace file (expected a {NATIVE_SUFFIX} file, Chrome trace JSON or a "
                         "Perfetto .pftrace)")


def save_file(path: str | os.PathLike, traces: Sequence[Trace], fmt: str | None = None) -> None:
    """Write ``traces`` to ``path`` atomically, as ``fmt`` or the format its name implies."""
    fmt = fmt or format_for(path)
    if fmt == "chrome":
        from sim.io.chrome import save_chrome

        save_chrome(path, traces)
    elif fmt == "nvtrace":
        save_traces(path, traces)
    elif fmt == "perfetto":
        from sim.io.perfetto import save_pftrace

        save_pftrace(path, traces)
    elif fmt == "explorer":
        from sim.io.explorer import save_profile

        save_profile(path, traces)
    else:
        raise TraceFileError(f"{Path(path)}: unknown format '{fmt}' (choose from {', '.join(FORMATS)})")

"""Opening and saving trace files for the app and the CLI, with one-line errors."""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

import sim
from neuronviz.session import Run
from sim.errors import SimError, TraceFileError
from sim.io import NATIVE_SUFFIX, load_file, save_file
from sim.io.inputs import open_regular, profile_of, table_files
from sim.io.native import decoded_bytes
from sim.run import RunConfig, simulate
from sim.trace import Trace

DEMO = RunConfig(model="bert-large", batch=1, seq=128)  # on each of DEMO_CHIPS
DEMO_CHIPS = ("inf1", "inf2", "trn1", "trn2")
OPEN_FILTERS = ("Traces and profiles (*.nvtrace *.json *.json.gz *.parquet)", "neuronviz traces (*.nvtrace)",
                "Chrome trace JSON (*.json *.json.gz)", "Neuron Explorer profile, any of its tables (*.parquet)",
                "All files (*)")
PARQUET_RATIO = 4  # what a profile's Parquet tables take in memory over their size on disk, about
SAVE_FILTERS = {"neuronviz trace (*.nvtrace)": ".nvtrace", "Chrome trace JSON (*.json)": ".json",
                "Chrome trace JSON, gzip (*.json.gz)": ".json.gz"}
# the runs a comparison shows side by side: 11 rows of 3 panes already leave each a strip of one
# screen, and each pane takes about a tenth of a second to build (bench/bench_fuzz.py)
MAX_PANES = 32
# a text the views draw (a name, a model, a chip): one of a trace's is cut to this many characters
# for drawing, a few screen widths (Qt lays a text out whole before eliding it, in time and memory
# that grow with its length)
MAX_DRAWN_CHARS = 1000


def open_runs(path: str, progress: Callable[[float], None] | None = None) -> list[Run]:
    """The runs in a native or Chrome JSON file or a Neuron Explorer profile; raises
    :class:`TraceFileError` with a one-line reason. ``progress`` hears the share of the file read
    (see :func:`sim.io.load_file`). Each run's texts are cut for drawing (:func:`drawable`); it
    keeps the trace as read for saving."""
    runs = [Run(drawable(trace), source=str(path), as_read=trace) for trace in load_file(path, progress)]
    check_comparison(len(runs), str(path))
    return runs


def on_one_clock(runs: list[Run]) -> list[Run]:
    """``runs`` opened together, the device profiles among them on one clock (ranks of one job:
    :func:`sim.ranks.on_one_clock`); the others as they are."""
    from sim.ranks import on_one_clock as traces_on_one_clock
    from sim.ranks import shifted

    out = []
    for r, t in zip(runs, traces_on_one_clock([r.trace for r in runs]), strict=True):
        if t is r.trace:
            out.append(r)
            continue
        # the trace as read shifted alike, copied only when it is not the drawn one itself
        read = r.as_read if r.as_read is not None and r.as_read is not r.trace else None
        out.append(Run(t, source=r.source, as_read=shifted(read, t.meta["clock_offset_ns"]) if read else t))
    return out


def reading_bytes(path: str) -> int:
    """About how much reading ``path`` may take: its size, and for a compressed file what it may
    inflate to (a gzip file up to the ratio its reader allows, a zip what its members declare and
    a trace file's columns decode to), so
    that a small file that is slow to read opens off the GUI thread too. 0 for a file that cannot
    be looked at (its open fails at once, with its reason)."""
    from sim.io.chrome import GZIP_MAGIC, MAX_GZIP_RATIO

    profile = profile_of(path)
    if profile is not None:
        try:
            return PARQUET_RATIO * sum(p.stat().st_size for parts in table_files(profile).values() for p in parts)
        except OSError:
            return 0
    try:
        size = os.stat(path).st_size
        with open_regular(path) as f:
            head = f.read(len(GZIP_MAGIC))
            if head == GZIP_MAGIC:
                return size * MAX_GZIP_RATIO
            if zipfile.is_zipfile(f):
                with zipfile.ZipFile(f) as zf:  # what the members inflate to, and the columns decode to
                    return max(size, sum(i.file_size for i in zf.infolist()), decoded_bytes(zf))
    except (OSError, zipfile.BadZipFile, ValueError):
        return 0
    return size


def opened_paths(paths: list[str]) -> list[str]:
    """What ``paths`` name to open, each once: a Neuron Explorer profile's table is its profile
    (several tables of one profile picked in a dialog open it once)."""
    return list(dict.fromkeys(str(profile_of(p) or p) for p in paths))


def files_label(paths: list[str]) -> str:
    """How a message names the files opened together."""
    return str(paths[0]) if len(paths) == 1 else "the files"


def open_problem(paths: list[str], exc: Exception) -> str:
    """The one line the app shows for a file it could not open: a reader's own message, or what
    else went wrong (never a traceback)."""
    if isinstance(exc, SimError):
        return str(exc)
    return f"{files_label(paths)}: cannot be shown ({type(exc).__name__}: {exc})".replace("\n", " ")


def check_comparison(count: int, label: str) -> None:
    """A one-line :class:`TraceFileError` when ``count`` runs are more than a comparison shows."""
    if count > MAX_PANES:
        raise TraceFileError(f"{label}: {count:,} runs, more than the {MAX_PANES} a comparison shows side by side")


def _cut(text: str) -> str:
    return text if len(text) <= MAX_DRAWN_CHARS else text[:MAX_DRAWN_CHARS - 1] + "…"


def _long(texts) -> bool:
    return any(len(t) > MAX_DRAWN_CHARS for t in texts)


def drawable(trace: Trace) -> Trace:
    """``trace`` with the texts the views draw (its metadata's, its layer, op and track names and
    layer kinds) cut to :data:`MAX_DRAWN_CHARS`; ``trace`` itself when none is longer."""
    texts = [v for v in trace.meta.values() if isinstance(v, str)]
    names = (trace.layer_names, trace.layer_kinds, trace.op_names, [t.name for t in trace.tracks])
    if not _long(texts) and not any(_long(n) for n in names):
        return trace
    return replace(trace, meta={k: _cut(v) if isinstance(v, str) else v for k, v in trace.meta.items()},
                   layer_names=tuple(map(_cut, trace.layer_names)), layer_kinds=tuple(map(_cut, trace.layer_kinds)),
                   op_names=tuple(map(_cut, trace.op_names)),
                   tracks=tuple(replace(t, name=_cut(t.name)) for t in trace.tracks))


def save_runs(path: str, runs: list[Run]) -> None:
    """Save atomically, as Chrome JSON for a .json or .json.gz name, else natively: each run as it
    was read (its texts whole) or simulated."""
    save_file(path, [r.as_read or r.trace for r in runs])


def with_suffix_of(path: str, name_filter: str) -> str:
    """``path`` with the suffix of the chosen save filter unless it already has a known one."""
    if path.lower().endswith(tuple(SAVE_FILTERS.values())):
        return path
    return path + SAVE_FILTERS.get(name_filter, ".nvtrace")


def demo_runs(cache: Path | None = None) -> list[Run]:
    """The embedded demo: bert-large, batch 1, sequence 128, inference, on four generations, each
    serving requests back to back for as long as the slowest takes for one, so every pane works
    for the whole playback and the faster chips finish more requests (the slowest one's single
    request is its run). With a ``cache`` folder, its traces are read from there when this
    simulator made them (:func:`demo_key`), and put there when simulated (a launch then reads
    them in a tenth of the time); a cache that cannot be read or written is simulated around."""
    path = cache / f"demo-{demo_key()}{NATIVE_SUFFIX}" if cache is not None else None
    if path is not None and path.is_file():
        try:
            return [Run(t, source="demo") for t in load_file(path)]
        except (TraceFileError, OSError):
            pass  # damaged or half gone: simulated again and rewritten
    single = [simulate(replace(DEMO, chip=chip)) for chip in DEMO_CHIPS]
    longest = max(t.meta["total_ns"] for t in single)
    requests = [max(1, round(longest / t.meta["total_ns"])) for t in single]
    runs = [Run(t if n == 1 else simulate(replace(DEMO, chip=chip, requests=n)), source="demo")
            for chip, t, n in zip(DEMO_CHIPS, single, requests, strict=True)]
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            save_file(path, [r.trace for r in runs])
            for old in path.parent.glob(f"demo-*{NATIVE_SUFFIX}"):  # made by another version of the simulator
                if old != path:
                    old.unlink(missing_ok=True)
        except (SimError, OSError):
            pass  # a read-only or full disk: the next launch simulates again
    return runs


def demo_key() -> str:
    """What the demo's traces depend on, as a short hash: every file of the simulator (its code
    and its chip, model and calibration data), NumPy's version and the demo's configuration."""
    digest = hashlib.sha256(f"{np.__version__} {DEMO} {DEMO_CHIPS}".encode())
    root = Path(sim.__file__).parent
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]

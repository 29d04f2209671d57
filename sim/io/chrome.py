"""Chrome Trace Event JSON: the interchange format Perfetto and ``chrome://tracing`` read.

Export writes one process (``pid``) per run and NeuronCore and one thread (``tid``) per track,
named with ``process_name`` / ``thread_name`` metadata events; every Trace event becomes a complete
event (``"ph": "X"``, times in microseconds of whole nanoseconds: :func:`whole_ns`) whose args
hold its layer, FLOPs and bytes, every counter sample a counter event (``"ph": "C"``) and every
flow arrow (``meta["flows"]``) a pair of flow events (``s`` and ``f``) that bind to its two slices
in any reader. Complete events of a thread must nest; an event overlapping one of its track
without nesting in it (a server's request beside the engine steps, DMA transfers in flight
together) becomes an async slice instead (``b`` and ``e`` of its name and category, an id of its
own), which Perfetto stacks on a track of the process beside the others of its name; an arrow
from or to one has no flow events (they bind to a slice of their thread). The tables a Chrome
trace has no place for (meta with its flows, tracks, op and layer tables, counter units) go to
``otherData["neuronviz"]``, so our own files load back into the same runs, one Trace per run;
event times come back in whole nanoseconds, counter times within float rounding of microseconds.

Import also reads files of other tools (PyTorch profiler / Kineto, Neuron profiler JSON exports):
plain or gzip JSON, an object with ``traceEvents`` or a bare array (an array without its closing
bracket is accepted, as the format allows). Phases X, B/E, i/I, b/e/n, s/t/f, C and M are
understood; the rest (legacy async S/T/F, which Perfetto skips too, samples, object snapshots)
are skipped and counted in the meta. Slices are laid out as Perfetto lays them out:

* every (pid, tid) with slices becomes generic :class:`Track` s, one per depth of its nested
  slices (:mod:`sim.io.slices`), named ``"process / thread"``, ``"process / thread ·1"``...; at
  most :data:`MAX_DEPTH_ROWS` a thread (fewer when all would not fit :data:`MAX_TRACKS`), deeper
  slices in its last row, counted in ``meta["slices_beyond_depth"]``; ``meta["track_depth"]``
  gives each track's depth. A track's kind is the engine its thread name (or else its events'
  categories) names, otherwise ``other``; ``core`` is the index of the process. Processes follow
  their sort index, then first appearance; in each, async tracks come first, then threads by sort
  index, then first appearance.
* async slices (b/e matched by name, category and ``id`` or ``id2``, innermost first; n of no
  length) go on a track per process and name, overlapping ones packed in rows below it.
* flows (s/t/f by category, name and id; ``bind_id`` with ``flow_out``/``flow_in`` on a slice)
  become ``meta["flows"]``: event indices ``from``/``to`` and each arrow's name, bound as Perfetto
  binds them (:func:`_bind_flows`); points bound to no slice are counted.
* B/E pairs are matched per thread, innermost first, in time order; an E without an open B is
  skipped and a B that never ends is closed at the last timestamp of the file, as chrome://tracing
  draws it. Both are counted in the meta (``unmatched_end_events``, ``unclosed_slices``).
* the op table is the unique event names; an event's layer is ``args["layer"]`` if it is a string,
  else its category; a layer spans its events.
* foreign times are shifted so the earliest timestamp is 0 (``meta["time_origin_us"]`` keeps the
  shift): epoch-based microseconds would otherwise lose precision in nanoseconds.
* anything wrong (missing, empty, truncated or damaged file, not JSON, not a trace, a timestamp
  that is not a finite number, a negative duration, oversize data) raises a one-line
  :class:`TraceFileError` naming the file; the file and its decompressed content are capped.

Both directions are vectorised with NumPy where they can be and pause the cyclic garbage collector.
Export makes the event dicts a chunk at a time and orjson serialises them. Import streams: msgspec
decodes the event array a piece at a time into typed events (no dict per event), and each piece
becomes NumPy columns before the next is decoded, so memory holds the text, the columns and one
piece (a million events: about 2 s and 0.5 GB, see ``bench/bench_io.py``).
"""

from __future__ import annotations

import collections
import gc
import gzip
import itertools
import math
import operator
import os
import re
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter
from pathlib import Path
from typing import Any, NoReturn, Union

import msgspec
import numpy as np
import orjson

from sim import __version__
from sim.errors import TraceFileError
from sim.io.atomic import atomic_file
from sim.io.inputs import Fail, name_text, open_regular
from sim.io.native import (
    MAX_COUNTERS,
    MAX_RUNS,
    MAX_TIME_NS,
    MAX_TRACKS,
    MAX_VALUE,
    _validate_trace,
    read_problem,
)
from sim.io.slices import RowIndex, crossing, stack_depths, stack_order
from sim.trace import EVENT_COLUMNS, Counter, Trace, Track

FORMAT_NAME = "neuronviz-chrome"
METADATA_VERSION = "2.0"  # of the neuronviz block an exported file carries (versioned apart from .nvtrace)
MAX_FILE_BYTES = 4 << 30  # the file as stored (compressed or not)
MAX_JSON_BYTES = 4 << 30  # the JSON text after decompression: a zip-bomb guard
# trace JSON compresses 10-20x (names and keys repeat); a gzip file whose text outgrows this many
# times the compressed bytes read so far is a bomb, checked once the text passes
# MIN_RATIO_CHECK_BYTES (tiny files compress better): what is refused is what was produced, at once
MAX_GZIP_RATIO = 100
MIN_RATIO_CHECK_BYTES = 64 << 20
GZIP_MAGIC = b"\x1f\x8b"
# a timestamp or duration beyond the longest a trace lasts is damage; epoch microseconds (1.7e15
# in 2023, as Kineto and Perfetto write them) are well inside, and are shifted to the first
MAX_TIME_US = MAX_TIME_NS / 1e3
# rows a thread's nested slices get at most (Perfetto draws every depth; a row here is at least 16 px
# of a pane): deeper slices are drawn in the last row and counted in meta["slices_beyond_depth"]
MAX_DEPTH_ROWS = 32
CHUNK_EVENTS = 1 << 16  # events serialised at a time by save_chrome
CHUNK_BYTES = 1 << 20  # JSON text decoded at a time by load_chrome (larger pieces only take more memory)
assert MAX_TRACKS <= np.iinfo(EVENT_COLUMNS["track"]).max  # the event table's track column is int16
_READ_CHUNK = 1 << 20  # bytes read (or decompressed) at a time
_KINDS_RE = re.compile(
    r"(?<![a-z])(tensor|vector|scalar|gpsimd|dma[ _-]?read|dma[ _-]?write|collective)(?![a-z])", re.IGNORECASE)
_NUMBER = (int, float)
FLOW_NAME = "flow"  # the category of the flow events written, and the name of a flow without one


# ----------------------------------------------------------------------------------------------
# export


def _json_safe(value: Any) -> Any:
    """``value`` as plain JSON types: NumPy scalars unwrapped, non-finite floats as null, texts
    valid UTF-8 (:func:`~sim.io.inputs.name_text`)."""
    if isinstance(value, Mapping):
        return {name_text(str(k)): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_json_safe(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, str):
        return name_text(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    return str(value)


def _lookup_tables(op_names: Sequence[str], op_layer: Sequence[int],
                   layer_names: Sequence[str]) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
    """How an import finds layers (first of a name) and ops (first of a name within a layer name)."""
    layer_first: dict[str, int] = {}
    for i, name in enumerate(layer_names):
        layer_first.setdefault(name, i)
    op_first: dict[tuple[str, str], int] = {}
    for o, (name, layer) in enumerate(zip(op_names, op_layer, strict=True)):
        op_first.setdefault((name, layer_names[layer]), o)
    return layer_first, op_first


def _needs_indices(trace: Trace) -> bool:
    """True if op and layer names alone would not bring every event back to its op and layer."""
    ev = trace.events
    if not trace.n_events:
        return False
    if ev["layer"].min() < 0:  # an event in no layer (the host's work beside the engines') has no layer name
        return True
    layer_first, op_first = _lookup_tables(trace.op_names, trace.op_layer.tolist(), trace.layer_names)
    pairs = np.unique(ev["op"].astype(np.int64) << 32 | ev["layer"].astype(np.int64))
    for pair in pairs.tolist():
        op, layer = pair >> 32, pair & 0xFFFFFFFF
        lname = trace.layer_names[layer]
        if layer_first[lname] != layer or op_first.get((trace.op_names[op], lname)) != op:
            return True
    return False


def _check_exportable(trace: Trace, run: int) -> None:
    ev = trace.events
    for name in ("start_ns", "dur_ns", "flops", "bytes"):
        if not np.all(np.isfinite(ev[name])):
            raise ValueError(f"run {run}: event column '{name}' holds a number that is not finite")
    for a in (trace.layer_start_ns, trace.layer_end_ns):
        if not np.all(np.isfinite(a)):
            raise ValueError(f"run {run}: a layer span is not finite")
    for c in trace.counters.values():
        if not (np.all(np.isfinite(c.t_ns)) and np.all(np.isfinite(c.value))):
            raise ValueError(f"run {run}: counter '{c.name}' holds a number that is not finite")
    for name, col, n, least in (("track", ev["track"], len(trace.tracks), 0), ("op", ev["op"], len(trace.op_names), 0),
                                ("layer", ev["layer"], len(trace.layer_names), -1),  # -1: in no layer
                                ("layer", trace.op_layer, len(trace.layer_names), -1)):
        if len(col) and (col.min() < least or col.max() >= n):
            raise ValueError(f"run {run}: an event or op refers to a {name} that does not exist")


@dataclass
class _Layout:
    """Where each run goes: a pid per NeuronCore, a tid per track, and whether args carry indices."""

    pids: dict[int, int]
    tids: list[int]
    indexed: bool


def _layouts(traces: Sequence[Trace]) -> list[_Layout]:
    out, pid, tid = [], 1, 1
    for r, trace in enumerate(traces):
        _check_exportable(trace, r)
        pids = {}
        for core in sorted({t.core for t in trace.tracks}) or [0]:
            pids[core], pid = pid, pid + 1
        tids = list(range(tid, tid + len(trace.tracks)))
        tid += len(trace.tracks)
        out.append(_Layout(pids, tids, _needs_indices(trace)))
    return out


def _other_data(traces: Sequence[Trace], layouts: list[_Layout]) -> dict[str, Any]:
    runs = []
    for trace, lay in zip(traces, layouts, strict=True):
        runs.append({
            "meta": _json_safe(dict(trace.meta)), "pids": list(lay.pids.values()),
            "tracks": [[t.name, t.kind, int(t.core), lay.pids[t.core], tid]
                       for t, tid in zip(trace.tracks, lay.tids, strict=True)],
            "op_names": list(trace.op_names), "op_layer": trace.op_layer.tolist(),
            "layer_names": list(trace.layer_names), "layer_kinds": list(trace.layer_kinds),
            "layer_start_ns": trace.layer_start_ns.tolist(), "layer_end_ns": trace.layer_end_ns.tolist(),
            "counters": [[c.name, c.unit] for c in trace.counters.values()], "indexed": lay.indexed,
        })
    return {"neuronviz": {"format": FORMAT_NAME, "version": METADATA_VERSION,
                          "simulator_version": __version__, "runs": runs}}


def _metadata_events(traces: Sequence[Trace], layouts: list[_Layout]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for trace, lay in zip(traces, layouts, strict=True):
        m = trace.meta
        chip = str(m.get("chip_name") or m.get("chip") or "neuronviz")
        model = str(m.get("model", ""))
        for core, pid in lay.pids.items():
            out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                        "args": {"name": f"{chip} NC{core} · {model}"}})
            out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        for i, (t, tid) in enumerate(zip(trace.tracks, lay.tids, strict=True)):
            pid = lay.pids[t.core]
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": t.name}})
            out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": i}})
    return out


def _objects(values: Sequence[Any]) -> np.ndarray:
    return np.fromiter(values, dtype=object, count=len(values))


def _event_chunks(traces: Sequence[Trace], layouts: list[_Layout]) -> Iterator[list[dict[str, Any]]]:
    """Every event of the export, a chunk at a time; columns are converted with NumPy, not per event."""
    yield _metadata_events(traces, layouts)
    flow_ids = itertools.count(1)  # a flow's id is the file's, across runs
    async_ids = itertools.count(1)  # so is an async slice's
    for trace, lay in zip(traces, layouts, strict=True):
        ev = trace.events
        start_ns, end_ns = whole_ns(trace)
        crossed = crossing(ev["track"], start_ns, end_ns)
        ts, dur, ts_end = start_ns / 1e3, (end_ns - start_ns) / 1e3, end_ns / 1e3
        track_pid = np.array([lay.pids[t.core] for t in trace.tracks] or [0], np.int64)
        track_tid = np.array(lay.tids or [0], np.int64)
        track_cat = _objects([t.kind for t in trace.tracks] or [""])
        op_names = _objects(trace.op_names)
        layer_names = _objects([*trace.layer_names, ""])  # an event in no layer (-1) names none
        for lo in range(0, trace.n_events, CHUNK_EVENTS):
            sl = slice(lo, lo + CHUNK_EVENTS)
            track, op, layer = ev["track"][sl], ev["op"][sl], ev["layer"][sl]
            chunk = [
                {"ph": "X", "name": n, "cat": c, "ts": s, "dur": d, "pid": p, "tid": t,
                 "args": {"layer": la, "flops": f, "bytes": b}}
                for n, c, s, d, p, t, la, f, b in zip(
                    op_names[op].tolist(), track_cat[track].tolist(), ts[sl].tolist(),
                    dur[sl].tolist(), track_pid[track].tolist(), track_tid[track].tolist(),
                    layer_names[layer].tolist(), ev["flops"][sl].tolist(), ev["bytes"][sl].tolist(), strict=True)
            ]
            if lay.indexed:
                for e, o, li in zip(chunk, op.tolist(), layer.tolist(), strict=True):
                    e["args"]["op"], e["args"]["layer_index"] = o, li
            here = np.flatnonzero(crossed[sl])
            _as_async(chunk, here.tolist(), ts_end[sl][here].tolist(), async_ids)
            yield chunk
        yield _flow_events(trace, start_ns, end_ns, track_pid, track_tid, flow_ids, crossed)
        pid = next(iter(lay.pids.values()))
        for c in trace.counters.values():
            name = c.name
            ts, values = (c.t_ns / 1e3).tolist(), c.value.tolist()
            for lo in range(0, len(ts), CHUNK_EVENTS):
                yield [{"ph": "C", "name": name, "ts": t, "pid": pid, "args": {name: v}}
                       for t, v in zip(ts[lo:lo + CHUNK_EVENTS], values[lo:lo + CHUNK_EVENTS], strict=True)]


def whole_ns(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Each event's start and end in whole nanoseconds, as Chrome JSON and .pftrace write them:
    a Perfetto trace's times are integer nanoseconds, and its JSON reader rounds ``ts`` and
    ``dur`` (microseconds) to them each. The end is the exact end rounded (not the start plus a
    rounded duration: float rounding of a sum of durations is no overlap), never before the start;
    written as ``ts`` and ``dur = end - start``, it is the end such a reader finds."""
    ev = trace.events
    start = np.rint(ev["start_ns"])
    return start, np.maximum(np.rint(ev["start_ns"] + ev["dur_ns"]), start)


def crossing_events(trace: Trace) -> np.ndarray:
    """Which events a thread's stack of slices cannot hold: those overlapping an event of their
    track without nesting in it (:func:`sim.io.slices.crossing`), on the times written
    (:func:`whole_ns`)."""
    return crossing(trace.events["track"], *whole_ns(trace))


def _as_async(chunk: list[dict[str, Any]], crossed: list[int], ts_end: list[float], ids: Iterator[int]) -> None:
    """The complete events ``crossed`` of ``chunk`` turned into async slices in place: a ``b``
    with the event's name, category, args and an id of its own, and its ``e`` (at ``ts_end``)
    added at the end of the chunk. Perfetto draws them on a track of their own under the process,
    with the other slices of their name, each in the lowest row free (as :func:`_match_async`
    reads them); our own import puts them back on the track of their ``tid``."""
    for i, t in zip(crossed, ts_end, strict=True):
        e = chunk[i]
        del e["dur"]
        e["ph"], e["id"] = "b", next(ids)
        chunk.append({"ph": "e", "name": e["name"], "cat": e["cat"], "id": e["id"], "ts": t,
                      "pid": e["pid"], "tid": e["tid"]})


def _flow_events(trace: Trace, start_ns: np.ndarray, end_ns: np.ndarray, track_pid: np.ndarray,
                 track_tid: np.ndarray, ids: Iterator[int], crossed: np.ndarray) -> list[dict[str, Any]]:
    """The run's flow arrows (``meta["flows"]``) as flow events of the first version, so that any
    reader of the file draws them: an ``s`` where the slice the arrow leaves starts and an ``f``
    (bound to the slice holding it) in the slice it enters, at its start or, when that is earlier,
    the first's; an arrow into a slice that ends before the first starts has no such events, nor
    has one from or to an async slice (``crossed``), which a flow event of its thread cannot bind.
    Times are the slices' as written (``start_ns``, ``end_ns``)."""
    flows = trace.meta.get("flows")
    if not isinstance(flows, dict):
        return []
    ev, n = trace.events, trace.n_events
    names = [str(x) for x in flows.get("names", [])] or [FLOW_NAME]
    out = []
    for a, b, k in zip(flows.get("from", []), flows.get("to", []), flows.get("name", []), strict=False):
        if not (type(a) is int and type(b) is int and 0 <= a < n and 0 <= b < n and a != b) or crossed[a] \
                or crossed[b]:
            continue
        start_a, start_b = float(start_ns[a]), float(start_ns[b])
        t = max(start_a, start_b)
        if t > float(end_ns[b]):
            continue
        name = names[k] if type(k) is int and 0 <= k < len(names) else FLOW_NAME
        flow = {"cat": FLOW_NAME, "name": name, "id": next(ids)}
        out.append({"ph": "s", **flow, "pid": int(track_pid[ev["track"][a]]), "tid": int(track_tid[ev["track"][a]]),
                    "ts": start_a / 1e3})
        out.append({"ph": "f", "bp": "e", **flow, "pid": int(track_pid[ev["track"][b]]),
                    "tid": int(track_tid[ev["track"][b]]), "ts": t / 1e3})
    return out


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Millions of small dicts and lists make the cyclic collector run over and over for nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def export_chrome(traces: Sequence[Trace]) -> dict:
    """The Chrome Trace Event document of ``traces`` (one or more runs) as plain JSON types."""
    traces = list(traces)
    layouts = _layouts(traces)
    events: list[dict[str, Any]] = []
    with _gc_paused():
        for chunk in _event_chunks(traces, layouts):
            events.extend(chunk)
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": _other_data(traces, layouts)}


def _serialised(traces: Sequence[Trace], layouts: list[_Layout]) -> Iterator[bytes]:
    """The comma-separated JSON of every event, chunk by chunk."""
    for chunk in _event_chunks(traces, layouts):
        if chunk:
            yield orjson.dumps(chunk)[1:-1]


def save_chrome(path: str | os.PathLike, traces: Sequence[Trace]) -> None:
    """Write ``traces`` as Chrome JSON to ``path`` atomically; a ``.gz`` name writes gzip.

    Events are serialised a chunk at a time, so memory stays bounded however long the trace is.
    """
    target = Path(path)
    traces = list(traces)
    try:
        layouts = _layouts(traces)
        other = _other_data(traces, layouts)
    except ValueError as exc:
        raise TraceFileError(f"cannot write {target}: {exc}") from None
    with atomic_file(target) as raw, _gc_paused():
        out = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=3, mtime=0) \
            if target.name.lower().endswith(".gz") else raw
        out.write(b'{"displayTimeUnit":"ns","otherData":' + orjson.dumps(other) + b',"traceEvents":[')
        first = True
        for body in _serialised(traces, layouts):
            out.write(body if first else b"," + body)
            first = False
        out.write(b"]}")
        if out is not raw:
            out.close()


# ----------------------------------------------------------------------------------------------
# import


class _Text:
    """A document's text, read as it is decoded: holds only what has not been decoded yet.
    Positions are the text's (the decompressed text's for gzip); reads stop with a one-line
    error once the text outgrows ``limit``, or, when ``consumed`` tells how many compressed bytes
    it came from, :data:`MAX_GZIP_RATIO` times them."""

    def __init__(self, read: Callable[[int], bytes], limit: int, too_big: str, fail: Fail,
                 done: Callable[[], float] = lambda: 0.0, consumed: Callable[[], int] | None = None) -> None:
        self._read, self._limit, self._too_big, self._fail = read, limit, too_big, fail
        self._consumed = consumed
        self.done = done  # the share of the file decoded so far
        self.decoded = 0  # the end of the text decoded so far
        self.buf = bytearray()
        self.base = 0  # the position of buf[0]
        self.eof = False

    def more(self) -> bool:
        """Reads on; False at the end of the text."""
        if self.eof:
            return False
        try:
            chunk = self._read(_READ_CHUNK)
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            self._fail(f"damaged or truncated gzip data ({exc})")
        except OSError as exc:
            self._fail(read_problem(exc))
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        produced = self.base + len(self.buf)
        if produced > self._limit:
            self._fail(self._too_big)
        if self._consumed and produced > MIN_RATIO_CHECK_BYTES and produced > MAX_GZIP_RATIO * self._consumed():
            self._fail(f"decompresses to more than {MAX_GZIP_RATIO} times the bytes read (refused as a possible "
                       "zip bomb)")
        return True

    def search(self, pattern: re.Pattern, at: int) -> re.Match | None:
        """The first match at or after ``at`` (reading as far as it takes), or None; its positions
        are the text's minus :attr:`base`. Each read searches only the new text and the last
        :data:`_LONGEST_MATCH` bytes before it, so a search through blanks stays linear."""
        start = at
        while True:
            m = pattern.search(self.buf, max(start - self.base, 0))
            if m is not None:
                return m
            start = max(at, self.base + len(self.buf) - _LONGEST_MATCH)
            if not self.more():
                return None

    def take(self, start: int, end: int | None = None) -> bytes:
        """The text from ``start`` to ``end`` (to the end of the text when None)."""
        if end is None:
            while self.more():
                pass
            end = self.base + len(self.buf)
        return bytes(self.buf[start - self.base:end - self.base])

    def drop(self, upto: int) -> None:
        """Forgets the text before ``upto``."""
        del self.buf[:upto - self.base]
        self.base = upto


@contextmanager
def _text_of(path: str | os.PathLike, fail: Fail) -> Iterator[_Text]:
    """The text of a plain or gzip file, read on demand. A gzip file is refused once it decompresses
    beyond :data:`MAX_JSON_BYTES`, or :data:`MAX_GZIP_RATIO` times the compressed bytes read so far
    (a bomb stops there, before memory or time is spent on it: what its header declares is not
    read)."""
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_FILE_BYTES:
                fail(f"the file is implausibly large ({size:,} bytes, the limit is {MAX_FILE_BYTES:,})")
            gzipped = f.read(2) == GZIP_MAGIC
            f.seek(0)

            if not gzipped:
                text = _Text(f.read, MAX_FILE_BYTES, f"the file is implausibly large (the limit is "
                             f"{MAX_FILE_BYTES:,} bytes)", fail)
                text.done = lambda: min(text.decoded / size, 1.0) if size else 1.0
                yield text
                return
            with gzip.GzipFile(fileobj=f, mode="rb") as gz:
                # the decompressed size is unknown until the end: the compressed bytes consumed
                yield _Text(gz.read, MAX_JSON_BYTES, f"decompresses to more than {MAX_JSON_BYTES:,} bytes (refused "
                            "as a possible zip bomb)", fail, lambda: min(f.tell() / size, 1.0) if size else 1.0,
                            consumed=f.tell)
    except OSError as exc:
        fail(read_problem(exc))


# The array of events is decoded a piece of about CHUNK_BYTES at a time, straight into the typed
# shapes below (no dict per event), and each piece is reduced to NumPy columns before the next is
# decoded: memory holds the columns and one piece. The decoder checks the fields' types as it goes;
# a piece it refuses (a wrong type, a phase the format does not define) is decoded again into the
# loose twins of these shapes, every field Any, whose types are then checked column by column with
# messages naming the event.


class _SliceArgs(msgspec.Struct):
    """The args import reads from a slice; any others are skipped while decoding."""

    layer: Any = None
    flops: float | None = None
    bytes: float | None = None
    op: int | None = None
    layer_index: int | None = None


class _Slice(msgspec.Struct, tag_field="ph", tag="X"):
    ts: float
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    dur: float = 0.0
    args: _SliceArgs | None = None
    # a flow of the format's second version leaves (flow_out) or enters (flow_in) this slice
    bind_id: Any = None
    flow_in: Any = False
    flow_out: Any = False


class _Instant(_Slice, tag="i"):
    pass


class _InstantOld(_Slice, tag="I"):  # the deprecated spelling of an instant event
    pass


class _Begin(msgspec.Struct, tag_field="ph", tag="B"):
    ts: float
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    args: dict | None = None  # a B's args and its E's are merged: kept whole


class _End(_Begin, tag="E"):
    pass


class _AsyncBegin(msgspec.Struct, tag_field="ph", tag="b"):
    """A nestable async event (b, e, or n for an instant); ``id`` or ``id2`` says which slices
    belong together (with the category and the name, as Perfetto matches them)."""

    ts: float
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    id: Any = None
    id2: Any = None
    args: dict | None = None


class _AsyncEnd(_AsyncBegin, tag="e"):
    pass


class _AsyncInstant(_AsyncBegin, tag="n"):
    pass


class _FlowStart(msgspec.Struct, tag_field="ph", tag="s"):
    """A flow event (s, t, f) of the format's first version: an arrow between the slices enclosing
    its points (an f without ``"bp": "e"`` enters the next slice to begin on its thread)."""

    ts: float
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    id: Any = None
    bp: Any = None


class _FlowStep(_FlowStart, tag="t"):
    pass


class _FlowEnd(_FlowStart, tag="f"):
    pass


class _CounterEvent(msgspec.Struct, tag_field="ph", tag="C"):
    ts: float
    args: dict[str, float]
    name: str = ""
    pid: int | str = 0
    id: int | str | None = None


class _Metadata(msgspec.Struct, tag_field="ph", tag="M"):  # only decoration: unusable fields are skipped
    name: Any = None
    pid: Any = 0
    tid: Any = 0
    args: Any = None


class _Skipped(msgspec.Struct):
    """An event of a phase import does not read (samples, object snapshots, marks...)."""


def _loose(cls: type, **types: Any) -> type:
    """The twin of ``cls`` whose fields are Any (or ``types``), a required one None when missing."""
    fields = [(f.name, types.get(f.name, Any), None if f.required else f.default) for f in msgspec.structs.fields(cls)]
    return msgspec.defstruct(f"_Loose{cls.__name__}", fields, tag_field="ph", tag=cls.__struct_config__.tag)


_LooseSliceArgs = msgspec.defstruct("_LooseSliceArgs",
                                    [(f.name, Any, None) for f in msgspec.structs.fields(_SliceArgs)])
_NO_ARGS = _LooseSliceArgs()
# the other phases of the Trace Event Format: decoded without any field, then counted as skipped
_SKIPPED_PHASES = tuple(msgspec.defstruct(f"_Skipped_{ord(p)}", [], bases=(_Skipped,), tag_field="ph", tag=p)
                        for p in "STpFPNODVvRc()")  # S, T, F: legacy async events, which Perfetto skips too
_STRICT = (_Slice, _Instant, _InstantOld, _Begin, _End, _CounterEvent, _AsyncBegin, _AsyncEnd, _AsyncInstant,
           _FlowStart, _FlowStep, _FlowEnd)
_LOOSE = tuple(_loose(cls, args=_LooseSliceArgs | None) if issubclass(cls, _Slice) else _loose(cls) for cls in _STRICT)
_PHASE_TYPE = {cls.__struct_config__.tag: cls for cls in (*_LOOSE, _Metadata, *_SKIPPED_PHASES)}
_SLICE, _INSTANT, _BEGIN_END, _COUNTER, _METADATA, _ASYNC, _FLOW = 1, 2, 3, 4, 5, 6, 7
_CODE = {cls: code for family in (_STRICT, _LOOSE) for cls, code in zip(
    family, (_SLICE, _INSTANT, _INSTANT, _BEGIN_END, _BEGIN_END, _COUNTER, _ASYNC, _ASYNC, _ASYNC,
             _FLOW, _FLOW, _FLOW), strict=True)} | {_Metadata: _METADATA}
_BEGINS = (_Begin, _LOOSE[3])
_PHASE_OF = {cls: cls.__struct_config__.tag for cls in (*_STRICT, *_LOOSE)}  # an async or flow event's phase
_STRICT_FLOWS = {_FlowStart, _FlowStep, _FlowEnd}
_EventType = Union[(*_STRICT, _Metadata, *_SKIPPED_PHASES)]  # noqa: UP007 (a union built from a tuple)


class _Tail(msgspec.Struct):
    """The last piece of an object document: its last events and any keys after the array."""

    traceEvents: list[_EventType] = msgspec.field(default_factory=list)  # noqa: N815 (the format's key)
    otherData: Any = None  # noqa: N815


_DECODE_PIECE = msgspec.json.Decoder(list[_EventType])
_DECODE_TAIL = msgspec.json.Decoder(_Tail)
_NOT_JSON = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)  # ValidationError is a DecodeError too
# the blanks the patterns below allow in one place: far more than any pretty-printer's indent, and a
# bound on how long a match is (a search resumes that far back; more blanks only make a piece longer)
_MAX_BLANKS = 1024
_EVENTS_KEY = re.compile(rb'"traceEvents"\s{0,%d}:\s{0,%d}\[' % (_MAX_BLANKS, _MAX_BLANKS))
_GAP = re.compile(rb"\}\s{0,%d},\s{0,%d}\{" % (_MAX_BLANKS, _MAX_BLANKS))  # between two events, unless in a string
_LONGEST_MATCH = len(b'"traceEvents":[') + 2 * _MAX_BLANKS
_OPENING = re.compile(rb"[^\s\xef\xbb\xbf]")  # the first byte after blanks and a UTF-8 byte order mark
_SPLIT_TRIES = 8


def _not_json(exc: BaseException, fail: Fail, offset: int = 0, first: int = 0) -> NoReturn:
    """The one-line error of text that does not decode; positions in it are made the file's:
    ``offset`` is the file's byte at the text's first, ``first`` the text's first event."""
    if isinstance(exc, RecursionError) or "recursion" in str(exc):
        fail("not valid JSON (nested too deeply)")
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    text = re.sub(r"\(byte (\d+)\)", lambda m: f"(byte {int(m[1]) + offset:,})", text)
    text = re.sub(r" - at `\$(?:\.traceEvents)?\[(\d+)\].*`", lambda m: f" in event {int(m[1]) + first}", text)
    text = re.sub(r" - at `.*`", "", text)  # a place without an event's index
    fail(f"not valid JSON ({text})")


def _typed(events: Any, first: int, fail: Fail) -> list:
    """Events of an untyped decode as the typed shapes, one by one, with a message for the first
    that cannot be: the slow path for pieces the typed decoder refused (a phase the format does not
    define, args that are not an object...)."""
    if not isinstance(events, list):
        fail("not a Chrome trace ('traceEvents' is not a list)")
    out = []
    for i, ev in enumerate(events, first):
        if type(ev) is not dict:
            fail(f"not a Chrome trace (event {i} is {_json_type(ev)}, not an object)")
        ph = ev.get("ph")
        if type(ph) is not str:
            fail(f"event {i}: 'ph' should be a string but is {'missing' if ph is None else _json_type(ph)}")
        cls = _PHASE_TYPE.get(ph, _Skipped)
        if cls is _Skipped:
            out.append(_Skipped())
            continue
        args = ev.get("args")
        if _CODE.get(cls) in (_SLICE, _INSTANT, _BEGIN_END, _ASYNC) and not isinstance(args, dict | None):
            fail(f"event {i}: 'args' should be an object but is {_json_type(args)}")
        try:
            out.append(msgspec.convert(ev, cls))
        except msgspec.ValidationError as exc:
            fail(f"event {i}: {exc}")
    return out


def _decode_piece(text: bytes, first: int, fail: Fail) -> tuple[list, bool]:
    """A piece of the event array (``[...]``) as typed events, and whether their types are checked
    (the loose twins' are not); raises one of :data:`_NOT_JSON` when the piece is not JSON."""
    try:
        return _DECODE_PIECE.decode(text), True
    except msgspec.ValidationError as exc:
        if _out_of_range(exc):
            raise
        return _typed(msgspec.json.decode(text), first, fail), False


def _out_of_range(exc: msgspec.ValidationError) -> bool:
    """Whether the typed decoder refused a number no float holds: the text's error, not its shape."""
    return str(exc).startswith("Number out of range")


def _whole(text: _Text, start: int, fail: Fail) -> tuple[list, dict]:
    """The events and otherData of a document decoded at once (one that does not open as a trace
    usually does: its error is the file's)."""
    try:
        doc = msgspec.json.decode(text.take(start))
    except _NOT_JSON as exc:
        _not_json(exc, fail, start)
    events, other = _events_of(doc, fail)
    return _typed(events, 0, fail), other


def _head(text: _Text, start: int) -> tuple[int, dict] | None:
    """Where the event array of an object document starts, and the document's otherData when it
    comes before the array; None when no "traceEvents" key proves to be the document's own."""
    at = start
    for _ in range(_SPLIT_TRIES):
        m = text.search(_EVENTS_KEY, at)
        if m is None:
            return None
        key, at = text.base + m.start(), text.base + m.end()
        try:  # the text before the key closes into an object only if the key is at the top level
            head = msgspec.json.decode(text.take(start, key) + b'"traceEvents":[]}')
        except _NOT_JSON:
            continue
        if isinstance(head, dict):
            other = head.get("otherData")
            return at, other if isinstance(other, dict) else {}
    return None


def _event_pieces(text: _Text, fail: Fail, other: dict) -> Iterator[tuple[list, bool]]:
    """The typed events of a Chrome trace document, a piece at a time, each with whether the
    decoder checked their types; the document's otherData goes to ``other``.

    A piece ends at a ``}, {`` found past :data:`CHUNK_BYTES`; it is a real boundary between events
    exactly when the piece decodes (JSON is read the same way from the same starting state), so a
    gap inside a string or a nested object only makes the piece longer. The last piece is closed
    as the document closes; the JSON Array Format's missing ``]`` is accepted."""
    start = text.search(_OPENING, 0)
    if start is None:
        fail("the file is empty")
    start = text.base + start.start()
    bare = text.buf[start - text.base] == ord("[")
    found = (start + 1, {}) if bare else _head(text, start)
    if found is None:
        events, found_other = _whole(text, start, fail)
        other.update(found_other)
        yield events, False
        return
    a, head_other = found
    other.update(head_other)
    first = 0
    while True:
        text.drop(a)
        m = text.search(_GAP, a + CHUNK_BYTES)
        for _ in range(_SPLIT_TRIES):
            if m is None:
                break
            try:
                events, checked = _decode_piece(b"[" + text.take(a, text.base + m.start() + 1) + b"]", first, fail)
                break
            except _NOT_JSON:
                m = text.search(_GAP, text.base + m.end())
        else:
            m = None  # no gap proved to be one: the rest is one piece, and its errors are the file's
        if m is None:
            rest = text.take(a)
            text.decoded = a + len(rest)
            yield _last_piece(rest, a, first, bare, fail, other)
            return
        text.decoded = text.base + m.start() + 1
        yield events, checked
        first += len(events)
        a = text.base + m.end() - 1


def _last_piece(rest: bytes, at: int, first: int, bare: bool, fail: Fail, other: dict) -> tuple[list, bool]:
    """The events of the text from ``at`` to its end, the rest of the array and of the document,
    and whether the decoder checked their types."""
    opening = b"[" if bare else b'{"traceEvents":['
    text = opening + rest
    try:
        if bare:
            return _decode_piece(text, first, fail)
        try:
            tail, checked = _DECODE_TAIL.decode(text), True
        except msgspec.ValidationError as exc:
            if _out_of_range(exc):
                raise
            doc = msgspec.json.decode(text)
            tail, checked = _Tail(_typed(doc["traceEvents"], first, fail), doc.get("otherData")), False
        if isinstance(tail.otherData, dict):
            other.update(tail.otherData)
        return tail.traceEvents, checked
    except _NOT_JSON as exc:
        end = text.rstrip()
        if bare and end.endswith((b"}", b"},")):  # a trace cut off while written
            try:
                return _decode_piece(end.rstrip(b",") + b"]", first, fail)
            except _NOT_JSON:
                pass
        _not_json(exc, fail, at - len(opening), first)


def _events_of(doc: Any, fail: Fail) -> tuple[list, dict]:
    if isinstance(doc, list):
        return doc, {}
    if not isinstance(doc, dict):
        fail(f"not a Chrome trace (the JSON is {_json_type(doc)}, not an object with traceEvents or an array)")
    events = doc.get("traceEvents")
    if events is None:
        fail("not a Chrome trace (a JSON object without 'traceEvents')")
    if not isinstance(events, list):
        fail("not a Chrome trace ('traceEvents' is not a list)")
    other = doc.get("otherData")
    return events, other if isinstance(other, dict) else {}


_JSON_TYPES = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
               dict: "an object", type(None): "null"}


def _json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _check_types(values: list, pos: Sequence[int], allowed: set, what: str, fail: Fail) -> None:
    if set(map(type, values)) <= allowed:
        return
    i = next(k for k, v in enumerate(values) if type(v) not in allowed)
    found = "missing" if values[i] is None and type(None) not in allowed else _json_type(values[i])
    fail(f"event {pos[i]}: {what} is {found}")


def _numbers(values: list, pos: Sequence[int], what: str, fail: Fail, limit: float = MAX_VALUE,
             typed: bool = False) -> np.ndarray:
    """``values`` as float64 after checking each is a JSON number (unless ``typed``: the decoder
    did) and finite, of at most ``limit``."""
    if not typed:
        _check_types(values, pos, {int, float}, f"'{what}' should be a number but", fail)
    try:
        a = np.array(values, dtype=np.float64)
    except (OverflowError, ValueError, TypeError):
        fail(f"'{what}' holds a number out of range")
    bad = ~(np.abs(a) <= limit)  # NaN and infinities too
    if bad.any():
        fail(f"event {pos[int(np.argmax(bad))]}: '{what}' is not a finite number of at most {limit:g}")
    return a


def _arg_column(values: list, key: str, fail: Fail) -> np.ndarray:
    """A numeric arg of every event; missing, non-numeric, negative or non-finite values count as 0."""
    if not set(map(type, values)) <= {int, float}:
        values = [v if type(v) is float or type(v) is int else 0.0 for v in values]
    try:
        out = np.array(values, dtype=np.float64)
    except (OverflowError, ValueError):
        fail(f"'{key}' in args holds a number out of range")
    out[~(out <= MAX_VALUE) | (out < 0)] = 0.0  # NaN, infinities and absurd sizes too
    return out


_KEY_TYPES = {int, str}


class _Index(dict):
    """Numbers distinct keys in order of first appearance: ``list(map(index.__getitem__, keys))``."""

    def __missing__(self, key: Any) -> int:
        value = self[key] = len(self)
        return value


def _attr(events: list, name: str) -> list:
    """One field of every event, without a Python-level loop."""
    return list(map(attrgetter(name), events))


def _pick(events: list, pos: np.ndarray) -> list:
    return list(map(events.__getitem__, pos.tolist()))


def _no_ints() -> np.ndarray:
    return np.zeros(0, np.int64)


# why an arg could not be used: its JSON type (or a number too big for an index)
_WHY = {type(None): 1, str: 2, bool: 3, float: 4, list: 5, dict: 6}
_WHY_TEXT = ("", "missing", "a string", "a boolean", "a number", "an array", "an object", "a number out of range")


def _int_arg(values: list) -> tuple[np.ndarray, np.ndarray]:
    """An integer arg of every event, and why it is unusable where it is (0 where it is not)."""
    n = len(values)
    kinds = set(map(type, values))
    if kinds == {int}:
        try:
            return np.array(values, np.int64), np.zeros(n, np.int8)
        except OverflowError:
            pass
    if kinds == {type(None)}:
        return np.zeros(n, np.int64), np.ones(n, np.int8)
    out, why = np.zeros(n, np.int64), np.zeros(n, np.int8)
    for i, v in enumerate(values):
        if type(v) is int and -(1 << 63) <= v < 1 << 63:
            out[i] = v
        else:
            why[i] = _WHY.get(type(v), len(_WHY_TEXT) - 1)
    return out, why


def _first_seen(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``ids`` renumbered in order of first appearance, and the original id of each new number."""
    unique, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return rank[inverse.reshape(-1)], unique[order]


@dataclass
class _Scan:
    """What the pass over the events finds, types checked: one row per slice, columns as arrays."""

    keys: list[tuple] = field(default_factory=list)  # unique (pid, tid) of slices, first seen first
    strings: list[str] = field(default_factory=list)  # every distinct name, category and layer
    key: np.ndarray = field(default_factory=_no_ints)  # per slice: index into keys, of the track it is laid out on
    thread: np.ndarray = field(default_factory=_no_ints)  # and of the thread that wrote it (an async slice's tid)
    pos: np.ndarray = field(default_factory=_no_ints)  # per slice: index in the file
    name: np.ndarray = field(default_factory=_no_ints)  # index into strings
    cat: np.ndarray = field(default_factory=_no_ints)
    ts: np.ndarray = field(default_factory=lambda: np.zeros(0))  # microseconds as in the file
    dur: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # args: the layer (index into strings), op and layer_index as found, each with the JSON type
    # that made it unusable (a _WHY code, 0 when usable)
    layer: np.ndarray = field(default_factory=_no_ints)
    op: np.ndarray = field(default_factory=_no_ints)
    layer_index: np.ndarray = field(default_factory=_no_ints)
    why: dict[str, np.ndarray] = field(default_factory=dict)
    flops: np.ndarray = field(default_factory=lambda: np.zeros(0))  # args: 0 when absent or unusable
    bytes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    counters: dict[tuple, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # (pid, name) -> (ts, value)
    process_names: dict = field(default_factory=dict)
    thread_names: dict = field(default_factory=dict)
    process_sort: dict = field(default_factory=dict)
    thread_sort: dict = field(default_factory=dict)
    skipped: int = 0
    unclosed: int = 0
    unmatched_end: int = 0
    flows: _FlowPoints | None = None  # the points of flows, to be bound to slices


@dataclass
class _FlowPoints:
    """The points flows pass through, in the file's order: which flow (an index into ``names``,
    one a flow), where (a slice's position in the file, or a thread and a time) and their role."""

    flow: np.ndarray  # index of its flow
    names: list[str]  # of each flow
    ts: np.ndarray  # microseconds as in the file
    pos: np.ndarray  # in the file
    role: np.ndarray  # BEGIN, STEP or END (of a chain: begin -> step -> ... -> end)
    slice_pos: np.ndarray  # the position of the slice it is bound to (the second version's), or -1
    thread: np.ndarray  # index into the scan's keys (the first version's), or -1
    next_slice: np.ndarray  # bound to the next slice to begin on its thread, not the one it is in


FLOW_BEGIN, FLOW_STEP, FLOW_END = 0, 1, 2
ASYNC = "async"  # a process's async slices of one name are keyed (pid, (ASYNC, name)): no tid is a pair
_FLOW_ROLE = {"s": FLOW_BEGIN, "t": FLOW_STEP, "f": FLOW_END}


_SLICE_COLUMNS = ("key", "thread", "pos", "name", "cat", "ts", "dur", "layer", "op", "layer_index", "flops", "bytes",
                  "why_layer", "why_op", "why_layer_index")


class _Scanner:
    """Reduces the events, a piece at a time, to the columns of a :class:`_Scan`."""

    def __init__(self, fail: Fail) -> None:
        self.fail = fail
        self.scan = _Scan()
        self.keys = _Index()  # (pid, tid) of slices
        self.series = _Index()  # (pid, name) of counter series
        self.parts: dict[str, list] = {c: [] for c in _SLICE_COLUMNS}
        self.counter_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.begin_end: list[tuple[int, Any]] = []
        self.async_events: list[tuple[int, Any]] = []
        self.flow_parts: list[tuple[np.ndarray, list]] = []  # positions and flow events, a piece at a time
        self.bound: list[tuple[int, Any, bool, bool]] = []  # slices a flow leaves or enters: (pos, id, in, out)
        self.checked = False  # whether the decoder checked the types of the piece being added
        self.strings = _Index()  # every distinct name, category and layer
        self.end = -math.inf  # the last time any event reaches

    def add(self, events: list, first: int, checked: bool) -> None:
        """Adds a piece of events, the first the ``first`` of the file; ``checked`` when the decoder
        has checked the types of their fields."""
        self.checked = checked
        code = np.fromiter(map(_CODE.get, map(type, events), repeat(0)), np.int8, count=len(events))
        self.scan.skipped += int(np.count_nonzero(code == 0))
        pos = np.flatnonzero((code == _SLICE) | (code == _INSTANT))
        if len(pos):
            self._slices(_pick(events, pos), pos + first, code[pos] == _INSTANT)
        pos = np.flatnonzero(code == _BEGIN_END)
        self.begin_end += zip((pos + first).tolist(), _pick(events, pos), strict=True)
        pos = np.flatnonzero(code == _ASYNC)
        self.async_events += zip((pos + first).tolist(), _pick(events, pos), strict=True)
        pos = np.flatnonzero(code == _FLOW)
        if len(pos):
            self.flow_parts.append((pos + first, _pick(events, pos)))
        for ev in _pick(events, np.flatnonzero(code == _METADATA)):
            self._metadata(ev)
        pos = np.flatnonzero(code == _COUNTER)
        if len(pos):
            self._counters(_pick(events, pos), pos + first)

    def _ids(self, strings: list[str]) -> np.ndarray:
        return np.fromiter(map(self.strings.__getitem__, strings), np.int64, count=len(strings))

    def _identity(self, events: list, pos_l: list[int]) -> tuple[list, list, list]:
        """The checked (pid, tid), name and category of slices or begin/end events."""
        fail = self.fail
        pid, tid, name, cat = _attr(events, "pid"), _attr(events, "tid"), _attr(events, "name"), _attr(events, "cat")
        if self.checked:
            return list(zip(pid, tid, strict=True)), name, cat
        _check_types(pid, pos_l, _KEY_TYPES, "'pid' should be an integer or string but", fail)
        _check_types(tid, pos_l, _KEY_TYPES, "'tid' should be an integer or string but", fail)
        _check_types(name, pos_l, {str}, "'name' should be a string but", fail)
        _check_types(cat, pos_l, {str}, "'cat' should be a string but", fail)
        return list(zip(pid, tid, strict=True)), name, cat

    def _slices(self, events: list, pos: np.ndarray, instant: np.ndarray) -> None:
        pos_l = pos.tolist()
        keys, name, cat = self._identity(events, pos_l)
        ts = _numbers(_attr(events, "ts"), pos_l, "ts", self.fail, MAX_TIME_US, self.checked)
        dur = _numbers(_attr(events, "dur"), pos_l, "dur", self.fail, MAX_TIME_US, self.checked)
        if np.any(dur < 0):
            self.fail(f"event {pos_l[int(np.argmax(dur < 0))]}: negative 'dur'")
        dur[instant] = 0.0
        args = _attr(events, "args")
        if None in args:
            args = [_NO_ARGS if a is None else a for a in args]
        self._add(keys, pos, name, cat, ts, dur, args)
        bind = _attr(events, "bind_id")
        if bind.count(None) != len(bind):
            self.bound += ((p, b, e.flow_in is True, e.flow_out is True)
                           for p, b, e in zip(pos_l, bind, events, strict=True) if _flow_id(b))

    def _add(self, keys: list, pos: np.ndarray, name: list, cat: list, ts: np.ndarray, dur: np.ndarray,
             args: list[_SliceArgs], threads: list | None = None) -> None:
        """Adds slices as columns: ``keys`` say which track they are laid out on, ``threads``
        (when not ``keys``) the (pid, tid) that wrote each, by which our own export's tables find
        its track."""
        layer = _attr(args, "layer")
        if set(map(type, layer)) == {str}:
            layer_id, why_layer = self._ids(layer), np.zeros(len(layer), np.int8)
        else:
            layer_id = np.array([self.strings[x] if type(x) is str else -1 for x in layer], np.int64)
            why_layer = np.array([0 if type(x) is str else _WHY.get(type(x), len(_WHY_TEXT) - 1) for x in layer],
                                 np.int8)
        op, why_op = _int_arg(_attr(args, "op"))
        layer_index, why_layer_index = _int_arg(_attr(args, "layer_index"))
        key = np.fromiter(map(self.keys.__getitem__, keys), np.int64, count=len(keys))
        thread = key if threads is None else np.fromiter(map(self.keys.__getitem__, threads), np.int64,
                                                         count=len(threads))
        columns = {"key": key, "thread": thread, "pos": pos,
                   "name": self._ids(name), "cat": self._ids(cat), "ts": ts, "dur": dur, "layer": layer_id,
                   "op": op, "layer_index": layer_index,
                   "flops": _arg_column(_attr(args, "flops"), "flops", self.fail),
                   "bytes": _arg_column(_attr(args, "bytes"), "bytes", self.fail),
                   "why_layer": why_layer, "why_op": why_op, "why_layer_index": why_layer_index}
        for c, values in columns.items():
            self.parts[c].append(values)
        if len(ts):
            self.end = max(self.end, float((ts + dur).max()))

    def _metadata(self, ev: _Metadata) -> None:
        scan, pid, tid, what, args = self.scan, ev.pid, ev.tid, ev.name, ev.args
        if type(pid) not in _KEY_TYPES or type(tid) not in _KEY_TYPES or not isinstance(args, dict):
            return  # metadata is only decoration: skip what cannot be used
        value = args.get("name") if what in ("process_name", "thread_name") else args.get("sort_index")
        if what == "process_name" and isinstance(value, str):
            scan.process_names[pid] = value
        elif what == "thread_name" and isinstance(value, str):
            scan.thread_names[(pid, tid)] = value
        elif what == "process_sort_index" and type(value) is int:
            scan.process_sort[pid] = value
        elif what == "thread_sort_index" and type(value) is int:
            scan.thread_sort[(pid, tid)] = value

    def _counters(self, events: list, pos: np.ndarray) -> None:
        """Counter samples by (pid, name); each key of args is a series."""
        fail, pos_l = self.fail, pos.tolist()
        ts = _numbers(_attr(events, "ts"), pos_l, "ts", fail, MAX_TIME_US, self.checked)
        pid, name, cid, args = _attr(events, "pid"), _attr(events, "name"), _attr(events, "id"), _attr(events, "args")
        if not self.checked:
            _check_types(pid, pos_l, _KEY_TYPES, "'pid' should be an integer or string but", fail)
            _check_types(name, pos_l, {str}, "'name' should be a string but", fail)
            _check_types(cid, pos_l, _KEY_TYPES | {type(None)}, "'id' should be an integer or string but", fail)
            _check_types(args, pos_l, {dict}, "counter 'args' should be an object of numbers but", fail)
        if set(map(type, cid)) != {type(None)}:
            name = [n if i is None else f"{n} {i}" for n, i in zip(name, cid, strict=True)]
        values = list(map(dict.get, args, name))
        if set(map(len, args)) == {1} and set(map(type, values)) <= {int, float}:
            # the common shape, ours included: {"ph": "C", "name": N, "args": {N: value}}
            v, t_for = _numbers(values, pos_l, "args", fail), ts
            keys = list(zip(pid, name, strict=True))
        else:
            keys, v_list, t_list = [], [], []
            for i, t, p, n, a in zip(pos_l, ts.tolist(), pid, name, args, strict=True):
                for k, x in a.items():
                    if type(x) not in _NUMBER:
                        fail(f"event {i}: counter value '{k}' should be a number but is {_json_type(x)}")
                    if not abs(x) <= MAX_VALUE:
                        fail(f"event {i}: counter value '{k}' is not a finite number of at most {MAX_VALUE:g}")
                    keys.append((p, n if k == n or not k else f"{n}.{k}"))
                    v_list.append(float(x))
                    t_list.append(t)
            v, t_for = np.array(v_list, np.float64), np.array(t_list, np.float64)
        self.counter_parts.append((np.array(list(map(self.series.__getitem__, keys)), np.int64), t_for, v))
        self.end = max(self.end, float(ts.max()))

    def _match_begin_end(self) -> None:
        """Pairs of B and E events per thread, innermost first; a B without E ends where the trace does."""
        if not self.begin_end:
            return
        pos_l, events = map(list, zip(*self.begin_end, strict=True))
        self.checked = False  # pieces of both kinds
        keys, _, _ = self._identity(events, pos_l)
        ts = _numbers(_attr(events, "ts"), pos_l, "ts", self.fail, MAX_TIME_US)
        self.end = max(self.end, float(ts.max()))
        threads: dict[tuple, list] = {}
        for j, (key, t) in enumerate(zip(keys, ts.tolist(), strict=True)):
            threads.setdefault(key, []).append((t, j))
        pairs = []
        for rows in threads.values():
            rows.sort(key=lambda r: r[0])  # stable: equal times keep file order
            stack: list[tuple[float, int]] = []
            for t, j in rows:
                if type(events[j]) in _BEGINS:
                    stack.append((t, j))
                elif stack:
                    t0, b = stack.pop()
                    pairs.append((b, j, t0, t))
                else:
                    self.scan.unmatched_end += 1
            pairs += [(b, None, t0, self.end) for t0, b in reversed(stack)]
            self.scan.unclosed += len(stack)
        begins = [events[b] for b, *_ in pairs]
        ends = [events[e] if e is not None else _NO_END for _, e, *_ in pairs]
        self._add([keys[b] for b, *_ in pairs], np.array([pos_l[b] for b, *_ in pairs], np.int64),
                  [b.name or e.name or "" for b, e in zip(begins, ends, strict=True)],
                  [b.cat or e.cat or "" for b, e in zip(begins, ends, strict=True)],
                  np.array([t0 for *_, t0, _ in pairs], np.float64),
                  np.array([max(t1 - t0, 0.0) for *_, t0, t1 in pairs], np.float64),
                  [msgspec.convert({**(b.args or _EMPTY), **(e.args or _EMPTY)}, _SliceArgs)
                   for b, e in zip(begins, ends, strict=True)])

    def _async_slices(self) -> list[tuple]:
        """The checked async events with what matches them: ``(j, key, name, cat, ts, group)``
        where ``j`` indexes :attr:`async_events`; an event without an id is skipped, as Perfetto
        does."""
        if not self.async_events:
            return []
        pos_l, events = map(list, zip(*self.async_events, strict=True))
        self.checked = False
        keys, names, cats = self._identity(events, pos_l)
        ts = _numbers(_attr(events, "ts"), pos_l, "ts", self.fail, MAX_TIME_US).tolist()
        out = []
        for j, (ev, key, name, cat) in enumerate(zip(events, keys, names, cats, strict=True)):
            ident = _async_id(ev, key[0])
            if ident is None:
                self.scan.skipped += 1
                continue
            out.append((j, key, name, cat, ts[j], (name, cat, ident)))
        if out:
            self.end = max(self.end, max(r[4] for r in out))
        return out

    def _match_async(self, checked: list[tuple]) -> None:
        """Slices of async events on a track per process and name, as Perfetto shows them: a b and
        the e of the same name, category and id (within its process for an ``id2.local``) make a
        slice, innermost first; an n is a slice of no length; a b never ended ends where the
        trace does."""
        if not checked:
            return
        events = [ev for _, ev in self.async_events]
        groups: dict[tuple, list] = {}
        for row in checked:
            groups.setdefault(row[5], []).append(row)
        pairs = []  # (begin row, end row or None, t0, t1)
        for rows in groups.values():
            rows.sort(key=lambda r: r[4])  # stable: equal times keep file order
            stack: list[tuple] = []
            for row in rows:
                phase = _PHASE_OF[type(events[row[0]])]
                if phase == "b":
                    stack.append(row)
                elif phase == "n":
                    pairs.append((row, row, row[4], row[4]))
                elif stack:
                    begin = stack.pop()
                    pairs.append((begin, row, begin[4], row[4]))
                else:
                    self.scan.unmatched_end += 1
            pairs += [(begin, None, begin[4], self.end) for begin in reversed(stack)]
            self.scan.unclosed += len(stack)
        pos_l = [pos for pos, _ in self.async_events]
        self._add([(b[1][0], (ASYNC, b[2])) for b, *_ in pairs], np.array([pos_l[b[0]] for b, *_ in pairs], np.int64),
                  [b[2] for b, *_ in pairs], [b[3] for b, *_ in pairs],
                  np.array([t0 for *_, t0, _ in pairs], np.float64),
                  np.array([max(t1 - t0, 0.0) for *_, t0, t1 in pairs], np.float64),
                  [msgspec.convert({**_args_of(events[b[0]]), **(_args_of(events[e[0]]) if e else _EMPTY)},
                                   _LooseSliceArgs) for b, e, *_ in pairs], [b[1] for b, *_ in pairs])

    def _flow_points(self) -> _FlowPoints | None:
        """The points of flows of both versions; a point of the first version that cannot be used
        (an id or thread of the wrong type, a time that is not a number) is skipped: flows only
        decorate the slices."""
        v2 = [(pos, fid, FLOW_STEP if flow_in and flow_out else FLOW_END if flow_in else FLOW_BEGIN)
              for pos, fid, flow_in, flow_out in self.bound if flow_in or flow_out]
        events = [ev for _, part in self.flow_parts for ev in part]
        pos_l = np.concatenate([pos for pos, _ in self.flow_parts]).tolist() if self.flow_parts else []
        ids, ts, pid, tid, name, cat = (_attr(events, a) for a in ("id", "ts", "pid", "tid", "name", "cat"))
        checked = set(map(type, events)) <= _STRICT_FLOWS  # the decoder checked all but their ids
        if not (set(map(type, ids)) <= _KEY_TYPES and (checked or set(map(type, ts)) <= set(_NUMBER)
                and set(map(type, pid)) | set(map(type, tid)) <= _KEY_TYPES and set(map(type, name)) | set(
                    map(type, cat)) <= {str})):
            keep = [k for k, row in enumerate(zip(ids, ts, pid, tid, name, cat, strict=True)) if type(row[0]) in
                    _KEY_TYPES and type(row[1]) in _NUMBER and type(row[2]) in _KEY_TYPES and type(row[3]) in
                    _KEY_TYPES and type(row[4]) is str and type(row[5]) is str]
            self.scan.skipped += len(events) - len(keep)
            events, pos_l, ids, ts, pid, tid, name, cat = ([c[k] for k in keep] for c in (
                events, pos_l, ids, ts, pid, tid, name, cat))
        t = np.array(ts, np.float64)
        inside = np.abs(t) <= MAX_TIME_US
        if not inside.all():  # a time out of range: the point is of no use
            self.scan.skipped += int(np.count_nonzero(~inside))
            keep = np.flatnonzero(inside).tolist()
            events, pos_l, ids, pid, tid, name, cat = ([c[k] for k in keep] for c in (
                events, pos_l, ids, pid, tid, name, cat))
            t = t[inside]
        if not v2 and not events:
            return None
        phase = np.array(list(map(_PHASE_OF.__getitem__, map(type, events))) or [""], "U1")[:len(events)]
        bp = np.fromiter(map(operator.eq, _attr(events, "bp"), repeat("e")), bool, count=len(events))
        # a flow of the first version is its category, name and id; of the second, its bind_id
        kinds = _Index({_BIND_ID: 0})
        kind = np.array([0] * len(v2) + list(map(kinds.__getitem__, zip(cat, name, strict=True))), np.int64)
        flow, flow_kind = _flow_numbers(kind, [fid for _, fid, _ in v2] + ids)
        kind_names = ["flow", *(n for _, n in list(kinds)[1:])]
        names = [kind_names[k] for k in flow_kind.tolist()]
        role = np.concatenate([np.array([r for *_, r in v2], np.int8), np.select(
            [phase == "s", phase == "t"], [FLOW_BEGIN, FLOW_STEP], FLOW_END).astype(np.int8)])
        slice_pos = np.array([p for p, *_ in v2], np.int64)
        return _FlowPoints(
            flow, names, np.concatenate([np.full(len(v2), math.nan), t]),
            np.concatenate([slice_pos, np.array(pos_l, np.int64)]), role,
            np.concatenate([slice_pos, np.full(len(events), -1, np.int64)]),
            np.concatenate([np.full(len(v2), -1, np.int64),
                            np.array(list(map(self.keys.__getitem__, zip(pid, tid, strict=True))), np.int64)]),
            np.concatenate([np.zeros(len(v2), bool), (phase == "f") & ~bp]))

    def finish(self) -> _Scan:
        checked_async = self._async_slices()
        self._match_begin_end()
        self._match_async(checked_async)
        self.scan.flows = self._flow_points()
        scan = self.scan
        scan.keys, scan.strings = list(self.keys), list(self.strings)
        for c, parts in self.parts.items():
            if parts:
                column = np.concatenate(parts)
                if c.startswith("why_"):
                    scan.why[c[4:]] = column
                else:
                    setattr(scan, c, column)
        if self.counter_parts:
            series, t, v = (np.concatenate(c) for c in zip(*self.counter_parts, strict=True))
            order = np.argsort(series, kind="stable")
            bounds = np.searchsorted(series[order], np.arange(len(self.series) + 1))
            for k, s in self.series.items():
                sel = order[bounds[s]:bounds[s + 1]]
                scan.counters[k] = (t[sel], v[sel])
        return scan


_EMPTY: dict = {}  # the args of an event without any; never modified


_BIND_ID = (None, None)  # the "category and name" of the second version's flows: no event's are None


def _flow_numbers(kind: np.ndarray, ids: list) -> tuple[np.ndarray, np.ndarray]:
    """Each point's flow, numbered from its kind (category and name) and id, and each flow's kind.
    Ids that are not all integers are compared as text (Perfetto reads a text id as a number)."""
    try:
        numbers = np.array(ids, np.int64) if set(map(type, ids)) <= {int} else None
    except OverflowError:
        numbers = None
    if numbers is None:
        numbers = np.unique(np.array(list(map(str, ids)) or [""]), return_inverse=True)[1].reshape(-1)[:len(ids)]
    id_rank, n_ids = np.unique(numbers, return_inverse=True)[1].reshape(-1), max(len(ids), 1)
    unique, flow = np.unique(kind * n_ids + id_rank, return_inverse=True)
    return flow.reshape(-1), unique // n_ids


def _flow_id(value: Any) -> bool:
    """Whether ``value`` can be the id of a flow (bools are not, though JSON numbers them)."""
    return type(value) is int or type(value) is str


def _async_id(ev: Any, pid: Any) -> tuple | None:
    """Which async slices of a name and category belong together: ``id``, or ``id2``'s ``global``
    or (within the process) ``local``; None when there is none."""
    if _flow_id(ev.id):
        return ("id", ev.id)
    id2 = ev.id2
    if isinstance(id2, dict):
        if _flow_id(id2.get("global")):
            return ("global", id2["global"])
        if _flow_id(id2.get("local")):
            return ("local", pid, id2["local"])
    return None


def _args_of(ev: Any) -> dict:
    return ev.args if isinstance(ev.args, dict) else _EMPTY
_NO_END = _LOOSE[4]()  # the E of a slice that never ends


def _layer_spans(layer: np.ndarray, start: np.ndarray, end: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.full(n, np.inf), np.full(n, -np.inf)
    np.minimum.at(lo, layer, start)
    np.maximum.at(hi, layer, end)
    empty = np.isinf(lo)
    lo[empty], hi[empty] = 0.0, 0.0
    return lo, hi


def _kind_of(text: str) -> str | None:
    m = _KINDS_RE.search(text)
    if not m:
        return None
    k = m.group(1).lower()
    if k.startswith("dma"):
        return "dma_read" if k.endswith("read") else "dma_write"
    return k


def _stem(label: str) -> str:
    name = Path(label).name
    for suffix in (".gz", ".json"):
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name


def _check_counters(n: int, fail: Fail) -> None:
    if n > MAX_COUNTERS:
        fail(f"{n:,} counter series; at most {MAX_COUNTERS:,} can be shown")


def _ordered_keys(scan: _Scan, key: np.ndarray) -> list[int]:
    """The (pid, tid) keys of the slices, as Perfetto orders them: processes by sort index, then
    first appearance; in each, its async tracks first, then its threads by sort index, then first
    appearance."""
    used = np.unique(key).tolist()
    pid_rank: dict = {}
    for k in used:
        pid_rank.setdefault(scan.keys[k][0], len(pid_rank))

    def rank(k: int) -> tuple:
        pid, tid = scan.keys[k]
        return (scan.process_sort.get(pid, 0), pid_rank[pid], type(tid) is not tuple,
                scan.thread_sort.get((pid, tid), 0), k)

    return sorted(used, key=rank)


def _depth_rows(wanted: np.ndarray) -> tuple[np.ndarray, int]:
    """How many rows each thread's slices get (``wanted``: its depth + 1), and the most any gets:
    :data:`MAX_DEPTH_ROWS`, or fewer where the rows of every thread would be more than
    :data:`MAX_TRACKS`; slices deeper than their thread's last row are drawn in it."""
    cap = MAX_DEPTH_ROWS
    while cap > 1 and int(np.minimum(wanted, cap).sum()) > MAX_TRACKS:
        cap -= 1
    return np.minimum(wanted, cap), cap


def _slice_tracks(scan: _Scan, used: list[int], thread: np.ndarray, depth: np.ndarray,
                  cat: np.ndarray) -> tuple[list[Track], list[int], np.ndarray, int]:
    """A track per thread (or async name) and depth, named ``"process / thread"`` and
    ``"process / thread ·1"``, ``·2``... below it; their depths, each thread's first track and
    the most rows a thread may have (:func:`_depth_rows`).
    A thread's kind is the engine its name (or else its slices' categories) names, else other."""
    wanted = np.zeros(len(used), np.int64)
    np.maximum.at(wanted, thread, depth + 1)
    rows, cap = _depth_rows(wanted)
    cat_id, cat_strings = _first_seen(cat)
    cat_names = [scan.strings[c] for c in cat_strings.tolist()]
    thread_cat_kinds: dict[int, set] = {}
    for pair in np.unique(thread * (len(cat_names) or 1) + cat_id).tolist():
        t, c = divmod(pair, len(cat_names) or 1)
        k = _kind_of(cat_names[c]) if cat_names else None
        if k:
            thread_cat_kinds.setdefault(t, set()).add(k)
    pids = list(dict.fromkeys(scan.keys[k][0] for k in used))
    core_of = {p: i for i, p in enumerate(pids)}
    tracks: list[Track] = []
    depths: list[int] = []
    for t, k in enumerate(used):
        pid, tid = scan.keys[k]
        pname = scan.process_names.get(pid, f"Process {pid}")
        tname = tid[1] if type(tid) is tuple else scan.thread_names.get((pid, tid), f"Thread {tid}")
        kind = _kind_of(tname)
        if kind is None:
            cat_kinds = thread_cat_kinds.get(t, set())
            kind = next(iter(cat_kinds)) if len(cat_kinds) == 1 else "other"
        for d in range(int(rows[t])):
            tracks.append(Track(f"{pname} / {tname}" + (f" ·{d}" if d else ""), kind, core_of[pid]))
            depths.append(d)
    first = (np.cumsum(rows) - rows).astype(np.int64)
    return tracks, depths, first, cap


def _bind_flows(points: _FlowPoints, slice_pos: np.ndarray, order: np.ndarray, thread: np.ndarray,
                thread_of_key: np.ndarray, events: Mapping[str, np.ndarray], first_track: np.ndarray,
                rows: np.ndarray, origin: float) -> tuple[dict, int]:
    """The flows between the events (indices into ``events``: the slices at ``slice_pos`` in the
    file, of the threads ``thread``, sorted by ``order``), and how many points bound to none. A
    point of the second version is its slice; one of the first is the deepest slice of its thread
    open at its time, or the next slice to begin on it (an f without ``"bp": "e"``), as Perfetto
    binds them. Consecutive points of a
    flow make an arrow, unless the first ends the flow or the second begins it again."""
    n = len(order)
    event_of = np.empty(n, np.int64)
    event_of[order] = np.arange(n)  # a slice's index among the sorted events
    start, end = events["start_ns"], events["start_ns"] + events["dur_ns"]
    t_ns = (points.ts - origin) * 1e3
    event = np.full(len(points.flow), -1, np.int64)
    # the second version's points: their own slices
    by_pos = np.argsort(slice_pos, kind="stable")
    direct = np.flatnonzero(points.slice_pos >= 0)
    at = np.clip(np.searchsorted(slice_pos[by_pos], points.slice_pos[direct]), 0, max(n - 1, 0))
    found = (slice_pos[by_pos][at] == points.slice_pos[direct]) if n else np.zeros(len(direct), bool)
    event[direct[found]] = event_of[by_pos[at[found]]]
    # the first version's: a thread (of these slices) and a time
    th = np.where(points.thread >= 0, thread_of_key[np.clip(points.thread, 0, None)], -1)
    on = np.flatnonzero(th >= 0)
    if len(on):
        index = RowIndex(events["track"].astype(np.int64), start, end, t_ns[on])
        deepest_first = np.full(len(on), -1, np.int64)
        for d in range(int(rows.max()) - 1, -1, -1):
            ask = np.flatnonzero((deepest_first < 0) & (rows[th[on]] > d) & ~points.next_slice[on])
            if len(ask):
                deepest_first[ask] = index.holding(first_track[th[on][ask]] + d, t_ns[on][ask])
        event[on] = deepest_first
        nxt = np.flatnonzero(points.next_slice[on])
        if len(nxt):
            stacked = stack_order(thread, events["start_ns"][event_of], end[event_of])
            by_thread = RowIndex(thread[stacked], events["start_ns"][event_of][stacked], end[event_of][stacked],
                                 t_ns[on][nxt])
            k = by_thread.next_from(th[on][nxt], t_ns[on][nxt])
            event[on[nxt]] = np.where(k >= 0, event_of[stacked[np.clip(k, 0, None)]], -1)
    # a point of the second version is where its slice starts
    t_ns = np.where(points.slice_pos >= 0, np.where(event >= 0, start[np.clip(event, 0, None)], 0.0), t_ns)
    o = np.lexsort((points.pos, t_ns, points.flow))
    f, e, role = points.flow[o], event[o], points.role[o]
    link = (f[1:] == f[:-1]) & (role[:-1] != FLOW_END) & (role[1:] != FLOW_BEGIN) & (e[:-1] >= 0) & (e[1:] >= 0) \
        & (e[:-1] != e[1:])
    table = list(dict.fromkeys(points.names))
    name_of_flow = np.array([table.index(n) for n in points.names] if len(table) < 64 else
                            list(map({n: i for i, n in enumerate(table)}.__getitem__, points.names)), np.int64)
    name_id, names = _first_seen(name_of_flow[f[:-1][link]])
    return ({"from": e[:-1][link].tolist(), "to": e[1:][link].tolist(),
             "names": [table[i] for i in names.tolist()], "name": name_id.tolist()},
            int(np.count_nonzero(event < 0)))


def _foreign_trace(scan: _Scan, idx: np.ndarray, counter_keys: list[tuple], label: str, fail: Fail) -> Trace:
    """One generic Trace of the slices ``idx`` and the given counter series of a file of another
    tool: its threads' nested slices stacked by depth, a process's async slices of one name on a
    track of their own, its flows bound to the slices they leave and enter."""
    _check_counters(len(counter_keys), fail)
    key = scan.key[idx]
    ts_raw, dur = scan.ts[idx], scan.dur[idx]
    c_first = [float(scan.counters[k][0].min()) for k in counter_keys if len(scan.counters[k][0])]
    origin = min(float(ts_raw.min()) if len(ts_raw) else math.inf, min(c_first, default=math.inf))
    origin = 0.0 if not math.isfinite(origin) else origin

    used = _ordered_keys(scan, key)
    if len(used) > MAX_TRACKS:
        fail(f"{len(used):,} threads have slices; at most {MAX_TRACKS:,} can be shown")
    thread_of_key = np.full(len(scan.keys) or 1, -1, np.int64)
    thread_of_key[used] = np.arange(len(used))
    thread = thread_of_key[key]
    start_ns = (ts_raw - origin) * 1e3
    dur_ns = dur * 1e3
    depth = stack_depths(thread, start_ns, start_ns + dur_ns)
    tracks, track_depth, first_track, cap = _slice_tracks(scan, used, thread, depth, scan.cat[idx])
    rows = np.diff(np.append(first_track, len(tracks)))
    track = first_track[thread] + np.minimum(depth, rows[thread] - 1)
    pids = list(dict.fromkeys(scan.keys[k][0] for k in used))

    op, op_strings = _first_seen(scan.name[idx])
    op = op.astype(np.int32)
    layer_string = scan.layer[idx]
    layer, layer_strings = _first_seen(np.where(layer_string >= 0, layer_string, scan.cat[idx]))  # else its category
    layer = layer.astype(np.int32)
    lstart, lend = _layer_spans(layer, start_ns, start_ns + dur_ns, len(layer_strings))
    first = np.unique(op, return_index=True)[1]
    op_layer = layer[first] if len(first) else np.zeros(0, np.int32)
    order = np.lexsort((start_ns, track))
    events = {"track": track[order], "start_ns": start_ns[order], "dur_ns": dur_ns[order], "op": op[order],
              "layer": layer[order], "flops": scan.flops[idx][order], "bytes": scan.bytes[idx][order]}
    flows = _bind_flows(scan.flows, scan.pos[idx], order, thread, thread_of_key, events, first_track, rows, origin) \
        if scan.flows is not None else None

    counters: dict[str, Counter] = {}
    clash = {n for n, times in collections.Counter(k[1] for k in counter_keys).items() if times > 1}
    for pid, cname in counter_keys:
        t_us, value = scan.counters[(pid, cname)]
        name = f"{scan.process_names.get(pid, f'Process {pid}')} / {cname}" if cname in clash else cname
        while name in counters:
            name += "'"
        t = (t_us - origin) * 1e3
        o = np.argsort(t, kind="stable")
        counters[name] = Counter(name, "", t[o], value[o])

    # times start at the earliest timestamp (slices and counters): the trace lasts until its last one
    duration = float((start_ns + dur_ns).max()) if len(start_ns) else 0.0
    for pid, cname in counter_keys:
        t_us = scan.counters[(pid, cname)][0]
        if len(t_us):
            duration = max(duration, float((t_us.max() - origin) * 1e3))
    meta = {
        "model": name_text(_stem(label)), "chip": "", "chip_name": "Chrome trace", "instance": "", "mode": "imported",
        "batch": 1, "seq": 1, "dtype": "", "source": "chrome-json", "source_file": name_text(Path(label).name),
        "cores_per_copy": 1, "copies": 1, "lnc": 1, "cores_active": 1,
        "total_ns": duration, "time_origin_us": origin,
        "processes": [scan.process_names.get(p, f"Process {p}") for p in pids],
        "units": {"time": "ns", "bytes": "B", "flops": "FLOP"}, "unclosed_slices": scan.unclosed,
        "unmatched_end_events": scan.unmatched_end, "skipped_events": scan.skipped,
        # the slices' layout (sim.io.slices): each track's depth under its thread's first, and how
        # many slices were deeper than their thread's rows (drawn in its last row)
        "track_depth": track_depth, "depth_rows": cap,
        "slices_beyond_depth": int(np.count_nonzero(depth >= rows[thread])) if len(depth) else 0,
    }
    if flows is not None:
        meta["flows"], meta["unbound_flow_points"] = flows
    trace = Trace(meta=meta, tracks=tuple(tracks), events=events, op_names=tuple(scan.strings[i] for i in op_strings),
                  op_layer=op_layer, layer_names=tuple(scan.strings[i] for i in layer_strings),
                  layer_kinds=("other",) * len(layer_strings),
                  layer_start_ns=lstart, layer_end_ns=lend, counters=counters)
    _validate_trace(trace, fail)
    return trace


# our own exports -----------------------------------------------------------------------------


def _own_runs(other: dict, fail: Fail) -> list[dict] | None:
    """The run tables of a file we wrote, validated; None for a file of another tool."""
    block = other.get("neuronviz")
    if not isinstance(block, dict) or block.get("format") != FORMAT_NAME:
        return None
    version = str(block.get("version", ""))
    major = version.split(".")[0]
    if not major.isdigit():
        fail(f"unreadable neuronviz format version '{version}'")
    ours = int(METADATA_VERSION.split(".")[0])
    if int(major) > ours:
        fail(f"written by a newer neuronviz (format {version}, this one reads {ours}.x): upgrade neuronviz")
    runs = block.get("runs")
    if not isinstance(runs, list) or not runs:
        fail("the neuronviz metadata holds no runs")
    if len(runs) > MAX_RUNS:
        fail(f"the neuronviz metadata holds {len(runs):,} runs (at most {MAX_RUNS:,})")

    def bad(what: str) -> NoReturn:
        fail(f"the neuronviz metadata is malformed ({what})")

    def strings(v: Any) -> bool:
        return isinstance(v, list) and all(type(s) is str for s in v)

    def ints(v: Any) -> bool:
        return isinstance(v, list) and all(type(s) is int for s in v)

    def numbers(v: Any) -> bool:
        return isinstance(v, list) and all(type(s) in _NUMBER for s in v)

    seen_keys, seen_pids = set(), set()
    for r, run in enumerate(runs):
        if not isinstance(run, dict) or not isinstance(run.get("meta"), dict):
            bad(f"run {r} has no meta")
        tracks = run.get("tracks")
        if isinstance(tracks, list) and len(tracks) > MAX_TRACKS:
            fail(f"run {r} has {len(tracks):,} tracks (at most {MAX_TRACKS:,})")
        if not isinstance(tracks, list) or not all(
                isinstance(t, list) and len(t) == 5 and type(t[0]) is str and type(t[1]) is str
                and all(type(x) is int for x in t[2:]) for t in tracks):
            bad(f"the track table of run {r}")
        if not ints(run.get("pids")) or not run["pids"]:
            bad(f"the pids of run {r}")
        for name in ("op_names", "layer_names", "layer_kinds"):
            if not strings(run.get(name)):
                bad(f"'{name}' of run {r}")
        if not ints(run.get("op_layer")) or len(run["op_layer"]) != len(run["op_names"]):
            bad(f"'op_layer' of run {r}")
        n_layers = len(run["layer_names"])
        if any(not -1 <= li < n_layers for li in run["op_layer"]) or len(run["layer_kinds"]) != n_layers:
            bad(f"the layer table of run {r}")
        for name in ("layer_start_ns", "layer_end_ns"):
            if not numbers(run.get(name)) or len(run[name]) != n_layers:
                bad(f"'{name}' of run {r}")
        counters = run.get("counters")
        if not isinstance(counters, list) or not all(
                isinstance(c, list) and len(c) == 2 and type(c[0]) is str and type(c[1]) is str for c in counters):
            bad(f"the counter table of run {r}")
        keys = {(t[3], t[4]) for t in tracks}
        if len(keys) != len(tracks) or keys & seen_keys or set(run["pids"]) & seen_pids:
            bad(f"run {r} reuses a pid or tid")
        if any(t[3] not in run["pids"] for t in tracks):
            bad(f"a track of run {r} is in another run's process")
        seen_keys |= keys
        seen_pids |= set(run["pids"])
    return runs


def _own_trace(scan: _Scan, idx: np.ndarray, local_track: np.ndarray, run: dict, r: int,
               counter_keys: list[tuple], fail: Fail) -> Trace:
    """One run of our own export, its events ``idx`` mapped back through the run's tables."""
    pos = scan.pos[idx]

    def usable(arg: str, what: str) -> None:
        why = scan.why[arg][idx] if arg in scan.why else np.zeros(0, np.int8)
        if why.any():
            i = int(np.argmax(why > 0))
            fail(f"event {pos[i]}: '{arg}' in args should be {what} but is {_WHY_TEXT[why[i]]}")

    op_names, op_layer, layer_names = run["op_names"], run["op_layer"], run["layer_names"]
    if run.get("indexed") is True:
        usable("op", "an integer")
        usable("layer_index", "an integer")
        op, layer = scan.op[idx], scan.layer_index[idx]
    else:
        usable("layer", "a string")
        layer_first, op_first = _lookup_tables(op_names, op_layer, layer_names)
        strings, name_id, layer_id = scan.strings, scan.name[idx], scan.layer[idx]
        # each distinct layer, and each distinct (op, layer) pair, looked up once
        lids, inverse = np.unique(layer_id, return_inverse=True)
        layer = np.array([layer_first.get(strings[s], -1) for s in lids.tolist()], np.int64)[inverse.reshape(-1)]
        pairs, inverse = np.unique(name_id * max(len(strings), 1) + layer_id, return_inverse=True)
        op = np.array([op_first.get((strings[p // max(len(strings), 1)], strings[p % max(len(strings), 1)]), -1)
                       for p in pairs.tolist()], np.int64)[inverse.reshape(-1)]
        if (layer < 0).any():
            i = int(np.argmax(layer < 0))
            fail(f"event {pos[i]}: layer '{strings[layer_id[i]]}' is not in the layer table of run {r}")
        if (op < 0).any():
            i = int(np.argmax(op < 0))
            fail(f"event {pos[i]}: op '{strings[name_id[i]]}' of layer '{strings[layer_id[i]]}' is not in the op "
                 f"table of run {r}")
    events = {"track": local_track, "start_ns": scan.ts[idx] * 1e3, "dur_ns": scan.dur[idx] * 1e3,
              "op": op, "layer": layer, "flops": scan.flops[idx], "bytes": scan.bytes[idx]}
    for k, least in (("op", 0), ("layer", -1)):  # layer -1: in none (the host's work beside the engines')
        if len(events[k]) and (events[k].min() < least or events[k].max() > np.iinfo(np.int32).max):
            fail(f"an event of run {r} refers to an {k} that does not exist")

    units = {name: unit for name, unit in run["counters"]}
    by_name = {key[1]: key for key in counter_keys}
    _check_counters(len(units.keys() | by_name.keys()), fail)
    counters: dict[str, Counter] = {}
    for name in [*units, *(n for n in by_name if n not in units)]:
        if name in by_name:
            t_us, value = scan.counters[by_name[name]]
            t = t_us * 1e3
            o = np.argsort(t, kind="stable")
            counters[name] = Counter(name, units.get(name, ""), t[o], value[o])
        else:
            counters[name] = Counter(name, units[name], np.zeros(0), np.zeros(0))
    trace = Trace(
        meta=run["meta"], tracks=tuple(Track(t[0], t[1], t[2]) for t in run["tracks"]), events=events,
        op_names=tuple(op_names), op_layer=np.array(op_layer, np.int32), layer_names=tuple(layer_names),
        layer_kinds=tuple(run["layer_kinds"]), layer_start_ns=np.array(run["layer_start_ns"], np.float64),
        layer_end_ns=np.array(run["layer_end_ns"], np.float64), counters=counters)
    _validate_trace(trace, fail)
    return trace


def _build(scan: _Scan, other: dict, label: str, fail: Fail) -> list[Trace]:
    runs = _own_runs(other, fail)
    n = len(scan.pos)
    traces: list[Trace] = []
    foreign = np.arange(n)
    counter_keys = list(scan.counters)
    if runs is not None:
        owner: dict[tuple, tuple[int, int]] = {}
        pid_run: dict = {}
        for r, run in enumerate(runs):
            for i, t in enumerate(run["tracks"]):
                owner[(t[3], t[4])] = (r, i)
            for p in run["pids"]:
                pid_run[p] = r
        # a slice is found by the thread that wrote it: an async one too, laid out on a track of its own
        run_of_key = np.array([owner.get(k, (-1, -1))[0] for k in scan.keys] or [-1], np.int64)
        track_of_key = np.array([owner.get(k, (-1, -1))[1] for k in scan.keys] or [-1], np.int64)
        ev_run = run_of_key[scan.thread] if n else np.zeros(0, np.int64)
        for r, run in enumerate(runs):
            idx = np.flatnonzero(ev_run == r)
            if np.any(np.diff(scan.pos[idx]) < 0):  # async slices come after the rest: back in file order
                idx = idx[np.argsort(scan.pos[idx], kind="stable")]
            keys = [k for k in counter_keys if pid_run.get(k[0]) == r]
            traces.append(_own_trace(scan, idx, track_of_key[scan.thread[idx]], run, r, keys, fail))
        foreign = np.flatnonzero(ev_run < 0)
        counter_keys = [k for k in counter_keys if k[0] not in pid_run]
    if len(foreign) or counter_keys:
        traces.append(_foreign_trace(scan, foreign, counter_keys, label, fail))
    if not traces:
        fail("holds no trace events (no complete, begin/end, instant or counter events)")
    return traces


def load_chrome(path: str | os.PathLike, progress: Callable[[float], None] | None = None) -> list[Trace]:
    """The runs of a Chrome Trace Event JSON file (plain or gzip): one Trace per run of our own
    exports, one generic Trace for a file of another tool. Any problem raises a one-line
    :class:`TraceFileError` naming the file. ``progress`` is called with the share of the file read
    after each piece; an exception it raises (a user's cancel) stops the load and propagates."""
    label = str(path)
    fail = Fail(label)
    try:
        with _gc_paused():
            scanner, other, first = _Scanner(fail), {}, 0
            with _text_of(path, fail) as text:
                for events, checked in _event_pieces(text, fail, other):
                    scanner.add(events, first, checked)
                    first += len(events)
                    if progress is not None:
                        progress(text.done())
            del events
            return _build(scanner.finish(), other, label, fail)
    except RecursionError:
        fail("not a Chrome trace (nested too deeply)")
    except MemoryError:
        fail("too large to load into memory")
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        # a safety net: every problem found above has its own message; this keeps the promise of
        # one-line TraceFileErrors for shapes of input nobody has thought of
        fail(f"not a readable Chrome trace ({type(exc).__name__}: {exc})")

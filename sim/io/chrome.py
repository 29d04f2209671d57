"""Chrome Trace Event JSON: the interchange format Perfetto and ``chrome://tracing`` read.

Export writes one process (``pid``) per run and NeuronCore and one thread (``tid``) per track,
named with ``process_name`` / ``thread_name`` metadata events; every Trace event becomes a complete
event (``"ph": "X"``, times in microseconds) whose args hold its layer, FLOPs and bytes, and every
counter sample a counter event (``"ph": "C"``). The tables a Chrome trace has no place for (meta,
tracks, op and layer tables, counter units) go to ``otherData["neuronviz"]``, so our own files load
back into the same runs, one Trace per run; times come back within float rounding of microseconds.

Import also reads files of other tools (PyTorch profiler / Kineto, Neuron profiler JSON exports):
plain or gzip JSON, an object with ``traceEvents`` or a bare array (an array without its closing
bracket is accepted, as the format allows). Phases X, B/E, i/I, C and M are understood; the rest
(flows, async, samples, object snapshots) are skipped and counted in the meta. Decisions:

* every (pid, tid) with slices becomes a generic :class:`Track` named ``"process / thread"``; its
  kind is the engine its thread name (or else its events' categories) names, otherwise ``other``;
  ``core`` is the index of the process. Overlapping (nested) slices are kept as they are.
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

Both directions are vectorised with NumPy where they can be, and pause the cyclic garbage collector
while millions of small dicts are made; orjson serialises and parses the JSON text.
"""

from __future__ import annotations

import gc
import gzip
import math
import os
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import orjson

from sim import __version__
from sim.errors import TraceFileError
from sim.io.atomic import atomic_file
from sim.io.inputs import open_regular
from sim.io.native import _validate_trace, read_problem
from sim.trace import EVENT_COLUMNS, TRACE_FORMAT_VERSION, Counter, Trace, Track

FORMAT_NAME = "neuronviz-chrome"
MAX_FILE_BYTES = 4 << 30  # the file as stored (compressed or not)
MAX_JSON_BYTES = 4 << 30  # the JSON text after decompression: a zip-bomb guard
# trace JSON compresses 10-20x (names and keys repeat); beyond this ratio a gzip file is a bomb,
# checked once the text passes MIN_RATIO_CHECK_BYTES (tiny files compress better)
MAX_GZIP_RATIO = 100
MIN_RATIO_CHECK_BYTES = 64 << 20
GZIP_MAGIC = b"\x1f\x8b"
MAX_TIME_US = 1e15  # a timestamp or duration beyond 30 years is damage, not a trace
MAX_VALUE = 1e30  # any other number: far beyond a byte count or rate, far below overflow
CHUNK_EVENTS = 1 << 16  # events serialised at a time by save_chrome
MAX_TRACKS = int(np.iinfo(EVENT_COLUMNS["track"]).max)  # the event table's track column is int16
_READ_CHUNK = 1 << 24
_KINDS_RE = re.compile(
    r"(?<![a-z])(tensor|vector|scalar|gpsimd|dma[ _-]?read|dma[ _-]?write|collective)(?![a-z])", re.IGNORECASE)
_NUMBER = (int, float)


# ----------------------------------------------------------------------------------------------
# export


def _json_safe(value: Any) -> Any:
    """``value`` as plain JSON types: NumPy scalars unwrapped, non-finite floats as null."""
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_json_safe(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, str)):
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
    for name, col, n in (("track", ev["track"], len(trace.tracks)), ("op", ev["op"], len(trace.op_names)),
                         ("layer", ev["layer"], len(trace.layer_names)),
                         ("layer", trace.op_layer, len(trace.layer_names))):
        if len(col) and (col.min() < 0 or col.max() >= n):
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
    return {"neuronviz": {"format": FORMAT_NAME, "version": TRACE_FORMAT_VERSION,
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
    for trace, lay in zip(traces, layouts, strict=True):
        ev = trace.events
        track_pid = np.array([lay.pids[t.core] for t in trace.tracks] or [0], np.int64)
        track_tid = np.array(lay.tids or [0], np.int64)
        track_cat = _objects([t.kind for t in trace.tracks] or [""])
        op_names, layer_names = _objects(trace.op_names), _objects(trace.layer_names)
        for lo in range(0, trace.n_events, CHUNK_EVENTS):
            sl = slice(lo, lo + CHUNK_EVENTS)
            track, op, layer = ev["track"][sl], ev["op"][sl], ev["layer"][sl]
            chunk = [
                {"ph": "X", "name": n, "cat": c, "ts": s, "dur": d, "pid": p, "tid": t,
                 "args": {"layer": la, "flops": f, "bytes": b}}
                for n, c, s, d, p, t, la, f, b in zip(
                    op_names[op].tolist(), track_cat[track].tolist(), (ev["start_ns"][sl] / 1e3).tolist(),
                    (ev["dur_ns"][sl] / 1e3).tolist(), track_pid[track].tolist(), track_tid[track].tolist(),
                    layer_names[layer].tolist(), ev["flops"][sl].tolist(), ev["bytes"][sl].tolist(), strict=True)
            ]
            if lay.indexed:
                for e, o, li in zip(chunk, op.tolist(), layer.tolist(), strict=True):
                    e["args"]["op"], e["args"]["layer_index"] = o, li
            yield chunk
        pid = next(iter(lay.pids.values()))
        for c in trace.counters.values():
            name = c.name
            ts, values = (c.t_ns / 1e3).tolist(), c.value.tolist()
            for lo in range(0, len(ts), CHUNK_EVENTS):
                yield [{"ph": "C", "name": name, "ts": t, "pid": pid, "args": {name: v}}
                       for t, v in zip(ts[lo:lo + CHUNK_EVENTS], values[lo:lo + CHUNK_EVENTS], strict=True)]


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


class _Fail:
    """Raises the one-line error of one file."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __call__(self, problem: str) -> NoReturn:
        text = f"{self.label}: {problem}".replace("\r", " ").replace("\n", " ")
        raise TraceFileError(text[:500])


def _gunzip(f, fail: _Fail) -> bytearray:
    """The decompressed text, refused once it outgrows :data:`MAX_JSON_BYTES` or
    :data:`MAX_GZIP_RATIO` times the compressed file (a bomb stops there, before memory is spent)."""
    size = os.fstat(f.fileno()).st_size
    limit = min(MAX_JSON_BYTES, max(MIN_RATIO_CHECK_BYTES, MAX_GZIP_RATIO * size))
    out = bytearray()
    try:
        with gzip.GzipFile(fileobj=f, mode="rb") as gz:
            while chunk := gz.read(min(_READ_CHUNK, limit + 1 - len(out))):
                out += chunk
                if len(out) > limit:
                    fail(f"decompresses to more than {limit:,} bytes, {limit / max(size, 1):,.0f} times its size "
                         "(refused as a possible zip bomb)")
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        fail(f"damaged or truncated gzip data ({exc})")
    return out


def _read(path: str | os.PathLike, fail: _Fail) -> bytes | bytearray:
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_FILE_BYTES:
                fail(f"the file is implausibly large ({size:,} bytes, the limit is {MAX_FILE_BYTES:,})")
            if f.read(2) == GZIP_MAGIC:
                f.seek(0)
                return _gunzip(f, fail)
            f.seek(0)
            data = f.read()
            if len(data) > MAX_FILE_BYTES:  # grew while being read
                fail(f"the file is implausibly large (the limit is {MAX_FILE_BYTES:,} bytes)")
            return data
    except OSError as exc:
        fail(read_problem(exc))


def _parse(data: bytes | bytearray, fail: _Fail) -> Any:
    if not data or data.isspace():
        fail("the file is empty")
    if data[:3] == b"\xef\xbb\xbf":
        data = data[3:]
    try:
        return orjson.loads(data)
    except RecursionError:
        fail("not valid JSON (nested too deeply)")
    except MemoryError:
        fail("too large to load into memory")
    except ValueError as exc:  # json.JSONDecodeError, orjson.JSONDecodeError, UnicodeDecodeError
        error = exc
    # the JSON Array Format allows the closing bracket to be missing (a trace cut off while written)
    tail = data.rstrip()
    if data[:64].lstrip()[:1] == b"[" and tail.endswith((b"}", b"},")):
        try:
            return orjson.loads(tail.rstrip(b",") + b"]")
        except (ValueError, RecursionError):
            pass
    fail(f"not valid JSON ({str(error).splitlines()[0] if str(error) else type(error).__name__})")


def _events_of(doc: Any, fail: _Fail) -> tuple[list, dict]:
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


def _check_types(values: list, pos: Sequence[int], allowed: set, what: str, fail: _Fail) -> None:
    if set(map(type, values)) <= allowed:
        return
    i = next(k for k, v in enumerate(values) if type(v) not in allowed)
    found = "missing" if values[i] is None and type(None) not in allowed else _json_type(values[i])
    fail(f"event {pos[i]}: {what} is {found}")


def _numbers(values: list, pos: Sequence[int], what: str, fail: _Fail, limit: float = MAX_VALUE) -> np.ndarray:
    """``values`` as float64 after checking each is a finite JSON number of at most ``limit``."""
    _check_types(values, pos, {int, float}, f"'{what}' should be a number but", fail)
    try:
        a = np.array(values, dtype=np.float64)
    except (OverflowError, ValueError, TypeError):
        fail(f"'{what}' holds a number out of range")
    bad = ~(np.abs(a) <= limit)  # NaN and infinities too
    if bad.any():
        fail(f"event {pos[int(np.argmax(bad))]}: '{what}' is not a finite number of at most {limit:g}")
    return a


_KEY_TYPES = {int, str}
_EMPTY: dict = {}  # the args of an event without any; never modified
_PHASES = {"X": 1, "i": 2, "I": 2, "B": 3, "E": 3, "C": 4, "M": 5}
_SLICE, _INSTANT, _BEGIN_END, _COUNTER, _METADATA = 1, 2, 3, 4, 5


class _Index(dict):
    """Numbers distinct keys in order of first appearance: ``list(map(index.__getitem__, keys))``."""

    def __missing__(self, key: Any) -> int:
        value = self[key] = len(self)
        return value


def _field(evs: list[dict], key: str, default: Any = None) -> list:
    """``ev.get(key, default)`` of every event, without a Python-level loop."""
    return list(map(dict.get, evs, repeat(key), repeat(default)))


def _pick(events: list, pos: np.ndarray) -> list:
    return list(map(events.__getitem__, pos.tolist()))


@dataclass
class _Scan:
    """Everything one pass over the events finds, with types checked."""

    keys: list[tuple] = field(default_factory=list)  # unique (pid, tid) of slices, first seen first
    key: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # per slice: index into keys
    pos: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # per slice: index in the file
    name: np.ndarray = field(default_factory=lambda: np.zeros(0, object))
    cat: np.ndarray = field(default_factory=lambda: np.zeros(0, object))
    args: np.ndarray = field(default_factory=lambda: np.zeros(0, object))  # dicts ({} when none)
    ts: np.ndarray = field(default_factory=lambda: np.zeros(0))  # microseconds as in the file
    dur: np.ndarray = field(default_factory=lambda: np.zeros(0))
    counters: dict[tuple, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # (pid, name) -> (ts, value)
    process_names: dict = field(default_factory=dict)
    thread_names: dict = field(default_factory=dict)
    process_sort: dict = field(default_factory=dict)
    thread_sort: dict = field(default_factory=dict)
    skipped: int = 0
    unclosed: int = 0
    unmatched_end: int = 0


def _scan_slices(evs: list[dict], pos: np.ndarray, fail: _Fail, durations: bool) -> tuple:
    """Checked columns of complete, instant or begin/end events."""
    pos_l = pos.tolist()
    pid, tid = _field(evs, "pid", 0), _field(evs, "tid", 0)
    name, cat, args = _field(evs, "name", ""), _field(evs, "cat", ""), _field(evs, "args", _EMPTY)
    _check_types(pid, pos_l, _KEY_TYPES, "'pid' should be an integer or string but", fail)
    _check_types(tid, pos_l, _KEY_TYPES, "'tid' should be an integer or string but", fail)
    _check_types(name, pos_l, {str}, "'name' should be a string but", fail)
    _check_types(cat, pos_l, {str}, "'cat' should be a string but", fail)
    _check_types(args, pos_l, {dict, type(None)}, "'args' should be an object but", fail)
    if None in args:  # "args": null
        args = [_EMPTY if a is None else a for a in args]
    ts = _numbers(_field(evs, "ts"), pos_l, "ts", fail, MAX_TIME_US)
    if durations:
        dur = _numbers(_field(evs, "dur", 0), pos_l, "dur", fail, MAX_TIME_US)
        if np.any(dur < 0):
            fail(f"event {pos_l[int(np.argmax(dur < 0))]}: negative 'dur'")
    else:
        dur = np.zeros(len(evs))
    return list(zip(pid, tid, strict=True)), name, cat, args, ts, dur


def _match_begin_end(evs: list[dict], pos: np.ndarray, keys: list[tuple], ts: np.ndarray,
                     end_of_trace: float, scan: _Scan) -> tuple:
    """Pairs of B and E events per thread, innermost first; a B without E ends at ``end_of_trace``."""
    threads: dict[tuple, list] = {}
    for j, (key, t) in enumerate(zip(keys, ts.tolist(), strict=True)):
        threads.setdefault(key, []).append((t, j))
    out_keys, out_pos, name, cat, args, start, dur = [], [], [], [], [], [], []

    def emit(key, b, e, t0, t1):
        eb = evs[b]
        ee = evs[e] if e is not None else _EMPTY
        out_keys.append(key)
        out_pos.append(int(pos[b]))
        name.append(eb.get("name") or ee.get("name") or "")
        cat.append(eb.get("cat") or ee.get("cat") or "")
        args.append({**(eb.get("args") or _EMPTY), **(ee.get("args") or _EMPTY)})
        start.append(t0)
        dur.append(max(t1 - t0, 0.0))

    for key, rows in threads.items():
        rows.sort(key=lambda r: r[0])  # stable: equal times keep file order
        stack: list[tuple[float, int]] = []
        for t, j in rows:
            if evs[j]["ph"] == "B":
                stack.append((t, j))
            elif stack:
                t0, b = stack.pop()
                emit(key, b, j, t0, t)
            else:
                scan.unmatched_end += 1
        for t0, b in reversed(stack):
            emit(key, b, None, t0, end_of_trace)
            scan.unclosed += 1
    return out_keys, out_pos, name, cat, args, start, dur


def _scan_metadata(evs: list[dict], scan: _Scan) -> None:
    for ev in evs:
        pid, tid, what, args = ev.get("pid", 0), ev.get("tid", 0), ev.get("name"), ev.get("args")
        if type(pid) not in _KEY_TYPES or type(tid) not in _KEY_TYPES or not isinstance(args, dict):
            continue  # metadata is only decoration: skip what cannot be used
        value = args.get("name") if what in ("process_name", "thread_name") else args.get("sort_index")
        if what == "process_name" and isinstance(value, str):
            scan.process_names[pid] = value
        elif what == "thread_name" and isinstance(value, str):
            scan.thread_names[(pid, tid)] = value
        elif what == "process_sort_index" and type(value) is int:
            scan.process_sort[pid] = value
        elif what == "thread_sort_index" and type(value) is int:
            scan.thread_sort[(pid, tid)] = value


def _scan_counters(evs: list[dict], pos: np.ndarray, fail: _Fail, scan: _Scan) -> np.ndarray:
    """Counter series by (pid, name); each key of args is a series. Returns the timestamps."""
    pos_l = pos.tolist()
    ts = _numbers(_field(evs, "ts"), pos_l, "ts", fail, MAX_TIME_US)
    pid, name, cid, args = _field(evs, "pid", 0), _field(evs, "name", ""), _field(evs, "id"), _field(evs, "args")
    _check_types(pid, pos_l, _KEY_TYPES, "'pid' should be an integer or string but", fail)
    _check_types(name, pos_l, {str}, "'name' should be a string but", fail)
    _check_types(cid, pos_l, _KEY_TYPES | {type(None)}, "'id' should be an integer or string but", fail)
    _check_types(args, pos_l, {dict}, "counter 'args' should be an object of numbers but", fail)
    if set(map(type, cid)) != {type(None)}:
        name = [n if i is None else f"{n} {i}" for n, i in zip(name, cid, strict=True)]
    values = list(map(dict.get, args, name))
    if len(evs) and set(map(len, args)) == {1} and set(map(type, values)) <= {int, float}:
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
    index = _Index()
    series = np.array(list(map(index.__getitem__, keys)), np.int64)
    order = np.argsort(series, kind="stable")
    bounds = np.searchsorted(series[order], np.arange(len(index) + 1))
    for k, s in index.items():
        sel = order[bounds[s]:bounds[s + 1]]
        scan.counters[k] = (t_for[sel], v[sel])
    return ts


def _scan(events: list, fail: _Fail) -> _Scan:
    scan = _Scan()
    if set(map(type, events)) - {dict}:
        i = next(i for i, ev in enumerate(events) if type(ev) is not dict)
        fail(f"not a Chrome trace (event {i} is {_json_type(events[i])}, not an object)")
    ph = _field(events, "ph")
    _check_types(ph, range(len(events)), {str}, "'ph' should be a string but", fail)
    code = np.fromiter(map(_PHASES.get, ph, repeat(0)), np.int8, count=len(ph))
    scan.skipped = int(np.count_nonzero(code == 0))

    x_pos = np.flatnonzero((code == _SLICE) | (code == _INSTANT))
    x_evs = _pick(events, x_pos)
    keys, name, cat, args, ts, dur = _scan_slices(x_evs, x_pos, fail, durations=True)
    if np.any(code == _INSTANT):
        dur[code[x_pos] == _INSTANT] = 0.0
    be_pos = np.flatnonzero(code == _BEGIN_END)
    be_evs = _pick(events, be_pos)
    be_keys, _, _, _, be_ts, _ = _scan_slices(be_evs, be_pos, fail, durations=False)
    _scan_metadata(_pick(events, np.flatnonzero(code == _METADATA)), scan)
    c_pos = np.flatnonzero(code == _COUNTER)
    c_ts = _scan_counters(_pick(events, c_pos), c_pos, fail, scan)

    ends = [float((ts + dur).max()) if len(ts) else -math.inf, float(be_ts.max()) if len(be_ts) else -math.inf,
            float(c_ts.max()) if len(c_ts) else -math.inf]
    more = _match_begin_end(be_evs, be_pos, be_keys, be_ts, max(ends), scan)
    if more[0]:
        keys += more[0]
        x_pos = np.concatenate([x_pos, np.array(more[1], np.int64)])
        name += more[2]
        cat += more[3]
        args += more[4]
        ts = np.concatenate([ts, np.array(more[5], np.float64)])
        dur = np.concatenate([dur, np.array(more[6], np.float64)])
    index = _Index()
    scan.key = np.array(list(map(index.__getitem__, keys)), np.int64)
    scan.keys = list(index)
    scan.pos, scan.ts, scan.dur = x_pos, ts, dur
    scan.name, scan.cat, scan.args = _objects(name), _objects(cat), _objects(args)
    return scan


def _arg_column(args: np.ndarray, key: str, fail: _Fail) -> np.ndarray:
    """A numeric arg of every event; missing, non-numeric, negative or non-finite values count as 0."""
    values = _field(args.tolist(), key)
    if not set(map(type, values)) <= {int, float}:
        values = [v if type(v) is float or type(v) is int else 0.0 for v in values]
    try:
        out = np.array(values, dtype=np.float64)
    except (OverflowError, ValueError):
        fail(f"'{key}' in args holds a number out of range")
    out[~(out <= MAX_VALUE) | (out < 0)] = 0.0  # NaN, infinities and absurd sizes too
    return out


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


def _foreign_trace(scan: _Scan, idx: np.ndarray, counter_keys: list[tuple], label: str, fail: _Fail) -> Trace:
    """One generic Trace of the slices ``idx`` and the given counter series of a file of another tool."""
    key = scan.key[idx]
    ts_raw, dur = scan.ts[idx], scan.dur[idx]
    names, cats = scan.name[idx].tolist(), scan.cat[idx].tolist()
    c_first = [float(scan.counters[k][0].min()) for k in counter_keys if len(scan.counters[k][0])]
    origin = min(float(ts_raw.min()) if len(ts_raw) else math.inf, min(c_first, default=math.inf))
    origin = 0.0 if not math.isfinite(origin) else origin

    # tracks: processes by sort index then first appearance, threads likewise within them
    used = np.unique(key).tolist()
    pid_rank: dict = {}
    for k in used:
        pid_rank.setdefault(scan.keys[k][0], len(pid_rank))
    used.sort(key=lambda k: (scan.process_sort.get(scan.keys[k][0], 0), pid_rank[scan.keys[k][0]],
                             scan.thread_sort.get(scan.keys[k], 0), k))
    if len(used) > MAX_TRACKS:
        fail(f"{len(used):,} threads have slices; at most {MAX_TRACKS:,} can be shown")
    pids = list(dict.fromkeys(scan.keys[k][0] for k in used))
    core_of = {p: i for i, p in enumerate(pids)}
    track_of_key = np.full(len(scan.keys) or 1, -1, np.int64)
    track_of_key[used] = np.arange(len(used))
    track = track_of_key[key]

    cat_ids = _Index()
    cat_id = np.array(list(map(cat_ids.__getitem__, cats)), np.int64)
    cat_names = list(cat_ids)
    track_cat_kinds: dict[int, set] = {}
    for pair in np.unique(track * (len(cat_names) or 1) + cat_id).tolist():
        t, c = divmod(pair, len(cat_names) or 1)
        k = _kind_of(cat_names[c]) if cat_names else None
        if k:
            track_cat_kinds.setdefault(t, set()).add(k)
    tracks = []
    for t, k in enumerate(used):
        pid, tid = scan.keys[k]
        pname = scan.process_names.get(pid, f"Process {pid}")
        tname = scan.thread_names.get((pid, tid), f"Thread {tid}")
        kind = _kind_of(tname)
        if kind is None:
            cat_kinds = track_cat_kinds.get(t, set())
            kind = next(iter(cat_kinds)) if len(cat_kinds) == 1 else "other"
        tracks.append(Track(f"{pname} / {tname}", kind, core_of[pid]))

    op_ids = _Index()
    op = np.array(list(map(op_ids.__getitem__, names)), np.int32)
    layer_names = _field(scan.args[idx].tolist(), "layer")
    if set(map(type, layer_names)) != {str}:
        layer_names = [n if type(n) is str else c for n, c in zip(layer_names, cats, strict=True)]
    layer_ids = _Index()
    layer = np.array(list(map(layer_ids.__getitem__, layer_names)), np.int32)
    start_ns = (ts_raw - origin) * 1e3
    dur_ns = dur * 1e3
    lstart, lend = _layer_spans(layer, start_ns, start_ns + dur_ns, len(layer_ids))
    first = np.unique(op, return_index=True)[1]
    op_layer = layer[first] if len(first) else np.zeros(0, np.int32)
    order = np.lexsort((start_ns, track))
    events = {"track": track[order], "start_ns": start_ns[order], "dur_ns": dur_ns[order], "op": op[order],
              "layer": layer[order], "flops": _arg_column(scan.args[idx], "flops", fail)[order],
              "bytes": _arg_column(scan.args[idx], "bytes", fail)[order]}

    counters: dict[str, Counter] = {}
    clash = {n for n in {k[1] for k in counter_keys} if sum(k[1] == n for k in counter_keys) > 1}
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
        "model": _stem(label), "chip": "", "chip_name": "Chrome trace", "instance": "", "mode": "imported",
        "batch": 1, "seq": 1, "dtype": "", "source": "chrome-json", "source_file": Path(label).name,
        "cores_per_copy": 1, "copies": 1, "lnc": 1, "cores_active": 1, "launch_overhead_s": 0.0,
        "total_ns": duration, "time_origin_us": origin,
        "processes": [scan.process_names.get(p, f"Process {p}") for p in pids],
        "units": {"time": "ns", "bytes": "B", "flops": "FLOP"}, "unclosed_slices": scan.unclosed,
        "unmatched_end_events": scan.unmatched_end, "skipped_events": scan.skipped,
    }
    trace = Trace(meta=meta, tracks=tuple(tracks), events=events, op_names=tuple(op_ids), op_layer=op_layer,
                  layer_names=tuple(layer_ids), layer_kinds=("other",) * len(layer_ids),
                  layer_start_ns=lstart, layer_end_ns=lend, counters=counters)
    _validate_trace(trace, fail)
    return trace


# our own exports -----------------------------------------------------------------------------


def _own_runs(other: dict, fail: _Fail) -> list[dict] | None:
    """The run tables of a file we wrote, validated; None for a file of another tool."""
    block = other.get("neuronviz")
    if not isinstance(block, dict) or block.get("format") != FORMAT_NAME:
        return None
    version = str(block.get("version", ""))
    major = version.split(".")[0]
    if not major.isdigit():
        fail(f"unreadable neuronviz format version '{version}'")
    ours = int(TRACE_FORMAT_VERSION.split(".")[0])
    if int(major) > ours:
        fail(f"written by a newer neuronviz (format {version}, this one reads {ours}.x): upgrade neuronviz")
    runs = block.get("runs")
    if not isinstance(runs, list) or not runs:
        fail("the neuronviz metadata holds no runs")

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
        if any(not 0 <= li < n_layers for li in run["op_layer"]) or len(run["layer_kinds"]) != n_layers:
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
               counter_keys: list[tuple], fail: _Fail) -> Trace:
    """One run of our own export, its events ``idx`` mapped back through the run's tables."""
    args = scan.args[idx].tolist()
    pos = scan.pos[idx]
    names = scan.name[idx].tolist()
    op_names, op_layer, layer_names = run["op_names"], run["op_layer"], run["layer_names"]
    if run.get("indexed") is True:
        op_l, layer_l = _field(args, "op"), _field(args, "layer_index")
        _check_types(op_l, pos, {int}, "'op' in args should be an integer but", fail)
        _check_types(layer_l, pos, {int}, "'layer_index' in args should be an integer but", fail)
    else:
        layer_first, op_first = _lookup_tables(op_names, op_layer, layer_names)
        lnames = _field(args, "layer")
        _check_types(lnames, pos, {str}, "'layer' in args should be a string but", fail)
        layer_l = list(map(layer_first.get, lnames, repeat(-1)))
        op_l = list(map(op_first.get, zip(names, lnames, strict=True), repeat(-1)))
        if -1 in layer_l:
            i = layer_l.index(-1)
            fail(f"event {pos[i]}: layer '{lnames[i]}' is not in the layer table of run {r}")
        if -1 in op_l:
            i = op_l.index(-1)
            fail(f"event {pos[i]}: op '{names[i]}' of layer '{lnames[i]}' is not in the op table of run {r}")
    events = {"track": local_track, "start_ns": scan.ts[idx] * 1e3, "dur_ns": scan.dur[idx] * 1e3,
              "op": np.array(op_l, np.int64), "layer": np.array(layer_l, np.int64),
              "flops": _arg_column(scan.args[idx], "flops", fail), "bytes": _arg_column(scan.args[idx], "bytes", fail)}
    for k in ("op", "layer"):
        if len(events[k]) and (events[k].min() < 0 or events[k].max() > np.iinfo(np.int32).max):
            fail(f"an event of run {r} refers to an {k} that does not exist")

    units = {name: unit for name, unit in run["counters"]}
    by_name = {key[1]: key for key in counter_keys}
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


def _build(scan: _Scan, other: dict, label: str, fail: _Fail) -> list[Trace]:
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
        run_of_key = np.array([owner.get(k, (-1, -1))[0] for k in scan.keys] or [-1], np.int64)
        track_of_key = np.array([owner.get(k, (-1, -1))[1] for k in scan.keys] or [-1], np.int64)
        ev_run = run_of_key[scan.key] if n else np.zeros(0, np.int64)
        for r, run in enumerate(runs):
            idx = np.flatnonzero(ev_run == r)
            keys = [k for k in counter_keys if pid_run.get(k[0]) == r]
            traces.append(_own_trace(scan, idx, track_of_key[scan.key[idx]], run, r, keys, fail))
        foreign = np.flatnonzero(ev_run < 0)
        counter_keys = [k for k in counter_keys if k[0] not in pid_run]
    if len(foreign) or counter_keys:
        traces.append(_foreign_trace(scan, foreign, counter_keys, label, fail))
    if not traces:
        fail("holds no trace events (no complete, begin/end, instant or counter events)")
    return traces


def load_chrome(path: str | os.PathLike) -> list[Trace]:
    """The runs of a Chrome Trace Event JSON file (plain or gzip): one Trace per run of our own
    exports, one generic Trace for a file of another tool. Any problem raises a one-line
    :class:`TraceFileError` naming the file."""
    label = str(path)
    fail = _Fail(label)
    data = _read(path, fail)
    try:
        with _gc_paused():
            doc = _parse(data, fail)
            del data
            events, other = _events_of(doc, fail)
            return _build(_scan(events, fail), other, label, fail)
    except RecursionError:
        fail("not a Chrome trace (nested too deeply)")
    except MemoryError:
        fail("too large to load into memory")
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        # a safety net: every problem found above has its own message; this keeps the promise of
        # one-line TraceFileErrors for shapes of input nobody has thought of
        fail(f"not a readable Chrome trace ({type(exc).__name__}: {exc})")

"""Neuron Explorer device profiles: what a Neuron device measured, as a run on the tracks a
simulation has.

Since Neuron SDK 2.30 ``neuron-explorer view`` writes a processed profile as a directory of
Parquet tables, one file a table (``Instruction.parquet``), a large table split into numbered
files (``Instruction_0.parquet``, ``Instruction_1.parquet``...), a table absent when its activity
did not happen (no collectives: no ``CcOp``). The ``Metadata`` table gives the schema version
(``profile_schema_version``, MAJOR.MINOR.PATCH): major :data:`SCHEMA_MAJOR` is read, a newer one
refused, since a major version renames or removes fields. Columns are read by name, only those
used: unknown ones are ignored, optional ones may be missing.

What lands where (the schema: aws-neuron-sdk ``tools/neuron-explorer/profile-schema-reference.rst``,
schema 7.4.0 of SDK 2.31):

- ``Instruction``: an event on its NeuronCore's engine track (``engine``, ``pcore_idx``), named by
  its ``opcode``, in the framework layer it came from (``layer``, else ``hlo_name``), with its
  BF16-equivalent FLOPs and HBM bytes; the time it waited for a semaphore (``evt_wait_time_ns``,
  before it started) and for the DMA it triggered (``dma_wait_time_ns``, after it ended) as wait
  events on the core's waits track.
- ``DmaPacket``: an event on the core's track of its queue type (``input``, ``data``, ``output``...),
  named by its queue.
- ``CcOp`` on the CC ops track, ``CcInstruction`` on a track per CC-core; ``Throttle`` on a
  row of its own; a system profile's ``SystemProfileEvents`` (the runtime's, the framework's) on
  a row per source.
- ``SbufUsage``/``PsumUsage`` as the SRAM counters (their share of the chip's SBUF and PSUM),
  ``HbmUsage``/``DmaUsage`` throughput as bandwidth counters.
- ``Summary``: the measured figures, under the metric catalogue's names (:mod:`sim.catalogue`).
- ``Metadata``: the instance (so the chip and its facts), the software versions, the LNC.

Reading trusts nothing: a file pyarrow cannot read, a column of the wrong type, a table larger
than its file could plausibly hold, a row count over the limits: each a one-line
:class:`~sim.errors.TraceFileError` naming the table.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sim.description import hardware
from sim.errors import SimError, TraceFileError
from sim.hardware.instances import get_instance
from sim.io.inputs import Fail, csv_export_of, is_profile, name_text, open_regular, profile_of, table_files
from sim.trace import Counter, Trace, Track

SCHEMA_MAJOR = 7
SOURCE = "neuron-explorer"
MAX_ROWS = 200_000_000  # of a table: a 10M-instruction profile is far below, memory for this is not
MAX_TRACKS = 4096
MAX_RATIO = 200  # a table's declared uncompressed bytes over its files' bytes, above it a bomb
MIN_RATIO_CHECK_BYTES = 64 << 20
MAX_TEXT = 1000  # characters of a name kept (an op, a layer, a queue)
BATCH_ROWS = 1 << 20  # rows converted at a time: memory holds the columns built, not the table
# the text columns read: Parquet's dictionary pages decoded straight to indices and their names
TEXT_COLUMNS = ["engine", "opcode", "layer", "hlo_name", "queue_type", "queue_name", "operation", "description",
                "name", "trace_event_source", "type"]

# an engine as Explorer names it (its UI's names and the ISA's) -> the track kind it is drawn as
ENGINE_KINDS = {"tensor": "tensor", "pe": "tensor", "tensormatrix": "tensor", "vector": "vector", "dve": "vector",
                "scalar": "scalar", "act": "scalar", "activation": "scalar", "gpsimd": "gpsimd", "pool": "gpsimd"}
ENGINE_LABELS = {"tensor": "Tensor", "vector": "Vector", "scalar": "Scalar", "gpsimd": "GpSimd"}
WRITE_QUEUES = ("output",)  # DMA queue types whose packets write device memory; the others read it
SEMAPHORE_WAIT = "semaphore wait"
DMA_WAIT = "DMA wait"
WAITS_TRACK = "waits"


# ---------------------------------------------------------------------------------------------
# tables


class _Columns:
    """What the readers ask of a table: its columns' types, its rows in batches."""

    name: str
    fail: Fail
    rows: int
    schema: dict[str, pa.DataType]

    def batches(self, columns: list[str]) -> Iterator[pa.RecordBatch]:
        raise NotImplementedError

    def has(self, column: str) -> bool:
        return column in self.schema

    def check(self, column: str, kind: str) -> None:
        """Fail unless ``column`` (when present) holds ``kind`` values: int, number, text or bool."""
        t = self.schema.get(column)
        if t is None or pa.types.is_null(t):  # absent, or empty in every row (a CSV's column without values)
            return
        if pa.types.is_dictionary(t):
            t = t.value_type
        ok = {"int": pa.types.is_integer(t), "number": pa.types.is_integer(t) or pa.types.is_floating(t),
              "text": pa.types.is_string(t) or pa.types.is_large_string(t), "bool": pa.types.is_boolean(t)}[kind]
        if not ok:
            self.fail(f"table {self.name} column '{column}' holds {t} values, not {kind}s")

    def first_row(self, columns: list[str] | None = None) -> dict[str, Any]:
        for batch in self.batches(columns or list(self.schema)):
            if batch.num_rows:
                row = batch.slice(0, 1)
                return {name: _values(row.column(name))[0] for name in row.schema.names}
        return {}


class _Rows(_Columns):
    """A table read whole (a CSV export's, a legacy JSON's), its text columns dictionary-encoded."""

    def __init__(self, name: str, table: pa.Table, fail: Fail) -> None:
        self.name, self.fail, self.rows = name, fail, table.num_rows
        if self.rows > MAX_ROWS:
            fail(f"table {name} has {self.rows:,} rows; at most {MAX_ROWS:,} can be read")
        columns = {c: table[c].dictionary_encode() if c in TEXT_COLUMNS and pa.types.is_string(table[c].type)
                   else table[c] for c in table.column_names}
        self.table = pa.table(columns)
        self.schema = {f.name: f.type for f in self.table.schema}

    def batches(self, columns: list[str]) -> Iterator[pa.RecordBatch]:
        yield from self.table.select([c for c in columns if c in self.schema]).to_batches(BATCH_ROWS)


class _Table(_Columns):
    """One table of the profile, over its files: the columns it has, read in batches."""

    def __init__(self, name: str, files: list[Path], fail: Fail) -> None:
        self.name, self.fail = name, fail
        self.files: list[pq.ParquetFile] = []
        self.schema: dict[str, pa.DataType] = {}
        self.rows = 0
        declared = on_disk = 0
        for path in files:
            try:
                f = pq.ParquetFile(path)
                texts = [c for c in TEXT_COLUMNS if c in f.schema_arrow.names
                         and pa.types.is_string(f.schema_arrow.field(c).type)]
                if texts:  # the names decoded once, as indices into them
                    f = pq.ParquetFile(path, read_dictionary=texts)
                meta = f.metadata
                on_disk += path.stat().st_size
                declared += sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
                for field in f.schema_arrow:
                    self.schema.setdefault(field.name, field.type)
            except (pa.ArrowException, OSError, ValueError) as exc:
                fail(f"table {name} ({path.name}) is not a readable Parquet file ({_first_line(exc)})")
            self.rows += meta.num_rows
            self.files.append(f)
        if self.rows > MAX_ROWS:
            fail(f"table {name} has {self.rows:,} rows; at most {MAX_ROWS:,} can be read")
        if declared > MIN_RATIO_CHECK_BYTES and declared > MAX_RATIO * on_disk:
            fail(f"table {name} declares {declared:,} bytes in {on_disk:,} on disk: implausibly large")

    def batches(self, columns: list[str]) -> Iterator[pa.RecordBatch]:
        """The table's rows, a batch at a time, in only ``columns`` (those it has)."""
        wanted = [c for c in columns if c in self.schema]
        for f in self.files:
            try:
                yield from f.iter_batches(batch_size=BATCH_ROWS, columns=wanted)
            except (pa.ArrowException, OSError, ValueError) as exc:
                self.fail(f"table {self.name} cannot be read ({_first_line(exc)})")


def _values(array: pa.Array) -> list:
    """``array`` as Python values; text that is not valid UTF-8 (a damaged page: Parquet does not
    check it) read with its bad bytes replaced, as a trace's other readers read such names."""
    try:
        return array.to_pylist()
    except UnicodeDecodeError:
        raw = array.cast(pa.large_binary()).to_pylist()
        return [None if b is None else b.decode("utf-8", "replace") for b in raw]


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _ints(batch: pa.RecordBatch, name: str, default: int = 0) -> np.ndarray:
    """A column of whole numbers as int64 (nulls and absent columns as ``default``)."""
    i = batch.schema.get_field_index(name)
    if i < 0:
        return np.full(batch.num_rows, default, np.int64)
    col = batch.column(i)
    if pa.types.is_floating(col.type):
        values = col.fill_null(default).to_numpy(zero_copy_only=False)
        return np.where(np.isfinite(values), values, default).astype(np.int64)
    return col.cast(pa.int64()).fill_null(default).to_numpy(zero_copy_only=False)


def _numbers(batch: pa.RecordBatch, name: str) -> np.ndarray:
    i = batch.schema.get_field_index(name)
    if i < 0:
        return np.zeros(batch.num_rows)
    return batch.column(i).cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False)


class _Names:
    """Distinct texts as indices, in order of first appearance (a column a batch at a time)."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def codes(self, batch: pa.RecordBatch, name: str, missing: str | None = "") -> np.ndarray:
        """Each row's text as an index; a null or absent one is ``missing`` (None: -1)."""
        i = batch.schema.get_field_index(name)
        if i < 0 or pa.types.is_null(batch.column(i).type):
            return np.full(batch.num_rows, -1 if missing is None else self.of(missing), np.int64)
        col = batch.column(i)
        encoded = col if pa.types.is_dictionary(col.type) else col.dictionary_encode()
        words = _values(encoded.dictionary)
        lookup = np.array([self.of(w[:MAX_TEXT]) if w else (-1 if missing is None else self.of(missing))
                           for w in words] or [0], np.int64)
        idx = encoded.indices.to_numpy(zero_copy_only=False)
        valid = ~np.asarray(encoded.indices.is_null().to_numpy(zero_copy_only=False), bool) if encoded.null_count \
            else np.ones(len(idx), bool)
        out = np.full(len(idx), -1 if missing is None else self.of(missing), np.int64)
        out[valid] = lookup[idx[valid].astype(np.int64)]
        return out

    def of(self, word: str) -> int:
        return self.index.setdefault(name_text(word), len(self.index))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.index)


# ---------------------------------------------------------------------------------------------
# the run


class _Builder:
    """Events, tracks and counters as the tables are read. The event columns are filled in place
    (room for the tables' ``rows`` and some waits, grown by half when the waits need more): a profile's events
    take their own size in memory, not that again for pieces to join."""

    COLUMNS = {"track": np.int16, "start_ns": np.float64, "dur_ns": np.float64, "op": np.int32, "layer": np.int32,
               "flops": np.float64, "bytes": np.float64}

    def __init__(self, fail: Fail, origin: int, rows: int, progress: Callable[[float], None] | None = None) -> None:
        self.fail, self.origin, self.progress, self.expected = fail, origin, progress, max(1, rows)
        capacity = rows + rows // 10  # room for waits on a tenth of them
        self.tracks: list[Track] = []
        self.track_of: dict[tuple[str, int], int] = {}
        self.ops, self.layers = _Names(), _Names()
        self.n = 0
        self.columns = {k: np.empty(max(capacity, 1024), t) for k, t in self.COLUMNS.items()}
        self.counters: dict[str, Counter] = {}

    def track(self, name: str, kind: str, core: int) -> int:
        key = (name, core)
        if key not in self.track_of:
            if len(self.tracks) >= MAX_TRACKS:
                self.fail(f"the profile has more than {MAX_TRACKS:,} tracks")
            self.track_of[key] = len(self.tracks)
            self.tracks.append(Track(name[:MAX_TEXT], kind, core))
        return self.track_of[key]

    def add(self, track: np.ndarray, start: np.ndarray, end: np.ndarray, op: np.ndarray, layer: np.ndarray,
            flops: np.ndarray | None = None, nbytes: np.ndarray | None = None) -> None:
        n = len(start)
        if not n:
            return
        if np.any(end < start):
            self.fail("an event ends before it starts")
        if self.n + n > MAX_ROWS:
            self.fail(f"the profile has more than {MAX_ROWS:,} events")
        room = len(self.columns["start_ns"])
        if self.n + n > room:
            grown = max(self.n + n, room + room // 2)
            for k, a in self.columns.items():
                self.columns[k] = np.resize(a, grown)
        at = slice(self.n, self.n + n)
        c = self.columns
        c["track"][at] = track
        np.subtract(start, self.origin, out=c["start_ns"][at], casting="unsafe")
        np.subtract(end, start, out=c["dur_ns"][at], casting="unsafe")
        c["op"][at] = op
        c["layer"][at] = layer
        c["flops"][at] = 0.0 if flops is None else np.maximum(flops, 0.0)
        c["bytes"][at] = 0.0 if nbytes is None else np.maximum(nbytes, 0.0)
        self.n += n
        if self.progress is not None:
            self.progress(min(1.0, self.n / self.expected))

    def counter(self, name: str, unit: str, t: list[np.ndarray], value: list[np.ndarray]) -> None:
        if not t:
            return
        times = np.concatenate(t).astype(np.float64) - self.origin
        values = np.concatenate(value).astype(np.float64)
        order = np.argsort(times, kind="stable")
        self.counters[name] = Counter(name, unit, times[order], values[order])

    def events(self) -> dict[str, np.ndarray]:
        """The columns of the events read (in table order: the views index them by track and time)."""
        room = len(self.columns["start_ns"])
        trim = self.n < 0.8 * room  # the room the waits were given and did not need
        return {k: a[:self.n].copy() if trim else a[:self.n] for k, a in self.columns.items()}


def _engine_track(b: _Builder, engine: str, core: int) -> int:
    kind = ENGINE_KINDS.get(engine.lower().replace(" ", "").replace("_", ""), "other")
    label = ENGINE_LABELS.get(kind, engine[:40] or "engine")
    return b.track(f"NC{core} {label}", kind, core)


def _instructions(t: _Columns, b: _Builder) -> None:
    for column, kind in (("start_ts", "int"), ("end_ts", "int"), ("engine", "text"), ("opcode", "text"),
                         ("pcore_idx", "int"), ("layer", "text"), ("hlo_name", "text"), ("raw_flops", "number"),
                         ("adjusted_flops", "number"), ("hbm_read_bytes", "number"), ("hbm_write_bytes", "number"),
                         ("evt_wait_time_ns", "number"), ("dma_wait_time_ns", "number")):
        t.check(column, kind)
    for column in ("start_ts", "end_ts", "engine", "opcode"):
        if not t.has(column):
            t.fail(f"table Instruction has no '{column}' column (every profile's has)")
    flops_column = "adjusted_flops" if t.has("adjusted_flops") else "raw_flops"
    layer_column = "layer" if t.has("layer") else "hlo_name"
    engines = _Names()
    wait_ops = (b.ops.of(SEMAPHORE_WAIT), b.ops.of(DMA_WAIT))
    for batch in t.batches(["start_ts", "end_ts", "engine", "pcore_idx", "opcode", layer_column, flops_column,
                            "hbm_read_bytes", "hbm_write_bytes", "evt_wait_time_ns", "dma_wait_time_ns"]):
        start, end = _ints(batch, "start_ts"), _ints(batch, "end_ts")
        core = _core(batch, b.fail)
        engine = engines.codes(batch, "engine")
        track = _tracks_of(core, engine, lambda c, e: _engine_track(b, engines.names[e], c))
        layer = b.layers.codes(batch, layer_column, missing=None)
        nbytes = _numbers(batch, "hbm_read_bytes") + _numbers(batch, "hbm_write_bytes")
        b.add(track, start, end, b.ops.codes(batch, "opcode"), layer, _numbers(batch, flops_column), nbytes)
        # the waits: a semaphore's before the instruction could start, a DMA's after it ended
        for column, op, before in (("evt_wait_time_ns", wait_ops[0], True), ("dma_wait_time_ns", wait_ops[1], False)):
            wait = np.maximum(_ints(batch, column), 0)
            sel = np.flatnonzero(wait > 0)
            if not len(sel):
                continue
            waits = np.array([b.track(f"NC{c} {WAITS_TRACK}", "other", c) for c in range(int(core.max()) + 1)])
            at = start[sel] - wait[sel] if before else end[sel]
            b.add(waits[core[sel]], at, at + wait[sel], np.full(len(sel), op), layer[sel])


def _tracks_of(core: np.ndarray, code: np.ndarray, make: Callable[[int, int], int]) -> np.ndarray:
    """Each row's track: ``make(core, code)`` of its pair, called once a pair, in (core, code)
    order, so that tracks are numbered the same whatever order rows come in."""
    if not len(code):
        return np.zeros(0, np.int64)
    width = int(code.max()) + 1
    key = core * width + code
    lut = np.full(int(key.max()) + 1, -1, np.int64)
    for k in np.flatnonzero(np.bincount(key)).tolist():
        lut[k] = make(*divmod(k, width))
    return lut[key]


def _core(batch: pa.RecordBatch, fail: Fail) -> np.ndarray:
    core = _ints(batch, "pcore_idx")
    if len(core) and (core.min() < 0 or core.max() >= 64):
        fail(f"a 'pcore_idx' of {int(core.min() if core.min() < 0 else core.max())} is not a NeuronCore's index")
    return core


def _dma(t: _Columns, b: _Builder) -> None:
    for column, kind in (("start_ts", "int"), ("end_ts", "int"), ("queue_type", "text"), ("queue_name", "text"),
                         ("pcore_idx", "int"), ("transfer_bytes", "number")):
        t.check(column, kind)
    for column in ("start_ts", "end_ts"):
        if not t.has(column):
            t.fail(f"table DmaPacket has no '{column}' column (every profile's has)")
    types = _Names()
    for batch in t.batches(["start_ts", "end_ts", "queue_type", "queue_name", "pcore_idx", "transfer_bytes"]):
        start, end, core = _ints(batch, "start_ts"), _ints(batch, "end_ts"), _core(batch, b.fail)
        qtype = types.codes(batch, "queue_type", missing="unknown")

        def queue(c: int, q: int) -> int:
            name = types.names[q]
            return b.track(f"NC{c} DMA {name}", "dma_write" if name in WRITE_QUEUES else "dma_read", c)

        track = _tracks_of(core, qtype, queue)
        op = b.ops.codes(batch, "queue_name" if batch.schema.get_field_index("queue_name") >= 0 else "queue_type",
                         missing="DMA")
        b.add(track, start, end, op, np.full(len(start), -1), None, _numbers(batch, "transfer_bytes"))


def _collectives(t: _Columns, b: _Builder) -> None:
    for column, kind in (("start_ts", "int"), ("end_ts", "int"), ("operation", "text"), ("input_size", "number"),
                         ("output_size", "number")):
        t.check(column, kind)
    track = b.track("CC ops", "collective", 0)
    for batch in t.batches(["start_ts", "end_ts", "operation", "input_size", "output_size"]):
        start, end = _ints(batch, "start_ts"), _ints(batch, "end_ts")
        nbytes = np.maximum(_numbers(batch, "input_size"), _numbers(batch, "output_size"))
        b.add(np.int64(track), start, end, b.ops.codes(batch, "operation", missing="collective"),
              np.full(len(start), -1), None, nbytes)


def _cc_instructions(t: _Columns, b: _Builder) -> None:
    for column, kind in (("start_ts", "int"), ("end_ts", "int"), ("description", "text"), ("core_idx", "int")):
        t.check(column, kind)
    for batch in t.batches(["start_ts", "end_ts", "description", "core_idx"]):
        start, end, cc = _ints(batch, "start_ts"), _ints(batch, "end_ts"), _ints(batch, "core_idx")
        if len(cc) and (cc.min() < 0 or cc.max() >= MAX_TRACKS):
            b.fail("a CcInstruction 'core_idx' is not a CC-core's index")
        track = np.empty(len(start), np.int64)
        for c in sorted(set(cc.tolist())):
            track[cc == c] = b.track(f"CC-core {c}", "collective", 0)
        b.add(track, start, end, b.ops.codes(batch, "description", missing="CC instruction"), np.full(len(start), -1))


def _system_events(t: _Columns, b: _Builder) -> None:
    """A system profile's runtime and framework events, a row per source. Not the Host track's
    kind: they overlap the device's work they wait on (``nc_exec_running`` spans an execution),
    where the Host track holds costs the device waits on, which would make every layer host-bound."""
    for column, kind in (("start_ts", "int"), ("end_ts", "int"), ("name", "text"), ("trace_event_source", "text")):
        t.check(column, kind)
    sources = _Names()
    for batch in t.batches(["start_ts", "end_ts", "name", "trace_event_source"]):
        start, end = _ints(batch, "start_ts"), _ints(batch, "end_ts")
        source = sources.codes(batch, "trace_event_source", missing="host")
        track = np.empty(len(start), np.int64)
        for s in sorted(set(source.tolist())):
            track[source == s] = b.track(sources.names[s], "other", 0)
        b.add(track, start, end, b.ops.codes(batch, "name", missing="host"), np.full(len(start), -1))


def _throttles(t: _Columns, b: _Builder) -> None:
    for column, kind in (("timestamp", "int"), ("duration", "int"), ("type", "text"), ("k", "int"), ("n", "int")):
        t.check(column, kind)
    track = b.track("Throttle", "other", 0)
    for batch in t.batches(["timestamp", "duration", "type", "k", "n"]):
        at, dur = _ints(batch, "timestamp"), np.maximum(_ints(batch, "duration"), 0)
        k, n = _ints(batch, "k"), _ints(batch, "n", 1)
        kinds = _Names()
        codes = kinds.codes(batch, "type", missing="throttle")
        op = np.array([b.ops.of(f"{kinds.names[c]} throttle to {a}/{m}")
                       for c, a, m in zip(codes.tolist(), k.tolist(), n.tolist(), strict=True)] or [0], np.int64)
        b.add(np.int64(track), at, at + dur, op[:len(at)], np.full(len(at), -1))


def _first_core_series(t: _Columns, column: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """A usage table's samples of ``column`` on the first physical core: their times and values."""
    t.check("timestamp", "int")
    t.check(column, "number")
    times, values = [], []
    for batch in t.batches(["timestamp", column, "pcore_idx"]):
        first = _ints(batch, "pcore_idx") == 0
        times.append(_ints(batch, "timestamp")[first])
        values.append(_numbers(batch, column)[first])
    return times, values


def _usage(tables: dict[str, _Columns], b: _Builder, sizes: dict[str, float]) -> None:
    """The time series: SBUF and PSUM fill (of the first core: as bytes of the chip's, else as
    %), HBM and DMA throughput."""
    for table, name, size in (("SbufUsage", "sbuf_bytes", sizes.get("sbuf")),
                              ("PsumUsage", "psum_bytes", sizes.get("psum"))):
        if table in tables:
            times, values = _first_core_series(tables[table], "avg_util_percent")
            if size:
                b.counter(name, "B", times, [v / 100 * size for v in values])
            else:
                b.counter(f"{table.removesuffix('Usage').upper()} %", "%", times, values)
    for table, name in (("HbmUsage", "hbm_bytes_per_s"), ("DmaUsage", "dma_bytes_per_s")):
        if table in tables:
            b.counter(name, "B/s", *_first_core_series(tables[table], "current_throughput"))


def _plain(value: Any) -> Any:
    """A metadata value as JSON holds it (texts readable, numbers finite)."""
    if isinstance(value, str):
        return name_text(value)[:MAX_TEXT]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return value if math.isfinite(value) else None
    return name_text(str(value))[:MAX_TEXT]


def _version(metadata: dict[str, Any], fail: Fail) -> str:
    version = metadata.get("profile_schema_version")
    if not isinstance(version, str) or not re.fullmatch(r"\d+(\.\d+)*", version.strip()):
        fail(f"its Metadata table gives no readable 'profile_schema_version' ({_plain(version)!r})")
    major = int(version.split(".")[0])
    if major > SCHEMA_MAJOR:
        fail(f"profile schema {version} is newer than this neuronviz reads ({SCHEMA_MAJOR}.x): upgrade neuronviz")
    if major < SCHEMA_MAJOR:
        fail(f"profile schema {version} is older than this neuronviz reads ({SCHEMA_MAJOR}.x): process the "
             "profile again with the current neuron-explorer")
    return version


def load_profile(path: str | os.PathLike, progress: Callable[[float], None] | None = None) -> list[Trace]:
    """The run a Neuron Explorer profile directory holds (its own directory, or that of one of its
    tables). ``progress`` hears the share of its events read, a batch at a time; an exception it
    raises stops the load."""
    directory = profile_of(path)
    fail = Fail(name_text(str(path)))
    if directory is None:
        fail("not a Neuron Explorer profile (a directory of Parquet tables with a Metadata table)")
    try:
        files = table_files(directory)
    except OSError as exc:
        fail(f"cannot list the profile's tables ({exc.strerror or exc})")
    tables = {name: _Table(name, parts, fail) for name, parts in files.items()}
    metadata = {k: _plain(v) for k, v in tables["Metadata"].first_row().items()}
    return [_run(tables, metadata, _version(metadata, fail), directory.name, fail, progress)]


def _run(tables: dict[str, _Columns], metadata: dict[str, Any], version: str, source: str, fail: Fail,
         progress: Callable[[float], None] | None) -> Trace:
    """The run the tables of a profile hold (of Parquet, a CSV export or a legacy JSON), read
    from ``source`` (the profile's directory or file name)."""
    from sim.catalogue import from_explorer  # the catalogue measures traces: it imports this package's users

    origin = metadata.get("first_hw_timestamp")
    if not isinstance(origin, int) or isinstance(origin, bool):
        origin = _earliest(tables)
    instance_name = metadata.get("instance_type") or ""
    try:
        instance = get_instance(str(instance_name)) if instance_name else None
    except SimError:
        instance = None  # an instance this neuronviz has no data of: drawn without the chip's facts
    chip = instance.chip if instance is not None else None
    cores = metadata.get("num_physical_cores")
    lnc = cores if isinstance(cores, int) and 1 <= cores <= 8 and metadata.get("vnc_enabled") else 1
    facts = hardware(chip, instance, lnc) if chip is not None else None
    sizes = {"sbuf": facts.sbuf_bytes, "psum": facts.psum_bytes} if facts else {}  # a core's

    if "DmaPacket" not in tables and "DmaPacketAggregated" in tables:  # a queue's packets summed: its transfers
        tables = {**tables, "DmaPacket": tables["DmaPacketAggregated"]}
    total = sum(t.rows for n, t in tables.items() if n in _READERS)
    b = _Builder(fail, origin, total, progress)
    for name, reader in _READERS.items():
        if name in tables:
            reader(tables[name], b)
    _usage(tables, b, sizes)
    summary = {k: _plain(v) for k, v in tables["Summary"].first_row().items()} if "Summary" in tables else {}
    events = b.events()
    return _trace(b, events, metadata, version, summary, from_explorer(summary), source, instance, facts, lnc)


MAX_TEXT_FILE_BYTES = 4 << 30  # a CSV export or legacy JSON: read whole


def _text_file(path: Path, fail: Fail) -> bytes:
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_TEXT_FILE_BYTES:
                fail(f"{path.name} is {size:,} bytes; at most {MAX_TEXT_FILE_BYTES:,} can be read")
            return f.read()
    except OSError as exc:
        fail(f"cannot read {path.name} ({exc.strerror or exc})")


def load_csv_export(path: str | os.PathLike, progress: Callable[[float], None] | None = None) -> list[Trace]:
    """The run a Neuron Explorer CSV export holds (a directory of ``Instruction.csv``,
    ``DmaPacket.csv``... or one of them): each file the fields of its Parquet table after a
    ``timeline_track`` column, for the time range that was visible. It names no instance."""
    import pyarrow.csv as pcsv

    fail = Fail(name_text(str(path)))
    files = csv_export_of(path) or fail("not a Neuron Explorer CSV export")
    tables = {}
    for file in files:
        try:
            table = pcsv.read_csv(pa.BufferReader(_text_file(file, fail)))
        except pa.ArrowException as exc:
            fail(f"{file.name} is not a readable CSV table ({_first_line(exc)})")
        tables[file.stem] = _Rows(file.stem, table, fail)
    return [_run(tables, {}, "CSV export", Path(path).name, fail, progress)]




def is_legacy_json(head: bytes) -> bool:
    """Whether a JSON file's first bytes are those of a legacy ``neuron-profile`` JSON: an object
    whose first key is its summary or its instructions."""
    return re.match(rb'\s*\{\s*"(?:summary|instruction)"\s*:', head.removeprefix(b"\xef\xbb\xbf")) is not None


def load_legacy_json(path: str | os.PathLike, progress: Callable[[float], None] | None = None) -> list[Trace]:
    """The run of a ``neuron-profile view --output-format json`` file (Neuron SDK before 2.30):
    its ``summary`` (the figures, under Explorer's names) and its ``instruction`` events
    (``timestamp`` and ``duration`` in ns, ``label`` the engine's row, ``opcode``, ``hlo_name``)."""
    import orjson

    fail = Fail(name_text(str(path)))
    try:
        doc = orjson.loads(_text_file(Path(path), fail))
    except orjson.JSONDecodeError as exc:
        fail(f"is not valid JSON ({_first_line(exc)})")
    if not isinstance(doc, dict) or not isinstance(doc.get("instruction", []), list):
        fail("is not a neuron-profile JSON (no list of instructions)")
    rows = [r for r in doc.get("instruction", []) if isinstance(r, dict)]
    try:
        start = pa.array([r.get("timestamp") for r in rows], pa.int64())
        duration = pa.array([r.get("duration", 0) for r in rows], pa.int64())
    except (pa.ArrowException, OverflowError, TypeError):
        fail("an instruction's timestamp or duration is not a whole number of ns")
    texts = {k: pa.array([r.get(k) if isinstance(r.get(k), str) else None for r in rows], pa.string())
             for k in ("label", "opcode", "hlo_name")}
    table = pa.table({"start_ts": start, "end_ts": pc.add(start, duration), "engine": texts["label"],
                      "opcode": texts["opcode"], "hlo_name": texts["hlo_name"]})
    tables: dict[str, _Columns] = {"Instruction": _Rows("Instruction", table, fail)}
    summary = doc.get("summary")
    summary = summary[0] if isinstance(summary, list) and summary and isinstance(summary[0], dict) else {}
    if summary:
        tables["Summary"] = _Rows("Summary", pa.Table.from_pylist(
            [{k: v for k, v in summary.items() if type(v) in (int, float, str, bool)}]), fail)
    return [_run(tables, {}, "neuron-profile JSON", Path(path).name, fail, progress)]


def _earliest(tables: dict[str, _Columns]) -> int:
    """The first timestamp of the event tables (a profile whose Metadata does not give it)."""
    first = []
    for name in _READERS:
        t = tables.get(name)
        column = "timestamp" if name == "Throttle" else "start_ts"
        if t is not None and t.has(column):
            for batch in t.batches([column]):
                if batch.num_rows:
                    first.append(int(_ints(batch, column).min()))
    return min(first, default=0)


def _layer_spans(events: dict[str, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Each layer's first start and last end (0, 0 for a layer without events)."""
    inside = events["layer"] >= 0
    start = events["start_ns"][inside]
    spans = pa.table({"layer": events["layer"][inside], "start": start, "end": start + events["dur_ns"][inside]}) \
        .group_by("layer").aggregate([("start", "min"), ("end", "max")])
    lo, hi = np.zeros(n), np.zeros(n)
    layer = spans["layer"].to_numpy()
    lo[layer], hi[layer] = spans["start_min"].to_numpy(), spans["end_max"].to_numpy()
    return lo, hi


def _trace(b: _Builder, events: dict[str, np.ndarray], metadata: dict, version: str, summary: dict,
           measured: dict, source: str, instance, facts, lnc: int) -> Trace:
    from sim.io.native import _validate_trace

    n_layers = len(b.layers.names)
    lstart, lend = _layer_spans(events, n_layers)
    op_layer = np.full(len(b.ops.names), -1, np.int32)
    first = np.full(len(op_layer), len(events["op"]), np.int64)  # each op's first event: its layer is the op's
    np.minimum.at(first, events["op"], np.arange(len(events["op"])))
    seen = first < len(events["op"])
    op_layer[seen] = events["layer"][first[seen]]
    end = float((events["start_ns"] + events["dur_ns"]).max()) if len(events["start_ns"]) else 0.0
    name = metadata.get("profile_name") or Path(source).stem.split("@")[0]
    meta = {
        "model": name_text(str(name)), "mode": "imported", "source": SOURCE, "source_file": name_text(source),
        "chip": facts.chip if facts else "", "chip_name": facts.name if facts else "Neuron device",
        "instance": instance.name if instance is not None else "", "batch": 1, "seq": 1, "dtype": "",
        "cores_per_copy": 1, "copies": 1, "lnc": lnc, "cores_active": lnc, "total_ns": end,
        "price_usd_per_hour": instance.price_usd_per_hour if instance is not None else None,
        "profile": {"schema_version": version, "metadata": metadata, "summary": summary},
        "measured": measured,
        "units": {"time": "ns", "bytes": "B", "flops": "FLOP"},
    }
    if facts is not None:
        meta["hardware"] = facts.record()
        # the instructions' FLOPs are BF16-equivalent (adjusted_flops): BF16's peak is their roof
        meta["peak_flops_per_core"] = facts.peak_flops_per_core.get("bf16")
    trace = Trace(meta=meta, tracks=tuple(b.tracks), events=events, op_names=b.ops.names, op_layer=op_layer,
                  layer_names=b.layers.names, layer_kinds=("other",) * n_layers, layer_start_ns=lstart,
                  layer_end_ns=lend, counters=b.counters)
    _validate_trace(trace, b.fail)
    return trace


_READERS: dict[str, Callable[[_Columns, _Builder], None]] = {
    "Instruction": _instructions, "DmaPacket": _dma, "CcOp": _collectives, "CcInstruction": _cc_instructions,
    "Throttle": _throttles, "SystemProfileEvents": _system_events,
}


# ---------------------------------------------------------------------------------------------
# writing: a run as the tables Explorer reads

SCHEMA_PATH = Path(__file__).parent / "data" / "explorer-schema-7.4.json"
_ARROW_TYPES = {"int64": pa.int64(), "int32": pa.int32(), "float": pa.float32(), "double": pa.float64(),
                "string": pa.string(), "bool": pa.bool_(), "list<int64>": pa.list_(pa.int64()),
                "list<string>": pa.list_(pa.string())}
_FILL = {"int64": 0, "int32": 0, "float": 0.0, "double": 0.0, "string": "", "bool": False}
ENGINE_NAMES = {"tensor": "Tensor", "vector": "Vector", "scalar": "Scalar", "gpsimd": "GpSimd"}
QUEUE_TYPES = {"dma_read": "data", "dma_write": "output"}  # what a simulated DMA queue carries
EPOCH = "1970-01-01 00:00:00+00:00"


@cache
def schema() -> dict[str, Any]:
    """The published schema (every table's fields: name, Parquet type, unit, required) of the
    version this neuronviz writes; its source is in the file."""
    return json.loads(SCHEMA_PATH.read_text())


def _column(kind: str, values: Any, n: int, required: bool) -> pa.Array:
    t = _ARROW_TYPES[kind]
    if values is None:
        if not required:
            return pa.nulls(n, t)
        return pa.array([[]] * n, t) if kind.startswith("list") else pa.array(np.full(n, _FILL[kind])).cast(t)
    if isinstance(values, pa.Array):
        return values.cast(t)
    return pa.array(values).cast(t)


def _write_table(directory: Path, name: str, columns: dict[str, Any], n: int) -> None:
    """Table ``name`` with every column the schema documents, in its type: those given, the
    others empty (a required one its type's zero)."""
    fields = schema()["tables"][name]
    arrays = [_column(kind, columns.get(field), n, required) for field, kind, _, required in fields]
    pq.write_table(pa.Table.from_arrays(arrays, names=[f[0] for f in fields]), directory / f"{name}.parquet")


def _texts(names: tuple[str, ...], index: np.ndarray) -> pa.Array:
    """Each row's name (``names[index]``; null where ``index`` is -1)."""
    words = pa.array(list(names) or [""], pa.string())
    return words.take(pa.array(np.maximum(index, 0), mask=index < 0))


def _profile_tables(trace: Trace, directory: Path) -> None:
    from sim import __version__
    from sim.catalogue import EXPLORER_ALIASES, explorer_summary
    from sim.hardware.chip import get_chip

    ev, tracks = trace.events, trace.tracks
    kind = np.array([t.kind for t in tracks] or [""], dtype=object)[ev["track"]]
    core = np.array([t.core for t in tracks] or [0], np.int64)[ev["track"]]
    start = np.rint(ev["start_ns"]).astype(np.int64)
    end = np.rint(ev["start_ns"] + ev["dur_ns"]).astype(np.int64)
    facts, d = trace.run.hardware, trace.run.deployment
    chip = get_chip(facts.chip) if facts is not None else None
    te = chip.tensor if chip is not None else None
    meta = {"profile_schema_version": schema()["profile_schema_version"], "ntff_version": 0,
            "num_physical_cores": d.lnc, "vnc_enabled": d.lnc > 1, "first_hw_timestamp": 0,
            "last_hw_timestamp": int(end.max()) if len(end) else 0, "first_ts": EPOCH, "last_ts": EPOCH,
            "dma_ddr_bandwidth": facts.memory_share_bytes_per_s if facts else 0.0,
            "hbm_ddr_bandwidth": facts.memory_bytes_per_s if facts else 0.0,
            "tensor_engine_num_rows": te.rows if te else 0, "tensor_engine_num_cols": te.cols if te else 0,
            "tensor_engine_clock_freq": te.clock_hz / 1e9 if te else 0.0, "ticks_per_nanosec": 1,
            "instance_type": d.instance or None, "explorer_version": f"neuronviz {__version__}",
            "profile_name": trace.run.workload.model, "is_simulation": True}
    _write_table(directory, "Metadata", {k: [v] for k, v in meta.items()}, 1)

    def rows(sel: np.ndarray) -> dict[str, Any]:
        return {"start_ts": start[sel], "end_ts": end[sel], "duration_ns": end[sel] - start[sel],
                "pcore_idx": core[sel], "id": np.flatnonzero(sel)}

    engine = np.isin(kind, tuple(ENGINE_NAMES))
    if engine.any():
        names = np.array([ENGINE_NAMES.get(k, "") for k in kind[engine]], dtype=object)
        _write_table(directory, "Instruction", {
            **rows(engine), "engine": names, "opcode": _texts(trace.op_names, ev["op"][engine]),
            "layer": _texts(trace.layer_names, ev["layer"][engine]),
            "adjusted_flops": np.rint(ev["flops"][engine]), "raw_flops": np.rint(ev["flops"][engine]),
            "pc": np.arange(int(engine.sum()))}, int(engine.sum()))
    dma = np.isin(kind, tuple(QUEUE_TYPES))
    if dma.any():
        nbytes = np.rint(ev["bytes"][dma])
        _write_table(directory, "DmaPacket", {
            **rows(dma), "queue_type": np.array([QUEUE_TYPES[k] for k in kind[dma]], dtype=object),
            "queue_name": _texts(trace.op_names, ev["op"][dma]), "read_bytes": nbytes, "write_bytes": nbytes,
            "transfer_bytes": nbytes, "throughput": nbytes / np.maximum(end[dma] - start[dma], 1) * 1e9,
            "packet_aggregation_id": np.flatnonzero(dma)}, int(dma.sum()))
    cc = kind == "collective"
    if cc.any():
        _write_table(directory, "CcOp", {**rows(cc), "operation": _texts(trace.op_names, ev["op"][cc]),
                                         "input_size": np.rint(ev["bytes"][cc]),
                                         "output_size": np.rint(ev["bytes"][cc])}, int(cc.sum()))
    host = ~(engine | dma | cc)  # the host's costs: a system profile's events
    if host.any():
        _write_table(directory, "SystemProfileEvents", {
            **rows(host), "name": _texts(trace.op_names, ev["op"][host]),
            "trace_event_source": np.array([tracks[t].name for t in ev["track"][host]], dtype=object)},
            int(host.sum()))
    sizes = {"sbuf_bytes": ("SbufUsage", facts.sbuf_bytes if facts else 0.0),
             "psum_bytes": ("PsumUsage", facts.psum_bytes if facts else 0.0)}
    for name, (table, size) in sizes.items():
        c = trace.counters.get(name)
        if c is not None and len(c.t_ns) and size:
            _write_table(directory, table, {"timestamp": np.rint(c.t_ns), "avg_util_percent": c.value / size * 100,
                                            "pcore_idx": np.zeros(len(c.t_ns), np.int64)}, len(c.t_ns))
    figures = {EXPLORER_ALIASES.get(k, k): v for k, v in explorer_summary(trace).items()}
    figures = {**figures, **{alias: figures.pop(name) for alias, name in EXPLORER_ALIASES.items() if name in figures}}
    columns = {f[0] for f in schema()["tables"]["Summary"]}
    summary = {k: [v] for k, v in figures.items() if k in columns and v is not None}
    _write_table(directory, "Summary", summary, 1)


def save_profile(path: str | os.PathLike, traces: Sequence[Trace]) -> None:
    """Write ``traces`` as Neuron Explorer profiles (``Metadata.is_simulation`` true): one run into
    the directory ``path``, several each into a directory of its own under it. The directory is
    made beside it and renamed into place; an existing one is replaced only if it is a profile.
    A run's executions that were not stored as events (replayed steps) are in its Summary's figures,
    not in its tables."""
    target = Path(path)
    if target.exists() and not (target.is_dir() and (is_profile(target) or not any(target.iterdir()))):
        raise TraceFileError(f"cannot write {target}: it exists and is not a Neuron Explorer profile directory "
                             "(choose a new name)")
    if target.exists() and len(traces) > 1:
        raise TraceFileError(f"cannot write {target}: several runs go into a new directory (choose a new name)")
    work = Path(tempfile.mkdtemp(prefix=f".{target.name[:100]}.", suffix=".tmp", dir=target.parent))
    try:
        if len(traces) == 1:
            _profile_tables(traces[0], work)
        else:
            for i, trace in enumerate(traces, 1):
                run_dir = work / f"run{i}"
                run_dir.mkdir()
                _profile_tables(trace, run_dir)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name[:100]}.", suffix=".old", dir=target.parent))
            os.replace(target, old / target.name)
            os.replace(work, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(work, target)
    except OSError as exc:
        raise TraceFileError(f"cannot write {target}: {exc.strerror or exc}") from None
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)

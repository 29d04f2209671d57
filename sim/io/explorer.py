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
  row of its own.
- ``SbufUsage``/``PsumUsage`` as the SRAM counters (their share of the chip's SBUF and PSUM),
  ``HbmUsage``/``DmaUsage`` throughput as bandwidth counters.
- ``Summary``: the measured figures, under the metric catalogue's names (:mod:`sim.catalogue`).
- ``Metadata``: the instance (so the chip and its facts), the software versions, the LNC.

Reading trusts nothing: a file pyarrow cannot read, a column of the wrong type, a table larger
than its file could plausibly hold, a row count over the limits: each a one-line
:class:`~sim.errors.TraceFileError` naming the table.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sim.description import hardware
from sim.errors import SimError, TraceFileError
from sim.hardware.instances import get_instance
from sim.io.inputs import name_text, profile_of, table_files
from sim.trace import Counter, Trace, Track

SCHEMA_MAJOR = 7
SOURCE = "neuron-explorer"
MAX_ROWS = 200_000_000  # of a table: a 10M-instruction profile is far below, memory for this is not
MAX_TRACKS = 4096
MAX_RATIO = 200  # a table's declared uncompressed bytes over its files' bytes, above it a bomb
MIN_RATIO_CHECK_BYTES = 64 << 20
MAX_TEXT = 1000  # characters of a name kept (an op, a layer, a queue)
BATCH_ROWS = 1 << 20  # rows converted at a time: memory holds the columns built, not the table

# an engine as Explorer names it (its UI's names and the ISA's) -> the track kind it is drawn as
ENGINE_KINDS = {"tensor": "tensor", "pe": "tensor", "tensormatrix": "tensor", "vector": "vector", "dve": "vector",
                "scalar": "scalar", "act": "scalar", "activation": "scalar", "gpsimd": "gpsimd", "pool": "gpsimd"}
ENGINE_LABELS = {"tensor": "Tensor", "vector": "Vector", "scalar": "Scalar", "gpsimd": "GpSimd"}
WRITE_QUEUES = ("output",)  # DMA queue types whose packets write device memory; the others read it
SEMAPHORE_WAIT = "semaphore wait"
DMA_WAIT = "DMA wait"
WAITS_TRACK = "waits"


class _Fail:
    def __init__(self, label: str) -> None:
        self.label = label

    def __call__(self, problem: str) -> NoReturn:
        text = f"{self.label}: {problem}".replace("\r", " ").replace("\n", " ")
        raise TraceFileError(text[:500])


# ---------------------------------------------------------------------------------------------
# tables


class _Table:
    """One table of the profile, over its files: the columns it has, read in batches."""

    def __init__(self, name: str, files: list[Path], fail: _Fail) -> None:
        self.name, self.fail = name, fail
        self.files: list[pq.ParquetFile] = []
        self.schema: dict[str, pa.DataType] = {}
        self.rows = 0
        declared = on_disk = 0
        for path in files:
            try:
                f = pq.ParquetFile(path)
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

    def has(self, column: str) -> bool:
        return column in self.schema

    def check(self, column: str, kind: str) -> None:
        """Fail unless ``column`` (when present) holds ``kind`` values: int, number, text or bool."""
        t = self.schema.get(column)
        if t is None:
            return
        if pa.types.is_dictionary(t):
            t = t.value_type
        ok = {"int": pa.types.is_integer(t), "number": pa.types.is_integer(t) or pa.types.is_floating(t),
              "text": pa.types.is_string(t) or pa.types.is_large_string(t), "bool": pa.types.is_boolean(t)}[kind]
        if not ok:
            self.fail(f"table {self.name} column '{column}' holds {t} values, not {kind}s")

    def batches(self, columns: list[str]) -> Iterator[pa.RecordBatch]:
        """The table's rows, a batch at a time, in only ``columns`` (those it has)."""
        wanted = [c for c in columns if c in self.schema]
        for f in self.files:
            try:
                yield from f.iter_batches(batch_size=BATCH_ROWS, columns=wanted, use_threads=False)
            except (pa.ArrowException, OSError, ValueError) as exc:
                self.fail(f"table {self.name} cannot be read ({_first_line(exc)})")

    def first_row(self, columns: list[str] | None = None) -> dict[str, Any]:
        for batch in self.batches(columns or list(self.schema)):
            if batch.num_rows:
                return {k: v[0] for k, v in batch.slice(0, 1).to_pydict().items()}
        return {}


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
        if i < 0:
            return np.full(batch.num_rows, -1 if missing is None else self.of(missing), np.int64)
        col = batch.column(i)
        encoded = col if pa.types.is_dictionary(col.type) else col.dictionary_encode()
        words = encoded.dictionary.to_pylist()
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
    """Events, tracks and counters as the tables are read."""

    def __init__(self, fail: _Fail, origin: int) -> None:
        self.fail, self.origin = fail, origin
        self.tracks: list[Track] = []
        self.track_of: dict[tuple[str, int], int] = {}
        self.ops, self.layers = _Names(), _Names()
        self.columns: dict[str, list[np.ndarray]] = {k: [] for k in ("track", "start_ns", "dur_ns", "op", "layer",
                                                                    "flops", "bytes")}
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
        self.columns["track"].append(np.broadcast_to(track, n).astype(np.int16))
        self.columns["start_ns"].append((start - self.origin).astype(np.float64))
        self.columns["dur_ns"].append((end - start).astype(np.float64))
        self.columns["op"].append(op.astype(np.int32))
        self.columns["layer"].append(layer.astype(np.int32))
        zeros = np.zeros(n)
        self.columns["flops"].append(zeros if flops is None else np.maximum(flops, 0.0))
        self.columns["bytes"].append(zeros if nbytes is None else np.maximum(nbytes, 0.0))

    def counter(self, name: str, unit: str, t: list[np.ndarray], value: list[np.ndarray]) -> None:
        if not t:
            return
        times = np.concatenate(t).astype(np.float64) - self.origin
        values = np.concatenate(value).astype(np.float64)
        order = np.argsort(times, kind="stable")
        self.counters[name] = Counter(name, unit, times[order], values[order])

    def events(self) -> dict[str, np.ndarray]:
        ev = {k: np.concatenate(v) if v else np.zeros(0) for k, v in self.columns.items()}
        order = np.lexsort((ev["start_ns"], ev["track"]))
        return {k: v[order] for k, v in ev.items()}


def _engine_track(b: _Builder, engine: str, core: int) -> int:
    kind = ENGINE_KINDS.get(engine.lower().replace(" ", "").replace("_", ""), "other")
    label = ENGINE_LABELS.get(kind, engine[:40] or "engine")
    return b.track(f"NC{core} {label}", kind, core)


def _instructions(t: _Table, b: _Builder) -> None:
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
        names = engines.names
        track = np.empty(len(start), np.int64)
        for c, e in sorted({(int(c), int(e)) for e, c in zip(engine.tolist(), core.tolist(), strict=True)}):
            track[(engine == e) & (core == c)] = _engine_track(b, names[e], c)
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


def _core(batch: pa.RecordBatch, fail: _Fail) -> np.ndarray:
    core = _ints(batch, "pcore_idx")
    if len(core) and (core.min() < 0 or core.max() >= 64):
        fail(f"a 'pcore_idx' of {int(core.min() if core.min() < 0 else core.max())} is not a NeuronCore's index")
    return core


def _dma(t: _Table, b: _Builder) -> None:
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
        names = types.names
        track = np.empty(len(start), np.int64)
        for c, q in sorted({(int(c), int(q)) for q, c in zip(qtype.tolist(), core.tolist(), strict=True)}):
            kind = "dma_write" if names[q] in WRITE_QUEUES else "dma_read"
            track[(qtype == q) & (core == c)] = b.track(f"NC{c} DMA {names[q]}", kind, c)
        op = b.ops.codes(batch, "queue_name" if batch.schema.get_field_index("queue_name") >= 0 else "queue_type",
                         missing="DMA")
        b.add(track, start, end, op, np.full(len(start), -1), None, _numbers(batch, "transfer_bytes"))


def _collectives(t: _Table, b: _Builder) -> None:
    for column, kind in (("start_ts", "int"), ("end_ts", "int"), ("operation", "text"), ("input_size", "number"),
                         ("output_size", "number")):
        t.check(column, kind)
    track = b.track("CC ops", "collective", 0)
    for batch in t.batches(["start_ts", "end_ts", "operation", "input_size", "output_size"]):
        start, end = _ints(batch, "start_ts"), _ints(batch, "end_ts")
        nbytes = np.maximum(_numbers(batch, "input_size"), _numbers(batch, "output_size"))
        b.add(np.int64(track), start, end, b.ops.codes(batch, "operation", missing="collective"),
              np.full(len(start), -1), None, nbytes)


def _cc_instructions(t: _Table, b: _Builder) -> None:
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


def _throttles(t: _Table, b: _Builder) -> None:
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


def _usage(tables: dict[str, _Table], b: _Builder, sizes: dict[str, float]) -> None:
    """The time series: SBUF and PSUM fill (of the first core: as bytes of the chip's, else as
    %), HBM and DMA throughput."""
    for table, column, name, size in (("SbufUsage", "avg_util_percent", "sbuf_bytes", sizes.get("sbuf")),
                                      ("PsumUsage", "avg_util_percent", "psum_bytes", sizes.get("psum"))):
        t = tables.get(table)
        if t is None:
            continue
        t.check("timestamp", "int")
        t.check(column, "number")
        times, values = [], []
        for batch in t.batches(["timestamp", column, "pcore_idx"]):
            first = _ints(batch, "pcore_idx") == 0
            times.append(_ints(batch, "timestamp")[first])
            values.append(_numbers(batch, column)[first])
        label = table.removesuffix("Usage").upper()
        if size:
            b.counter(name, "B", times, [v / 100 * size for v in values])
        else:
            b.counter(f"{label} %", "%", times, values)
    for table, name in (("HbmUsage", "hbm_bytes_per_s"), ("DmaUsage", "dma_bytes_per_s")):
        t = tables.get(table)
        if t is None:
            continue
        t.check("timestamp", "int")
        t.check("current_throughput", "number")
        times, values = [], []
        for batch in t.batches(["timestamp", "current_throughput", "pcore_idx"]):
            first = _ints(batch, "pcore_idx") == 0
            times.append(_ints(batch, "timestamp")[first])
            values.append(_numbers(batch, "current_throughput")[first])
        b.counter(name, "B/s", times, values)


def _plain(value: Any) -> Any:
    """A metadata value as JSON holds it (texts readable, numbers finite)."""
    if isinstance(value, str):
        return name_text(value)[:MAX_TEXT]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return value if math.isfinite(value) else None
    return name_text(str(value))[:MAX_TEXT]


def _version(metadata: dict[str, Any], fail: _Fail) -> str:
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
    tables). ``progress`` hears the share of its tables' rows read; an exception it raises stops."""
    from sim.catalogue import from_explorer  # the catalogue measures traces: it imports this package's users

    directory = profile_of(path)
    fail = _Fail(name_text(str(path)))
    if directory is None:
        fail("not a Neuron Explorer profile (a directory of Parquet tables with a Metadata table)")
    try:
        files = table_files(directory)
    except OSError as exc:
        fail(f"cannot list the profile's tables ({exc.strerror or exc})")
    tables = {name: _Table(name, parts, fail) for name, parts in files.items()}
    metadata = {k: _plain(v) for k, v in tables["Metadata"].first_row().items()}
    version = _version(metadata, fail)
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

    b = _Builder(fail, origin)
    total = max(1, sum(t.rows for n, t in tables.items() if n in _READERS))
    done = 0
    for name, reader in _READERS.items():
        if name in tables:
            reader(tables[name], b)
            done += tables[name].rows
            if progress is not None:
                progress(done / total)
    _usage(tables, b, sizes)
    summary = {k: _plain(v) for k, v in tables["Summary"].first_row().items()} if "Summary" in tables else {}
    events = b.events()
    return [_trace(b, events, metadata, version, summary, from_explorer(summary), directory, instance, facts, lnc)]


def _earliest(tables: dict[str, _Table]) -> int:
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
    layer, start = events["layer"], events["start_ns"]
    end = start + events["dur_ns"]
    inside = layer >= 0
    lo, hi = np.full(n, np.inf), np.full(n, -np.inf)
    np.minimum.at(lo, layer[inside], start[inside])
    np.maximum.at(hi, layer[inside], end[inside])
    return np.where(np.isfinite(lo), lo, 0.0), np.where(np.isfinite(hi), hi, 0.0)


def _trace(b: _Builder, events: dict[str, np.ndarray], metadata: dict, version: str, summary: dict,
           measured: dict, directory: Path, instance, facts, lnc: int) -> Trace:
    from sim.io.native import _validate_trace

    n_layers = len(b.layers.names)
    lstart, lend = _layer_spans(events, n_layers)
    op_layer = np.full(len(b.ops.names), -1, np.int32)
    first = np.unique(events["op"], return_index=True)
    op_layer[first[0]] = events["layer"][first[1]]
    end = float((events["start_ns"] + events["dur_ns"]).max()) if len(events["start_ns"]) else 0.0
    name = metadata.get("profile_name") or directory.name.split("@")[0]
    meta = {
        "model": name_text(str(name)), "mode": "imported", "source": SOURCE, "source_file": name_text(directory.name),
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
    trace = Trace(meta=meta, tracks=tuple(b.tracks), events=events, op_names=b.ops.names, op_layer=op_layer,
                  layer_names=b.layers.names, layer_kinds=("other",) * n_layers, layer_start_ns=lstart,
                  layer_end_ns=lend, counters=b.counters)
    _validate_trace(trace, b.fail)
    return trace


_READERS: dict[str, Callable[[_Table, _Builder], None]] = {
    "Instruction": _instructions, "DmaPacket": _dma, "CcOp": _collectives, "CcInstruction": _cc_instructions,
    "Throttle": _throttles,
}

"""The native ``.nvtrace`` file: a zip of a JSON manifest and compressed columns, no pickle.

One file holds one or more runs (a whole side-by-side comparison). Since format 4 each column is
one zstd frame of the differences between its values (:mod:`sim.io.columns`), about a byte an
event; before, each was an uncompressed ``.npy`` array, which still loads. Saving writes a
temporary file beside the target and renames it into place, so an interrupted save never damages
an existing file. Loading trusts nothing: member names, sizes, the format version, every column's
checksum, dtype and length, and the values (finite times, non-negative durations, valid
references) are checked, and any problem becomes a one-line :class:`TraceFileError`.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import struct
import tokenize
import zipfile
import zlib
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from types import UnionType
from typing import Any, BinaryIO, NoReturn, Union, get_args, get_origin, get_type_hints

import numpy as np
import orjson
import xxhash

from sim.description import hardware_of
from sim.errors import TraceFileError, UnknownNameError
from sim.hardware.chip import all_chips, get_chip
from sim.hardware.instances import get_instance
from sim.io import columns
from sim.io.atomic import atomic_file
from sim.io.inputs import NotRegularFileError, open_regular, valid_texts
from sim.trace import EVENT_COLUMNS, TRACE_FORMAT_VERSION, Counter, Trace, Track

FORMAT_NAME = "nvtrace"
SUFFIX = ".zst"  # a column's member since format 4: one zstd frame (sim.io.columns); before, a .npy array
MANIFEST = "manifest.json"
MAX_MEMBER_BYTES = 4 << 30  # one column of a billion-event trace still fits
MAX_TOTAL_BYTES = 16 << 30
MAX_MANIFEST_BYTES = 256 << 20
# a column deflated more than this is treated as a zip bomb (the manifest, which neuronviz deflates
# and a run's repeated names shrink far more, is bounded by MAX_MANIFEST_BYTES instead)
MAX_RATIO = 200
READ_CHUNK = 1 << 20  # a compressed member is inflated this much at a time, never all at once
ENCRYPTED = 0x1  # the zip's general-purpose flag of an encrypted member (APPNOTE.TXT 4.4.4)
# what a member may be: neuronviz stores its columns, and another zip tool deflates them; any
# other method is refused by name (bzip2 and LZMA inflate a read without bound in zipfile)
COMPRESSION_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
# what one file may hold: a comparison is a few runs; a trace's tracks and counters are its
# engines and queues (a file beyond these is refused before any work grows with them)
MAX_RUNS = 256
MAX_TRACKS = 4096
MAX_COUNTERS = 1024
# the furthest from its start any time of a trace lies: 3,170 years of nanoseconds hold any run,
# and any trace's epoch timestamps once shifted to its first; a time beyond is damage. Times this
# far apart still sum, scale and draw as finite float64
MAX_TIME_NS = 1e20
MAX_VALUE = 1e30  # any other number (FLOPs, bytes, a counter's value): far beyond any run's, far below overflow


def _run_columns(trace: Trace, prefix: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A run's manifest entry (without its columns' entries) and its columns by member name."""
    arrays = {f"{prefix}/events/{k}{SUFFIX}": v for k, v in trace.events.items()}
    arrays[f"{prefix}/op_layer{SUFFIX}"] = trace.op_layer
    arrays[f"{prefix}/layer_start_ns{SUFFIX}"] = trace.layer_start_ns
    arrays[f"{prefix}/layer_end_ns{SUFFIX}"] = trace.layer_end_ns
    counters = []
    for i, c in enumerate(trace.counters.values()):
        arrays[f"{prefix}/counters/{i}/t_ns{SUFFIX}"] = c.t_ns
        arrays[f"{prefix}/counters/{i}/value{SUFFIX}"] = c.value
        counters.append({"name": c.name, "unit": c.unit})
    # an op's name is an index into the run's distinct names (a decoder's tens of thousands of ops
    # have a few dozen names, which JSON would spell out again for every op)
    table = list(dict.fromkeys(trace.op_names))
    index = {name: i for i, name in enumerate(table)}
    arrays[f"{prefix}/op_name{SUFFIX}"] = np.array([index[n] for n in trace.op_names], np.int32)
    # the per-layer counts of the metadata are columns too
    meta = valid_texts(dict(trace.meta))
    stats = meta.pop("layer_stats", None) or {}
    for key, values in stats.items():
        arrays[f"{prefix}/layer_stats/{key}{SUFFIX}"] = np.asarray(values, np.float64)
    run = {
        "path": prefix, "meta": meta, "tracks": [[t.name, t.kind, t.core] for t in trace.tracks],
        "op_name_table": table, "layer_stats": list(stats), "layer_names": list(trace.layer_names),
        "layer_kinds": list(trace.layer_kinds), "counters": counters,
    }
    return run, arrays


def read_problem(exc: OSError) -> str:
    """What went wrong opening or reading a trace file, in the words every loader uses."""
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if isinstance(exc, IsADirectoryError):
        return "is a directory, not a trace file"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, NotRegularFileError):
        return exc.strerror
    return f"cannot read ({exc.strerror or exc})"


# every member is dated the zip epoch, so the same runs always make the same bytes
MEMBER_TIME = (1980, 1, 1, 0, 0, 0)


def save_traces(path: str | os.PathLike, traces: Sequence[Trace]) -> None:
    """Write ``traces`` to ``path`` atomically (temporary file, then rename). Each column is a
    zstd frame of its differences (:mod:`sim.io.columns`) whose manifest entry carries its XXH3-64
    checksum, which loading verifies before inflating it."""
    with atomic_file(Path(path)) as f, zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as zf:
        runs, members = [], {}
        for i, trace in enumerate(traces):
            run, arrays = _run_columns(trace, f"run{i}")
            run["arrays"] = {}
            for name, array in arrays.items():
                spec, members[name] = columns.encode(array)
                run["arrays"][name] = {**spec, "xxh3": xxhash.xxh3_64_hexdigest(members[name])}
            runs.append(run)
        manifest = {"format": FORMAT_NAME, "version": TRACE_FORMAT_VERSION, "runs": runs}
        # the manifest spells out every layer's name: deflated, a decoder's takes a fifteenth of the bytes
        zf.writestr(zipfile.ZipInfo(MANIFEST, date_time=MEMBER_TIME), json.dumps(manifest, allow_nan=False),
                    zipfile.ZIP_DEFLATED)
        for name, frame in members.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=MEMBER_TIME), frame)


def decoded_bytes(zf: zipfile.ZipFile) -> int:
    """What a trace file's columns take once decoded, by its manifest (format 4 stores them
    compressed: the members' sizes say far less); 0 when its manifest does not say."""
    try:
        info = zf.getinfo(MANIFEST)
        if info.file_size > MAX_MANIFEST_BYTES:
            return 0
        with zf.open(MANIFEST) as f:  # inflated no further than it declares: a bomb is cut short, not read
            text = f.read(info.file_size + 1)
        if len(text) > info.file_size:
            return 0
        manifest = orjson.loads(text)
        # each member once: a manifest naming one member for several runs does not multiply the work
        specs = {name: spec for run in manifest["runs"] for name, spec in run["arrays"].items()}
        return sum(int(spec["length"]) * np.dtype(spec["dtype"]).itemsize for spec in specs.values())
    except (KeyError, TypeError, ValueError, AttributeError, OSError, zipfile.BadZipFile, RuntimeError, zlib.error,
            EOFError, NotImplementedError):  # a manifest that cannot be read: its open says why, in one line
        return 0


_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, then the name and extra field lengths at offset 26
_NPY_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
# the header numpy writes for a one-dimensional array of plain numbers (.npy format 1.0): read with
# this pattern, anything else by numpy's reader (which parses it as a Python literal, ten times slower)
_PLAIN_NPY_HEADER = re.compile(rb"\x93NUMPY\x01\x00(..)\{'descr': '([<>|=][fiub][1248])', 'fortran_order': False, "
                               rb"'shape': \((\d+),\), \} *\n", re.DOTALL)


def _npy_header(head: bytes) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """The shape, Fortran order, dtype and data offset of a .npy member from its first bytes."""
    m = _PLAIN_NPY_HEADER.match(head)
    if m and m.end() == 10 + int.from_bytes(m[1], "little"):
        return (int(m[3]),), False, np.dtype(m[2].decode()), m.end()
    f = io.BytesIO(head)
    version = np.lib.format.read_magic(f)
    if version not in _NPY_HEADER_READERS:
        raise ValueError(f"unsupported .npy version {version}")
    shape, fortran, dtype = _NPY_HEADER_READERS[version](f)
    return shape, fortran, dtype, f.tell()


class _Reader:
    """Validated access to the members of one file.

    A column of format 4 is a zstd frame, checked against the XXH3-64 of its manifest entry before
    it is inflated, and only when its size is one its declared column can have (a frame inflates
    at most :data:`columns.ZSTD_MAX_RATIO` times): what inflating holds is the declared column,
    exactly, or an error. A column of the formats before is an uncompressed .npy array, read
    straight from the file into an array of its own, as ``numpy.load`` reads a .npy file, and
    checked against its checksum: the XXH3-64 its manifest entry gives (format 1.1), else the
    zip's CRC-32 (older files). Either way a damaged byte is an error, never different data.
    Compressed members (a file re-zipped by another tool) are decompressed, with their CRC
    checked, by :mod:`zipfile`. Each member serves one array of one run: a manifest pointing
    several runs at the same columns cannot multiply the work.
    """

    def __init__(self, f: BinaryIO, label: str) -> None:
        self.label = label
        self.zf = zipfile.ZipFile(f)
        self.fd = f.fileno()
        total = 0
        self.inflated = 0  # bytes the columns read so far inflated to
        self.used: set[str] = set()
        self.infos: dict[str, zipfile.ZipInfo] = {}
        for info in self.zf.infolist():
            name = info.filename
            if name.startswith(("/", "\\")) or ".." in name.split("/") or "\\" in name or ":" in name:
                self.fail(f"unsafe member name '{name}'")
            if info.flag_bits & ENCRYPTED:
                self.fail(f"member '{name}' is encrypted (a trace file never is)")
            if info.compress_type not in COMPRESSION_METHODS:
                method = zipfile.compressor_names.get(info.compress_type, f"method {info.compress_type}")
                self.fail(f"member '{name}' is compressed with {method}, which a trace file never is "
                          f"(only {' or '.join(COMPRESSION_METHODS.values())})")
            ratio = info.file_size / info.compress_size if info.compress_size else 1.0
            bomb = ratio > MAX_RATIO and info.file_size > 1 << 20 and name != MANIFEST
            if info.file_size > MAX_MEMBER_BYTES or bomb:
                self.fail(f"member '{name}' is implausibly large")
            total += info.file_size
            self.infos[name] = info
        if total > MAX_TOTAL_BYTES:
            self.fail("contents are implausibly large")

    def fail(self, problem: str) -> NoReturn:
        raise TraceFileError(f"{self.label}: {problem}")

    def _info(self, name: str) -> zipfile.ZipInfo:
        info = self.infos.get(name)
        if info is None:
            self.fail(f"missing member '{name}'")
        return info

    def read(self, name: str, limit: int = MAX_MEMBER_BYTES) -> bytearray:
        """A whole member, inflated :data:`READ_CHUNK` at a time: however much its data would
        inflate to, what is held is at most its declared size (zipfile stops there, and checks the
        CRC once it is reached)."""
        info = self._info(name)
        if info.file_size > limit:
            self.fail(f"member '{name}' is implausibly large")
        out = bytearray()
        with self._open(info) as member:
            while chunk := self._inflate(member, READ_CHUNK):
                out += chunk
        return out

    def _open(self, info: zipfile.ZipInfo) -> zipfile.ZipExtFile:
        try:
            return self.zf.open(info)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError,
                zlib.error) as exc:
            self.fail(f"member '{info.filename}' is damaged ({exc})")

    def _inflate(self, member: zipfile.ZipExtFile, size: int) -> bytes:
        try:
            return member.read(size)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as exc:
            self.fail(f"member '{member.name}' is damaged ({exc})")

    def _stored_start(self, info: zipfile.ZipInfo) -> int:
        """Where the bytes of an uncompressed member start in the file."""
        head = os.pread(self.fd, _LOCAL_HEADER.size, info.header_offset)
        if len(head) < _LOCAL_HEADER.size:
            self.fail(f"member '{info.filename}' is truncated")
        signature, name_len, extra_len = _LOCAL_HEADER.unpack(head)
        if signature != b"PK\x03\x04":
            self.fail(f"member '{info.filename}' is damaged or truncated")
        return info.header_offset + _LOCAL_HEADER.size + name_len + extra_len

    def _claim(self, name: str) -> zipfile.ZipInfo:
        info = self._info(name)
        if name in self.used:
            self.fail(f"member '{name}' is used twice (each column belongs to one run)")
        self.used.add(name)
        return info

    def column(self, name: str, spec: dict) -> np.ndarray:
        """A column of format 4: its frame's size checked against the column its manifest entry
        declares, its checksum, then the column it inflates to."""
        info = self._claim(name)
        try:
            size = columns.inflated_size(spec)
        except columns.ColumnError as exc:
            self.fail(f"array '{name}' {exc}")
        fewest, most = columns.frame_bounds(size)
        self.inflated += size
        if size > MAX_MEMBER_BYTES or self.inflated > MAX_TOTAL_BYTES or info.file_size < fewest:
            self.fail(f"member '{name}' is implausibly large (more than its bytes inflate to)")
        if info.file_size > most:
            self.fail(f"member '{name}' holds more bytes than its column needs")
        if info.compress_type == zipfile.ZIP_STORED:
            frame = os.pread(self.fd, info.file_size, self._stored_start(info))
        else:
            frame = self.read(name, info.file_size)
        if len(frame) != info.file_size:
            self.fail(f"member '{name}' is truncated")
        if spec.get("xxh3") != xxhash.xxh3_64_hexdigest(frame):
            self.fail(f"member '{name}' is damaged (its checksum does not match)")
        try:
            return columns.decode(spec, frame)
        except columns.ColumnError as exc:
            self.fail(f"member '{name}' {exc}")

    def array(self, name: str, spec: dict) -> np.ndarray:
        """A column of the formats before 4: a .npy array."""
        info = self._claim(name)
        digest = spec.get("xxh3")
        if digest is not None and not isinstance(digest, str):
            self.fail(f"member '{name}' is damaged (its checksum does not match)")
        stored = info.compress_type == zipfile.ZIP_STORED
        if stored:
            start = self._stored_start(info)
            head_bytes = os.pread(self.fd, min(info.file_size, 1 << 16), start)
        else:  # inflated as it is read: the header is checked before the column is
            member = self._open(info)
            head_bytes = self._inflate(member, min(info.file_size, 1 << 16))
        try:
            shape, fortran, dtype, offset = _npy_header(head_bytes)
        except (ValueError, OSError, EOFError, SyntaxError, TypeError, tokenize.TokenError) as exc:
            self.fail(f"member '{name}' is not a plain .npy array ({exc})")
        if dtype.hasobject:
            self.fail(f"member '{name}' is not a plain array (it holds Python objects, which would need pickle)")
        count = shape[0] if len(shape) == 1 else -1
        if fortran or dtype.str != spec.get("dtype") or count != spec.get("length"):
            self.fail(f"array '{name}' does not match the manifest (dtype {dtype}, shape {shape})")
        if info.file_size - offset != count * dtype.itemsize:
            self.fail(f"member '{name}' is truncated or has trailing data")
        a = np.empty(count, dtype)
        if stored:
            if os.preadv(self.fd, [a], start + offset) != a.nbytes:
                self.fail(f"member '{name}' is truncated")
        else:
            with member:
                self._inflate_into(member, memoryview(a).cast("B"), head_bytes[offset:])
        parts = (head_bytes[:offset], a)
        if digest is not None:
            h = xxhash.xxh3_64()
            for part in parts:
                h.update(part)
            if h.hexdigest() != digest:
                self.fail(f"member '{name}' is damaged (its checksum does not match)")
        elif stored and zlib.crc32(a, zlib.crc32(head_bytes[:offset])) != info.CRC:
            self.fail(f"member '{name}' is damaged (its CRC-32 does not match)")
        return a


    def _inflate_into(self, member: zipfile.ZipExtFile, out: memoryview, first: bytes) -> None:
        """Fill ``out`` with the rest of a compressed member (``first`` its next bytes), a chunk at
        a time, to its declared end (where zipfile checks its CRC)."""
        done = len(first)
        out[:done] = first
        while done < len(out):
            chunk = self._inflate(member, min(READ_CHUNK, len(out) - done))
            if not chunk:
                self.fail(f"member '{member.name}' is truncated")
            out[done:done + len(chunk)] = chunk
            done += len(chunk)


def _check_version(manifest: dict, fail) -> int:
    """The file's major format version, one this reader reads."""
    if manifest.get("format") != FORMAT_NAME:
        fail("not a neuronviz trace (no nvtrace manifest)")
    version = str(manifest.get("version", ""))
    major = version.split(".")[0]
    if not major.isdigit():
        fail(f"unreadable format version '{version}'")
    ours = int(TRACE_FORMAT_VERSION.split(".")[0])
    if int(major) > ours:
        fail(f"written by a newer neuronviz (format {version}, this one reads {ours}.x): upgrade neuronviz")
    return int(major)


_META_NUMBERS = ("batch", "copies", "cores_per_copy")  # what the metrics read
_DECODE_NUMBERS = ("prefill_ns", "per_token_ns")
_PHASE_NUMBERS = ("start_ns", "end_ns", "repeat")  # the metrics count unstored repeats from them


def _valid_phases(phases: Any) -> bool:
    """A list of phases, each with finite numbers and, if it says, at least one execution stored
    (files of simulator 1.0 stored every execution and do not say), or none and the index of an
    earlier phase with some stored (``same_as``) standing for them."""
    def valid(i: int, p: Any) -> bool:
        numbers = [p.get(k) for k in _PHASE_NUMBERS] + [p.get("stored", 1)] if isinstance(p, dict) else [None]
        if not all(type(v) in (int, float) and np.isfinite(v) for v in numbers):
            return False
        if numbers[-1] >= 1:
            return True
        j = p.get("same_as")
        return numbers[-1] == 0 and type(j) is int and 0 <= j < i and phases[j].get("stored", 1) >= 1

    return isinstance(phases, list) and all(valid(i, p) for i, p in enumerate(phases))


# what the metrics, the analysis and the app read of a run's metadata, by type (present or not:
# the required ones are checked on their own)
_META_COUNTS = ("batch", "seq", "copies", "cores_per_copy", "lnc", "grad_accum", "nodes", "data_parallel",
                "pipeline", "requests", "concurrency", "new_tokens", "cores_active", "cores_active_under_load",
                "kv_heads_per_core", "optlevel")
_META_NUMBERS_OPTIONAL = ("total_ns", "price_usd_per_hour", "peak_flops_per_core", "memory_per_core_bytes",
                          "weight_refetch_bytes", "rate", "prefill_ns", "per_token_ns")
_META_TEXTS = ("chip", "chip_name", "instance", "model", "model_type", "family", "dtype", "matmul_dtype", "source_file")
_META_REQUIRED = ("chip", "instance", "model", "dtype", "seq")  # what every run's record names ("" when it has none)
_META_TABLES = ("config", "layer_stats", "speculation", "precision", "serving", "under_load", "single_node",
                "profile", "measured")
# no price, no rate, no chip data, a compiler without optimization levels (Inferentia1's)
_META_MAY_BE_NULL = ("price_usd_per_hour", "rate", "peak_flops_per_core", "optlevel")
_SERVING_REQUESTS = ("sent_ns", "first_token_ns", "finish_ns", "output_tokens")
_SERVING_STEPS = ("step_end_ns", "step_tokens")


def _number(value: Any) -> bool:
    return type(value) in (int, float) and bool(np.isfinite(value)) and value >= 0


def _numbers(value: Any) -> bool:
    """A list of finite, non-negative numbers (checked as one array: these lists run to a value
    per layer or per request)."""
    if not isinstance(value, list):
        return False
    if not value:
        return True
    try:
        a = np.array(value)
    except (ValueError, OverflowError):  # ragged nesting
        return False
    return a.ndim == 1 and a.dtype.kind in "iuf" and bool(a.min() >= 0) and _finite(a)


def _validate_meta(meta: Any, fail, stats_checked: bool = False) -> None:
    """The metadata every run needs to be shown and measured, with sane types: every field a
    consumer reads is of its type when present, the required ones are there."""
    def number(key: str, required: bool = True) -> None:
        value = meta.get(key)
        if value is None and not required:
            return
        if not _number(value):
            fail(f"run metadata '{key}' is {'missing' if value is None else 'not a non-negative number'}")

    if not isinstance(meta.get("mode"), str):
        fail("run metadata 'mode' is missing")
    for key in _META_NUMBERS:
        number(key)
    for key in _META_REQUIRED:
        if key not in meta:
            fail(f"run metadata '{key}' is missing")
    for key in _META_NUMBERS_OPTIONAL:  # present means a number (or null where null has a meaning)
        if key in meta and not (meta[key] is None and key in _META_MAY_BE_NULL):
            number(key)
    for key in _META_COUNTS:
        if key in meta and (type(meta[key]) is not int or meta[key] < 1) and not (
                meta[key] is None and key in _META_MAY_BE_NULL):
            fail(f"run metadata '{key}' is not a positive whole number")
    for key in _META_TEXTS:
        if key in meta and not isinstance(meta[key], str):
            fail(f"run metadata '{key}' is not text")
    for key in _META_TABLES:
        if key in meta and not isinstance(meta[key], dict) and not (meta[key] is None and key in _META_MAY_BE_NULL):
            fail(f"run metadata '{key}' is not a table")
    _validate_chip(meta["chip"], meta["instance"], fail)
    if "hardware" in meta:  # the facts the views read instead of the chip data (sim.description)
        try:
            facts = hardware_of(meta)
        except ValueError as exc:
            fail(f"run metadata 'hardware' {exc}")
        if facts.chip != meta["chip"]:
            fail(f"run metadata 'hardware' is of {facts.chip}, not of the run's chip {meta['chip']}")
    _validate_config(meta.get("config") or {}, fail)
    if meta["mode"] == "decode":
        for key in _DECODE_NUMBERS:
            number(key)
    wanted = ("total_ns", *(_DECODE_NUMBERS if meta["mode"] == "decode" else ()))
    for key in ("under_load", "single_node"):  # the same run's times with every copy busy, on one instance
        times = meta.get(key) or {}
        if times and not all(_number(times.get(k)) for k in wanted):
            fail(f"run metadata '{key}' is not a table of {', '.join(wanted)}")
    if meta["mode"] == "serve":
        _validate_serving(meta.get("serving"), fail)
    stats = meta.get("layer_stats") or {}
    if not stats_checked and not all(_numbers(v) for v in stats.values()):
        fail("run metadata 'layer_stats' is not a table of lists of numbers")
    if not _valid_phases(meta.get("phases", [])):
        fail("run metadata 'phases' is not a list of phases with start_ns, end_ns, repeat and stored")


def _validate_chip(chip: str, instance: str, fail) -> None:
    """The chip a run names, which its views and metrics look up: a known one, and the one of its
    instance when that is a known instance (a trace of another tool names neither)."""
    if not chip and not instance:
        return
    if not chip:
        fail("run metadata 'chip' is missing")
    try:
        key = get_chip(chip).key
    except UnknownNameError:
        fail(f"run metadata 'chip' is not a known chip (one of {', '.join(all_chips())})")
    try:
        of = get_instance(instance).chip.key
    except UnknownNameError:
        return
    if of != key:
        fail(f"run metadata 'instance' is an instance of {of}, not of the run's chip {key}")


@cache
def _config_fields() -> dict[str, Any]:
    """The type of each field of the configuration a run keeps (``meta["config"]``, its RunConfig)."""
    from sim.run import RunConfig  # the simulator's declaration; not loaded until a file is

    return get_type_hints(RunConfig)


def _fits(value: Any, hint: Any) -> bool:
    """Whether a JSON value is of a RunConfig field's type (a tuple is a JSON array)."""
    if get_origin(hint) in (Union, UnionType):
        return any(_fits(value, h) for h in get_args(hint))
    if get_origin(hint) is tuple:
        return isinstance(value, list) and all(_fits(v, get_args(hint)[0]) for v in value)
    if hint is float:
        return type(value) in (int, float) and math.isfinite(value)
    return type(value) is hint


def _validate_config(config: dict, fail) -> None:
    """A run's configuration, which the app simulates again (Scaling, Sweep): every field it knows
    of its type (fields of other versions are left alone)."""
    types = _config_fields()
    for key, value in config.items():
        if key in types and not _fits(value, types[key]):
            fail(f"run metadata 'config' has '{key}' of the wrong type ({_json_type(value)})")


def _json_type(value: Any) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", str: "text", list: "a list", dict: "a table",
            type(None): "null"}.get(type(value), type(value).__name__)


def _validate_serving(serving: Any, fail) -> None:
    """A serving run's record: per request and per step, lists of numbers of one length each."""
    problem = "run metadata 'serving' is not a record of requests and steps"
    if not isinstance(serving, dict):
        fail(problem)
    for names in (_SERVING_REQUESTS, _SERVING_STEPS):
        columns = [serving.get(k) for k in names]
        if not all(_numbers(c) for c in columns) or len({len(c) for c in columns}) != 1:
            fail(problem)
    if not serving["finish_ns"] or not isinstance(serving.get("itl_ns"), dict) or not all(
            _number(v) for v in serving["itl_ns"].values()):
        fail(problem)


def _finite(a: np.ndarray) -> bool:
    """No NaN or infinity in ``a``: its sum is finite (one pass, no temporary array), or, for the
    values so large that their sum overflows, each of them is."""
    if a.dtype.kind in "iub":
        return True
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(a.sum())) or bool(np.isfinite(a).all())


def _within(a: np.ndarray, bound: float) -> bool:
    """Every value of ``a`` lies in [-bound, bound] (NaN does not)."""
    return not len(a) or bool(a.min() >= -bound and a.max() <= bound)


def _events_within(start: np.ndarray, dur: np.ndarray) -> bool:
    """Every event starts and ends within :data:`MAX_TIME_NS` of 0 (its start and duration are
    checked first, so their sum cannot overflow)."""
    if not (_within(start, MAX_TIME_NS) and _within(dur, MAX_TIME_NS)):
        return False
    return not len(start) or bool((start + dur).max() <= MAX_TIME_NS)


_FINITE_BITS = np.uint64(0x7FF0000000000000)  # float64 bit patterns below this: +0.0 up to the largest finite


def _non_negative_finite(a: np.ndarray) -> bool:
    """Every value of a float64 column is a finite number >= 0, in one pass: read as unsigned
    integers, those are exactly the patterns below +inf's (a negative value has its sign bit set,
    a NaN lies above inf). -0.0, which that pass refuses, gets the exact two-pass check."""
    if not len(a) or a.view(np.uint64).max() < _FINITE_BITS:
        return True
    return bool(a.min() >= 0) and bool(np.isfinite(a.max()))


def _indices_below(a: np.ndarray, n: int) -> bool:
    """Every value of an integer column lies in [0, n), in one pass: a signed column is read as
    unsigned, where a negative value is at least 2^(bits-1)."""
    bound = min(n, 1 << (8 * a.itemsize - 1))
    return not len(a) or int(a.view(a.dtype.str.replace("i", "u")).max()) < bound


def _validate_trace(trace: Trace, fail, stats_checked: bool = False) -> None:
    """Everything a run's consumers rely on (``stats_checked``: its layer statistics were checked
    as the columns they were read from)."""
    _validate_meta(trace.meta, fail, stats_checked)
    kinds = [("op_layer", trace.op_layer, "iu"), ("layer_start_ns", trace.layer_start_ns, "fiu"),
             ("layer_end_ns", trace.layer_end_ns, "fiu")]
    for c in trace.counters.values():
        kinds += [(f"counter '{c.name}' times", c.t_ns, "fiu"), (f"counter '{c.name}' values", c.value, "fiu")]
    for what, a, allowed in kinds:
        if a.dtype.kind not in allowed:
            fail(f"{what} hold {a.dtype} values, not numbers")
    ev = trace.events
    n_tracks, n_ops, n_layers = len(trace.tracks), len(trace.op_names), len(trace.layer_names)
    if not _finite(ev["start_ns"]):
        fail("event times are not finite numbers")
    if not _non_negative_finite(ev["dur_ns"]):
        fail("an event has a negative duration" if ev["dur_ns"].min() < 0 else "event times are not finite numbers")
    if not _events_within(ev["start_ns"], ev["dur_ns"]):
        fail(f"an event lies more than {MAX_TIME_NS:.0e} ns from the trace's start (3,170 years)")
    for column in ("flops", "bytes"):
        if not (_non_negative_finite(ev[column]) and _within(ev[column], MAX_VALUE)):
            fail(f"event {column} are not finite, non-negative numbers of at most {MAX_VALUE:.0e}")
    if not _indices_below(ev["track"], n_tracks):
        fail("an event refers to a track that does not exist")
    if not _indices_below(ev["op"], n_ops):
        fail("an event refers to an op that does not exist")
    for name, col in (("event", ev["layer"]), ("op", trace.op_layer)):  # -1: in no layer (the host's work)
        if not _indices_below(col.astype(np.int64) + 1, n_layers + 1):
            fail(f"an {name} refers to a layer that does not exist")
    if len(trace.op_layer) != n_ops or len(trace.layer_start_ns) != n_layers or len(trace.layer_kinds) != n_layers:
        fail("op and layer tables have inconsistent lengths")
    if any(len(v) != n_layers for v in (trace.meta.get("layer_stats") or {}).values()):
        fail("run metadata 'layer_stats' does not have one value per layer")
    if not (_within(trace.layer_start_ns, MAX_TIME_NS) and _within(trace.layer_end_ns, MAX_TIME_NS)
            and np.all(trace.layer_end_ns >= trace.layer_start_ns)):
        fail("a layer span is not a valid interval")
    for c in trace.counters.values():
        t = c.t_ns  # times that rise from a first to a last within the bounds all lie within them (NaN fails >=)
        times = not len(t) or bool(abs(t[0]) <= MAX_TIME_NS and abs(t[-1]) <= MAX_TIME_NS and np.all(t[1:] >= t[:-1]))
        if len(t) != len(c.value) or not (times and _within(c.value, MAX_VALUE)):
            fail(f"counter '{c.name}' is not a valid time series")


def _strings(value: Any, fail, what: str) -> tuple[str, ...]:
    try:  # str.join takes only strings (and, in C, walks the list faster than a type check would)
        if not isinstance(value, list) or not isinstance("".join(value), str):
            raise TypeError
    except TypeError:
        fail(f"{what} must be a list of strings")
    return tuple(value)


def _run(reader: _Reader, run: Any, major: int) -> Trace:
    fail = reader.fail
    if not isinstance(run, dict) or not isinstance(run.get("arrays"), dict) or not isinstance(run.get("meta"), dict):
        fail("a run entry of the manifest is malformed")
    prefix, specs = run.get("path"), run["arrays"]
    if not isinstance(prefix, str):
        fail("a run entry has no path")

    def arr(name: str) -> np.ndarray:
        full = f"{prefix}/{name}{SUFFIX if major >= 4 else '.npy'}"
        if not isinstance(specs.get(full), dict):
            fail(f"the manifest does not describe '{full}'")
        return reader.column(full, specs[full]) if major >= 4 else reader.array(full, specs[full])

    tracks_raw = run.get("tracks")
    if isinstance(tracks_raw, list) and len(tracks_raw) > MAX_TRACKS:
        fail(f"a run has {len(tracks_raw):,} tracks (at most {MAX_TRACKS:,})")
    if isinstance(run.get("counters"), list) and len(run["counters"]) > MAX_COUNTERS:
        fail(f"a run has {len(run['counters']):,} counters (at most {MAX_COUNTERS:,})")
    if not isinstance(tracks_raw, list) or not all(
            isinstance(t, list) and len(t) == 3 and isinstance(t[0], str) and isinstance(t[1], str)
            and isinstance(t[2], int) for t in tracks_raw):
        fail("the track table is malformed")
    counters_raw = run.get("counters")
    if not isinstance(counters_raw, list) or not all(isinstance(c, dict) for c in counters_raw):
        fail("the counter table is malformed")
    counters = {}
    for i, c in enumerate(counters_raw):
        name, unit = c.get("name"), c.get("unit")
        if not isinstance(name, str) or not isinstance(unit, str):
            fail("a counter has no name or unit")
        counters[name] = Counter(name, unit, arr(f"counters/{i}/t_ns"), arr(f"counters/{i}/value"))
    events = {k: arr(f"events/{k}") for k in EVENT_COLUMNS}
    for k, dtype in EVENT_COLUMNS.items():
        if events[k].dtype != np.dtype(dtype):
            fail(f"event column '{k}' has dtype {events[k].dtype}, expected {np.dtype(dtype)}")
    if len({len(v) for v in events.values()}) > 1:
        fail("event columns have different lengths")
    if major < 2:
        op_names = _strings(run.get("op_names"), fail, "op names")
    else:
        table = _strings(run.get("op_name_table"), fail, "op names")
        index = arr("op_name")
        if index.dtype.kind not in "iu" or not _indices_below(index, len(table)):
            fail("an op refers to a name that does not exist")
        op_names = tuple(np.array(table, dtype=object)[index]) if table else ()
    meta, stats_checked = run["meta"], False
    if major >= 2 and run.get("layer_stats"):
        if "layer_stats" in meta:
            fail("run metadata 'layer_stats' is given twice (as columns and in the metadata)")
        stats = {}
        for key in _strings(run["layer_stats"], fail, "layer statistics"):
            column = arr(f"layer_stats/{key}")
            if column.dtype != np.float64 or not _non_negative_finite(column):
                fail("run metadata 'layer_stats' is not a table of lists of numbers")
            stats[key] = column.tolist()
        meta, stats_checked = {**meta, "layer_stats": stats}, True
    trace = Trace(
        meta=meta, tracks=tuple(Track(*t) for t in tracks_raw), events=events,
        op_names=op_names, op_layer=arr("op_layer"),
        layer_names=_strings(run.get("layer_names"), fail, "layer names"),
        layer_kinds=_strings(run.get("layer_kinds"), fail, "layer kinds"),
        layer_start_ns=arr("layer_start_ns"), layer_end_ns=arr("layer_end_ns"), counters=counters,
    )
    _validate_trace(trace, fail, stats_checked=stats_checked)
    return trace


def load_traces(path: str | os.PathLike) -> list[Trace]:
    """Read every run of a ``.nvtrace`` file; any problem raises a one-line :class:`TraceFileError`."""
    label = str(path)
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_TOTAL_BYTES:
                raise TraceFileError(f"{label}: the file is implausibly large ({size:,} bytes)")
            reader = _Reader(f, label)
            try:
                manifest = orjson.loads(reader.read(MANIFEST, MAX_MANIFEST_BYTES))
            except orjson.JSONDecodeError:
                reader.fail("the manifest is not valid JSON")
            if not isinstance(manifest, dict):
                reader.fail("the manifest is not a JSON object")
            major = _check_version(manifest, reader.fail)
            runs = manifest.get("runs")
            if not isinstance(runs, list) or not runs:
                reader.fail("the file holds no runs")
            if len(runs) > MAX_RUNS:
                reader.fail(f"the file holds {len(runs):,} runs (at most {MAX_RUNS:,})")
            return [_run(reader, r, major) for r in runs]
    except (zipfile.BadZipFile, EOFError, NotImplementedError):  # the last: a damaged "version needed to extract"
        raise TraceFileError(f"{label}: not a neuronviz trace file (damaged or truncated zip)") from None
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        # a safety net: every problem found above has its own message; this keeps the promise of
        # one-line TraceFileErrors for shapes of input nobody has thought of
        raise TraceFileError(f"{label}: not a readable neuronviz trace ({type(exc).__name__}: {exc})") from None
    except OSError as exc:
        raise TraceFileError(f"{label}: {read_problem(exc)}") from None

"""Seeded corpora of damaged and hostile files, shared by the loader's fuzz harness
(``tests/sim/test_fuzz.py``, ``bench/bench_fuzz.py``) and the app's (``tests/neuronviz/test_app.py``);
the hostile files of issue 49, each built by a function of its own (``HOSTILE``: read in
``tests/sim/test_hostile_files.py``, run through every command by the bench); and how a command's
time and peak memory are measured in a subprocess."""

import bz2
import copy
import gzip
import io
import json
import os
import random
import struct
import subprocess
import sys
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

MANIFEST = "manifest.json"

# values a hostile field may hold instead of its own
ODD_VALUES = (None, "", "x", [], {}, [1, 2], {"a": 1}, True, -1, 0, 10**30, -(10**30), 1e308, 0.5, "NaN", [None])


def mutate_value(rng: random.Random, value):
    """``value`` with one field somewhere inside replaced by an odd value (or removed)."""
    if isinstance(value, dict) and value and rng.random() < 0.7:
        key = rng.choice(sorted(value, key=str))
        out = dict(value)
        if rng.random() < 0.2:
            del out[key]
        else:
            out[key] = mutate_value(rng, value[key])
        return out
    if isinstance(value, list) and value and rng.random() < 0.7:
        out = list(value)
        i = rng.randrange(len(out))
        out[i] = mutate_value(rng, out[i])
        return out
    return rng.choice(ODD_VALUES)


def _mutated_manifest(rng: random.Random, data: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as zin:
        manifest = mutate_value(rng, json.loads(zin.read("manifest.json")))
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as zout:
            for info in zin.infolist():
                body = json.dumps(manifest).encode() if info.filename == "manifest.json" else zin.read(info.filename)
                zout.writestr(info.filename, body)
    return out.getvalue()


def nvtrace_cases(native: bytes, seed: int, count: int) -> Iterator[bytes]:
    """Damaged versions of the .nvtrace file ``native``: bytes flipped anywhere, cut short or with
    garbage appended, or a manifest whose fields hold values of other types and ranges."""
    rng = random.Random(20261125 + seed)
    for case in range(count):
        kind = case % 3
        if kind == 0:
            data = bytearray(native)
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            yield bytes(data)
        elif kind == 1:
            yield native[:rng.randrange(len(native))] if rng.random() < 0.7 else native + rng.randbytes(100)
        else:
            yield _mutated_manifest(rng, native)


def damaged_bytes(data: bytes, seed: int, count: int) -> Iterator[bytes]:
    """``data`` damaged: bytes flipped anywhere, cut short, or with garbage appended (a .pftrace,
    a Parquet table)."""
    rng = random.Random(20261202 + seed)
    for case in range(count):
        if case % 2 == 0:
            out = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
            yield bytes(out)
        else:
            yield data[:rng.randrange(len(data))] if rng.random() < 0.7 else data + rng.randbytes(100)


def metadata_cases(row: dict, seed: int, count: int) -> Iterator[dict]:
    """A profile's Metadata row with fields of other types and ranges (each as a Parquet column
    can hold it: a number, a text, a flag or nothing)."""
    rng = random.Random(20261203 + seed)
    values = (None, "", "x", "9.9.9", "7", "7.x", True, -1, 0, 2**62, -(2**62), 1e308, 0.5, float("nan"))
    for _ in range(count):
        out = dict(row)
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(sorted(out))
            out[key] = rng.choice(values)
        yield out


def chrome_cases(doc: dict, seed: int, count: int) -> Iterator[str]:
    """Damaged versions of the Chrome trace document ``doc``: the run metadata neuronviz writes, or
    some events, with fields of other types and ranges; every fifth cut short."""
    rng = random.Random(7 + seed)
    events = doc["traceEvents"]
    for case in range(count):
        if case % 4 == 0:
            damaged = mutate_value(rng, copy.deepcopy(doc))
        else:
            damaged = {**doc, "traceEvents": list(events)}
            picked = damaged["traceEvents"]
            for _ in range(rng.randint(1, 5)):
                i = rng.randrange(len(picked))
                picked[i] = mutate_value(rng, picked[i])
        text = json.dumps(damaged)
        yield text[:rng.randrange(len(text))] if case % 5 == 0 else text


# ----------------------------------------------------------------------------------------------
# hostile files: each built in a test (tests/sim/test_hostile_files.py) and run by the bench
# through every command that reads files (bench/bench_fuzz.py)

ZIP_DEFLATED, ZIP_BZIP2, ENCRYPTED_FLAG = 8, 12, 0x1
_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_CENTRAL = struct.Struct("<4sHHHHHHIIIHHHHHII")
_END = struct.Struct("<4sHHHHIIH")


@dataclass(frozen=True)
class Member:
    """A zip member as written: its bytes as stored, and what its headers declare."""

    name: str
    data: bytes
    method: int = 0
    size: int | None = None  # declared uncompressed size (default: len(data))
    crc: int | None = None  # declared CRC-32 (default: that of data)
    flags: int = 0


def write_zip(path: Path, members: list[Member]) -> None:
    """A zip whose headers say what ``members`` declare, whatever the data holds."""
    out, central = bytearray(), bytearray()
    for m in members:
        name = m.name.encode()
        size = len(m.data) if m.size is None else m.size
        crc = zlib.crc32(m.data) if m.crc is None else m.crc
        offset = len(out)
        out += _LOCAL.pack(b"PK\x03\x04", 20, m.flags, m.method, 0, 0x21, crc, len(m.data), size, len(name), 0)
        out += name + m.data
        central += _CENTRAL.pack(b"PK\x01\x02", 20, 20, m.flags, m.method, 0, 0x21, crc, len(m.data), size,
                                 len(name), 0, 0, 0, 0, 0, offset) + name
    out += central + _END.pack(b"PK\x05\x06", 0, 0, len(members), len(members), len(central), len(out), 0)
    path.write_bytes(bytes(out))


def members_of(seed: Path) -> list[Member]:
    """The members of a saved .nvtrace, stored as they are."""
    with zipfile.ZipFile(seed) as z:
        return [Member(i.filename, z.read(i.filename)) for i in z.infolist()]


def with_manifest(seed: Path, edit: Callable[[dict], None]) -> list[Member]:
    """The members of ``seed`` with its manifest edited in place by ``edit``."""
    members = members_of(seed)
    manifest = json.loads(members[0].data)
    edit(manifest)
    return [Member(MANIFEST, json.dumps(manifest).encode()), *members[1:]]


def edit_meta(**fields) -> Callable[[dict], None]:
    """An edit of the first run's metadata: each field set, or removed when its value is ``KeyError``."""
    def edit(manifest: dict) -> None:
        meta = manifest["runs"][0]["meta"]
        for key, value in fields.items():
            if value is KeyError:
                meta.pop(key, None)
            else:
                meta[key] = value

    return edit


def deflate_repeated(*parts: tuple[bytes, int]) -> bytes:
    """A raw deflate stream of each ``(unit, times)`` in turn: the unit compressed once and its
    blocks repeated (they refer only to themselves, so they inflate anywhere), then a last block."""
    out = b""
    for unit, times in parts:
        co = zlib.compressobj(9, zlib.DEFLATED, -15)
        out += (co.compress(unit) + co.flush(zlib.Z_FULL_FLUSH)) * times
    return out + zlib.compressobj(9, zlib.DEFLATED, -15).flush()


def gzip_bomb(head: bytes, inflated: int, tail: bytes) -> bytes:
    """A gzip file of ``head``, ``inflated`` blanks and ``tail``: gzip members one after another
    (as gzip reads them), the blanks one member compressed once and repeated."""
    unit = 64 << 20
    blanks = gzip.compress(b" " * unit, 9, mtime=0)
    return gzip.compress(head, mtime=0) + blanks * (inflated // unit) + gzip.compress(tail, mtime=0)


def chrome_json(path: Path, events: list[dict]) -> None:
    path.write_text(json.dumps({"traceEvents": events}))


def use_traces(traces: list) -> None:
    """What the app and the CLI do with a loaded file: records, analysis, export."""
    from sim.analysis import analyse
    from sim.io.chrome import export_chrome
    from sim.record import run_record

    for trace in traces:
        run_record(trace)
        analyse(trace)
    export_chrome(traces)


@dataclass(frozen=True)
class Hostile:
    """A hostile input: how to build it (from a seed .nvtrace of one simulated run) and what reading
    it must give: the one-line error (``{path}`` the file's name), or None for a file that opens. A
    trace file is read by every command that opens traces; a model config by ``simulate``."""

    suffix: str
    build: Callable[[Path, Path], None]  # (seed, path to write)
    error: str | None
    heavy: bool = False  # what the case tests is time or memory: measured in a subprocess too
    command: str = "info"  # the command a heavy case is measured with: info (reading), screenshot (drawing)

    @property
    def is_config(self) -> bool:
        return self.suffix == CONFIG_NAME


CONFIG_NAME = "config.json"
HOSTILE: dict[str, Hostile] = {}


def hostile(name: str, suffix: str, error: str | None, heavy: bool = False, command: str = "info"):
    def register(build: Callable[[Path, Path], None]) -> Callable[[Path, Path], None]:
        HOSTILE[name] = Hostile(suffix, build, error, heavy, "simulate" if suffix == CONFIG_NAME else command)
        return build

    return register


def _save_edited(seed: Path, path: Path, **changes) -> None:
    """The seed's run with ``changes`` (dataclasses.replace), saved natively."""
    from sim.io import load_file, save_file

    (trace,) = load_file(seed)
    save_file(path, [replace(trace, **changes)])


# .nvtrace: the zip ---------------------------------------------------------------------------

@hostile("encrypted zip member", ".nvtrace", "{path}: member 'manifest.json' is encrypted (a trace file never is)")
def _encrypted_member(seed: Path, path: Path) -> None:
    manifest, *rest = members_of(seed)
    write_zip(path, [replace(manifest, flags=ENCRYPTED_FLAG), *rest])


@hostile("bzip2 zip member", ".nvtrace", "{path}: member 'manifest.json' is compressed with bzip2, which a trace "
                                         "file never is (only stored or deflate)")
def _bzip2_member(seed: Path, path: Path) -> None:
    manifest, *rest = members_of(seed)
    write_zip(path, [Member(MANIFEST, bz2.compress(manifest.data), ZIP_BZIP2, len(manifest.data),
                            zlib.crc32(manifest.data)), *rest])


@hostile("manifest deflating to 2 GiB, declaring 10 KB", ".nvtrace",
         "{path}: member 'manifest.json' is damaged (Bad CRC-32 for file 'manifest.json')", heavy=True)
def _manifest_bomb(seed: Path, path: Path) -> None:
    manifest, *rest = members_of(seed)
    write_zip(path, [Member(MANIFEST, deflate_repeated((b"\0" * (64 << 20), 32)), ZIP_DEFLATED, 10_000,
                            zlib.crc32(manifest.data)), *rest])


@hostile("column deflating to 2 GiB past its declared end", ".nvtrace", None, heavy=True)
def _column_bomb(seed: Path, path: Path) -> None:
    members = members_of(seed)
    i = next(k for k, m in enumerate(members) if m.name.endswith("events/start_ns.zst"))
    column = members[i].data  # the column inflates from the stream's start; the rest is never read
    members[i] = Member(members[i].name, deflate_repeated((column, 1), (b"\0" * (64 << 20), 32)),
                        ZIP_DEFLATED, len(column), zlib.crc32(column))
    write_zip(path, members)


@hostile("column of 1 GiB at a ratio under the limit", ".nvtrace",
         "{path}: member 'run0/events/start_ns.zst' holds more bytes than its column needs", heavy=True)
def _gib_column(seed: Path, path: Path) -> None:
    members = members_of(seed)
    i = next(k for k, m in enumerate(members) if m.name.endswith("events/start_ns.zst"))
    unit = random.Random(49).randbytes(256) + bytes(32_512)  # about 120 times smaller deflated
    members[i] = Member(members[i].name, deflate_repeated((unit, (1 << 30) // len(unit))), ZIP_DEFLATED,
                        (1 << 30) // len(unit) * len(unit), 0)
    write_zip(path, members)


def _zstd(data: bytes) -> bytes:
    import pyarrow as pa

    return pa.Codec("zstd").compress(data, asbytes=True)


def _with_column(seed: Path, path: Path, name: str, frame: bytes, **spec) -> None:
    """The seed with the member ``name`` holding ``frame`` (its checksum right: a crafted file) and
    its manifest entry changed by ``spec``."""
    import xxhash

    def edit(manifest: dict) -> None:
        manifest["runs"][0]["arrays"][name].update(spec, xxh3=xxhash.xxh3_64_hexdigest(frame))

    members = [m if m.name != name else Member(name, frame) for m in with_manifest(seed, edit)]
    write_zip(path, members)


@hostile("a frame of a few bytes declaring 2^26 events", ".nvtrace",
         "{path}: member 'run0/events/start_ns.zst' is implausibly large (more than its bytes inflate to)")
def _declared_gigabytes(seed: Path, path: Path) -> None:
    _with_column(seed, path, "run0/events/start_ns.zst", _zstd(bytes(1 << 20)), length=1 << 26)


@hostile("a frame inflating to 192 MiB, declaring its column's size", ".nvtrace",
         "{path}: member 'run0/events/start_ns.zst' does not inflate to its declared size")
def _frame_bomb(seed: Path, path: Path) -> None:
    _with_column(seed, path, "run0/events/start_ns.zst", _zstd(bytes(64 << 20)) * 3)  # three frames, inflated as one


# .nvtrace: the run's description --------------------------------------------------------------

def _meta_case(name: str, error: str | None, **fields) -> None:
    hostile(name, ".nvtrace", error)(lambda seed, path: write_zip(path, with_manifest(seed, edit_meta(**fields))))


_meta_case("run without a chip", "{path}: run metadata 'chip' is missing", chip=KeyError)
_meta_case("run with an empty chip on an instance", "{path}: run metadata 'chip' is missing", chip="")
_meta_case("run on an unknown chip",
           "{path}: run metadata 'chip' is not a known chip (one of inf1, inf2, trn1, trn2, trn3)", chip="trn9")
_meta_case("run on another chip than its instance's",
           "{path}: run metadata 'instance' is an instance of inf2, not of the run's chip trn1", chip="trn1")
for _what, _seq in (("text", "128"), ("a list", [128]), ("an object", {"seq": 128}), ("a fraction", 128.5)):
    _meta_case(f"seq given as {_what}", "{path}: run metadata 'seq' is not a positive whole number", seq=_seq)
hostile("config.seq given as text", ".nvtrace",
        "{path}: run metadata 'config' has 'seq' of the wrong type (text)")(
    lambda seed, path: write_zip(path, with_manifest(seed, lambda m: m["runs"][0]["meta"]["config"].update(seq="128"))))
hostile("a 100 MB string in run metadata", ".nvtrace", None, heavy=True, command="screenshot")(
    lambda seed, path: write_zip(path, with_manifest(seed, edit_meta(model="m" * (100 << 20)))))


# .nvtrace: the events -------------------------------------------------------------------------

@hostile("event ending at 1e308 + 1e308", ".nvtrace",
         "{path}: an event lies more than 1e+20 ns from the trace's start (3,170 years)")
def _event_at_infinity(seed: Path, path: Path) -> None:
    from sim.io import load_file

    (trace,) = load_file(seed)
    events = {k: np.array(v) for k, v in trace.events.items()}
    events["start_ns"][-1] = events["dur_ns"][-1] = 1e308
    _save_edited(seed, path, events=events)


@hostile("a 50 MB layer name", ".nvtrace", None, heavy=True, command="screenshot")
def _long_layer_name(seed: Path, path: Path) -> None:
    from sim.io import load_file

    (trace,) = load_file(seed)
    _save_edited(seed, path, layer_names=("l" * (50 << 20), *trace.layer_names[1:]))


@hostile("4,096 tracks with a million events", ".nvtrace", None, heavy=True, command="screenshot")
def _most_tracks(seed: Path, path: Path) -> None:
    from sim.io.native import MAX_TRACKS
    from sim.trace import Track

    n = 1_000_000
    rng = np.random.default_rng(49)
    start = np.arange(n) * 10.0
    events = {"track": np.sort(rng.integers(0, MAX_TRACKS, n)).astype(np.int16), "start_ns": start,
              "dur_ns": np.full(n, 5.0), "op": np.zeros(n, np.int32), "layer": np.zeros(n, np.int32),
              "flops": np.zeros(n), "bytes": np.zeros(n)}
    kinds = ("tensor", "vector", "scalar", "gpsimd", "dma_read", "dma_write", "collective", "other")
    tracks = tuple(Track(f"queue {i}", kinds[i % len(kinds)], i // len(kinds)) for i in range(MAX_TRACKS))
    _save_edited(seed, path, tracks=tracks, events=events, layer_start_ns=np.zeros(1), layer_end_ns=start[-1:] + 5,
                 layer_names=("all",), layer_kinds=("other",), op_names=("op",), op_layer=np.zeros(1, np.int32),
                 meta={**_seed_meta(seed), "phases": [], "total_ns": float(start[-1] + 5), "layer_stats": {}})


@hostile("256 runs", ".nvtrace", None, heavy=True)
def _most_runs(seed: Path, path: Path) -> None:
    """The most runs a file holds: it reads; the app and screenshot show 32 of them at most."""
    from sim.io import load_file, save_file
    from sim.io.native import MAX_RUNS

    save_file(path, load_file(seed) * MAX_RUNS)


def _seed_meta(seed: Path) -> dict:
    from sim.io import load_file

    return dict(load_file(seed)[0].meta)


# Chrome trace JSON ----------------------------------------------------------------------------

_SLICE = {"ph": "X", "name": "op", "ts": 0, "dur": 1, "pid": 1, "tid": 1}


@hostile("20,000 counters sharing a process name", ".json",
         "{path}: 20,000 counter series; at most 1,024 can be shown", heavy=True)
def _counters_one_process_name(seed: Path, path: Path) -> None:
    pids = range(2, 20_002)
    names = ({"ph": "M", "name": "process_name", "pid": p, "args": {"name": "worker"}} for p in pids)
    chrome_json(path, [_SLICE, *names, *({"ph": "C", "name": "queue", "ts": 1, "pid": p, "args": {"queue": 1}}
                                         for p in pids)])


@hostile("50,000 distinct counters", ".json", "{path}: 50,000 counter series; at most 1,024 can be shown",
         heavy=True)
def _many_counters(seed: Path, path: Path) -> None:
    chrome_json(path, [{"ph": "C", "name": f"c{i}", "ts": 1, "pid": 1, "args": {"v": 1}} for i in range(50_000)])


@hostile("one counter event with 50,000 series", ".json",
         "{path}: 50,000 counter series; at most 1,024 can be shown", heavy=True)
def _many_series(seed: Path, path: Path) -> None:
    chrome_json(path, [{"ph": "C", "name": "c", "ts": 1, "pid": 1, "args": {f"s{i}": 1 for i in range(50_000)}}])


@hostile("60,000 processes with slices", ".json", "{path}: 60,000 threads have slices; at most 4,096 can be shown",
         heavy=True)
def _many_processes(seed: Path, path: Path) -> None:
    chrome_json(path, [{**_SLICE, "pid": p} for p in range(60_000)])


@hostile("a 5 GiB gzip bomb", ".json.gz",
         "{path}: decompresses to more than 100 times the bytes read (refused as a possible zip bomb)", heavy=True)
def _gzip_bomb(seed: Path, path: Path) -> None:
    path.write_bytes(gzip_bomb(b'{"traceEvents": [', 5 << 30, json.dumps(_SLICE).encode() + b"]}"))


@hostile("timestamps in epoch microseconds", ".json", None)
def _epoch_microseconds(seed: Path, path: Path) -> None:
    now_us = 1.7e15  # November 2023 in microseconds since 1970, as Kineto and Perfetto write them
    chrome_json(path, [{**_SLICE, "ts": now_us + i, "dur": 0.5} for i in range(10)])


# model config.json ----------------------------------------------------------------------------

@hostile("a ResNet of 100,000 blocks", CONFIG_NAME,
         "model config {path}: 100,000 blocks is more than any model has (at most 1,024)", heavy=True)
def _deep_resnet(seed: Path, path: Path) -> None:
    path.write_text(json.dumps({"model_type": "resnet", "hidden_sizes": [256], "depths": [100_000]}))


# random corpora of the kinds issue 49 found -----------------------------------------------------

# values a field of a run's metadata or a zip header may hold instead of its own (ODD_VALUES and
# the edges the hostile files above found: epoch microseconds, the time cap, text that is long)
ODD_META = (*ODD_VALUES, 1.7e15, 1e20, 1e21, "trn9", "inf2.xlarge", "m" * 100_000, [[1]], 2**63)
_ZIP_METHODS = (0, 8, 9, 12, 14, 99)
_ZIP_SIZES = (0, 1, 10_000, 1 << 31, (1 << 32) - 1)


def nvtrace_zip_cases(seed: Path, rng_seed: int, count: int) -> Iterator[list[Member]]:
    """The seed's members with what their zip headers declare changed: flags (encryption), method,
    declared size and CRC, a member's data deflated, or deflated with a tail of zeros."""
    rng = random.Random(49 + rng_seed)
    members = members_of(seed)
    for _ in range(count):
        out = list(members)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(out))
            m = out[i]
            kind = rng.randrange(5)
            if kind == 0:
                out[i] = replace(m, flags=rng.choice((1, 8, 0x41, 0xFFFF)))
            elif kind == 1:
                out[i] = replace(m, method=rng.choice(_ZIP_METHODS), size=len(m.data), crc=zlib.crc32(m.data))
            elif kind == 2:
                out[i] = replace(m, size=rng.choice(_ZIP_SIZES))
            elif kind == 3:
                out[i] = replace(m, crc=rng.getrandbits(32))
            else:
                tail = b"\0" * rng.choice((0, 1 << 20, 16 << 20))
                out[i] = Member(m.name, deflate_repeated((m.data, 1), (tail, 1)), ZIP_DEFLATED, len(m.data),
                                zlib.crc32(m.data))
        yield out


# what a column's manifest entry may declare instead of its own (format 4: sim/io/columns.py)
ODD_COLUMN = (*ODD_VALUES, "<f8", "<f4", "|i1", "<i2", "<i8", "<u8", "|O", ">i8", "<U1", 1 << 26, 1 << 40, 2**63)


def nvtrace_column_cases(seed: Path, rng_seed: int, count: int) -> Iterator[list[Member]]:
    """The seed's columns crafted as a hostile writer would, their checksums made right: entries
    declaring other dtypes, stored widths and lengths; frames cut short, swapped with another
    column's, or inflating far beyond their column."""
    import xxhash

    rng = random.Random(48 + rng_seed)
    members = members_of(seed)
    manifest = json.loads(members[0].data)
    columns = [(r, name) for r, run in enumerate(manifest["runs"]) for name in run["arrays"]]
    frames = {m.name: m.data for m in members[1:]}
    for _ in range(count):
        edited, out = copy.deepcopy(manifest), dict(frames)
        for _ in range(rng.randint(1, 3)):
            r, name = rng.choice(columns)
            spec = edited["runs"][r]["arrays"][name]
            kind = rng.randrange(4)
            if kind == 0:
                spec[rng.choice(("dtype", "stored", "length"))] = rng.choice(ODD_COLUMN)
            elif kind == 1:
                out[name] = out[name][:rng.randrange(len(out[name]))]
            elif kind == 2:
                other = rng.choice(columns)[1]
                out[name] = frames[other]
                spec.update({k: v for k, v in edited["runs"][r]["arrays"].get(other, {}).items() if k != "xxh3"})
            else:
                out[name] = _zstd(bytes(rng.choice((1 << 16, 1 << 22))))
            spec["xxh3"] = xxhash.xxh3_64_hexdigest(out[name])
        yield [Member(MANIFEST, json.dumps(edited).encode()), *(Member(n, d) for n, d in out.items())]


def nvtrace_meta_cases(seed: Path, rng_seed: int, count: int) -> Iterator[list[Member]]:
    """The seed with fields of its first run's metadata (and of its config) set to odd values or
    removed: every field the views and metrics read is hit, not only where a mutation happens to land."""
    rng = random.Random(4949 + rng_seed)
    members = members_of(seed)
    manifest = json.loads(members[0].data)
    meta = manifest["runs"][0]["meta"]
    keys = [("meta", k) for k in sorted(meta)] + [("config", k) for k in sorted(meta.get("config") or {})]
    for _ in range(count):
        edited = copy.deepcopy(manifest)
        run_meta = edited["runs"][0]["meta"]
        for _ in range(rng.randint(1, 3)):
            where, key = rng.choice(keys)
            table = run_meta if where == "meta" else run_meta.setdefault("config", {})
            if not isinstance(table, dict):
                continue
            if rng.random() < 0.15:
                table.pop(key, None)
            else:
                table[key] = rng.choice(ODD_META)
        yield [Member(MANIFEST, json.dumps(edited).encode()), *members[1:]]


def chrome_storm_cases(rng_seed: int, count: int) -> Iterator[str]:
    """Chrome traces heavy in what issue 49 found slow: many processes, threads, counters and
    series, shared process names, timestamps near the caps and in epoch microseconds."""
    rng = random.Random(4900 + rng_seed)
    for _ in range(count):
        n = rng.choice((10, 300, 3000))
        pids = rng.choice((1, n // 10 or 1, n))
        base = rng.choice((0.0, 1.7e15, 9.9e16, 1e17, 2e17))
        events = []
        for i in range(n):
            pid = i % pids
            kind = rng.randrange(4)
            if kind == 0:
                events.append({"ph": "X", "name": f"op{i % 7}", "ts": base + i, "dur": rng.choice((1, 1e17)),
                               "pid": pid, "tid": rng.randrange(1 + n // 100)})
            elif kind == 1:
                events.append({"ph": "C", "name": rng.choice(("c", f"c{i}")), "ts": base + i, "pid": pid,
                               "args": {f"s{k}": k for k in range(rng.choice((1, 3, 300)))}})
            elif kind == 2:
                events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "worker"}})
            else:
                events.append({"ph": rng.choice(("B", "E")), "name": "b", "ts": base + i, "pid": pid, "tid": 0})
        yield json.dumps({"traceEvents": events})


# measuring a command ----------------------------------------------------------------------------

LIMIT_SECONDS = 5.0  # what a user waits for an answer, and the most a hostile file may cost (issue 49)
LIMIT_BYTES = 1 << 30
# a measured program reports its own peak memory (VmHWM) as it exits: a child's ru_maxrss counts
# the memory of the parent it was forked from
_PEAK_AT_EXIT = """\
import atexit, os, sys
def _peak():
    with open("/proc/self/status") as f:
        os.write(int(os.environ["NEURONVIZ_PEAK_FD"]), next(l for l in f if l.startswith("VmHWM")).split()[1].encode())
atexit.register(_peak)
"""
CLI = "from neuronviz.cli import main\nsys.exit(main(sys.argv[1:]))\n"  # the program measure() runs by default


@dataclass(frozen=True)
class Measured:
    """A command's outcome: its exit code (None when killed at its timeout), seconds, peak memory
    and what it wrote to stderr."""

    code: int | None
    seconds: float
    peak_bytes: int
    stderr: str


def measure(argv: list[str], timeout_s: float = 60.0, env: dict | None = None, program: str = CLI) -> Measured:
    """``neuronviz ARGV`` (or another ``program`` reading ``sys.argv``) in a subprocess, headless,
    timed and its peak resident memory taken."""
    read, write = os.pipe()
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "NEURONVIZ_PEAK_FD": str(write), **(env or {})}
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", _PEAK_AT_EXIT + program, *argv], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=env, pass_fds=(write,), timeout=timeout_s)
        code, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, stderr = None, exc.stderr or b""
    seconds = time.perf_counter() - start
    os.close(write)
    with os.fdopen(read, "rb") as f:
        peak_kb = f.read().decode() or "0"
    return Measured(code, seconds, int(peak_kb) * 1024, stderr.decode(errors="replace"))

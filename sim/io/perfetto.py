"""Perfetto's native trace format (``.pftrace``: a protobuf ``Trace`` of ``TracePacket``s), both ways.

Read: track descriptors (processes, threads, named and counter tracks), track events (slice begin
and end, instants, counters) with their names and categories interned per packet sequence,
deflate-compressed packets; every other packet is skipped. Each track with slices becomes a row
(named "process / thread"), each counter track a counter, as Chrome JSON of another tool is read.
Written: a process per run, a thread track per engine and DMA queue, a counter track per counter,
a slice per event named by its op in the category of its layer, names interned once.

The generated classes of the released ``perfetto`` package parse each packet
(``perfetto.protos.perfetto.trace.perfetto_trace_pb2``; its trace processor, which downloads a
binary at run time, is not used). Reading trusts nothing: framing walked by hand within the file,
inflation bounded by what it produces, counts of tracks and counters bounded, a slice's end
before its start refused; each a one-line :class:`~sim.errors.TraceFileError`.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from sim.io.atomic import atomic_file
from sim.io.chrome import MAX_DEPTH_ROWS
from sim.io.inputs import Fail, name_text, open_regular
from sim.trace import Counter, Trace, Track

MAX_FILE_BYTES = 4 << 30
MAX_INFLATED_BYTES = 8 << 30  # of every compressed packet together
MAX_RATIO = 100  # inflated over compressed, above it a bomb
MAX_TRACKS = 4096
MAX_COUNTERS = 1024
MAX_TEXT = 1000
PACKET_TAG = 0x0A  # Trace.packet: field 1, length-delimited
SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE = 1, 2
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4
SEQUENCE = 1  # the one packet sequence neuronviz writes
PROGRESS_EVERY = 1 << 16  # packets between progress reports
MAX_FLOWS_A_SLICE = 64  # flow ids one slice takes part in, beyond which they are not read
FLOW = "flow"  # a Perfetto flow has no name of its own


def _pb():
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2  # loads when a .pftrace is read or written

    return perfetto_trace_pb2


def looks_like_perfetto(head: bytes) -> bool:
    """Whether a file's first bytes can start a Perfetto trace: a packet's tag and length."""
    return len(head) >= 2 and head[0] == PACKET_TAG


# ---------------------------------------------------------------------------------------------
# reading


def _varint(buf, at: int, end: int, fail: Fail) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= end or shift > 63:
            fail("is not a Perfetto trace (a packet's length runs past the end of the file)")
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, at
        shift += 7


def _packets(buf, start: int, end: int, fail: Fail) -> Iterator[bytes]:
    """The payloads of the ``Trace.packet`` fields in ``buf[start:end]``; other fields skipped."""
    at = start
    while at < end:
        if buf[at] == PACKET_TAG and at + 1 < end and buf[at + 1] < 0x80:  # a packet under 128 bytes: most
            n = buf[at + 1]
            at += 2
            if at + n > end:
                fail("is not a Perfetto trace, or is truncated (a packet runs past the end of the file)")
            yield bytes(buf[at:at + n])
            at += n
            continue
        key, at = _varint(buf, at, end, fail)
        wire = key & 7
        if wire == 2:
            n, at = _varint(buf, at, end, fail)
            if at + n > end:
                fail("is not a Perfetto trace, or is truncated (a packet runs past the end of the file)")
            if key >> 3 == 1:
                yield bytes(buf[at:at + n])
            at += n
        elif wire == 0:
            _, at = _varint(buf, at, end, fail)
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            fail(f"is not a Perfetto trace (a field of wire type {wire} at byte {at:,})")


class _Reader:
    """What the packets say, as they are read."""

    def __init__(self, fail: Fail) -> None:
        self.fail = fail
        self.pb = _pb()
        self.names: dict[int, dict[int, str]] = {}  # per sequence: interned event names
        self.categories: dict[int, dict[int, str]] = {}
        self.tracks: dict[int, dict] = {}  # uuid -> descriptor fields
        # uuid -> its open slices: begin, name, category, depth (the slices open under it), flows
        self.open: dict[int, list[tuple[int, str, str, int, tuple, tuple]]] = {}
        # uuid, start, end, name, category, depth, the flows it takes part in, the flows it ends
        self.slices: list[tuple[int, int, int, str, str, int, tuple, tuple]] = []
        self.counters: dict[int, list[tuple[int, float]]] = {}
        self.inflated = 0
        self.skipped = 0
        self.unclosed = self.unmatched = 0

    def packet(self, payload: bytes) -> None:
        try:
            p = self.pb.TracePacket.FromString(payload)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError and its C implementation's errors alike
            self.fail("is not a Perfetto trace, or is damaged (a packet does not parse)")
        seq = p.trusted_packet_sequence_id
        if p.sequence_flags & SEQ_INCREMENTAL_STATE_CLEARED or p.incremental_state_cleared:
            self.names[seq], self.categories[seq] = {}, {}
        interned = p.HasField("interned_data")
        if interned:
            names, cats = self.names.setdefault(seq, {}), self.categories.setdefault(seq, {})
            for e in p.interned_data.event_names:
                names[e.iid] = e.name[:MAX_TEXT]
            for c in p.interned_data.event_categories:
                cats[c.iid] = c.name[:MAX_TEXT]
        if p.HasField("track_event"):  # most packets: nothing else to look for
            self.event(p, seq)
        elif p.HasField("track_descriptor"):
            self.descriptor(p.track_descriptor)
        elif p.HasField("compressed_packets"):
            self.compressed(p.compressed_packets)
        elif not interned:
            self.skipped += 1

    def descriptor(self, d) -> None:
        if d.uuid not in self.tracks and len(self.tracks) >= 16 * MAX_TRACKS:
            self.fail(f"describes more than {16 * MAX_TRACKS:,} tracks")
        self.tracks[d.uuid] = {
            "name": (d.name or d.static_name)[:MAX_TEXT], "parent": d.parent_uuid,
            "pid": d.process.pid if d.HasField("process") else (d.thread.pid if d.HasField("thread") else None),
            "process_name": d.process.process_name[:MAX_TEXT] if d.HasField("process") else "",
            "thread_name": d.thread.thread_name[:MAX_TEXT] if d.HasField("thread") else "",
            "tid": d.thread.tid if d.HasField("thread") else None, "counter": d.HasField("counter"),
            "rank": d.sibling_order_rank}

    def event(self, p, seq: int) -> None:
        e = p.track_event
        kind, uuid = e.type, e.track_uuid
        if kind == SLICE_END:  # the commonest packet: only where and when
            stack = self.open.get(uuid)
            if not stack:
                self.unmatched += 1
                return
            start, name, category, depth, flows, ends = stack.pop()
            ts = p.timestamp
            if ts < start:
                self.fail("a slice ends before it begins")
            self.slices.append((uuid, start, ts, name, category, depth, flows, ends))
            return
        ts = p.timestamp
        if kind == COUNTER:
            value = e.double_counter_value if e.HasField("double_counter_value") else float(e.counter_value)
            if not math.isfinite(value):
                self.fail("a counter's value is not a finite number")
            series = self.counters.get(uuid)
            if series is None:
                if len(self.counters) >= MAX_COUNTERS:
                    self.fail(f"has more than {MAX_COUNTERS:,} counter tracks; at most {MAX_COUNTERS:,} can be "
                              "shown")
                series = self.counters[uuid] = []
            series.append((ts, value))
            return
        if kind not in (SLICE_BEGIN, INSTANT):
            return
        name = e.name[:MAX_TEXT] if e.HasField("name") else self.names.get(seq, {}).get(e.name_iid, "")
        category = ""
        if e.categories:
            category = e.categories[0][:MAX_TEXT]
        elif e.category_iids:
            category = self.categories.get(seq, {}).get(e.category_iids[0], "")
        flows = (*e.flow_ids, *e.flow_ids_old)[:MAX_FLOWS_A_SLICE] if e.flow_ids or e.flow_ids_old else ()
        ends = (*e.terminating_flow_ids, *e.terminating_flow_ids_old)[:MAX_FLOWS_A_SLICE] \
            if e.terminating_flow_ids or e.terminating_flow_ids_old else ()
        stack = self.open.get(uuid)
        if stack is None:
            stack = self.open[uuid] = []
        if kind == SLICE_BEGIN:
            stack.append((ts, name, category, len(stack), flows, ends))
        else:
            self.slices.append((uuid, ts, ts, name, category, len(stack), flows, ends))

    def compressed(self, data: bytes) -> None:
        inflater = zlib.decompressobj()
        out = bytearray()
        try:
            piece = inflater.decompress(data, MAX_RATIO * len(data) + 1)
            out += piece
            if inflater.unconsumed_tail or len(out) > MAX_RATIO * max(len(data), 1 << 16):
                self.fail(f"compressed packets inflate to more than {MAX_RATIO} times their size")
        except zlib.error:
            self.fail("compressed packets are damaged (they do not inflate)")
        self.inflated += len(out)
        if self.inflated > MAX_INFLATED_BYTES:
            self.fail(f"compressed packets inflate to more than {MAX_INFLATED_BYTES:,} bytes")
        for payload in _packets(bytes(out), 0, len(out), self.fail):
            self.packet(payload)


def load_pftrace(path: str | os.PathLike, progress: Callable[[float], None] | None = None) -> list[Trace]:
    """The run a Perfetto trace holds, its tracks as rows. ``progress`` hears the share of the
    file read; an exception it raises stops the load."""
    fail = Fail(name_text(str(path)))
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_FILE_BYTES:
            fail(f"is {size:,} bytes; at most {MAX_FILE_BYTES:,} can be read")
        if not size:
            fail("the file is empty")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            reader = _Reader(fail)
            done = 0
            for n, payload in enumerate(_packets(buf, 0, size, fail)):
                reader.packet(payload)
                done += len(payload) + 2
                if progress is not None and n % PROGRESS_EVERY == 0:
                    progress(min(1.0, done / size))
    return [_trace(reader, Path(str(path)).name, fail)]


KINDS = ("tensor", "vector", "scalar", "gpsimd", "dma_read", "dma_write", "collective", "host")


def _kind(name: str) -> str:
    """A row's kind from its thread's name: its last word when that is an engine's or the host's
    (the names neuronviz writes: "NC0 tensor", "Host"), else other."""
    words = name.rsplit(" / ", 1)[-1].lower().split()
    return words[-1] if words and words[-1] in KINDS else "other"


def _track_name(tracks: dict[int, dict], uuid: int) -> tuple[str, int | None]:
    """A row's name ("process / thread", or a process's own) and the process it is of."""
    d = tracks.get(uuid)
    if d is None:
        return ("default track" if uuid == 0 else f"track {uuid}"), None
    if d["process_name"]:
        return d["process_name"], d["pid"]
    parent = tracks.get(d["parent"]) if d["parent"] else None
    pid = d["pid"] if d["pid"] is not None else (parent["pid"] if parent else None)
    process = next((t for t in tracks.values() if t["process_name"] and t["pid"] == pid), None) \
        if pid is not None else parent
    own = d["thread_name"] or d["name"] or (f"thread {d['tid']}" if d["tid"] is not None else f"track {uuid}")
    owner = (process["process_name"] or process["name"]) if process is not None else ""
    return (f"{owner} / {own}" if owner else own), pid


def _trace(r: _Reader, file_name: str, fail: Fail) -> Trace:
    from sim.io.native import _validate_trace

    for stack in r.open.values():
        r.unclosed += len(stack)
    uuids = sorted({s[0] for s in r.slices}, key=lambda u: (r.tracks.get(u, {}).get("rank", 0), u))
    if len(uuids) > MAX_TRACKS:
        fail(f"{len(uuids):,} tracks have slices; at most {MAX_TRACKS:,} can be shown")
    names = {u: _track_name(r.tracks, u) for u in uuids}
    processes = list(dict.fromkeys(pid for _, pid in names.values()))
    # a track's nested slices stacked by depth, a row each (as the Chrome reader lays them out)
    wanted = {}
    for s in r.slices:
        wanted[s[0]] = max(wanted.get(s[0], 0), s[5] + 1)
    cap = MAX_DEPTH_ROWS
    while cap > 1 and sum(min(w, cap) for w in wanted.values()) > MAX_TRACKS:
        cap -= 1
    tracks, track_depth, first = [], [], {}
    for u in uuids:
        first[u] = len(tracks)
        for d in range(min(wanted[u], cap)):
            tracks.append(Track(names[u][0] + (f" ·{d}" if d else ""), _kind(names[u][0]),
                                processes.index(names[u][1])))
            track_depth.append(d)
    rows = {u: min(wanted[u], cap) for u in uuids}
    starts = [s[1] for s in r.slices] + [t for series in r.counters.values() for t, _ in series]
    origin = min(starts, default=0)
    ops: dict[str, int] = {}
    layers: dict[str, int] = {}
    n = len(r.slices)
    track = np.fromiter((first[s[0]] + min(s[5], rows[s[0]] - 1) for s in r.slices), np.int64, n)
    start = np.fromiter((s[1] - origin for s in r.slices), np.float64, n)
    end = np.fromiter((s[2] - origin for s in r.slices), np.float64, n)
    op = np.fromiter((ops.setdefault(name_text(s[3]) or "slice", len(ops)) for s in r.slices), np.int64, n)
    layer = np.fromiter((layers.setdefault(name_text(s[4]), len(layers)) if s[4] else -1 for s in r.slices),
                        np.int64, n)
    order = np.lexsort((start, track))
    events = {"track": track[order], "start_ns": start[order], "dur_ns": (end - start)[order], "op": op[order],
              "layer": layer[order], "flops": np.zeros(n), "bytes": np.zeros(n)}
    event_of = np.empty(n, np.int64)
    event_of[order] = np.arange(n)
    first = np.full(len(ops), n, np.int64)  # each op's first slice: its layer is the op's
    np.minimum.at(first, op, np.arange(n))
    op_layer = np.full(len(ops), -1, np.int64)
    seen = first < n
    op_layer[seen] = layer[first[seen]]
    inside = layer >= 0
    lstart, lend = np.full(len(layers), np.inf), np.full(len(layers), -np.inf)
    np.minimum.at(lstart, layer[inside], start[inside])
    np.maximum.at(lend, layer[inside], end[inside])
    counters = {}
    for uuid, series in r.counters.items():
        name, _ = _track_name(r.tracks, uuid)
        while name in counters:
            name += "'"
        t = np.array([ts - origin for ts, _ in series], np.float64)
        o = np.argsort(t, kind="stable")
        counters[name] = Counter(name, "", t[o], np.array([v for _, v in series], np.float64)[o])
    duration = max(float(end.max()) if n else 0.0, max((float(c.t_ns[-1]) for c in counters.values()), default=0.0))
    meta = {"model": name_text(Path(file_name).stem), "chip": "", "chip_name": "Perfetto trace", "instance": "",
            "mode": "imported", "batch": 1, "seq": 1, "dtype": "", "source": "perfetto",
            "source_file": name_text(file_name), "cores_per_copy": 1, "copies": 1, "lnc": 1, "cores_active": 1,
            "total_ns": duration, "time_origin_ns": float(origin),
            "units": {"time": "ns", "bytes": "B", "flops": "FLOP"}, "unclosed_slices": r.unclosed,
            "unmatched_end_events": r.unmatched, "skipped_events": r.skipped,
            "track_depth": track_depth, "depth_rows": cap,
            "slices_beyond_depth": sum(s[5] >= rows[s[0]] for s in r.slices), "flows": _flows(r.slices, event_of)}
    trace = Trace(meta=meta, tracks=tuple(tracks), events=events, op_names=tuple(ops), op_layer=op_layer,
                  layer_names=tuple(layers), layer_kinds=("other",) * len(layers), layer_start_ns=lstart,
                  layer_end_ns=lend, counters=counters)
    _validate_trace(trace, fail)
    return trace


def _flows(slices: list[tuple], event_of: np.ndarray) -> dict:
    """The arrows of the flows the slices take part in (event indices, as sim.io.chrome gives
    them): from each slice of a flow to its next, in time order, until a slice that ends it."""
    points: dict[int, list[tuple[int, int, bool]]] = {}
    for i, s in enumerate(slices):
        for f in s[6]:
            points.setdefault(f, []).append((s[1], i, False))
        for f in s[7]:
            points.setdefault(f, []).append((s[1], i, True))
    a, b = [], []
    for flow in points.values():
        flow.sort()
        for (_, i, ended), (_, j, _) in zip(flow, flow[1:], strict=False):
            if not ended and i != j:
                a.append(int(event_of[i]))
                b.append(int(event_of[j]))
    return {"from": a, "to": b, "names": [FLOW] if a else [], "name": [0] * len(a)}


# ---------------------------------------------------------------------------------------------
# writing


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint_bytes(number << 3 | 2) + _varint_bytes(len(payload)) + payload


def _packet(payload: bytes) -> bytes:
    return bytes((PACKET_TAG,)) + _varint_bytes(len(payload)) + payload


def save_pftrace(path: str | os.PathLike, traces: Sequence[Trace]) -> None:
    """Write ``traces`` as a Perfetto trace, atomically: a process per run, a thread track per
    track, a counter track per counter; each event a slice named by its op in its layer's category."""
    pb = _pb()
    names = sorted({n for t in traces for n in t.op_names})
    categories = sorted({n for t in traces for n in t.layer_names})
    iid = {n: i + 1 for i, n in enumerate(names)}
    cat_iid = {n: i + 1 for i, n in enumerate(categories)}
    with atomic_file(Path(path)) as f:
        first = pb.TracePacket(trusted_packet_sequence_id=SEQUENCE, sequence_flags=SEQ_INCREMENTAL_STATE_CLEARED)
        for n, i in iid.items():
            first.interned_data.event_names.add(iid=i, name=n)
        for n, i in cat_iid.items():
            first.interned_data.event_categories.add(iid=i, name=n)
        f.write(_packet(first.SerializeToString()))
        for r, trace in enumerate(traces):
            base = (r + 1) << 32
            d = trace.run
            title = f"{d.workload.model} · {d.deployment.chip_name or d.deployment.chip or d.workload.mode}"
            f.write(_packet(pb.TracePacket(track_descriptor=pb.TrackDescriptor(
                uuid=base, process=pb.ProcessDescriptor(pid=r + 1, process_name=title))).SerializeToString()))
            for t, track in enumerate(trace.tracks):
                f.write(_packet(pb.TracePacket(track_descriptor=pb.TrackDescriptor(
                    uuid=base + t + 1, parent_uuid=base, sibling_order_rank=t,
                    thread=pb.ThreadDescriptor(pid=r + 1, tid=t + 1, thread_name=track.name))).SerializeToString()))
            for c, counter in enumerate(trace.counters.values()):
                f.write(_packet(pb.TracePacket(track_descriptor=pb.TrackDescriptor(
                    uuid=base + 0x10000 + c, parent_uuid=base, name=counter.name,
                    counter=pb.CounterDescriptor())).SerializeToString()))
            _write_events(f, trace, base, iid, cat_iid)
            for c, counter in enumerate(trace.counters.values()):
                track = _varint_bytes(11 << 3) + _varint_bytes(base + 0x10000 + c)
                value_key = _varint_bytes(44 << 3 | 1)  # double_counter_value: a fixed64 double
                f.write(b"".join(
                    _packet(b"\x40" + _varint_bytes(max(t, 0)) + b"\x50\x01"
                            + _field(11, b"\x48\x04" + track + value_key + struct.pack("<d", v)))
                    for t, v in zip(np.rint(counter.t_ns).astype(np.int64).tolist(), counter.value.tolist(),
                                    strict=True)))


def _write_events(f, trace: Trace, base: int, iid: dict[str, int], cat_iid: dict[str, int]) -> None:
    """Each event as a begin and an end packet (an instant when it lasts no time), in time order,
    on its track, with its op's interned name, its layer's interned category and its flows."""
    ev = trace.events
    n = trace.n_events
    start = np.rint(ev["start_ns"]).astype(np.int64)
    end = np.maximum(np.rint(ev["start_ns"] + ev["dur_ns"]).astype(np.int64), start)
    # a slice of no duration is an instant (its begin and end would be one time, in either order)
    lasting = np.flatnonzero(end > start)
    times = np.concatenate([start, end[lasting]])
    is_end = np.concatenate([np.zeros(n, bool), np.ones(len(lasting), bool)])
    idx = np.concatenate([np.arange(n), lasting])
    instant = end == start
    # at one time, ends before begins: of two ends the inner (later begun) slice's first, of two
    # begins the outer (later ending) slice's first, so that slices nest as Perfetto stacks them
    order = np.lexsort((np.where(is_end, -start[idx], -end[idx]), ~is_end, times))
    op_iid = [_varint_bytes(10 << 3) + _varint_bytes(iid[name]) for name in trace.op_names]
    cat = [b"\x18" + _varint_bytes(cat_iid[name]) for name in trace.layer_names]
    tracks = [_varint_bytes(11 << 3) + _varint_bytes(base + t + 1) for t in range(len(trace.tracks))]
    track_of, op_of, layer_of = ev["track"].tolist(), ev["op"].tolist(), ev["layer"].tolist()
    instant_of = instant.tolist()
    # a flow's arrow k: the slice it leaves takes part in flow k + 1, the slice it enters ends it
    flow_bytes: dict[int, bytes] = {}
    flows = trace.meta.get("flows") if isinstance(trace.meta.get("flows"), dict) else {}
    for k, (a, b) in enumerate(zip(flows.get("from", ()), flows.get("to", ()), strict=False)):
        if type(a) is int and type(b) is int and 0 <= a < n and 0 <= b < n:
            flow_bytes[a] = flow_bytes.get(a, b"") + b"\xf9\x02" + struct.pack("<Q", k + 1)
            flow_bytes[b] = flow_bytes.get(b, b"") + b"\x81\x03" + struct.pack("<Q", k + 1)
    out = []
    for k, t, e in zip(idx[order].tolist(), times[order].tolist(), is_end[order].tolist(), strict=True):
        if e:
            event = b"\x48\x02" + tracks[track_of[k]]
        else:
            layer = layer_of[k]
            kind = b"\x48\x03" if instant_of[k] else b"\x48\x01"
            event = kind + tracks[track_of[k]] + op_iid[op_of[k]] + (cat[layer] if layer >= 0 else b"") \
                + flow_bytes.get(k, b"")
        body = b"\x40" + _varint_bytes(max(t, 0)) + b"\x50\x01" + b"\x5a" + _varint_bytes(len(event)) + event \
            + b"\x68\x02"
        out.append(b"\x0a" + _varint_bytes(len(body)) + body)
        if len(out) >= 1 << 16:
            f.write(b"".join(out))
            out.clear()
    f.write(b"".join(out))

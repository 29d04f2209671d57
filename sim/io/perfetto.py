"""Perfetto's native trace format (``.pftrace``: a protobuf ``Trace`` of ``TracePacket``s), both ways.

Read: track descriptors (processes, threads, named and counter tracks), track events (slice begin
and end, instants, counters) with their names and categories interned per packet sequence,
deflate-compressed packets; every other packet is skipped. Each track with slices becomes a row
(named "process / thread"), each counter track a counter, as Chrome JSON of another tool is read.
Written: a process per run, a thread track per engine and DMA queue, a counter track per counter,
a slice per event named by its op in the category of its layer, names interned once. The events
that overlap one of their track without nesting in it go on async tracks of the process named
as their track (as many as overlap at once), which Perfetto draws merged into one; read back,
they go back on their thread.

Both ways go through :mod:`sim.io.protowire`, which reads and writes the packets of a window of
the file together with array operations (a generated class per packet cost 9 us an event). Only
the fields used are read, the first of a repeated one or a few; a message given twice in a packet
is read as its last (no producer splits one). Reading trusts nothing: framing walked within the
file, every field read over checked, inflation bounded by what it produces, compressed packets
nested at most :data:`MAX_NESTED` deep, counts of tracks and counters bounded, a slice's end
before its start refused; each a one-line :class:`~sim.errors.TraceFileError`.
"""

from __future__ import annotations

import mmap
import os
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim.errors import TraceFileError
from sim.io import protowire as pw
from sim.io.atomic import atomic_file
from sim.io.chrome import MAX_DEPTH_ROWS, whole_ns
from sim.io.inputs import Fail, name_text, open_regular
from sim.io.protowire import I64, LEN, VARINT, Fields, scan, tag
from sim.io.slices import crossing, stack_depths
from sim.trace import Counter, Trace, Track

MAX_FILE_BYTES = 4 << 30
MAX_INFLATED_BYTES = 8 << 30  # of every compressed packet together
MAX_RATIO = 100  # inflated over compressed, above it a bomb
MAX_NESTED = 4  # compressed packets inside compressed packets: no producer nests them
MAX_TRACKS = 4096
MAX_COUNTERS = 1024
MAX_TEXT = 1000
WINDOW = 4 << 20  # bytes of the file framed at a time; the packets in them are read together
PACKET_TAG = tag(1, LEN)  # Trace.packet
SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE = 1, 2
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4
SEQUENCE = 1  # the one packet sequence neuronviz writes
MAX_FLOWS_A_SLICE = 64  # flow ids one slice takes part in, beyond which they are not read
FLOW = "flow"  # a Perfetto flow has no name of its own

# the fields read, by tag. TracePacket:
TIMESTAMP, SEQUENCE_ID, TRACK_EVENT, INTERNED_DATA = tag(8, VARINT), tag(10, VARINT), tag(11, LEN), tag(12, LEN)
SEQUENCE_FLAGS, STATE_CLEARED, COMPRESSED, DESCRIPTOR = tag(13, VARINT), tag(41, VARINT), tag(50, LEN), tag(60, LEN)
DATA = (TRACK_EVENT, DESCRIPTOR, COMPRESSED)  # of the packet's oneof ``data``, those read
# TrackEvent (a repeated number's packed form is its tag with LEN)
TYPE, TRACK_UUID, NAME_IID, NAME = tag(9, VARINT), tag(11, VARINT), tag(10, VARINT), tag(23, LEN)
CATEGORY_IIDS, CATEGORIES, COUNTER_VALUE, DOUBLE_VALUE = tag(3, VARINT), tag(22, LEN), tag(30, VARINT), tag(44, I64)
FLOW_IDS, FLOW_IDS_OLD, ENDING_IDS, ENDING_IDS_OLD = tag(47, I64), tag(36, VARINT), tag(48, I64), tag(42, VARINT)
PACKED = {t: t & ~7 | LEN for t in (CATEGORY_IIDS, FLOW_IDS, FLOW_IDS_OLD, ENDING_IDS, ENDING_IDS_OLD)}
# TrackDescriptor, ProcessDescriptor, ThreadDescriptor
UUID, TRACK_NAME, STATIC_NAME, ATRACE_NAME = tag(1, VARINT), tag(2, LEN), tag(10, LEN), tag(13, LEN)
PARENT_UUID, PROCESS, THREAD = tag(5, VARINT), tag(3, LEN), tag(4, LEN)
COUNTER_TRACK, RANK = tag(8, LEN), tag(12, VARINT)
PID, PROCESS_NAME, TID, THREAD_NAME = tag(1, VARINT), tag(6, LEN), tag(2, VARINT), tag(5, LEN)
# InternedData and its EventName / EventCategory entries
EVENT_CATEGORIES, EVENT_NAMES, IID, ENTRY_NAME = tag(1, LEN), tag(2, LEN), tag(1, VARINT), tag(2, LEN)


def looks_like_perfetto(head: bytes) -> bool:
    """Whether a file's first bytes can start a Perfetto trace: a packet's tag and length."""
    return len(head) >= 2 and head[0] == PACKET_TAG


def _int32(v: int) -> int:
    return ((v & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000


def _int64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


# ---------------------------------------------------------------------------------------------
# reading: framing


def _trace_field(data, at: int, end: int, fail: Fail) -> tuple[int, tuple[int, int] | None]:
    """One field of the Trace message at ``data[at]``: where the next starts and, for a packet,
    its payload's span."""
    def short():
        fail("is not a Perfetto trace (a packet's length runs past the end of the file)")

    key, at = pw.varint_at(data, at, end, short)
    wire = key & 7
    if wire == LEN:
        n, at = pw.varint_at(data, at, end, short)
        if at + n > end:
            fail("is not a Perfetto trace, or is truncated (a packet runs past the end of the file)")
        return at + n, ((at, at + n) if key >> 3 == 1 else None)
    if wire == VARINT:
        return pw.varint_at(data, at, end, short)[1], None
    if wire in (I64, pw.I32):
        return at + (8 if wire == I64 else 4), None
    fail(f"is not a Perfetto trace (a field of wire type {wire} at byte {at:,})")


def _packets(buf: np.ndarray, start: int, end: int, fail: Fail) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The payloads of the ``Trace.packet`` fields in ``buf[start:end]`` (other fields skipped),
    a window of bytes at a time: their starts and ends. Packets are followed along the chain
    :func:`_links` finds; whatever breaks it (another field, a length of more than the file) is
    read a field at a time, and damage found is raised once the packets before it are given."""
    data = memoryview(buf)
    at = start
    while at < end:
        stop = min(at + WINDOW, end)
        cand, body, nxt, ok, succ = _links(buf, at, stop, end)
        leap = _leap(succ)
        pieces, problem = [], None
        while at < stop:
            i = int(np.searchsorted(cand, at))
            if i < len(cand) and cand[i] == at and ok[i]:
                idx = _chain(succ, leap, i)
                pieces.append((body[idx], nxt[idx]))
                at = int(nxt[idx[-1]])
                continue
            try:
                at, payload = _trace_field(data, at, end, fail)
            except TraceFileError as exc:  # raised once the packets before it are read
                problem = exc
                break
            if payload is not None:
                pieces.append((np.array([payload[0]], np.int64), np.array([payload[1]], np.int64)))
        if pieces:
            yield np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])
        if problem is not None:
            raise problem


def _links(buf: np.ndarray, at: int, stop: int, end: int) -> tuple[np.ndarray, ...]:
    """Each byte of ``buf[at:stop]`` equal to a packet's tag could start one: those bytes, where
    their payloads start and end (within ``end``), whether their lengths can be read, and each
    one's successor, the next such byte where its payload ends (the end of the window when that
    is none of them, or past the window, and after the last of them, that end itself)."""
    cand = np.flatnonzero(buf[at:stop] == PACKET_TAG) + at
    n, body, bad = pw.varints(buf, cand + 1, np.full(len(cand), end, np.int64))
    ok = n <= (end - body).astype(np.uint64)
    if bad is not None:
        ok &= ~bad
    nxt = body + np.where(ok, n, 0).astype(np.int64)
    if not len(cand):
        return cand, body, nxt, ok, np.zeros(1, np.int64)
    k = np.minimum(np.searchsorted(cand, nxt), len(cand) - 1)
    linked = ok & (nxt < stop) & (cand[k] == nxt) & ok[k]
    return cand, body, nxt, ok, np.append(np.where(linked, k, len(cand)), len(cand))


STRIDE = 16  # packets a step of the walk along a chain of them


def _leap(succ: np.ndarray) -> np.ndarray:
    """Each node's successor :data:`STRIDE` steps on (``succ``: each one's next, the last
    element the end, its own next)."""
    leap = succ
    for _ in range(STRIDE.bit_length() - 1):
        leap = leap[leap]
    return leap


def _chain(succ: np.ndarray, leap: np.ndarray, i: int) -> np.ndarray:
    """The nodes from ``i`` to the end of its chain: walked a stride at a time, the strides
    filled in with array steps."""
    end = len(succ) - 1
    strides = []
    while leap[i] != end:
        strides.append(i)
        i = int(leap[i])
    rest = []
    while i != end:
        rest.append(i)
        i = int(succ[i])
    block = np.empty((len(strides), STRIDE), np.int64)
    if strides:
        block[:, 0] = strides
        for j in range(1, STRIDE):
            block[:, j] = succ[block[:, j - 1]]
    return np.concatenate([block.ravel(), np.array(rest, np.int64)])


# ---------------------------------------------------------------------------------------------
# reading: packets


@dataclass(frozen=True)
class _Events:
    """The track events of a batch of packets, one an entry in the order of their packets: the
    packet, type, track, time, sequence; the name's code (-1: interned, by ``name_iid``), the
    category's (-1: none given as text, maybe one by ``category_iid``), a counter's value; the
    flows (event, id, whether it ends the flow; by event)."""

    packet: np.ndarray
    kind: np.ndarray
    uuid: np.ndarray
    ts: np.ndarray
    seq: np.ndarray
    name: np.ndarray
    name_iid: np.ndarray
    category: np.ndarray
    has_category_iid: np.ndarray
    category_iid: np.ndarray
    value: np.ndarray
    flows: tuple[np.ndarray, np.ndarray, np.ndarray]


class _PacketFields:
    """The fields of a batch of packets read: time, sequence, whether it clears the sequence's
    interned names; which data it holds (0 none, 1 a track event, 2 a descriptor, 3 compressed
    packets: the last given, as protobuf takes a oneof; Perfetto's own reader reads each given)
    and its span; its interned data."""

    def __init__(self, buf: np.ndarray, start: np.ndarray, end: np.ndarray, damaged: Callable[[], None]) -> None:
        n = len(start)
        f = scan(buf, start, end, {TIMESTAMP, SEQUENCE_ID, TRACK_EVENT, INTERNED_DATA, SEQUENCE_FLAGS, STATE_CLEARED,
                                   COMPRESSED, DESCRIPTOR}, damaged)
        self.ts = f[TIMESTAMP].pick(f[TIMESTAMP].last(n))
        self.seq = f[SEQUENCE_ID].pick(f[SEQUENCE_ID].last(n)) & np.uint64(0xFFFFFFFF)
        flags = f[SEQUENCE_FLAGS].pick(f[SEQUENCE_FLAGS].last(n))
        self.clear = (flags & np.uint64(SEQ_INCREMENTAL_STATE_CLEARED)) != 0
        self.clear |= f[STATE_CLEARED].pick(f[STATE_CLEARED].last(n)) != 0
        last = {t: f[t].last(n) for t in DATA}
        self.which, latest = np.zeros(n, np.int8), np.full(n, -1, np.int64)
        for k, t in enumerate(DATA):
            if len(f[t].msg):
                at = _at(f[t], last[t])
                self.which[at > latest] = k + 1
                latest = np.maximum(latest, at)
        self.span = {t: f[t].where(last[t] if (self.which == k + 1).all() else last[t][self.which == k + 1])
                     for k, t in enumerate(DATA)}
        self.interned = f[INTERNED_DATA]
        self.has_interned = np.zeros(n, bool)
        self.has_interned[self.interned.msg] = True


class _Reader:
    """What the packets say, a batch at a time, in their order: interned names per sequence and
    track descriptors as they come, each track event as a row of columns."""

    def __init__(self, fail: Fail) -> None:
        self.fail = fail
        self.strings: list[str] = [""]  # every name read, by code; 0 is the empty name
        self.code_of: dict[str, int] = {"": 0}
        self.names: dict[int, dict[int, int]] = {}  # per sequence: interned event names' codes
        self.categories: dict[int, dict[int, int]] = {}
        self.tracks: dict[int, dict] = {}  # uuid -> descriptor fields
        self.columns: dict[str, list[np.ndarray]] = {k: [] for k in ("uuid", "ts", "kind", "name", "category")}
        self.flow_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # event row, flow id, whether it ends
        self.counter_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # uuid, time, value
        self.counter_uuids: dict[int, None] = {}  # in the order their first sample came
        self.rows = 0  # slice events (begins, ends, instants) so far
        self.inflated = 0
        self.skipped = 0

    def damaged(self) -> None:
        self.fail("is not a Perfetto trace, or is damaged (a packet does not parse)")

    def read(self, buf: np.ndarray, start: int, end: int, depth: int = 0,
             progress: Callable[[float], None] | None = None) -> None:
        for starts, ends in _packets(buf, start, end, self.fail):
            self.batch(buf, starts, ends, depth)
            if progress is not None:
                progress(min(1.0, int(ends[-1]) / max(end, 1)))

    def code(self, text: str) -> int:
        c = self.code_of.get(text)
        if c is None:
            c = self.code_of[text] = len(self.strings)
            self.strings.append(text)
        return c

    def codes(self, buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """The codes of the strings of these payloads."""
        return np.array([self.code(t) for t in pw.texts(buf, start, end, MAX_TEXT)], np.int64)

    def batch(self, buf: np.ndarray, start: np.ndarray, end: np.ndarray, depth: int) -> None:
        """The packets ``buf[start[i]:end[i]]``, in order: their events a stretch at a time
        between the packets that change what the events read (interned names, a sequence's names
        cleared, a descriptor, compressed packets read in their place)."""
        n = len(start)
        p = _PacketFields(buf, start, end, self.damaged)
        self.skipped += int(np.count_nonzero((p.which == 0) & ~p.has_interned))
        events = self.events(buf, p.span[TRACK_EVENT], p.ts, p.seq)
        entries = self.interned(buf, p.interned)
        descriptors, compressed = ({int(k): (int(a), int(b)) for k, a, b in zip(p.span[t].msg, *p.span[t].spans(),
                                                                                 strict=True)}
                                   for t in (DESCRIPTOR, COMPRESSED))
        lo = 0
        for k in sorted({*np.flatnonzero(p.clear | p.has_interned).tolist(), *descriptors, *compressed}):
            self.segment(events, lo, k)
            lo = k
            s = int(p.seq[k])
            if p.clear[k]:
                self.names[s], self.categories[s] = {}, {}
            a, b = np.searchsorted(entries[0], [k, k + 1])
            for is_category, iid, code in zip(*(e[a:b].tolist() for e in entries[1:]), strict=True):
                (self.categories if is_category else self.names).setdefault(s, {})[iid] = code
            if k in descriptors:
                self.descriptor(buf, *descriptors[k])
            elif k in compressed:
                lo = k + 1
                self.inflate(buf, *compressed[k], depth)
        self.segment(events, lo, n)

    def events(self, buf: np.ndarray, te: Fields, ts: np.ndarray, seq: np.ndarray) -> _Events:
        """The track events ``te`` holds (packet by packet), their names not yet looked up."""
        m = len(te.msg)
        wanted = {TYPE, TRACK_UUID, NAME_IID, NAME, CATEGORIES, COUNTER_VALUE, DOUBLE_VALUE, *PACKED, *PACKED.values()}
        caps = {CATEGORIES: 1, CATEGORY_IIDS: 1, PACKED[CATEGORY_IIDS]: 1,
                **{t: MAX_FLOWS_A_SLICE for t in (FLOW_IDS, FLOW_IDS_OLD, ENDING_IDS, ENDING_IDS_OLD)},
                **{PACKED[t]: MAX_FLOWS_A_SLICE for t in (FLOW_IDS, FLOW_IDS_OLD, ENDING_IDS, ENDING_IDS_OLD)}}
        f = scan(buf, *te.spans(), wanted, self.damaged, caps)
        # the last type given, as Perfetto's own reader takes it (another than 1-4 is not read)
        kind = np.minimum(f[TYPE].pick(f[TYPE].last(m)), np.uint64(COUNTER + 1)).astype(np.int8)
        iid_at, name_at = f[NAME_IID].last(m), f[NAME].last(m)
        literal = _at(f[NAME], name_at) > _at(f[NAME_IID], iid_at)  # of a oneof: the last given
        name = np.full(m, -1, np.int64)
        k = np.flatnonzero(literal)
        name[k] = self.codes(buf, *f[NAME].where(name_at[k]).spans()) if len(k) else []
        cat_at = f[CATEGORIES].first(m)
        category = np.full(m, -1, np.int64)
        k = np.flatnonzero(cat_at >= 0)
        category[k] = self.codes(buf, *f[CATEGORIES].where(cat_at[k]).spans()) if len(k) else []
        cat_iids = Fields.join([f[CATEGORY_IIDS], pw.packed_varints(buf, f[PACKED[CATEGORY_IIDS]], 1, self.damaged)])
        cat_iid_at = cat_iids.first(m)
        int_at, double_at = f[COUNTER_VALUE].last(m), f[DOUBLE_VALUE].last(m)
        value = f[COUNTER_VALUE].pick(int_at).view(np.int64).astype(np.float64)
        double = _at(f[DOUBLE_VALUE], double_at) > _at(f[COUNTER_VALUE], int_at)
        value[double] = f[DOUBLE_VALUE].pick(double_at[double]).view(np.float64)
        return _Events(packet=te.msg, kind=kind, uuid=f[TRACK_UUID].pick(f[TRACK_UUID].last(m)), ts=ts[te.msg],
                       seq=seq[te.msg], name=name, name_iid=f[NAME_IID].pick(iid_at), category=category,
                       has_category_iid=cat_iid_at >= 0, category_iid=cat_iids.pick(cat_iid_at), value=value,
                       flows=self.flows(buf, f))

    def flows(self, buf: np.ndarray, f: dict[int, Fields]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The flows each event takes part in and ends (its first ``MAX_FLOWS_A_SLICE`` of each, new
        ids before old): the event, the id, whether it ends the flow; by event, its ends last."""
        parts = []
        for ends, (new, old) in enumerate(((FLOW_IDS, FLOW_IDS_OLD), (ENDING_IDS, ENDING_IDS_OLD))):
            ids = [Fields.join([f[new], pw.packed_fixed64(buf, f[PACKED[new]], MAX_FLOWS_A_SLICE, self.damaged)]),
                   Fields.join([f[old], pw.packed_varints(buf, f[PACKED[old]], MAX_FLOWS_A_SLICE, self.damaged)])]
            msg, at, value = (np.concatenate([getattr(i, c) for i in ids]) for c in ("msg", "at", "value"))
            o = np.lexsort((at, np.repeat([0, 1], [len(i.msg) for i in ids]), msg))  # by event, new ids first
            both = Fields(msg[o], at[o], value[o], np.zeros(len(o), np.int64)).capped(MAX_FLOWS_A_SLICE)
            parts.append((both.msg, both.value, np.full(len(both.msg), bool(ends))))
        msg, ids, ends = (np.concatenate([p[i] for p in parts]) for i in range(3))
        o = np.argsort(msg, kind="stable")
        return msg[o], ids[o], ends[o]

    def interned(self, buf: np.ndarray, interned: Fields) -> tuple[np.ndarray, ...]:
        """The entries of the packets' interned data, in order: their packet, whether a category
        (else an event name), iid and name's code."""
        g = scan(buf, *interned.spans(), {EVENT_CATEGORIES, EVENT_NAMES}, self.damaged)
        entries = Fields.join([g[EVENT_NAMES], g[EVENT_CATEGORIES]])
        is_category = np.isin(entries.at, g[EVENT_CATEGORIES].at)
        m = len(entries.msg)
        e = scan(buf, *entries.spans(), {IID, ENTRY_NAME}, self.damaged)
        name_at = e[ENTRY_NAME].last(m)
        code = np.zeros(m, np.int64)
        k = np.flatnonzero(name_at >= 0)
        code[k] = self.codes(buf, *e[ENTRY_NAME].where(name_at[k]).spans()) if len(k) else []
        return interned.msg[entries.msg], is_category, e[IID].pick(e[IID].last(m)), code

    def descriptor(self, buf: np.ndarray, start: int, end: int) -> None:
        """A track descriptor's fields, kept by its uuid (a later one of the same uuid replaces it)."""
        data = memoryview(buf)
        d = pw.message(data, start, end, self.damaged)

        def text(fields: dict, t: int) -> str:
            return pw.texts(buf, np.array([fields[t][1]]), np.array([fields[t][1] + fields[t][2]]), MAX_TEXT)[0] \
                if t in fields else ""

        def sub(t: int) -> dict | None:
            return pw.message(data, d[t][1], d[t][1] + d[t][2], self.damaged) if t in d else None

        uuid = d[UUID][1] if UUID in d else 0
        if uuid not in self.tracks and len(self.tracks) >= 16 * MAX_TRACKS:
            self.fail(f"describes more than {16 * MAX_TRACKS:,} tracks")
        # its name is one of three (a oneof): the last given; an atrace name is not read
        named = max((t for t in (TRACK_NAME, STATIC_NAME, ATRACE_NAME) if t in d), key=lambda t: d[t][0], default=None)
        process, thread = sub(PROCESS), sub(THREAD)
        owner = process if process is not None else thread
        self.tracks[uuid] = {
            "name": text(d, named) if named in (TRACK_NAME, STATIC_NAME) else "",
            "parent": d[PARENT_UUID][1] if PARENT_UUID in d else 0,
            "pid": _int32(owner[PID][1] if PID in owner else 0) if owner is not None else None,
            "process_name": text(process, PROCESS_NAME) if process is not None else "",
            "thread_name": text(thread, THREAD_NAME) if thread is not None else "",
            "tid": _int64(thread[TID][1] if TID in thread else 0) if thread is not None else None,
            "counter": COUNTER_TRACK in d, "rank": _int32(d[RANK][1]) if RANK in d else 0}

    def segment(self, ev: _Events, lo: int, hi: int) -> None:
        """The events of packets ``lo`` to ``hi`` (of the batch): interned names looked up as they
        stand, slice events kept as rows and counters' samples as series."""
        a, b = np.searchsorted(ev.packet, [lo, hi])
        kind, seq = ev.kind[a:b], ev.seq[a:b]
        counter = np.flatnonzero(kind == COUNTER)
        if len(counter):
            self.counter(ev.uuid[a:b][counter], ev.ts[a:b][counter], ev.value[a:b][counter])
        rows = np.flatnonzero((kind >= SLICE_BEGIN) & (kind <= INSTANT))
        if not len(rows):
            return
        named = rows[kind[rows] != SLICE_END]  # an end's name is its begin's
        name, category = np.zeros(len(kind), np.int64), np.zeros(len(kind), np.int64)
        name[named] = ev.name[a:b][named]
        by_iid = named[name[named] < 0]
        name[by_iid] = _lookup(self.names, seq[by_iid], ev.name_iid[a:b][by_iid])
        category[named] = np.maximum(ev.category[a:b][named], 0)
        by_iid = named[(ev.category[a:b][named] < 0) & ev.has_category_iid[a:b][named]]
        category[by_iid] = _lookup(self.categories, seq[by_iid], ev.category_iid[a:b][by_iid])
        for column, values in (("uuid", ev.uuid[a:b]), ("ts", ev.ts[a:b]), ("kind", kind),
                               ("name", name.astype(np.int32)), ("category", category.astype(np.int32))):
            self.columns[column].append(values[rows])
        f_event, f_id, f_ends = ev.flows
        i, j = np.searchsorted(f_event, [a, b])
        local = f_event[i:j] - a
        row_of = np.full(len(kind), -1, np.int64)
        row_of[named] = self.rows + np.searchsorted(rows, named)
        keep = row_of[local] >= 0
        self.flow_parts.append((row_of[local][keep], f_id[i:j][keep], f_ends[i:j][keep]))
        self.rows += len(rows)

    def counter(self, uuid: np.ndarray, ts: np.ndarray, value: np.ndarray) -> None:
        if not np.isfinite(value).all():
            self.fail("a counter's value is not a finite number")
        distinct, first = np.unique(uuid, return_index=True)
        for u in distinct[np.argsort(first)].tolist():
            if u not in self.counter_uuids:
                if len(self.counter_uuids) >= MAX_COUNTERS:
                    self.fail(f"has more than {MAX_COUNTERS:,} counter tracks; at most {MAX_COUNTERS:,} can be "
                              "shown")
                self.counter_uuids[u] = None
        self.counter_parts.append((uuid, ts, value))

    def inflate(self, buf: np.ndarray, start: int, end: int, depth: int) -> None:
        """The packets a compressed packet's deflated bytes hold, read in its place."""
        if depth >= MAX_NESTED:
            self.fail(f"compressed packets are nested more than {MAX_NESTED} deep")
        data = buf[start:end].tobytes()
        inflater = zlib.decompressobj()
        out = bytearray()
        try:
            out += inflater.decompress(data, MAX_RATIO * len(data) + 1)
            if inflater.unconsumed_tail or len(out) > MAX_RATIO * max(len(data), 1 << 16):
                self.fail(f"compressed packets inflate to more than {MAX_RATIO} times their size")
        except zlib.error:
            self.fail("compressed packets are damaged (they do not inflate)")
        self.inflated += len(out)
        if self.inflated > MAX_INFLATED_BYTES:
            self.fail(f"compressed packets inflate to more than {MAX_INFLATED_BYTES:,} bytes")
        if out:
            inner = np.frombuffer(bytes(out), np.uint8)
            self.read(inner, 0, len(inner), depth + 1)


def _at(f: Fields, idx: np.ndarray) -> np.ndarray:
    """The offsets of the occurrences ``idx`` of a field, -1 where there is none."""
    return f.at if idx is f.every else np.where(idx >= 0, f.pick(idx, "at"), -1)


def _lookup(tables: dict[int, dict[int, int]], seq: np.ndarray, iid: np.ndarray) -> np.ndarray:
    """The codes of interned names (0 for one not interned) by sequence and iid: each distinct
    pair looked up once, unless hardly any repeats."""
    if len(seq) >= 64:
        if seq.min() == seq.max():
            return _lookup_in(tables.get(int(seq[0]), {}), iid)
        of_seq, sequences = _factorize(seq)
        if len(sequences) <= len(seq) // 64:
            out = np.zeros(len(seq), np.int64)
            for k, s in enumerate(sequences.tolist()):
                sel = of_seq == k
                out[sel] = _lookup_in(tables.get(s, {}), iid[sel])
            return out
    return np.array([tables.get(s, {}).get(i, 0) for s, i in zip(seq.tolist(), iid.tolist(), strict=True)], np.int64)


def _lookup_in(table: dict[int, int], iid: np.ndarray) -> np.ndarray:
    index, distinct = _factorize(iid)
    return np.array([table.get(i, 0) for i in distinct.tolist()], np.int64)[index]


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
        # not closed here: the arrays read from it may outlive an error raised while reading (the
        # map goes with the last of them)
        buf = np.frombuffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), np.uint8)
    reader = _Reader(fail)
    if progress is not None:
        progress(0.0)
    reader.read(buf, 0, size, progress=progress)
    del buf
    return [_trace(reader, Path(str(path)).name, fail)]


# ---------------------------------------------------------------------------------------------
# reading: the run


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


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes of ``values`` (the smallest integer type that holds them) and the distinct values."""
    import pyarrow as pa  # a hash table in one pass (numpy's unique sorts); loaded with any trace file

    encoded = pa.array(values).dictionary_encode()
    distinct = encoded.dictionary.to_numpy()
    codes = encoded.indices.to_numpy()
    return codes.astype(np.int16 if len(distinct) < 1 << 15 else np.int64), distinct


STEP = np.array([0, 1, -1, 0, 0], np.int8)  # by event type: what a begin, an end, an instant do to the open slices


def _open_counts(group: np.ndarray, step: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of events sorted by track (``group``; ``first``: where each track's start), how many
    slices are open on their track after and before each: the running sum of the steps, where
    an end with none open closes nothing (the count never goes below none)."""
    n = len(step)
    lengths = np.diff(np.append(first, n))
    opened = np.cumsum(step, dtype=np.int32)
    opened -= np.repeat(opened[first] - step[first], lengths)
    if n and opened.min() < 0:  # the sum less its lowest so far below none, each track far below the one before
        span = np.repeat(np.arange(len(first), dtype=np.int64) * (2 * n + 2), lengths)
        opened -= np.minimum(np.minimum.accumulate(opened - span) + span, 0).astype(np.int32)
    before = np.roll(opened, 1)
    before[first] = 0
    return opened, before


def _closing(group: np.ndarray, kind: np.ndarray, level: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each begin and the end that closes it (positions among events sorted by track): next to
    each other among the begins and ``ends`` (those that close one) of their track and level."""
    part = np.flatnonzero((kind == SLICE_BEGIN) | ends)
    top = int(level.max()) + 1 if len(level) else 1
    key = group[part].astype(np.int64) * top + level[part] if top > 1 else group[part]
    if top > 1:
        o = np.argsort(key, kind="stable")
        part, key = part[o], key[o]
    pair = np.flatnonzero((kind[part[:-1]] == SLICE_BEGIN) & (kind[part[1:]] == SLICE_END) & (key[:-1] == key[1:]))
    return part[pair], part[pair + 1]


class _Slices:
    """The slices the begin, end and instant events make, each begin closed by the next end on
    its track that leaves as many open below it (an end with none open is unmatched), in the
    order they close; an instant at the depth of the slices open around it."""

    def __init__(self, r: _Reader, fail: Fail) -> None:
        col = {k: np.concatenate(v) if v else np.zeros(0, np.uint64) for k, v in r.columns.items()}
        codes, self.tracks = _factorize(col["uuid"].astype(np.uint64))
        order = np.argsort(codes, kind="stable")  # by track, each's in the order they came
        group, kind = codes[order], col["kind"].astype(np.int8)[order]
        n = len(kind)
        first = np.flatnonzero(np.diff(group, prepend=-1) != 0) if n else np.zeros(0, np.int64)
        opened, before = _open_counts(group, STEP[kind], first)
        unmatched = (kind == SLICE_END) & (before == 0)
        level = np.where(kind == SLICE_BEGIN, before, opened)  # of a begin the depth it opens at; of an end, closes
        b, e = _closing(group, kind, level, (kind == SLICE_END) & ~unmatched)
        begin, end = order[b], order[e]
        self.unclosed = int(np.count_nonzero(kind == SLICE_BEGIN)) - len(b)
        self.unmatched = int(np.count_nonzero(unmatched))
        ts = col["ts"]
        if (ts[end] < ts[begin]).any():
            fail("a slice ends before it begins")
        # each slice by the event that closes it (its end, or the instant itself), in the order read
        named_by, depth = np.full(n, -1, np.int64), np.zeros(n, np.int32)
        named_by[end], depth[end] = begin, level[b]
        instant = kind == INSTANT
        named_by[order[instant]], depth[order[instant]] = order[instant], opened[instant]
        del group, kind, opened, before, level, unmatched, order
        closing = np.flatnonzero(named_by >= 0)
        self.row, self.depth = named_by[closing], depth[closing].astype(np.int64)
        self.track_code = codes[self.row].astype(np.int64)
        self.start, self.end = ts[self.row], ts[closing]
        self.name, self.category = col["name"][self.row], col["category"][self.row]
        self.n = len(self.row)
        slice_of = np.full(n, -1, np.int64)
        slice_of[self.row] = np.arange(self.n)
        ev, ids, ends = (np.concatenate([p[i] for p in r.flow_parts]) if r.flow_parts else np.zeros(0, np.int64)
                         for i in range(3))
        on = slice_of[ev] if len(ev) else np.zeros(0, np.int64)
        keep = on >= 0  # of a begin never closed: no slice
        self.flows = (on[keep], ids[keep].astype(np.uint64), ends[keep].astype(bool))


def _trace(r: _Reader, file_name: str, fail: Fail) -> Trace:
    from sim.io.native import _validate_trace

    s = _Slices(r, fail)
    _onto_threads(r.tracks, s)
    present = np.unique(s.track_code)
    ranks = {int(c): r.tracks.get(int(s.tracks[c]), {}).get("rank", 0) for c in present}
    codes = sorted(ranks, key=lambda c: (ranks[c], int(s.tracks[c])))  # the tracks with slices, in their order
    if len(codes) > MAX_TRACKS:
        fail(f"{len(codes):,} tracks have slices; at most {MAX_TRACKS:,} can be shown")
    names = {c: _track_name(r.tracks, int(s.tracks[c])) for c in codes}
    processes = list(dict.fromkeys(pid for _, pid in names.values()))
    # a track's nested slices stacked by depth, a row each (as the Chrome reader lays them out)
    wanted = np.zeros(len(s.tracks), np.int64)
    np.maximum.at(wanted, s.track_code, s.depth + 1)
    cap = MAX_DEPTH_ROWS
    while cap > 1 and int(np.minimum(wanted, cap).sum()) > MAX_TRACKS:
        cap -= 1
    rows = np.minimum(wanted, cap)
    tracks, track_depth, first = [], [], np.zeros(len(s.tracks), np.int64)
    for c in codes:
        first[c] = len(tracks)
        for d in range(int(rows[c])):
            tracks.append(Track(names[c][0] + (f" ·{d}" if d else ""), _kind(names[c][0]),
                                processes.index(names[c][1])))
            track_depth.append(d)
    firsts = ([s.start.min()] if s.n else []) + [ts.min() for _, ts, _ in r.counter_parts]
    origin = int(min(firsts, default=0))
    n = s.n
    track = first[s.track_code] + np.minimum(s.depth, rows[s.track_code] - 1)
    start = (s.start - np.uint64(origin)).astype(np.float64)
    end = (s.end - np.uint64(origin)).astype(np.float64)
    op, ops = _table(r.strings, s.name, lambda text: name_text(text) or "slice")
    layer, layers = _table(r.strings, s.category, lambda text: name_text(text) if text else None)
    order = np.lexsort((start, track))
    events = {"track": track[order], "start_ns": start[order], "dur_ns": (end - start)[order], "op": op[order],
              "layer": layer[order], "flops": np.zeros(n), "bytes": np.zeros(n)}
    event_of = np.empty(n, np.int64)
    event_of[order] = np.arange(n)
    first_of_op = np.full(len(ops), n, np.int64)  # each op's first slice: its layer is the op's
    np.minimum.at(first_of_op, op, np.arange(n))
    op_layer = np.full(len(ops), -1, np.int64)
    seen = first_of_op < n
    op_layer[seen] = layer[first_of_op[seen]]
    inside = layer >= 0
    lstart, lend = np.full(len(layers), np.inf), np.full(len(layers), -np.inf)
    np.minimum.at(lstart, layer[inside], start[inside])
    np.maximum.at(lend, layer[inside], end[inside])
    counters = _counters(r, origin)
    duration = max(float(end.max()) if n else 0.0, max((float(c.t_ns[-1]) for c in counters.values()), default=0.0))
    meta = {"model": name_text(Path(file_name).stem), "chip": "", "chip_name": "Perfetto trace", "instance": "",
            "mode": "imported", "batch": 1, "seq": 1, "dtype": "", "source": "perfetto",
            "source_file": name_text(file_name), "cores_per_copy": 1, "copies": 1, "lnc": 1, "cores_active": 1,
            "total_ns": duration, "time_origin_ns": float(origin),
            "units": {"time": "ns", "bytes": "B", "flops": "FLOP"}, "unclosed_slices": s.unclosed,
            "unmatched_end_events": s.unmatched, "skipped_events": r.skipped,
            "track_depth": track_depth, "depth_rows": cap,
            "slices_beyond_depth": int(np.count_nonzero(s.depth >= rows[s.track_code])),
            "flows": _flows(s, event_of)}
    trace = Trace(meta=meta, tracks=tuple(tracks), events=events, op_names=tuple(ops), op_layer=op_layer,
                  layer_names=tuple(layers), layer_kinds=("other",) * len(layers), layer_start_ns=lstart,
                  layer_end_ns=lend, counters=counters)
    _validate_trace(trace, fail)
    return trace


def _onto_threads(tracks: dict[int, dict], s: _Slices) -> None:
    """The slices of a thread's lanes put back on the thread, restacked with its own by depth
    (packed where they overlap: :func:`~sim.io.slices.stack_depths`), so that a file neuronviz
    wrote reads back into its tracks, not into a row of a thread's name beside the thread's. A
    lane is an async track as :func:`save_pftrace` writes the events a thread's stack cannot
    hold: no thread or process of its own, a child of the thread's process, with its name and rank."""
    thread_of = {}
    for uuid, d in tracks.items():
        if d["tid"] is not None:
            thread_of.setdefault((d["pid"], d["thread_name"], d["rank"]), uuid)
    code_of = {int(u): c for c, u in enumerate(s.tracks.tolist())}
    remap = np.arange(len(s.tracks), dtype=np.int64)
    for uuid, c in list(code_of.items()):
        d, parent = tracks.get(uuid), tracks.get(tracks.get(uuid, {}).get("parent", 0))
        if d is None or d["pid"] is not None or d["counter"] or parent is None or parent["tid"] is not None:
            continue
        thread = thread_of.get((parent["pid"], d["name"], d["rank"]))
        if thread is not None:
            if thread not in code_of:  # a thread whose every slice is on its lanes
                code_of[thread] = len(s.tracks)
                s.tracks = np.append(s.tracks, np.uint64(thread))
            remap[c] = code_of[thread]
    moved = np.flatnonzero(remap != np.arange(len(remap)))
    if not len(moved):
        return
    s.track_code = remap[s.track_code]
    on = np.flatnonzero(np.isin(s.track_code, remap[moved]))
    s.depth[on] = stack_depths(s.track_code[on], s.start[on].astype(np.int64), s.end[on].astype(np.int64))


def _table(strings: list[str], code: np.ndarray, label: Callable[[str], str | None]) -> tuple[np.ndarray, list[str]]:
    """Each slice's index into the distinct labels of its strings (-1 where ``label`` gives none),
    the labels in the order the slices first have them."""
    distinct, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    index: dict[str, int] = {}
    of_code = np.full(len(distinct), -1, np.int64)
    for k in np.argsort(first).tolist():
        text = label(strings[int(distinct[k])])
        if text is not None:
            of_code[k] = index.setdefault(text, len(index))
    return of_code[inverse.ravel()], list(index)


def _counters(r: _Reader, origin: int) -> dict[str, Counter]:
    """Each counter track's samples, as a counter named by its track, in the order they first came."""
    if not r.counter_parts:
        return {}
    uuid, ts, value = (np.concatenate([p[i] for p in r.counter_parts]) for i in range(3))
    by_track = np.argsort(uuid, kind="stable")
    uuid, ts, value = uuid[by_track], ts[by_track], value[by_track]
    counters = {}
    for u in r.counter_uuids:
        a, b = np.searchsorted(uuid, np.uint64(u), "left"), np.searchsorted(uuid, np.uint64(u), "right")
        name, _ = _track_name(r.tracks, u)
        while name in counters:
            name += "'"
        t = (ts[a:b] - np.uint64(origin)).astype(np.float64)
        o = np.argsort(t, kind="stable")
        counters[name] = Counter(name, "", t[o], value[a:b][o])
    return counters


def _flows(s: _Slices, event_of: np.ndarray) -> dict:
    """The arrows of the flows the slices take part in (event indices, as sim.io.chrome gives
    them): from each slice of a flow to its next, in time order, until a slice that ends it."""
    on, ids, ends = s.flows
    # the points of each flow, as the slices name them (a slice's flows, then those it ends)
    o = np.lexsort((ends, on))
    on, ids, ends = on[o], ids[o], ends[o]
    distinct, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    flow = np.argsort(np.argsort(first))[inverse.ravel()] if len(ids) else ids  # flows in the order first named
    o = np.lexsort((ends, on, s.start[on], flow))
    a, b = o[:-1], o[1:]
    arrow = (flow[a] == flow[b]) & ~ends[a] & (on[a] != on[b])
    frm, to = event_of[on[a[arrow]]].tolist(), event_of[on[b[arrow]]].tolist()
    return {"from": frm, "to": to, "names": [FLOW] if frm else [], "name": [0] * len(frm)}


# ---------------------------------------------------------------------------------------------
# writing


def _field(key: int, value: int | str | bytes) -> bytes:
    """A field of a message: a varint, or a text or message as its bytes."""
    if isinstance(value, int):
        return pw.varint_bytes(key) + pw.varint_bytes(value)
    data = value.encode() if isinstance(value, str) else value
    return pw.varint_bytes(key) + pw.varint_bytes(len(data)) + data


def _packet(*fields: bytes) -> bytes:
    """A packet of these fields (in the order of their numbers, as protobuf writes them)."""
    return _field(PACKET_TAG, b"".join(fields))


def save_pftrace(path: str | os.PathLike, traces: Sequence[Trace]) -> None:
    """Write ``traces`` as a Perfetto trace, atomically: a process per run, a thread track per
    track, a counter track per counter; each event a slice named by its op in its layer's category
    and its flows, at its whole nanoseconds (:func:`~sim.io.chrome.whole_ns`). An event its
    thread's stack cannot hold (overlapping one of its track without nesting in it:
    :func:`~sim.io.chrome.crossing_events`) goes on an async track of the process named and ranked
    as its thread, a lane each where such events overlap (:func:`_lanes`), which Perfetto draws
    merged into one track; :func:`load_pftrace` reads them back onto their thread."""
    names = sorted({n for t in traces for n in t.op_names})
    categories = sorted({n for t in traces for n in t.layer_names})
    iid = {n: i + 1 for i, n in enumerate(names)}
    cat_iid = {n: i + 1 for i, n in enumerate(categories)}
    interned = b"".join(_field(EVENT_CATEGORIES, _field(IID, i) + _field(ENTRY_NAME, n)) for n, i in cat_iid.items()) \
        + b"".join(_field(EVENT_NAMES, _field(IID, i) + _field(ENTRY_NAME, n)) for n, i in iid.items())
    with atomic_file(Path(path)) as f:
        f.write(_packet(_field(SEQUENCE_ID, SEQUENCE), _field(INTERNED_DATA, interned) if interned else b"",
                        _field(SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED)))
        for r, trace in enumerate(traces):
            base = (r + 1) << 32
            d = trace.run
            title = f"{d.workload.model} · {d.deployment.chip_name or d.deployment.chip or d.workload.mode}"
            f.write(_packet(_field(DESCRIPTOR, _field(UUID, base) + _field(PROCESS, _field(PID, r + 1)
                                                                             + _field(PROCESS_NAME, title)))))
            for t, track in enumerate(trace.tracks):
                thread = _field(PID, r + 1) + _field(TID, t + 1) + _field(THREAD_NAME, track.name)
                f.write(_packet(_field(DESCRIPTOR, _field(UUID, base + t + 1) + _field(THREAD, thread)
                                       + _field(PARENT_UUID, base) + _field(RANK, t))))
            start, end = whole_ns(trace)
            lane, lane_track = _lanes(trace, start, end)
            for j, t in enumerate(lane_track.tolist()):  # named as their track, in its place: Perfetto merges them
                f.write(_packet(_field(DESCRIPTOR, _field(UUID, base + LANES + j)
                                       + _field(TRACK_NAME, trace.tracks[t].name) + _field(PARENT_UUID, base)
                                       + _field(RANK, t))))
            for c, counter in enumerate(trace.counters.values()):
                f.write(_packet(_field(DESCRIPTOR, _field(UUID, base + 0x10000 + c) + _field(TRACK_NAME, counter.name)
                                       + _field(PARENT_UUID, base) + _field(COUNTER_TRACK, b""))))
            uuid = np.where(lane >= 0, lane + (base + LANES), trace.events["track"].astype(np.int64) + (base + 1))
            _write_events(f, trace, start.astype(np.int64), end.astype(np.int64), uuid, iid, cat_iid)
            for c, counter in enumerate(trace.counters.values()):
                _write_counter(f, counter, base + 0x10000 + c)


CHUNK = 1 << 18  # packets built and written at a time
LANES = 0x20000  # a run's async tracks' uuids start here, after its threads' and counters'


def _lanes(trace: Trace, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the events a thread's stack cannot hold (:func:`~sim.io.chrome.crossing_events`) go,
    on the times written (``start``, ``end``): async tracks of their process (a TrackEvent
    track's slices must nest), a lane of its track each in the lowest free where they overlap.
    Each event's lane (-1: on its thread) and each lane's track."""
    crossed = np.flatnonzero(crossing(trace.events["track"], start, end))
    lane = np.full(trace.n_events, -1, np.int64)
    if not len(crossed):
        return lane, np.zeros(0, np.int64)
    track = trace.events["track"][crossed].astype(np.int64)
    depth = stack_depths(track, start[crossed], end[crossed])
    pairs, lane[crossed] = np.unique(track * (int(depth.max()) + 1) + depth, return_inverse=True)
    return lane, pairs // (int(depth.max()) + 1)


def _timed(ts: np.ndarray, event: pw.Rows, flags: bool) -> bytes:
    """Packets of one sequence, each its time and a track event (and the flag that it needs the
    sequence's interned names)."""
    body = pw.Rows(len(ts)).raw(bytes([TIMESTAMP])).varint(np.maximum(ts, 0)).raw(bytes([SEQUENCE_ID, SEQUENCE]))
    body.message(bytes([TRACK_EVENT]), event)
    if flags:
        body.raw(bytes([SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE]))
    return pw.Rows(len(ts)).message(bytes([PACKET_TAG]), body).tobytes()


def _write_counter(f, counter: Counter, uuid: int) -> None:
    """A counter's samples, each a counter event of its value (a double) on its track."""
    ts = np.rint(counter.t_ns).astype(np.int64)
    for a in range(0, len(ts), CHUNK):
        n = len(ts[a:a + CHUNK])
        event = pw.Rows(n).raw(bytes([TYPE, COUNTER, TRACK_UUID])).varint(np.full(n, uuid, np.uint64))
        event.raw(pw.varint_bytes(DOUBLE_VALUE)).fixed64(counter.value[a:a + CHUNK].astype(np.float64))
        f.write(_timed(ts[a:a + CHUNK], event, flags=False))


def _write_events(f, trace: Trace, start: np.ndarray, end: np.ndarray, uuid: np.ndarray, iid: dict[str, int],
                  cat_iid: dict[str, int]) -> None:
    """Each event as a begin and an end packet (an instant when it lasts no time) at its ``start``
    and ``end`` (integer ns), in time order, on its track (``uuid``), with its op's interned name,
    its layer's interned category and its flows."""
    ev = trace.events
    n = trace.n_events
    # a slice of no duration is an instant (its begin and end would be one time, in either order)
    lasting = np.flatnonzero(end > start)
    times = np.concatenate([start, end[lasting]])
    is_end = np.concatenate([np.zeros(n, bool), np.ones(len(lasting), bool)])
    idx = np.concatenate([np.arange(n), lasting])
    # at one time, ends before begins: of two ends the inner (later begun) slice's first, of two
    # begins the outer (later ending) slice's first, so that slices nest as Perfetto stacks them
    order = np.lexsort((np.where(is_end, -start[idx], -end[idx]), ~is_end, times))
    k, times, is_end = idx[order], times[order], is_end[order]
    op_iid = np.array([iid[name] for name in trace.op_names] or [0], np.uint64)
    cat = np.array([cat_iid[name] for name in trace.layer_names] + [0], np.uint64)  # [-1]: in no layer
    kind = np.where(is_end, SLICE_END, np.where(end[k] == start[k], INSTANT, SLICE_BEGIN)).astype(np.uint64)
    flow_event, flow_bytes = _flow_records(trace.meta.get("flows"), n)
    for a in range(0, len(k), CHUNK):
        b = min(a + CHUNK, len(k))
        rows, begin = k[a:b], ~is_end[a:b]
        layer = ev["layer"][rows]
        event = pw.Rows(b - a).raw(bytes([TYPE])).varint(kind[a:b])
        event.raw(bytes([TRACK_UUID])).varint(uuid[rows].astype(np.uint64))
        event.raw(bytes([NAME_IID]), begin).varint(op_iid[ev["op"][rows]], begin)
        event.raw(bytes([CATEGORY_IIDS]), begin & (layer >= 0)).varint(cat[layer], begin & (layer >= 0))
        if len(flow_event):
            # the begin rows of events with flows, and their records in the order the event has them
            lo, hi = np.searchsorted(flow_event, rows, "left"), np.searchsorted(flow_event, rows, "right")
            count = np.where(begin, hi - lo, 0)
            which = np.repeat(lo, count) + np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
            event.records(np.repeat(np.arange(b - a), count), flow_bytes[which])
        f.write(_timed(times[a:b], event, flags=True))


def _flow_records(flows, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The flows' ids as the events name them: the slice a flow's arrow k leaves takes part in
    flow k + 1, the slice it enters ends it. By event (in the arrows' order), each record its
    field's 10 bytes."""
    flows = flows if isinstance(flows, dict) else {}
    event, records = [], []
    for k, (a, b) in enumerate(zip(flows.get("from", ()), flows.get("to", ()), strict=False)):
        if type(a) is int and type(b) is int and 0 <= a < n and 0 <= b < n:
            event += [a, b]
            records += [pw.varint_bytes(FLOW_IDS) + (k + 1).to_bytes(8, "little"),
                        pw.varint_bytes(ENDING_IDS) + (k + 1).to_bytes(8, "little")]
    event = np.array(event, np.int64)
    o = np.argsort(event, kind="stable")
    data = np.frombuffer(b"".join(records), np.uint8).reshape(-1, 10) if records else np.zeros((0, 10), np.uint8)
    return event[o], data[o]

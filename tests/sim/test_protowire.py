"""Protocol Buffers' wire format over arrays (sim.io.protowire) against protobuf's own: what it
writes, scan reads back field for field, in batches of many messages and of a few, and what it
builds row by row is protobuf's bytes."""

import random

import numpy as np
import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from sim.io import protowire as pw
from sim.io.protowire import I64, LEN, VARINT, tag

TYPE, UUID, NAME, CATEGORIES, COUNTER, DOUBLE, FLOWS = (tag(9, VARINT), tag(11, VARINT), tag(23, LEN), tag(22, LEN),
                                                         tag(30, VARINT), tag(44, I64), tag(47, I64))
EDGES = [0, 1, 127, 128, 16383, 16384, (1 << 32) - 1, 1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]


class Damaged(Exception):
    pass


def damaged():
    raise Damaged


def _events(n: int, seed: int) -> list:
    rng = random.Random(seed)
    events = []
    for _ in range(n):
        e = pb.TrackEvent(type=rng.choice([1, 2, 3, 4]), track_uuid=rng.choice(EDGES))
        if rng.random() < 0.5:
            e.name = rng.choice(["", "a", "ünïcode", "x" * 300])
        e.categories.extend(rng.choice(["c", "d", ""]) for _ in range(rng.randint(0, 3)))
        if rng.random() < 0.5:
            e.counter_value = rng.choice([-1, -(1 << 63), 5, (1 << 63) - 1])
        e.flow_ids.extend(rng.choice(EDGES) for _ in range(rng.randint(0, 4)))
        events.append(e)
    return events


def _scanned(events, caps=None):
    data = [e.SerializeToString() for e in events]
    buf = np.frombuffer(b"".join(data), np.uint8)
    ends = np.cumsum([len(d) for d in data])
    return pw.scan(buf, ends - [len(d) for d in data], ends, {TYPE, UUID, NAME, CATEGORIES, COUNTER, FLOWS},
                   damaged, caps), buf


@pytest.mark.parametrize("n", [1000, 7])  # rounds over many messages; the few finished a field at a time
def test_scan_reads_every_field_protobuf_wrote(n):
    events = _events(n, n)
    f, buf = _scanned(events)
    assert f[TYPE].pick(f[TYPE].last(n)).tolist() == [e.type for e in events]
    assert f[UUID].pick(f[UUID].last(n)).tolist() == [e.track_uuid for e in events]
    counter = f[COUNTER].last(n)
    assert [int(v) if i >= 0 else None for v, i in zip(f[COUNTER].pick(counter).view(np.int64), counter, strict=True)] \
        == [e.counter_value if e.HasField("counter_value") else None for e in events]
    names = f[NAME].last(n)
    texts = pw.texts(buf, *f[NAME].where(names[names >= 0]).spans(), 1000)
    assert texts == [e.name for e in events if e.HasField("name")]
    for tg, repeated in ((CATEGORIES, "categories"), (FLOWS, "flow_ids")):
        got = [[] for _ in events]
        values = pw.texts(buf, *f[tg].spans(), 1000) if tg == CATEGORIES else f[tg].value.tolist()
        for m, v in zip(f[tg].msg.tolist(), values, strict=True):
            got[m].append(v)
        assert got == [list(getattr(e, repeated)) for e in events]


def test_scan_keeps_a_repeated_field_up_to_its_cap_and_packed_ones_read_only_so_far():
    events = _events(200, 3)
    f, _ = _scanned(events, caps={FLOWS: 2})
    got = [[] for _ in events]
    for m, v in zip(f[FLOWS].msg.tolist(), f[FLOWS].value.tolist(), strict=True):
        got[m].append(v)
    assert got == [list(e.flow_ids)[:2] for e in events]
    packed = np.frombuffer(pw.varint_bytes(tag(47, LEN)) + pw.varint_bytes(8 * 10**6)
                           + np.arange(10**6, dtype="<u8").tobytes(), np.uint8)
    p = pw.scan(packed, np.array([0]), np.array([len(packed)]), {tag(47, LEN)}, damaged)[tag(47, LEN)]
    assert pw.packed_fixed64(packed, p, 64, damaged).value.tolist() == list(range(64))


@pytest.mark.parametrize("n", [100, 3])
@pytest.mark.parametrize("data", [
    b"\x48\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # a varint of eleven bytes
    b"\xba\x01\x05abc",  # a length past the message's end
    b"\x4b\x4c",  # a group
    b"\x4e\x00",  # wire type 6
    b"\x00\x00",  # field 0
    b"\x48",  # a key without its value
])
def test_damage_anywhere_in_a_message_is_found(n, data):
    good = pb.TrackEvent(type=1, track_uuid=2).SerializeToString()
    buf = np.frombuffer(good * n + data, np.uint8)
    starts = np.append(np.arange(n) * len(good), n * len(good))
    with pytest.raises(Damaged):
        pw.scan(buf, starts, np.append(starts[1:], len(buf)), {TYPE}, damaged)


def test_rows_are_the_bytes_protobuf_writes():
    rng = np.random.default_rng(0)
    n = 500
    kind = rng.integers(1, 4, n).astype(np.uint64)
    uuid = np.array(EDGES, np.uint64)[rng.integers(0, len(EDGES), n)]
    named = rng.random(n) < 0.5
    value = rng.normal(size=n)
    flows = np.sort(rng.integers(0, n, 200))
    flow_ids = rng.integers(0, 1 << 62, 200).astype(np.uint64)
    records = np.array([list(pw.varint_bytes(FLOWS) + int(v).to_bytes(8, "little")) for v in flow_ids], np.uint8)
    # in the order of the fields' numbers, as protobuf writes them
    event = pw.Rows(n).raw(bytes([TYPE])).varint(kind)
    event.raw(pw.varint_bytes(tag(10, VARINT)), named).varint(np.arange(n), named)
    event.raw(bytes([UUID])).varint(uuid).raw(pw.varint_bytes(DOUBLE)).fixed64(value).records(flows, records)
    written = pw.Rows(n).message(bytes([tag(11, LEN)]), event).tobytes()
    expected = []
    for i in range(n):
        e = pb.TrackEvent(type=int(kind[i]), track_uuid=int(uuid[i]), double_counter_value=float(value[i]))
        if named[i]:
            e.name_iid = i
        e.flow_ids.extend(int(v) for v in flow_ids[flows == i])
        expected.append(pb.TracePacket(track_event=e).SerializeToString())
    assert written == b"".join(expected)

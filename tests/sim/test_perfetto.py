"""Perfetto's native trace format both ways: a simulation round trip, a file Perfetto's own trace
builder writes, and bad files in one line."""

import json
import zlib

import numpy as np
import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from perfetto.trace_builder.proto_builder import TraceProtoBuilder

from sim.errors import TraceFileError
from sim.io import load_file, perfetto, save_file
from sim.io.protowire import varint_bytes
from sim.run import RunConfig, simulate

BEGIN, END, INSTANT, COUNTER = (pb.TrackEvent.Type.TYPE_SLICE_BEGIN, pb.TrackEvent.Type.TYPE_SLICE_END,
                                pb.TrackEvent.Type.TYPE_INSTANT, pb.TrackEvent.Type.TYPE_COUNTER)


def _rows(trace):
    ev = trace.events
    return sorted((trace.tracks[t].name.rsplit(" / ", 1)[-1], trace.op_names[o], round(s), round(s + d))
                  for t, o, s, d in zip(ev["track"].tolist(), ev["op"].tolist(), ev["start_ns"].tolist(),
                                        ev["dur_ns"].tolist(), strict=True))


def test_a_simulation_written_as_a_pftrace_reads_back_as_the_same_events_and_counters(tmp_path):
    sim = simulate(RunConfig(model="gpt2", chip="trn1", mode="decode", seq=64, new_tokens=4))
    path = tmp_path / "run.pftrace"
    save_file(path, [sim])
    (back,) = load_file(path)
    assert back.n_events == sim.n_events and _rows(back) == _rows(sim)
    assert {t.kind for t in back.tracks} == {sim.tracks[i].kind for i in set(sim.events["track"].tolist())}
    sbuf = next(c for name, c in back.counters.items() if name.endswith("sbuf_bytes"))
    assert np.array_equal(sbuf.value, sim.counters["sbuf_bytes"].value)
    layers = {back.layer_names[i] for i in back.events["layer"] if i >= 0}
    assert layers == {sim.layer_names[i] for i in sim.events["layer"] if i >= 0}  # a layer is its slices' category


def _builder_trace() -> bytes:
    """A trace as Perfetto's Python trace builder makes one: a process and two threads, nested
    slices, an instant, a counter, names interned, part of it in compressed packets."""
    b = TraceProtoBuilder()
    p = b.add_packet()
    p.track_descriptor.uuid, p.track_descriptor.process.pid = 1, 42
    p.track_descriptor.process.process_name = "python"
    for uuid, tid, name in ((2, 1, "MainThread"), (3, 2, "Worker")):
        p = b.add_packet()
        p.track_descriptor.uuid, p.track_descriptor.parent_uuid = uuid, 1
        p.track_descriptor.thread.pid, p.track_descriptor.thread.tid = 42, tid
        p.track_descriptor.thread.thread_name = name
    p = b.add_packet()
    p.track_descriptor.uuid, p.track_descriptor.parent_uuid, p.track_descriptor.name = 4, 1, "queue depth"
    p.track_descriptor.counter.SetInParent()
    p = b.add_packet()
    p.trusted_packet_sequence_id, p.sequence_flags = 7, 1
    p.interned_data.event_names.add(iid=1, name="ProfilerStep#1")
    p.interned_data.event_names.add(iid=2, name="aten::linear")

    def event(ts, kind, track, name_iid=0, name="", value=None, flows=(), ends=()):
        p = b.add_packet()
        p.track_event.flow_ids.extend(flows)
        p.track_event.terminating_flow_ids.extend(ends)
        p.timestamp, p.trusted_packet_sequence_id, p.sequence_flags = ts, 7, 2
        p.track_event.type, p.track_event.track_uuid = kind, track
        if name_iid:
            p.track_event.name_iid = name_iid
        if name:
            p.track_event.name = name
            p.track_event.categories.append("cpu_op")
        if value is not None:
            p.track_event.double_counter_value = value

    event(1000, BEGIN, 2, name_iid=1)
    event(1100, BEGIN, 2, name_iid=2, flows=[42])
    event(1400, END, 2)
    event(2000, END, 2)
    event(1500, INSTANT, 3, name="enqueue", ends=[42])
    event(1000, COUNTER, 4, value=3.0)
    event(1800, COUNTER, 4, value=1.0)
    inner = TraceProtoBuilder()
    q = inner.add_packet()
    q.timestamp, q.trusted_packet_sequence_id = 2500, 7
    q.track_event.type, q.track_event.track_uuid, q.track_event.name = INSTANT, 3, "compressed"
    p = b.add_packet()
    p.compressed_packets = zlib.compress(inner.serialize())
    return b.serialize()


def test_a_trace_perfettos_own_builder_writes_opens_on_its_threads(tmp_path):
    path = tmp_path / "py.pftrace"
    path.write_bytes(_builder_trace())
    (trace,) = load_file(path)
    # nested slices stacked by depth on their thread, as the Chrome reader lays them out
    assert [t.name for t in trace.tracks] == ["python / MainThread", "python / MainThread ·1", "python / Worker"]
    assert trace.meta["track_depth"] == [0, 1, 0]
    assert _rows(trace) == [("MainThread", "ProfilerStep#1", 0, 1000), ("MainThread ·1", "aten::linear", 100, 400),
                            ("Worker", "compressed", 1500, 1500), ("Worker", "enqueue", 500, 500)]
    # the flow from aten::linear to the instant that ends it
    (a,), (b,) = trace.meta["flows"]["from"], trace.meta["flows"]["to"]
    assert (trace.op_names[trace.events["op"][a]], trace.op_names[trace.events["op"][b]]) == ("aten::linear", "enqueue")
    (name, counter), = trace.counters.items()
    assert name == "python / queue depth" and list(counter.t_ns) == [0.0, 800.0] and list(counter.value) == [3.0, 1.0]
    assert trace.layer_names == ("cpu_op",)


@pytest.mark.parametrize("damage, message", [
    (lambda data: data[:-7], "is not a Perfetto trace, or is truncated (a packet runs past the end of the file)"),
    (lambda data: b"\x0a\x05garbage and more", "is not a Perfetto trace, or is damaged (a packet does not parse)"),
    (lambda data: b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
     "is not a Perfetto trace (a packet's length runs past the end of the file)"),
])
def test_a_damaged_trace_is_one_line(tmp_path, damage, message):
    path = tmp_path / "bad.pftrace"
    path.write_bytes(damage(_builder_trace()))
    with pytest.raises(TraceFileError) as err:
        load_file(path)
    assert str(err.value) == f"{path}: {message}"


def test_compressed_packets_are_inflated_only_within_a_ratio(tmp_path):
    bomb = pb.TracePacket(compressed_packets=zlib.compress(b"\x0a\x00" * (50 << 20), 9))
    path = tmp_path / "bomb.pftrace"
    path.write_bytes(b"\x0a" + varint_bytes(bomb.ByteSize()) + bomb.SerializeToString())
    with pytest.raises(TraceFileError, match=r"compressed packets inflate to more than 100 times their size$"):
        load_file(path)


def test_a_slice_ending_before_it_begins_and_too_many_counters_are_refused(tmp_path, monkeypatch):
    b = TraceProtoBuilder()
    for ts, kind in ((500, BEGIN), (100, END)):
        p = b.add_packet()
        p.timestamp, p.track_event.type, p.track_event.track_uuid, p.track_event.name = ts, kind, 9, "x"
    path = tmp_path / "backwards.pftrace"
    path.write_bytes(b.serialize())
    with pytest.raises(TraceFileError, match="a slice ends before it begins$"):
        load_file(path)
    b = TraceProtoBuilder()
    for uuid in range(5):
        p = b.add_packet()
        p.timestamp, p.track_event.type, p.track_event.track_uuid = 10, COUNTER, uuid + 1
        p.track_event.counter_value = 1
    path.write_bytes(b.serialize())
    monkeypatch.setattr(perfetto, "MAX_COUNTERS", 3)
    with pytest.raises(TraceFileError, match="has more than 3 counter tracks; at most 3 can be shown$"):
        load_file(path)


def test_a_pftrace_of_a_profile_keeps_its_depths_and_flows(tmp_path):
    path = tmp_path / "py.pftrace"
    path.write_bytes(_builder_trace())
    (trace,) = load_file(path)
    save_file(tmp_path / "again.pftrace", [trace])
    (back,) = load_file(tmp_path / "again.pftrace")
    assert _rows(back) == _rows(trace)
    ops = [[back.op_names[back.events["op"][i]] for i in back.meta["flows"][k]] for k in ("from", "to")]
    assert ops == [["aten::linear"], ["enqueue"]]


def test_events_overlapping_on_a_track_go_on_async_tracks_where_every_slice_nests(tmp_path):
    """On one queue: ``load`` [0, 100] holds ``wait`` [10, 20]; two transfers [50, 150] and [60, 160]
    overlap it and each other; ``store`` [120, 130] begins after ``load`` ends."""
    from sim.trace import Trace

    sim = simulate(RunConfig(model="gpt2", chip="trn1", mode="decode", seq=64, new_tokens=4))
    q = next(i for i, t in enumerate(sim.tracks) if t.kind == "dma_read")
    op, start, dur = np.array([0, 1, 2, 2, 3]), np.array([0, 10, 50, 60, 120]), np.array([100, 10, 100, 100, 10])
    events = {"track": np.full(5, q, np.int16), "start_ns": start * 1.0, "dur_ns": dur * 1.0,
              "op": op.astype(np.int32), "layer": sim.op_layer[op].astype(np.int32), "flops": np.zeros(5),
              "bytes": np.zeros(5)}
    trace = Trace(meta=sim.meta, tracks=sim.tracks, events=events, op_names=sim.op_names, op_layer=sim.op_layer,
                  layer_names=sim.layer_names, layer_kinds=sim.layer_kinds, layer_start_ns=sim.layer_start_ns,
                  layer_end_ns=sim.layer_end_ns, counters={})
    path = tmp_path / "overlap.pftrace"
    save_file(path, [trace])
    packets = pb.Trace.FromString(path.read_bytes()).packet
    tracks = {p.track_descriptor.uuid: p.track_descriptor for p in packets if p.HasField("track_descriptor")}
    process = next(u for u, d in tracks.items() if d.HasField("process"))
    slices = [(p.timestamp, p.track_event.type, p.track_event.track_uuid) for p in packets if p.HasField("track_event")]
    on = {}
    for ts, kind, uuid in slices:
        on.setdefault(uuid, []).append((ts, kind))
    thread = next(u for u, d in tracks.items() if d.thread.thread_name == sim.tracks[q].name)
    lanes = sorted(set(on) - {thread})
    assert len(lanes) == 2  # the two transfers overlap each other: a lane each
    for uuid in lanes:
        d = tracks[uuid]
        assert (d.name, d.parent_uuid, d.HasField("thread")) == (sim.tracks[q].name, process, False)
    assert [on[u] for u in lanes] == [[(50, BEGIN), (150, END)], [(60, BEGIN), (160, END)]]
    assert on[thread] == [(0, BEGIN), (10, BEGIN), (20, END), (100, END), (120, BEGIN), (130, END)]  # nested

    (back,) = load_file(path)  # the lanes back on their thread, its slices stacked as in any reader
    name = f"{back.tracks[0].name.split(' / ')[0]} / {sim.tracks[q].name}"
    assert [t.name for t in back.tracks] == [name, f"{name} ·1", f"{name} ·2"]
    row = [0, 1, 1, 2, 0]  # load, store; wait, then the first transfer once it has ended; the second
    assert _rows(back) == sorted(
        (sim.tracks[q].name + (f" ·{r}" if r else ""), sim.op_names[o], s, s + d)
        for o, s, d, r in zip(op.tolist(), start.tolist(), dur.tolist(), row, strict=True))
    chrome = tmp_path / "overlap.json"  # the same five slices of one thread in a Chrome file of another tool
    chrome.write_text(json.dumps({"traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": sim.tracks[q].name}},
        *({"ph": "X", "name": sim.op_names[o], "ts": s / 1e3, "dur": d / 1e3, "pid": 1, "tid": 1}
          for o, s, d in zip(op.tolist(), start.tolist(), dur.tolist(), strict=True))]}))
    assert _rows(load_file(chrome)[0]) == _rows(back)


# ---------------------------------------------------------------------------------------------
# read a window at a time, only the fields used


def _packets(*packets) -> bytes:
    return b"".join(b"\x0a" + varint_bytes(p.ByteSize()) + p.SerializeToString() for p in packets)


def _event(ts, kind, track, **fields):
    p = pb.TracePacket(timestamp=ts, trusted_packet_sequence_id=fields.pop("seq", 1))
    p.track_event.type, p.track_event.track_uuid = kind, track
    for name, value in fields.items():
        if isinstance(value, list):
            getattr(p.track_event, name).extend(value)
        else:
            setattr(p.track_event, name, value)
    return p


def test_windows_and_batches_of_any_size_read_the_same_run(tmp_path, monkeypatch):
    sim = simulate(RunConfig(model="gpt2", chip="trn1", mode="decode", seq=64, new_tokens=4))
    path = tmp_path / "run.pftrace"
    save_file(path, [sim])
    (whole,) = load_file(path)
    # windows of 256 bytes (packets across their edges) and every message read a field at a time
    monkeypatch.setattr(perfetto, "WINDOW", 256)
    monkeypatch.setattr(perfetto.pw, "TAIL", 1 << 30)
    (pieces,) = load_file(path)
    assert pieces.n_events == whole.n_events == sim.n_events
    for column in whole.events:
        assert np.array_equal(pieces.events[column], whole.events[column]), column
    assert pieces.op_names == whole.op_names and list(pieces.counters) == list(whole.counters)


def test_names_are_interned_per_sequence_until_a_packet_clears_them(tmp_path):
    p = pb.TracePacket(trusted_packet_sequence_id=1, sequence_flags=1)
    p.interned_data.event_names.add(iid=1, name="first")
    q = pb.TracePacket(trusted_packet_sequence_id=2, sequence_flags=1)
    q.interned_data.event_names.add(iid=1, name="other sequence")
    cleared = pb.TracePacket(trusted_packet_sequence_id=1, sequence_flags=1)
    cleared.interned_data.event_names.add(iid=1, name="after the clear")
    path = tmp_path / "interned.pftrace"
    path.write_bytes(_packets(p, q, _event(10, INSTANT, 5, name_iid=1), _event(20, INSTANT, 5, name_iid=1, seq=2),
                              cleared, _event(30, INSTANT, 5, name_iid=1), _event(40, INSTANT, 5, name_iid=2)))
    (trace,) = load_file(path)
    # an iid never interned (2) names its slice as an unnamed one
    assert [trace.op_names[o] for o in trace.events["op"]] == ["first", "other sequence", "after the clear", "slice"]


def _with(packet, extra: bytes) -> bytes:
    """A packet whose track event holds ``extra`` fields after its own, framed."""
    event = packet.track_event.SerializeToString() + extra
    packet.ClearField("track_event")
    body = packet.SerializeToString() + b"\x5a" + varint_bytes(len(event)) + event
    return b"\x0a" + varint_bytes(len(body)) + body


def _len_field(key: int, payload: bytes) -> bytes:
    return varint_bytes(key) + varint_bytes(len(payload)) + payload


def test_what_protobuf_refuses_deep_down_in_fields_not_read_opens(tmp_path):
    """A debug annotation nested 100,000 deep (protobuf stops at 100) is skipped unread, as is a
    packed list of a million flow ids beyond the first 64; a name not UTF-8 is read with its bad
    bytes replaced."""
    heads, size = [], 0  # DebugAnnotation.dict_entries in dict_entries..., each's key and length, the inner first
    for _ in range(100_000):
        heads.append(varint_bytes(11 << 3 | 2) + varint_bytes(size))
        size += len(heads[-1])
    annotation = b"".join(reversed(heads))
    flows = np.arange(1, 1_000_001, dtype="<u8").tobytes()  # TrackEvent.flow_ids, packed
    path = tmp_path / "deep.pftrace"
    path.write_bytes(_with(_event(100, BEGIN, 2, name="deep"), _len_field(4 << 3 | 2, annotation))
                     + _packets(_event(200, END, 2))
                     + _with(_event(300, BEGIN, 3, name="many flows"), _len_field(47 << 3 | 2, flows))
                     + _with(_event(350, INSTANT, 3), _len_field(23 << 3 | 2, b"\xffA"))  # its name
                     + _packets(_event(400, INSTANT, 4, name="ends 1", terminating_flow_ids=[1]),
                                _event(450, INSTANT, 4, name="ends 65", terminating_flow_ids=[65]),
                                _event(500, END, 3)))
    with pytest.raises(Exception, match="Error parsing message"):
        pb.Trace.FromString(path.read_bytes())
    (trace,) = load_file(path)
    assert _rows(trace) == [("track 2", "deep", 0, 100), ("track 3", "many flows", 200, 400),
                            ("track 3 ·1", "\ufffdA", 250, 250), ("track 4", "ends 1", 300, 300),
                            ("track 4", "ends 65", 350, 350)]
    ops = [[trace.op_names[trace.events["op"][i]] for i in trace.meta["flows"][k]] for k in ("from", "to")]
    assert ops == [["many flows"], ["ends 1"]]  # flow 65 is beyond the 64 read of the slice


@pytest.mark.parametrize("payload", [
    b"\x0b\x0c",  # a group: no Perfetto message has one
    b"\x5a\x03\xfa\x02\x7f",  # a track event's packed flow ids past its end
    b"\x5a\x02\x48\xff",  # its type's varint cut short
    b"\x00\x01",  # field 0
])
def test_damage_in_a_field_read_over_is_one_line(tmp_path, payload):
    path = tmp_path / "bad.pftrace"
    path.write_bytes(_packets(_event(1, INSTANT, 1, name="fine")) + b"\x0a" + varint_bytes(len(payload)) + payload)
    with pytest.raises(TraceFileError) as err:
        load_file(path)
    assert str(err.value) == f"{path}: is not a Perfetto trace, or is damaged (a packet does not parse)"


def test_compressed_packets_nested_too_deep_are_refused(tmp_path):
    data = _packets(_event(1, INSTANT, 1, name="inside"))
    for _ in range(perfetto.MAX_NESTED):
        data = _packets(pb.TracePacket(compressed_packets=zlib.compress(data)))
    path = tmp_path / "nested.pftrace"
    path.write_bytes(data)
    (trace,) = load_file(path)  # as deep as allowed: read
    assert trace.op_names == ("inside",)
    path.write_bytes(_packets(pb.TracePacket(compressed_packets=zlib.compress(data))))
    with pytest.raises(TraceFileError) as err:
        load_file(path)
    assert str(err.value) == f"{path}: compressed packets are nested more than {perfetto.MAX_NESTED} deep"

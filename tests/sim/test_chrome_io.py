"""Chrome Trace Event JSON: round trips of our runs, files of other tools, and bad input of every kind."""

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pytest

import sim.io.chrome as chrome
from sim.errors import TraceFileError
from sim.io.chrome import export_chrome, load_chrome, save_chrome
from sim.io.native import load_traces, save_traces
from sim.metrics import compute_metrics

GOLDEN = Path(__file__).parents[1] / "data" / "pytorch-profiler.json"
TS_TOLERANCE_NS = 1e-6 * 1e3  # microsecond floats: 1e-6 us
# events are written in whole nanoseconds (whole_ns): a start rounded, an end rounded, so a duration within 1 ns
START_TOLERANCE_NS, DUR_TOLERANCE_NS = 0.5 + TS_TOLERANCE_NS, 1.0 + TS_TOLERANCE_NS


@pytest.fixture(scope="module")
def traces(run):
    return [run("bert-base", "trn1", batch=2), run("gpt2", "inf2", mode="decode", seq=32, new_tokens=4)]


@pytest.fixture(scope="module")
def saved(traces, tmp_path_factory):
    path = tmp_path_factory.mktemp("chrome") / "cmp.json"
    save_chrome(path, traces)
    return path


def assert_same_runs(originals, loaded):
    assert len(loaded) == len(originals)
    for a, b in zip(originals, loaded, strict=True):
        assert b.meta["chip"] == a.meta["chip"] and b.meta["model"] == a.meta["model"]
        assert dict(b.meta) == dict(a.meta)
        assert b.tracks == a.tracks
        assert b.op_names == a.op_names and b.layer_names == a.layer_names and b.layer_kinds == a.layer_kinds
        assert np.array_equal(b.op_layer, a.op_layer)
        assert np.array_equal(b.layer_start_ns, a.layer_start_ns) and np.array_equal(b.layer_end_ns, a.layer_end_ns)
        assert b.n_events == a.n_events
        for name in ("track", "op", "layer", "flops", "bytes"):
            assert np.array_equal(b.events[name], a.events[name]), name
        assert [b.tracks[i].name for i in b.events["track"][:50]] == [a.tracks[i].name for i in a.events["track"][:50]]
        for name, atol in (("start_ns", START_TOLERANCE_NS), ("dur_ns", DUR_TOLERANCE_NS)):
            assert np.allclose(b.events[name], a.events[name], rtol=0, atol=atol), name
        assert list(b.counters) == list(a.counters)
        for name, c in a.counters.items():
            d = b.counters[name]
            assert d.unit == c.unit
            assert np.allclose(d.t_ns, c.t_ns, rtol=0, atol=TS_TOLERANCE_NS)
            assert np.array_equal(d.value, c.value)


def test_round_trip_keeps_every_event_counter_and_meta(traces, saved):
    assert_same_runs(traces, load_chrome(saved))


def test_gzip_round_trip(traces, tmp_path):
    path = tmp_path / "cmp.json.gz"
    save_chrome(path, traces)
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert_same_runs(traces, load_chrome(path))


def test_saved_file_is_the_exported_document(traces, tmp_path):
    path = tmp_path / "cmp.json"
    save_chrome(path, traces)
    assert json.loads(path.read_bytes()) == json.loads(json.dumps(export_chrome(traces)))
    assert_same_runs(traces, load_chrome(path))


def test_exported_json_is_a_chrome_trace(traces, saved):
    doc = json.loads(saved.read_text(encoding="utf-8"))
    assert doc["displayTimeUnit"] == "ns"
    events = doc["traceEvents"]
    assert {e["ph"] for e in events} == {"M", "X", "C"}
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted(procs.values()) == ["Inferentia2 NC0 · gpt2", "Trainium1 NC0 · bert-base"]
    threads = [e for e in events if e["ph"] == "M" and e["name"] == "thread_name"]
    assert [e["args"]["name"] for e in threads] == [t.name for tr in traces for t in tr.tracks]
    assert len({(e["pid"], e["tid"]) for e in threads}) == len(threads)
    assert any(e["name"] == "thread_sort_index" for e in events if e["ph"] == "M")
    xs = [e for e in events if e["ph"] == "X"]
    assert len(xs) == sum(t.n_events for t in traces)
    first, tr = xs[0], traces[0]
    assert first["name"] == tr.op_names[tr.events["op"][0]] and first["cat"] == tr.tracks[tr.events["track"][0]].kind
    start, end = np.rint(tr.events["start_ns"][0]), np.rint(tr.events["start_ns"][0] + tr.events["dur_ns"][0])
    assert first["ts"] == start / 1e3 and first["dur"] == (end - start) / 1e3
    assert set(first["args"]) == {"layer", "flops", "bytes"}
    assert first["args"]["layer"] == tr.layer_names[tr.events["layer"][0]]
    assert all(e["pid"] in procs for e in xs)
    cs = [e for e in events if e["ph"] == "C"]
    assert {e["name"] for e in cs} == set(tr.counters) | set(traces[1].counters)
    assert all(list(e["args"]) == [e["name"]] for e in cs)
    assert len(cs) == sum(len(c.t_ns) for t in traces for c in t.counters.values())
    assert doc["otherData"]["neuronviz"]["runs"][1]["meta"]["model"] == "gpt2"


def test_run_needing_indices_round_trips(traces, tmp_path):
    """Two ops of one name in one layer: names cannot tell them apart, so args carry indices."""
    from sim.trace import Trace

    t = traces[0]
    names = list(t.op_names)
    first = int(t.events["op"][0])
    twin = next(o for o in range(len(names)) if o != first and t.op_layer[o] == t.op_layer[first])
    names[twin] = names[first]
    twisted = Trace(meta=t.meta, tracks=t.tracks, events=t.events, op_names=tuple(names), op_layer=t.op_layer,
                    layer_names=t.layer_names, layer_kinds=t.layer_kinds, layer_start_ns=t.layer_start_ns,
                    layer_end_ns=t.layer_end_ns, counters=t.counters)
    doc = export_chrome([twisted])
    assert "op" in next(e for e in doc["traceEvents"] if e["ph"] == "X")["args"]
    path = tmp_path / "twins.json"
    save_chrome(path, [twisted])
    assert_same_runs([twisted], load_chrome(path))


def test_pytorch_profiler_file():
    [trace] = load_chrome(GOLDEN)
    # a thread's nested slices stacked by depth: ProfilerStep > aten::linear > aten::addmm > launches
    main = "python3 / thread 1234 (python3)"
    assert [t.name for t in trace.tracks] == [
        main, f"{main} ·1", f"{main} ·2", f"{main} ·3", "python3 / thread 1301 (pt_autograd_0)",
        "python3 / thread 1301 (pt_autograd_0) ·1", "Process Spans / Thread PyTorch Profiler", "GPU 0 / stream 7",
        "GPU 0 / stream 20",
    ]
    assert trace.meta["track_depth"] == [0, 1, 2, 3, 0, 1, 0, 0, 0]
    assert [t.core for t in trace.tracks] == [0, 0, 0, 0, 0, 0, 1, 2, 2]
    assert {t.kind for t in trace.tracks} == {"other"}
    # 16 complete events, 1 instant, 2 begin/end pairs and 1 begin never ended; the flow is read
    assert trace.n_events == 20
    m = trace.meta
    assert (m["unclosed_slices"], m["unmatched_end_events"], m["skipped_events"]) == (1, 1, 0)
    assert m["slices_beyond_depth"] == 0

    def names_on(track):
        return [trace.op_names[o] for o in trace.events["op"][trace.events["track"] == track]]

    assert names_on(0) == ["ProfilerStep#2"]
    assert names_on(1) == ["aten::linear", "aten::relu", "aten::linear", "cudaDeviceSynchronize"]
    assert names_on(2) == ["aten::addmm", "cudaLaunchKernel", "aten::addmm"]
    assert names_on(3) == ["[memory]", "cudaLaunchKernel", "cudaLaunchKernel"]
    assert names_on(5) == ["AddmmBackward0"]  # B/E pairs nest too
    # the ac2g flow: from the kernel launch it starts in to the kernel it ends in ("bp": "e")
    flows = m["flows"]
    (a,), (b,) = flows["from"], flows["to"]
    assert (trace.op_names[trace.events["op"][a]], trace.events["start_ns"][a]) == ("cudaLaunchKernel", 40_000.0)
    assert (trace.op_names[trace.events["op"][b]], trace.events["start_ns"][b]) == (
        "ampere_sgemm_64x32_sliced1x4_tn", 60_000.0)
    assert flows["names"] == ["ac2g"] and flows["name"] == [0] and m["unbound_flow_points"] == 0
    for key in ("chip", "chip_name", "model", "mode", "batch", "seq", "dtype", "instance"):
        assert key in m
    assert m["model"] == "pytorch-profiler" and m["mode"] == "imported" and m["source"] == "chrome-json"
    assert m["time_origin_us"] == 1719234567000.0

    def durations(name):
        sel = trace.events["op"] == trace.op_names.index(name)
        return sorted(trace.events["dur_ns"][sel].tolist())

    assert durations("aten::addmm") == [85_000.0, 90_000.0]
    assert durations("ampere_sgemm_64x32_sliced1x4_tn") == [40_750.0, 42_500.0]
    assert durations("AddmmBackward0") == [45_000.0]
    assert durations("autograd::engine::evaluate_function: AddmmBackward0") == [80_000.0]
    assert durations("aten::sum") == [500_000.0]  # closed at the last timestamp of the file
    assert durations("[memory]") == [0.0]
    assert trace.events["start_ns"].min() == 0.0
    assert trace.duration_ns == 1_000_000.0
    memcpy = trace.events["op"] == trace.op_names.index("Memcpy DtoH (Device -> Pinned)")
    assert trace.events["bytes"][memcpy].tolist() == [4096.0]
    assert set(trace.layer_names) == {"cpu_op", "cpu_instant_event", "cuda_runtime", "kernel", "gpu_memcpy", "Trace"}
    mem = trace.counters["GPU Memory.allocated"]
    assert mem.t_ns.tolist() == [60_000.0, 300_000.0] and mem.value.tolist() == [1048576.0, 524288.0]
    assert set(trace.counters) == {"GPU Memory.allocated", "GPU Memory.reserved"}
    assert compute_metrics(trace).latency_s == pytest.approx(1e-3)


def test_pytorch_profiler_gzip_and_native_save(tmp_path):
    gz = tmp_path / "pytorch-profiler.json.gz"
    gz.write_bytes(gzip.compress(GOLDEN.read_bytes()))
    [plain], [packed] = load_chrome(GOLDEN), load_chrome(gz)
    assert packed.tracks == plain.tracks and packed.op_names == plain.op_names
    assert all(np.array_equal(packed.events[k], plain.events[k]) for k in plain.events)
    assert packed.meta["model"] == "pytorch-profiler"
    native = tmp_path / "imported.nvtrace"
    save_traces(native, [packed])
    [again] = load_traces(native)
    assert again.tracks == plain.tracks and dict(again.meta) == dict(packed.meta)


def test_bare_array_without_closing_bracket_and_engine_kinds(tmp_path):
    events = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "NC0 tensor"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "DMA read queue 3"}},
        {"ph": "X", "name": "mm", "pid": 1, "tid": 1, "ts": 5, "dur": 2, "args": {"layer": "l0", "flops": 8}},
        {"ph": "X", "name": "load", "pid": 1, "tid": 2, "ts": 5.5, "dur": 1, "args": {"bytes": 64}},
        {"ph": "X", "name": "allreduce", "cat": "collective", "pid": 2, "tid": 9, "ts": 7, "dur": 3},
        {"ph": "X", "name": "mm2", "cat": "tensorflow", "pid": 2, "tid": 10, "ts": 7, "dur": 3},
    ]
    path = tmp_path / "neuron-profile.json"
    path.write_text("[" + ",\n".join(json.dumps(e) for e in events) + ",\n")
    [trace] = load_chrome(path)
    assert [(t.name, t.kind, t.core) for t in trace.tracks] == [
        ("Process 1 / NC0 tensor", "tensor", 0), ("Process 1 / DMA read queue 3", "dma_read", 0),
        ("Process 2 / Thread 9", "collective", 1), ("Process 2 / Thread 10", "other", 1),
    ]
    assert trace.layer_names == ("l0", "", "collective", "tensorflow")
    assert trace.events["flops"].tolist() == [8.0, 0.0, 0.0, 0.0] and trace.events["bytes"].tolist()[1] == 64.0
    assert trace.events["start_ns"].tolist() == [0.0, 500.0, 2000.0, 2000.0]


def test_foreign_events_added_to_our_file_become_one_more_trace(traces, saved, tmp_path):
    doc = json.loads(saved.read_bytes())
    doc["traceEvents"] += [
        {"ph": "M", "name": "process_name", "pid": 900, "args": {"name": "host"}},
        {"ph": "X", "name": "step", "cat": "python", "pid": 900, "tid": 1, "ts": 10.0, "dur": 4.0},
        {"ph": "C", "name": "rss", "pid": 901, "ts": 12.0, "args": {"rss": 5}},
    ]
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(doc))
    *ours, extra = load_chrome(path)
    assert_same_runs(traces, ours)
    assert [t.name for t in extra.tracks] == ["host / Thread 1"] and extra.n_events == 1
    assert extra.events["dur_ns"].tolist() == [4000.0] and list(extra.counters) == ["rss"]
    assert extra.counters["rss"].t_ns.tolist() == [2000.0]  # shifted to the earliest timestamp, 10 us


def _gzip_bomb(path):
    path.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * 200_000 + b"]}"))


X = b'[{"ph": "X", "name": "a", "pid": 1, "tid": 1, '  # the start of a complete event
BAD = {
    "missing": (None, "no such file"),
    "empty": (b"", "empty"),
    "blank": (b"  \n ", "empty"),
    "truncated": (b'{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur"', "not valid JSON"),
    "random": (random.Random(7).randbytes(4096), "not valid JSON"),
    "not_a_trace": (b'{"foo": 1}', "without 'traceEvents'"),
    "numbers": (b"[1, 2, 3]", "event 0 is a number, not an object"),
    "scalar": (b'"trace"', "not a Chrome trace"),
    "events_not_list": (b'{"traceEvents": {"ph": "X"}}', "'traceEvents' is not a list"),
    "ts_string": (X + b'"ts": "12", "dur": 1}]', "'ts' should be a number but is a string"),
    "ts_missing": (X + b'"dur": 1}]', "'ts' should be a number but is missing"),
    "negative_dur": (X + b'"ts": 1, "dur": -5}]', "negative 'dur'"),
    "nan": (X + b'"ts": NaN, "dur": 1}]', "not valid JSON"),
    "infinite": (X + b'"ts": 1e999, "dur": 1}]', "Number out of range in event 0"),
    "bool_ts": (b'[{"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": true}]', "'ts' should be a number"),
    "pid_list": (b'[{"ph": "X", "name": "a", "pid": [1], "tid": 1, "ts": 1, "dur": 1}]', "'pid' should be"),
    "name_number": (b'[{"ph": "X", "name": 5, "pid": 1, "tid": 1, "ts": 1, "dur": 1}]', "'name' should be a string"),
    "ph_missing": (b'[{"name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]', "'ph' should be a string but is missing"),
    "counter_text": (b'[{"ph": "C", "name": "c", "pid": 1, "ts": 1, "args": {"c": "9"}}]', "should be a number"),
    "counter_mixed": (b'[{"ph": "C", "name": "c", "pid": 1, "ts": 1, "args": {"c": 1, "d": "x"}}]', "'d' should be"),
    "counter_nan": (b'[{"ph": "C", "name": "c", "pid": 1, "ts": 1, "args": {"d": 1e999}}]', "out of range in event 0"),
    "only_metadata": (b'[{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "p"}}]', "no trace events"),
    "deep": (b"[" * 100_000 + b"]" * 100_000, "not valid JSON|not a Chrome trace"),  # depends on the parser
    "bad_utf8": (b'[{"ph": "X", "name": "\xff\xfe", "pid": 1}]', "not valid JSON"),
    "gzip_truncated": (gzip.compress(b'{"traceEvents": []}' * 50)[:30], "gzip"),
    "gzip_garbage": (b"\x1f\x8b" + b"\x00" * 64, "gzip"),
    "gzip_bomb": (_gzip_bomb, "zip bomb"),
    "oversize": (b"[]" + b" " * 5000, "implausibly large"),
    "newer": (None, "newer neuronviz"),
    "malformed_own": (None, "neuronviz metadata is malformed"),
    "foreign_op": (None, "not in the op table"),
    "directory": (None, "not a regular file \\(a directory\\)"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_gives_a_one_line_error(case, tmp_path, monkeypatch, saved):
    content, message = BAD[case]
    path = tmp_path / "bad-trace.json"
    monkeypatch.setattr(chrome, "MAX_JSON_BYTES", 100_000)
    if case == "oversize":
        monkeypatch.setattr(chrome, "MAX_FILE_BYTES", 4096)
    if callable(content):
        content(path)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif case in ("newer", "malformed_own", "foreign_op"):
        doc = json.loads(saved.read_bytes())
        nv = doc["otherData"]["neuronviz"]
        if case == "newer":
            nv["version"] = "3.0"
        elif case == "malformed_own":
            nv["runs"][0]["tracks"][0] = "NC0 tensor"
        else:
            next(e for e in doc["traceEvents"] if e["ph"] == "X")["name"] = "no-such-op"
        path.write_text(json.dumps(doc))
    elif case == "directory":
        path = tmp_path
    with pytest.raises(TraceFileError, match=message) as info:
        load_chrome(path)
    text = str(info.value)
    assert "\n" not in text and "\r" not in text
    assert str(path) in text


def test_fuzzed_files_load_or_fail_cleanly(tmp_path):
    raw = bytearray(GOLDEN.read_bytes())
    rng = random.Random(20261123)
    outcomes = {"loaded": 0, "rejected": 0}
    for i in range(300):
        data = bytearray(raw)
        if i % 3 == 0:
            for _ in range(rng.randint(1, 6)):
                data[rng.randrange(len(data))] = rng.choice(b'{}[]",:0123456789-eE. tfnaxXBEC')
        elif i % 3 == 1:
            data = data[: rng.randrange(len(data))]
        else:
            a, b = rng.randrange(len(data)), rng.randrange(len(data))
            data[a], data[b] = data[b], data[a]
        if i % 10 == 0:
            data = bytearray(gzip.compress(bytes(data)))
        path = tmp_path / f"f{i}.json"
        path.write_bytes(bytes(data))
        try:
            loaded = load_chrome(path)
        except TraceFileError as exc:
            assert "\n" not in str(exc) and f"f{i}.json" in str(exc)
            outcomes["rejected"] += 1
        else:
            for tr in loaded:
                assert np.all(tr.events["dur_ns"] >= 0) and np.all(np.isfinite(tr.events["start_ns"]))
            outcomes["loaded"] += 1
    assert outcomes["rejected"] > 50 and outcomes["loaded"] > 10


def test_save_is_atomic_and_a_failed_save_keeps_the_previous_file(traces, tmp_path, monkeypatch):
    path = tmp_path / "a.json"
    path.write_bytes(b"previous content")
    save_chrome(path, traces[:1])
    assert len(load_chrome(path)) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]
    before = path.read_bytes()

    def broken(*_):
        yield b"{}"
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(chrome, "_serialised", broken)
    with pytest.raises(TraceFileError, match="No space left") as info:
        save_chrome(path, traces)
    assert "\n" not in str(info.value) and "a.json" in str(info.value)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_save_into_a_missing_folder_fails_cleanly(traces, tmp_path):
    with pytest.raises(TraceFileError, match="cannot write"):
        save_chrome(tmp_path / "no" / "such" / "dir.json", traces[:1])


def test_our_own_json_without_the_metadata_the_metrics_need_is_refused(saved, tmp_path):
    doc = json.loads(saved.read_text(encoding="utf-8"))
    doc["otherData"]["neuronviz"]["runs"][0]["meta"] = {}
    path = tmp_path / "emptymeta.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(TraceFileError, match="emptymeta.json: run metadata 'mode' is missing"):
        load_chrome(path)


def test_a_gzip_bomb_is_refused_at_a_ratio_before_its_text_is_held(traces, tmp_path, monkeypatch):
    monkeypatch.setattr(chrome, "MIN_RATIO_CHECK_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.json.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as g:
        g.write(b"[" + b" " * (64 << 20) + b"]")
    with pytest.raises(TraceFileError, match="decompresses to more than 100 times the bytes read"):
        load_chrome(bomb)
    ordinary = tmp_path / "ordinary.json.gz"  # a real trace compresses far less
    save_chrome(ordinary, traces)
    assert [t.n_events for t in load_chrome(ordinary)] == [t.n_events for t in traces]


# streaming: the event array is decoded a piece at a time -------------------------------------


def _tricky_events(n):
    """Events whose text holds what a piece boundary looks like (``}, {``) inside strings and nested
    objects, with begin/end pairs, flows and counters spread over the whole array."""
    out = []
    for i in range(n):
        out += [
            {"ph": "X", "name": "a}, {b", "pid": 1, "tid": 1, "ts": 4 * i, "dur": 1,
             "args": {"layer": '}, {"ph": "X"}', "flops": i}},
            {"ph": "X", "name": "n\"},{\"", "pid": 1, "tid": 2, "ts": 4 * i + 1, "dur": 2,
             "args": {"nested": [{"a": 1}, {"b": [{}, {}]}], "bytes": 2 * i}},
            {"ph": "B", "name": "outer", "pid": 2, "tid": 1, "ts": 4 * i},
            {"ph": "E", "pid": 2, "tid": 1, "ts": 4 * i + 3, "args": {"flops": 5}},
            {"ph": "s", "id": i, "pid": 1, "tid": 1, "ts": 4 * i},
            {"ph": "C", "name": "mem", "pid": 1, "ts": 4 * i + 2, "args": {"used": i, "free": -i}},
        ]
    return out


def _same_trace(a, b):
    assert a.tracks == b.tracks and a.op_names == b.op_names and a.layer_names == b.layer_names
    assert dict(a.meta) == dict(b.meta)
    assert all(np.array_equal(a.events[k], b.events[k]) for k in a.events)
    assert list(a.counters) == list(b.counters)
    assert all(np.array_equal(a.counters[k].value, b.counters[k].value) for k in a.counters)


@pytest.mark.parametrize("indent", [None, 1])
@pytest.mark.parametrize("piece", [1, 200, 5000])
def test_pieces_split_only_between_events(piece, indent, tmp_path, monkeypatch):
    doc = {"traceEvents": _tricky_events(60), "otherData": {"host": "x"}, "traceName": "after the array"}
    path = tmp_path / "tricky.json"
    path.write_text(json.dumps(doc, indent=indent))
    monkeypatch.setattr(chrome, "CHUNK_BYTES", 1 << 30)
    [whole] = load_chrome(path)
    monkeypatch.setattr(chrome, "CHUNK_BYTES", piece)
    [pieced] = load_chrome(path)
    _same_trace(whole, pieced)
    assert set(pieced.op_names) == {"a}, {b", 'n"},{"', "outer"} and '}, {"ph": "X"}' in pieced.layer_names
    # each flow starts and never arrives: read, bound, and no arrow
    assert pieced.n_events == 3 * 60 and pieced.meta["skipped_events"] == 0
    assert pieced.meta["flows"]["from"] == [] and pieced.meta["unbound_flow_points"] == 0
    assert pieced.events["flops"].sum() == sum(range(60)) + 5 * 60
    assert pieced.events["bytes"].sum() == 2 * sum(range(60))
    assert pieced.counters["mem.free"].value.tolist() == [-float(i) for i in range(60)]


def test_a_bare_array_cut_off_loads_in_pieces(tmp_path, monkeypatch):
    events = _tricky_events(30)
    path = tmp_path / "cut.json"
    path.write_text("[" + ",\n".join(json.dumps(e) for e in events) + ",\n")
    monkeypatch.setattr(chrome, "CHUNK_BYTES", 300)
    [trace] = load_chrome(path)
    assert trace.n_events == 90 and trace.counters["mem.used"].value.tolist() == [float(i) for i in range(30)]


def test_an_error_in_a_later_piece_names_the_event_and_the_byte(tmp_path, monkeypatch):
    monkeypatch.setattr(chrome, "CHUNK_BYTES", 256)
    events = [{"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(400)]
    events[250]["ts"] = "late"
    path = tmp_path / "late.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with pytest.raises(TraceFileError, match="event 250: 'ts' should be a number but is a string"):
        load_chrome(path)
    events[250]["ts"] = 250
    text = json.dumps({"traceEvents": events})
    at = text.index('"ts": 300')
    path.write_text(text[:at] + "@" + text[at + 1:])
    with pytest.raises(TraceFileError, match=rf"not valid JSON \(JSON is malformed: .* \(byte {at:,}\)\)"):
        load_chrome(path)
    path.write_text(text.replace('"ph": "X"', '"ph": "Q"', 1).replace('"ts": 380', '"ts": 1e999'))
    with pytest.raises(TraceFileError, match="Number out of range in event 380"):
        load_chrome(path)


def test_our_export_with_its_tables_after_the_events_loads_in_pieces(traces, saved, tmp_path, monkeypatch):
    doc = json.loads(saved.read_bytes())
    path = tmp_path / "tables-last.json"
    path.write_text(json.dumps({"traceEvents": doc["traceEvents"], "otherData": doc["otherData"]}))
    monkeypatch.setattr(chrome, "CHUNK_BYTES", 4096)
    assert_same_runs(traces, load_chrome(path))


def test_progress_follows_the_pieces_and_its_exception_stops_the_load(tmp_path, monkeypatch):
    monkeypatch.setattr(chrome, "CHUNK_BYTES", 1000)
    text = json.dumps({"traceEvents": _tricky_events(40)})
    plain, packed = tmp_path / "p.json", tmp_path / "p.json.gz"
    plain.write_text(text)
    packed.write_bytes(gzip.compress(text.encode()))
    for path in (plain, packed):
        shares = []
        load_chrome(path, shares.append)
        assert len(shares) > 5 and shares == sorted(shares) and shares[-1] == 1.0
        if path is plain:  # where each piece ends in the file (a gzip file: the compressed bytes read)
            assert 0.02 < shares[0] < 0.2 and len(set(shares)) == len(shares)

    class Stop(Exception):
        pass

    def stop(share):
        raise Stop

    with pytest.raises(Stop):  # not a TraceFileError: the caller's own exception, at the first piece
        load_chrome(plain, stop)


# ----------------------------------------------------------------------------------------------
# slices as Perfetto lays them out: depths, async tracks, flows, order


def _load_events(tmp_path, events, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    [trace] = load_chrome(path)
    return trace


def _rows(trace):
    """Each track's name and its events' (name, start us) in time order."""
    ev = trace.events
    return {t.name: [(trace.op_names[o], s / 1e3) for o, s in zip(ev["op"][ev["track"] == i].tolist(),
                                                                    ev["start_ns"][ev["track"] == i].tolist(),
                                                                    strict=True)]
            for i, t in enumerate(trace.tracks)}


def test_nested_slices_get_their_depth_and_siblings_share_a_row(tmp_path):
    x = {"ph": "X", "pid": 1, "tid": 1}
    trace = _load_events(tmp_path, [
        {**x, "name": "step", "ts": 0, "dur": 100},
        {**x, "name": "outer", "ts": 0, "dur": 50},  # same start as step, shorter: inside it
        {**x, "name": "inner", "ts": 10, "dur": 10},
        {**x, "name": "leaf", "ts": 10, "dur": 10},  # same start and length: the later one inside
        {**x, "name": "mark", "ph": "i", "ts": 20},  # an instant where inner ends: beside it, not in it
        {**x, "name": "second", "ts": 50, "dur": 50},  # starts where outer ends: its sibling
        {"ph": "B", "name": "b", "pid": 1, "tid": 1, "ts": 60}, {"ph": "E", "pid": 1, "tid": 1, "ts": 70},
    ])
    assert _rows(trace) == {
        "Process 1 / Thread 1": [("step", 0.0)],
        "Process 1 / Thread 1 ·1": [("outer", 0.0), ("second", 50.0)],
        "Process 1 / Thread 1 ·2": [("inner", 10.0), ("mark", 20.0), ("b", 60.0)],
        "Process 1 / Thread 1 ·3": [("leaf", 10.0)],
    }
    assert trace.meta["track_depth"] == [0, 1, 2, 3]


def test_slices_that_overlap_without_nesting_are_packed_without_overlap(tmp_path):
    x = {"ph": "X", "pid": 1, "tid": 1}
    trace = _load_events(tmp_path, [{**x, "name": "a", "ts": 0, "dur": 10}, {**x, "name": "b", "ts": 5, "dur": 10},
                                    {**x, "name": "c", "ts": 12, "dur": 10}])
    assert _rows(trace) == {"Process 1 / Thread 1": [("a", 0.0), ("c", 12.0)],
                            "Process 1 / Thread 1 ·1": [("b", 5.0)]}


def test_async_slices_get_a_track_per_process_and_name_before_its_threads(tmp_path):
    a = {"pid": 1, "tid": 7, "cat": "net"}
    trace = _load_events(tmp_path, [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "browser"}},
        {"ph": "X", "name": "work", "pid": 1, "tid": 7, "ts": 0, "dur": 100},
        {**a, "ph": "b", "name": "request", "id": 1, "ts": 10},
        {**a, "ph": "b", "name": "request", "id": 2, "ts": 20},  # overlaps id 1: a lane below it
        {**a, "ph": "b", "name": "request", "id": 1, "ts": 15},  # nested in id 1's first
        {**a, "ph": "e", "name": "request", "id": 1, "ts": 18},
        {**a, "ph": "e", "name": "request", "id": 1, "ts": 40},
        {**a, "ph": "e", "name": "request", "id": 2, "ts": 50, "args": {"bytes": 64}},
        {**a, "ph": "n", "name": "request", "id": 3, "ts": 60},
        {**a, "ph": "b", "name": "load", "id2": {"local": "0x1"}, "ts": 5},
        {**a, "ph": "e", "name": "load", "id2": {"local": "0x1"}, "ts": 9},
        {**a, "ph": "e", "name": "load", "id2": {"local": "0x2"}, "ts": 9},  # ends nothing
        {**a, "ph": "b", "name": "upload", "id2": {"global": 9}, "ts": 70},  # never ends: at the trace's end
        {**a, "ph": "b", "name": "request", "ts": 5},  # no id: skipped, as Perfetto does
        {"ph": "X", "name": "tail", "pid": 1, "tid": 7, "ts": 120, "dur": 5},
    ])
    rows = _rows(trace)
    assert list(rows) == ["browser / request", "browser / request ·1", "browser / load", "browser / upload",
                          "browser / Thread 7"]
    assert rows["browser / request"] == [("request", 10.0), ("request", 60.0)]
    assert rows["browser / request ·1"] == [("request", 15.0), ("request", 20.0)]
    ev = trace.events
    durations = dict(zip(zip(ev["track"].tolist(), ev["start_ns"].tolist(), strict=True), ev["dur_ns"].tolist(),
                         strict=True))
    assert durations[(0, 10_000.0)] == 30_000.0 and durations[(1, 15_000.0)] == 3_000.0
    assert durations[(1, 20_000.0)] == 30_000.0 and durations[(0, 60_000.0)] == 0.0
    assert durations[(3, 70_000.0)] == 55_000.0  # to the trace's last timestamp
    assert ev["bytes"][(ev["track"] == 1) & (ev["start_ns"] == 20_000.0)].tolist() == [64.0]
    m = trace.meta
    assert (m["unclosed_slices"], m["unmatched_end_events"], m["skipped_events"]) == (1, 1, 1)


def test_flows_bind_to_the_slices_perfetto_binds_them_to(tmp_path):
    x = {"ph": "X", "pid": 1}
    trace = _load_events(tmp_path, [
        {**x, "tid": 1, "name": "launch", "ts": 0, "dur": 10},
        {**x, "tid": 1, "name": "inner", "ts": 2, "dur": 4},
        {**x, "tid": 2, "name": "kernel", "ts": 20, "dur": 10},
        {**x, "tid": 2, "name": "later", "ts": 40, "dur": 10},
        {**x, "tid": 3, "name": "sink", "ts": 60, "dur": 5, "bind_id": "0xa", "flow_in": True},
        {**x, "tid": 3, "name": "hop", "ts": 45, "dur": 5, "bind_id": "0xa", "flow_in": True, "flow_out": True},
        {**x, "tid": 3, "name": "source", "ts": 30, "dur": 5, "bind_id": "0xa", "flow_out": True},
        # the first version: s in the deepest open slice, f ("bp": "e") in the one holding it
        {"ph": "s", "id": 1, "cat": "c", "name": "go", "pid": 1, "tid": 1, "ts": 3},
        {"ph": "f", "id": 1, "cat": "c", "name": "go", "pid": 1, "tid": 2, "ts": 25, "bp": "e"},
        # an f without "bp": "e" enters the next slice to begin on its thread
        {"ph": "s", "id": 2, "cat": "c", "name": "next", "pid": 1, "tid": 1, "ts": 8},
        {"ph": "t", "id": 2, "cat": "c", "name": "next", "pid": 1, "tid": 2, "ts": 22},
        {"ph": "f", "id": 2, "cat": "c", "name": "next", "pid": 1, "tid": 2, "ts": 31},
        {"ph": "s", "id": 3, "cat": "c", "name": "lost", "pid": 1, "tid": 9, "ts": 3},  # no slice there
        {"ph": "f", "id": 3, "cat": "c", "name": "lost", "pid": 1, "tid": 2, "ts": 25, "bp": "e"},
        {"ph": "s", "id": [1], "pid": 1, "tid": 1, "ts": 3},  # an id of no use: skipped
    ])
    flows, ev = trace.meta["flows"], trace.events

    def name(e):
        return trace.op_names[ev["op"][e]]

    arrows = [(name(a), name(b), flows["names"][n]) for a, b, n in zip(flows["from"], flows["to"], flows["name"],
                                                                     strict=True)]
    assert sorted(arrows) == sorted([("source", "hop", "flow"), ("hop", "sink", "flow"), ("inner", "kernel", "go"),
                                     ("launch", "kernel", "next"), ("kernel", "later", "next")])
    assert trace.meta["unbound_flow_points"] == 1 and trace.meta["skipped_events"] == 1


def _arrows(trace) -> list[tuple]:
    """Each flow arrow as the slices it joins (name, start us) and its name."""
    flows, ev = trace.meta["flows"], trace.events

    def at(e):
        return trace.op_names[ev["op"][e]], ev["start_ns"][e] / 1e3

    return sorted((at(a), at(b), flows["names"][k]) for a, b, k in zip(flows["from"], flows["to"], flows["name"],
                                                                        strict=True))


def test_flows_are_written_as_flow_events_any_reader_binds_to_the_same_slices(tmp_path):
    x = {"ph": "X", "pid": 1}
    trace = _load_events(tmp_path, [
        {**x, "tid": 1, "name": "launch", "ts": 0, "dur": 10}, {**x, "tid": 1, "name": "inner", "ts": 2, "dur": 4},
        {**x, "tid": 2, "name": "kernel", "ts": 20, "dur": 10}, {**x, "tid": 2, "name": "later", "ts": 40, "dur": 10},
        {**x, "tid": 3, "name": "early", "ts": 1, "dur": 30},
        {"ph": "s", "id": 1, "cat": "c", "name": "go", "pid": 1, "tid": 1, "ts": 3},
        {"ph": "f", "id": 1, "cat": "c", "name": "go", "pid": 1, "tid": 2, "ts": 25, "bp": "e"},
        {"ph": "s", "id": 2, "cat": "c", "name": "next", "pid": 1, "tid": 1, "ts": 8},
        {"ph": "t", "id": 2, "cat": "c", "name": "next", "pid": 1, "tid": 2, "ts": 22},
        {"ph": "f", "id": 2, "cat": "c", "name": "next", "pid": 1, "tid": 2, "ts": 45, "bp": "e"},
        # into a slice that began before the one it leaves, which it still holds
        {"ph": "s", "id": 3, "cat": "c", "name": "back", "pid": 1, "tid": 2, "ts": 21},
        {"ph": "f", "id": 3, "cat": "c", "name": "back", "pid": 1, "tid": 3, "ts": 22, "bp": "e"},
    ])
    arrows = _arrows(trace)
    assert [(a[0], b[0], n) for a, b, n in arrows] == [("inner", "kernel", "go"), ("kernel", "early", "back"),
                                                       ("kernel", "later", "next"), ("launch", "kernel", "next")]
    path = tmp_path / "again.json"
    save_chrome(path, [trace])
    doc = json.loads(path.read_text())
    assert _arrows(load_chrome(path)[0]) == arrows  # our own file: the run as it was
    assert sum(e["ph"] == "s" for e in doc["traceEvents"]) == sum(e["ph"] == "f" for e in doc["traceEvents"]) == 4
    del doc["otherData"]  # read as another tool's file, by its events alone
    path.write_text(json.dumps(doc))
    assert _arrows(load_chrome(path)[0]) == arrows


def test_a_pftraces_flows_are_written_to_chrome_json(tmp_path):
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    from sim.io.perfetto import load_pftrace

    b = TraceProtoBuilder()
    for ts, kind, track, name, flows, ends in ((0, 1, 1, "send", [7], []), (10, 2, 1, "", [], []),
                                               (5, 3, 2, "receive", [], [7])):
        p = b.add_packet()
        p.timestamp, p.track_event.type, p.track_event.track_uuid = ts, kind, track
        if name:
            p.track_event.name = name
        p.track_event.flow_ids.extend(flows)
        p.track_event.terminating_flow_ids.extend(ends)
    (tmp_path / "f.pftrace").write_bytes(b.serialize())
    (trace,) = load_pftrace(tmp_path / "f.pftrace")
    save_chrome(tmp_path / "f.json", [trace])
    doc = json.loads((tmp_path / "f.json").read_text())
    del doc["otherData"]
    (tmp_path / "f.json").write_text(json.dumps(doc))
    assert _arrows(load_chrome(tmp_path / "f.json")[0]) == [(("send", 0.0), ("receive", 0.005), "flow")]


def test_processes_and_threads_follow_their_sort_index_then_first_appearance(tmp_path):
    x = {"ph": "X", "ts": 0, "dur": 1, "name": "e"}
    trace = _load_events(tmp_path, [
        {**x, "pid": 1, "tid": 1}, {**x, "pid": 1, "tid": 2}, {**x, "pid": 1, "tid": 3}, {**x, "pid": 2, "tid": 1},
        {"ph": "M", "name": "process_sort_index", "pid": 1, "args": {"sort_index": 5}},
        {"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": 3, "args": {"sort_index": -1}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 3, "args": {"name": "main"}},
        {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "gpu"}},
    ])
    assert [t.name for t in trace.tracks] == ["gpu / Thread 1", "Process 1 / main", "Process 1 / Thread 1",
                                              "Process 1 / Thread 2"]
    assert [t.core for t in trace.tracks] == [0, 1, 1, 1]


def test_a_deep_chain_of_nested_slices_loads_with_its_depth_rows_capped(tmp_path):
    """A chain of slices each inside the one before: every depth past the cap shares the last row."""
    n = 200_000
    path = tmp_path / "deep.json"
    path.write_text('{"traceEvents":[' + ",".join(
        f'{{"ph":"X","name":"f{i % 7}","pid":1,"tid":1,"ts":{i},"dur":{2 * n - 2 * i}}}' for i in range(n)) + "]}")
    [trace] = load_chrome(path)
    cap = chrome.MAX_DEPTH_ROWS
    assert len(trace.tracks) == cap and trace.meta["depth_rows"] == cap
    assert trace.meta["slices_beyond_depth"] == n - cap
    assert np.bincount(trace.events["track"]).tolist() == [1] * (cap - 1) + [n - cap + 1]


def test_depth_rows_are_fewer_when_every_thread_would_not_fit(tmp_path, monkeypatch):
    monkeypatch.setattr(chrome, "MAX_TRACKS", 10)
    events = [{"ph": "X", "name": "e", "pid": 1, "tid": t, "ts": d, "dur": 10 - 2 * d} for t in range(3)
              for d in range(5)]
    trace = _load_events(tmp_path, events)
    assert len(trace.tracks) == 9 and trace.meta["depth_rows"] == 3
    assert trace.meta["slices_beyond_depth"] == 3 * 2


def _overlapping(trace):
    """``trace``'s run with hand-made events on its first DMA queue: ``load`` [0, 100] us holds
    ``wait`` [10, 20]; two transfers [50, 150] and [60, 160] overlap it and each other without
    nesting; ``store`` [120, 130] starts after ``load`` ends, inside them; and one event on
    another track, in no layer."""
    from sim.trace import Trace

    q = next(i for i, t in enumerate(trace.tracks) if t.kind == "dma_read")
    other = next(i for i, t in enumerate(trace.tracks) if t.kind == "tensor")
    ops = [0, 1, 2, 3]
    rows = [(q, 0, 0, 100), (q, 1, 10, 10), (q, 2, 50, 100), (q, 2, 60, 100), (q, 3, 120, 10), (other, 0, 5, 5)]
    track, op, start_us, dur_us = (np.array(c) for c in zip(*rows, strict=True))
    layer = trace.op_layer[np.array(ops)][op].astype(np.int32)
    layer[-1] = -1
    events = {"track": track.astype(np.int16), "start_ns": start_us * 1e3 + 0.25, "dur_ns": dur_us * 1e3,
              "op": op.astype(np.int32), "layer": layer, "flops": np.arange(6.0), "bytes": np.arange(6.0) * 64}
    return Trace(meta=trace.meta, tracks=trace.tracks, events=events, op_names=trace.op_names,
                 op_layer=trace.op_layer, layer_names=trace.layer_names, layer_kinds=trace.layer_kinds,
                 layer_start_ns=trace.layer_start_ns, layer_end_ns=trace.layer_end_ns, counters=trace.counters)


def test_events_overlapping_on_a_track_are_written_as_async_slices_and_read_back_on_it(traces, tmp_path):
    trace = _overlapping(traces[1])
    assert chrome.crossing_events(trace).tolist() == [False, False, True, True, False, False]
    path = tmp_path / "overlap.json"
    save_chrome(path, [trace])
    doc = json.loads(path.read_text())
    slices = [e for e in doc["traceEvents"] if e["ph"] in "Xbe"]
    assert [e["ph"] for e in slices] == ["X", "X", "b", "b", "X", "X", "e", "e"]
    b, e = [s for s in slices if s["ph"] == "b"], [s for s in slices if s["ph"] == "e"]
    assert [s["ts"] for s in b] == [50.0, 60.0] and [s["ts"] for s in e] == [150.0, 160.0]  # whole ns
    assert len({s["id"] for s in b}) == 2 and [s["id"] for s in b] == [s["id"] for s in e]
    name = trace.op_names[2]
    assert {(s["name"], s["cat"]) for s in b + e} == {(name, "dma_read")}
    assert b[0]["args"] == {"layer": trace.layer_names[trace.op_layer[2]], "flops": 2.0, "bytes": 128.0, "op": 2,
                            "layer_index": int(trace.op_layer[2])}  # indexed: an event in no layer
    assert_same_runs([trace], load_chrome(path))  # our own file: each back on its track, in its place

    del doc["otherData"]  # as another tool reads it: the async slices stacked on a track of their name
    path.write_text(json.dumps(doc))
    rows = {k: [(n, round(t, 6)) for n, t in v] for k, v in _rows(load_chrome(path)[0]).items()}  # from the first
    queue = f"{doc['traceEvents'][0]['args']['name']} / {trace.tracks[trace.events['track'][0]].name}"
    process = queue.split(" / ")[0]
    assert rows[f"{process} / {name}"] == [(name, 50.0)] and rows[f"{process} / {name} ·1"] == [(name, 60.0)]
    assert rows[queue] == [(trace.op_names[0], 0.0), (trace.op_names[3], 120.0)]
    assert rows[f"{queue} ·1"] == [(trace.op_names[1], 10.0)]


def _perfetto_ns(us: np.ndarray) -> np.ndarray:
    """Nanoseconds as Perfetto's JSON reader makes them of a ``ts`` or ``dur`` in microseconds:
    ``std::llround(value * 1000.0)`` (json_trace_tokenizer.cc), half away from zero."""
    x = np.asarray(us, np.float64) * 1000.0
    whole = np.floor(x)
    return np.where(x - whole >= 0.5, whole + 1, whole)


def _slices_as_read(doc: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each X event's and each b/e pair's thread, start and end as Perfetto reads them, in ns."""
    events = doc["traceEvents"]
    xs = [e for e in events if e["ph"] == "X"]
    ends = {e["id"]: e["ts"] for e in events if e["ph"] == "e"}
    bs = [e for e in events if e["ph"] == "b"]
    start = _perfetto_ns([e["ts"] for e in xs] + [e["ts"] for e in bs])
    end = np.concatenate([start[:len(xs)] + _perfetto_ns([e["dur"] for e in xs]),
                          _perfetto_ns([ends[e["id"]] for e in bs])])
    return np.array([e["tid"] for e in xs + bs]), start, end


def test_a_reader_rounding_ts_and_dur_apart_finds_the_times_nesting_was_decided_on(traces):
    """Nesting is decided on whole nanoseconds (the end rounded, not the start plus a rounded
    duration); ``ts`` and ``dur`` are written of the same whole nanoseconds, so that Perfetto,
    rounding each to ns, finds those times. Of a full-precision ``ts`` and ``dur`` it would find
    a quarter of these events ending 1 ns off, some inside the next one."""
    for trace in traces:
        doc = export_chrome([trace])
        start, end = chrome.whole_ns(trace)
        _, read_start, read_end = _slices_as_read(doc)
        assert len(read_start) == trace.n_events  # none crossing: in the order of the events
        assert read_start.tolist() == start.tolist() and read_end.tolist() == end.tolist()


def test_events_touching_at_a_half_nanosecond_are_written_touching(traces):
    """[10.6, 21.2] and [21.2, 26.2] ns: the first ends at 21 ns, where the second starts (its
    10.6 ns duration alone would round to 11, ending it at 22 ns, inside the second)."""
    from sim.trace import Trace

    t = traces[1]
    events = {"track": np.zeros(2, np.int16), "start_ns": np.array([10.6, 21.2]), "dur_ns": np.array([10.6, 5.0]),
              "op": np.zeros(2, np.int32), "layer": np.zeros(2, np.int32), "flops": np.zeros(2), "bytes": np.zeros(2)}
    trace = Trace(meta=t.meta, tracks=t.tracks, events=events, op_names=t.op_names, op_layer=t.op_layer,
                  layer_names=t.layer_names, layer_kinds=t.layer_kinds, layer_start_ns=t.layer_start_ns,
                  layer_end_ns=t.layer_end_ns)
    xs = [e for e in export_chrome([trace])["traceEvents"] if e["ph"] == "X"]
    assert [(e["ts"], e["dur"]) for e in xs] == [(0.011, 0.010), (0.021, 0.005)]
    assert (_perfetto_ns(xs[0]["ts"]) + _perfetto_ns(xs[0]["dur"])) == _perfetto_ns(xs[1]["ts"]) == 21


def test_events_overlapping_by_float_rounding_stay_complete_events(traces):
    """A simulation's events end where the next begins to within float rounding: no overlap."""
    for trace in traces:
        ev = trace.events
        end = ev["start_ns"] + ev["dur_ns"]
        o = np.lexsort((ev["start_ns"], ev["track"]))
        same = ev["track"][o][1:] == ev["track"][o][:-1]
        assert np.any(same & (ev["start_ns"][o][1:] < end[o][:-1]))  # touching, a few 1e-9 ns apart
        assert not chrome.crossing_events(trace).any()


def test_slices_are_stacked_by_group_start_and_length_then_as_given():
    """:func:`sim.io.slices.stack_order`'s stable sorts against a lexsort of its four keys, with
    slices starting together (the shorter of them given first) and groups too wide for 16 bits."""
    from sim.io.slices import stack_order

    rng = np.random.default_rng(45)
    for trial in range(1000):
        n = int(rng.integers(0, 40))
        group = rng.integers(0, 3, n) * (1 if trial % 2 else 1 << 20)
        start = rng.integers(0, 10, n).astype(float)
        end = start + rng.integers(0, 5, n)
        expected = np.lexsort((np.arange(n), start - end, start, group))
        assert stack_order(group, start, end).tolist() == expected.tolist(), (group, start, end)


@pytest.mark.parametrize("stepped", [64, 3])
def test_the_slices_a_stack_cannot_hold_are_found_without_walking_every_track(monkeypatch, stepped):
    """:func:`sim.io.slices.crossing` against a walk of each group's stack, on random slices:
    nested ones, overlapping ones, zero-length ones, equal ones; with clusters walked side by side
    and (``stepped`` 3) most of them too long for it, checked for nesting and walked alone."""
    from sim.io import slices
    from sim.io.slices import _crossing_walk, crossing, stack_order

    monkeypatch.setattr(slices, "STEPPED", stepped)
    rng = np.random.default_rng(46)
    found = 0
    for trial in range(2000):
        n = int(rng.integers(1, 30))
        group = rng.integers(0, 3, n)
        start = rng.integers(0, 20, n).astype(float)
        end = start + rng.integers(0, 8 if trial % 2 else 20, n)
        order = stack_order(group, start, end)
        walked = np.zeros(n, bool)
        for g in np.unique(group):
            mine = order[group[order] == g]
            walked[mine] = _crossing_walk(start[mine], end[mine])
        assert crossing(group, start, end).tolist() == walked.tolist(), (group, start, end)
        found += int(walked.any())
    assert 200 < found < 1800  # both kinds of group were drawn


@pytest.mark.parametrize("stepped", [64, 3])
def test_overlapping_slices_are_packed_in_the_lowest_free_lane(monkeypatch, stepped):
    """Lanes of slices overlapping without nesting, by clusters side by side or (``stepped`` 3)
    most of them alone, against a loop over each group's slices; and :func:`stack_depths`, which
    packs the groups its stack cannot lay out, never puts two overlapping slices on one row."""
    from sim.io import slices
    from sim.io.slices import _lanes, _pack, stack_depths, stack_order

    monkeypatch.setattr(slices, "STEPPED", stepped)
    rng = np.random.default_rng(47)
    for trial in range(1000):
        n = int(rng.integers(1, 40))
        group = rng.integers(0, 3, n)
        start = rng.integers(0, 30, n).astype(float)
        end = start + rng.integers(0, 6 if trial % 2 else 20, n)
        o = stack_order(group, start, end)
        g, s, e = group[o], start[o], end[o]
        looped = np.concatenate([_pack(s[g == k], e[g == k]) for k in np.unique(g)])
        assert _lanes(g, s, e).tolist() == looped.tolist(), (g, s, e)
        depth = stack_depths(group, start, end)
        row = np.lexsort((start, depth, group))
        same = (group[row][1:] == group[row][:-1]) & (depth[row][1:] == depth[row][:-1])
        assert not np.any(same & (start[row][1:] < end[row][:-1])), (group, start, end)


def test_no_flow_event_is_written_for_an_arrow_to_an_async_slice(traces):
    """A flow event binds to a slice of its thread; an async slice is on a track of its own."""
    from sim.trace import Trace

    t = _overlapping(traces[1])
    flows = {"from": [0, 0], "to": [4, 2], "names": ["x"], "name": [0, 0]}  # to store, then to a crossing transfer
    t = Trace(meta={**t.meta, "flows": flows}, tracks=t.tracks, events=t.events, op_names=t.op_names,
              op_layer=t.op_layer, layer_names=t.layer_names, layer_kinds=t.layer_kinds,
              layer_start_ns=t.layer_start_ns, layer_end_ns=t.layer_end_ns, counters=t.counters)
    events = export_chrome([t])["traceEvents"]
    assert [(e["ph"], e["ts"]) for e in events if e["ph"] in "sf"] == [("s", 0.0), ("f", 120.0)]

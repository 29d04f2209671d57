"""Neuron Explorer device profiles (directories of Parquet tables, schema 7.x) open as runs on the
tracks a simulation has; bad ones get one line."""

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

from sim.catalogue import CATALOGUE, explorer_summary, measure
from sim.errors import TraceFileError
from sim.io import explorer, load_file, save_file
from sim.run import RunConfig, simulate
from tests.profiles import METADATA, SCHEMA, TABLES, instruction, small_profile, write

T0 = METADATA["first_hw_timestamp"]


def _events(trace, track_name: str) -> list[tuple]:
    """``(op, layer, start_ns, dur_ns, flops, bytes)`` of the events on the track named so."""
    (track,) = [i for i, t in enumerate(trace.tracks) if t.name == track_name]
    ev = trace.events
    sel = np.flatnonzero(ev["track"] == track)
    return [(trace.op_names[ev["op"][i]], trace.layer_names[ev["layer"][i]] if ev["layer"][i] >= 0 else None,
             ev["start_ns"][i], ev["dur_ns"][i], ev["flops"][i], ev["bytes"][i]) for i in sel]


@pytest.fixture
def profile(tmp_path):
    return small_profile(tmp_path / "mlp@latest")


def test_the_schema_file_is_the_reference_pages(profile):
    assert SCHEMA["profile_schema_version"] == "7.4.0"
    assert [f[0] for f in TABLES["CcOp"]][:4] == ["start_ts", "end_ts", "duration_ns", "operation"]
    # every table of the reference page is written, each with every documented column
    assert {p.stem for p in profile.iterdir()} == set(TABLES)
    assert pq.read_schema(profile / "Instruction.parquet").names == [f[0] for f in TABLES["Instruction"]]


def test_each_table_lands_on_its_track_with_its_times_bytes_and_flops(profile):
    (trace,) = load_file(profile)
    kinds = {t.name: t.kind for t in trace.tracks}
    assert kinds == {"nrt": "other", "NC0 Tensor": "tensor", "NC0 Vector": "vector", "NC0 Scalar": "scalar",
                     "NC0 Sync": "other", "NC0 waits": "other", "NC0 DMA input": "dma_read",
                     "NC0 DMA output": "dma_write", "CC ops": "collective", "CC-core 1": "collective",
                     "Throttle": "other"}
    # times from the profile's first hardware timestamp, in ns; FLOPs BF16-equivalent; HBM bytes
    assert _events(trace, "NC0 Tensor") == [("MATMUL", "layer_1", 1000.0, 600.0, 2 * 128 * 128 * 512, 4096.0)]
    assert _events(trace, "NC0 DMA input") == [("qSyncIO0-Q0-E0", None, 500.0, 400.0, 0.0, 65536.0)]
    assert _events(trace, "NC0 DMA output") == [("qSyncIO1-Q1-E0", None, 2500.0, 200.0, 0.0, 32768.0)]
    assert _events(trace, "CC ops") == [("AllGather", None, 3000.0, 500.0, 0.0, 4096.0)]
    assert _events(trace, "CC-core 1") == [("DMA_ADVANCE", None, 3000.0, 200.0, 0.0, 0.0)]
    assert _events(trace, "nrt") == [("nc_exec_running", None, 0.0, 3500.0, 0.0, 0.0)]
    assert _events(trace, "Throttle") == [("activity_0 throttle to 3/4", None, 1000.0, 400.0, 0.0, 0.0)]
    # a semaphore wait before the Vector op could start, a DMA wait after the Sync op that triggered it
    assert _events(trace, "NC0 waits") == [("semaphore wait", "layer_1", 1600.0, 100.0, 0.0, 0.0),
                                           ("DMA wait", None, 2050.0, 30.0, 0.0, 0.0)]
    assert trace.layer_names == ("layer_1", "layer_2")
    assert list(trace.layer_start_ns) == [1000.0, 2100.0] and list(trace.layer_end_ns) == [1900.0, 2400.0]
    # SBUF and PSUM fill as bytes of a trn1 core's (24 MiB, 2 MiB); HBM throughput in bytes/s
    sbuf = trace.counters["sbuf_bytes"]
    assert list(sbuf.t_ns) == [0.0, 1500.0, 3000.0]
    assert list(sbuf.value) == pytest.approx([0.1 * 24 * 2**20, 0.5 * 24 * 2**20, 0.0])
    assert trace.counters["psum_bytes"].value[0] == pytest.approx(0.25 * 2 * 2**20)
    assert list(trace.counters["hbm_bytes_per_s"].value) == [1.6e11, 0.0]


def test_the_run_description_says_where_it_was_measured(profile):
    (trace,) = load_file(profile)
    d = trace.run
    assert (d.workload.model, d.workload.mode) == ("mlp_nki_mm", "imported")
    assert (d.deployment.instance, d.deployment.chip, d.hardware.name) == ("trn1.2xlarge", "trn1", "Trainium1")
    assert trace.meta["profile"]["schema_version"] == "7.4.0" and trace.meta["source_file"] == "mlp@latest"
    assert trace.meta["profile"]["metadata"]["runtime_version"] == "2.19.1"


def test_the_summarys_figures_are_the_catalogues(profile):
    (trace,) = load_file(profile)
    values = measure(trace)
    assert values["mfu_percent"] == 12.5 and values["hfu_percent"] == 14.0 and values["mbu_percent"] == 3.25
    assert values["tensor_active_percent"] == 15.0 and values["spill_save_bytes"] == 1024.0
    assert values["average_dma_size"] == 49152.0  # schema 7's dma_transfer_average_bytes
    assert values["total_time_ms"] == pytest.approx(4e-3)  # the Summary's seconds
    # what the Summary does not give is measured from the events: the Scalar engine's 300 of 3,500 ns
    assert values["scalar_active_percent"] == pytest.approx(100 * 300 / 3500)
    assert explorer_summary(trace)["mfu_estimated_percent"] == 12.5


def test_a_split_table_missing_tables_and_unknown_columns(tmp_path):
    d = tmp_path / "split"
    write(d, "Metadata", [METADATA])
    rows = [instruction("Tensor", "MATMUL", T0 + 100 * i, T0 + 100 * i + 50, layer=f"layer_{i % 3}")
            for i in range(10)]
    write(d, "Instruction", rows, parts=3, extra={"column_of_schema_9": pa.array([1.5] * 10)})
    (trace,) = load_file(d)  # no DmaPacket, Summary or usage tables: that activity did not happen
    assert trace.n_events == 10 and list(trace.events["start_ns"]) == [100.0 * i for i in range(10)]
    assert not trace.run.measured and trace.counters == {}


def test_optional_columns_may_be_missing(tmp_path):
    d = tmp_path / "lean"
    write(d, "Metadata", [METADATA])
    optional = [f[0] for f in TABLES["Instruction"] if not f[3]]
    write(d, "Instruction", [instruction("Vector", "TENSOR_TENSOR", T0, T0 + 10)], drop=optional)
    (trace,) = load_file(d)
    assert _events(trace, "NC0 Vector") == [("TENSOR_TENSOR", None, 0.0, 10.0, 0.0, 0.0)]


def test_an_lnc2_profile_has_each_physical_cores_engines(tmp_path):
    d = tmp_path / "lnc2"
    write(d, "Metadata", [{**METADATA, "instance_type": "trn2.48xlarge", "num_physical_cores": 2,
                           "vnc_enabled": True}])
    write(d, "Instruction", [instruction("Tensor", "MATMUL", T0, T0 + 10, pcore_idx=0),
                             instruction("Tensor", "MATMUL", T0 + 5, T0 + 20, pcore_idx=1)])
    (trace,) = load_file(d)
    assert [(t.name, t.core) for t in trace.tracks] == [("NC0 Tensor", 0), ("NC1 Tensor", 1)]
    assert trace.run.deployment.lnc == 2 and trace.run.hardware.chip == "trn2"


def test_a_profile_from_an_instance_without_data_is_drawn_without_its_chip(tmp_path):
    d = tmp_path / "new"
    write(d, "Metadata", [{**METADATA, "instance_type": "trn9.96xlarge"}])
    write(d, "Instruction", [instruction("Tensor", "MATMUL", T0, T0 + 10)])
    (trace,) = load_file(d)
    assert trace.run.hardware is None and trace.run.deployment.instance == ""


def test_a_table_picked_in_a_dialog_opens_its_profile(profile):
    (trace,) = load_file(profile / "Summary.parquet")
    assert trace.run.workload.model == "mlp_nki_mm"


def test_a_profile_saved_as_a_trace_file_reads_back_the_same(profile, tmp_path):
    (trace,) = load_file(profile)
    for name in ("p.nvtrace", "p.json"):
        save_file(tmp_path / name, [trace])
        (back,) = load_file(tmp_path / name)
        assert back.n_events == trace.n_events
        assert np.array_equal(back.events["start_ns"], trace.events["start_ns"])
    (native,) = load_file(tmp_path / "p.nvtrace")
    assert measure(native) == measure(trace)


@pytest.mark.parametrize("version, message", [
    ("8.0.0", "profile schema 8.0.0 is newer than this neuronviz reads (7.x): upgrade neuronviz"),
    ("6.2.1", "profile schema 6.2.1 is older than this neuronviz reads (7.x): process the profile again with the "
              "current neuron-explorer"),
    ("seven", "its Metadata table gives no readable 'profile_schema_version' ('seven')"),
])
def test_a_schema_of_another_major_version_is_refused_in_one_line(tmp_path, version, message):
    d = tmp_path / "v"
    write(d, "Metadata", [{**METADATA, "profile_schema_version": version}])
    with pytest.raises(TraceFileError) as err:
        load_file(d)
    assert str(err.value) == f"{d}: {message}"


def test_a_truncated_table_is_one_line_naming_it(profile):
    path = profile / "Instruction.parquet"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(TraceFileError, match=r"^.*: table Instruction \(Instruction.parquet\) is not a readable "
                                             r"Parquet file \(.+\)$"):
        load_file(profile)


def test_a_column_of_the_wrong_type_is_one_line_naming_it(tmp_path):
    d = tmp_path / "typed"
    write(d, "Metadata", [METADATA])
    write(d, "Instruction", [instruction("Tensor", "MATMUL", T0, T0 + 10)], types={"start_ts": pa.string()})
    with pytest.raises(TraceFileError) as err:
        load_file(d)
    assert str(err.value) == f"{d}: table Instruction column 'start_ts' holds string values, not ints"


def test_an_event_ending_before_it_starts_is_refused(tmp_path):
    d = tmp_path / "backwards"
    write(d, "Metadata", [METADATA])
    write(d, "Instruction", [instruction("Tensor", "MATMUL", T0 + 10, T0)])
    with pytest.raises(TraceFileError, match="an event ends before it starts$"):
        load_file(d)


def test_row_counts_and_declared_sizes_are_bounded_before_reading(tmp_path, monkeypatch):
    d = tmp_path / "big"
    write(d, "Metadata", [METADATA])
    write(d, "Instruction", [instruction("Tensor", "MATMUL", T0, T0 + 10)] * 2000)
    monkeypatch.setattr(explorer, "MAX_ROWS", 1000)
    with pytest.raises(TraceFileError, match="table Instruction has 2,000 rows; at most 1,000 can be read$"):
        load_file(d)
    monkeypatch.setattr(explorer, "MAX_ROWS", 10**9)
    monkeypatch.setattr(explorer, "MIN_RATIO_CHECK_BYTES", 0)
    monkeypatch.setattr(explorer, "MAX_RATIO", 0.01)
    with pytest.raises(TraceFileError, match=r"table Instruction declares [\d,]+ bytes in [\d,]+ on disk: "
                                             r"implausibly large$"):
        load_file(d)


def test_a_directory_that_is_not_a_profile_says_so(tmp_path):
    (tmp_path / "Instruction.parquet").write_bytes(b"")
    with pytest.raises(TraceFileError) as err:
        load_file(tmp_path)
    assert str(err.value) == (f"{tmp_path}: is a directory, not a trace file or a Neuron Explorer profile "
                              "(no Metadata.parquet in it)")


@pytest.mark.parametrize("cfg", [
    RunConfig(model="bert-base", chip="trn1"),
    RunConfig(model="gpt2", chip="inf2", mode="decode", seq=64, new_tokens=4),
    RunConfig(model="bert-base", instance="trn2.48xlarge", mode="training", batch=2, cores=2),
], ids=["inference", "decode", "training"])
def test_a_simulation_written_as_explorer_tables_opens_as_the_same_events_and_figures(tmp_path, cfg):
    sim = simulate(cfg)
    out = tmp_path / "sim-profile"
    save_file(out, [sim], "explorer")
    assert pq.read_table(out / "Metadata.parquet").to_pylist()[0]["is_simulation"] is True
    (back,) = load_file(out)
    assert back.n_events == sim.n_events

    def rows(trace):  # each event as the names and numbers a profile keeps, in one order
        ev = trace.events
        layer = [trace.layer_names[i] if i >= 0 else None for i in ev["layer"].tolist()]
        kind = [trace.tracks[i].kind for i in ev["track"].tolist()]
        return sorted(zip(kind, np.rint(ev["start_ns"]).tolist(), np.rint(ev["start_ns"] + ev["dur_ns"]).tolist(),
                          [trace.op_names[i] for i in ev["op"].tolist()], layer, np.rint(ev["flops"]).tolist(),
                          np.rint(ev["bytes"]).tolist(), strict=True), key=repr)

    ours, theirs = rows(sim), rows(back)
    # the layers of instructions only, and the host's costs as system events, without their bytes
    # (Explorer's tables have no such columns)
    engines = ("tensor", "vector", "scalar", "gpsimd")
    assert theirs == sorted(((k if k != "host" else "other", s, e, op, layer if k in engines else None, f,
                              b if k != "host" else 0.0) for k, s, e, op, layer, f, b in ours), key=repr)
    figures, measured = measure(sim), measure(back)
    explorer_keys = [m.key for m in CATALOGUE if m.explorer and figures.get(m.key) is not None]
    assert len(explorer_keys) >= 12
    for key in explorer_keys:  # the Summary's float32 columns keep 7 digits
        assert measured[key] == pytest.approx(figures[key], rel=1e-6), key


def test_an_existing_directory_is_replaced_only_if_it_is_a_profile(tmp_path, profile):
    sim = simulate(RunConfig(model="bert-base", chip="trn1"))
    save_file(profile, [sim], "explorer")
    assert load_file(profile)[0].run.workload.model == "bert-base"
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.png").write_bytes(b"meow")
    with pytest.raises(TraceFileError) as err:
        save_file(other, [sim], "explorer")
    assert str(err.value) == (f"cannot write {other}: it exists and is not a Neuron Explorer profile directory "
                              "(choose a new name)")
    assert [p.name for p in other.iterdir()] == ["cat.png"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_progress_is_heard_a_batch_at_a_time_and_can_stop_the_load(tmp_path, monkeypatch):
    d = tmp_path / "batches"
    write(d, "Metadata", [METADATA])
    write(d, "Instruction", [instruction("Tensor", "MATMUL", T0 + i, T0 + i + 1) for i in range(1000)])
    monkeypatch.setattr(explorer, "BATCH_ROWS", 100)
    heard = []
    load_file(d, heard.append)
    assert len(heard) == 10 and heard == sorted(heard) and heard[-1] == 1.0

    def stop(share):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        load_file(d, stop)


def _csv_export(profile, out):
    """What Explorer's Export to CSV writes of ``profile``: each table's rows after a
    ``timeline_track`` column."""
    out.mkdir()
    for name, track in (("Instruction", "TensorMatrix"), ("DmaPacket", "qSyncIO0"), ("CcInstruction", "CC-core 1")):
        table = pq.read_table(profile / f"{name}.parquet")
        if "timeline_track" in table.column_names:  # a field of some tables too: the export's first column
            table = table.drop_columns(["timeline_track"])
        table = table.add_column(0, "timeline_track", pa.array([track] * table.num_rows))
        pa_csv.write_csv(table, out / f"{name}.csv")
    return out


def test_a_csv_export_opens_as_its_tables_do(profile, tmp_path):
    out = _csv_export(profile, tmp_path / "export")
    (trace,) = load_file(out)
    assert _events(trace, "NC0 Tensor") == [("MATMUL", "layer_1", 500.0, 600.0, 2 * 128 * 128 * 512, 4096.0)]
    assert _events(trace, "CC-core 1") == [("DMA_ADVANCE", None, 2500.0, 200.0, 0.0, 0.0)]  # from the first event
    assert trace.meta["profile"]["schema_version"] == "CSV export" and trace.run.hardware is None
    (one,) = load_file(out / "Instruction.csv")  # one table alone
    assert {t.name for t in one.tracks} == {"NC0 Tensor", "NC0 Vector", "NC0 Scalar", "NC0 Sync", "NC0 waits"}
    (out / "DmaPacket.csv").write_text('timeline_track,start_ts\n"unclosed,1\n')
    with pytest.raises(TraceFileError, match=r": DmaPacket.csv is not a readable CSV table \(.+\)$"):
        load_file(out)


LEGACY = b"""{
    "summary": [{"total_time": 0.017, "event_count": 11215, "mfu_estimated_percent": 31.5}],
    "instruction": [
        {"timestamp": 10261883214, "duration": 148, "label": "TensorMatrix",
         "hlo_name": "%add.1 = add(%dot, %custom-call.44)", "opcode": "MATMUL",
         "operands": "S[5] (Tensor)++@complete acc_flags=3 row_grp=q0"},
        {"timestamp": 10261883400, "duration": 52, "label": "Vector", "hlo_name": "%add.1", "opcode": "TENSOR_TENSOR"}
    ]
}"""


def test_a_legacy_neuron_profile_json_opens_with_its_summary(tmp_path):
    path = tmp_path / "profile.json"  # the archived neuron-profile user guide's example
    path.write_bytes(LEGACY)
    (trace,) = load_file(path)
    assert _events(trace, "NC0 Tensor") == [("MATMUL", "%add.1 = add(%dot, %custom-call.44)", 0.0, 148.0, 0.0, 0.0)]
    assert _events(trace, "NC0 Vector") == [("TENSOR_TENSOR", "%add.1", 186.0, 52.0, 0.0, 0.0)]
    assert measure(trace)["mfu_percent"] == 31.5 and measure(trace)["total_time_ms"] == pytest.approx(17.0)
    path.write_bytes(b'{"summary": [], "instruction": [{"timestamp": "soon", "duration": 1}]}')
    with pytest.raises(TraceFileError, match="an instruction's timestamp or duration is not a whole number of ns$"):
        load_file(path)


# the system profile's sample events in Neuron Explorer's get-started page ("Export to JSON"); the
# page shows no more of the file's layout, nor any of the device profiles'
SYSTEM_PROFILE_SAMPLE = b"""{
    "Neuron_Runtime_API_Event": {"duration": 27094, "group": "nrt-nc-000", "id": 1,
        "instance_id": "i-0f207fb2a99bd2d08", "name": "nrt_tensor_write", "timestamp": 1729888371056597613, "type": 11},
    "Framework_Event": {"duration": 3758079, "group": "framework-80375131", "instance_id": "i-0f207fb2a99bd2d08",
        "name": "PjitFunction(matmul_allgather)", "timestamp": 1729888382798557372}
}"""


@pytest.mark.parametrize("name, what", [("system_profile.json", "system profile"),
                                        ("device_profile_model_10001.json", "device profile")])
def test_explorers_json_export_is_named_in_one_line_and_not_guessed_at(tmp_path, name, what):
    path = tmp_path / name
    path.write_bytes(SYSTEM_PROFILE_SAMPLE)
    with pytest.raises(TraceFileError) as err:
        load_file(path)
    assert str(err.value) == (
        f"{path}: is Neuron Explorer's JSON export of a {what} (--output-format json), whose layout is not "
        "documented and which neuronviz does not read: open the profile's directory of Parquet tables "
        "(neuron-explorer view's default output) instead")
    # a file so named that is a trace neuronviz reads opens as one: the legacy device JSON, Chrome JSON
    path.write_bytes(LEGACY)
    assert load_file(path)[0].n_events == 2
    path.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "nrt_execute", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]}')
    assert load_file(path)[0].n_events == 1
    (tmp_path / "other.json").write_bytes(SYSTEM_PROFILE_SAMPLE)
    with pytest.raises(TraceFileError, match="not a Chrome trace"):
        load_file(tmp_path / "other.json")


def test_a_layers_bytes_are_its_instructions_hbm_bytes(profile):
    from sim.analysis import analyse

    (trace,) = load_file(profile)
    layer_1 = next(s for s in analyse(trace).layers if s.name == "layer_1")
    assert layer_1.bytes == 4096.0  # the MATMUL's hbm_read_bytes; the profile's DMA packets are in no layer
    assert next(o for o in layer_1.ops if o.name == "MATMUL").bytes == 4096.0


def test_text_that_is_not_utf8_in_a_table_reads_with_its_bad_bytes_replaced(tmp_path):
    # Parquet does not check a string column's bytes: a damaged page may hold invalid UTF-8, which
    # pyarrow's conversion to Python refuses with a UnicodeDecodeError (the fuzz corpus's case 342).
    # The profile opens, the bad bytes replaced, as the other readers read such names.
    profile = small_profile(tmp_path / "p", every_table=False)
    metadata = pq.read_table(profile / "Metadata.parquet")
    column = metadata.schema.get_field_index("first_ts")
    text = b"2026-11-30 \xba10:00:00"
    offsets = pa.py_buffer(np.array([0, len(text)], np.int32).tobytes())
    bad = pa.Array.from_buffers(pa.string(), 1, [None, offsets, pa.py_buffer(text)])
    with pytest.raises(UnicodeDecodeError):
        bad.to_pylist()
    pq.write_table(metadata.set_column(column, "first_ts", bad), profile / "Metadata.parquet")
    (trace,) = load_file(profile)
    assert trace.meta["profile"]["metadata"]["first_ts"] == "2026-11-30 \ufffd10:00:00"

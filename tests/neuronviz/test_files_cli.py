"""`neuronviz info`, `neuronviz export` and `simulate -o`: trace files from the command line."""

import json
from pathlib import Path

import pytest

from neuronviz.cli import main
from sim.io import load_file
from sim.io.native import load_traces

DATA = Path(__file__).parents[1] / "data"
GOLDEN = DATA / "bert-base-trn1-inf2.nvtrace"
PYTORCH = DATA / "pytorch-profiler.json"


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_info_lists_each_run_with_chip_model_events_and_latency(capsys):
    code, out, _ = run_cli(capsys, "info", GOLDEN)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"{GOLDEN}: 2 run(s)"
    assert lines[1].split()[:4] == ["#", "chip", "instance", "model"]
    traces = load_traces(GOLDEN)
    for line, trace in zip(lines[2:], traces, strict=True):
        cells = line.split()
        assert cells[1] == trace.meta["chip_name"] and cells[3] == "bert-base"
        assert cells[-3] == f"{trace.n_events:,}"
        assert float(cells[-2]) == pytest.approx(trace.end_ns / 1e6, abs=1e-3)


def test_info_reads_a_trace_of_another_tool(capsys):
    code, out, _ = run_cli(capsys, "info", PYTORCH)
    assert code == 0
    row = out.splitlines()[2]
    assert "Chrome trace" in row and "pytorch-profiler" in row and "imported" in row


def test_export_to_chrome_json_and_back_keeps_every_event(tmp_path, capsys):
    out = tmp_path / "cmp.json"
    code, text, _ = run_cli(capsys, "export", GOLDEN, "-o", out)
    assert code == 0 and "chrome, 2 run(s)" in text
    doc = json.loads(out.read_text())
    originals = load_traces(GOLDEN)
    assert sum(e["ph"] == "X" for e in doc["traceEvents"]) == sum(t.n_events for t in originals)
    back = tmp_path / "back.nvtrace"
    assert run_cli(capsys, "export", out, "-o", back)[0] == 0
    for a, b in zip(originals, load_traces(back), strict=True):
        assert a.meta == b.meta
        assert (a.events["op"] == b.events["op"]).all()
        assert abs(a.events["start_ns"] - b.events["start_ns"]).max() <= 0.5 + 1e-3  # written in whole ns


def test_export_format_option_overrides_the_suffix(tmp_path, capsys):
    out = tmp_path / "trace.data"
    assert run_cli(capsys, "export", GOLDEN, "--format", "chrome", "-o", out)[0] == 0
    assert out.read_bytes().startswith(b"{")
    assert len(load_file(out)) == 2


def test_simulate_writes_chrome_json_by_suffix(tmp_path, capsys):
    out = tmp_path / "sim.json.gz"
    code, _, _ = run_cli(capsys, "simulate", "--model", "bert-base", "--chips", "inf2,trn1", "--seq", "32", "-o", out)
    assert code == 0
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    assert [t.meta["chip"] for t in load_file(out)] == ["inf2", "trn1"]


@pytest.mark.parametrize("content, message", [
    (None, "no such file"), (b"", "the file is empty"), (b"hello world", "not a trace file"),
    (b'{"a": 1}', "without 'traceEvents'"), (b"PK\x03\x04garbage", "damaged or truncated zip"),
    (b'[{"ph": "X", "ts": "soon", "pid": 1, "tid": 1, "name": "x"}]', "'ts' should be a number"),
])
def test_bad_files_exit_2_with_one_line_naming_the_file(tmp_path, capsys, content, message):
    path = tmp_path / "bad.trace"
    if content is not None:
        path.write_bytes(content)
    for argv in (["info", path], ["export", path, "-o", tmp_path / "out.json"]):
        code, _, err = run_cli(capsys, *argv)
        assert code == 2
        assert message in err and "bad.trace" in err and err.count("\n") == 1
    assert not (tmp_path / "out.json").exists()


def test_export_to_a_missing_folder_fails_cleanly(tmp_path, capsys):
    code, _, err = run_cli(capsys, "export", GOLDEN, "-o", tmp_path / "missing" / "out.json")
    assert code == 2 and "cannot write" in err and err.count("\n") == 1


@pytest.mark.parametrize("events, duration_ms", [
    ([{"ph": "C", "name": "mem", "pid": 1, "ts": 10, "args": {"mem": 5}},
      {"ph": "C", "name": "mem", "pid": 1, "ts": 30, "args": {"mem": 7}}], 0.02),  # counters only
    ([{"ph": "i", "name": "x", "pid": 1, "tid": 1, "ts": 5}], 0.0),  # one instant: zero duration
    ([{"ph": "C", "name": "m", "pid": 1, "ts": 0, "args": {"m": 1}},
      {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 100, "dur": 10}], 0.11),  # slices after counters
])
def test_traces_without_slices_or_length_still_open(tmp_path, capsys, events, duration_ms):
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"traceEvents": events}))
    code, out, _ = run_cli(capsys, "info", path)
    assert code == 0
    assert float(out.splitlines()[2].split()[-2]) == pytest.approx(duration_ms, abs=1e-3)
    png = tmp_path / "odd.png"
    assert run_cli(capsys, "screenshot", path, "-o", png, "--size", "600x400")[0] == 0 and png.exists()


MANIFEST_TEXT = b'{"format": 4, "runs": []}'


def test_a_trace_file_whose_manifest_does_not_inflate_is_sized_and_refused_in_one_line(tmp_path, capsys):
    # a deflated manifest whose stream is corrupt (zlib: "invalid distance too far back") is no
    # reason for the size estimate before an open to raise: the open refuses the file, in one line
    import zipfile
    import zlib

    from neuronviz.files import reading_bytes
    from sim.io.native import MANIFEST

    path = tmp_path / "bad.nvtrace"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(MANIFEST, MANIFEST_TEXT * 400)
    data = bytearray(path.read_bytes())
    start = data.index(MANIFEST.encode()) + len(MANIFEST)
    data[start + 4:start + 12] = b"\xff" * 8  # into the deflated stream
    path.write_bytes(bytes(data))
    with zipfile.ZipFile(path) as zf, pytest.raises(zlib.error):
        zf.read(MANIFEST)
    assert reading_bytes(str(path)) == len(MANIFEST_TEXT) * 400  # what its member declares it inflates to
    code, _, err = run_cli(capsys, "info", path)
    assert code == 2 and len(err.strip().splitlines()) == 1 and str(path) in err


def test_a_compact_trace_file_is_read_by_what_its_columns_decode_to(tmp_path):
    from neuronviz.files import reading_bytes
    from sim.io import save_file
    from sim.run import RunConfig, simulate

    trace = simulate(RunConfig(model="gpt2", chip="inf2", mode="decode", seq=64, new_tokens=16))
    path = tmp_path / "run.nvtrace"
    save_file(path, [trace])
    columns = sum(a.nbytes for a in trace.events.values())
    assert path.stat().st_size < columns / 10  # stored compressed
    assert reading_bytes(str(path)) >= columns  # so a big one opens off the GUI thread


def test_sizing_a_file_whose_manifest_inflates_past_what_it_declares_reads_no_more_than_that(tmp_path):
    # a manifest declaring 10 KB that deflates to 64 MiB (the hostile corpus's bomb, smaller): the
    # size estimate File > Open makes first inflates at most the 10 KB, then gives up on it
    import tracemalloc
    import zipfile

    from neuronviz.files import reading_bytes
    from sim.io.native import MANIFEST
    from tests.fuzz_corpus import Member, deflate_repeated, write_zip

    path = tmp_path / "bomb.nvtrace"
    write_zip(path, [Member(MANIFEST, deflate_repeated((b"\0" * (1 << 20), 64)), zipfile.ZIP_DEFLATED, 10_000, 0)])
    tracemalloc.start()
    try:
        assert reading_bytes(str(path)) == path.stat().st_size  # its size, above what the member declares
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20  # not the 64 MiB it inflates to

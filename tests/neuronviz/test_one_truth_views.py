"""Every view reads the metric catalogue: a figure reads the same in the pane header, the Summary
table, ``report --json``, ``simulate --json``, ``info`` and the CSV export, and a bandwidth is
the bytes of the events over the drawn span."""

import csv
import json

import numpy as np
import pytest

from neuronviz.cli import main
from neuronviz.export import write_summary_csv
from neuronviz.files import demo_runs
from sim import catalogue
from sim.io import save_file
from sim.run import RunConfig, simulate

RUNS = {  # a multi-core decode, a serving run and a training run over two instances
    "decode": dict(model="llama-3-8b", chip="inf2", cores=2, mode="decode", seq=128, new_tokens=8),
    "serve": dict(model="gpt2", chip="trn2", mode="serve", batch=2, requests=4, seq=128, new_tokens=8),
    "training": dict(model="bert-base", instance="trn1.32xlarge", mode="training", batch=8, nodes=2),
}
# what the pane header writes of each mode, as the catalogue's text
HEADER_KEYS = {"inference": ("latency_ms", "throughput_per_s", "cost_per_million_usd"),
               "decode": ("time_to_first_token_ms", "per_token_ms", "latency_ms", "throughput_per_s",
                          "cost_per_million_usd"),
               "serve": ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "e2e_p50_ms",
                         "output_tokens_per_s", "throughput_per_s", "cost_per_million_usd"),
               "training": ("latency_ms", "throughput_per_s", "cost_per_million_usd", "cost_per_step_usd")}


@pytest.fixture(scope="module")
def traces():
    out = {"demo": [r.trace for r in demo_runs()]}
    out.update({name: [simulate(RunConfig(**cfg))] for name, cfg in RUNS.items()})
    return out


@pytest.mark.parametrize("name", ["demo", *RUNS])
def test_a_figure_reads_the_same_in_every_view(name, traces, tmp_path, capsys, demo_window):
    runs = traces[name]
    path = tmp_path / f"{name}.nvtrace"
    save_file(str(path), runs)
    values = [catalogue.measure(t) for t in runs]

    assert main(["report", str(path), "--json"]) == 0
    reported = [r["summary"] for r in json.loads(capsys.readouterr().out)["runs"]]
    for v, summary in zip(values, reported, strict=True):
        for metric in catalogue.CATALOGUE:
            if metric.explorer and metric.key in v:
                scale = 1e-3 if metric.explorer == "total_time" else 1.0  # seconds, as Explorer's profiles
                assert summary[metric.explorer] == pytest.approx(_or_none(v[metric.key], scale), rel=1e-12)

    if name != "demo":  # simulate --json of the same configuration gives the same figures
        assert main(["simulate", *_flags(RUNS[name]), "--json"]) == 0
        (simulated,) = json.loads(capsys.readouterr().out)["runs"]
        assert {k: simulated[k] for k in values[0]} == pytest.approx(values[0], rel=1e-12)

    assert main(["info", str(path)]) == 0
    info = capsys.readouterr().out.splitlines()[2:]
    assert [line.split()[-1] for line in info] == [catalogue.text("latency_ms", v["latency_ms"]) for v in values]

    assert demo_window.open_files([str(path)])
    table = demo_window.summary
    for row, v in enumerate(values):
        for column, key in enumerate(table.columns):
            if key in catalogue.BY_KEY:
                assert table.item(row, column).text() == catalogue.text(key, v.get(key)), key
    for pane, v, trace in zip(demo_window.panes, values, runs, strict=True):
        header = pane.header.text()
        for key in HEADER_KEYS[trace.meta["mode"]]:
            assert catalogue.text(key, v[key]) in header, key

    out = tmp_path / "summary.csv"
    write_summary_csv(demo_window.session, out)
    rows = list(csv.DictReader(out.read_text(encoding="utf-8").splitlines()))
    for row, v in zip(rows, values, strict=True):
        for key in table.columns:
            if key in catalogue.BY_KEY:
                assert row[key] == ("" if v.get(key) is None else repr(v[key])), key


def _or_none(value, scale):
    return None if value is None else value * scale


def _flags(cfg: dict) -> list[str]:
    """``simulate``'s flags for a configuration of :data:`RUNS`."""
    names = {"chip": "--chips"}
    out = []
    for key, value in cfg.items():
        out += [names.get(key, "--" + key.replace("_", "-")), str(value)]
    return out


@pytest.mark.parametrize("name", list(RUNS))
def test_a_bandwidth_is_the_bytes_of_the_events_over_the_drawn_span(name, traces):
    (trace,) = traces[name]
    v = catalogue.measure(trace)
    ev = trace.events
    shards = trace.meta["cores_per_copy"] * trace.meta["lnc"]
    start = float(ev["start_ns"].min())
    span_ns = max(float((ev["start_ns"] + ev["dur_ns"]).max()),
                  max((e for _, e, _ in trace.unstored_spans), default=0.0)) - start
    for kind, key in (("dma_read", "hbm_read_gbps"), ("dma_write", "hbm_write_gbps")):
        sel = ev["track"] == trace.track_index(kind)
        moved = float(np.sum(ev["bytes"][sel] * trace.event_repeats[sel])) * shards
        assert v[key] == pytest.approx(moved / span_ns, rel=1e-9)  # bytes per ns: GB/s
    assert v["total_time_ms"] == pytest.approx(span_ns * 1e-6, rel=1e-12)


def test_views_never_look_a_chip_up_by_name(traces, tmp_path, demo_window, monkeypatch):
    import sim.description
    import sim.hardware.chip

    path = tmp_path / "decode.nvtrace"
    save_file(str(path), traces["decode"])

    def refused(*_):
        raise AssertionError("a view looked a chip up by name")

    for module in (sim.hardware.chip, sim.description):
        monkeypatch.setattr(module, "get_chip", refused)
    assert demo_window.open_files([str(path)])
    (pane,) = demo_window.panes
    assert pane.diagram.isVisibleTo(pane) and "SRAM %" in [band.title for band in pane.bands]
    assert demo_window.session.runs[0].analysis.roofs is not None  # the roofline's peaks: the file's
    state = pane.chip_state(pane.run.duration_ns / 2)
    assert state.peak_bytes_per_s == traces["decode"][0].run.hardware.memory_bytes_per_s > 0

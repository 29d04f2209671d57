"""Window aggregates of an area selection: whole-run totals and additivity over split windows."""

from pathlib import Path

import numpy as np
import pytest

from neuronviz.trace_view import TraceView, window_stats
from sim.io.native import load_traces
from sim.metrics import compute_metrics

GOLDEN = Path(__file__).parents[1] / "data" / "bert-base-trn1-inf2.nvtrace"


@pytest.fixture(scope="module")
def view():
    return TraceView(load_traces(GOLDEN)[0])


def test_the_whole_run_window_holds_every_flop_and_byte(view):
    tr = view.trace
    t0, t1 = 0.0, tr.duration_ns
    s = window_stats(view, t0, t1)
    assert s.flops == pytest.approx(float(tr.events["flops"].sum()))
    dma = np.isin([t.kind for t in tr.tracks], ["dma_read", "dma_write"])[tr.events["track"]]
    assert s.nbytes == pytest.approx(float(tr.events["bytes"][dma].sum()))
    met = compute_metrics(tr)
    assert s.read_bytes == pytest.approx(met.hbm_read_bytes, rel=1e-6)
    tensor = view.integrals[view.row_kinds.index("tensor")]
    assert s.busy["tensor"] == pytest.approx(tensor.dur.sum() / (t1 - t0))
    assert s.top_ops[0][1] >= s.top_ops[-1][1] > 0


def test_split_windows_add_up(view):
    d = view.trace.duration_ns
    whole = window_stats(view, 0.2 * d, 0.8 * d)
    parts = [window_stats(view, a * d, b * d) for a, b in ((0.2, 0.45), (0.45, 0.8))]
    assert sum(p.flops for p in parts) == pytest.approx(whole.flops)
    assert sum(p.read_bytes for p in parts) == pytest.approx(whole.read_bytes)
    busy = (parts[0].busy["tensor"] * 0.25 + parts[1].busy["tensor"] * 0.35) / 0.6
    assert busy == pytest.approx(whole.busy["tensor"])


def test_an_empty_window_is_all_zero(view):
    d = view.trace.duration_ns
    s = window_stats(view, 2 * d, 3 * d)
    assert s.flops == 0 and s.read_bytes == 0 and s.top_ops == [] and max(s.busy.values()) == 0


def test_a_copy_over_several_cores_counts_every_core_as_the_summary_does():
    from sim.run import RunConfig, simulate

    trace = simulate(RunConfig(model="bert-large", chip="trn1", cores=4))
    assert trace.meta["cores_per_copy"] * trace.meta.get("lnc", 1) == 4
    met = compute_metrics(trace)
    s = window_stats(TraceView(trace), 0.0, trace.duration_ns)
    assert s.flops == pytest.approx(met.flops)
    assert s.read_bytes == pytest.approx(met.hbm_read_bytes, rel=1e-6)


def test_nested_slices_of_an_imported_trace_count_once(tmp_path):
    import json

    from sim.io import load_file

    path = tmp_path / "nested.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "tensor"}},
        {"ph": "X", "name": "outer", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "name": "inner", "pid": 1, "tid": 1, "ts": 2, "dur": 1},
        {"ph": "X", "name": "later", "pid": 1, "tid": 1, "ts": 12, "dur": 4},
    ]}))
    (trace,) = load_file(path)
    assert compute_metrics(trace).engine_utilization["tensor"] == pytest.approx(14 / 16)
    view = TraceView(trace)
    assert view.event_at(1, 2500.0).op == "inner"  # stacked under the slice holding it
    assert view.event_at(0, 2500.0).op == "outer"
    assert view.event_at(0, 5000.0).op == "outer"
    assert view.event_at(0, 11000.0) is None
    # off every event: the nearest within the slack (the pointer a pixel or two away), else none
    assert view.event_at(0, 11200.0, slack_ns=1000.0).op == "later"  # 800 ns before it, 1,200 after "outer"
    assert view.event_at(0, 10300.0, slack_ns=1000.0).op == "outer"
    assert view.event_at(0, 11200.0, slack_ns=500.0) is None
    assert view.event_at(0, 20000.0, slack_ns=4000.0).op == "later"  # after the last event
    assert window_stats(view, 0.0, 16000.0).busy["tensor"] == pytest.approx(14 / 16)

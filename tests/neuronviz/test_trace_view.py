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

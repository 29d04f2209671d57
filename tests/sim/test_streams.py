"""Requests back to back: a stream spans many requests while every figure stays one request's."""

import pytest

from sim.analysis import analyse
from sim.errors import ConfigError
from sim.metrics import compute_metrics
from sim.run import RunConfig, simulate


def test_a_stream_of_requests_keeps_one_requests_figures():
    one = simulate(RunConfig(model="bert-base", chip="inf2", batch=2))
    stream = simulate(RunConfig(model="bert-base", chip="inf2", batch=2, requests=7))
    assert stream.meta["total_ns"] == pytest.approx(7 * one.meta["total_ns"])
    assert stream.n_events == 7 * one.n_events and stream.layer_names.count("layer3.mlp") == 7
    a, b = compute_metrics(one), compute_metrics(stream)
    for field in ("latency_s", "throughput_per_s", "flops", "hbm_read_bytes", "mfu", "cost_per_million_usd"):
        assert getattr(b, field) == pytest.approx(getattr(a, field)), field
    la, lb = analyse(one), analyse(stream)
    assert [s.name for s in lb.layers] == [s.name for s in la.layers]
    assert lb.total_ns == pytest.approx(la.total_ns) and lb.summary["mfu_estimated_percent"] == pytest.approx(
        la.summary["mfu_estimated_percent"])


def test_a_stream_longer_than_the_stored_events_counts_the_rest():
    stream = simulate(RunConfig(model="bert-base", chip="trn1", requests=50), max_events=10_000)
    one = simulate(RunConfig(model="bert-base", chip="trn1"))
    assert stream.n_events < 50 * one.n_events
    assert compute_metrics(stream).flops == pytest.approx(compute_metrics(one).flops)


@pytest.mark.parametrize("kw, message", [
    (dict(requests=0), "requests must be a whole number from 1"),
    (dict(requests=10**9), "requests must be a whole number from 1 to 100,000"),
    (dict(requests=3, mode="training"), "requests back to back are for inference"),
])
def test_bad_streams_are_refused(kw, message):
    with pytest.raises(ConfigError, match=message):
        simulate(RunConfig(model="bert-base", chip="inf2", **kw))

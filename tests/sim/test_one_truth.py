"""Every reported time is the span of the events that make it: for every preset and mode, the
drawn span of a request is its latency and the drawn time to its first token its TTFT, the
host's costs (launches, copies, a request's handling, a generate loop) on the host track."""

import numpy as np
import pytest

from sim.errors import SimError
from sim.host import HOST, QUEUED, REQUEST_HANDLING
from sim.metrics import compute_metrics
from sim.run import RunConfig, simulate
from sim.workloads import get_model
from sim.workloads.models import DECODER, ENCODER_DECODER, preset_names

NS = 1.0  # within a nanosecond
MAX_EVENTS = 20_000  # the executions after these are drawn from their stored twins: the span holds them too
INSTANCE = "trn2.48xlarge"  # room for every preset (up to 405B and DeepSeek-V3 on its 64 logical cores)
MODES = {DECODER: ("inference", "decode", "serve"), ENCODER_DECODER: ("decode",)}
SMALL = {"inference": {}, "decode": {"seq": 128, "new_tokens": 4}, "training": {"batch": 1},
         "serve": {"seq": 128, "new_tokens": 4, "batch": 2, "requests": 4}}


def _drawn_end(trace) -> float:
    """Where the timeline ends: its last event, or the executions after it drawn from their stored
    twins."""
    ends = trace.events["start_ns"] + trace.events["dur_ns"]
    spans = trace.unstored_spans
    return max(float(ends.max()), spans[-1][1] if spans else 0.0)


def _drawn_first_token(trace) -> float:
    """The end of the last event of the prompt's executions (their layers are named prefill...)."""
    prefill = np.array([n.startswith("prefill") for n in trace.layer_names])
    layer = trace.events["layer"]
    sel = (layer >= 0) & prefill[np.clip(layer, 0, None)]
    return float((trace.events["start_ns"] + trace.events["dur_ns"])[sel].max())


def _prefill_ends(trace) -> set[int]:
    """When each drawn execution of a prompt's pass ends (ns, rounded): its stored layers' ends,
    and the ends of the executions drawn from their stored twins."""
    stored = trace.layer_end_ns[[n.startswith("prefill") for n in trace.layer_names]]
    out = {round(float(e)) for e in stored}
    for p in trace.meta["phases"]:
        if p["name"].startswith("prefill"):
            period = (p["end_ns"] - p["start_ns"]) / p["repeat"]
            out |= {round(p["start_ns"] + k * period) for k in range(1, p["repeat"] + 1)}
    return out


def _prefill_starts(trace) -> set[int]:
    """When each drawn execution of a prompt's pass begins (ns, rounded)."""
    out = set()
    for p in trace.meta["phases"]:
        if p["name"].startswith("prefill"):
            period = (p["end_ns"] - p["start_ns"]) / p["repeat"]
            out |= {round(p["start_ns"] + k * period) for k in range(p["repeat"])}
    return out


def _configs():
    for name in preset_names():
        spec = get_model(name)
        for mode in MODES.get(spec.family, ("inference",)):
            yield name, mode, SMALL[mode]
        if spec.family != ENCODER_DECODER and not spec.experts:
            yield name, "training", SMALL["training"]


def _simulated(name, mode, kw):
    try:
        return simulate(RunConfig(model=name, instance=INSTANCE, mode=mode, **kw), max_events=MAX_EVENTS)
    except SimError as exc:  # a preset this mode cannot run (a vision model's decode, a CNN on many cores)
        pytest.skip(str(exc))


@pytest.mark.parametrize(("name", "mode", "kw"), list(_configs()), ids=lambda v: v if isinstance(v, str) else "")
def test_the_drawn_span_of_a_request_is_its_latency(name, mode, kw):
    trace = _simulated(name, mode, kw)
    met, ev = compute_metrics(trace), trace.events
    start = float(ev["start_ns"].min())
    if mode == "serve":  # each request's e2e, first token and handling are on the timeline
        s = trace.meta["serving"]
        host = ev["track"] == trace.track_index(HOST)
        handling = np.asarray(trace.op_names, dtype=object)[ev["op"]] == REQUEST_HANDLING
        handled = np.sort(ev["start_ns"][host & handling])
        assert handled == pytest.approx(np.sort(s["sent_ns"]), abs=NS)
        assert {round(t) for t in s["first_token_ns"]} <= _prefill_ends(trace)
        # a request that waited for a slot: drawn from when it was ready until a prompt's pass began
        queued = host & (np.asarray(trace.op_names, dtype=object)[ev["op"]] == QUEUED)
        assert {round(float(e)) for e in (ev["start_ns"] + ev["dur_ns"])[queued]} <= _prefill_starts(trace)
        assert max(s["finish_ns"]) == pytest.approx(_drawn_end(trace), abs=NS)
        e2e = np.asarray(s["finish_ns"]) - np.asarray(s["sent_ns"])
        assert met.latency_s * 1e9 == pytest.approx(float(np.percentile(e2e, 50)), abs=NS)
        return
    requests = trace.meta["requests"]
    assert (_drawn_end(trace) - start) / requests == pytest.approx(met.latency_s * 1e9, abs=NS)
    if mode == "decode":
        assert _drawn_first_token(trace) - start == pytest.approx(met.time_to_first_token_s * 1e9, abs=NS)


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_training_step_over_instances_is_its_drawn_span(nodes):
    trace = simulate(RunConfig(model="llama-3-8b", instance="trn1.32xlarge", cores=8, mode="training", seq=1024,
                               nodes=nodes, pipeline=2, grad_accum=4))
    met = compute_metrics(trace)
    assert _drawn_end(trace) - trace.events["start_ns"].min() == pytest.approx(met.latency_s * 1e9, abs=NS)
    assert "waiting for the other pipeline stages" in trace.op_names  # the bubble is drawn, not left blank


@pytest.mark.parametrize("suffix", [".nvtrace", ".json"])
def test_the_host_track_and_its_events_of_no_layer_survive_a_file(tmp_path, suffix):
    from sim.io import load_file, save_file

    trace = simulate(RunConfig(model="gpt2", chip="trn2", mode="serve", batch=2, requests=4, seq=128, new_tokens=4))
    path = tmp_path / f"serve{suffix}"
    save_file(str(path), [trace])
    (back,) = load_file(str(path))
    assert [t.kind for t in back.tracks] == [t.kind for t in trace.tracks] and trace.tracks[-1].kind == HOST
    for column in ("track", "op", "layer"):
        np.testing.assert_array_equal(back.events[column], trace.events[column])
    # each request's handling, and the two that waited for a slot (batch 2), beside the engine's steps
    assert (back.events["layer"] == -1).sum() == 4 + 2
    # Chrome JSON holds whole nanoseconds (as Perfetto reads its ts and dur), the native file every bit
    atol = 0.5 if suffix == ".json" else 1e-3
    np.testing.assert_allclose(back.events["start_ns"], trace.events["start_ns"], rtol=1e-12, atol=atol)
    assert compute_metrics(back).latency_s == pytest.approx(compute_metrics(trace).latency_s, abs=2 * atol * 1e-9)

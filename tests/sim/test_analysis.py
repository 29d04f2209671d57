"""The analysis: layer tables that add up, intensity and bounds from the model, the summary's
Neuron Explorer names, each insight on a trace built to trigger it and on one built not to, and
`neuronviz report`."""

import json

import numpy as np
import pytest

from neuronviz.cli import main
from sim.analysis import analyse, insights, layer_table, report_record, roofs, summary
from sim.hardware.chip import get_chip
from sim.host import GENERATE_LOOP, HOST
from sim.run import RunConfig, simulate
from sim.trace import Trace, Track

KINDS = ("tensor", "vector", "scalar", "gpsimd", "dma_read", "dma_write", "collective")
US = 1000.0  # ns


def built(layers, chip="trn2", stats=None, **meta):
    """A trace of layers, each ``(name, kind, [(engine, start_us, dur_us, flops, bytes), ...])``."""
    tracks = tuple(Track(f"NC0 {k}", k, 0) for k in KINDS)
    rows = []
    for li, (_, _, events) in enumerate(layers):
        for engine, start, dur, flops, nbytes in events:
            rows.append((KINDS.index(engine), start * US, dur * US, li, li, flops, nbytes))
    cols = np.array(rows, float).reshape(-1, 7)
    order = np.lexsort((cols[:, 1], cols[:, 0]))
    cols = cols[order]
    n = len(layers)
    start = np.array([min(e[1] for e in layer[2]) for layer in layers]) * US
    end = np.array([max(e[1] + e[2] for e in layer[2]) for layer in layers]) * US
    c = get_chip(chip)
    base = {"chip": chip, "mode": "inference", "batch": 1, "copies": 1, "cores_per_copy": 1, "lnc": 1,
            "launch_overhead_s": 0.0, "total_ns": float(end.max()), "cores_active": 1, "matmul_dtype": "bf16",
            "peak_flops_per_core": c.tensor.peak_flops("bf16"), "layer_stats": stats or {}}
    return Trace(meta={**base, **meta}, tracks=tracks,
                 events={"track": cols[:, 0], "start_ns": cols[:, 1], "dur_ns": cols[:, 2], "op": cols[:, 3],
                         "layer": cols[:, 4], "flops": cols[:, 5], "bytes": cols[:, 6]},
                 op_names=tuple(f"op{i}" for i in range(n)), op_layer=np.arange(n),
                 layer_names=tuple(layer[0] for layer in layers), layer_kinds=tuple(layer[1] for layer in layers),
                 layer_start_ns=start, layer_end_ns=end)


def keys(trace, others=()):
    return {i.key for i in insights(trace, list(others))}


# --- tables from simulated runs ------------------------------------------------------------------

@pytest.mark.parametrize("cfg", [
    RunConfig(model="bert-large", chip="trn2"), RunConfig(model="bert-base", chip="inf1", batch=4),
    RunConfig(model="gpt2", chip="inf2", mode="decode", seq=128, new_tokens=16),
    RunConfig(model="distilbert", chip="trn1", mode="training", batch=8, grad_accum=3),
    # 2 of the 6 middle micro-batches stored: the last stored layer stops where the others begin
    RunConfig(model="distilbert", chip="trn1", mode="training", batch=8, grad_accum=8),
], ids=["bert-large-trn2", "bert-base-inf1", "gpt2-decode-inf2", "distilbert-training-trn1",
        "distilbert-8-micro-batches-trn1"])
def test_layer_times_add_up_to_the_run(cfg):
    trace = simulate(cfg)
    layers = layer_table(trace)
    assert sum(s.time_ns for s in layers) == pytest.approx(trace.meta["total_ns"], rel=1e-6)
    assert sum(s.flops for s in layers) == pytest.approx(summary(trace)["model_flops"], rel=1e-6)
    for s in layers:
        assert s.arithmetic_intensity == (pytest.approx(s.flops / s.bytes) if s.bytes else s.arithmetic_intensity)
        assert 0.0 <= min(s.busy.values()) and max(s.busy.values()) <= 1.0


@pytest.mark.parametrize("chip", ["inf1", "inf2", "trn1", "trn2", "trn3"])
def test_a_batch_1_decode_step_is_memory_bound_on_every_chip(chip):
    trace = simulate(RunConfig(model="gpt2", chip=chip, mode="decode", seq=128, new_tokens=8))
    layers = layer_table(trace)
    steps = [s for s in layers if not s.name.startswith("prefill") and s.kind != HOST]
    assert steps and {s.bound for s in steps} == {"memory"}
    assert [s.bound for s in layers if s.kind == HOST] == ["host"]  # the request's handling
    r = roofs(trace)
    for s in steps:  # below the ridge: the memory roof is the lower one
        assert s.arithmetic_intensity * r.memory_bytes_per_s < r.compute["bf16"]


def test_a_large_batch_mlp_is_tensor_bound_on_trn2():
    layers = layer_table(simulate(RunConfig(model="bert-large", chip="trn2", batch=64, seq=512)))
    mlps = [s for s in layers if s.kind == "mlp"]
    assert {s.bound for s in mlps} == {"tensor"}
    assert all(s.mfu > 0.3 for s in mlps)


def test_the_summary_uses_the_neuron_explorer_names():
    trace = simulate(RunConfig(model="bert-large", chip="trn2", batch=8, seq=512, lnc=1))
    s = summary(trace)
    for name in ("total_time", "tensor_engine_active_time_percent", "vector_engine_active_time_percent",
                 "scalar_engine_active_time_percent", "gpsimd_engine_active_time_percent", "hbm_read_bytes",
                 "hbm_write_bytes", "mfu_estimated_percent", "mbu_estimated_percent", "hfu_estimated_percent",
                 "mm_arithmetic_intensity", "average_dma_size", "spill_save_bytes", "spill_reload_bytes"):
        assert name in s, name
    assert s["hfu_estimated_percent"] > s["mfu_estimated_percent"]  # transposes run on the array too
    assert s["mm_arithmetic_intensity"] == pytest.approx(s["model_flops"] / (s["hbm_read_bytes"]
                                                                             + s["hbm_write_bytes"]))
    # one sequence's scores, 16 heads x 512 x 512 x 2 B = 8 MiB on one core, overflow SBUF's quarter
    assert s["spill_reload_bytes"] > 0
    assert 0 < s["mbu_estimated_percent"] < 100 and 0 < s["mfu_estimated_percent"] < 100


# --- op tables -----------------------------------------------------------------------------------

def with_ops(layer_names, op_names, rows, **meta):
    """A trace of ``rows`` ``(engine, start_us, dur_us, op, layer, flops, bytes)`` on core 0 of trn2."""
    trace = built([(name, "mlp", [("tensor", 0, 1, 0, 0)]) for name in layer_names], **meta)
    cols = np.array([(KINDS.index(e), s * US, d * US, op, layer, fl, nb) for e, s, d, op, layer, fl, nb in rows])
    cols = cols[np.lexsort((cols[:, 1], cols[:, 0]))]
    layers = cols[:, 4].astype(int)
    return Trace(meta=trace.meta, tracks=trace.tracks,
                 events={k: cols[:, i] for i, k in enumerate(("track", "start_ns", "dur_ns", "op", "layer", "flops",
                                                              "bytes"))},
                 op_names=op_names, op_layer=np.array([0, 0, 1, 1, 0]), layer_names=trace.layer_names,
                 layer_kinds=trace.layer_kinds,
                 layer_start_ns=np.array([cols[layers == i, 1].min() for i in range(len(layer_names))]),
                 layer_end_ns=np.array([(cols[layers == i, 1] + cols[layers == i, 2]).max()
                                        for i in range(len(layer_names))]))


# two layers; op 4 is named as op 0, so layer 0's qkv is both (three events over 0-4 us)
OPS = ("qkv", "softmax", "qkv", "out", "qkv")
OP_ROWS = [("tensor", 0, 2, 0, 0, 60.0, 0.0), ("dma_read", 0, 2, 0, 0, 0.0, 64.0), ("tensor", 2, 2, 4, 0, 40.0, 0.0),
           ("vector", 4, 2, 1, 0, 10.0, 0.0),
           ("tensor", 6, 4, 2, 1, 200.0, 0.0), ("scalar", 9, 3, 3, 1, 0.0, 0.0)]


def test_each_layers_ops_are_grouped_by_name_over_their_own_spans():
    trace = with_ops(("layer0", "layer1"), OPS, OP_ROWS)
    peak = get_chip("trn2").tensor.peak_flops("bf16")
    first, second = (layer.ops for layer in analyse(trace).layers)
    assert [(o.name, o.start_ns, o.end_ns, o.time_ns, o.flops, o.bytes) for o in first] == [
        ("qkv", 0.0, 4000.0, 4000.0, 100.0, 64.0), ("softmax", 4000.0, 6000.0, 2000.0, 10.0, 0.0)]
    assert [(o.name, o.start_ns, o.end_ns, o.time_ns, o.flops) for o in second] == [
        ("qkv", 6000.0, 10000.0, 4000.0, 200.0), ("out", 9000.0, 12000.0, 3000.0, 0.0)]
    qkv = first[0]
    assert qkv.busy == {"tensor": 1.0, "vector": 0.0, "scalar": 0.0, "gpsimd": 0.0, "memory": 0.5, "collective": 0.0}
    assert qkv.bound == "tensor" and second[1].bound == "scalar"
    assert qkv.mfu == pytest.approx(100.0 / (4e-6 * peak))
    assert qkv.mbu == pytest.approx(64.0 / (4e-6 * roofs(trace).memory_bytes_per_s))


def test_requests_back_to_back_give_each_op_one_requests_share():
    # the same two layers run twice, one request after the other: each op's two runs summed, halved
    second = [(e, s + 12, d, op, layer + 2, fl, nb) for e, s, d, op, layer, fl, nb in OP_ROWS]
    trace = with_ops(("layer0", "layer1", "layer0", "layer1"), OPS, OP_ROWS + second, requests=2)
    first, _ = (layer.ops for layer in analyse(trace).layers)
    assert [(o.name, o.start_ns, o.time_ns, o.flops, o.bytes) for o in first] == [
        ("qkv", 0.0, 4000.0, 100.0, 64.0), ("softmax", 4000.0, 2000.0, 10.0, 0.0)]
    assert first[0].busy["memory"] == 0.5


def test_the_op_tables_are_made_when_an_op_is_first_read(monkeypatch):
    import sim.analysis

    made = []
    op_tables = sim.analysis._op_tables
    monkeypatch.setattr(sim.analysis, "_op_tables", lambda *a: made.append(1) or op_tables(*a))
    trace = with_ops(("layer0", "layer1"), OPS, OP_ROWS)
    analysis = analyse(trace)
    report_record(trace, analysis=analysis)  # the report reads no op
    assert not made
    assert [len(layer.ops) for layer in analysis.layers] == [2, 2] and len(made) == 1  # one pass for every layer


# --- insights on built traces --------------------------------------------------------------------

def test_memory_bound_layers_are_found_and_compute_bound_ones_are_not():
    memory = built([("mlp", "mlp", [("dma_read", 0, 90, 0, 9e6), ("tensor", 5, 20, 1e9, 0)])])
    busy = built([("mlp", "mlp", [("dma_read", 0, 20, 0, 1e6), ("tensor", 0, 90, 1e10, 0)])])
    assert "memory_bound" in keys(memory) and "memory_bound" not in keys(busy)
    assert layer_table(memory)[0].bound == "memory" and layer_table(busy)[0].bound == "tensor"


def test_small_dma_transfers_are_named_as_the_reason():
    found = insights(built([("mlp", "mlp", [("dma_read", 0, 90, 0, 9e6), ("tensor", 5, 20, 1e9, 0)])],
                           stats={"dma_transfers": [9e6 / 128]}))
    assert "small DMA transfers (average 128 B)" in found[0].text


def test_spills_are_found_above_a_quarter_of_the_reads():
    events = [("dma_read", 0, 40, 0, 4e6), ("tensor", 0, 90, 1e10, 0)]
    spilling = built([("attn", "attention", events)], stats={"spill_reload_bytes": [2e6]})
    fine = built([("attn", "attention", events)], stats={"spill_reload_bytes": [0.5e6]})
    assert "spill" in keys(spilling) and "spill" not in keys(fine)


@pytest.mark.parametrize("engine", ["vector", "scalar", "gpsimd"])
def test_an_engine_hotspot_is_found_where_that_engine_bounds(engine):
    hot = built([("softmax", "attention", [(engine, 0, 90, 1e6, 0), ("tensor", 0, 10, 1e9, 0)])])
    cool = built([("softmax", "attention", [(engine, 0, 10, 1e6, 0), ("tensor", 0, 90, 1e9, 0)])])
    assert f"{engine}_hotspot" in keys(hot) and f"{engine}_hotspot" not in keys(cool)


def test_exposed_collectives_are_found_and_hidden_ones_are_not():
    exposed = built([("mlp", "mlp", [("tensor", 0, 50, 1e9, 0), ("collective", 50, 50, 0, 1e6)])])
    hidden = built([("mlp", "mlp", [("tensor", 0, 100, 1e9, 0), ("collective", 20, 50, 0, 1e6)])])
    assert "exposed_collectives" in keys(exposed) and "exposed_collectives" not in keys(hidden)


def test_layers_waiting_on_dependencies_are_found():
    idle = built([("a", "mlp", [("tensor", 0, 20, 1e8, 0), ("vector", 40, 20, 1e6, 0), ("scalar", 80, 20, 1e6, 0)])])
    busy = built([("a", "mlp", [("tensor", 0, 70, 1e8, 0), ("vector", 40, 20, 1e6, 0), ("scalar", 80, 20, 1e6, 0)])])
    assert "latency_bound" in keys(idle) and "latency_bound" not in keys(busy)


def test_tensore_semaphore_waits_keep_a_layer_busy_but_bound_it_by_what_is_most_active():
    streaming = [("dma_read", 0, 60, 0, 6e6), ("tensor", 0, 40, 1e9, 0), ("dma_write", 95, 5, 0, 1e5)]
    resident = [("dma_read", 0, 20, 0, 2e6), ("tensor", 0, 40, 1e9, 0), ("dma_write", 95, 5, 0, 1e5)]
    waits = {"tensor_waited_ns": [40 * US]}
    assert layer_table(built([("m", "mlp", streaming)], stats=waits))[0].bound == "memory"
    assert layer_table(built([("m", "mlp", resident)], stats=waits))[0].bound == "tensor"
    assert layer_table(built([("m", "mlp", resident)]))[0].bound == "latency"  # nothing occupied half the time


def test_tensore_semaphore_waits_are_found_above_fifteen_percent():
    events = [("tensor", 0, 75, 1e10, 0), ("dma_write", 95, 5, 0, 1e5)]
    found = insights(built([("m", "mlp", events)], stats={"tensor_waited_ns": [20 * US]}))
    assert [i.text for i in found if i.key == "semaphore_wait"] == [
        "TensorE waits on its semaphores 20% of the time (m): compiled code synchronises every matmul instruction "
        "with its operands' DMA and the PSUM evacuation; fewer, wider instructions (a larger batch) or an NKI "
        "kernel pipeline the wait away."]
    assert "semaphore_wait" not in keys(built([("m", "mlp", events)], stats={"tensor_waited_ns": [10 * US]}))


def test_a_decoders_semaphore_waits_point_at_the_nxd_kernels_it_has_not_enabled():
    events = [("tensor", 0, 75, 1e10, 0), ("dma_write", 95, 5, 0, 1e5)]

    def text(**meta):
        decode = {"new_tokens": 2, "prefill_ns": 50 * US, "per_token_ns": 50 * US}
        found = insights(built([("m", "mlp", events)], stats={"tensor_waited_ns": [20 * US]}, **decode, **meta))
        return next(i.text for i in found if i.key == "semaphore_wait")

    assert text(mode="decode", config={"nki_kernels": []}).endswith(
        "or an NKI kernel (NxD Inference's --qkv-kernel-enabled and --mlp-kernel-enabled) pipeline the wait away.")
    assert "(NxD Inference's --mlp-kernel-enabled)" in text(mode="decode", config={"nki_kernels": ["qkv"]})
    assert text(mode="decode", config={"nki_kernels": ["qkv", "mlp"]}).endswith(
        "or an NKI kernel pipeline the wait away.")


def test_tensore_throttling_is_found_above_five_percent():
    events = [("tensor", 0, 100, 1e10, 0)]
    assert "throttled" in keys(built([("m", "mlp", events)], stats={"tensor_throttled_ns": [10 * US]}))
    assert "throttled" not in keys(built([("m", "mlp", events)], stats={"tensor_throttled_ns": [2 * US]}))


def test_psum_evacuation_stalls_are_found():
    stalled = built([("m", "mlp", [("tensor", 0, 40, 1e9, 0), ("scalar", 0, 90, 0, 0)])])
    flowing = built([("m", "mlp", [("tensor", 0, 90, 1e9, 0), ("scalar", 0, 40, 0, 0)])])
    assert "psum_evacuation" in keys(stalled) and "psum_evacuation" not in keys(flowing)


def test_another_generation_that_runs_a_layer_much_faster_is_explained():
    slow = built([("mlp", "mlp", [("dma_read", 0, 300, 0, 3e7), ("tensor", 0, 30, 1e9, 0)])], chip="inf2")
    fast = built([("mlp", "mlp", [("dma_read", 0, 100, 0, 3e7), ("tensor", 0, 30, 1e9, 0)])], chip="trn2")
    same = built([("mlp", "mlp", [("dma_read", 0, 280, 0, 3e7), ("tensor", 0, 30, 1e9, 0)])], chip="trn2")
    found = [i for i in insights(slow, [fast]) if i.key == "comparison"]
    assert len(found) == 1 and found[0].text.startswith("On trn2 mlp is 3.0x faster: it is memory-bound here")
    assert "GB/s of HBM" in found[0].text and found[0].layers == ("mlp",)
    assert "comparison" not in keys(slow, [same])


def test_a_faster_layer_is_never_explained_by_a_peak_that_is_lower_there():
    # inf2 draws more of its memory than trn1 per core, yet the slow run is trn1's: the reason is
    # not its peak but the bytes the layer moves
    slow = built([("mlp", "mlp", [("dma_read", 0, 300, 0, 6e7), ("tensor", 0, 30, 1e9, 0)])], chip="trn2")
    fast = built([("mlp", "mlp", [("dma_read", 0, 100, 0, 2e7), ("tensor", 0, 30, 1e9, 0)])], chip="inf2")
    found = next(i for i in insights(slow, [fast]) if i.key == "comparison")
    assert "GB/s of HBM" not in found.text  # inf2's memory is slower than trn2's: no "because" from it
    assert found.text.endswith("it is memory-bound here and moves 60.0 MB of device memory against 20.0 MB there.")
    # nor from anything, when neither the peak nor the work says why
    same_work = built([("mlp", "mlp", [("dma_read", 0, 100, 0, 6e7), ("tensor", 0, 30, 1e9, 0)])], chip="inf2")
    found = next(i for i in insights(slow, [same_work]) if i.key == "comparison")
    assert found.text.endswith("it is memory-bound here, memory-bound there.")


def test_insights_count_the_models_layers_once_whatever_their_executions():
    trace = simulate(RunConfig(model="gpt2", chip="inf2", mode="decode", seq=128, new_tokens=16))
    layers = layer_table(trace)
    memory = [s for s in layers if s.bound == "memory"]
    found = next(i for i in insights(trace) if i.key == "memory_bound")
    distinct = {s.name.split("/")[0].split(" #")[0] + "/" + s.name.split("/", 1)[1] for s in memory}
    assert len(memory) > 5 * len(distinct)  # the token steps stored and the prompt's pass
    assert found.text.startswith(f"{len(distinct)} layers are memory-bound")
    assert "#" not in found.text and "(s)" not in found.text  # the names are the model's, each once


@pytest.mark.parametrize("batch, attention, remedies", [
    (1, None, "smaller tiles or a fused (flash) attention keep them on chip"),
    (4, None, "smaller tiles, a smaller batch or a fused (flash) attention keep them on chip"),
    (4, "flash", "smaller tiles or a smaller batch keep them on chip"),
])
def test_a_spill_suggests_only_what_the_run_can_still_change(batch, attention, remedies):
    events = [("dma_read", 0, 40, 0, 4e6), ("tensor", 0, 90, 1e10, 0)]
    trace = built([("attn", "attention", events)], stats={"spill_reload_bytes": [2e6]}, batch=batch,
                  config={"attention": attention})
    assert next(i for i in insights(trace) if i.key == "spill").text.endswith(remedies + ".")


def test_an_insight_points_at_its_layers_on_the_timeline():
    trace = built([("a", "mlp", [("tensor", 0, 100, 1e10, 0)]),
                   ("b", "mlp", [("dma_read", 100, 100, 0, 9e6), ("tensor", 110, 10, 1e8, 0)])])
    found = next(i for i in insights(trace) if i.key == "memory_bound")
    assert found.layers == ("b",) and (found.start_us, found.end_us) == (pytest.approx(100), pytest.approx(200))


def test_a_pipelined_steps_bubble_is_an_insight_pointing_at_its_wait():
    kw = dict(model="gpt2", instance="trn1.32xlarge", mode="training", batch=1, seq=512, cores=8, grad_accum=4)
    trace = simulate(RunConfig(pipeline=4, **kw))
    bubble = next(p for p in trace.meta["phases"] if p["name"] == "pipeline bubble")
    idle, step = bubble["end_ns"] - bubble["start_ns"], trace.meta["total_ns"]
    # 4 stages, 4 micro-batches: the slowest stage idles for 3 micro-batches of 7
    assert idle / step == pytest.approx(3 / 7, rel=0.1)
    found = next(i for i in insights(trace) if i.key == "pipeline_bubble")
    assert found.text.startswith(f"Pipeline bubble: each step the slowest stage waits {idle * 1e-6:,.1f} ms "
                                 f"({100 * idle / step:.1f}% of the step)")
    assert (found.start_us, found.end_us) == (bubble["start_ns"] / 1e3, bubble["end_ns"] / 1e3)
    assert trace.run_end_ns == bubble["end_ns"] == step  # the time axis runs to the bubble's end
    assert "pipeline_bubble" not in keys(simulate(RunConfig(**kw)))


def test_the_host_generate_loop_is_a_layer_of_its_own_and_an_insight():
    # T5 generating: after each decoder step the core idles until transformers' generate loop calls
    # the next. That wait is a host layer after the step (the LM head, the step's last layer, ends
    # with its work), and the host's costs are an insight of their own
    from sim.analysis import analyse

    cfg = dict(model="t5-3b", instance="inf2.24xlarge", mode="decode", seq=128, new_tokens=4, cores=8, dtype="fp32",
               autocast="matmult", beams=4, max_seq=128)
    trace = simulate(RunConfig(**cfg))
    eff = get_chip("inf2").efficiency
    host = eff.generate_step_s * 1e9
    analysis = analyse(trace)
    loops = [s for s in analysis.layers if s.kind == HOST and s.name.endswith(GENERATE_LOOP)]
    assert len(loops) == 4 and all(s.time_ns == pytest.approx(host) for s in loops)  # after each of the 4 tokens
    assert all(s.bound == "host" for s in loops)
    assert analysis.total_ns == pytest.approx(trace.meta["total_ns"], rel=1e-6)  # the layers: the whole run
    ev = trace.events
    for s in analysis.layers:
        if s.name.endswith("lm_head"):
            mine = ev["layer"] == trace.layer_names.index(s.name)
            assert s.time_ns < host  # its own work only (about 0.3 ms), not the wait after it
            assert s.time_ns == pytest.approx(float(np.max(ev["start_ns"][mine] + ev["dur_ns"][mine]))
                                              - float(np.min(ev["start_ns"][mine])), rel=0.05)
    found = next(i for i in insights(trace) if i.key == "host")
    share = 4 * host / trace.meta["total_ns"]  # transformers' generate runs in process: no request handling
    assert found.text == (f"The host takes {100 * share:.0f}% of the time (generate loop {4 * host * 1e-6:,.2f} ms), "
                          "while the NeuronCores wait: whatever the model does on the device, this is paid every "
                          "request.")
    assert found.end_us == pytest.approx(trace.meta["total_ns"] / 1e3)
    assert len(found.layers) == 4


# --- the report command --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo_file(tmp_path_factory):
    from sim.io import save_file

    path = tmp_path_factory.mktemp("report") / "demo.nvtrace"
    save_file(str(path), [simulate(RunConfig(model="bert-large", chip=c)) for c in ("inf1", "trn2")])
    return path


def test_report_json_has_the_summary_layers_and_insights(demo_file, capsys):
    assert main(["report", str(demo_file), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [r["chip"] for r in runs] == ["inf1", "trn2"]
    layer = runs[0]["layers"][1]
    assert set(layer) >= {"name", "time_us", "flops", "bytes", "arithmetic_intensity", "bound", "mfu", "mbu"}
    assert layer["arithmetic_intensity"] == pytest.approx(layer["flops"] / layer["bytes"])
    insight = runs[0]["insights"][0]
    assert set(insight) == {"severity", "text", "layers", "start_us", "end_us"}
    assert any(i["text"].startswith("On trn2") for i in runs[0]["insights"])
    assert runs[1]["summary"]["mfu_estimated_percent"] > runs[0]["summary"]["mfu_estimated_percent"]


def test_report_csv_writes_every_runs_layers_with_a_run_column(demo_file, tmp_path, capsys):
    out = tmp_path / "layers.csv"
    assert main(["report", str(demo_file), "--csv", "-o", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0].startswith("run,chip,instance,name,time_us")
    # bert-large's 50 layers, and the host copying its inputs in and its logits out
    assert len(lines) == 1 + 2 * 52 and lines[1].startswith("1,inf1,") and lines[-1].startswith("2,trn2,")
    assert main(["report", str(demo_file), "--csv"]) == 2
    assert "give it with -o FILE" in capsys.readouterr().err


def test_report_text_and_a_bad_file(demo_file, tmp_path, capsys):
    assert main(["report", str(demo_file)]) == 0
    text = capsys.readouterr().out
    assert "run 2: trn2" in text and "mfu_estimated_percent" in text and "slowest layers (15 of 52)" in text
    bad = tmp_path / "bad.nvtrace"
    bad.write_bytes(b"PK\x03\x04 truncated")
    assert main(["report", str(bad)]) == 2
    assert capsys.readouterr().err.startswith("neuronviz: error: ")


def test_report_text_sums_a_layer_over_the_steps_of_its_phase(tmp_path, capsys):
    from sim.io import save_file

    path = tmp_path / "decode.nvtrace"
    save_file(str(path), [simulate(RunConfig(model="gpt2", chip="inf2", mode="decode", seq=128, new_tokens=6))])
    assert main(["report", str(path), "--json"]) == 0
    layers = json.loads(capsys.readouterr().out)["runs"][0]["layers"]
    steps = [r for r in layers if r["name"].startswith("decode ctx") and r["name"].endswith("/layer3.mlp")]
    assert len(steps) == 5  # the 5 token steps after the prompt's
    assert main(["report", str(path)]) == 0
    text = capsys.readouterr().out
    assert "summed over its phase's steps" in text
    phase = steps[0]["name"].split(" #")[0]  # "decode ctx 134 #1/layer3.mlp": the phase without its step
    row = next(line.split() for line in text.splitlines() if f" {phase}/layer3.mlp " in f" {line.strip()} ")
    assert float(row[3].replace(",", "")) == pytest.approx(sum(r["time_us"] for r in steps), abs=0.1)


def test_a_chrome_trace_without_a_chip_reports_times_only(tmp_path, capsys):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [
        {"name": "matmul", "ph": "X", "ts": 0, "dur": 10, "pid": 1, "tid": 1},
        {"name": "add", "ph": "X", "ts": 10, "dur": 5, "pid": 1, "tid": 1}]}))
    assert main(["report", str(path), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert run["summary"]["mfu_estimated_percent"] is None

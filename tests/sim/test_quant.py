"""Quantized and sparse weights: what they store, what the engines do with them, where they run."""

import numpy as np
import pytest

from sim.errors import ConfigError, DoesNotFitError
from sim.hardware.chip import get_chip
from sim.hardware.instances import default_instance, get_instance
from sim.lowering import EVAC, SCALAR, TENSOR, VECTOR, CoreContext, lower
from sim.metrics import compute_metrics
from sim.quant import dense, precision
from sim.run import RunConfig, simulate
from sim.workloads import Phase, build_program, get_model


def _precision(chip, quant=None, scales="channel", sparsity=None, base=("bf16", 2)):
    return precision(get_chip(chip), dense(*base), quant, scales, sparsity)


def test_stored_bits_per_weight_count_scales_and_sparse_indices():
    assert _precision("trn3", "mxfp4").weight_bits == 4 + 8 / 32  # one 8-bit scale per group of 32
    assert _precision("trn3", "mxfp8").weight_bits == 8 + 8 / 32
    assert _precision("inf2", "int8-weights").weight_bits == 8
    assert _precision("trn2", sparsity="2:4").weight_bits == (16 + 2) / 2  # half the values, a 2-bit index each
    assert _precision("trn2", "fp8", sparsity="4:16").weight_bits == (8 + 4) / 4


def test_sparse_matmuls_run_up_to_n_over_m_times_the_bf16_rate():
    assert _precision("trn2", sparsity="2:4").sparse_speedup == 2.0
    assert _precision("trn2", sparsity="4:16").sparse_speedup == 4.0
    # FP8's double-row mode does not combine with sparsity: 2:4 on the BF16 path barely beats dense FP8
    fp8 = get_chip("trn2").tensor.rate["fp8"]
    assert _precision("trn2", "fp8", sparsity="2:4").sparse_speedup == pytest.approx(2.0 / fp8)


def _weight_matmul(chip, **kw):
    """The lowered first weight matmul of bert-large (hidden 1024) on ``chip`` at batch 8 x 512."""
    c = get_chip(chip)
    prog = build_program(get_model("bert-large"), Phase(8, 512, 512), 2)
    op = next(o for o in prog.ops if o.weights and o.k == 1024)
    ctx = CoreContext(c, "bf16", "bf16", 1, 1, 1, get_instance(default_instance(c).name).topology,
                      precision=_precision(chip, **kw))
    return {st.resource: st for st in lower(ctx, op).compute}


def test_fp8_mx_and_sparse_matmuls_take_the_array_their_rate_says():
    rate2, rate3 = get_chip("trn2").tensor.rate, get_chip("trn3").tensor.rate

    def ratio(chip, **kw):
        return _weight_matmul(chip, **kw)[TENSOR].dur_s / _weight_matmul(chip)[TENSOR].dur_s

    assert ratio("trn2", quant="fp8") == pytest.approx(1 / rate2["fp8"])  # double-row: K=256 an instruction
    assert ratio("trn3", quant="mxfp4") == pytest.approx(1 / rate3["mxfp4"])  # MX: K=512
    assert ratio("trn2", sparsity="2:4") == pytest.approx(0.5)
    assert ratio("trn2", sparsity="4:16") == pytest.approx(0.25)
    assert ratio("trn2", quant="int8-weights") == pytest.approx(1.0)  # dequantized, multiplied in BF16
    # and whole runs follow: the weight matmuls dominate a prefill's array time
    def busy(chip, **kw):
        trace = simulate(RunConfig(model="bert-large", chip=chip, batch=8, seq=512, **kw), max_events=0)
        return trace.run_busy_ns(trace.track_index("tensor"))

    assert busy("trn3", quant="mxfp4") < 0.5 * busy("trn3")


def _prefill(chip, **kw):
    return simulate(RunConfig(model="bert-base", chip=chip, batch=8, seq=512, **kw), max_events=0)


def test_quantization_work_lands_on_vector_engine():
    def vector(trace):
        return trace.run_busy_ns(trace.track_index("vector"))

    # per weight matmul: VectorE's own stage ahead of the array, the evacuation then on ScalarE
    stages = _weight_matmul("trn2", quant="int8-weights")
    assert VECTOR in stages and SCALAR in stages and EVAC not in stages
    assert VECTOR not in _weight_matmul("trn2")

    base = _prefill("trn2")
    tensor_scales = _prefill("trn2", quant="fp8", quant_scales="tensor")
    channel_scales = _prefill("trn2", quant="fp8", quant_scales="channel")
    # per-tensor: one pass quantizing each matmul's input; per-channel: each row's maximum too, and
    # the outputs scaled by their channel's scale
    assert vector(base) < vector(tensor_scales) < vector(channel_scales)
    weight_only = _prefill("trn2", quant="int8-weights")
    assert vector(weight_only) > vector(base)  # every weight cast before its matmul


def test_quantized_weights_halve_what_a_decode_step_reads_and_fit_where_bf16_does_not():
    cfg = dict(model="llama-3-8b", instance="inf2.xlarge", mode="decode", seq=128, new_tokens=2, cores=2)
    bf16 = compute_metrics(simulate(RunConfig(**cfg), max_events=0))
    int8 = compute_metrics(simulate(RunConfig(**cfg, quant="int8-weights"), max_events=0))
    assert int8.hbm_read_bytes == pytest.approx(bf16.hbm_read_bytes / 2, rel=0.05)
    with pytest.raises(DoesNotFitError, match="does not fit"):
        simulate(RunConfig(**{**cfg, "cores": 1}), max_events=0)
    one_core = simulate(RunConfig(**{**cfg, "cores": 1}, quant="int8-weights"), max_events=0)
    assert one_core.meta["cores_per_copy"] == 1 and one_core.meta["precision"]["weight_bits"] == 8


@pytest.mark.parametrize("chip, kw, message", [
    ("trn2", dict(quant="mxfp4"), "Trainium2 has no MX matmuls"),
    ("trn3", dict(quant="fp8"), "multiplies MXFP8 and MXFP4"),
    ("inf1", dict(quant="fp8"), "Inferentia1 has no FP8 matmuls"),
    ("trn1", dict(sparsity="2:4"), "Trainium1 has no structured sparsity"),
    ("trn2", dict(sparsity="3:5"), "takes the sparsity patterns 4:16, 4:12"),
    ("trn2", dict(sparsity="4:2"), "needs 0 < M < N"),
    ("trn3", dict(quant="mxfp8", sparsity="2:4"), "MX matmuls do not combine with structured sparsity"),
    ("trn2", dict(quant="int4"), "unknown quantization 'int4'"),
    ("trn2", dict(quant="fp8", quant_scales="block"), "unknown quantization scales 'block'"),
    ("trn2", dict(quant="fp8", mode="training"), "are for inference"),
])
def test_formats_a_chip_lacks_are_refused(chip, kw, message):
    with pytest.raises(ConfigError, match=message):
        simulate(RunConfig(**{"model": "bert-base", "chip": chip, **kw}), max_events=0)


def test_an_fp8_kv_cache_halves_what_attention_reads_and_holds_and_is_cast_on_vector_engine():
    cfg = dict(model="llama-3-8b", chip="trn2", mode="decode", batch=8, seq=2000, new_tokens=2, cores=4)
    base, fp8 = (simulate(RunConfig(**cfg, kv_cache=kv)) for kv in (None, "fp8"))

    def attention_reads(trace):
        ev, dma = trace.events, trace.track_index("dma_read")
        names = np.array(trace.op_names)[ev["op"]]
        decode = np.array([trace.layer_names[la].startswith("decode") for la in ev["layer"]])
        sel = (ev["track"] == dma) & np.isin(names, ["scores", "context"]) & decode
        return ev["bytes"][sel].sum()

    assert attention_reads(fp8) == pytest.approx(attention_reads(base) / 2, rel=1e-6)
    kv_bytes = get_model("llama-3-8b").kv_cache_elems(2002) * 8 * 2 / 2  # bf16 cache, halved
    assert base.meta["memory_per_core_bytes"] - fp8.meta["memory_per_core_bytes"] == pytest.approx(kv_bytes / 8)
    assert fp8.run_busy_ns(fp8.track_index("vector")) > base.run_busy_ns(base.track_index("vector"))
    with pytest.raises(ConfigError, match="a quantized KV cache is for decode and serve modes"):
        simulate(RunConfig(model="bert-base", chip="trn2", kv_cache="fp8"), max_events=0)

"""T5 (an encoder-decoder) generating as the Neuron T5 tutorial runs it: the encoder's pass over
the prompt, then one decoder step per token, beam search reordering the caches every step."""

import json

import numpy as np
import pytest

from sim.errors import ConfigError
from sim.hardware.chip import get_chip
from sim.host import GENERATE_LOOP, HOST, REQUEST_HANDLING
from sim.metrics import compute_metrics
from sim.record import run_record
from sim.run import RunConfig, simulate
from sim.workloads import Phase, build_program, get_model, parameters

# transformers' parameter counts (model.num_parameters()) less the RMS norms' weights, which the
# simulator leaves to the vector engine: t5-3b 2,851,598,336 with 122 norms of 1,024 (two a block
# in the encoder's 24, three in the decoder's 24, one after each stack); flan-t5-xl 2,849,757,184
# with 122 of 2,048
T5_3B = 2_851_598_336 - 122 * 1024
FLAN_T5_XL = 2_849_757_184 - 122 * 2048


def test_t5_parameters_are_transformers_counts_less_the_norms():
    assert parameters(get_model("t5-3b")) == T5_3B
    assert parameters(get_model("flan-t5-xl")) == FLAN_T5_XL


def test_t5_blocks_have_their_own_head_width_and_mlp():
    t5, flan = get_model("t5-3b"), get_model("flan-t5-xl")
    assert (t5.hidden, t5.heads * t5.head_dim, t5.act, t5.gated_mlp, t5.tied_embeddings) == (1024, 4096, "relu",
                                                                                              False, True)
    assert (flan.hidden, flan.heads * flan.head_dim, flan.act, flan.gated_mlp, flan.tied_embeddings) == (
        2048, 2048, "gelu_new", True, False)
    step = build_program(t5, Phase(1, 1, 128, decode_step=True, encoder_positions=128), 4)
    shapes = {op.name: (op.k, op.n) for op in step.ops if op.name in ("qkv", "q", "out_proj", "up", "down")}
    # a decoder block: self-attention's q, k and v at once, cross-attention's q alone (its keys and
    # values were cached by the encoder's pass), each 32 heads of 128; the ReLU MLP of 16,384
    assert shapes == {"qkv": (1024, 3 * 4096), "q": (1024, 4096), "out_proj": (4096, 1024), "up": (1024, 16384),
                      "down": (16384, 1024)}


def _run(max_events=0, **kw):
    cfg = dict(model="t5-3b", instance="inf2.24xlarge", mode="decode", seq=128, new_tokens=84, cores=8, dtype="fp32",
               autocast="matmult", attention="compiler", beams=4, max_seq=128)
    return simulate(RunConfig(**{**cfg, **kw}), max_events=max_events)


def test_the_tutorials_tensor_parallel_layers_are_the_decoders_alone():
    spec = get_model("t5-3b")
    encoder = build_program(spec, Phase(1, 128, 128, tp=8, beams=4, decoder_positions=128), 4)
    qkv = [op for op in encoder.ops if op.name == "qkv"]
    assert len(qkv) == 24 and {op.n for op in qkv} == {3 * 4096}  # the encoder whole on every core
    cross = [op for op in encoder.ops if op.name.startswith("cross_kv")]
    # each decoder block's cross-attention keys and values, its 4 of the 32 heads, of the prompt
    # repeated for the 4 beams
    assert len(cross) == 24 and {(op.m, op.k, op.n) for op in cross} == {(4 * 128, 1024, 2 * 4 * 128)}
    step = build_program(spec, Phase(1, 1, 128, tp=8, decode_step=True, beams=4, encoder_positions=128), 4)
    assert {op.n for op in step.ops if op.name == "qkv"} == {3 * 512}
    lm_head = next(op for op in step.ops if op.name == "lm_head")
    assert (lm_head.m, lm_head.k, lm_head.n) == (4, 1024, 32128)  # the LM head whole on every core, 4 beams


def test_beam_search_reads_and_writes_every_cache_each_step():
    spec = get_model("t5-3b")

    def cache_ops(beams):
        step = build_program(spec, Phase(1, 1, 128, tp=8, decode_step=True, beams=beams, encoder_positions=128), 4)
        return {op.name: op for op in step.ops if op.name in ("cache_read", "cache_write")}

    # 24 blocks x (self + cross) x (keys + values) of [4 beams, 4 heads, 128 positions, 128] in FP32
    reorder = 24 * 2 * 2 * 4 * 4 * 128 * 128 * 4
    ops = cache_ops(4)
    assert ops["cache_read"].hbm_elems * 4 == reorder == 100_663_296
    assert ops["cache_write"].hbm_write_elems * 4 == reorder
    assert cache_ops(1) == {}  # greedy decoding keeps its one hypothesis in place


def test_a_generation_is_the_encoders_pass_then_a_decoder_step_per_token():
    trace = _run()
    phases = [(p["name"], p["repeat"]) for p in trace.meta["phases"]]
    # transformers' generate runs in process: no server handles the request before the encoder's pass
    assert phases == [("prefill encoder", 1), ("prefill first token", 1), ("decode ctx 128", 83)]
    met = compute_metrics(trace)
    p = {x["name"]: x for x in trace.meta["phases"]}
    encoder_s = (p["prefill encoder"]["end_ns"] - p["prefill encoder"]["start_ns"]) * 1e-9
    step_s = (p["prefill first token"]["end_ns"] - p["prefill first token"]["start_ns"]) * 1e-9
    assert met.time_to_first_token_s == pytest.approx(encoder_s + step_s, rel=1e-6)
    assert met.per_token_s == pytest.approx(step_s, rel=1e-3)  # every step the same graph of 128 positions
    assert met.latency_s == pytest.approx(encoder_s + 84 * step_s, rel=1e-3)
    # beam search's reordering of the caches costs every step what reading them takes
    assert compute_metrics(_run(beams=1)).per_token_s < met.per_token_s


def test_the_core_waits_for_the_host_generate_loop_after_every_decoder_step():
    # transformers' generate loop runs on the host between two decoder calls: the core idles
    # generate_step_s after each step, the first (part of the time to first token) included, and
    # the host track draws it there
    host = get_chip("inf2").efficiency.generate_step_s
    assert host > 0
    trace = _run(new_tokens=3, beams=1, max_events=1_000_000)
    ev = trace.events
    ends = ev["start_ns"] + ev["dur_ns"]
    spans = {p["name"]: p for p in trace.meta["phases"]}
    encoder, first, rest = spans["prefill encoder"], spans["prefill first token"], spans["decode ctx 128"]
    assert first["start_ns"] == pytest.approx(encoder["end_ns"])  # the encoder's pass: no wait after it
    for span, steps in ((first, 1), (rest, 2)):
        inside = (ev["start_ns"] >= span["start_ns"]) & (ev["start_ns"] < span["end_ns"])
        busy_until = ends[inside].max()
        step = (span["end_ns"] - span["start_ns"]) / steps
        device = inside & (ev["track"] != trace.track_index(HOST))
        assert span["end_ns"] - ends[device].max() == pytest.approx(host * 1e9, rel=1e-3)  # the last step's wait
        assert busy_until == pytest.approx(span["end_ns"])  # drawn: the generate loop ends the step
        assert step > host * 1e9
    loops = np.asarray(trace.op_names, dtype=object)[ev["op"]] == GENERATE_LOOP
    assert np.allclose(ev["dur_ns"][loops], host * 1e9) and loops.sum() == 3  # one after each decoder step
    # the wait is counted once: a token is the device's step and the host's loop
    assert compute_metrics(trace).per_token_s == pytest.approx((rest["end_ns"] - rest["start_ns"]) / 2 * 1e-9)


def test_only_an_encoder_decoder_pays_the_host_generate_loop_and_its_record_says_so():
    host_ms = get_chip("inf2").efficiency.generate_step_s * 1e3
    rec = run_record(_run(beams=1))
    assert rec["host_per_token_ms"] == pytest.approx(host_ms)
    assert rec["per_token_ms"] > host_ms
    # a decoder-only model generates through its own serving stack's loop, not transformers' generate:
    # under vLLM (the default) its host costs are the server's handling of the request, before the first token
    llama = simulate(RunConfig(model="llama-2-7b", instance="inf2.24xlarge", mode="decode", seq=128, new_tokens=8,
                               cores=8), max_events=0)
    assert GENERATE_LOOP not in llama.op_names and run_record(llama)["host_per_token_ms"] == 0.0
    assert REQUEST_HANDLING in llama.op_names
    assert run_record(llama)["host_ms"] == pytest.approx(get_chip("inf2").efficiency.server_request_s * 1e3)


def test_the_decoder_attends_the_tokens_so_far_in_buckets():
    trace = _run(max_seq=None, seq=100, new_tokens=300, beams=1)
    assert [(p["name"], p["repeat"]) for p in trace.meta["phases"]] == [
        ("prefill encoder", 1), ("prefill first token", 1), ("decode ctx 128", 127),
        ("decode ctx 256", 128), ("decode ctx 300", 44)]


@pytest.mark.parametrize("kw, message", [
    (dict(mode="inference", beams=1, max_seq=None), "t5-3b is an encoder-decoder: simulate it generating"),
    (dict(draft="llama-2-7b"), "--draft is not modelled for encoder-decoders"),
    (dict(kv_cache="fp8"), "--kv-cache is not modelled for encoder-decoders such as t5-3b"),
    (dict(new_tokens=200), "need 200 positions; the graphs are compiled for 128"),
    (dict(beams=0), "beams must be a positive integer, got 0"),
    (dict(model="llama-2-7b", cores=None), "beam search (--beams) is modelled for encoder-decoders (T5)"),
])
def test_what_an_encoder_decoder_cannot_run_is_refused_in_one_line(kw, message):
    with pytest.raises(ConfigError) as info:
        _run(**kw)
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("change, message", [
    ({"d_kv": None}, "config.json lacks d_kv for model_type 't5'"),
    ({"feed_forward_proj": "gated-"}, "feed_forward_proj must name an activation"),
    ({"num_decoder_layers": -2}, "num_decoder_layers must be a positive integer"),
])
def test_a_broken_t5_config_gives_one_line(tmp_path, change, message):
    cfg = {"model_type": "t5", "d_model": 512, "d_ff": 2048, "d_kv": 64, "num_heads": 8, "num_layers": 6,
           "vocab_size": 32128}
    cfg = {k: v for k, v in {**cfg, **change}.items() if v is not None}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(ConfigError) as info:
        get_model(str(path))
    assert message in str(info.value) and "\n" not in str(info.value)

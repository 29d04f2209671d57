"""Decode as serving stacks compile and run it: buckets, compiled batches, prompt chunks."""

import numpy as np
import pytest

from sim.config import graph_lengths
from sim.errors import ConfigError
from sim.metrics import compute_metrics
from sim.run import RunConfig, simulate


def _decode(**kw):
    base = dict(model="llama-3-8b", chip="trn2", mode="decode", batch=8, seq=1500, new_tokens=4, cores=4)
    return simulate(RunConfig(**{**base, **kw}), max_events=0)


def test_graphs_are_compiled_for_nxd_buckets_or_one_length():
    # NxD Inference: powers of two from 128 below the maximum, and the maximum itself
    assert graph_lengths(6400, True) == [128, 256, 512, 1024, 2048, 4096, 6400]
    assert graph_lengths(4096, True) == [128, 256, 512, 1024, 2048, 4096]
    assert graph_lengths(4096, False) == [4096]


def test_a_prompt_is_encoded_in_the_whole_graph_it_falls_in():
    padded = _decode(concurrency=1, max_seq=4096, bucketing=False)
    full = _decode(seq=4096 - 4, concurrency=1, max_seq=4096, bucketing=False)
    prefill = [p for p in padded.meta["phases"] if p["name"] == "prefill"]
    assert len(prefill) == 1
    # 1500 tokens in a graph compiled for 4096: the same work as a 4092-token prompt
    assert padded.meta["prefill_ns"] == pytest.approx(full.meta["prefill_ns"], rel=1e-9)
    bucketed = _decode(concurrency=1, max_seq=4096)  # the 2048 bucket holds it
    assert bucketed.meta["prefill_ns"] < 0.6 * padded.meta["prefill_ns"]


def test_a_lone_request_on_a_batch_graph_pays_for_the_padded_batch():
    one = _decode(concurrency=1, max_seq=2048)
    full = _decode(max_seq=2048)
    alone = _decode(batch=1, max_seq=2048)
    m_one, m_full, m_alone = (compute_metrics(t) for t in (one, full, alone))
    assert m_one.per_token_s == pytest.approx(m_full.per_token_s, rel=1e-9)  # every step is a batch-8 step
    assert m_one.per_token_s > m_alone.per_token_s
    assert m_one.time_to_first_token_s == pytest.approx(m_alone.time_to_first_token_s, rel=1e-9)  # prompt alone
    assert m_one.throughput_per_s == pytest.approx(m_full.throughput_per_s / 8)  # padding serves nobody


def test_a_chunk_scores_the_whole_compiled_cache_and_its_own_keys():
    # optimum-neuron's chunked prefill: one graph for every chunk, the token-generation attention
    # (compute_for_token_gen) in the compiler's ops over all 4096 cached positions, masked, and
    # the chunk's own 1024 keys
    trace = _decode(concurrency=1, max_seq=4096, prefill_chunk=1024)
    phases = [(p["name"], p["repeat"]) for p in trace.meta["phases"]]
    assert phases[:2] == [("request", 1), ("prefill chunk 1", 2)] and phases[2][0].startswith("decode")  # run twice
    # a logical core's 8 query heads in 2 groups of 4 sharing a KV head, 128 wide, 1024 queries
    # each, half of it on each of its 2 physical cores (trn2's LNC=2)
    expected = 2 * (1024 * 4) * 128 * (4096 + 1024) * 2 / 2
    assert _op_flops(trace, "prefill chunk 1/layer0.attention", "scores") == pytest.approx(expected)
    # the first chunk reads the whole cache too, positions nothing has written yet included
    assert "scores" in _dma_read_ops(trace, "prefill chunk 1/layer0.attention")


def test_a_chunk_in_a_flash_kernel_meets_the_chunks_before_it():
    trace = _decode(concurrency=1, max_seq=4096, prefill_chunk=1024, attention="flash")
    assert [p["name"] for p in trace.meta["phases"]][:3] == ["request", "prefill chunk 1", "prefill chunk 2"]
    ops = _dma_read_ops(trace, "prefill chunk 2/layer0.attention")
    assert "scores" in ops and "context" in ops  # the first chunk's cache, read back
    assert "scores" not in _dma_read_ops(trace, "prefill chunk 1/layer0.attention")
    assert _op_flops(trace, "prefill chunk 2/layer0.attention", "scores") < 2 * (1024 * 4) * 128 * 2048 * 2 / 2


def _dma_read_ops(trace, layer: str) -> list[str]:
    dma, i = trace.track_index("dma_read"), trace.layer_names.index(layer)
    e = trace.events
    return [trace.op_names[o] for o, t, la in zip(e["op"], e["track"], e["layer"], strict=True) if t == dma and la == i]


def _op_flops(trace, layer: str, op: str) -> float:
    e, i = trace.events, trace.layer_names.index(layer)
    named = [k for k, name in enumerate(trace.op_names) if name == op]
    return float(e["flops"][(e["layer"] == i) & np.isin(e["op"], named)].sum())


def test_a_prompt_is_encoded_in_the_shortest_context_encoding_bucket_given_that_holds_it():
    # NxD Inference's --context-encoding-buckets: a 1500-token prompt pads to 1536, not to the
    # automatic buckets' 2048; every op of the prompt's graph works on 1536 positions instead
    given = _decode(batch=1, context_buckets=(1024, 1536, 4096), max_seq=4096)
    auto = _decode(batch=1, max_seq=4096)
    layer = "prefill/layer0.mlp"
    assert _layer_flops(given, layer) / _layer_flops(auto, layer) == pytest.approx(1536 / 2048, rel=1e-12)


def test_token_steps_run_in_the_token_generation_buckets_given():
    # contexts 1501..1503 of a 1500-token prompt and 4 new tokens: the 1502 bucket, then 4096
    trace = simulate(RunConfig(model="llama-3-8b", chip="trn2", mode="decode", batch=1, seq=1500, new_tokens=4,
                               cores=4, token_buckets=(1502, 4096)))
    steps = [(p["name"], p["repeat"]) for p in trace.meta["phases"] if p["name"].startswith("decode")]
    assert steps == [("decode ctx 1502", 2), ("decode ctx 4096", 1)]
    assert trace.meta["config"]["token_buckets"] == [1502, 4096]


def _layer_flops(trace, name: str) -> float:
    i = trace.layer_names.index(name)
    return float(trace.events["flops"][trace.events["layer"] == i].sum())


@pytest.mark.parametrize("kw, message", [
    (dict(concurrency=9), "cannot run on a graph compiled for batch 8"),
    (dict(max_seq=1000), "the graphs are compiled for 1000"),
    (dict(prefill_chunk=-1), "prefill chunk must be a whole number"),
    (dict(mode="inference", concurrency=1), "are for decode and serve modes"),
    (dict(context_buckets=(512, 1024)), "a prompt of 1500 tokens fits no context-encoding bucket: the largest is 1024"),
    (dict(token_buckets=(1024, 1503)), "need 1504 positions: the largest token-generation bucket is 1503"),
    (dict(context_buckets=(2048,), bucketing=False, max_seq=2048), "exclude each other"),
    (dict(context_buckets=(4096,), max_seq=2048), "bucket of 4096 positions is longer than the compiled"),
    (dict(token_buckets=(0, 2048)), "must be positive whole numbers of positions"),
    (dict(context_buckets=2048), "must be positive whole numbers of positions, got 2048"),
    (dict(mode="inference", token_buckets=(2048,)), "are for decode and serve modes"),
])
def test_impossible_serving_setups_are_refused(kw, message):
    with pytest.raises(ConfigError, match=message):
        _decode(**kw)


def test_a_run_of_one_new_token_has_no_time_per_token():
    """The prompt's pass makes the only token: a request a latency on each copy, and no decode rate."""
    trace = simulate(RunConfig(model="gpt2", chip="trn2", mode="decode", seq=128, new_tokens=1))
    met = compute_metrics(trace)
    assert (met.per_token_s, met.per_token_under_load_s) == (None, None)
    assert met.latency_s == pytest.approx(met.time_to_first_token_s)
    assert met.throughput_per_s == pytest.approx(trace.meta["copies"] / met.latency_under_load_s)

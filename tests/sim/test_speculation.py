"""Speculative decoding as the stacks run it: acceptance an input (stated as vLLM reports it, or the
published default), a draft model's decode steps or an EAGLE head's passes, fused into the model's
graph by NxD Inference or in graphs of their own."""

import numpy as np
import pytest

from sim.config import RunConfig, config_from_record
from sim.description import describe
from sim.errors import ConfigError
from sim.hardware.chip import get_chip
from sim.memory_plan import memory_need
from sim.metrics import compute_metrics
from sim.run import simulate
from sim.serve import accepted_tokens
from sim.speculation import speculation, tokens_per_step
from sim.workloads import Phase, get_model
from sim.workloads.speculation import DRAFT_MODEL, EAGLE, EAGLE3, drafter, drafter_parameters, step_graphs

# vLLM Neuron's EAGLE3 tutorial for Llama-3.1-8B (vllm bench serve's Speculative Decoding block):
# 1,976 drafts of 3 tokens, 4,395 accepted; per position 86.49, 72.47, 63.46%
TUTORIAL_RATES = (0.8649, 0.7247, 0.6346)
DRAFTS, ACCEPTED = 1976, 4395


def _spec(**kw):
    base = dict(model="qwen3-32b", instance="trn2.48xlarge", cores=16, mode="decode", seq=128, new_tokens=65,
                draft="qwen3-0.6b", spec_k=4, spec_acceptance=(0.7,))
    return RunConfig(**{**base, **kw})


def _eagle3(**kw):
    base = dict(model="llama-3.1-8b", instance="trn2.48xlarge", cores=8, mode="decode", batch=2, seq=512,
                new_tokens=128, max_seq=2048, spec_method="eagle3", spec_k=3)
    return RunConfig(**{**base, **kw})


# --- acceptance ----------------------------------------------------------------------------------

def test_per_position_rates_are_cumulative_and_give_the_tutorials_acceptance_length():
    """vLLM counts, at each position, the drafts whose tokens up to it were all accepted: the
    three rates sum to the accepted tokens over the drafts, and a step yields one more."""
    assert sum(TUTORIAL_RATES) * DRAFTS == pytest.approx(ACCEPTED, abs=1)
    assert tokens_per_step(_eagle3(spec_acceptance=TUTORIAL_RATES)) == pytest.approx(1 + ACCEPTED / DRAFTS,
                                                                                     abs=1e-4)  # 3.22


def test_a_mean_rate_accepts_its_share_of_every_steps_drafts():
    """The tutorial's 74.14% (4,395 of 5,928 draft tokens) over 3 positions is 2.224 accepted a step,
    as a constant conditional rate c whose c, c^2, c^3 average it; GPT-OSS-120B's one draft token
    at 69.00% (1,566 of 2,270) is a step of 1.69."""
    rate = ACCEPTED / (3 * DRAFTS)
    spec = speculation(_eagle3(spec_acceptance=(rate,)))
    c = spec.acceptance[0]
    assert spec.acceptance == pytest.approx((c, c * c, c ** 3))
    assert spec.tokens_per_step == pytest.approx(1 + ACCEPTED / DRAFTS, rel=1e-9)
    one = _eagle3(model="gpt-oss-120b", cores=16, spec_k=1, spec_acceptance=(1566 / 2270,))
    assert tokens_per_step(one) == pytest.approx(1 + 1566 / 2270)


def test_positions_past_the_last_rate_keep_its_conditional_rate():
    # 80% reach the second position, 60% pass it: 3 of 4 that reach it; the third and fourth keep 3/4
    spec = speculation(_spec(spec_k=4, spec_acceptance=(0.8, 0.6)))
    assert spec.acceptance == pytest.approx((0.8, 0.6, 0.45, 0.3375))
    assert spec.tokens_per_step == pytest.approx(1 + 0.8 + 0.6 + 0.45 + 0.3375)


def test_an_older_files_acceptance_keeps_its_meaning():
    """Before, each of k draft tokens was accepted with probability p while the ones before it
    were: cumulative rates p^i, (1 - p^(k+1)) / (1 - p) tokens a step."""
    cfg = config_from_record({"model": "qwen3-32b", "draft": "qwen3-0.6b", "spec_k": 4, "acceptance": 0.7})
    assert cfg.spec_acceptance == pytest.approx((0.7, 0.49, 0.343, 0.2401))
    assert tokens_per_step(cfg) == pytest.approx((1 - 0.7 ** 5) / 0.3)
    old = describe({"mode": "decode", "speculation": {"draft": "gpt2", "k": 2, "acceptance": 0.5,
                                                      "tokens_per_step": 1.75}}).speculation
    assert (old.method, old.proposed, old.acceptance, old.tokens_per_step) == (DRAFT_MODEL, 2, (0.5, 0.25), 1.75)


def test_a_run_that_states_no_acceptance_takes_the_published_default_and_says_so():
    trace = simulate(_eagle3(), max_events=0)
    run = describe(trace.meta).speculation
    assert (run.stated, run.acceptance) == (False, TUTORIAL_RATES)
    assert "tutorial-eagle3-speculative-decoding-llama-3-1.md" in run.source
    stated = describe(simulate(_eagle3(spec_acceptance=(0.5,)), max_events=0).meta).speculation
    assert (stated.stated, stated.source) == (True, "")
    # four positions: the fourth keeps the third's conditional rate, 63.46 / 72.47
    assert speculation(_eagle3(spec_k=4)).acceptance[3] == pytest.approx(0.6346 ** 2 / 0.7247)


def test_steps_accept_each_position_as_often_as_its_rate_says():
    tokens = accepted_tokens(np.random.default_rng(0), TUTORIAL_RATES, 400_000)
    assert tokens.min() == 1 and tokens.max() == 4
    at_least = [(tokens >= i + 2).mean() for i in range(3)]
    assert at_least == pytest.approx(TUTORIAL_RATES, abs=3e-3)


# --- what runs -------------------------------------------------------------------------------------

def _heads(prog):
    return [(layer.name, op.m, op.n) for layer in prog.layers for op in prog.ops[layer.first_op:layer.first_op
            + layer.n_ops] if op.name == "lm_head"]


def test_a_draft_model_apart_proposes_k_tokens_and_the_model_verifies_k_plus_one():
    spec, draft = get_model("qwen3-32b"), get_model("qwen3-0.6b")
    graphs = step_graphs(spec, drafter(spec, DRAFT_MODEL, draft, False), 4, Phase(2, 1, 1024, decode_step=True), 2)
    assert len(graphs) == 5  # four draft steps and the verification, each a graph
    assert [m for g in graphs for _, m, _ in _heads(g)] == [2, 2, 2, 2, 2 * 5]
    assert graphs[-1].layers[0].name.startswith("verify/")


def test_nxd_fused_speculation_counts_the_models_token_in_its_length():
    """speculation_length 7 (vLLM's num_speculative_tokens): one graph running the draft 7 times,
    the last to fill its KV cache, and the model over 7 positions: 6 tokens drafted."""
    cfg = _spec(spec_k=7, fused_speculation=True)
    assert speculation(cfg).proposed == 6
    spec, draft = get_model("qwen3-32b"), get_model("qwen3-0.6b")
    (graph,) = step_graphs(spec, drafter(spec, DRAFT_MODEL, draft, True), 6, Phase(1, 1, 1024, decode_step=True), 2)
    assert [m for _, m, _ in _heads(graph)] == [1] * 7 + [7]


def test_vllm_neurons_eagle3_head_is_one_layer_fusing_three_hidden_states_in_graphs_of_its_own():
    """Verification over k + 1 positions writing three layers' hidden states, then the head's first
    pass over those positions through fc (3 x 4096 in), its others over one without, each a graph; a
    32,000-token LM head split over the 8 cores."""
    spec = get_model("llama-3.1-8b")
    d = drafter(spec, EAGLE3, None, False)
    verify, first, *rest = step_graphs(spec, d, 3, Phase(2, 1, 1024, 8, decode_step=True), 2)
    assert len(rest) == 2
    assert [op.elems for op in verify.ops if op.name == "hidden_states"] == [2 * 4 * 3 * 4096]
    fc = [op for op in first.ops if op.name == "fc"]
    assert [(op.m, op.k, op.n) for op in fc] == [(2 * 4, 3 * 4096, 4096)]  # nn.Linear, whole on every core
    assert not any(op.name == "fc" for g in rest for op in g.ops)
    assert sum(1 for layer in first.layers if layer.kind == "attention") == 1
    qkv = next(op for op in first.ops if op.name == "qkv")
    assert qkv.k == 2 * 4096  # the embedding beside the hidden state
    assert [(m, n) for g in (first, *rest) for _, m, n in _heads(g)] == [(2, 32000 // 8)] * 3


def test_nxd_fused_eagle_refills_the_heads_cache_after_the_model_verifies():
    """speculation_length 4: three one-token head passes (fc over the embedding beside the hidden
    state, 2 x hidden), the model over 4 positions, then a head pass over them; the target's LM head
    copied, its vocabulary whole."""
    spec = get_model("llama-3.1-8b")
    (graph,) = step_graphs(spec, drafter(spec, EAGLE, None, True), 3, Phase(1, 1, 1024, 8, decode_step=True), 2)
    assert [(name.split("/")[0], m, n) for name, m, n in _heads(graph)] == [
        ("draft 1", 1, 128256 // 8), ("draft 2", 1, 128256 // 8), ("draft 3", 1, 128256 // 8),
        ("verify", 4, 128256 // 8), ("draft 4", 4, 128256 // 8)]
    assert [(op.m, op.k) for op in graph.ops if op.name == "fc"] == [(1, 2 * 4096)] * 3 + [(4, 2 * 4096)]


def test_graphs_compiled_apart_run_one_after_another():
    """The head's first graph starts after the verification's last event: nothing of it is loaded
    ahead, as within one graph."""
    trace = simulate(_eagle3(new_tokens=8), max_events=1_000_000)
    names = trace.layer_names
    first_draft = min(i for i, n in enumerate(names) if n.startswith("decode ctx 1024 #1/draft 1/"))
    verify = [i for i, n in enumerate(names) if n.startswith("decode ctx 1024 #1/verify/")]
    assert trace.layer_start_ns[first_draft] >= max(trace.layer_end_ns[verify]) - 1e-6


def test_the_prompt_fills_the_drafters_cache_before_the_first_token():
    plain = compute_metrics(simulate(_eagle3(spec_method=None, spec_k=0), max_events=0))
    eagle = compute_metrics(simulate(_eagle3(), max_events=0))
    assert eagle.time_to_first_token_s > plain.time_to_first_token_s
    trace = simulate(_eagle3(new_tokens=2), max_events=1_000_000)
    prefill = [n for n in trace.layer_names if n.startswith("prefill")]
    assert any("/draft 1/layer0.attention" in n for n in prefill) and any("/draft 3/lm_head" in n for n in prefill)


def test_a_speculative_run_takes_the_steps_its_accepted_tokens_need():
    cfg = _spec()
    trace = simulate(cfg)
    steps = sum(ph["repeat"] for ph in trace.meta["phases"] if ph["name"].startswith("decode"))
    assert steps == round((cfg.new_tokens - 1) / tokens_per_step(cfg))
    assert trace.meta["speculation"]["tokens_per_step"] == pytest.approx(tokens_per_step(cfg))
    step = [name for name in trace.layer_names if name.startswith("decode")]
    assert any("/draft 4/" in n for n in step) and any("/verify/lm_head" in n for n in step)


@pytest.mark.parametrize("spec_k, rates", [(2, (0.5,)), (16, (1.0,))])
def test_a_speculative_runs_tokens_after_the_first_take_its_time_per_token_each(spec_k, rates):
    """Eight new tokens: the prompt's pass makes the first, the steps the seven others, even when
    one step of 16 accepted drafts could make 17."""
    met = compute_metrics(simulate(_spec(spec_k=spec_k, spec_acceptance=rates, new_tokens=8)))
    assert met.latency_s - met.time_to_first_token_s == pytest.approx(7 * met.per_token_s, rel=1e-9)


def test_a_good_draft_speeds_decoding_up_and_a_useless_one_slows_it_down():
    plain = simulate(RunConfig(model="qwen3-32b", instance="trn2.48xlarge", cores=16, mode="decode", seq=128,
                               new_tokens=65)).meta["per_token_ns"]
    good, useless = (simulate(_spec(spec_acceptance=(p,))).meta["per_token_ns"] for p in (0.8, 0.0))
    assert good < plain < useless


def test_an_eagle3_heads_weights_sit_beside_the_models():
    """Llama-3.1-8B's head: its token embedding (128,256 x 4,096), fc (3 x 4,096 -> 4,096), one
    layer (QKV from 2 x 4,096 to 48 heads of 128, the output projection, a 14,336-wide gated MLP)
    and a 32,000-token LM head."""
    head = (128256 * 4096 + 3 * 4096 * 4096 + 2 * 4096 * 48 * 128 + 4096 * 4096 + 3 * 4096 * 14336
            + 4096 * 32000)
    assert drafter_parameters(drafter(get_model("llama-3.1-8b"), EAGLE3, None, False), 2) == head
    spec, chip = get_model("llama-3.1-8b"), get_chip("trn2")
    plain, eagle = (memory_need(cfg, spec, chip, 512, 2).copy_bytes for cfg in (_eagle3(spec_method=None, spec_k=0),
                                                                               _eagle3()))
    assert eagle - plain == head * 2


@pytest.mark.parametrize("kw, message", [
    (dict(mode="inference", model="bert-base", draft="gpt2"), "is for decode and serve modes"),
    (dict(draft=None), "go with --draft MODEL"),
    (dict(draft=None, spec_method="draft_model"), "draft_model goes with --draft MODEL"),
    (dict(spec_method="medusa"), "unknown speculation method 'medusa'"),
    (dict(spec_k=0), "--spec-k is the tokens the draft proposes"),
    (dict(spec_k=1, fused_speculation=True), "2 to 16 \\(with fused speculation"),
    (dict(spec_acceptance=(1.5,)), "each from 0 to 1"),
    (dict(spec_acceptance=(0.5, 0.7)), "cannot rise from one position to the next; got 0.5,0.7"),
    (dict(spec_acceptance=(0.9, 0.8, 0.7, 0.6, 0.5)), "5 per-position rates for the 4 draft tokens"),
    (dict(draft="bert-base"), "must be a GPT-style decoder"),
    (dict(spec_method="eagle3"), "a head on qwen3-32b's hidden states"),
    (dict(draft=None, spec_method="eagle"), "NxD Inference runs EAGLE heads fused"),
    (dict(model="deepseek-v3", draft=None, spec_method="eagle3"), "one for deepseek-v3 is not modelled"),
    (dict(prefill_chunk=64), "with prompt chunks \\(--prefill-chunk\\) is not modelled"),
])
def test_bad_speculation_is_refused(kw, message):
    with pytest.raises(ConfigError, match=message):
        simulate(_spec(**kw))

"""Today's served models: Qwen3-MoE, gpt-oss, DeepSeek-V3 (latent attention), Llama 4; their
parameter counts, layer patterns, windows and caches."""

import json

import pytest

from sim.errors import ConfigError
from sim.run import RunConfig, simulate
from sim.workloads import Phase, build_program, get_model
from sim.workloads.graph import OpKind
from sim.workloads.models import PRESET_DIR

MODEL_CARDS = {  # total parameters the model cards state
    "qwen3-30b-a3b": (30.5e9, 0.01), "gpt-oss-20b": (20.91e9, 0.01), "gpt-oss-120b": (116.83e9, 0.01),
    "deepseek-v3": (671e9, 0.01), "llama-4-maverick": (400e9, 0.01),
    # the card's 109B counts the vision encoder (under 1B), which is not modelled
    "llama-4-scout": (109e9, 0.02),
}
# active parameters per token the cards state, and whether they count the input embedding (gpt-oss's
# card counts the unembedding only)
ACTIVE = {"qwen3-30b-a3b": (3.3e9, True), "deepseek-v3": (37e9, True), "gpt-oss-120b": (5.13e9, False),
          "llama-4-scout": (17e9, True)}


def params(name):
    spec = get_model(name)
    return sum(op.params for op in build_program(spec, Phase(1, 128, 128), 2).ops)


@pytest.mark.parametrize("name", sorted(MODEL_CARDS))
def test_parameter_counts_match_the_model_cards(name):
    value, tolerance = MODEL_CARDS[name]
    assert params(name) == pytest.approx(value, rel=tolerance)


@pytest.mark.parametrize("name", sorted(ACTIVE))
def test_a_token_runs_through_the_active_parameters_the_cards_state(name):
    """One decode token's matmul FLOPs are twice the parameters it runs through (the LM head
    and embeddings counted as the cards do: the embedding lookup is no matmul)."""
    spec = get_model(name)
    prog = build_program(spec, Phase(1, 1, 1, decode_step=True), 2)
    flops = sum(op.flops for op in prog.ops if op.kind is OpKind.MATMUL and op.weights)
    value, with_embedding = ACTIVE[name]
    assert (flops / 2 + (spec.vocab * spec.hidden if with_embedding else 0)) == pytest.approx(value, rel=0.06)


def test_layer_patterns_of_dense_and_expert_mlps():
    kinds = lambda name: [la.kind for la in build_program(get_model(name), Phase(1, 8, 8), 2).layers]  # noqa: E731
    deepseek = [k for k in kinds("deepseek-v3") if k in ("mlp", "moe")]
    assert deepseek[:3] == ["mlp"] * 3 and set(deepseek[3:]) == {"moe"} and len(deepseek) == 61
    maverick = [k for k in kinds("llama-4-maverick") if k in ("mlp", "moe")]
    assert maverick[:4] == ["mlp", "moe", "mlp", "moe"] and maverick.count("moe") == 24
    assert set(k for k in kinds("qwen3-30b-a3b") if k in ("mlp", "moe")) == {"moe"}


def test_latent_attention_caches_the_published_fraction_of_multi_head_attention():
    """DeepSeek-V2's Table 1: MLA caches (d_c + d_R) elements per token and layer where multi-head
    attention caches 2 n_h d_h; for V3 (512 + 64) against 2 x 128 x 128, 1/56.9."""
    spec = get_model("deepseek-v3")
    mha = 2 * spec.heads * (spec.head_dim - spec.qk_rope_dim)
    assert spec.kv_elems_per_position(0) == 576
    assert mha / spec.kv_elems_per_position(0) == pytest.approx(56.9, rel=1e-3)
    step = build_program(spec, Phase(1, 1, 4096, decode_step=True), 2)
    scores = [op for op in step.ops if op.name == "scores"]
    assert len(scores) == 61 and all(op.hbm_elems == 4096 * 576 for op in scores)  # the latents, once for all heads


def test_gpt_oss_sliding_layers_read_only_their_window_of_the_cache():
    spec = get_model("gpt-oss-20b")
    assert spec.layer_windows[:4] == (128, 0, 128, 0)
    step = build_program(spec, Phase(1, 1, 4096, decode_step=True), 2)
    reads = [op.hbm_elems for op in step.ops if op.name == "scores"]
    per_head = spec.head_dim * spec.kv_heads
    assert reads[:2] == [128 * per_head, 4096 * per_head]
    assert spec.kv_cache_elems(4096) == 12 * (128 + 4096) * 2 * per_head


def test_llama4_chunks_attention_in_three_layers_of_four():
    spec = get_model("llama-4-scout")
    assert spec.layer_windows[:4] == (8192, 8192, 8192, 0) and spec.window_kind == "chunked"
    assert spec.qk_norm and spec.intermediate == 16384 and spec.moe_intermediate == 8192 and spec.shared_experts


@pytest.mark.parametrize("name", sorted(MODEL_CARDS))
def test_every_family_simulates_a_decode_on_trn2(name):
    trace = simulate(RunConfig(model=name, instance="trn2.48xlarge", mode="decode", seq=256, new_tokens=4))
    assert trace.meta["per_token_ns"] > 0 and trace.meta["prefill_ns"] > trace.meta["per_token_ns"]


def test_a_family_config_with_bad_structure_is_one_error(tmp_path):
    cfg = json.loads((PRESET_DIR / "gpt-oss-20b.json").read_text())
    cfg["layer_types"] = cfg["layer_types"][:3]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="layer_types one per layer"):
        get_model(str(path))


def test_a_training_steps_expert_parallel_all_to_all_moves_each_ranks_share_of_the_routed_tokens():
    spec = get_model("qwen3-30b-a3b")
    batch, tp, ep = 32, 8, 4
    step = build_program(spec, Phase(batch, 1, 1, tp, training=True, ep=ep), 2)
    pairs = batch * spec.experts_per_token  # 256 (token, expert) pairs
    for name in ("moe_dispatch", "moe_combine"):
        ops = [op for op in step.ops if op.name == name]
        assert len(ops) == spec.layers and {(op.elems, op.rows, op.collective) for op in ops} == {
            (pairs // ep * spec.hidden, ep, "all_to_all")}
    # a core holds 128 / 4 experts, each split over 8 / 4 cores, and runs its group's 64 pairs
    gate_up = [op for op in step.ops if op.name.startswith("experts_gate_up")][:2]
    assert sum(op.m * op.count for op in gate_up) == pairs // ep
    assert {op.n for op in gate_up} == {2 * spec.moe_intermediate // (tp // ep)}
    assert sum(op.count for op in gate_up) <= spec.experts // ep


def test_expert_imbalance_and_parallelism_change_the_training_step_as_expected():
    def step_ns(**kw):
        cfg = RunConfig(model="trinity-nano", instance="trn2.48xlarge", mode="training", seq=256, batch=4, cores=8,
                        **kw)
        return simulate(cfg, max_events=0).meta["total_ns"]

    balanced, skewed = step_ns(ep=4), step_ns(ep=4, expert_imbalance=2.0)
    assert skewed > balanced
    with pytest.raises(ConfigError, match="cannot split the 8 cores"):  # 8 logical cores (16 physical at LNC 2)
        step_ns(ep=16)
    with pytest.raises(ConfigError, match="cannot split into 3"):
        step_ns(ep=3)

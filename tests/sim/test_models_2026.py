"""2026's architectures: Qwen3.5's Gated DeltaNet hybrid (dense and MoE), GLM-5's DeepSeek sparse
attention, MiniMax-M3's block-sparse attention and Trinity (afmoe), each from its checkpoint's
config.json; their layer patterns, states and caches, and what a decode step reads."""

import json
from dataclasses import replace

import pytest

from sim.checks import resolve_chip
from sim.config import compiled_length
from sim.errors import DoesNotFitError
from sim.memory_plan import memory_need
from sim.metrics import compute_metrics
from sim.run import RunConfig, simulate
from sim.workloads import Phase, build_program, get_model, parameters
from sim.workloads.graph import OpKind
from sim.workloads.models import PRESET_DIR

PRESETS = ("qwen3.5-27b", "qwen3.5-35b-a3b", "glm-5.2", "minimax-m3", "trinity-nano")
# GLM-5.2 runs FP8 weights: NxD Inference's contrib/models/GLM-5.2/README.md, "BF16 weights (~1506 GB)
# do not fit the trn2's 1536 GB HBM"
RUN = {"glm-5.2": {"quant": "fp8-weights"}}
# total parameters the model cards state (the vision towers of Qwen3.5's checkpoints, under 0.5B, are not
# modelled; GLM-5.2's ~753B counts its multi-token-prediction layer, left out)
CARDS = {"qwen3.5-27b": 27e9, "qwen3.5-35b-a3b": 35e9, "glm-5.2": 753e9}


def ops_named(prog, name):
    return [op for op in prog.ops if op.name == name]


def layer_ops(prog, layer_name):
    layer = next(la for la in prog.layers if la.name == layer_name)
    return prog.ops[layer.first_op:layer.first_op + layer.n_ops]


@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("mode", ["inference", "decode"])
def test_each_checkpoint_simulates_on_trn2(name, mode):
    trace = simulate(RunConfig(model=name, instance="trn2.48xlarge", mode=mode, seq=1024, new_tokens=4,
                               **RUN.get(name, {})), max_events=0)
    met = compute_metrics(trace)
    if mode == "decode":
        assert met.per_token_s > 0 and met.time_to_first_token_s > met.per_token_s
    else:
        assert met.latency_s > 0


def test_glm_5_in_bf16_does_not_fit_one_trn2_as_nxd_inference_found():
    with pytest.raises(DoesNotFitError, match="glm-5.2 needs"):
        simulate(RunConfig(model="glm-5.2", instance="trn2.48xlarge", mode="decode", seq=1024, new_tokens=4))


@pytest.mark.parametrize("name", ["qwen3.5-35b-a3b", "minimax-m3"])
def test_a_one_node_server_runs_them(name):
    met = compute_metrics(simulate(RunConfig(model=name, instance="trn2.48xlarge", mode="serve", batch=4, seq=512,
                                             new_tokens=16, requests=4), max_events=0))
    assert met.serving["requests"] == 4 and met.serving["ttft_p50_s"] > met.serving["tpot_p50_s"] > 0


@pytest.mark.parametrize("name", sorted(CARDS))
def test_parameter_counts_match_the_model_cards(name):
    assert parameters(get_model(name)) == pytest.approx(CARDS[name], rel=0.02)


@pytest.mark.parametrize(("preset", "text_type"), [("qwen3.5-27b", "qwen3_5_text"),
                                                    ("qwen3.5-35b-a3b", "qwen3_5_moe_text"),
                                                    ("minimax-m3", "minimax_m3")])
def test_the_text_model_nested_in_text_config_reads_as_the_flat_config(tmp_path, preset, text_type):
    wrapper = json.loads((PRESET_DIR / f"{preset}.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**wrapper["text_config"], "model_type": text_type}))
    nested, flat = get_model(preset), get_model(str(path))
    same = {k: v for k, v in nested.__dict__.items() if k not in ("name", "model_type", "source")}
    assert same == {k: v for k, v in flat.__dict__.items() if k not in ("name", "model_type", "source")}


@pytest.mark.parametrize("name", ["qwen3.5-27b", "qwen3.5-35b-a3b"])
def test_the_hybrid_layers_are_those_layer_types_names(name):
    """Full attention exactly in the config's ``full_attention`` layers (every fourth), Gated DeltaNet
    in the others: only the former score keys and append to a KV cache, only the latter keep a state."""
    types = json.loads((PRESET_DIR / f"{name}.json").read_text())["text_config"]["layer_types"]
    full = [i for i, t in enumerate(types) if t == "full_attention"]
    assert full == list(range(3, len(types), 4))
    prog = build_program(get_model(name), Phase(1, 1, 2048, decode_step=True), 2)
    for i in range(len(types)):
        names = {op.name for op in layer_ops(prog, f"layer{i}.attention")}
        assert ("scores" in names, "kv_append" in names) == (i in full, i in full)
        assert ("state_read" in names, "state_write" in names) == (i not in full, i not in full)


def test_a_deltanet_layer_keeps_its_state_not_a_growing_cache():
    """Qwen3.5-27B's Gated DeltaNet, by hand from its config.json: 48 value heads each keep a 128 x
    128 state in FP32 (mamba_ssm_dtype), 65,536 bytes, 3,145,728 a layer; the convolution keeps its
    last 4 - 1 inputs of its 2 x 16 x 128 + 48 x 128 = 10,240 channels in BF16, 61,440 bytes. Only
    the 16 full-attention layers cache keys and values: 2 x 4 KV heads x 256 a position."""
    spec = get_model("qwen3.5-27b")
    per_layer = 48 * 128 * 128 * 4 + 3 * 10240 * 2
    assert per_layer == 3_207_168
    assert spec.recurrent_state_bytes(2) == 48 * per_layer
    assert spec.kv_cache_elems(4096) == 16 * 2 * 4 * 256 * 4096
    for ctx in (1024, 65536):  # a step reads and writes the same state whatever the context
        step = build_program(spec, Phase(1, 1, ctx, decode_step=True), 2)
        for name in ("state_read", "state_write"):
            ops = ops_named(step, name)
            assert len(ops) == 48
            assert {(op.hbm_elems + op.hbm_write_elems) * op.dtype_bytes for op in ops} == {48 * 128 * 128 * 4}
        assert {op.hbm_elems for op in ops_named(step, "conv_state_read")} == {3 * 10240}
        assert [op.hbm_elems for op in ops_named(step, "scores")] == [4 * ctx * 256] * 16


def test_a_deltanet_decode_step_runs_the_flops_counted_by_hand():
    """One token through a Qwen3.5-27B DeltaNet layer on one core: the input projection to
    q, k, v (10,240), z (6,144), b and a (48 each), 2 x 5120 x 16,480 FLOPs; per value head the state
    read against the key and against the query, 2 x 2 x 128 x 128 each; the output projection
    2 x 6144 x 5120; the state decayed (128 x 128 a head) and updated (a product and a sum)."""
    step = build_program(get_model("qwen3.5-27b"), Phase(1, 1, 4096, decode_step=True), 2)
    ops = layer_ops(step, "layer0.attention")
    matmuls = {op.name: op.flops for op in ops if op.kind is OpKind.MATMUL}
    assert matmuls == {"in_proj": 2 * 5120 * 16480, "state_keys": 48 * 2 * 128 * 128,
                       "state_query": 48 * 2 * 128 * 128, "out_proj": 2 * 6144 * 5120}
    elementwise = {op.name: op.flops for op in ops if op.name in ("state_decay", "state_update", "conv1d")}
    assert elementwise == {"state_decay": 48 * 128 * 128, "state_update": 2 * 48 * 128 * 128,
                           "conv1d": 4 * 10240}


def test_a_prompt_runs_the_chunked_recurrence_counted_by_hand():
    """128 positions are two chunks of 64 for each of the 48 value heads; per chunk and head
    (torch_chunk_gated_delta_rule) 3 c^2 d_k + 2 c^2 d_v + 3 c d_k d_v multiply-adds: the UT system
    and intra-chunk scores (c^2 d_k each), the solved system times [v | k] (c^2 (d_v + d_k)), the
    state against keys and queries and its update (c d_k d_v each), the scores times the values (c^2 d_v)."""
    c, d = 64, 128
    prog = build_program(get_model("qwen3.5-27b"), Phase(1, 128, 128), 2)
    names = ("chunk_kk", "chunk_qk", "chunk_values", "scan_keys", "scan_queries", "scan_intra", "scan_state")
    flops = sum(op.flops for op in layer_ops(prog, "layer0.attention") if op.name in names)
    assert flops == 2 * 48 * 2 * (3 * c * c * d + 2 * c * c * d + 3 * c * d * d)
    # a prompt starts from no state: it writes one, reads none
    assert [op.name for op in layer_ops(prog, "layer0.attention")].count("state_read") == 0


def test_glm_5_shares_its_indexers_as_its_config_derives_them():
    """indexer_types is what GlmMoeDsaConfig derives from index_topk_freq 4 and index_skip_topk_offset 3:
    21 layers run an indexer (0, 1, 2, 6, 10, ...), the others reuse the last one's choice."""
    cfg = json.loads((PRESET_DIR / "glm-5.2.json").read_text())
    spec = get_model("glm-5.2")
    derived = ["full" if max(i - 3 + 1, 0) % 4 == 0 else "shared" for i in range(78)]
    assert cfg["indexer_types"] == derived
    full = [i for i, t in enumerate(derived) if t == "full"]
    assert full[:5] == [0, 1, 2, 6, 10] and len(full) == 21
    prog = build_program(spec, Phase(1, 1, 4096, decode_step=True), 2)
    with_indexer = [i for i in range(78) if any(op.name == "index_scores"
                                                for op in layer_ops(prog, f"layer{i}.attention"))]
    assert with_indexer == full


def test_glm_5_decode_reads_only_the_chosen_latents():
    """A step's attention reads the index_topk (2048) latents (512 + 64 elements) it chose, however
    long the context; below 2048 positions every one; the indexer reads each cached index key (128)."""
    spec = get_model("glm-5.2")
    for ctx in (1024, 4096, 65536):
        step = build_program(spec, Phase(1, 1, ctx, decode_step=True), 2)
        scores = ops_named(step, "scores")
        assert len(scores) == 78 and {op.hbm_elems for op in scores} == {min(ctx, 2048) * 576}
        assert {op.n for op in scores} == {min(ctx, 2048)}
        assert {op.hbm_elems for op in ops_named(step, "index_scores")} == {ctx * 128}
    # what a sequence caches per position: the latent in every layer, the index key in the 21 indexer layers
    assert spec.kv_cache_elems(1000) == 1000 * (78 * 576 + 21 * 128)


def test_sparse_attention_bytes_grow_with_the_indexer_not_the_attention_beyond_topk():
    """Decode bytes of GLM-5's attention at 16k and 64k positions: only the indexer's reads (128
    elements a position in 21 layers) differ."""
    spec = get_model("glm-5.2")

    def attention_bytes(ctx):
        step = build_program(spec, Phase(1, 1, ctx, decode_step=True), 2)
        return sum(op.hbm_elems * op.dtype_bytes for op in step.ops if op.name in ("scores", "context"))

    def indexer_bytes(ctx):
        step = build_program(spec, Phase(1, 1, ctx, decode_step=True), 2)
        return sum(op.hbm_elems * op.dtype_bytes for op in ops_named(step, "index_scores"))

    assert attention_bytes(65536) == attention_bytes(16384)
    assert indexer_bytes(65536) - indexer_bytes(16384) == 21 * (65536 - 16384) * 128 * 2


def test_a_sparse_prompt_meets_its_chosen_keys():
    """A prompt of 4096 positions: the first 2048 queries meet all the keys up to theirs, the others
    2048, (2048 x 2049 / 2 + 2048 x 2048) / 4096 = 1536 on average; a prompt of 2048 chooses all
    (the compiler's dense attention over the whole square)."""
    spec = get_model("glm-5.2")
    assert spec.sparse_attention.selected_keys(4096, 4096, False) == 1536
    assert {op.n for op in ops_named(build_program(spec, Phase(1, 4096, 4096), 2), "scores")} == {1536}
    assert {op.n for op in ops_named(build_program(spec, Phase(1, 2048, 2048), 2), "scores")} == {2048}


def test_minimax_m3_attends_its_top_blocks_in_the_sparse_layers():
    """sparse_attention_config: 16 blocks of 128 keys in the 57 sparse layers, whose indexer has an
    index head for each of the 4 KV heads; the first three layers attend every position."""
    spec = get_model("minimax-m3")
    assert spec.sparse_attention.keys == 16 * 128 and spec.sparse_attention.index_heads == spec.kv_heads == 4
    step = build_program(spec, Phase(1, 1, 16384, decode_step=True), 2)
    reads = [op.hbm_elems for op in ops_named(step, "scores")]
    per_position = 4 * 128  # the KV heads' keys
    assert reads == [16384 * per_position] * 3 + [2048 * per_position] * 57
    assert len(ops_named(step, "index_scores")) == 57
    assert spec.intermediate == 12288 and spec.moe_intermediate == spec.shared_expert_width == 3072
    assert [spec.is_moe_layer(i) for i in range(4)] == [False, False, False, True]


def test_trinity_slides_three_layers_of_four_gates_attention_and_has_no_positions_in_the_others():
    spec = get_model("trinity-nano")
    assert spec.layer_windows[:4] == (2048, 2048, 2048, 0)
    prog = build_program(spec, Phase(1, 16, 16), 2)
    names = [{op.name for op in layer_ops(prog, f"layer{i}.attention")} for i in range(4)]
    assert ["rope" in n for n in names] == [True, True, True, False]
    assert all("output_gate" in n for n in names)
    qkv = ops_named(prog, "qkv")[0]  # the gate projection beside q, k, v: 8 heads, 2 KV heads of 128
    assert qkv.n == (8 + 2 * 2 + 8) * 128
    assert [spec.is_moe_layer(i) for i in range(3)] == [False, False, True] and spec.shared_expert_width == 256
    step = build_program(spec, Phase(1, 1, 8192, decode_step=True), 2)
    assert [op.hbm_elems for op in ops_named(step, "scores")][:4] == [2048 * 256] * 3 + [8192 * 256]



def test_the_memory_plan_holds_the_deltanet_state_and_the_full_layers_cache():
    """Qwen3.5-27B decoding 4 sequences: a KV head's bytes are the 16 full-attention layers' keys and
    values of the compiled positions (BF16); the 48 DeltaNet layers' states are in the copy's bytes,
    4 x 48 x 48 x 128 x 128 x 4: kept in BF16 instead they take half that, whatever the length."""
    spec = get_model("qwen3.5-27b")
    chip = resolve_chip(RunConfig(model="qwen3.5-27b", chip="trn2"))[0]
    halved = replace(spec, linear_attention=replace(spec.linear_attention, state_bytes=2))

    def need(model, seq):
        cfg = RunConfig(model="qwen3.5-27b", chip="trn2", mode="decode", seq=seq, new_tokens=4, batch=4)
        return memory_need(cfg, model, chip, seq, 2), compiled_length(cfg, seq)

    for seq in (1024, 8192):
        (fp32, positions), (bf16, _) = need(spec, seq), need(halved, seq)
        assert fp32.kv_head_bytes == 16 * 2 * 256 * positions * 4 * 2
        assert fp32.copy_bytes - bf16.copy_bytes == 4 * 48 * 48 * 128 * 128 * 2

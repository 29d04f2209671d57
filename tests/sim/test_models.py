"""Model presets and user config.json files."""

import json
import os

import numpy as np
import pytest

from sim.errors import ConfigError, DoesNotFitError, UnknownNameError
from sim.memory_plan import deployment
from sim.run import RunConfig, simulate
from sim.workloads import Phase, Program, build_program, get_model, preset_names
from sim.workloads.experts import experts_touched
from sim.workloads.graph import OpKind

PUBLISHED_PARAMS = {  # model cards: parameters including embeddings, +-5% for heads and tied weights
    "bert-base": 110e6, "bert-large": 335e6, "roberta-large": 355e6, "distilbert": 66e6, "gpt2": 124e6,
    "llama-3-8b": 8.03e9, "resnet50": 25.6e6, "vit-base": 86e6, "electra-large": 335e6,
    "qwen2-7b": 7.62e9, "gemma-7b": 8.54e9, "phi-3-mini": 3.82e9, "pythia-1.4b": 1.41e9, "opt-1.3b": 1.32e9,
    "gpt-j-6b": 6.05e9, "mixtral-8x7b": 46.7e9, "vgg11": 132.86e6, "vgg16": 138.36e6,
    "electra-base": 110e6, "resnet152": 60.2e6, "llama-3-70b": 70.6e9, "distilroberta-base": 82e6,
    "llama-3.3-70b": 70.6e9, "llama-3.1-405b": 405.8e9, "qwen3-8b": 8.2e9, "qwen3-14b": 14.8e9,
    "qwen3-235b-a22b": 235e9, "deepseek-r1": 671e9, "clip-vit-base-patch32": 151.28e6,
    "clip-vit-large-patch14": 427.62e6,
}
MIXTRAL_ACTIVE_PARAMS = 12.9e9  # model card: parameters one token runs through
ROTARY_MODEL_TYPES = {"qwen3", "llama", "mistral", "qwen2", "gemma", "phi3", "gpt_neox", "gptj", "mixtral", "qwen3_moe",
                      "gpt_oss", "deepseek_v3", "llama4", "qwen3_5", "qwen3_5_moe", "glm_moe_dsa", "minimax_m3_vl",
                      "afmoe"}


def params(name):
    spec = get_model(name)
    return sum(op.params for op in build_program(spec, Phase(1, spec.default_seq, spec.default_seq), 2).ops)


def test_every_preset_the_issue_names_exists():
    for name in [*PUBLISHED_PARAMS, "encoder-mlp"]:
        assert name in preset_names()


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_preset_parameter_counts_match_the_model_cards(name):
    assert params(name) == pytest.approx(PUBLISHED_PARAMS[name], rel=0.06)


def test_encoder_mlp_has_a_few_hundred_million_parameters():
    assert 150e6 < params("encoder-mlp") < 900e6


def test_a_user_config_json_is_simulated_like_a_preset(tmp_path):
    cfg = {"model_type": "bert", "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
           "intermediate_size": 2048, "vocab_size": 30522}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    trace = simulate(RunConfig(model=str(path), chip="trn1"))
    assert trace.meta["model_type"] == "bert"
    assert sum(1 for n in trace.layer_names if n.endswith(".attention")) == 4


@pytest.mark.parametrize("name, convs, gmacs", [("vgg11", 8, 7.61), ("vgg16", 13, 15.47)])
def test_vgg_runs_torchvisions_layers(name, convs, gmacs):
    spec = get_model(name)
    prog = build_program(spec, Phase(1, 224, 224), 2)
    matmuls = [op for op in prog.ops if op.kind == OpKind.MATMUL]
    # torchvision's table: 7.61 and 15.47 GFLOPS (multiply-adds) an image at 224 x 224
    assert sum(op.flops for op in matmuls) / 2 == pytest.approx(gmacs * 1e9, rel=1e-3)
    assert sum(1 for n in prog.layers if ".conv" in n.name) == convs
    # five 2x2 pools take 224 to 7: the classifier reads 512 x 7 x 7 features
    fc1 = next(op for op in matmuls if op.name == "fc1")
    assert (fc1.m, fc1.k, fc1.n) == (1, 512 * 7 * 7, 4096)
    # the first convolution: 224 x 224 output positions, 3 channels x 3 x 3 windows, 64 channels
    first = matmuls[0]
    assert (first.m, first.k, first.n) == (224 * 224, 27, 64)


def test_a_vgg_image_its_pools_would_leave_empty_is_refused():
    with pytest.raises(ConfigError, match="vgg11's 5 max pools need an image of at least 32 pixels; got 16"):
        simulate(RunConfig(model="vgg11", chip="inf2", seq=16))


# milesial/Pytorch-UNet's UNet at 224 x 224, by hand: each level's double 3x3 convolution as
# (positions, input channels x 9, output channels), the transposed convolutions as (positions,
# input channels, 4 x output channels), the 1x1 classifier
UNET_MATMULS = [
    (224 * 224, 3 * 9, 64), (224 * 224, 64 * 9, 64),  # inc
    (112 * 112, 64 * 9, 128), (112 * 112, 128 * 9, 128), (56 * 56, 128 * 9, 256), (56 * 56, 256 * 9, 256),
    (28 * 28, 256 * 9, 512), (28 * 28, 512 * 9, 512), (14 * 14, 512 * 9, 1024), (14 * 14, 1024 * 9, 1024),
    (14 * 14, 1024, 4 * 512), (28 * 28, 1024 * 9, 512), (28 * 28, 512 * 9, 512),  # up1: 512 + 512 joined
    (28 * 28, 512, 4 * 256), (56 * 56, 512 * 9, 256), (56 * 56, 256 * 9, 256),
    (56 * 56, 256, 4 * 128), (112 * 112, 256 * 9, 128), (112 * 112, 128 * 9, 128),
    (112 * 112, 128, 4 * 64), (224 * 224, 128 * 9, 64), (224 * 224, 64 * 9, 64),
    (224 * 224, 64, 2),  # outc: two classes a pixel
]


def test_unet_runs_the_benchmarks_unet_layer_by_layer():
    prog = build_program(get_model("unet"), Phase(1, 224, 224), 2)
    matmuls = [(op.m, op.k, op.n) for op in prog.ops if op.kind == OpKind.MATMUL]
    assert matmuls == UNET_MATMULS
    assert sum(2 * m * k * n for m, k, n in matmuls) == 2 * 36_881_367_040  # 36.9 GMAC an image
    # 31.02M weights (BatchNorm folded, biases left out): 31.04M as the module counts them
    assert params("unet") == 31_024_960


def test_a_bilinear_unet_upsamples_and_narrows_through_half_its_channels(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "unet", "n_channels": 1, "n_classes": 3, "bilinear": True}))
    prog = build_program(get_model(str(path)), Phase(2, 64, 64), 2)
    convs = [(op.m, op.k, op.n) for op in prog.ops if op.kind == OpKind.MATMUL]
    assert convs[0] == (2 * 64 * 64, 9, 64) and convs[-1] == (2 * 64 * 64, 64, 3)
    # the deepest level has 512 channels; up1 joins them with down3's 512 and narrows through 512 to 256
    assert convs[8:12] == [(2 * 4 * 4, 512 * 9, 512), (2 * 4 * 4, 512 * 9, 512),
                           (2 * 8 * 8, 1024 * 9, 512), (2 * 8 * 8, 512 * 9, 256)]
    assert sum(1 for op in prog.ops if op.name == "upsample") == 4
    # the module's 17.25M weights without its BatchNorm and biases (17,254,208 with 3 channels in and
    # 2 classes out), less 2 x 9 x 64 for the channels, plus 64 for the third class
    assert sum(op.params for op in prog.ops) == 17_254_208 - 2 * 9 * 64 + 64


def test_a_unets_latency_counts_copying_every_pixels_logits_back():
    from sim.workloads import host_bytes
    inputs, outputs = host_bytes(get_model("unet"), Phase(4, 224, 224), 4)
    assert (inputs, outputs) == (4 * 3 * 224 * 224 * 4, 4 * 2 * 224 * 224 * 4)


@pytest.mark.parametrize("text, message", [
    ('{"model_type": "unet", "bilinear": "yes"}', 'bilinear must be true or false, got "yes"'),
    ('{"model_type": "unet", "n_classes": 0}', "num_labels must be positive"),
])
def test_a_broken_unet_config_gives_one_line(tmp_path, text, message):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        get_model(str(path))


def test_a_unet_image_its_pools_would_leave_empty_is_refused():
    with pytest.raises(ConfigError, match="unet's 4 max pools need an image of at least 16 pixels; got 8"):
        simulate(RunConfig(model="unet", chip="inf2", seq=8))


def test_vgg_over_the_two_physical_cores_of_a_trn2_logical_core_gathers_its_features(run):
    trace = run("vgg11", "trn2", batch=4)
    assert "features_gather" in trace.op_names
    assert trace.meta["lnc"] == 2


def test_unsupported_model_type_names_what_is_supported(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "whisper"}))
    with pytest.raises(ConfigError, match="unsupported model_type 'whisper'.*supported are"):
        get_model(str(path))


QWEN2_WITHOUT_KV_HEADS = ('{"model_type": "qwen2", "hidden_size": 224, "num_hidden_layers": 2, '
                          '"num_attention_heads": 28, "intermediate_size": 512, "vocab_size": 1000}')
MIXTRAL_WITH_TOO_FEW_EXPERTS = ('{"model_type": "mixtral", "hidden_size": 256, "num_hidden_layers": 2, '
                                '"num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, '
                                '"vocab_size": 1000, "num_local_experts": 2, "num_experts_per_tok": 3}')


@pytest.mark.parametrize("text, message", [
    ("{not json", "not valid JSON"), ("[1, 2]", "JSON object"), ('{"model_type": "bert"}', "lacks hidden_size"),
    ('{"model_type": "opt", "hidden_size": 256}', "lacks num_hidden_layers, num_attention_heads, ffn_dim"),
    (QWEN2_WITHOUT_KV_HEADS, "28 attention heads cannot share 32 key-value heads"),  # Qwen2Config's default
    (MIXTRAL_WITH_TOO_FEW_EXPERTS, "between 1 and all of the 2 experts, not 3"),
])
def test_broken_config_files_give_one_line_errors(tmp_path, text, message):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        get_model(str(path))
    assert "\n" not in str(info.value)


LLAMA = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 512, "vocab_size": 1000}


@pytest.mark.parametrize("text, message", [
    ("[" * 100_000 + "]" * 100_000, "is not a model config \\(RecursionError\\)"),
    (json.dumps({**LLAMA, "num_hidden_layers": 1_000_000}), "1,000,000 layers is more than any model has"),
    (json.dumps({"model_type": "resnet", "hidden_sizes": [256], "depths": [100_000]}),
     "100,000 blocks is more than any model has \\(at most 1,024\\)"),
    (json.dumps({"model_type": "vgg", "layers": [64] * 2000}), "2,000 blocks is more than any model has"),
    (json.dumps({"model_type": "t5", "d_model": 64, "d_kv": 8, "d_ff": 128, "num_heads": 8, "num_layers": 1000,
                 "num_decoder_layers": 1000, "vocab_size": 100}), "2,000 layers is more than any model has"),
    (json.dumps({**LLAMA, "hidden_size": 10**100}), "hidden_size must be a positive integer, got 1000000000"),
    (json.dumps({**LLAMA, "model_type": ["llama"]}), 'unsupported model_type \\["llama"\\]'),
    (json.dumps({**LLAMA, "hidden_act": ["silu"]}), "the activation \\(hidden_act\\) must be a name"),
    (json.dumps({**LLAMA, "tie_word_embeddings": "yes"}), "tie_word_embeddings has a value of the wrong type"),
    ('{"model_type": "llama", "pad": "' + "x" * (5 << 20) + '"}', "larger than any config.json"),
])
def test_hostile_config_files_are_refused_in_one_line_before_any_work(tmp_path, text, message):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        get_model(str(path))
    assert "\n" not in str(info.value)


def test_a_config_path_that_is_not_a_regular_file_is_refused_without_reading(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)  # no writer: opening it for reading would wait forever
    with pytest.raises(ConfigError, match="not a regular file \\(a pipe\\)"):
        get_model(str(fifo))
    with pytest.raises(ConfigError, match="not a regular file \\(a device or socket\\)"):
        get_model("/dev/zero")


def test_unknown_names_and_bad_numbers_are_rejected():
    with pytest.raises(UnknownNameError, match="unknown model 'bert-huge'"):
        simulate(RunConfig(model="bert-huge", chip="trn1"))
    with pytest.raises(ConfigError, match="batch must be a positive integer"):
        simulate(RunConfig(model="bert-base", chip="trn1", batch=-4))
    with pytest.raises(ConfigError, match="decode mode needs a GPT-style decoder"):
        simulate(RunConfig(model="bert-base", chip="trn1", mode="decode"))
    with pytest.raises(ConfigError, match="at most 512 positions"):
        simulate(RunConfig(model="bert-base", chip="trn1", seq=1024))
    with pytest.raises(ConfigError, match="does not run fp8"):
        simulate(RunConfig(model="bert-base", chip="inf1", dtype="fp8"))


def test_a_model_too_big_for_the_instance_is_refused():
    with pytest.raises(DoesNotFitError, match="does not fit on inf2.xlarge"):
        simulate(RunConfig(model="llama-3-8b", instance="inf2.xlarge", mode="decode", cores=1))


def test_default_deployment_splits_a_large_model_over_the_fewest_cores(run):
    trace = run("llama-3-8b", "inf2", mode="decode", seq=128, new_tokens=16)
    assert trace.meta["cores_per_copy"] == 2
    small = run("bert-base", "trn1")
    assert (small.meta["cores_per_copy"], small.meta["copies"]) == (1, 2)
    trn2 = run("bert-large", "trn2")
    assert (trn2.meta["instance"], trn2.meta["lnc"], trn2.meta["copies"]) == ("trn2.48xlarge", 2, 64)


def test_grouped_query_attention_reads_each_kv_head_once():
    """Llama-2-70B has 64 query heads and 8 KV heads: on 8 cores each core holds 8 query heads
    sharing one KV head, so a decode step's scores read that head's keys once, for 8 queries."""
    spec = get_model("llama-2-70b")
    prog = build_program(spec, Phase(2, 1, 1024, tp=8, decode_step=True), 2)
    scores = next(op for op in prog.ops if op.name == "scores")
    assert (scores.m, scores.k, scores.n, scores.count) == (8, spec.head_dim, 1024, 2)
    assert scores.hbm_elems == scores.k * scores.n * scores.count  # the K cache, loaded once
    assert scores.flops == 2.0 * 2 * 8 * 1 * spec.head_dim * 1024  # every query head still scored


def test_mixtral_that_does_not_fit_the_instance_is_refused_in_one_line():
    with pytest.raises(DoesNotFitError, match="mixtral-8x7b needs .* does not fit on inf2.xlarge") as info:
        simulate(RunConfig(model="mixtral-8x7b", instance="inf2.xlarge", mode="decode"))
    assert "\n" not in str(info.value)
    assert deployment(RunConfig(model="mixtral-8x7b", chip="trn1", mode="decode")).cores_per_copy == 8


def _transformer_presets():
    return [n for n in preset_names() if get_model(n).family != "cnn"]


@pytest.mark.parametrize("name", _transformer_presets())
def test_rope_is_applied_exactly_to_rotary_decoders(name):
    spec = get_model(name)
    ops = [op.name for op in build_program(spec, Phase(1, 16, 16), 2).ops]
    rotary = spec.model_type in ROTARY_MODEL_TYPES
    # Llama 4's and Trinity's NoPE layers (every fourth); Qwen3.5's Gated DeltaNet layers (three of four)
    no_positions = {"llama4": spec.layers // 4, "afmoe": spec.layers // 4, "qwen3_5": spec.layers * 3 // 4,
                    "qwen3_5_moe": spec.layers * 3 // 4}.get(spec.model_type, 0)
    assert ops.count("rope") == (spec.layers - no_positions if rotary else 0)
    if spec.family == "encoder-decoder":  # T5's relative position buckets, looked up once for every layer
        assert (ops.count("position_gather"), ops.count("relative_bias")) == (0, 1)
    elif spec.family != "vision-transformer":  # ViT adds its positions to the patch embeddings
        assert ops.count("position_gather") == (0 if rotary else 1)


def _experts(prog, prefix="experts_gate_up"):
    return [op for op in prog.ops if op.name.startswith(prefix)]


def test_a_mixtral_decode_step_reads_two_experts_of_eight():
    spec = get_model("mixtral-8x7b")
    prog = build_program(spec, Phase(1, 1, 256, decode_step=True), 2)
    experts = _experts(prog, "experts_")
    expert_params = sum(op.params for op in experts)
    assert sum(op.hbm_elems for op in experts) * 8 == expert_params * 2
    weights_read = sum(op.hbm_elems for op in prog.ops if op.kind is OpKind.MATMUL and op.params)
    total = sum(op.params for op in prog.ops)
    assert total == pytest.approx(PUBLISHED_PARAMS["mixtral-8x7b"], rel=0.06)
    # a quarter of the experts, plus attention, router and LM head (4% of the parameters)
    assert 0.25 < weights_read / total < 0.3


def test_a_simulated_mixtral_decode_step_streams_a_quarter_of_the_weights():
    trace = simulate(RunConfig(model="mixtral-8x7b", chip="trn1", mode="decode", seq=64, new_tokens=2))
    step = next(p for p in trace.meta["phases"] if p["name"].startswith("decode"))
    sel = (trace.events["start_ns"] >= step["start_ns"]) & (trace.events["track"] == trace.track_index("dma_read"))
    read_bytes = trace.events["bytes"][sel].sum() * trace.meta["cores_per_copy"]
    assert read_bytes / (PUBLISHED_PARAMS["mixtral-8x7b"] * 2) == pytest.approx(0.27, abs=0.02)


def test_a_large_batch_prefill_loads_an_expert_for_every_block():
    # 1,024 tokens of top 2 of 8: the blockwise kernel's ceil((2048 - 7) / 512) + 7 = 11 blocks, each
    # loading its expert's weights, of the 8 experts' parameters
    prog = build_program(get_model("mixtral-8x7b"), Phase(8, 128, 128), 2)
    experts = [op for op in _experts(prog, "experts_") if op.kind is OpKind.MATMUL]
    assert sum(op.hbm_elems for op in experts) * 8 == sum(op.params for op in experts) * 11


@pytest.mark.parametrize("tokens, touched, loaded", [(1, 2, 2), (3, 5, 6), (16, 8, 8), (1000, 8, 8)])
def test_a_token_step_loads_its_tokens_experts_until_they_are_as_many_as_the_experts(tokens, touched, loaded):
    """Below T x k = E each of the T x k (token, expert) pairs loads its expert (3 tokens: 6 loads of the
    5 experts they touch, 8 x (1 - (3/4)^T) to the nearest expert); from there every expert once."""
    assert experts_touched(8, 2, tokens) == touched
    prog = build_program(get_model("mixtral-8x7b"), Phase(tokens, 1, 128, decode_step=True), 2)
    mlp = next(la for la in prog.layers if la.name == "layer0.mlp")
    gate_up = _experts(Program(prog.ops[mlp.first_op:mlp.first_op + mlp.n_ops]))
    assert sum(op.count for op in gate_up) == loaded
    # each token's rows in its two experts, or in all eight
    assert sum(op.m * op.count for op in gate_up) == (tokens * 2 if tokens * 2 < 8 else tokens * 8)


def test_mixtral_flops_per_token_are_twice_its_active_parameters():
    prog = build_program(get_model("mixtral-8x7b"), Phase(3, 1, 128, decode_step=True), 2)
    assert prog.flops / 3 == pytest.approx(2 * MIXTRAL_ACTIVE_PARAMS, rel=0.04)


SMALL = {"hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 512,
         "vocab_size": 1000}
NEW_FAMILIES = {
    "qwen2": {**SMALL, "num_key_value_heads": 2}, "gemma": {**SMALL, "num_key_value_heads": 1, "head_dim": 128},
    "phi3": SMALL, "gpt_neox": SMALL, "mixtral": {**SMALL, "num_key_value_heads": 2, "num_local_experts": 4},
    "opt": {"hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "ffn_dim": 1024,
            "vocab_size": 1000, "word_embed_proj_dim": 128},
    "gptj": {"n_embd": 256, "n_layer": 2, "n_head": 4, "vocab_size": 1000}, "camembert": SMALL,
}


@pytest.mark.parametrize("model_type", sorted(NEW_FAMILIES))
def test_a_user_config_json_of_each_new_family_simulates(tmp_path, model_type):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": model_type, **NEW_FAMILIES[model_type]}))
    encoder = model_type == "camembert"
    trace = simulate(RunConfig(model=str(path), chip="trn1", mode="inference" if encoder else "decode", seq=32,
                               new_tokens=4))
    assert trace.meta["model_type"] == model_type
    first = "" if encoder else "prefill/"
    assert [n for n in trace.layer_names if n.startswith(first) and n.endswith(".attention")] == [
        f"{first}layer0.attention", f"{first}layer1.attention"]
    names = set(trace.op_names)
    assert ("rope" in names) == (model_type in ROTARY_MODEL_TYPES)
    assert ("experts_gate_up" in names) == (model_type == "mixtral")
    assert ({"projection", "projection_out"} <= names) == (model_type == "opt")


def test_missing_keys_take_the_defaults_of_the_familys_transformers_config(tmp_path):
    specs = {}
    for model_type in ("gemma", "mixtral", "phi3", "gpt_neox", "gptj", "opt"):
        cfg = {k: v for k, v in NEW_FAMILIES[model_type].items()
               if k not in ("num_key_value_heads", "head_dim", "num_local_experts", "word_embed_proj_dim")}
        if "num_attention_heads" in cfg:
            cfg["num_attention_heads"] = 16  # Gemma's 16 default KV heads need as many query heads
        path = tmp_path / f"{model_type}.json"
        path.write_text(json.dumps({"model_type": model_type, **cfg}))
        specs[model_type] = get_model(str(path))
    gemma, mixtral, phi3, neox, gptj, opt = specs.values()
    assert (gemma.head_dim, gemma.kv_heads, gemma.tied_embeddings, gemma.act) == (256, 16, True, "gelu_pytorch_tanh")
    assert (mixtral.kv_heads, mixtral.experts, mixtral.experts_per_token, mixtral.gated_mlp) == (8, 8, 2, True)
    assert (phi3.kv_heads, phi3.tied_embeddings) == (16, False)
    assert (neox.gated_mlp, neox.act, neox.tied_embeddings, neox.learned_positions) == (False, "gelu", False, False)
    assert (gptj.intermediate, gptj.tied_embeddings, gptj.learned_positions, gptj.max_positions) == (
        1024, False, False, 2048)
    assert (opt.embedding_size, opt.tied_embeddings, opt.act, opt.learned_positions) == (256, True, "relu", True)
    assert (opt.max_positions, opt.position_offset) == (2048, 2)


@pytest.mark.parametrize("change, message", [
    ({"num_attention_heads": 0}, "num_attention_heads must be a positive integer, got 0"),
    ({"hidden_size": "64"}, 'hidden_size must be a positive integer, got "64"'),
    ({"head_dim": "x"}, "head_dim must be positive"),
    ({"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 2, "n_positions": "1k"},
     "max_position_embeddings must be positive"),
    ({"num_attention_heads": [2]}, "num_attention_heads must be a positive integer, got \\[2\\]"),
    ({"model_type": "bert", "num_labels": None}, "num_labels must be positive"),
    ({"model_type": "bert", "mlp_tower_sizes": 512}, "mlp_tower_sizes must be a list of positive integers"),
    ({"model_type": "resnet", "hidden_sizes": 64, "depths": [2]}, "hidden_sizes must be a list"),
    ({"model_type": "vgg", "layers": [64, "A"]}, "layers must list convolution widths and 'M' \\(max pool\\)"),
    ({"model_type": "vgg", "layers": ["M", 64]}, "layers must start with a convolution"),
    ({"model_type": "vgg"}, "config.json lacks layers for model_type 'vgg'"),
    ({"model_type": "gptj", "n_embd": 64, "n_layer": 2, "n_head": 2, "rotary_dim": "all"}, "rotary_dim must be"),
    ({"model_type": "gpt_neox", "rotary_pct": 2}, "rotary_pct must be a fraction"),
])
def test_sizes_that_are_no_positive_integers_give_one_line_errors(tmp_path, change, message):
    cfg = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
           "intermediate_size": 128, "vocab_size": 100, **change}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match=message) as info:
        get_model(str(path))
    assert "\n" not in str(info.value)


def test_experts_weights_are_read_once_the_router_has_chosen_them(run):
    trace = run("mixtral-8x7b", "trn2", mode="decode", seq=128, new_tokens=2)
    ev, names = trace.events, trace.op_names
    reads = ev["track"] == trace.track_index("dma_read")
    # a token step's two experts of eight, loaded selectively (the prompt's 128 tokens run all eight, whatever
    # the router chooses); NxD buckets end at prompt + new tokens
    for name in ("decode ctx 130/layer3.mlp", "decode ctx 130/layer20.mlp"):
        layer = trace.layer_names.index(name)
        in_layer = ev["layer"] == layer
        op = np.array([names[o] for o in ev["op"]], dtype=str)
        routed = in_layer & (op == "router_topk")
        expert_reads = in_layer & reads & np.char.startswith(op, "experts_")
        assert expert_reads.any()
        chosen_at = (ev["start_ns"][routed] + ev["dur_ns"][routed]).max()
        assert ev["start_ns"][expert_reads].min() >= chosen_at - 1e-6  # to the float rounding of the times


def test_roberta_positions_and_partial_rotary_follow_their_configs(tmp_path):
    roberta = get_model("roberta-base")
    assert (roberta.max_positions, roberta.position_offset) == (512, 2)  # 514 rows, two before position 0
    with pytest.raises(ConfigError, match="at most 512 positions"):
        simulate(RunConfig(model="roberta-base", chip="inf2", seq=513))
    assert get_model("gpt-j-6b").rotary_fraction == pytest.approx(64 / 256)
    assert get_model("pythia-1.4b").rotary_fraction == pytest.approx(0.25)
    assert get_model("llama-3-8b").rotary_fraction == 1.0


def test_qwen3_32b_and_llama_3_1_8b_have_their_model_cards_parameter_counts():
    from sim.workloads import Phase, build_program

    def params(name):
        spec = get_model(name)
        return sum(op.params for op in build_program(spec, Phase(1, 128, 128), 2).ops)

    assert params("qwen3-32b") == pytest.approx(32.8e9, rel=0.01)  # Qwen/Qwen3-32B model card: 32.8B
    assert params("llama-3.1-8b") == pytest.approx(8.03e9, rel=0.01)  # Llama 3.1 8B: 8.03B
    spec = get_model("qwen3-32b")
    assert (spec.qk_norm, spec.head_dim, spec.kv_heads) == (True, 128, 8)

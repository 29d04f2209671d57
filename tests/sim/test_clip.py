"""CLIP: a vision tower and a text tower over the class prompts, as zero-shot classification
(and the Neuron benchmark) calls transformers' CLIPModel."""

import json

import pytest

from sim.errors import ConfigError
from sim.run import RunConfig, simulate
from sim.workloads import Phase, build_program, get_model, host_bytes

# model cards (Hugging Face, CLIPModel): openai/clip-vit-base-patch32 and clip-vit-large-patch14
CARD_PARAMS = {"clip-vit-base-patch32": 151_277_313, "clip-vit-large-patch14": 427_616_513}


def program(name, batch):
    return build_program(get_model(name), Phase(batch, 224, 224), 4)


@pytest.mark.parametrize("name", sorted(CARD_PARAMS))
def test_parameter_counts_match_the_model_cards(name):
    # the position tables and layer norms (under 0.2%) are not matmul or gather weights
    assert sum(op.params for op in program(name, 1).ops) == pytest.approx(CARD_PARAMS[name], rel=0.005)


def test_the_text_tower_encodes_the_prompts_whatever_the_images():
    one, many = program("clip-vit-base-patch32", 1), program("clip-vit-base-patch32", 64)
    text = [layer for layer in one.layers if layer.name.startswith("text/")]
    assert [layer.name for layer in text][:2] == ["text/embedding", "text/layer0.attention"]
    qkv = [op for op in one.ops if op.name == "qkv"]
    # 12 vision blocks over 1 + 7 x 7 tokens; 12 text blocks over 100 prompts of 9 tokens
    assert [op.m for op in qkv] == [50] * 12 + [900] * 12
    assert [op.m for op in many.ops if op.name == "qkv"] == [64 * 50] * 12 + [900] * 12
    # causal attention in the text tower only
    masks = [i for i, op in enumerate(one.ops) if op.name == "causal_mask"]
    assert len(masks) == 12 and min(masks) > one.layers[[x.name for x in one.layers].index("text/embedding")].first_op


def test_the_towers_run_side_by_side_and_meet_in_the_similarities():
    prog = program("clip-vit-base-patch32", 8)
    first_text = prog.layers[[x.name for x in prog.layers].index("text/embedding")].first_op
    assert prog.ops[first_text].deps == ()
    normalise = next(op for op in prog.ops if op.name == "normalise")
    projections = [i for i, op in enumerate(prog.ops) if op.name in ("visual_projection", "text_projection")]
    assert normalise.deps == tuple(projections)
    logits = next(op for op in prog.ops if op.name == "logits_per_text")
    assert (logits.m, logits.k, logits.n, logits.weights) == (100, 512, 8, False)


def test_an_inference_copies_what_clipmodel_takes_and_returns():
    spec = get_model("clip-vit-base-patch32")
    inputs, outputs = host_bytes(spec, Phase(2, 224, 224), 4)
    # 100 prompts x 9 int64 ids, 2 images of 3 x 224 x 224 FP32 pixels
    assert inputs == 100 * 9 * 8 + 2 * 3 * 224 * 224 * 4
    # logits both ways (2 x 100 each), 102 projected embeddings of 512, the text tower's last
    # hidden state and pooled output (100 x (9 + 1) x 512), the vision tower's (2 x (50 + 1) x 768)
    assert outputs == 4 * (2 * 2 * 100 + 102 * 512 + 100 * 10 * 512 + 2 * 51 * 768)


def test_a_clip_config_json_takes_transformers_defaults_for_what_it_leaves_out(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "clip", "vision_config": {"patch_size": 14}}))
    spec = get_model(str(path))
    assert (spec.hidden, spec.layers, spec.patch_size, spec.projection_dim) == (768, 12, 14, 512)
    assert (spec.text_tower.hidden, spec.text_tower.heads, spec.text_tower.vocab) == (512, 8, 49408)
    assert (spec.num_labels, spec.prompt_tokens) == (100, 9)
    trace = simulate(RunConfig(model=str(path), chip="inf2", batch=2))
    assert trace.meta["family"] == "clip" and any(n.startswith("vision/layer11") for n in trace.layer_names)


@pytest.mark.parametrize("cfg, message", [
    ({"model_type": "clip", "text_config": [1]}, "text_config must be an object"),
    ({"model_type": "clip", "prompt_tokens": 100}, "prompts of 100 tokens are longer than its text tower's 77"),
    ({"model_type": "clip", "projection_dim": 0}, "projection_dim must be positive"),
    ({"model_type": "clip", "text_config": {"num_attention_heads": 0}}, "wrong type or range"),
])
def test_broken_clip_configs_give_one_line_errors(tmp_path, cfg, message):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match=message) as info:
        get_model(str(path))
    assert "\n" not in str(info.value)


def test_an_image_size_off_the_patch_grid_is_refused():
    with pytest.raises(ConfigError, match="image size 200 must be a multiple of the patch size 32"):
        simulate(RunConfig(model="clip-vit-base-patch32", chip="inf2", seq=200))


"""A model copy over several physical cores: each core runs its share, nothing is computed twice."""

from dataclasses import replace

import pytest

from sim.errors import ConfigError
from sim.hardware.chip import get_chip
from sim.metrics import compute_metrics
from sim.run import RunConfig, simulate
from sim.workloads import Phase, build_program, get_model, training_program
from sim.workloads.graph import OpKind
from sim.workloads.training import DataParallel
from sim.workloads.transformer import kv_heads_per_core

RESNET50_FLOPS = 2 * 4.1e9  # torchvision's model card: 4.09 GMAC per 224x224 image, 2 FLOPs each


def test_resnet50_flops_do_not_depend_on_how_many_cores_share_a_copy(monkeypatch):
    two = simulate(RunConfig(model="resnet50", chip="trn2"))
    # the same chip as if it ran one physical core per logical core (LNC=1)
    monkeypatch.setattr("sim.checks.get_chip", lambda key: replace(get_chip(key), lnc_default=1))
    one = simulate(RunConfig(model="resnet50", chip="trn2"))
    assert (two.meta["lnc"], one.meta["lnc"]) == (2, 1)
    flops_two, flops_one = compute_metrics(two).flops, compute_metrics(one).flops
    assert flops_two == pytest.approx(RESNET50_FLOPS, rel=0.02)
    # the 7x7 maps of the last stage (49 positions) split 25 + 24: the busier shard counts twice
    assert flops_two == pytest.approx(flops_one, rel=0.005)
    # two cores share the compute; each still reads all 25.6 M weights (51 MB in BF16)
    assert compute_metrics(two).latency_s < compute_metrics(one).latency_s
    assert compute_metrics(two).hbm_read_bytes == pytest.approx(2 * compute_metrics(one).hbm_read_bytes, rel=0.05)


def test_each_resnet_shard_computes_half_of_every_convolutions_rows():
    spec = get_model("resnet50")
    whole, half = (build_program(spec, Phase(1, 224, 224, tp), 2) for tp in (1, 2))
    stem = next(op for op in whole.ops if op.kind is OpKind.MATMUL)
    assert (stem.m, stem.k, stem.n) == (112 * 112, 3 * 7 * 7, 64)  # 7x7/2 conv: 112x112 outputs
    stem_half = next(op for op in half.ops if op.kind is OpKind.MATMUL)
    assert (stem_half.m, stem_half.k, stem_half.n) == (112 * 112 // 2, 3 * 7 * 7, 64)
    assert stem_half.hbm_elems == stem.hbm_elems == 3 * 7 * 7 * 64  # the weights, whole
    fc = half.ops[-1]
    assert (fc.name, fc.m, fc.k, fc.n) == ("fc", 1, 2048, 500)  # the 1000 classes split


def test_a_resnet_training_step_sums_the_shards_partial_gradients_once_per_layer():
    spec = get_model("resnet18")
    fwd = build_program(spec, Phase(8, 224, 224, 2, training=True), 2)
    step = training_program(fwd, fwd.params_per_layer(), DataParallel())
    shard_sums = [op for op in step.ops if op.name == "grad_shard_allreduce"]
    conv_params = sum(op.params for op in fwd.ops if op.weight_replicas > 1)
    assert sum(op.elems for op in shard_sums) == conv_params  # every convolution weight, once
    assert all(op.rows == 2 for op in shard_sums)
    # each shard updates half of the replicated weights, and all of its share of the classifier
    adamw = sum(op.elems for op in step.ops if op.name.startswith("adamw."))
    assert adamw == conv_params // 2 + 512 * 500


def test_a_cnn_over_several_logical_cores_is_refused():
    with pytest.raises(ConfigError, match="no tensor-parallel CNNs.*--copies"):
        simulate(RunConfig(model="resnet50", chip="trn1", cores=2))
    assert simulate(RunConfig(model="resnet18", chip="trn1", cores=1)).meta["cores_per_copy"] == 1


def _layer(prog, name):
    layer = next(la for la in prog.layers if la.name == name)
    return prog.ops[layer.first_op:layer.first_op + layer.n_ops]


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_vit_patch_embedding_and_head_are_split_over_the_shards_not_repeated(tp):
    """ViT-B/16 at 224x224, one image: 196 patches of 16x16x3 = 768 pixels projected to 768
    features (2 x 196 x 768 x 768 FLOPs) plus 196 x 768 position adds; the CLS token's layer norm
    (768 values, two passes) and its 768 -> 1000 classifier (2 x 768 x 1000 FLOPs)."""
    prog = build_program(get_model("vit-base"), Phase(1, 224, 224, tp), 2)
    patch, head = _layer(prog, "patch_embedding"), _layer(prog, "head")
    assert tp * sum(op.flops for op in patch) == 2 * 196 * 768 * 768 + 196 * 768
    assert tp * sum(op.flops for op in head) == 2 * 768 + 2 * 768 * 1000
    assert tp * sum(op.params for op in patch + head) == 768 * 768 + 768 * 1000
    assert tp * sum(op.hbm_elems for op in patch if op.kind is OpKind.COPY) == 3 * 224 * 224  # the image, once
    # the shards' partial embeddings and logits are summed by one all-reduce each
    reduces = [op.name for op in patch + head if op.kind is OpKind.COLLECTIVE]
    assert reduces == ([] if tp == 1 else ["patch_allreduce", "logits_allreduce"])


def test_a_logical_core_of_one_physical_core_halves_what_each_copy_spans():
    cfg = dict(model="llama-3.1-8b", instance="trn2.3xlarge", mode="decode", cores=4, seq=512, new_tokens=4)
    two = simulate(RunConfig(**cfg), max_events=0)
    one = simulate(RunConfig(**cfg, lnc=1), max_events=0)
    # four logical cores: eight physical at LNC=2 (the chip, one copy), four at LNC=1 (two copies)
    assert (two.meta["lnc"], two.meta["copies"]) == (2, 1)
    assert (one.meta["lnc"], one.meta["copies"], one.meta["cores_per_copy"]) == (1, 2, 4)
    assert compute_metrics(one).per_token_s > 1.5 * compute_metrics(two).per_token_s  # half the HBM bandwidth
    assert simulate(RunConfig(**cfg, lnc=2), max_events=0).meta["total_ns"] == two.meta["total_ns"]


@pytest.mark.parametrize("chip, lnc, message", [
    ("trn1", 2, "Trainium1 takes a logical NeuronCore size \\(LNC\\) of 1, not 2 \\(LNC applies to Trainium2"),
    ("trn2", 4, "Trainium2 takes a logical NeuronCore size \\(LNC\\) of 1 or 2, not 4"),
])
def test_logical_core_sizes_a_chip_lacks_are_refused(chip, lnc, message):
    with pytest.raises(ConfigError, match=message):
        simulate(RunConfig(model="bert-base", chip=chip, lnc=lnc), max_events=0)


@pytest.mark.parametrize("heads, kv_heads, tp, gqa, per_core", [
    (32, 8, 24, "replicate-to-tp-degree", 1),  # 24 cores, a multiple of 8 KV heads: one each, replicated 3x
    (32, 8, 24, "convert-to-mha", 2),  # a KV head per query head: 32 padded to 48, 2 a core
    (64, 8, 24, "convert-to-mha", 3),  # Llama-2-70B on inf2.48xlarge: 64 padded to 72
    (64, 8, 32, "convert-to-mha", 2),  # ... on trn1.32xlarge
    (32, 8, 4, "convert-to-mha", 2),  # 4 cores divide 8 KV heads: split either way
    (32, 8, 12, "replicate-to-tp-degree", 3),  # 12 is no multiple of 8: NxD Inference converts to MHA too
    (40, 40, 32, "replicate-to-tp-degree", 2),  # multi-head attention: 40 heads padded to 64
    (32, 8, 1, "convert-to-mha", 8),  # one core holds the model as it is
])
def test_kv_heads_a_core_keeps_as_the_serving_stacks_shard_grouped_query_attention(heads, kv_heads, tp, gqa,
                                                                                      per_core):
    assert kv_heads_per_core(heads, kv_heads, tp, gqa) == per_core


def test_converting_mistrals_kv_heads_to_one_per_query_head_doubles_each_cores_kv_projection_and_cache():
    spec = get_model("mistral-7b")
    steps = {gqa: build_program(spec, Phase(1, 1, 4096, 24, decode_step=True, gqa=gqa), 2)
             for gqa in ("replicate-to-tp-degree", "convert-to-mha")}
    qkv = {gqa: next(op for op in p.ops if op.name.endswith("qkv")) for gqa, p in steps.items()}
    # 2 query heads a core (32 padded to 48 over 24) and 1 or 2 KV heads, 128 wide
    assert qkv["replicate-to-tp-degree"].n == (2 + 2 * 1) * 128
    assert qkv["convert-to-mha"].n == (2 + 2 * 2) * 128
    scores = {gqa: next(op for op in p.ops if op.name.endswith("scores")) for gqa, p in steps.items()}
    # a decode step reads the keys of its 4,096 positions for each of the core's KV heads
    assert scores["replicate-to-tp-degree"].hbm_elems == 1 * 4096 * 128
    assert scores["convert-to-mha"].hbm_elems == 2 * 4096 * 128


def test_a_copys_memory_holds_the_kv_heads_each_core_keeps():
    cfg = dict(model="llama-2-70b", instance="inf2.48xlarge", cores=24, mode="decode", batch=1, seq=2048,
               new_tokens=8, max_seq=4096, dtype="fp16", attention="compiler")
    one, three = (simulate(RunConfig(**cfg, gqa=gqa), max_events=0).meta["memory_per_core_bytes"]
                  for gqa in ("replicate-to-tp-degree", "convert-to-mha"))
    # two more KV heads a core: keys and values of 80 layers x 4,096 positions x 128 in FP16
    assert three - one == pytest.approx(2 * 80 * 4096 * 2 * 128 * 2)


def test_an_unknown_gqa_sharding_is_refused():
    with pytest.raises(ConfigError, match="unknown GQA sharding 'shard-over-batch': choose one of "
                                          "replicate-to-tp-degree, convert-to-mha"):
        simulate(RunConfig(model="mistral-7b", chip="inf2", mode="decode", gqa="shard-over-batch"))


def test_every_core_keeps_the_whole_latent_cache_of_multi_head_latent_attention():
    cfg = dict(model="deepseek-v3", instance="trn2.48xlarge", cores=64, mode="decode", batch=1, seq=1024,
               new_tokens=2, dtype="fp8")
    short, long = (simulate(RunConfig(**cfg, max_seq=n), max_events=0).meta["memory_per_core_bytes"]
                   for n in (2048, 4096))
    # 2,048 more positions of a 512-wide latent and a 64-wide rotary key in 61 layers, one byte
    # each, on every one of the 64 cores (not split among them)
    assert long - short == pytest.approx(2048 * (512 + 64) * 61)


def test_a_decoders_json_record_says_how_many_kv_heads_each_core_keeps(tmp_path):
    from sim.io import load_file, save_file
    from sim.record import run_record

    cfg = RunConfig(model="mistral-7b", instance="inf2.48xlarge", cores=24, mode="decode", seq=128, new_tokens=4,
                    gqa="convert-to-mha")
    path = tmp_path / "mistral.nvtrace"
    save_file(path, [simulate(cfg, max_events=0)])
    (trace,) = load_file(path)
    assert run_record(trace)["kv_heads_per_core"] == 2
    assert "kv_heads_per_core" not in run_record(simulate(RunConfig(model="bert-base", chip="inf2"), max_events=0))

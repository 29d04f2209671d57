"""The attention kernels NxD Training and NxD Inference run: causal tiles skipped, and which
prompts NxD Inference encodes with the kernel rather than the compiler's ops."""

import pytest

from sim.metrics import compute_metrics
from sim.run import RunConfig, simulate
from sim.workloads import Phase, build_program, get_model
from sim.workloads.training import DataParallel, training_program
from sim.workloads.transformer import causal_keys, context_encoding_kernel


def _op_flops(program, name):
    return sum(op.flops for op in program.ops if op.name == name)


def test_a_causal_flash_kernel_skips_the_key_tiles_after_each_query_tile():
    # 8,192 queries in tiles of 128, keys in sub-tiles of 512 (scores) and tiles of 2,048 (softmax,
    # context). Queries 0-511 (four query tiles) start in key sub-tile 0 and score one sub-tile,
    # queries 512-1023 two, ... queries 7680-8191 sixteen: 512 * 512 * (1 + ... + 16) / 8192 keys
    # a query on average. For the softmax and the context, queries 0-2047 run one large tile,
    # 2048-4095 two, ..., four: 2048 * 2048 * (1 + 2 + 3 + 4) / 8192.
    assert causal_keys(8192, 8192) == (512 * 512 * 136 // 8192, 2048 * 2048 * 10 // 8192) == (4352, 5120)
    # one large tile of keys: only the scores skip sub-tiles (queries 0-511 one, ..., 1536-2047 four)
    assert causal_keys(2048, 2048) == (512 * 512 * 10 // 2048, 2048)
    # a chunk of 512 queries after 1,536 cached positions starts in the last sub-tile: no skipping
    assert causal_keys(512, 2048) == (2048, 2048)
    assert causal_keys(128, 128) == (128, 128)


def test_a_windowed_flash_prompt_also_skips_the_key_tiles_before_its_window():
    # 4,096 queries, a sliding window of 128: a query tile starting at 512k + 128j needs keys from
    # 127 before its first query, within its own 512-key sub-tile except for j = 0 (k >= 1), which
    # reaches into the sub-tile before: (4 x 512 + 7 x (1024 + 3 x 512)) / 32 tiles = 624 keys a
    # query. Of the 2,048-key tiles only the query tile starting at 2048 reaches back into a second.
    assert causal_keys(4096, 4096, window=128) == (624, (31 * 2048 + 4096) // 32) == (624, 2112)
    # chunks of 1,024 positions: a query tile in a chunk's first half scores one sub-tile, in its
    # second half two; every query's chunk lies in one 2,048-key tile
    assert causal_keys(4096, 4096, window=1024, chunked=True) == ((16 * 512 + 16 * 1024) // 32, 2048)
    # tiles wider than the window skip nothing
    assert causal_keys(512, 512, window=128) == (512, 512)


def test_a_sliding_window_layers_prompt_scores_no_negative_keys():
    # gpt-oss: every other layer attends a window of 128 positions. A 512-token prompt (the kernel on
    # Trainium2's two cores a logical core) scores 512 keys a query on every layer; with the
    # compiler's ops the whole masked square, 512 too
    spec = get_model("gpt-oss-20b")
    for flash in (True, False):
        program = build_program(spec, Phase(1, 512, 512, 1, flash=flash), 2)
        scores = [op for op in program.ops if op.name == "scores"]
        assert len(scores) == spec.layers and all(op.n == 512 for op in scores), flash
        assert all(op.flops >= 0 for op in program.ops)


def test_only_a_causal_flash_prompt_skips_tiles():
    spec = get_model("llama-3-8b")

    def flops(**kw):
        return _op_flops(build_program(spec, Phase(1, 8192, 8192, 8, **kw), 2), "scores")

    # every query against every key: 32 heads over 8 cores, head_dim 128, in each of 32 layers
    full = 2 * 8192 * 8192 * 128 * (32 // 8) * 32
    assert flops(flash=False) == full  # the compiler's ops compute the whole masked square
    assert flops(flash=True) == full * 4352 // 8192
    # an encoder is not causal: its kernel has nothing to skip
    bert = get_model("bert-large")
    assert (_op_flops(build_program(bert, Phase(1, 512, 512, 1, flash=True), 2), "scores")
            == _op_flops(build_program(bert, Phase(1, 512, 512, 1, flash=False), 2), "scores"))


@pytest.mark.parametrize("positions, lnc, kernel", [
    (128, 2, False), (256, 2, True), (768, 2, True), (1280, 2, False), (1536, 2, True), (4096, 2, True),
    (2048, 1, False), (4096, 1, True), (8192, 1, True),
])
def test_nxd_inference_picks_its_kernel_for_a_prompt_bucket_as_its_source_does(positions, lnc, kernel):
    assert context_encoding_kernel(positions, lnc) is kernel


@pytest.mark.parametrize("positions, lnc, kernel", [
    (256, 1, False), (512, 1, True), (2048, 1, True), (128, 2, False), (1280, 2, False), (1536, 2, True),
])
def test_attn_kernel_enabled_takes_one_cores_prompt_buckets_from_512_positions(positions, lnc, kernel):
    # attn_kernel_enabled: the unsharded kernel for buckets of 512 and more; two cores a logical
    # core keep their divisibility rules
    assert context_encoding_kernel(positions, lnc, enabled=True) is kernel


def _ttft(chip, attention, **kw):
    cfg = RunConfig(model="qwen3-0.6b", chip=chip, mode="decode", seq=2048, new_tokens=1, attention=attention, **kw)
    return compute_metrics(simulate(cfg)).time_to_first_token_s


def test_a_2048_token_prompt_is_encoded_with_the_compilers_ops_on_one_core_and_the_kernel_on_two():
    # Inferentia2 (LNC=1): below 4,096 positions NxD Inference leaves attention to the compiler
    assert _ttft("inf2", "flash") == _ttft("inf2", "compiler")
    # unless attn_kernel_enabled asks for the kernel
    assert _ttft("inf2", "flash", nki_kernels=("attention",)) < _ttft("inf2", "compiler")
    # Trainium2 (LNC=2): 2,048 positions, a multiple of 512, run the sharded kernel
    assert _ttft("trn2", "flash") < _ttft("trn2", "compiler")


def _backward(checkpoint=""):
    """Llama-3-8B's training step at 8,192 tokens over 8 cores with the flash kernel: 4 query heads
    a core (each GQA group of 4 stacked on the queries of 1 KV head), head_dim 128, 32 layers."""
    forward = build_program(get_model("llama-3-8b"), Phase(1, 8192, 8192, 8, training=True, flash=True), 2)
    step = training_program(forward, forward.params_per_layer(), DataParallel(), checkpoint=checkpoint)
    return step.ops[len(forward.ops):]


def test_flash_attentions_backward_kernel_recomputes_the_scores_and_exponentials_only():
    ops = _backward()
    names = {op.name for op in ops}
    assert {"scores.grad_recompute", "softmax_exp.grad_recompute", "context.grad_input", "softmax.grad",
            "scores.grad_input", "context.grad_weight", "scores.grad_weight"} <= names
    # the log-sum-exp replaces the maximum and the normalisation; the context is never recomputed
    assert not names & {"softmax_max.grad", "softmax_norm.grad", "softmax_exp.grad", "context.recompute",
                        "softmax_max.recompute"}
    # five matmuls of 128-query by 512-key tiles, those below the diagonal: 4,352 keys a query on
    # average (the forward's scores skip the same tiles), 4 x 8,192 query rows, head_dim 128
    kernel = {"scores.grad_recompute", "context.grad_input", "scores.grad_input", "context.grad_weight",
              "scores.grad_weight"}
    flops = sum(op.flops for op in ops if op.name in kernel)
    assert flops == 5 * 2 * (4 * 8192) * 4352 * 128 * 32
    # one exponential and one Vector pass a (query, key) of those tiles
    exp = sum(op.flops for op in ops if op.name == "softmax_exp.grad_recompute")
    assert exp == sum(op.flops for op in ops if op.name == "softmax.grad") == 4 * 8192 * 4352 * 32  # 4 heads a core


def test_selective_checkpointing_leaves_the_flash_kernel_to_its_own_backward():
    def core(ops):
        return sorted((op.name, op.flops) for op in ops if op.fused)

    # NxD calls the kernel itself, not CoreAttention: selective recomputation adds nothing to it
    assert core(_backward("selective")) == core(_backward())
    # full checkpointing reruns the whole forward pass first, the kernel's forward with it
    full = {op.name for op in _backward("full")}
    assert {"scores.recompute", "context.recompute", "softmax_max.recompute"} <= full

"""A mixture of experts' routed experts as NxD Inference runs them (sim.workloads.experts), each
mechanism against a count made by hand from the model's config and NxD's rules."""

import pytest

from sim.errors import ConfigError
from sim.hardware.chip import get_chip
from sim.hardware.instances import get_instance
from sim.lowering import CoreContext, lower
from sim.run import RunConfig, simulate
from sim.workloads import Phase, build_program, get_model
from sim.workloads.experts import (
    ALL_EXPERTS,
    BLOCKWISE,
    CAPACITY,
    SELECTIVE,
    blocks,
    expert_capacity,
    expert_path,
    experts_touched,
)

QWEN3_30B, QWEN3_235B = get_model("qwen3-30b-a3b"), get_model("qwen3-235b-a22b")  # 128 experts, top 8


def test_expected_distinct_experts_a_prompt_touches():
    # E x (1 - (1 - k/E)^T): 512 tokens of top 8 of 128 leave out none (128 x 0.9375^512 < 1e-12)
    assert experts_touched(128, 8, 512) == 128
    assert experts_touched(128, 8, 16) == 82  # 128 x (1 - 0.9375^16) = 82.4
    assert experts_touched(128, 8, 1) == 8
    assert experts_touched(128, 8, 16, among=4) == 3  # a group of 4 of them: 4 x 0.644 = 2.6


def test_the_blockwise_kernel_provisions_blocks_for_the_worst_routing():
    # ceil((T k - (E - 1)) / 512) + E - 1: 4,096 tokens of top 8 over 128 experts, 64 + 127
    assert blocks(4096 * 8, 128, 512) == 191
    assert blocks(4096 * 8, 4, 512) == 67  # a group of 4 experts (EP 32): 64 + 3
    assert blocks(100 * 8, 128, 512) == 129  # 2 + 127
    assert blocks(100, 128, 512) == 100  # never more blocks than pairs


@pytest.mark.parametrize("tokens, seq, ep, factor, path", [
    (8, 1, 1, None, SELECTIVE),  # 8 x 8 / 128 = 0.5 < 1: the chosen experts only
    (16, 1, 1, None, ALL_EXPERTS),  # 16 x 8 / 128 = 1: every expert
    (8, 1, 4, None, ALL_EXPERTS),  # no selective loading with expert parallelism
    (15, 15, 1, None, SELECTIVE),  # a prompt of 15: 120 / 128 < 1
    (63, 63, 1, None, ALL_EXPERTS),  # 504 pairs, under one block of 512
    (4096, 4096, 1, None, BLOCKWISE),
    (4096, 4096, 1, 1.25, CAPACITY),
    (4096, 4096, 1, 16.0, BLOCKWISE),  # a factor of E / k is full capacity: dropless
])
def test_nxd_picks_its_algorithm_by_tokens_top_k_and_experts(tokens, seq, ep, factor, path):
    assert expert_path(tokens, seq, 8, 128, ep, factor) == path


def _ops(spec, phase, *names):
    prog = build_program(spec, phase, 2)
    layer = next(la for la in prog.layers if la.kind == "moe")
    ops = {op.name: op for op in prog.ops[layer.first_op:layer.first_op + layer.n_ops]}
    return [ops[n] for n in names]


def test_a_prompt_runs_every_block_and_loads_an_expert_for_each():
    h, i = QWEN3_30B.hidden, QWEN3_30B.moe_intermediate  # 2048, 768
    gate_up, down = _ops(QWEN3_30B, Phase(1, 4096, 4096), "experts_gate_up", "experts_down")
    assert (gate_up.m, gate_up.k, gate_up.n, gate_up.count) == (512, h, 2 * i, 191)
    assert gate_up.flops == 2 * 191 * 512 * h * 2 * i  # 97,792 rows where 32,768 are routed
    assert gate_up.hbm_elems == 191 * h * 2 * i and down.hbm_elems == 191 * i * h
    assert gate_up.params == 128 * h * 2 * i  # the model's experts, whatever the blocks read
    # with DMA skipping a block of the expert before reuses its weights: the 128 experts touched
    (skipping,) = _ops(QWEN3_30B, Phase(1, 4096, 4096, skip_dma=True), "experts_gate_up")
    assert skipping.hbm_elems == 128 * h * 2 * i and skipping.count == 191


def test_the_blockwise_kernel_transposes_each_block_and_adds_what_the_other_core_and_experts_wrote():
    # Qwen3-30B over 4 logical cores (8 physical at LNC 2): a physical core holds 2048 / 2 = 1024 of
    # the hidden size and 768 / 4 = 192 of each expert's width; 4,096 tokens of top 8 fill 191 blocks
    init, transpose, add, accumulate = _ops(QWEN3_30B, Phase(1, 4096, 4096, 8, lnc=2), "experts_output_init",
                                            "experts_tokens_transpose", "experts_gate_up_add",
                                            "experts_accumulate_add")
    assert init.hbm_write_elems == 4096 * 1024  # the layer's output rows zeroed, the core's half of each
    assert (transpose.m, transpose.n, transpose.count) == (512, 1024, 191)
    assert add.elems == 191 * 512 * 2 * 192  # the other core's partial gate and up projections
    assert accumulate.elems == 191 * 512 * 1024  # each block's rows onto those read back
    # one expert a token (Llama 4 Scout) adds no rows read back; one physical core has no partner
    scout = get_model("llama-4-scout")
    names = {op.name for op in build_program(scout, Phase(1, 4096, 4096, 8, lnc=2), 2).ops}
    assert "experts_tokens_transpose" in names and "experts_accumulate_add" not in names
    names = {op.name for op in build_program(QWEN3_30B, Phase(1, 4096, 4096, 4, lnc=1), 2).ops}
    assert "experts_accumulate_add" in names and "experts_gate_up_add" not in names


def test_a_prompt_under_a_capacity_factor_runs_each_expert_up_to_its_capacity():
    (gate_up,) = _ops(QWEN3_30B, Phase(1, 4096, 4096, capacity_factor=1.25), "experts_gate_up")
    assert expert_capacity(4096, 8, 128, 1.25) == 320  # 4,096 x 8 x 1.25 / 128
    assert (gate_up.m, gate_up.count) == (320, 128)


def test_token_generation_loads_each_tokens_experts_or_all_of_them():
    h, i = QWEN3_30B.hidden, QWEN3_30B.moe_intermediate
    # 8 tokens: one row for each of the 64 (token, expert) pairs, an expert two tokens chose read twice
    (few,) = _ops(QWEN3_30B, Phase(8, 1, 1024, decode_step=True), "experts_gate_up")
    assert (few.m, few.count, few.hbm_elems) == (1, 64, 64 * h * 2 * i)
    # 16 tokens: all 128 experts once, every token through each
    (many,) = _ops(QWEN3_30B, Phase(16, 1, 1024, decode_step=True), "experts_gate_up")
    assert (many.m, many.count, many.hbm_elems) == (16, 128, 128 * h * 2 * i)


def test_expert_parallel_groups_hold_their_experts_and_sum_in_the_blocks_all_reduce():
    # 64 logical cores (128 physical at LNC 2), 32 groups of 2: 4 experts a group, 1536 / 2 = 768 wide
    phase = Phase(1, 4096, 4096, 128, ep=32, lnc=2)
    gate_up, reduce = _ops(QWEN3_235B, phase, "experts_gate_up", "experts_gate_up_reduce")
    assert (gate_up.k, gate_up.n, gate_up.count) == (4096 // 2, 2 * 768, 67)  # H split over the pair
    assert reduce.rows == 2  # the pair's partial gate and up projections summed before the activation
    prog = build_program(QWEN3_235B, phase, 2)
    assert not [op for op in prog.ops if op.collective == "all_to_all"]
    (allreduce,) = [op for op in prog.ops[:200] if op.name == "mlp_allreduce"][:1]
    assert allreduce.rows == 128


def _run_bytes(phase, name, spec=QWEN3_235B):
    """The bytes each DMA descriptor of ``name``'s weights moves on a Trainium2 core."""
    ctx = CoreContext(get_chip("trn2"), "bf16", "bf16", 8, 8, 1, get_instance("trn2.48xlarge").topology,
                      shards=phase.tp)
    (op,) = _ops(spec, phase, name)
    return op.hbm_elems * 2 / lower(ctx, op).dma_transfers


def test_the_layout_sets_the_run_each_weight_descriptor_moves():
    # Qwen3-235B over 64 logical cores (LNC 2): a logical core holds 1536 / 64 = 24 of each expert's
    # intermediate width; its two physical cores take half the 4096 hidden rows each
    prompt = Phase(1, 4096, 4096, 128, lnc=2)
    # the blockwise kernel: a row a partition, its gate and up halves together, 2 x 24 x 2 B
    assert _run_bytes(prompt, "experts_gate_up") == 96
    assert _run_bytes(prompt, "experts_down") == 2048 * 2  # a row of the down weights: the core's 2048 of H
    # expert parallel over 32 groups: 768 wide, 2 x 768 x 2 B
    assert _run_bytes(Phase(1, 4096, 4096, 128, ep=32, lnc=2), "experts_gate_up") == 3072
    # a token step compiled: a gathered expert's shard is one block, a partition's 2048 / 128 = 16
    # consecutive rows of 48 elements in one descriptor, 1,536 B (under the compiler's 2 KiB)
    step = Phase(4, 1, 4096, 128, lnc=2, decode_step=True)
    assert _run_bytes(step, "experts_gate_up") == 16 * 48 * 2
    # the fused MoE kernel takes the gate half of each row apart: 24 x 2 B
    kernel = Phase(4, 1, 4096, 128, lnc=2, decode_step=True, moe_kernel=True)
    assert _run_bytes(kernel, "experts_gate") == 48


def test_moe_settings_are_checked():
    base = dict(model="qwen3-30b-a3b", instance="trn2.48xlarge", mode="decode", seq=256, new_tokens=4, cores=8)
    with pytest.raises(ConfigError, match="cannot split the 8 cores"):
        simulate(RunConfig(**base, ep=16))
    with pytest.raises(ConfigError, match="capacity factor is a positive number"):
        simulate(RunConfig(**base, capacity_factor=0.0))
    with pytest.raises(ConfigError, match="for decode and serve modes"):
        simulate(RunConfig(**{**base, "mode": "training", "new_tokens": 1}, moe_skip_dma=True))
    with pytest.raises(ConfigError, match="not a mixture-of-experts model"):
        simulate(RunConfig(**{**base, "model": "llama-3-8b"}, capacity_factor=1.0))
    with pytest.raises(ConfigError, match="a training step's"):
        simulate(RunConfig(**base, ep=4, expert_imbalance=2.0))

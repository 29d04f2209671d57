"""A mixture of experts' routed experts in inference, for one core's shard, as NxD Inference runs
them: ``neuronx_distributed.modules.moe`` (ExpertMLPsV2, its Experts' fused parallel linears and
the blockwise matmul kernels of the NKI library), which NxD Inference, vLLM Neuron and
optimum-neuron all call.

The layout: a copy's ``R`` logical cores form ``ep`` expert-parallel groups (``moe_ep_degree``),
each holding ``E / ep`` of the experts, each expert split over the group's ``R / ep`` cores
(``moe_tp_degree``) on its intermediate dimension (``ExpertFusedColumnParallelLinear``:
``[experts, hidden, 2 x intermediate / moe_tp]`` for the gate and up projections,
``ExpertFusedRowParallelLinear``: ``[experts, intermediate / moe_tp, hidden]`` for the down one).
Every group sees every token and weighs the outputs of its own experts; the block's all-reduce
(a reduce-scatter with sequence parallelism) sums the groups' and the shards' partial outputs
alike (vllm-neuron docs/design/parallelism/expert_parallelism.md: "a single full-group collective
correctly combines both TP partial sums and EP expert contributions"). On a logical core of two
physical cores the kernels split the hidden size between them ("Hidden dimension sharding (shard
on H): Default sharding strategy", NxD Inference's MoE deep dive,
libraries/nxd-inference/developer_guides/moe-arch-deep-dive.rst), which sum their partial gate
and up projections before the activation ("Requires: Cross-core reduction after first matmul").

Each expert's shard is one contiguous block of device memory. The blockwise kernel reads its
gate and up weights a row to a partition (nki-library bwmm_shard_on_block.py,
load_gate_up_proj_weights: partition ``p`` takes row ``h`` of ``[E, H, 2, I_TP]``, its gate and
up halves, ``2 x I_TP`` contiguous elements); compiled code, which gathers whole experts
(``weight[expert_indices]``) or reads them all, reads a partition's consecutive rows of the
block in its own descriptors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sim.hardware.chip import kernel_settings
from sim.workloads.builder import ProgramBuilder, share

if TYPE_CHECKING:
    from sim.workloads.models import ModelSpec
    from sim.workloads.transformer import Phase

# ExpertMLPsV2's algorithms (kernels.toml [nxd_moe])
SELECTIVE, ALL_EXPERTS, CAPACITY, BLOCKWISE = "selective loading", "all experts", "capacity", "blockwise"


@dataclass(frozen=True)
class ExpertShard:
    """What one physical core holds of a layer's routed experts: ``experts`` of them (its group's),
    ``width`` of each one's intermediate size (its logical core's), of which its matmuls contract
    (gate and up) and produce (down) ``hidden`` of the hidden size, its share among the ``lnc``
    physical cores of its logical core."""

    experts: int
    width: int
    hidden: int
    lnc: int


def expert_shard(spec: ModelSpec, ph: Phase, width: int) -> ExpertShard:
    """The shard of experts ``width`` wide one of ``ph.tp`` physical cores holds (see the module)."""
    ranks = max(1, ph.tp // ph.lnc)
    return ExpertShard(spec.experts // ph.ep, share(width, max(1, ranks // ph.ep)), share(spec.hidden, ph.lnc),
                       min(ph.lnc, ph.tp))


def expert_path(tokens: int, seq: int, top_k: int, experts: int, ep: int = 1,
                capacity_factor: float | None = None) -> str:
    """The algorithm ExpertMLPsV2 runs for a graph of ``tokens`` (``seq`` positions a sequence)
    choosing ``top_k`` of ``experts`` each (expert_mlps_v2.py, forward, inference).

    A token-generation graph (``seq`` 1) loads only the chosen experts' weights while
    ``tokens x top_k / experts`` is below the selective-loading threshold, and otherwise runs
    every token through every expert (with expert parallelism always: "Selective Loading with
    Expert parallelism is not supported in token generation"). A context-encoding (or speculative)
    graph runs the capacity-factor algorithm when a capacity factor below full capacity is set;
    else it loads selectively below the threshold, runs all experts while ``tokens x top_k`` is
    below one block, and the blockwise kernel beyond."""
    t = kernel_settings("nxd_moe")
    selective = tokens * top_k < t["selective_loading_threshold"] * experts and ep == 1
    if seq == 1:
        return SELECTIVE if selective else ALL_EXPERTS
    if capacity_factor is not None and capacity_factor < experts / top_k:
        return CAPACITY
    if selective:
        return SELECTIVE
    return ALL_EXPERTS if tokens * top_k < t["block_size"] else BLOCKWISE


def blocks(pairs: int, experts: int, block: int) -> int:
    """Blocks the blockwise kernel computes for ``pairs`` (token, expert) pairs over ``experts``
    experts (a group's): as many as the worst routing needs, ``ceil((pairs - (E - 1)) / block) +
    E - 1`` (E - 1 experts with one pair each, one block apiece, the rest in one expert's), and
    no more than the pairs (expert_mlps_v2.py forward_blockwise)."""
    return min(pairs, math.ceil((pairs - (experts - 1)) / block) + experts - 1)


def expert_capacity(tokens: int, top_k: int, experts: int, capacity_factor: float) -> int:
    """Rows each expert computes under a capacity factor: ``ceil(T x k x factor / E)``, at most
    every token (expert_mlps_v2.py forward_capacity_factor); the tokens beyond it are dropped."""
    return min(tokens, math.ceil(tokens * top_k * capacity_factor / experts))


def experts_touched(experts: int, per_token: int, tokens: int, among: int | None = None) -> int:
    """Distinct experts ``tokens`` tokens run, expected under uniform routing, in whole experts
    (of the ``among`` experts one expert-parallel group holds; default all of them).

    Each token picks ``per_token`` (k) of the ``experts`` (E) experts, uniformly and independently
    of the other tokens: an expert is left out by one token with probability 1 - k/E and by all T
    tokens with (1 - k/E)^T, so E x (1 - (1 - k/E)^T) experts are touched on average: k for one
    token, nearly all of them for a large batch. Trained routers favour some experts; for a given
    number of tokens that touches fewer of them, so uniform routing is the upper bound.
    """
    among = experts if among is None else among
    expected = among * (1.0 - (1.0 - per_token / experts) ** tokens)
    return max(min(among, math.ceil(per_token * among / experts)), min(among, round(expected)))


def _expert_work(spec: ModelSpec, ph: Phase, tokens: int, experts: int) -> tuple[str, int, int, int]:
    """The algorithm ExpertMLPsV2 runs for ``tokens`` tokens on a core holding ``experts`` of them,
    the rows of each of its expert matmuls, how many there are and how many experts' weights they
    read (see :func:`routed_experts`)."""
    top_k = spec.experts_per_token
    pairs = tokens * top_k
    path = expert_path(tokens, ph.seq, top_k, spec.experts, ph.ep, ph.capacity_factor)
    if path == SELECTIVE:
        return path, 1, pairs, pairs
    if path == ALL_EXPERTS:
        return path, tokens, experts, experts
    if path == CAPACITY:
        return path, expert_capacity(tokens, top_k, spec.experts, ph.capacity_factor), experts, experts
    block = kernel_settings("nxd_moe")["block_size"]
    count = blocks(pairs, experts, block)
    return path, block, count, experts_touched(spec.experts, top_k, tokens, experts) if ph.skip_dma else count


def routed_experts(b: ProgramBuilder, spec: ModelSpec, ph: Phase, tokens: int, width: int, chosen: int) -> None:
    """The routed experts of one layer for ``tokens`` tokens, after the router's op ``chosen``.

    Selective loading runs each token's ``k`` experts one token at a time (expert_mlps_v2.py
    forward_selective_loading: ``mlp_op(hidden_states[t], expert_indices=expert_index[t])``): a
    matmul of one row for each of the ``T x k`` (token, expert) pairs, each reading its expert's
    weights, so an expert two tokens chose is read twice. All experts (forward_all_experts) runs
    every token through every expert of the core's group, reading each once, and sums their
    outputs weighed by the affinities (zero for the experts a token did not choose). The capacity
    factor's algorithm gathers each expert's tokens up to its capacity, runs them, and scatters
    them back. The blockwise kernel (:func:`blocks`) computes every block of ``block_size`` rows,
    gathering its tokens' hidden states, loading its expert's weights and adding its rows of output
    into the layer's (read and written back when tokens choose several experts). Its engines' work
    is that of blockwise_mm_baseline_shard_hidden, the kernel NxD calls at LNC 2 (nki-library
    nkilib/experimental/moe/forward/bwmm_shard_on_H.py): it zeroes the layer's rows of output
    (output_initialization_shard), turns each block's tokens around on the TensorE
    (transpose_hidden_states: nc_transpose of ``[B, H / lnc]``), adds the partial gate and up
    projections the other physical core sends (compute_gate_and_up_projections_shard: sendrecv,
    tensor_tensor add), and adds each block's output rows to those read back (compute_block_output_shard:
    tensor_tensor add with block_old, when ``top_k > 1``); the LNC 1 kernel (blockwise_mm, not
    public) is taken to do the same but the cross-core sums. With DMA skipping
    (``ph.skip_dma``: blockwise_matmul_config skip_dma_token and skip_dma_weight) a block of the
    same expert as the one before reuses its weights, so the distinct experts the tokens chose are
    read (:func:`experts_touched`), and padded rows move nothing.

    A token-generation graph with the fused MoE kernel (``ph.moe_kernel``: NxD's MoEFusedTKG,
    moe_fused_nki_kernel_enabled, nki-library moe_tkg) runs selective loading or all experts as
    one NKI kernel, by the same threshold (moe_fused_tkg.py: ``is_all_expert = perc_experts_loaded
    >= DEFAULT_SELECTIVE_LOADING_THRESHOLD``), its gate and up projections apart: it takes the
    gate (or up) half of each row of the ``[E_L, H, 2, I]`` weights, ``I`` contiguous elements.
    """
    shard = expert_shard(spec, ph, width)
    top_k = spec.experts_per_token
    path, rows, count, loads = _expert_work(spec, ph, tokens, shard.experts)
    local_pairs = math.ceil(tokens * top_k * shard.experts / spec.experts)  # the pairs choosing the group's experts
    read_after = -1 if path in (ALL_EXPERTS, CAPACITY) else chosen  # every expert's weights, whatever the choice
    blockwise = path == BLOCKWISE
    kernel = blockwise or (ph.moe_kernel and ph.seq == 1)
    moved = local_pairs if blockwise and ph.skip_dma else rows * count  # token rows a block's DMA moves
    h, i = shard.hidden, shard.width
    gate_up = dict(count=count, read_after=read_after, contiguous_weights=not kernel)
    with b.fused(kernel):
        if blockwise:  # the kernel zeroes the rows of output it accumulates into
            b.copy_out("experts_output_init", elems=tokens * h, rows=tokens)
        if blockwise or path == CAPACITY:
            b.gather("experts_tokens", rows=moved, row_elems=h, table_rows=0, shared=True)
        if blockwise:  # each block's tokens turned around on the TensorE, hidden size onto partitions
            b.transpose("experts_tokens_transpose", rows, h, count=count)
        if kernel and not blockwise:  # the gate and up halves of each weight row apart
            for name, act in (("experts_gate", spec.act), ("experts_up", "")):
                b.matmul(name, rows, h, i, act=act, hbm_elems=loads * h * i, params=shard.experts * h * i, **gate_up)
        else:
            b.matmul("experts_gate_up", rows, h, 2 * i, act=spec.act, hbm_elems=loads * h * 2 * i,
                     params=shard.experts * h * 2 * i, **gate_up)
        b.collective("experts_gate_up_reduce", elems=rows * count * 2 * i, ranks=shard.lnc)
        if blockwise and shard.lnc > 1:  # each physical core adds the partial sums the other sent
            b.vector("experts_gate_up_add", elems=rows * count * 2 * i, rows=rows * count)
        b.vector("gate_mul", elems=rows * count * i, rows=rows * count)
        b.matmul("experts_down", rows, i, h, count=count, hbm_elems=loads * i * h, params=shard.experts * i * h,
                 read_after=read_after, contiguous_weights=not kernel and shard.lnc == 1)
        if blockwise:
            if top_k > 1:  # each block's rows added to what the token's other experts wrote
                b.gather("experts_accumulate", rows=moved, row_elems=h, table_rows=0, shared=True)
                b.vector("experts_accumulate_add", elems=rows * count * h, rows=rows * count)
            b.copy_out("experts_output", elems=moved * h, rows=moved)
        elif path == CAPACITY:
            b.gather("experts_combine", rows=local_pairs, row_elems=h, table_rows=0, shared=True)
        else:
            b.vector("experts_combine", elems=rows * count * h, rows=tokens)

"""Training step: the forward program, its backward pass, gradient all-reduce and optimizer.

Follows how teams train on Trainium: BF16 auto-cast compute, activations saved to device memory
in the forward pass and re-read in the backward pass, gradients all-reduced across data-parallel
workers in buckets as the backward pass fills them (torch-neuronx reduces gradients in buckets
of ``ALLREDUCE_GRADIENTS_BUCKET_SIZE_MB``, 50 MB by default), overlapping the rest of the
backward pass, and AdamW on FP32 master weights. A step that accumulates gradients runs several
micro-batches' forward and backward passes, adding up their weight gradients in device memory;
the all-reduces overlap only the last one's backward pass, and the optimizer follows it once.

With ZeRO-1 each data-parallel rank keeps the optimizer state of ``1/dp`` of the parameters:
the buckets are reduce-scattered instead of all-reduced, each rank updates its share, and the
updated BF16 weights are all-gathered. With activation checkpointing only each layer's input is
kept from the forward pass; the backward pass recomputes a layer's forward ops (saving their
outputs for its gradient ops) just before it needs them. Selective checkpointing (NxD Training's
``activations_checkpoint_granularity: selective`` recomputing ``[CoreAttention, LlamaMLP]``)
recomputes only the MLPs and attention's core (scores, softmax, context), keeping the outputs of
the attention's projections and of the blocks' norms and residual adds. Of what is recomputed,
only what a gradient needs runs again: torch-xla's lazy tensors compute what a step's results
reach, so a checkpointed MLP's last projection, and the collective after it, are not rerun.

Flash attention is an NKI kernel with a backward kernel of its own (``flash_attn_bwd``, which NxD
calls directly, not through ``CoreAttention``): it keeps only the softmax's log-sum-exp from the
forward pass and, per tile of 128 queries and 512 keys, recomputes the scores and their
exponentials from it (no maximum, no normalisation, no context) and, with attention dropout,
draws the forward's mask again from its seed and applies it, then computes the gradient of
the probabilities (dY V^T), the softmax's gradient in one pass, turns it around on the array,
and the query, key and value gradients. It does that with or without activation checkpointing,
and selective checkpointing leaves it alone; full checkpointing reruns the forward kernel first.

Weights that every shard of a copy holds whole (a convolution whose output rows the shards
split) get a partial gradient on each shard: the shards sum it by a reduce-scatter, each updates
its share of those weights and the shards gather the updated weights back, which moves about as
much as one all-reduce over the shards; it is modelled as that all-reduce, before the
data-parallel one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from sim.hardware.chip import kernel_settings
from sim.workloads.builder import share
from sim.workloads.graph import Layer, Op, OpKind, Program

CHECKPOINTS = ("full", "selective")  # activation checkpointing granularities
# the ops of attention's core, as sim.workloads.transformer names them: what selective
# checkpointing recomputes of an attention layer
CORE_ATTENTION = frozenset(("scores", "causal_mask", "softmax_max", "softmax_exp", "softmax_norm", "probs_dropout",
                            "probs_transpose", "context"))

# a block's norm, its output's dropout and the residual add, outside its MLP module (NxD's
# LlamaDecoderLayer holds them): selective checkpointing keeps their outputs, as it keeps the
# attention's projections
BLOCK_EDGES = frozenset(("layernorm", "layernorm_transpose", "dropout", "residual"))
# layers that checkpointing wraps: the model's blocks, never its embedding or heads (transformers'
# gradient checkpointing wraps each encoder or decoder layer, NxD's full granularity each
# transformer layer)
UNCHECKPOINTED = frozenset(("embedding", "head"))


def recomputed(op: Op, layer: Layer, checkpoint: str) -> bool:
    """Whether activation checkpointing of granularity ``checkpoint`` ("" for none) recomputes
    ``op`` of ``layer`` in the backward pass instead of keeping its output (a flash-attention
    kernel recomputes what it needs in its own backward pass, :func:`_flash_backward`)."""
    if checkpoint == "selective":
        return ((layer.kind in ("mlp", "moe") and op.name not in BLOCK_EDGES)
                or (layer.kind == "attention" and op.name in CORE_ATTENTION and not op.fused))
    return checkpoint == "full" and layer.kind not in UNCHECKPOINTED

FP32_BYTES = 4
ADAMW_PASSES = 12.0  # elementwise steps of one AdamW update (moments, bias correction, sqrt, div, decay)
ADAMW_READ_WORDS = 4  # master weight, gradient, first and second moment
ADAMW_WRITE_WORDS = 3  # master weight, first and second moment
WEIGHT_BYTES = 2  # the BF16 weights ZeRO-1 gathers after the update


@dataclass(frozen=True)
class DataParallel:
    """How gradients meet across the ``ranks`` data-parallel copies: in buckets of at least
    ``bucket_elems`` gradients (0: one per layer), reduce-scattered onto optimizer shards with
    ``zero1``."""

    ranks: int = 1
    bucket_elems: int = 0
    zero1: bool = False


def _save_activation(op: Op) -> Op:
    """``op`` writing its output for the backward pass (a fused attention kernel keeps its tiles
    in SBUF and recomputes them in its backward pass instead)."""
    if op.kind in (OpKind.MATMUL, OpKind.VECTOR, OpKind.SCALAR) and not op.fused:
        return replace(op, hbm_write_elems=op.hbm_write_elems + op.out_elems)
    return op


def _flash_backward(kernel: dict[str, Op]) -> list[Op]:
    """The backward kernel of a flash-attention forward kernel (its ops by name, as
    :func:`sim.workloads.transformer._scores_softmax_context` builds them; deps are filled in by
    the caller). It works in tiles of as many keys as the forward's scores (kernels.toml), so a
    causal kernel skips what the forward's scores skipped."""
    scores, context, exp = kernel["scores"], kernel["context"], kernel["softmax_exp"]
    keys = scores.n  # keys a query meets, tile-rounded
    rows, qk_dim, v_dim = scores.m, scores.k, context.n
    key_tiles = -(-keys // kernel_settings("flash_attention")["score_tile"])
    transpose = kernel["probs_transpose"]

    def per_key(op: Op) -> Op:  # an op over the forward's probabilities, over the backward's tiles instead
        return replace(op, elems=op.elems // context.k * keys)

    ops = [replace(scores, name="scores.grad_recompute"),  # reads the keys
           replace(per_key(exp), name="softmax_exp.grad_recompute")]  # exp(scores - log-sum-exp)
    if "causal_mask" in kernel:
        ops.insert(1, replace(per_key(kernel["causal_mask"]), name="causal_mask.grad_recompute"))
    if "probs_dropout" in kernel:  # the same mask, drawn again from the seed, and the 1/(1-p) scale
        ops.append(replace(per_key(kernel["probs_dropout"]), name="probs_dropout.grad_recompute"))
    return ops + [
        # D = rowsum(dY * Y), one number per query
        Op(name="context.rowsum", kind=OpKind.VECTOR, elems=rows * v_dim * context.count, rows=rows * context.count,
           reduced=rows * context.count, dtype_bytes=context.dtype_bytes, fused=True),
        # the probabilities' gradient, dY V^T, reading the values
        replace(context, name="context.grad_input", k=v_dim, n=keys),
        # the scores' gradient P * (dP - D), one Vector pass
        replace(per_key(exp), name="softmax.grad", kind=OpKind.VECTOR, act="", passes=1.0),
        # each key tile turns the queries and their output gradient around (Q^T, dY^T) for dK and
        # dV, and the scores' gradient for dQ
        replace(transpose, name="queries_transpose", m=qk_dim, n=rows * key_tiles),
        replace(transpose, name="output_grad_transpose", m=v_dim, n=rows * key_tiles),
        replace(transpose, name="probs_transpose.grad", n=keys),
        replace(scores, name="scores.grad_input", k=keys, n=qk_dim, hbm_elems=0),  # dQ
        replace(context, name="context.grad_weight", m=keys, k=rows, n=v_dim, hbm_elems=0),  # dV
        replace(scores, name="scores.grad_weight", m=keys, k=rows, n=qk_dim, hbm_elems=0),  # dK
    ]


def _backward_ops(op: Op, accumulate: bool) -> list[Op]:
    """Gradient ops of one forward op outside a fused kernel (their deps are filled in by the caller); with
    ``accumulate`` a weight gradient is added to the one earlier micro-batches left in memory."""
    if op.kind is OpKind.MATMUL:
        # dX = dY @ W^T reads W again (or the forward's other operand, saved when it was an
        # activation); dW = X^T @ dY reads the forward's input X back from memory
        weights = op.params > 0 or op.weights  # its own or tied to another op's (an LM head's)
        grad_elems = op.k * op.n * op.count if weights else 0
        operand = op.hbm_elems if op.weights else op.k * op.n * op.count
        grad_in = replace(op, name=f"{op.name}.grad_input", m=op.m, k=op.n, n=op.k, act="",
                          hbm_elems=operand, hbm_write_elems=0, deps=())
        # (a weight gradient sums over the samples: its output does not divide into them)
        grad_w = replace(op, name=f"{op.name}.grad_weight", m=op.k, k=op.m, n=op.n, act="", weights=False,
                         hbm_elems=grad_elems if accumulate else 0, hbm_write_elems=grad_elems, deps=(), items=1)
        reload = Op(name=f"{op.name}.reload_input", kind=OpKind.COPY, elems=op.m * op.k * op.count,
                    rows=op.m * op.count, hbm_elems=op.m * op.k * op.count, dtype_bytes=op.dtype_bytes)
        return [grad_in, reload, grad_w]
    if op.kind in (OpKind.VECTOR, OpKind.SCALAR, OpKind.GPSIMD):
        passes = op.passes * 2 if op.grad_passes is None else op.grad_passes
        return [replace(op, name=f"{op.name}.grad", passes=passes, hbm_elems=op.out_elems,
                        hbm_write_elems=0, deps=())] if passes else []
    if op.kind is OpKind.GATHER:
        return [replace(op, name=f"{op.name}.grad", kind=OpKind.GPSIMD, hbm_elems=0,
                        hbm_write_elems=op.elems, deps=())]
    if op.kind in (OpKind.COLLECTIVE, OpKind.TRANSPOSE) and op.grad_passes != 0:
        return [replace(op, name=f"{op.name}.grad", deps=())]  # the gradient is summed or turned around likewise
    return []


def training_program(forward: Program, params_per_layer: list[int], dp: DataParallel, *, accumulate: bool = False,
                     update: bool = True, checkpoint: str = "") -> Program:
    """Append backward, data-parallel gradient reduction and AdamW to ``forward``.

    One micro-batch of a step that accumulates gradients: with ``accumulate`` its weight
    gradients add to those of the micro-batches before it (read, then written back); without
    ``update`` it ends with its backward pass, leaving the reduction and the optimizer to the
    step's last micro-batch. ``checkpoint`` ("full" or "selective", :func:`recomputed`)
    recomputes forward ops in the backward pass instead of keeping their outputs; a layer's last
    op's output, the next layer's input, is always kept.
    """
    ends = {la.first_op + la.n_ops - 1 for la in forward.layers}
    dropped = {i for la in forward.layers for i in range(la.first_op, la.first_op + la.n_ops)
               if recomputed(forward.ops[i], la, checkpoint)} - ends
    again = _run_again(forward.ops, dropped)  # what no gradient reads is neither kept nor rerun
    prog = Program(ops=[op if i in dropped else _save_activation(op)
                        for i, op in enumerate(forward.ops)], layers=list(forward.layers))
    reductions = _Reductions(prog, dp)
    prev = len(prog.ops) - 1  # the backward chain; reductions hang off it without blocking it
    for li in range(len(forward.layers) - 1, -1, -1):
        layer = forward.layers[li]
        start = len(prog.ops)
        fwd_ops = range(layer.first_op, layer.first_op + layer.n_ops)
        # the layer's recomputed ops again, from what was kept, keeping their outputs this time
        for fi in (fi for fi in fwd_ops if fi in again):
            op = forward.ops[fi]
            if op.kind is OpKind.COLLECTIVE and op.collective == "send":
                continue  # what a pipeline stage received or sent is not sent again
            prog.ops.append(replace(_save_activation(op), name=f"{op.name}.recompute", deps=(prev,)))
            prev = len(prog.ops) - 1
        for grads in _layer_gradients(forward.ops, fwd_ops, accumulate):
            for op in grads:
                prog.ops.append(replace(op, deps=(prev,)))
                prev = len(prog.ops) - 1
        if update:
            reductions.layer_done(forward, layer, params_per_layer[li], li, prev)
        prog.layers.append(replace(layer, name=f"{layer.name}.backward", first_op=start,
                                   n_ops=len(prog.ops) - start))
    if update:
        reductions.flush(prev)
        _optimizer(prog, forward, reductions.updated(len(forward.layers)), tuple(reductions.ops) + (prev,), dp)
    return prog


def _run_again(ops: list[Op], recompute: set[int]) -> set[int]:
    """The ops of ``recompute`` that the backward pass runs again. torch-xla's lazy tensors compute
    only what a step's results reach, so a recomputed op runs only if a gradient reads its output
    (a Vector, Scalar or GpSimd op's gradient reads it, unless it has none; a matmul's weight
    gradient reads its input; a fused kernel's backward reads its outputs) or a recomputed op that
    runs reads it: the last projection of a checkpointed MLP and the collective after it are never
    run again. A dropout drawn again needs only the random number generator, not its input."""
    readers: dict[int, list[int]] = {}
    for i, op in enumerate(ops):
        for d in op.deps:
            readers.setdefault(d, []).append(i)
    run: set[int] = set()
    for i in sorted(recompute, reverse=True):  # an op's readers come after it
        op = ops[i]
        if (op.fused or (op.kind in (OpKind.VECTOR, OpKind.SCALAR, OpKind.GPSIMD) and op.grad_passes != 0)
                or any((r in run and not ops[r].random) or ops[r].kind is OpKind.MATMUL
                       for r in readers.get(i, ()))):
            run.add(i)
    return run


def _layer_gradients(ops: list[Op], layer_ops: range, accumulate: bool) -> Iterator[list[Op]]:
    """The gradient ops of a layer's forward ops, last op first; a fused kernel's ops together."""
    kernel: dict[str, Op] = {}
    for fi in reversed(layer_ops):
        op = ops[fi]
        if op.fused:
            kernel[op.name] = op
            if fi == layer_ops.start or not ops[fi - 1].fused:  # the kernel's first op
                yield _flash_backward(kernel)
                kernel = {}
            continue
        yield _backward_ops(op, accumulate)


class _Reductions:
    """The gradient reductions of a backward pass: a bucket goes out once it holds enough
    gradients, hanging off the backward op that completed it."""

    def __init__(self, prog: Program, dp: DataParallel) -> None:
        self.prog, self.dp = prog, dp
        self.ops: list[int] = []
        self.own: dict[int, int] = {}  # layer -> parameters this core reduces and updates
        self.pending = 0

    def layer_done(self, forward: Program, layer: Layer, params: int, li: int, after: int) -> None:
        replicated, shards = _replicated(forward, layer)
        own = params - replicated + share(replicated, shards)
        if replicated and shards > 1:  # a partial gradient on every shard: summed over them first
            self.prog.ops.append(Op(name="grad_shard_allreduce", kind=OpKind.COLLECTIVE, elems=replicated,
                                    rows=shards, dtype_bytes=FP32_BYTES, deps=(after,)))
            after = len(self.prog.ops) - 1
            self.ops.append(after)
        self.own[li] = own
        self.pending += own
        if self.pending and self.pending >= self.dp.bucket_elems:
            self.flush(after)

    def flush(self, after: int) -> None:
        if self.dp.ranks > 1 and self.pending:
            kind = "reduce_scatter" if self.dp.zero1 else "all_reduce"
            self.prog.ops.append(Op(name=f"grad_{kind.replace('_', '')}", kind=OpKind.COLLECTIVE, elems=self.pending,
                                    rows=self.dp.ranks, dtype_bytes=FP32_BYTES, collective=kind,
                                    across_copies=True, deps=(after,)))
            self.ops.append(len(self.prog.ops) - 1)
        self.pending = 0

    def updated(self, layers: int) -> list[int]:
        """Parameters of each layer this core's optimizer updates."""
        ranks = self.dp.ranks if self.dp.zero1 else 1
        return [share(self.own.get(li, 0), ranks) for li in range(layers)]


def _replicated(forward: Program, layer: Layer) -> tuple[int, int]:
    """Parameters of ``layer`` that every one of its shards holds whole, and how many shards."""
    ops = [op for op in forward.ops[layer.first_op:layer.first_op + layer.n_ops] if op.weight_replicas > 1]
    return sum(op.params for op in ops), max((op.weight_replicas for op in ops), default=1)


def _optimizer(prog: Program, forward: Program, params_per_layer: list[int], deps: tuple[int, ...],
               dp: DataParallel) -> None:
    start = len(prog.ops)
    for li, params in enumerate(params_per_layer):
        if not params:
            continue
        prog.ops.append(Op(name=f"adamw.{forward.layers[li].name}", kind=OpKind.VECTOR, elems=params,
                           rows=params, passes=ADAMW_PASSES, dtype_bytes=FP32_BYTES,
                           hbm_elems=params * ADAMW_READ_WORDS, hbm_write_elems=params * ADAMW_WRITE_WORDS,
                           deps=deps))
    if dp.zero1 and dp.ranks > 1 and len(prog.ops) > start:  # every rank gets the others' updated weights
        total = sum(params_per_layer) * dp.ranks
        prog.ops.append(Op(name="param_allgather", kind=OpKind.COLLECTIVE, elems=total, rows=dp.ranks,
                           dtype_bytes=WEIGHT_BYTES, collective="all_gather", across_copies=True,
                           deps=tuple(range(start, len(prog.ops)))))
    if len(prog.ops) > start:
        prog.layers.append(replace(forward.layers[0], name="optimizer", kind="optimizer", first_op=start,
                                   n_ops=len(prog.ops) - start))

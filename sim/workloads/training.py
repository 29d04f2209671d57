"""Training step: the forward program, its backward pass, gradient all-reduce and optimizer.

Follows how teams train on Trainium: BF16 auto-cast compute, activations saved to device memory
in the forward pass and re-read in the backward pass, per-layer gradient all-reduce across
data-parallel workers overlapping the backward pass, and AdamW on FP32 master weights. A step
that accumulates gradients runs several micro-batches' forward and backward passes, adding up
their weight gradients in device memory; the all-reduces overlap only the last one's backward
pass, and the optimizer follows it once.

Weights that every shard of a copy holds whole (a convolution whose output rows the shards
split) get a partial gradient on each shard: the shards sum it by a reduce-scatter, each updates
its share of those weights and the shards gather the updated weights back, which moves about as
much as one all-reduce over the shards; it is modelled as that all-reduce, before the
data-parallel one.
"""

from __future__ import annotations

from dataclasses import replace

from sim.workloads.builder import share
from sim.workloads.graph import Layer, Op, OpKind, Program

FP32_BYTES = 4
ADAMW_PASSES = 12.0  # elementwise steps of one AdamW update (moments, bias correction, sqrt, div, decay)
ADAMW_READ_WORDS = 4  # master weight, gradient, first and second moment
ADAMW_WRITE_WORDS = 3  # master weight, first and second moment


def _save_activation(op: Op) -> Op:
    if op.kind in (OpKind.MATMUL, OpKind.VECTOR, OpKind.SCALAR):
        return replace(op, hbm_write_elems=op.hbm_write_elems + op.out_elems)
    return op


def _backward_ops(op: Op, accumulate: bool) -> list[Op]:
    """Gradient ops of one forward op (their deps are filled in by the caller); with
    ``accumulate`` a weight gradient is added to the one earlier micro-batches left in memory."""
    saved = op.out_elems
    if op.kind is OpKind.MATMUL:
        weights = op.params > 0 or op.hbm_elems > 0  # its own or tied to another op's (an LM head's)
        grad_elems = op.k * op.n * op.count if weights else 0
        grad_in = replace(op, name=f"{op.name}.grad_input", m=op.m, k=op.n, n=op.k, act="",
                          hbm_elems=op.hbm_elems + saved, hbm_write_elems=0, deps=())
        grad_w = replace(op, name=f"{op.name}.grad_weight", m=op.k, k=op.m, n=op.n, act="", weights=False,
                         hbm_elems=grad_elems if accumulate else 0, hbm_write_elems=grad_elems, deps=())
        return [grad_in, grad_w]
    if op.kind in (OpKind.VECTOR, OpKind.SCALAR, OpKind.GPSIMD):
        return [replace(op, name=f"{op.name}.grad", passes=op.passes * 2, hbm_elems=saved,
                        hbm_write_elems=0, deps=())]
    if op.kind is OpKind.GATHER:
        return [replace(op, name=f"{op.name}.grad", kind=OpKind.GPSIMD, hbm_elems=0,
                        hbm_write_elems=op.elems, deps=())]
    if op.kind in (OpKind.ALLREDUCE, OpKind.TRANSPOSE):  # the gradient is summed or turned around likewise
        return [replace(op, name=f"{op.name}.grad", deps=())]
    return []


def training_program(forward: Program, params_per_layer: list[int], dp: int, *, accumulate: bool = False,
                     update: bool = True) -> Program:
    """Append backward, data-parallel gradient all-reduce and AdamW to ``forward``.

    One micro-batch of a step that accumulates gradients: with ``accumulate`` its weight
    gradients add to those of the micro-batches before it (read, then written back); without
    ``update`` it ends with its backward pass, leaving the all-reduce and the optimizer to the
    step's last micro-batch.
    """
    prog = Program(ops=[_save_activation(op) for op in forward.ops], layers=list(forward.layers))
    allreduces: list[int] = []
    own = list(params_per_layer)  # parameters whose gradients this core reduces and updates
    prev = len(prog.ops) - 1  # the backward chain; all-reduces hang off it without blocking it
    for li in range(len(forward.layers) - 1, -1, -1):
        layer = forward.layers[li]
        start = len(prog.ops)
        for fi in range(layer.first_op + layer.n_ops - 1, layer.first_op - 1, -1):
            for op in _backward_ops(forward.ops[fi], accumulate):
                prog.ops.append(replace(op, deps=(prev,)))
                prev = len(prog.ops) - 1
        if update:
            own[li] = _reduce_gradients(prog, forward, layer, params_per_layer[li], dp, prev, allreduces)
        prog.layers.append(replace(layer, name=f"{layer.name}.backward", first_op=start,
                                   n_ops=len(prog.ops) - start))
    if update:
        _optimizer(prog, forward, own, tuple(allreduces) + (prev,))
    return prog


def _reduce_gradients(prog: Program, forward: Program, layer: Layer, params: int, dp: int, after: int,
                      allreduces: list[int]) -> int:
    """Append the all-reduces of one layer's gradients, hanging off op ``after`` of the backward
    chain (listed in ``allreduces``); return how many parameters this core then updates."""
    replicated, shards = _replicated(forward, layer)
    own = params - replicated + share(replicated, shards)
    if replicated and shards > 1:
        prog.ops.append(Op(name="grad_shard_allreduce", kind=OpKind.ALLREDUCE, elems=replicated, rows=shards,
                           dtype_bytes=FP32_BYTES, deps=(after,)))
        after = len(prog.ops) - 1
        allreduces.append(after)
    if dp > 1 and own:
        prog.ops.append(Op(name="grad_allreduce", kind=OpKind.ALLREDUCE, elems=own, rows=dp,
                           dtype_bytes=FP32_BYTES, across_copies=True, deps=(after,)))
        allreduces.append(len(prog.ops) - 1)
    return own


def _replicated(forward: Program, layer: Layer) -> tuple[int, int]:
    """Parameters of ``layer`` that every one of its shards holds whole, and how many shards."""
    ops = [op for op in forward.ops[layer.first_op:layer.first_op + layer.n_ops] if op.weight_replicas > 1]
    return sum(op.params for op in ops), max((op.weight_replicas for op in ops), default=1)


def _optimizer(prog: Program, forward: Program, params_per_layer: list[int], deps: tuple[int, ...]) -> None:
    start = len(prog.ops)
    for li, params in enumerate(params_per_layer):
        if not params:
            continue
        prog.ops.append(Op(name=f"adamw.{forward.layers[li].name}", kind=OpKind.VECTOR, elems=params,
                           rows=params, passes=ADAMW_PASSES, dtype_bytes=FP32_BYTES,
                           hbm_elems=params * ADAMW_READ_WORDS, hbm_write_elems=params * ADAMW_WRITE_WORDS,
                           deps=deps))
    if len(prog.ops) > start:
        prog.layers.append(replace(forward.layers[0], name="optimizer", kind="optimizer", first_op=start,
                                   n_ops=len(prog.ops) - start))

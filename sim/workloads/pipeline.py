"""Pipeline parallelism: a model's layers split into stages, each on its own group of cores.

As NxD Training splits a transformer, the blocks are divided evenly among the stages (the first
stages take one more when they do not divide), the embeddings go with the first stage and the
heads with the last. A stage receives its input activations from the stage before it and sends
its output to the next; in the backward pass the gradients travel the other way (the backward
of a send is a receive). Every stage runs the same micro-batches one after another (1F1B); the
first and last stages wait for the others at the start and the end of a step, the pipeline's
bubble of ``stages - 1`` micro-batches.
"""

from __future__ import annotations

from dataclasses import replace

from sim.workloads.graph import Layer, Op, OpKind, Program


def _block(layer: Layer) -> str | None:
    """The transformer block a layer belongs to (``layer7`` of ``layer7.mlp``), None for others."""
    head, _, rest = layer.name.partition(".")
    return head if rest and head.startswith("layer") and head[5:].isdigit() else None


def stage_layers(program: Program, stages: int) -> list[list[int]]:
    """The layer indices of each stage; raises ValueError when there are fewer blocks than stages."""
    blocks: list[str] = []
    for layer in program.layers:
        name = _block(layer)
        if name is not None and name not in blocks:
            blocks.append(name)
    if len(blocks) < stages:
        raise ValueError(f"{len(blocks)} blocks cannot fill {stages} pipeline stages")
    per, extra = divmod(len(blocks), stages)
    stage_of: dict[str, int] = {}
    first = 0
    for s in range(stages):
        count = per + (1 if s < extra else 0)
        for name in blocks[first:first + count]:
            stage_of[name] = s
        first += count
    out: list[list[int]] = [[] for _ in range(stages)]
    seen_block = False
    for li, layer in enumerate(program.layers):
        name = _block(layer)
        seen_block = seen_block or name is not None
        out[stage_of[name] if name is not None else (stages - 1 if seen_block else 0)].append(li)
    return out


def stage_program(program: Program, stages: int, index: int, activation_elems: int) -> Program:
    """The forward program of stage ``index``: its layers, receiving its input from the stage
    before and sending its output to the next (a ``send`` collective between two ranks of
    ``activation_elems`` each: a tensor-parallel rank's share of the activation, which the next
    stage's ranks all-gather, as Megatron's scatter-gather and sequence parallelism split it)."""
    layers = stage_layers(program, stages)[index]
    ops, kept = program.ops, []
    for li in layers:
        la = program.layers[li]
        kept.extend(range(la.first_op, la.first_op + la.n_ops))
    new_index = {old: i for i, old in enumerate(kept)}
    out = Program()
    if index > 0:
        out.ops.append(Op(name="recv_activation", kind=OpKind.COLLECTIVE, elems=activation_elems, rows=2,
                          collective="send"))
        out.layers.append(Layer("pipeline.recv", "pipeline", 0, 1))
    shift = len(out.ops)
    for li in layers:
        la = program.layers[li]
        out.layers.append(replace(la, first_op=new_index[la.first_op] + shift))
    for old in kept:
        op = ops[old]
        deps = tuple(new_index[d] + shift for d in op.deps if d in new_index)
        if shift and not deps:
            deps = (0,)
        read_after = new_index[op.read_after] + shift if op.read_after in new_index else -1
        out.ops.append(replace(op, deps=deps, read_after=read_after))
    if index < stages - 1:
        last = len(out.ops) - 1
        out.ops.append(Op(name="send_activation", kind=OpKind.COLLECTIVE, elems=activation_elems, rows=2,
                          collective="send", deps=(last,)))
        out.layers.append(Layer("pipeline.send", "pipeline", last + 1, 1))
    return out


def heaviest_stage(program: Program, stages: int) -> int:
    """The stage with the most FLOPs (the last on ties): the one whose pace the pipeline keeps."""
    flops = [sum(program.ops[i].flops for li in group
                 for i in range(program.layers[li].first_op, program.layers[li].first_op + program.layers[li].n_ops))
             for group in stage_layers(program, stages)]
    return max(range(stages), key=lambda s: (flops[s], s))

"""Model graphs as data: a model is a list of layers, each a short list of ops with shapes.

Ops carry what the lowering needs (matmul dimensions, element counts, bytes that live in device
memory) and nothing about engines or time. Shapes are those of one NeuronCore's shard.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class OpKind(StrEnum):
    MATMUL = "matmul"        # TensorE, operands in SBUF, accumulation in PSUM
    TRANSPOSE = "transpose"  # TensorE, an [m, n] tensor turned to [n, m] against an identity (no model FLOPs)
    VECTOR = "vector"        # many-input ops: reductions, normalisation, pooling, binary ops
    SCALAR = "scalar"        # one-input elementwise ops and activation functions
    GPSIMD = "gpsimd"        # custom ops: index computation, masks, sampling
    GATHER = "gather"        # indirect loads from device memory (embedding lookups)
    COLLECTIVE = "collective"  # all-reduce, all-gather... over the cores one copy spans, or over the copies
    COPY = "copy"            # plain transfers between device memory and SBUF (KV cache, saved activations)


@dataclass(frozen=True)
class Op:
    """One operation of a core's program.

    Parameters
    ----------
    name : str
        Short name, unique inside its layer (``qkv``, ``softmax``...).
    kind : OpKind
    m, k, n, count : int
        Matmul ``count`` times ``[m, k] @ [k, n]``; a transpose turns ``count`` ``[m, n]``
        tensors (``m`` on partitions) into ``[n, m]``.
    elems : int
        Elements processed per pass by a Vector/Scalar/GpSimd op; for copies and gathers the
        elements moved.
    passes : float
        Passes over ``elems`` (a layer norm reads its input twice, for statistics and scaling).
    rows : int
        Rows of the op's 2-D view, to tell how many of the 128 partitions the data spans.
    hbm_elems : int
        Elements this op must read from device memory besides activations: weights of a
        matmul, the KV cache read by attention, the parameters an optimizer updates.
    hbm_write_elems : int
        Elements written back to device memory (KV cache appends, optimizer state).
    params : int
        Parameters this op owns (a matmul's weights, an embedding table).
    fused : bool
        Part of a fused kernel (flash attention) whose tiles stay in SBUF: its output never spills.
    reduced : int
        A reduction's output elements (one per row of a softmax's maximum), 0 for an op that
        produces as many elements as it processes.
    weights : bool
        The ``[k, n]`` operand of a matmul is a weight matrix read from device memory (stored in
        the matmul's data type), not an activation (attention's keys and values).
    act : str
        Activation function fused into the PSUM evacuation of a matmul (``gelu``, ``silu``...).
    dtype_bytes : int
        Bytes per element of this op's data (the run's dtype unless the op needs FP32).
    collective : str
        What a collective does (:data:`sim.cost.collective.KINDS`): ``elems`` is each rank's full
        buffer, ``rows`` the ranks.
    across_copies : bool
        A collective over the model copies (data parallel, one rank per copy) instead of over
        the cores one copy spans.
    deps : tuple[int, ...]
        Indices (in the program) of the ops whose outputs this op reads.
    read_after : int
        Index of the op that decides what this op reads from memory (a router choosing experts):
        its reads wait for that op, not only for room in SBUF; -1 for none.
    kv_row_elems : int
        A matmul whose ``hbm_elems`` are a KV cache: the elements each cached position holds
        contiguously in the cache's layout (Transformers NeuronX's ``[positions, batch, heads x
        head_dim]``: the batch's heads; NxD Inference's ``[batch, heads, positions, head_dim]``: one
        head's); 0 for any other read.
    weight_replicas : int
        Cores that each hold this matmul's weights whole and run it for their share of its rows
        (a convolution's output rows split over the physical cores of a logical core): each finds
        a partial weight gradient, which a training step sums over them.
    weight_run_rows : int
        Consecutive rows of the weight matrix one partition reads in one DMA run: 1 as compiled
        code's descriptors load weights, more in an NKI kernel that loads tiles of rows.
    contiguous_weights : bool
        The weight matrix is one contiguous block of device memory (an expert's shard in NxD's
        ``[experts, k, n]`` layout), so compiled code's descriptors take the consecutive rows a
        partition holds, up to the compiler's descriptor, rather than one row each.
    items : int
        Independent samples (images, sequences) the op's activations divide into: the compiler
        may run the op, with the ops around it, on blocks of whole samples (see
        :mod:`sim.lowering`); 1 when it cannot.
    grad_passes : float or None
        Passes of a Vector, Scalar or GpSimd op's gradient over its elements in a training step:
        None for twice its own (reading the incoming gradient and the saved input), 0 for no
        gradient op of its own (a reduction whose gradient another op of the same function
        computes, and a collective of such a reduction's results).
    random : bool
        Its output, which its gradient reads, is drawn from the random number generator (a
        dropout's mask): drawn again in a recomputation, it needs none of its inputs.
    """

    name: str
    kind: OpKind
    m: int = 0
    k: int = 0
    n: int = 0
    count: int = 1
    elems: int = 0
    passes: float = 1.0
    rows: int = 0
    hbm_elems: int = 0
    hbm_write_elems: int = 0
    params: int = 0
    weights: bool = False
    fused: bool = False
    reduced: int = 0
    act: str = ""
    dtype_bytes: int = 2
    collective: str = "all_reduce"
    across_copies: bool = False
    deps: tuple[int, ...] = ()
    read_after: int = -1
    kv_row_elems: int = 0
    weight_replicas: int = 1
    weight_run_rows: int = 1
    contiguous_weights: bool = False
    items: int = 1
    grad_passes: float | None = None
    random: bool = False

    @property
    def flops(self) -> float:
        """Useful floating-point operations (2 per multiply-accumulate for matmuls)."""
        if self.kind is OpKind.MATMUL:
            return 2.0 * self.m * self.k * self.n * self.count
        if self.kind in (OpKind.VECTOR, OpKind.SCALAR, OpKind.GPSIMD):
            return float(self.elems) * self.passes
        return 0.0

    @property
    def out_elems(self) -> int:
        """Elements this op produces (its activation output)."""
        if self.kind in (OpKind.MATMUL, OpKind.TRANSPOSE):
            return self.m * self.n * self.count
        return self.reduced or self.elems


@dataclass(frozen=True)
class Layer:
    """A named group of consecutive ops (one transformer sub-block, one conv, the LM head)."""

    name: str
    kind: str
    first_op: int
    n_ops: int


@dataclass
class Program:
    """The ops one NeuronCore runs for one execution, in program order, grouped into layers."""

    ops: list[Op] = field(default_factory=list)
    layers: list[Layer] = field(default_factory=list)

    @property
    def flops(self) -> float:
        return sum(op.flops for op in self.ops)

    def params_per_layer(self) -> list[int]:
        return [sum(op.params for op in self.ops[la.first_op:la.first_op + la.n_ops]) for la in self.layers]

    def layer_of_op(self) -> list[int]:
        """For each op, the index of its layer."""
        out = [0] * len(self.ops)
        for li, layer in enumerate(self.layers):
            for i in range(layer.first_op, layer.first_op + layer.n_ops):
                out[i] = li
        return out

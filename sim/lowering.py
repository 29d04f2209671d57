"""Lowering: each op of a core's program becomes pipelined stages of engine instructions.

An op is cut into ``chunks`` (groups of tiles) that flow through its stages: a DMA read of
weights (or a KV cache, or saved activations) into SBUF, TensorE matmuls into PSUM, the PSUM evacuation on
ScalarE (with a fused activation) or VectorE, or Vector/Scalar/GpSimd passes, then DMA writes
of results that must go back to device memory. Between stages a bounded number of buffers
(SBUF weight buffers, PSUM banks) lets a producer run ahead of its consumer.

An op keeps at most a quarter of SBUF of activations and streams weights through up to three
quarters of SBUF less those activations; the scheduler starts an op's reads once its working set
fits beside the ops that may still be running, so the next weights arrive during the current op
(or a collective). Activations larger than a quarter of SBUF are processed in
blocks of samples (sequences, or lines of images: ``Op.items``), fused across consecutive ops
as the Neuron compiler tiles the batch dimension, so they leave SBUF only where one sample alone
overflows it (that overflow is saved to device memory and read back); a matmul whose weights do
not fit beside them then streams its weights once per block, unless running the batch whole and
spilling what overflows moves fewer bytes. A compile that does not tile (``tiles_samples``, off
at -O1) runs every op on its whole batch and spills.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from operator import attrgetter

from sim.cost.collective import Group, collective
from sim.cost.dma import core_bytes_per_s
from sim.cost.stream import layout, stream_seconds
from sim.cost.tensor import MatmulPlan, ceil_div, plan_matmul, plan_transpose, tiles_per_bank
from sim.hardware.chip import Chip, StreamEngine
from sim.hardware.instances import Topology
from sim.quant import Precision, dense
from sim.workloads.graph import Op, OpKind

# Resources (trace tracks) of one NeuronCore.
TENSOR, VECTOR, SCALAR, GPSIMD, DMA_READ, DMA_WRITE, COLLECTIVE = range(7)
EVAC = -1  # PSUM evacuation: the scheduler picks ScalarE or VectorE, whichever frees first
RESOURCE_NAMES = ("tensor", "vector", "scalar", "gpsimd", "dma_read", "dma_write", "collective")

CHUNK_BYTES = 2 << 20  # DMA chunk a weight stream is cut into (large enough to saturate DMA)
MAX_CHUNKS = 128
STREAM_BUFFERS = 2  # weight chunks in flight at least, when weights exceed their room in SBUF
PSUM_ELEM_BYTES = 4  # PSUM accumulates in FP32


@dataclass(frozen=True)
class Stage:
    """``chunks`` identical instructions groups on one resource."""

    resource: int
    dur_s: float  # per chunk
    flops: float  # per chunk
    nbytes: float  # per chunk (DMA stages)
    buffers: int = 0  # chunks that may be in flight towards the next stage (0: unlimited)
    latency_s: float = 0.0  # delay before the next stage may use a chunk
    alt_dur_s: float = 0.0  # EVAC only: duration on VectorE (dur_s is ScalarE)
    wait_s: float = 0.0  # per chunk: the engine waits on semaphores before its instructions run


@dataclass(frozen=True)
class LoweredOp:
    chunks: int
    read: Stage | None
    compute: tuple[Stage, ...]
    write: Stage | None
    read_after_deps: bool  # the read needs the op's inputs (a gather by index)
    sbuf_bytes: float  # working set held from the op's first read to its last compute
    psum_bytes: float  # PSUM held per chunk between matmul and evacuation
    weight_refetch_bytes: float  # weight (or input activation) bytes streamed again, once per block of the other
    link_bytes: float = 0.0  # a collective's bytes each chip sends over NeuronLink
    efa_bytes: float = 0.0  # a collective's bytes each instance sends over EFA
    # what the Neuron profiler counts per instruction, summed over the op
    spill_save_bytes: float = 0.0  # saved to device memory because SBUF had no room
    spill_reload_bytes: float = 0.0  # and loaded back
    transpose_flops: float = 0.0  # TensorE FLOPs of transposes (matmuls against an identity)
    dma_transfers: float = 0.0  # DMA descriptors moved (average DMA size = bytes / transfers)
    # a collective: seconds of the core's DMA engines its transfers occupy, ahead of the compute's loads
    engines_s: float = 0.0


@dataclass(frozen=True)
class CoreContext:
    """What lowering needs to know about the core an op runs on."""

    chip: Chip
    dtype: str  # data type of activations, and of the Vector/Scalar/GpSimd engines' work
    matmul_dtype: str  # data type the TensorE multiplies in (activations against each other, and by default weights)
    active_cores: int  # physical cores of the chip sharing its memory bandwidth
    ranks_per_chip: int  # shards of one model copy on the same chip
    copies_per_chip: int  # model copies that share a chip (ranks of a data-parallel ring on one chip)
    topology: Topology  # how the instance's chips are joined (for collectives across them)
    nodes: int = 1  # instances the data-parallel copies of this rank's stage span (joined by EFA)
    shards: int = 1  # physical cores one copy (one pipeline stage of it) is split over
    node_cores: int = 1  # physical cores of one instance
    precision: Precision | None = None  # how weights are stored and multiplied (None: in matmul_dtype)
    kv_cache: str | None = None  # the KV cache's stored dtype when quantized (NxD kv_cache_quant: fp8)
    tiles_samples: bool = True  # the compiler runs activations too large for SBUF in blocks of samples

    @property
    def weights(self) -> Precision:
        return self.precision or dense(self.matmul_dtype, dtype_bytes(self.matmul_dtype))

    def op_dtype(self, op: Op) -> str:
        return "fp32" if op.dtype_bytes == 4 else self.dtype


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of a simulated data type."""
    return 4 if dtype == "fp32" else (1 if dtype in ("fp8", "int8") else 2)


def _stream_engine(ctx: CoreContext, kind: OpKind) -> tuple[int, StreamEngine]:
    chip = ctx.chip
    if kind is OpKind.SCALAR:
        return SCALAR, chip.scalar
    if kind is OpKind.GPSIMD and chip.gpsimd is not None:
        return GPSIMD, chip.gpsimd
    return VECTOR, chip.vector  # NeuronCore-v1 has no GpSimd: custom ops run on VectorE


def _stream(ctx: CoreContext, engine: StreamEngine, elems: int, rows: int, passes: float, dtype: str) -> float:
    parts = ctx.chip.sbuf_partitions
    free, instructions = layout(elems, rows, parts, int(ctx.chip.efficiency.stream_free_elems))
    return stream_seconds(engine, parts, free, instructions, passes, dtype)


def _coalesced_run(ctx: CoreContext, nbytes: float) -> float:
    """The run per partition of a tensor's DMA coalesced into transfers spread over all
    partitions, each partition's share of a chunk one contiguous run."""
    return min(nbytes, CHUNK_BYTES) / ctx.chip.sbuf_partitions


def _dma_seconds(ctx: CoreContext, nbytes: float, descriptor_bytes: float | None = None) -> float:
    """Seconds to move ``nbytes`` in descriptors of ``descriptor_bytes`` contiguous bytes: by
    default coalesced (:func:`_coalesced_run`); weight tiles, KV caches and row-by-row gathers
    pass their shorter runs."""
    if nbytes <= 0:
        return 0.0
    if descriptor_bytes is None:
        descriptor_bytes = _coalesced_run(ctx, nbytes)
    return nbytes / core_bytes_per_s(ctx.chip, ctx.active_cores, descriptor_bytes)


def _transfers(ctx: CoreContext, nbytes: float, descriptor_bytes: float | None = None) -> float:
    """DMA descriptors that move ``nbytes`` (as :func:`_dma_seconds` cuts them)."""
    if nbytes <= 0:
        return 0.0
    if descriptor_bytes is None:
        descriptor_bytes = _coalesced_run(ctx, nbytes)
    return nbytes / max(descriptor_bytes, 1.0)


def _dma(ctx: CoreContext, nbytes: float, chunks: int, descriptor_bytes: float | None = None,
         seconds: float | None = None) -> Stage:
    """A DMA read of ``nbytes`` in ``chunks`` (taking ``seconds`` in all when the caller knows)."""
    if seconds is None:
        seconds = _dma_seconds(ctx, nbytes, descriptor_bytes)
    return Stage(DMA_READ, seconds / chunks, 0.0, nbytes / chunks, latency_s=ctx.chip.dma.latency_s)


def _activation_budget(ctx: CoreContext) -> float:
    """Bytes of SBUF one op's activations may take (``sbuf_activation_fraction`` of it)."""
    return ctx.chip.sbuf_bytes * ctx.chip.efficiency.sbuf_activation_fraction


def _blocks(ctx: CoreContext, op: Op, act_bytes: float) -> int:
    """Blocks of whole samples (``op.items``) the compiler cuts an op's ``act_bytes`` of activations
    into so that a block fits SBUF's activation budget: one sample a block at most."""
    budget = _activation_budget(ctx)
    if not ctx.tiles_samples or op.fused or op.items <= 1 or act_bytes <= budget:
        return 1
    per_block = max(1, int(budget // (act_bytes / op.items)))
    return ceil_div(op.items, per_block)


def _spill(ctx: CoreContext, op: Op, out_bytes: float, blocks: int = 1) -> tuple[float, float]:
    """Bytes of ``op``'s output that overflow SBUF's activation budget, run in ``blocks`` of
    samples (each block's output beside the next op's share of it): saved to device memory and
    read back by the op that consumes them (the read-back is counted with this op). Inside a
    fused kernel (flash attention) tiles never leave SBUF; an output written to memory anyway (saved
    for the backward pass) is only read back. Returns (read-back bytes, bytes written)."""
    if op.fused:
        return 0.0, 0.0
    budget = _activation_budget(ctx)
    spill = max(0.0, out_bytes - budget * blocks)
    written = op.hbm_write_elems * op.dtype_bytes >= out_bytes
    return spill, (0.0 if written else spill)


def _held(op: Op, out_bytes: float, chunks: int) -> float:
    """SBUF an op's output occupies: all of it, or inside a fused kernel, whose consumers take
    its tiles as they come (see :mod:`sim.scheduler`), two chunks' worth (double buffering)."""
    return min(out_bytes, 2 * out_bytes / chunks) if op.fused else out_bytes


def _chunks(read_bytes: float, minimum: int) -> int:
    return max(1, min(MAX_CHUNKS, max(ceil_div(int(read_bytes), CHUNK_BYTES), minimum)))


def _quant_seconds(ctx: CoreContext, op: Op, prec: Precision) -> float:
    """VectorE time of a quantized weight matmul's own work: the weights dequantized, the input
    activations quantized, the outputs scaled per channel (see :mod:`sim.quant`). Operands lie
    with their contraction dimension on the partitions, outputs with their channels."""
    vector = ctx.chip.vector
    secs = 0.0
    if prec.dequantize_weights:  # at the narrower of the stored and the model's dtype's rates
        stored = min((prec.stored, ctx.dtype), key=lambda d: vector.elems_per_cycle[d])
        secs += _stream(ctx, vector, op.hbm_elems, op.k, 1, stored)
    if prec.input_passes:
        rate = 1.0 if prec.input_rate is None else vector.elems_per_cycle[ctx.dtype] / prec.input_rate
        secs += prec.input_passes * rate * _stream(ctx, vector, op.m * op.k * op.count, op.k, 1, ctx.dtype)
    if prec.scale_outputs:
        secs += _stream(ctx, vector, op.out_elems, op.n, 1, ctx.dtype)
    return secs


def _matmul(ctx: CoreContext, op: Op) -> LoweredOp:
    chip, dt = ctx.chip, op.dtype_bytes
    wait = 0.0 if op.fused else chip.efficiency.mm_wait_cycles
    # weights are stored as the run's precision says (the compiler casts constants ahead of time)
    # and multiplied in its format; what attention reads from memory (a KV cache) is stored like
    # the activations and multiplied in the matmul dtype
    if op.weights:
        prec = ctx.weights
    elif ctx.kv_cache and op.hbm_elems:  # a quantized KV cache, read small and dequantized on VectorE
        prec = Precision(8.0 * dtype_bytes(ctx.kv_cache), ctx.matmul_dtype, dequantize_weights=True,
                         stored=ctx.kv_cache)
    else:
        prec = dense(ctx.matmul_dtype, dt)
    plan = plan_matmul(chip.tensor, op.m, op.k, op.n, op.count, prec.matmul_dtype, wait)
    if prec.sparse_speedup > 1:
        plan = replace(plan, cycles=plan.cycles / prec.sparse_speedup)
    budget = _activation_budget(ctx)
    act_in = op.m * op.k * op.count * dt + (0 if op.weights else max(0, op.k * op.n * op.count - op.hbm_elems) * dt)
    out = op.out_elems * dt
    weights = op.hbm_elems * prec.weight_bits / 8
    # weights stream through up to three quarters of SBUF less the activations: as many chunks as
    # fit there run ahead of the matmuls (during a collective, most of a decoder's next matmul).
    # Activations beyond the budget either run whole, what overflows of the output spilled and,
    # when neither the weights nor the input fit, one of them streamed again for every block of
    # the other that SBUF holds (whichever moves fewer bytes); or in blocks of samples, fused with
    # the ops around them, the weights streamed again for every block when they do not stay in
    # SBUF: whichever moves fewer bytes. The ``count`` matmuls of weights (experts, heads) each
    # meet only their own weights: what SBUF must hold together is one matmul's
    act = min(act_in + out, budget)
    weight_room = chip.sbuf_bytes * 3 / 4 - act
    weight_again = act_again = 0.0
    own = op.count if op.weights else 1
    if weights / own > weight_room and act_in / own > budget:
        weight_again = weights * (ceil_div(int(act_in / own), int(budget)) - 1)
        act_again = act_in * (ceil_div(int(weights / own), int(max(weight_room, 1.0))) - 1)
        weight_again, act_again = (weight_again, 0.0) if weight_again <= act_again else (0.0, act_again)
    spill, spill_write = _spill(ctx, op, out)
    blocks = _blocks(ctx, op, act_in + out)
    if blocks > 1:
        blocked_again = weights * (blocks - 1) if weights > weight_room else 0.0
        blocked_spill, blocked_write = _spill(ctx, op, out, blocks)
        if blocked_again + blocked_spill + blocked_write < weight_again + act_again + spill + spill_write:
            weight_again, act_again, spill, spill_write = blocked_again, 0.0, blocked_spill, blocked_write
    reads = weights + weight_again + act_again + spill
    writes = op.hbm_write_elems * dt + spill_write
    chunks = _chunks(reads, plan.psum_tiles)
    if op.fused:  # the kernel keeps only the output tiles in flight (see _held)
        act = min(act_in + _held(op, out, chunks), budget)
    # weights are loaded by a kernel in its tiles of rows, or in the compiler's weight descriptors
    # (a row of a weight matrix shorter than one is loaded in its own descriptors, unless the
    # matrix is one contiguous block: then a partition's consecutive rows); a KV cache in runs of
    # at least the compiler's cache descriptor (several positions when a position's row is
    # shorter) or of one row
    if op.weights:
        rows = ceil_div(op.k, chip.sbuf_partitions) if op.contiguous_weights else op.weight_run_rows
        stream_run = rows * op.n * prec.weight_bits / 8
        if not op.fused:
            stream_run = min(chip.efficiency.weight_descriptor_bytes, stream_run)
    elif op.kv_row_elems and weights:
        stream_run = min(max(op.kv_row_elems * prec.weight_bits / 8, chip.efficiency.kv_descriptor_bytes),
                         _coalesced_run(ctx, weights))
    else:
        stream_run = None
    read_s = _dma_seconds(ctx, weights + weight_again, stream_run) + _dma_seconds(ctx, spill + act_again)
    read = _dma(ctx, reads, chunks, seconds=read_s) if reads else None
    if read is not None and weights > weight_room:
        buffers = max(STREAM_BUFFERS, int(weight_room // read.nbytes))
        read = Stage(read.resource, read.dur_s, 0.0, read.nbytes, buffers, read.latency_s)
    compute, psum = _array_stages(ctx, plan, chunks, op.flops, op.act, wait, evac_on_scalar=prec.extra_work,
                                  packed=not (op.weights or op.hbm_elems))
    if prec.extra_work:  # VectorE's share, ahead of the array (the evacuation then on ScalarE)
        compute = (Stage(VECTOR, _quant_seconds(ctx, op, prec) / chunks, 0.0, 0.0), *compute)
    return LoweredOp(
        chunks=chunks, read=read, compute=compute, write=_write(ctx, writes, chunks), read_after_deps=False,
        sbuf_bytes=min(weights, weight_room) + act, psum_bytes=psum,
        weight_refetch_bytes=weight_again + act_again, spill_save_bytes=spill_write, spill_reload_bytes=spill,
        dma_transfers=(_transfers(ctx, weights + weight_again, stream_run) + _transfers(ctx, spill + act_again)
                       + _transfers(ctx, writes)),
    )


def _array_stages(ctx: CoreContext, plan: MatmulPlan, chunks: int, flops: float, act: str, wait_cycles: float = 0.0,
                  evac_on_scalar: bool = False, packed: bool = False) -> tuple[tuple[Stage, Stage], float]:
    """The TensorE stage of a planned matmul or transpose and the evacuation of its PSUM tiles.

    Two consecutive matmuls may overlap, so each uses at most half of the PSUM banks; a chunk
    with more tiles than that interleaves matmuls and evacuations bank by bank. Each chunk's
    results reach PSUM ``fill_drain_cycles`` after its last instruction issued. One evacuation
    instruction reads each PSUM tile: ScalarE (applying a fused activation) or VectorE, at
    their FP32 rate since PSUM holds FP32. Before each instruction of compiled code the array waits
    ``wait_cycles`` on its semaphores: occupied, not active (as Neuron Explorer counts active time).

    A ``packed`` matmul (both operands already on chip: attention's scores and context over a
    prompt, not a decode step's, whose keys and values stream in from the KV cache) lays its
    output tiles side by side in PSUM when they are narrower than a bank (:func:`tiles_per_bank`):
    the tiles of one bank share one wait, their instructions' operands being in SBUF and the bank
    the only thing to wait for, and one evacuation instruction reads them all.
    """
    chip = ctx.chip
    te = chip.tensor
    tiles_per_chunk = max(1, plan.psum_tiles // chunks)
    banks = max(1, chip.psum_banks // 2)
    psum_bufs = max(1, banks // tiles_per_chunk)
    parts = chip.sbuf_partitions
    share = tiles_per_bank(plan, chip.psum_bytes // chip.psum_banks // parts // PSUM_ELEM_BYTES) if packed else 1
    tensor = Stage(TENSOR, plan.cycles / te.clock_hz / chunks, flops / chunks, 0.0, buffers=psum_bufs,
                   latency_s=te.fill_drain_cycles / te.clock_hz,
                   wait_s=wait_cycles * plan.instructions / share / te.clock_hz / chunks)
    evacuations = ceil_div(plan.psum_tiles, share)
    scalar_s = stream_seconds(chip.scalar, parts, plan.psum_free, evacuations, 1, "fp32")
    vector_s = stream_seconds(chip.vector, parts, plan.psum_free, evacuations, 1, "fp32")
    on_scalar = bool(act) or evac_on_scalar
    evac = Stage(SCALAR if on_scalar else EVAC, scalar_s / chunks, 0.0, 0.0,
                 alt_dur_s=0.0 if on_scalar else vector_s / chunks)
    psum = min(tiles_per_chunk, banks) * chip.psum_bytes / chip.psum_banks
    return (tensor, evac), psum


def _transpose(ctx: CoreContext, op: Op) -> LoweredOp:
    """``count`` transposes of an ``[m, n]`` tensor in SBUF, on the array (``nc_transpose``)."""
    plan = plan_transpose(ctx.chip.tensor, op.m, op.n, op.count)
    chunks = max(1, min(MAX_CHUNKS, plan.psum_tiles))
    compute, psum = _array_stages(ctx, plan, chunks, 0.0, "")
    data = op.m * op.n * op.count * op.dtype_bytes
    spill, spill_write = _spill(ctx, op, data, _blocks(ctx, op, data))
    read = _dma(ctx, spill, chunks) if spill else None
    rows = min(op.m, ctx.chip.tensor.rows)  # each block against a [rows, rows] identity
    return LoweredOp(chunks, read, compute, _write(ctx, spill_write, chunks), False,
                     min(data + _held(op, data, chunks), ctx.chip.sbuf_bytes / 4), psum, 0.0,
                     spill_save_bytes=spill_write, spill_reload_bytes=spill,
                     transpose_flops=2.0 * rows * op.m * op.n * op.count,
                     dma_transfers=_transfers(ctx, spill) + _transfers(ctx, spill_write))


def _write(ctx: CoreContext, nbytes: float, chunks: int) -> Stage | None:
    if nbytes <= 0:
        return None
    st = _dma(ctx, nbytes, chunks)
    return Stage(DMA_WRITE, st.dur_s, 0.0, st.nbytes)


def _elementwise(ctx: CoreContext, op: Op) -> LoweredOp:
    chip = ctx.chip
    resource, engine = _stream_engine(ctx, op.kind)
    data = op.elems * op.dtype_bytes
    out = op.out_elems * op.dtype_bytes
    spill, spill_write = _spill(ctx, op, out, _blocks(ctx, op, out))
    reads = op.hbm_elems * op.dtype_bytes + spill
    writes = op.hbm_write_elems * op.dtype_bytes + spill_write
    # a fused kernel works through its rows a tile of partitions at a time
    chunks = _chunks(max(reads, data), ceil_div(op.rows, chip.sbuf_partitions) if op.fused else 1)
    secs = _stream(ctx, engine, op.elems, op.rows, op.passes, ctx.op_dtype(op))
    compute = (Stage(resource, secs / chunks, op.flops / chunks, 0.0),)
    return LoweredOp(
        chunks=chunks, read=_dma(ctx, reads, chunks) if reads else None, compute=compute,
        write=_write(ctx, writes, chunks), read_after_deps=False,
        sbuf_bytes=min(_held(op, data, chunks) * 2 + reads, chip.sbuf_bytes / 2), psum_bytes=0.0,
        weight_refetch_bytes=0.0, spill_save_bytes=spill_write, spill_reload_bytes=spill,
        dma_transfers=_transfers(ctx, reads) + _transfers(ctx, writes),
    )


def _gather(ctx: CoreContext, op: Op) -> LoweredOp:
    """An embedding lookup: one descriptor per row, so small rows are overhead-bound."""
    nbytes = op.hbm_elems * op.dtype_bytes
    row_bytes = nbytes / max(op.rows, 1)
    chunks = _chunks(nbytes, 1)
    read = _dma(ctx, nbytes, chunks, descriptor_bytes=row_bytes)
    return LoweredOp(chunks, read, (), None, True, min(nbytes, ctx.chip.sbuf_bytes / 2), 0.0, 0.0,
                     dma_transfers=_transfers(ctx, nbytes, row_bytes))


def _copy(ctx: CoreContext, op: Op) -> LoweredOp:
    reads, writes = op.hbm_elems * op.dtype_bytes, op.hbm_write_elems * op.dtype_bytes
    chunks = _chunks(max(reads, writes), 1)
    read = _dma(ctx, reads, chunks) if reads else None
    return LoweredOp(chunks, read, (), _write(ctx, writes, chunks), False,
                     min(reads + writes, ctx.chip.sbuf_bytes / 2), 0.0, 0.0,
                     dma_transfers=_transfers(ctx, reads) + _transfers(ctx, writes))


def _collective(ctx: CoreContext, op: Op) -> LoweredOp:
    """A collective runs on the core's collective-communication cores, beside its engines, but its
    data moves through the core's DMA engines, which the compute's loads and stores share: the
    engines arbitrate between their rings at packet boundaries, and a collective's 64 KiB packets
    take them ahead of the compute's 4 KiB ones (aws-neuron-sdk
    neuron-runtime/explore/compute-comm-overlap.rst: NEURON_RT_DBG_CC_DMA_PACKET_SIZE and
    NEURON_RT_DBG_DMA_PACKETIZATION_SIZE defaults). Each rank's DMA sends and receives ``(n - 1) /
    n`` of the buffer per ring pass (two for an all-reduce), a send the buffer once: that many
    bytes at the engines' rate are ``engines_s``, during which the compute's loads wait."""
    nbytes = op.elems * op.dtype_bytes
    on_node = min(ctx.shards, ctx.node_cores)  # this copy's shards on one instance, each in a group like this one
    if op.collective == "send":  # to the next pipeline stage: the next cores, chip or instance
        if ctx.shards >= ctx.node_cores:
            group = Group(2, 1, 2, share_node=on_node)
        elif ctx.shards >= ctx.chip.cores:
            group = Group(2, 1, share_chip=ctx.ranks_per_chip)
        else:
            group = Group(2, 2)
    elif op.across_copies:  # one rank per copy, the copies spread over the instances
        group = Group(op.rows, min(op.rows, ctx.copies_per_chip), ctx.nodes, share_chip=ctx.ranks_per_chip,
                      share_node=on_node)
    else:  # the shards of one copy: logical cores of one instance
        group = Group(op.rows, ctx.ranks_per_chip, 1, ctx.chip.lnc_default)
    cost = collective(op.collective, ctx.chip, ctx.topology, nbytes, group)
    stage = Stage(COLLECTIVE, cost.seconds, 0.0, nbytes)
    passes = 2 if op.collective == "all_reduce" else 1
    moved = nbytes if op.collective == "send" else 2 * passes * (group.ranks - 1) / group.ranks * nbytes
    engines = moved / core_bytes_per_s(ctx.chip, ctx.active_cores, CHUNK_BYTES) if cost.seconds else 0.0
    return LoweredOp(1, None, (stage,), None, False, 0.0, 0.0, 0.0, cost.link_bytes, cost.efa_bytes,
                     engines_s=engines)


# what lowering reads of an op: all of it but its name and its place in the program
_SHAPE_FIELDS = ("kind", "m", "k", "n", "count", "elems", "passes", "rows", "hbm_elems", "hbm_write_elems", "params",
                 "act", "dtype_bytes", "collective", "across_copies", "weights", "fused", "reduced", "kv_row_elems",
                 "weight_run_rows", "contiguous_weights", "items")
_shape_of = attrgetter(*_SHAPE_FIELDS)


@lru_cache(maxsize=65536)
def _lower_cached(ctx: CoreContext, key: tuple) -> LoweredOp:
    shape = Op(name="", **dict(zip(_SHAPE_FIELDS, key, strict=True)))
    if shape.kind is OpKind.MATMUL:
        return _matmul(ctx, shape)
    if shape.kind is OpKind.TRANSPOSE:
        return _transpose(ctx, shape)
    if shape.kind is OpKind.GATHER:
        return _gather(ctx, shape)
    if shape.kind is OpKind.COPY:
        return _copy(ctx, shape)
    if shape.kind is OpKind.COLLECTIVE:
        return _collective(ctx, shape)
    return _elementwise(ctx, shape)


def lower(ctx: CoreContext, op: Op) -> LoweredOp:
    """Stages of ``op`` (cached by its shape: identical layers are lowered once; the shape is a
    tuple of its fields, an Op of them made only when lowered)."""
    return _lower_cached(ctx, _shape_of(op))

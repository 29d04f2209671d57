"""The only code that owns a clock: places lowered ops on one NeuronCore's engines and queues.

Every engine and the DMA pipe run their instructions in program order, as NeuronCore engines
do (each has its own instruction stream, synchronised by semaphores). A chunk starts when its
resource is free, its producer chunk has finished (plus the producer's latency) and, when
buffers are bounded, when the consumer has freed the buffer it will write. For one resource
with ready times ``r`` and durations ``d``, in-order issue gives
``end_i = max(end_{i-1}, r_i) + d_i``, which NumPy evaluates as a prefix maximum; bounded
buffers couple neighbouring stages and are resolved by iterating to the fixed point.

The ops of a fused kernel (flash attention) are one loop over tiles, as the NKI kernels are
written: each engine's instruction stream interleaves the kernel's ops tile by tile (ScalarE
evacuates one tile of scores while it exponentiates the one before), so the ops run
software-pipelined instead of one after another (:func:`_kernel_pipeline`).

How far ahead loads go is the compiler's (:class:`sim.hardware.chip.Schedule`, by optimization
level): by default an op's reads start as soon as SBUF has room for them beside the ops before it
that may still run, and writes back to device memory are deferred behind the next op's reads on
the shared DMA pipe, as a compiler hoists prefetches above stores, so weights stream in while
results stream out. At ``-O1`` loads go one op ahead at most and queue behind earlier stores.
A collective runs on its own (the collective cores) but its transfers hold the DMA engines the
loads use from its start, ahead of the loads after it (``LoweredOp.engines_s``).

On chips whose TensorE is dI/dt-throttled (Trn2, Trn3) the array's rate depends on its recent
use (:class:`TensorRamp`), so its instructions are placed one chunk at a time.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import accumulate

import numpy as np

from sim.hardware.chip import Schedule, Throttle, schedule
from sim.lowering import COLLECTIVE, DMA_READ, DMA_WRITE, EVAC, SCALAR, TENSOR, VECTOR, LoweredOp, Stage
from sim.workloads.graph import Program


def in_order(free_at: float, ready: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end times of instructions issued in order on one resource."""
    csum = np.cumsum(dur)
    before = csum - dur
    base = np.maximum.accumulate(np.maximum(ready - before, free_at))
    start = base + before
    return start, start + dur


def _pipeline_free(stages: list[Stage], n: int, ready0: list[float], free: list[float]):
    """Stages with unbounded buffers between them: one vectorised in-order scan per stage.

    A chunk occupies its engine for its semaphore wait and then its instructions; the
    instructions are what is returned (and logged) as the chunk's start and end."""
    if n == 1:  # most ops: in_order's operations on floats instead of one-element arrays, the same numbers
        out, end = [], 0.0
        for s, st in enumerate(stages):
            ready = ready0[s]
            if s:
                after = end + stages[s - 1].latency_s
                ready = ready if ready >= after else after
            dur = st.wait_s + st.dur_s
            before = dur - dur
            start = ready - before
            start = (start if start >= free[s] else free[s]) + before
            end = start + dur
            out.append((np.array([start + st.wait_s]), np.array([end])))
        return out
    out = []
    for s, st in enumerate(stages):
        ready = np.full(n, ready0[s])
        if s:
            np.maximum(ready, out[-1][1] + stages[s - 1].latency_s, out=ready)
        start, end = in_order(free[s], ready, np.full(n, st.wait_s + st.dur_s))
        out.append((start + st.wait_s, end))
    return out


class TensorRamp:
    """The TensorE's dI/dt throttle: how far its rate has ramped since it last started.

    After an idle stretch the array runs at ``start_fraction`` of its rate, rising linearly to
    full over ``ramp_s`` of activity: the work done in the first ``t`` seconds of a ramp is
    ``F(t) = s t + (1 - s) t^2 / (2 ramp)`` up to ``F(ramp) = ramp (1 + s) / 2``. The limit
    re-engages when utilization stays under one half for ``window_s``: an idle gap of at least
    half the window before an instruction group leaves the window's utilization at one half or
    less, and the ramp starts again. A group's semaphore waits (``wait_s``, placed before it
    but spread between its instructions) are not such a gap: they re-engage the limit only when
    they leave the array active less than half of the group's time.
    """

    def __init__(self, throttle: Throttle) -> None:
        self.t = throttle
        self.elapsed = 0.0  # time since the ramp began
        self.last_end = -np.inf  # a fresh engine is idle: its first instruction starts a ramp

    def duration(self, start: float, work_s: float, wait_s: float = 0.0) -> float:
        """Seconds to do ``work_s`` of full-rate work starting at ``start``, after ``wait_s`` of
        semaphore waits interleaved with it; advances the ramp."""
        if start - wait_s - self.last_end >= self.t.window_s / 2 or wait_s > work_s:
            self.elapsed = 0.0
        ramp, s = self.t.ramp_s, self.t.start_fraction
        done_full = ramp * (1 + s) / 2
        if self.elapsed >= ramp:
            dur = work_s
        else:
            target = s * self.elapsed + (1 - s) * self.elapsed ** 2 / (2 * ramp) + work_s
            if target >= done_full:
                end = ramp + (target - done_full)
            else:
                a = (1 - s) / (2 * ramp)
                end = (-s + math.sqrt(s * s + 4 * a * target)) / (2 * a)  # as np.sqrt, correctly rounded
            dur = end - self.elapsed
        self.elapsed += dur
        self.last_end = start + dur
        return dur


def _pipeline_bounded(stages: list[Stage], n: int, ready0: list[float], free: list[float],
                      ramp: TensorRamp | None = None):
    """Stages coupled by bounded buffers (or a throttled TensorE): chunk by chunk, each stage in
    order.

    Chunk ``j`` of stage ``s`` also waits until stage ``s+1`` has finished chunk
    ``j - buffers`` (the buffer it will write into), which is already known at that point.
    Without a throttle the chunks settle into a steady state (:func:`_steady_periods`), from
    which the remaining chunks follow in one step.
    """
    n_st = len(stages)
    starts = [[0.0] * n for _ in range(n_st)]
    ends = [[0.0] * n for _ in range(n_st)]
    durs = [st.dur_s for st in stages]
    waits = [st.wait_s for st in stages]
    ramped = [ramp is not None and st.resource == TENSOR for st in stages]
    lats = [st.latency_s for st in stages]
    bufs = [st.buffers if 0 < st.buffers < n else 0 for st in stages]
    window = max(bufs) + 3  # chunks of constant steps that make a steady state
    settles = not any(ramped)
    free = list(free)
    for j in range(n):
        for s in range(n_st):
            r = ready0[s]
            if s:  # r = max(r, x) as max() takes it, without the call: per chunk and stage, this is the hot loop
                x = ends[s - 1][j] + lats[s - 1]
                if x > r:
                    r = x
            b = bufs[s]
            if b and j >= b:
                x = ends[s + 1][j - b]
                if x > r:
                    r = x
            start = (r if r > free[s] else free[s]) + waits[s]
            free[s] = start + (ramp.duration(start, durs[s], waits[s]) if ramped[s] else durs[s])
            starts[s][j] = start
            ends[s][j] = free[s]
        if settles and j % window == window - 1 and j + 1 < n:
            periods = _steady_periods(starts, j, window, bufs)
            if periods is not None:
                rest = np.arange(1, n - j)
                return [(np.concatenate((a[:j + 1], a[j] + rest * p)), np.concatenate((e[:j + 1], e[j] + rest * p)))
                        for a, e, p in zip(starts, ends, periods, strict=True)]
    return [(np.array(a), np.array(e)) for a, e in zip(starts, ends, strict=True)]


STEADY_TOLERANCE = 1e-9  # relative difference below which two steps of a stage count as equal


def _steady_periods(starts: list[list[float]], j: int, window: int, bufs: list[int]) -> list[float] | None:
    """Each stage's step between chunks if the chunks up to ``j`` are in a steady state, else None.

    Every term a chunk's start is the maximum of grows linearly in the chunk number once each
    stage's steps have stayed constant for ``window`` chunks (more than the deepest buffer): the
    previous stage's end, the next stage's end ``buffers`` chunks back, the stage's own previous
    end. If the term that each stage follows also grows fastest (its step is at least that of the
    stages it waits on), the maximum keeps picking it, and every later chunk is one step on.
    """
    periods = []
    for a in starts:  # a few chunks: plain floats are faster than arrays here
        p = a[j] - a[j - 1]
        if p <= 0 or any(abs(a[i] - a[i - 1] - p) > STEADY_TOLERANCE * p for i in range(j - window + 2, j)):
            return None
        periods.append(p)
    for s, p in enumerate(periods):
        if s and periods[s - 1] > p * (1 + STEADY_TOLERANCE):
            return None
        if bufs[s] and periods[s + 1] > p * (1 + STEADY_TOLERANCE):
            return None
    return periods


KERNEL_TILE_BUFFERS = 2  # a fused kernel's tiles in flight between two of its ops (double buffering)


def _rechunk(stage: Stage, factor: float) -> Stage:
    """``stage`` cut into ``1 / factor`` times as many chunks."""
    return replace(stage, dur_s=stage.dur_s * factor, flops=stage.flops * factor, nbytes=stage.nbytes * factor,
                   wait_s=stage.wait_s * factor, alt_dur_s=stage.alt_dur_s * factor,
                   buffers=max(1, round(stage.buffers / factor)) if stage.buffers else 0)


def _kernel_pipeline(stages: list[Stage], n: int, ready0: list[float], preds: list[tuple[int, ...]],
                     succ: list[int], slots: list[int], free: np.ndarray, ramp: TensorRamp | None):
    """The stages of a fused kernel's ops over ``n`` tiles, software-pipelined.

    The kernel's loop is unrolled and skewed as a modulo schedule: in step ``t`` stage ``s``
    works on tile ``t - s``, so each engine interleaves the stages of different tiles (TensorE
    multiplies tile ``t`` while ScalarE exponentiates tile ``t - 3``). Stage ``s`` of tile ``j``
    starts once its engine (``slots[s]``) is free, the stages ``preds[s]`` have finished tile
    ``j`` and, with bounded buffers (two at least), stage ``succ[s]`` has finished tile
    ``j - buffers``. Updates ``free`` (by slot) and returns (starts, ends) per stage."""
    n_st = len(stages)
    starts = [[0.0] * n for _ in range(n_st)]
    ends = [[0.0] * n for _ in range(n_st)]
    bufs = [max(2, st.buffers) if st.buffers else 0 for st in stages]
    for t in range(n + n_st - 1):
        for s in range(max(0, t - n + 1), min(n_st, t + 1)):
            st, j = stages[s], t - s
            r = ready0[s]
            for p in preds[s]:
                r = max(r, ends[p][j] + stages[p].latency_s)
            b = bufs[s]
            if b and succ[s] >= 0 and j >= b:
                r = max(r, ends[succ[s]][j - b])
            start = max(r, free[slots[s]]) + st.wait_s
            dur = ramp.duration(start, st.dur_s, st.wait_s) if ramp is not None and st.resource == TENSOR else st.dur_s
            free[slots[s]] = start + dur
            starts[s][j], ends[s][j] = start, start + dur
    return [(np.array(a), np.array(e)) for a, e in zip(starts, ends, strict=True)]


@lru_cache(maxsize=4096)
def _on_scalar(stage: Stage) -> Stage:
    """A PSUM evacuation stage placed on ScalarE (made once per stage: identical layers share them)."""
    return replace(stage, resource=SCALAR, alt_dur_s=0.0)


@lru_cache(maxsize=4096)
def _on_vector(stage: Stage) -> Stage:
    """A PSUM evacuation stage placed on VectorE, at VectorE's duration."""
    return replace(stage, resource=VECTOR, dur_s=stage.alt_dur_s, alt_dur_s=0.0)


def _balance_evac(stage: Stage, load: dict[int, float]) -> Stage:
    """A PSUM evacuation inside a kernel goes to ScalarE or VectorE, whichever the kernel has
    given less work so far (its instructions interleave with the kernel's others)."""
    if stage.resource != EVAC:
        return stage
    return _on_scalar(stage) if load.get(SCALAR, 0.0) <= load.get(VECTOR, 0.0) else _on_vector(stage)


def kernel_groups(program: Program, lowered: list[LoweredOp]) -> list[tuple[int, int]]:
    """Runs ``[first, last]`` of ops that form one fused kernel: consecutive fused ops with
    engine work, each reading only the one before it."""
    groups, i, n = [], 0, len(program.ops)
    while i < n:
        j = i
        if program.ops[i].fused and lowered[i].compute:
            while (j + 1 < n and program.ops[j + 1].fused and lowered[j + 1].compute
                   and program.ops[j + 1].deps == (j,) and not lowered[j + 1].read_after_deps):
                j += 1
        groups.append((i, j))
        i = j + 1
    return groups


@dataclass(frozen=True)
class Copies:
    """Part of an :class:`EventLog` column: ``base`` once per copy, each copy plus its shift
    (one execution's events replayed at later times), or ``count`` plain copies without shifts.
    Expanded only as the column is joined (:func:`column`), straight into it: a 4M-event decode's
    log held each column's copies, 150 MB, beside the joined columns made of them."""

    base: np.ndarray
    shifts: np.ndarray | None = None  # one per copy, of the base's dtype
    count: int = 0

    @property
    def copies(self) -> int:
        return self.count if self.shifts is None else len(self.shifts)

    def __len__(self) -> int:
        return len(self.base) * self.copies

    def fill(self, out: np.ndarray) -> None:
        """Write the copies into ``out``, which is as long as they are."""
        rows = out.reshape(self.copies, len(self.base))
        if self.shifts is None:
            rows[:] = self.base
        else:
            np.add(self.base, self.shifts[:, None], out=rows)


@dataclass
class EventLog:
    """Columns of events and occupancy spans, appended op by op (and :class:`Copies` of them)."""

    track: list[np.ndarray] = field(default_factory=list)
    start: list[np.ndarray] = field(default_factory=list)
    dur: list[np.ndarray] = field(default_factory=list)
    op: list[np.ndarray] = field(default_factory=list)
    flops: list[np.ndarray] = field(default_factory=list)
    nbytes: list[np.ndarray] = field(default_factory=list)
    # per op id: seconds its TensorE chunks lost to the dI/dt limit, and waited on semaphores
    throttled: dict[int, float] = field(default_factory=dict)
    waited: dict[int, float] = field(default_factory=dict)
    # per op (start, end, bytes), and copies of them as blocks of such rows (sbuf_rows reads both)
    sbuf: list[tuple[float, float, float] | np.ndarray] = field(default_factory=list)
    psum: list[tuple[np.ndarray, np.ndarray, float | np.ndarray]] = field(default_factory=list)

    def add(self, track: int, start: np.ndarray, end: np.ndarray, stage: Stage, op_id: int) -> None:
        n = len(start)
        # a stage's chunks share their track, op, FLOPs and bytes: kept as (value, count) until
        # the columns are joined (column())
        self.track.append((track, n))
        dur = end - start
        self.start.append(start)
        self.dur.append(dur)
        self.op.append((op_id, n))
        self.flops.append((stage.flops, n))
        self.nbytes.append((stage.nbytes, n))
        if track == TENSOR:
            # a throttled TensorE chunk takes longer than its full-rate time (its wait is not in the span)
            lost = float(np.maximum(dur - stage.dur_s, 0.0).sum())
            if lost:
                self.throttled[op_id] = self.throttled.get(op_id, 0.0) + lost
            if stage.wait_s:
                self.waited[op_id] = self.waited.get(op_id, 0.0) + n * stage.wait_s

    def add_span(self, track: int, start_s: float, end_s: float, op_id: int, nbytes: float = 0.0) -> None:
        """One event that is no engine's instructions (the host's work around the device's)."""
        self.track.append((track, 1))
        self.start.append(np.array([start_s]))
        self.dur.append(np.array([end_s - start_s]))
        self.op.append((op_id, 1))
        self.flops.append((0.0, 1))
        self.nbytes.append((nbytes, 1))


@dataclass
class _PendingWrite:
    op_id: int
    stage: Stage
    ready: np.ndarray


class CoreScheduler:
    """Schedules programs one after another on a single core, keeping engine clocks between them."""

    def __init__(self, sbuf_bytes: float, throttle: Throttle | None = None, plan: Schedule | None = None) -> None:
        self.sbuf_bytes = sbuf_bytes
        self.plan = plan or schedule()
        self.ramp = TensorRamp(throttle) if throttle is not None else None
        self.free = np.zeros(COLLECTIVE + 1)
        self.log = EventLog()
        self.weight_refetch_bytes = 0.0

    def _slot(self, resource: int) -> int:
        return DMA_READ if resource == DMA_WRITE else resource  # reads and writes share one pipe

    def _resolve_evac(self, stage: Stage, chunks: int) -> Stage:
        if stage.resource != EVAC:
            return stage
        scalar_done = self.free[SCALAR] + chunks * (stage.wait_s + stage.dur_s)
        vector_done = self.free[VECTOR] + chunks * (stage.wait_s + stage.alt_dur_s)
        return _on_scalar(stage) if scalar_done <= vector_done else _on_vector(stage)

    def _solve(self, stages: list[Stage], n: int, ready0: list[float]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Start/end arrays of every stage of one op, honouring bounded buffers."""
        free = [float(self.free[self._slot(st.resource)]) for st in stages]
        throttled = self.ramp is not None and any(st.resource == TENSOR for st in stages)
        if throttled or any(0 < st.buffers < n for st in stages[:-1]):
            out = _pipeline_bounded(stages, n, ready0, free, self.ramp)
        else:
            out = _pipeline_free(stages, n, ready0, free)
        for st, (_, end) in zip(stages, out, strict=True):
            self.free[self._slot(st.resource)] = end[-1]
        return out

    def _flush(self, pending: _PendingWrite | None) -> None:
        if pending is None:
            return
        start, end = in_order(self.free[DMA_READ], pending.ready, np.full(len(pending.ready), pending.stage.dur_s))
        self.free[DMA_READ] = end[-1]
        self.log.add(DMA_WRITE, start, end, pending.stage, pending.op_id)

    def _gate(self, i: int, op, held: list[float], settled: np.ndarray, op_end: np.ndarray, t0: float,
              placed: int | None = None) -> float:
        """When op ``i``'s reads may start: once SBUF has room for its working set next to the ops
        before it that may still run (the newest op that does not fit beside it must have
        finished), so weights stream in ahead, during collectives and small ops, and no further
        ahead than the compiler's look-ahead. Only the ops before ``placed`` (default ``i``) have
        been scheduled."""
        first = i if placed is None else placed
        j = min(first, bisect_left(held, held[i + 1] - self.sbuf_bytes)) - 1
        if self.plan.lookahead_ops:
            j = max(j, first - 1 - self.plan.lookahead_ops)
        gate = max(t0, settled[j]) if j >= 0 else t0
        if op.read_after >= 0:  # what to read is decided by that op
            gate = max(gate, op_end[op.read_after])
        return gate

    def _stages(self, lo: LoweredOp) -> list[Stage]:
        return ([lo.read] if lo.read else []) + [self._resolve_evac(s, lo.chunks) for s in lo.compute]

    def run(self, program: Program, lowered: list[LoweredOp], first_op_id: int, t0: float) -> np.ndarray:
        """Schedule ``program`` starting no earlier than ``t0``; return each op's end time."""
        n_ops = len(program.ops)
        op_end = np.empty(n_ops)
        settled = np.empty(n_ops)  # prefix maximum of op ends: every op up to i has finished
        pending: _PendingWrite | None = None
        # held[k]: SBUF bytes of ops 0..k-1; ops j+1..i fit together when held[i+1] - held[j+1] <= SBUF
        held = list(accumulate((lo.sbuf_bytes for lo in lowered), initial=0.0))

        def record(i: int, stages: list[Stage], times: list, write: Stage | None) -> None:
            nonlocal pending
            lo = lowered[i]
            for st, (start, end) in zip(stages, times, strict=True):
                self.log.add(st.resource, start, end, st, first_op_id + i)
            op_end[i] = times[-1][1][-1] + stages[-1].latency_s
            settled[i] = max(op_end[i], settled[i - 1]) if i else op_end[i]
            self.log.sbuf.append((min(t[0][0] for t in times), op_end[i], lo.sbuf_bytes))
            if lo.psum_bytes:
                tensor_at = next(k for k, st in enumerate(stages) if st.resource == TENSOR)
                self.log.psum.append((times[tensor_at][0], times[tensor_at + 1][1], lo.psum_bytes))
            self.weight_refetch_bytes += lo.weight_refetch_bytes
            if lo.compute:
                self._flush(pending)
                pending = _PendingWrite(first_op_id + i, write, times[-1][1]) if write else None
                if not self.plan.loads_pass_stores:  # the next op's loads queue behind this store
                    self._flush(pending)
                    pending = None

        for first, last in kernel_groups(program, lowered):
            if last > first:
                self._run_kernel(program, lowered, first, last, t0, held, settled, op_end, record)
                continue
            i, op, lo = first, program.ops[first], lowered[first]
            dep_end = max((op_end[d] for d in op.deps), default=t0)
            if lo.read_after_deps:
                self._flush(pending)
                pending = None
            stages = self._stages(lo)
            gate = self._gate(i, op, held, settled, op_end, t0)
            ready0 = [max(dep_end, gate)] * len(stages)
            if lo.read and not lo.read_after_deps:
                ready0[0] = gate
            if not stages:
                stages, ready0 = [lo.write], [max(dep_end, gate)]
            times = self._solve(stages, lo.chunks, ready0)
            record(i, stages, times, lo.write)
            if lo.engines_s:  # a collective's transfers take the shared DMA engines first
                self.free[DMA_READ] = max(self.free[DMA_READ], times[0][0][0]) + lo.engines_s
        self._flush(pending)
        return op_end

    def _run_kernel(self, program: Program, lowered: list[LoweredOp], first: int, last: int, t0: float,
                    held: list[float], settled: np.ndarray, op_end: np.ndarray, record) -> None:
        """Ops ``first..last`` as one fused kernel: every op cut into the same number of tiles and
        the stages of all of them issued tile by tile (:func:`_kernel_pipeline`)."""
        members = range(first, last + 1)
        n = max(lowered[i].chunks for i in members)
        stages, ready0, preds, succ, spans = [], [], [], [], []
        previous_last = -1
        load: dict[int, float] = {}  # each engine's work in the kernel so far
        # the kernel's ops all hold their SBUF at once: room for all of them opens its reads
        gate = max(self._gate(i, program.ops[i], held, settled, op_end, t0, placed=first) for i in (first, last))
        for i in members:
            op, lo = program.ops[i], lowered[i]
            dep_end = max((op_end[d] for d in op.deps if d < first), default=t0)
            own = [_rechunk(_balance_evac(st, load), lo.chunks / n) for st in ([lo.read] if lo.read else [])
                   + list(lo.compute)]
            for st in own:
                load[st.resource] = load.get(st.resource, 0.0) + st.dur_s * n
            begin = len(stages)
            for k, st in enumerate(own):
                is_read = k == 0 and lo.read is not None
                stages.append(st)
                ready0.append(gate if is_read else max(gate, dep_end))
                if is_read:
                    preds.append(())
                elif k == (1 if lo.read else 0):  # the op's first engine stage takes the previous op's tiles
                    preds.append(tuple(p for p in (previous_last, begin if lo.read else -1) if p >= 0))
                else:
                    preds.append((len(stages) - 2,))
                succ.append(-1)
            first_compute = begin + (1 if lo.read else 0)
            if lo.read:
                succ[begin] = first_compute
            for s in range(first_compute, len(stages) - 1):
                succ[s] = s + 1
            if previous_last >= 0:
                succ[previous_last] = first_compute
                stages[previous_last] = replace(stages[previous_last], buffers=KERNEL_TILE_BUFFERS)
            previous_last = len(stages) - 1
            spans.append((begin, len(stages)))
        slots = [self._slot(st.resource) for st in stages]
        times = _kernel_pipeline(stages, n, ready0, preds, succ, slots, self.free, self.ramp)
        for i, (begin, end) in zip(members, spans, strict=True):
            write = lowered[i].write
            record(i, stages[begin:end], times[begin:end],
                   None if write is None else _rechunk(write, lowered[i].chunks / n))


def column(parts: list, dtype) -> np.ndarray:
    """One column of an :class:`EventLog`, from its parts: arrays, :class:`Copies` (written
    straight into the column), and (value, count) runs of one value (each stretch of
    consecutive ones expanded by one ``np.repeat``)."""
    pieces: list = []
    values: list = []
    counts: list[int] = []
    copies = False
    for part in parts:
        if isinstance(part, tuple):
            values.append(part[0])
            counts.append(part[1])
            continue
        if values:
            pieces.append(np.repeat(np.asarray(values, dtype), counts))
            values, counts = [], []
        copies = copies or isinstance(part, Copies)
        pieces.append(part)
    if values:
        pieces.append(np.repeat(np.asarray(values, dtype), counts))
    if not copies:
        return np.concatenate(pieces).astype(dtype, copy=False) if pieces else np.empty(0, dtype)
    out = np.empty(sum(len(p) for p in pieces), dtype)
    at = 0
    for piece in pieces:
        end = at + len(piece)
        if isinstance(piece, Copies):
            piece.fill(out[at:end])
        else:
            out[at:end] = piece
        at = end
    return out


def sbuf_rows(entries: list) -> np.ndarray:
    """The SBUF spans of an :class:`EventLog` (a slice of its ``sbuf``), as rows of start, end and
    bytes: its ops' own and the blocks of their copies, in order."""
    blocks: list[np.ndarray] = []
    own: list = []
    for entry in entries:
        if isinstance(entry, np.ndarray):
            if own:
                blocks.append(np.array(own, np.float64).reshape(-1, 3))
                own = []
            blocks.append(entry)
        else:
            own.append(entry)
    if own:
        blocks.append(np.array(own, np.float64).reshape(-1, 3))
    return np.concatenate(blocks) if blocks else np.zeros((0, 3))


def repeat_tail(log: EventLog, mark: tuple[int, int, int], times: int, period_s: float, op_stride: int) -> None:
    """Append ``times`` copies of everything logged since ``mark``, each shifted by ``period_s``
    and with op ids advanced by ``op_stride`` (identical program executions back to back)."""
    reps = np.arange(1, times + 1)
    copy_span(log, mark, log_mark(log), reps * period_s, reps * op_stride)


def copy_span(log: EventLog, begin: tuple[int, int, int], end: tuple[int, int, int], shifts_s: np.ndarray,
              op_shifts: np.ndarray) -> None:
    """Append a copy of what was logged between the marks ``begin`` and ``end`` (one execution of
    a program) for each of ``shifts_s``, shifted by that many seconds and with op ids advanced
    by the matching ``op_shifts`` (the same program run again later)."""
    if not len(shifts_s):
        return
    ev, sb, ps = begin
    cols = {name: column(getattr(log, name)[ev:end[0]], np.float64) for name in ("start", "dur", "flops", "nbytes")}
    track = column(log.track[ev:end[0]], np.int16)
    op = column(log.op[ev:end[0]], np.int32)
    times = len(shifts_s)
    log.track.append(Copies(track, count=times))
    log.start.append(Copies(cols["start"], np.asarray(shifts_s, np.float64)))
    log.dur.append(Copies(cols["dur"], count=times))
    log.flops.append(Copies(cols["flops"], count=times))
    log.nbytes.append(Copies(cols["nbytes"], count=times))
    if len(op):
        first, last = int(op.min()), int(op.max())
        for per_op in (log.throttled, log.waited):
            copied = [(k, v) for k, v in per_op.items() if first <= k <= last]
            for shift in op_shifts:
                per_op.update((k + int(shift), v) for k, v in copied)
    log.op.append(Copies(op, np.asarray(op_shifts, np.int64).astype(np.int32)))
    sbuf = sbuf_rows(log.sbuf[sb:end[1]])
    if len(sbuf):
        copies = np.tile(sbuf, (times, 1))
        copies[:, :2] += np.repeat(shifts_s, len(sbuf))[:, None]
        log.sbuf.append(copies)
    if ps < end[2]:  # one entry per copy, of every span's chunks
        start, stop, amount = psum_columns(log.psum[ps:end[2]])
        log.psum.extend((start + dt, stop + dt, amount) for dt in shifts_s)


def psum_columns(entries: list[tuple]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The PSUM occupancy an :class:`EventLog` holds, as starts, ends and bytes per chunk (an
    entry's bytes are one number for all its chunks, as the scheduler records them, or one per
    chunk, as copies hold them)."""
    start = np.concatenate([e[0] for e in entries])
    stop = np.concatenate([e[1] for e in entries])
    amount = column([(e[2], len(e[0])) if np.ndim(e[2]) == 0 else e[2] for e in entries], np.float64)
    return start, stop, amount


def log_mark(log: EventLog) -> tuple[int, int, int]:
    return len(log.start), len(log.sbuf), len(log.psum)

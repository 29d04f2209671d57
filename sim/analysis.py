"""Why a run is slow where it is: per-layer (and per-op) time, FLOPs, bytes, arithmetic
intensity, what bounds it, MFU and MBU; the run's summary under the Neuron Explorer's metric
names; its roofline; and ranked insights, each computed from the trace with its threshold here.

Everything is derived from the trace alone (a saved file gives the same answers as the run that
made it); chip peaks come from the chip data named in the trace's metadata. A trace imported from
Chrome JSON has no chip: its analysis holds times and busy fractions only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, cached_property, lru_cache

import numpy as np

from sim.catalogue import explorer_summary
from sim.description import Hardware, hardware_of
from sim.host import HOST, PIPELINE_WAIT
from sim.metrics import communication, compute_metrics, requests_back_to_back
from sim.trace import PIPELINE_BUBBLE, Trace, union_intervals

# what can bound a layer: the resource busiest over its span (the host's costs are layers the
# host track bounds)
BOUND_RESOURCES = {"tensor": ("tensor",), "vector": ("vector",), "scalar": ("scalar",), "gpsimd": ("gpsimd",),
                   "memory": ("dma_read", "dma_write"), "collective": ("collective",), "host": (HOST,)}
# the rows whose events' bytes are device memory moved: the DMA queues, and the instructions that say
# what they move (a device profile's, whose DMA packets are in no layer; a simulation's say 0)
MOVERS = ("dma_read", "dma_write", "tensor", "vector", "scalar", "gpsimd")
LATENCY_BOUND_BELOW = 0.5  # busiest resource under half of the span: the layer waits on dependencies


@dataclass(frozen=True)
class Stats:
    """One layer, one op, or one region of a run."""

    name: str
    kind: str
    start_ns: float
    end_ns: float
    time_ns: float  # its span, times the executions it stands for
    flops: float  # model FLOPs of the whole copy (all its cores)
    bytes: float  # device memory read and written by the whole copy
    busy: dict[str, float]  # fraction of its span each resource of core 0 was busy
    mfu: float | None
    mbu: float | None
    spill_save_bytes: float = 0.0
    spill_reload_bytes: float = 0.0
    throttled_ns: float = 0.0  # TensorE time lost to the warm-up (dI/dt) throttle
    tensor_wait_ns: float = 0.0  # TensorE occupied waiting on semaphores before its instructions (not active)
    ops: Sequence[Stats] = ()  # a layer's ops (or a block's layers), in order of their start

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte of device memory traffic (infinite when it moves none)."""
        return self.flops / self.bytes if self.bytes > 0 else (math.inf if self.flops > 0 else 0.0)

    @property
    def occupied(self) -> dict[str, float]:
        """Fraction of its time each resource was taken: busy, and for TensorE also waiting on its
        semaphores between instructions (its instruction stream is still the one being worked)."""
        out = dict(self.busy)
        if "tensor" in out and self.time_ns > 0:
            out["tensor"] = min(1.0, out["tensor"] + self.tensor_wait_ns / self.time_ns)
        return out

    @cached_property
    def bound(self) -> str:
        """The most active resource, as Neuron Explorer's active times rank the engines; or
        ``latency`` when none is occupied half of the time.

        TensorE's semaphore waits decide the second question, not the first: while the array
        waits on its semaphores its instruction stream is still the one being worked (the layer is
        not idle), but what it waits for is another engine's work (operands landing through DMA,
        PSUM banks being evacuated), so a DMA busier than the array's active time bounds the layer.
        """
        if not self.busy:
            return "latency"
        name, _ = max(self.busy.items(), key=lambda kv: kv[1])
        return name if max(self.occupied.values()) >= LATENCY_BOUND_BELOW else "latency"

    @property
    def achieved_flops_per_s(self) -> float:
        return self.flops / (self.time_ns * 1e-9) if self.time_ns > 0 else 0.0


class LazyOps(Sequence):
    """A layer's ops, made on first use: a run's op table is a pass over every event and a Stats
    per op (a decode's hundred thousand), which a report that reads no op need not pay."""

    def __init__(self, make: Callable[[], Sequence[Stats]]) -> None:
        self._make: Callable[[], Sequence[Stats]] | None = make
        self._ops: tuple[Stats, ...] = ()

    def _made(self) -> tuple[Stats, ...]:
        if self._make is not None:
            self._ops, self._make = tuple(self._make()), None
        return self._ops

    def __getitem__(self, i):
        return self._made()[i]

    def __len__(self) -> int:
        return len(self._made())

    def __iter__(self) -> Iterator[Stats]:
        return iter(self._made())

    def __eq__(self, other: object) -> bool:
        return self._made() == tuple(other) if isinstance(other, Sequence) else NotImplemented

    def __repr__(self) -> str:
        return repr(self._made())


@dataclass(frozen=True)
class Roofs:
    """A copy's ceilings: FLOP/s per data type and device-memory bytes per second."""

    compute: dict[str, float]
    memory_bytes_per_s: float
    memory_kind: str

    def attainable(self, intensity: float, dtype: str) -> float:
        return min(self.compute[dtype], intensity * self.memory_bytes_per_s)


@dataclass(frozen=True)
class Insight:
    severity: str  # high, medium, low
    text: str
    layers: tuple[str, ...] = ()
    start_us: float = 0.0
    end_us: float = 0.0
    key: str = ""  # which rule found it


@dataclass
class _Context:
    hardware: Hardware | None
    shards: int
    peak_per_core: float | None
    memory_per_core: float | None
    repeats: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def mfu(self, flops: float, seconds: float) -> float | None:
        """``flops`` in ``seconds`` over the copy's TensorE peak (None without chip data)."""
        return flops / (seconds * self.peak_per_core * self.shards) if self.peak_per_core and seconds > 0 else None

    def mbu(self, nbytes: float, seconds: float) -> float | None:
        """``nbytes`` in ``seconds`` over the copy's device-memory bandwidth (None without chip data)."""
        return nbytes / (seconds * self.memory_per_core * self.shards) if self.memory_per_core and seconds > 0 else None


def _context(trace: Trace) -> _Context:
    m = trace.meta
    hw = hardware_of(m)
    shards = int(m.get("cores_per_copy", 1)) * int(m.get("lnc", 1))
    return _Context(hw, shards, m.get("peak_flops_per_core"), hw.memory_share_bytes_per_s if hw else None,
                    trace.event_repeats)


def roofs(trace: Trace) -> Roofs | None:
    """The copy's compute roofs (the data types its chip runs) and device-memory roof."""
    ctx = _context(trace)
    if ctx.hardware is None or ctx.memory_per_core is None:
        return None
    compute = {d: peak * ctx.shards for d, peak in ctx.hardware.peak_flops_per_core.items()}
    return Roofs(compute, ctx.memory_per_core * ctx.shards, ctx.hardware.memory_kind)


def _core0_tracks(trace: Trace) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, t in enumerate(trace.tracks):
        if t.core == 0:
            out.setdefault(t.kind, []).append(i)
    return out


def _group_stats(trace: Trace, group: np.ndarray, n_groups: int, names, kinds, start: np.ndarray, end: np.ndarray,
                 sel: np.ndarray, ctx: _Context) -> list[Stats]:
    """Stats of ``n_groups`` groups of the events ``sel`` (``group`` gives each event's group),
    each over its own span."""
    ev = trace.events
    tracks = _core0_tracks(trace)
    core0 = np.zeros(len(trace.tracks), bool)
    for idx in tracks.values():
        core0[idx] = True
    on0 = sel & core0[ev["track"]] if len(trace.tracks) else sel
    on0 = on0 & (group >= 0)  # events of no group (the host's work beside the engines')
    g = group[on0]
    rep = ctx.repeats[on0]
    weight = np.bincount(g, weights=rep, minlength=n_groups) / np.maximum(np.bincount(g, minlength=n_groups), 1)
    weight[weight == 0] = 1.0
    flops = np.bincount(g, weights=ev["flops"][on0] * rep, minlength=n_groups) * ctx.shards
    dma_tracks = [i for k in MOVERS for i in tracks.get(k, [])]
    is_dma = np.isin(ev["track"][on0], dma_tracks)
    nbytes = np.bincount(g[is_dma], weights=(ev["bytes"][on0] * rep)[is_dma], minlength=n_groups) * ctx.shards
    span = np.maximum(end - start, 0.0)
    busy = {}
    for resource, kinds_ in BOUND_RESOURCES.items():
        idx = [i for k in kinds_ for i in tracks.get(k, [])]
        if not idx:
            continue
        on = np.isin(ev["track"][on0], idx)
        dur = np.bincount(g[on], weights=ev["dur_ns"][on0][on], minlength=n_groups)
        busy[resource] = np.divide(dur, span, out=np.zeros(n_groups), where=span > 0).clip(0.0, 1.0)
    # a Stats per group, from Python floats (a decode's hundred thousand ops: indexing arrays
    # element by element would take most of the report's time)
    columns = (start.tolist(), end.tolist(), (span * weight).tolist(), flops.tolist(), nbytes.tolist())
    resources, fractions = list(busy), zip(*(v.tolist() for v in busy.values()), strict=True) if busy else None
    out = []
    for i, (s, e, time_ns, fl, nb) in enumerate(zip(*columns, strict=True)):
        t = time_ns * 1e-9
        shares = dict(zip(resources, next(fractions), strict=True)) if fractions else {}
        out.append(Stats(names[i], kinds[i], s, e, time_ns, fl, nb, shares, ctx.mfu(fl, t), ctx.mbu(nb, t)))
    return out


def _measure_before(starts: np.ndarray, durs: np.ndarray):
    """For intervals (any order, may overlap), a function giving for times ``t`` the length of their
    union before ``t``."""
    starts, durs = union_intervals(np.asarray(starts, float), np.asarray(durs, float))
    before = np.concatenate(([0.0], np.cumsum(durs)))

    def at(t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, float)
        i = np.searchsorted(starts, t, side="right") - 1
        ic = np.clip(i, 0, None)
        inside = np.clip(t - starts[ic], 0.0, durs[ic]) if len(durs) else np.zeros_like(t)
        return np.where(i >= 0, before[ic] + inside, 0.0) if len(durs) else np.zeros_like(t)

    return at


def _busy_before(trace: Trace, track_ids: list[int]):
    """A function giving, for times ``t``, how long the tracks (their union) were busy before ``t``."""
    ev = trace.events
    sel = np.isin(ev["track"], track_ids)
    return _measure_before(ev["start_ns"][sel], ev["dur_ns"][sel])


def layer_windows(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Each layer's stretch of the run, so that the layers partition the timeline and their times
    add up to the run's: a layer starts with its first event, but its reads that run ahead during
    the layer before (weight prefetches) count to that layer's time, until its engines finish
    or this layer's start; it ends where the next layer starts, or where a stretch of executions
    that were not stored begins. The host's costs are layers too (kind ``host``); its work beside
    the engines' (layer -1) is no layer's."""
    n = len(trace.layer_names)
    ev = trace.events
    first = np.asarray(trace.layer_start_ns, float).copy()
    reads = [i for i, t in enumerate(trace.tracks) if t.kind == "dma_read"]
    engine = ~np.isin(ev["track"], reads) & (ev["layer"] >= 0)
    if engine.any():
        first_engine = np.full(n, np.inf)
        last_engine = np.full(n, -np.inf)
        np.minimum.at(first_engine, ev["layer"][engine], ev["start_ns"][engine])
        np.maximum.at(last_engine, ev["layer"][engine], ev["start_ns"][engine] + ev["dur_ns"][engine])
        previous_done = np.maximum.accumulate(np.concatenate(([-np.inf], last_engine[:-1])))
        first = np.minimum(first_engine, np.maximum(first, previous_done))
        first = np.where(np.isfinite(first), first, np.asarray(trace.layer_start_ns, float))
    start = np.maximum.accumulate(first)
    end = np.append(start[1:], max(float(np.max(trace.layer_end_ns)), start[-1]))
    # nor does it run on into executions that were not stored (its repeats stand for them)
    stops = np.array([s for s, _, _ in trace.unstored_spans], float)
    if len(stops):
        i = np.searchsorted(stops, start, side="left")
        cap = np.append(stops, np.inf)[i]
        end = np.maximum(np.minimum(end, cap), start)
    return start, end


def layer_table(trace: Trace, with_ops: bool = False) -> list[Stats]:
    """One :class:`Stats` per layer, in program order (``ops`` filled when ``with_ops``): its
    FLOPs and bytes are its own ops'; its time and what bounds it are its window's (see
    :func:`layer_windows`): what the engines did while it was the layer running."""
    ctx = _context(trace)
    n = len(trace.layer_names)
    if not n:
        return []
    ev = trace.events
    stats = trace.meta.get("layer_stats", {})

    def per_layer(key: str) -> np.ndarray:
        values = np.asarray(stats.get(key, ()), float)
        return values if len(values) == n else np.zeros(n)

    # the executions each stored layer stands for scale its time and what its metadata counts
    layer_rep = trace.layer_repeats
    layered = ev["layer"] >= 0
    start, end = layer_windows(trace)
    span = end - start
    tracks = _core0_tracks(trace)
    busy = {}
    for resource, kinds in BOUND_RESOURCES.items():
        idx = [i for k in kinds for i in tracks.get(k, [])]
        if idx:
            at = _busy_before(trace, idx)
            busy[resource] = np.divide(at(end) - at(start), span, out=np.zeros(n), where=span > 0).clip(0.0, 1.0)
    on0 = np.isin(ev["track"], [i for v in tracks.values() for i in v]) & layered
    g, rep = ev["layer"][on0], ctx.repeats[on0]
    flops = np.bincount(g, weights=ev["flops"][on0] * rep, minlength=n) * ctx.shards
    dma = np.isin(ev["track"][on0], [i for k in MOVERS for i in tracks.get(k, [])])
    nbytes = np.bincount(g[dma], weights=(ev["bytes"][on0] * rep)[dma], minlength=n) * ctx.shards
    time_ns = span * layer_rep
    spill_save = per_layer("spill_save_bytes") * layer_rep * ctx.shards
    spill_reload = per_layer("spill_reload_bytes") * layer_rep * ctx.shards
    throttled = per_layer("tensor_throttled_ns") * layer_rep
    waited = per_layer("tensor_waited_ns") * layer_rep
    op_table = cache(lambda: _op_tables(trace, ctx))
    # a Stats per layer, from Python floats (indexing arrays element by element costs more)
    columns = [a.tolist() for a in (start, end, time_ns, flops, nbytes, spill_save, spill_reload, throttled, waited)]
    fractions = zip(*(v.tolist() for v in busy.values()), strict=True) if busy else iter(((),) * n)
    layers = []
    for i, (s, e, t_ns, fl, nb, save, reload, thr, wait) in enumerate(zip(*columns, strict=True)):
        t = t_ns * 1e-9
        ops = LazyOps(lambda i=i: op_table().get(i, ())) if with_ops else ()
        layers.append(Stats(trace.layer_names[i], trace.layer_kinds[i], s, e, t_ns, fl, nb,
                            dict(zip(busy, next(fractions), strict=True)), ctx.mfu(fl, t), ctx.mbu(nb, t), save,
                            reload, thr, wait, ops))
    return _per_request(_merge_same_names(layers, ctx), requests_back_to_back(trace))


def _per_request(layers: list[Stats], requests: int) -> list[Stats]:
    """A stream of requests back to back, as one request: every layer ran once per request."""
    if requests <= 1:
        return layers

    def scale(st: Stats) -> Stats:
        return replace(st, time_ns=st.time_ns / requests, flops=st.flops / requests, bytes=st.bytes / requests,
                       spill_save_bytes=st.spill_save_bytes / requests,
                       spill_reload_bytes=st.spill_reload_bytes / requests, throttled_ns=st.throttled_ns / requests,
                       tensor_wait_ns=st.tensor_wait_ns / requests,
                       ops=LazyOps(lambda: [scale(o) for o in st.ops]))

    return [scale(st) for st in layers]


def _merge(members: list[Stats], ctx: _Context) -> Stats:
    """Stats of the same layer (or op) run several times (requests back to back) as one: times,
    FLOPs and bytes summed, busy fractions weighted by time, span of the first."""
    if len(members) == 1:
        return members[0]
    first = members[0]
    time = sum(m.time_ns for m in members)
    flops, nbytes = sum(m.flops for m in members), sum(m.bytes for m in members)
    busy = {k: sum(m.busy.get(k, 0.0) * m.time_ns for m in members) / time if time else 0.0 for k in first.busy}
    t = time * 1e-9
    ops = LazyOps(lambda: _merge_same_names([o for m in members for o in m.ops], ctx) if first.ops else ())
    return Stats(first.name, first.kind, first.start_ns, first.end_ns, time, flops, nbytes, busy,
                 ctx.mfu(flops, t),
                 ctx.mbu(nbytes, t),
                 sum(m.spill_save_bytes for m in members), sum(m.spill_reload_bytes for m in members),
                 sum(m.throttled_ns for m in members), sum(m.tensor_wait_ns for m in members), ops)


def _merge_same_names(stats: list[Stats], ctx: _Context) -> list[Stats]:
    groups: dict[str, list[Stats]] = {}
    for st in stats:
        groups.setdefault(st.name, []).append(st)
    if len(groups) == len(stats):
        return stats
    return [_merge(members, ctx) for members in groups.values()]


def _op_tables(trace: Trace, ctx: _Context) -> dict[int, list[Stats]]:
    """Each layer's ops (grouped by name), each over its own span, in one pass over the events."""
    ev = trace.events
    layered = ev["layer"] >= 0  # the host's work beside the engines' is no layer's op
    if not layered.any():
        return {}
    names, name_of_op = np.unique(np.asarray(trace.op_names, dtype=object).astype(str), return_inverse=True)
    key = np.where(layered, ev["layer"].astype(np.int64) * len(names) + name_of_op[ev["op"]], -1)
    keys, group = np.unique(key[layered], return_inverse=True)
    n = len(keys)
    start = np.full(n, np.inf)
    end = np.zeros(n)
    np.minimum.at(start, group, ev["start_ns"][layered])
    np.maximum.at(end, group, (ev["start_ns"] + ev["dur_ns"])[layered])
    full = np.full(trace.n_events, -1, np.int64)
    full[layered] = group
    stats = _group_stats(trace, full, n, [str(names[k % len(names)]) for k in keys], ["op"] * n, start, end,
                         layered, ctx)
    out: dict[int, list[Stats]] = {}
    for k, st in zip(keys, stats, strict=True):
        out.setdefault(int(k // len(names)), []).append(st)
    for v in out.values():
        v.sort(key=lambda st: st.start_ns)
    return out


def summary(trace: Trace) -> dict[str, float | None]:
    """The run's summary under the Neuron Explorer's names where the meaning is the same: the
    catalogue's figures (:func:`sim.catalogue.explorer_summary`)."""
    return explorer_summary(trace)


# --- insights ------------------------------------------------------------------------------------

# thresholds of the rules (fractions of the run's time unless said otherwise)
MEMORY_BOUND_SHARE = 0.10  # memory-bound layers taking at least this share of the run
SMALL_DMA_BYTES = 512  # an average DMA transfer below this is descriptor-bound
SPILL_RELOAD_SHARE = 0.25  # spill reloads above this share of device-memory reads (Neuron Explorer's)
ENGINE_HOTSPOT_SHARE = 0.10  # vector/scalar/gpsimd-bound layers taking this share of the run
EXPOSED_COMM_SHARE = 0.10  # collectives that kept the core waiting this share of the run
LATENCY_BOUND_SHARE = 0.15  # layers waiting on dependencies this share of the run
THROTTLED_SHARE = 0.05  # TensorE active time lost to the warm-up throttle
SEMAPHORE_WAIT_SHARE = 0.15  # TensorE waiting on its semaphores this share of the run
EVACUATION_SHARE = 0.10  # matmul layers whose PSUM evacuation keeps ScalarE/VectorE busier than TensorE
PIPELINE_BUBBLE_SHARE = 0.02  # a pipelined step's slowest stage idle this share of the step
HOST_SHARE = 0.05  # the host's costs (launches, copies, request handling, a generate loop) this share of the run
COMPARE_FACTOR = 1.5  # another run's same layer at least this much faster is worth saying why


def _share(layers: list[Stats], total_ns: float) -> float:
    return sum(s.time_ns for s in layers) / total_ns if total_ns > 0 else 0.0


def _span(layers: list[Stats]) -> tuple[float, float]:
    return min(s.start_ns for s in layers) / 1e3, max(s.end_ns for s in layers) / 1e3


# an execution's number in a layer's name: "decode ctx 8192 #27/", "micro-batch 2/", "prefill chunk 3/" (not a
# bucket's length: "decode ctx 8192/" is the one step of that bucket)
_EXECUTION = re.compile(r"(?: #\d+|(?<=micro-batch) \d+|(?<=chunk) \d+)(?=/)")


@lru_cache(maxsize=1 << 16)  # a report asks for each of a decode's layers once per rule
def model_layer(name: str) -> str:
    """The layer of the model a layer of the run is, whichever execution ran it: its name without
    the execution's number (``decode ctx 256 #27/layer0.mlp``: ``decode ctx 256/layer0.mlp``)."""
    return _EXECUTION.sub("", name)


def _by_model_layer(layers: list[Stats]) -> dict[str, float]:
    """The time of each model layer (:func:`model_layer`) among ``layers``, every execution summed."""
    out: dict[str, float] = {}
    for s in layers:
        out[model_layer(s.name)] = out.get(model_layer(s.name), 0.0) + s.time_ns
    return out


def _count(layers: list[Stats]) -> str:
    """How many layers of the model ``layers`` are, each counted once whatever its executions."""
    n = len(_by_model_layer(layers))
    return f"{n} layer{'' if n == 1 else 's'}"


def _names(layers: list[Stats], most: int = 3) -> str:
    """The ``most`` model layers among ``layers`` taking the most time (every execution summed)."""
    times = _by_model_layer(layers)
    top = sorted(times, key=lambda name: -times[name])[:most]
    more = f" and {len(times) - most} more" if len(times) > most else ""
    return ", ".join(top) + more


def _severity(share: float) -> str:
    return "high" if share >= 0.3 else "medium" if share >= 0.15 else "low"


@dataclass(frozen=True)
class RunAnalysis:
    """What the views of one run read: its layers (with their ops), summary and roofs."""

    layers: list[Stats]
    summary: dict[str, float | None]
    roofs: Roofs | None

    @cached_property
    def total_ns(self) -> float:
        """Every layer's time summed (once: a report divides each layer's time by it)."""
        return sum(s.time_ns for s in self.layers)


def analyse(trace: Trace) -> RunAnalysis:
    layers = layer_table(trace, with_ops=True)
    return RunAnalysis(layers, summary(trace), roofs(trace))


def insights(trace: Trace, others: list[Trace] = (), analysis: RunAnalysis | None = None,
             other_analyses: list[RunAnalysis] | None = None) -> list[Insight]:
    """Ranked findings about ``trace`` (most of the run's time first), and what runs in
    ``others`` do differently with the same layers (analyses passed when already made)."""
    analysis = analysis or analyse(trace)
    layers = analysis.layers
    if not layers:
        return []
    total = analysis.total_ns
    summ = analysis.summary
    found: list[tuple[float, Insight]] = []

    def add(share: float, key: str, text: str, subject: list[Stats], span: tuple[float, float] | None = None) -> None:
        a, b = span or (_span(subject) if subject else (0.0, 0.0))
        found.append((share, Insight(_severity(share), text, tuple(s.name for s in subject), a, b, key)))

    memory = [s for s in layers if s.bound == "memory"]
    share = _share(memory, total)
    if share >= MEMORY_BOUND_SHARE:
        why = []
        avg = summ.get("average_dma_size")
        if avg is not None and avg < SMALL_DMA_BYTES:
            why.append(f"small DMA transfers (average {avg:,.0f} B)")
        weights = sum(s.bytes for s in memory) - sum(s.spill_reload_bytes + s.spill_save_bytes for s in memory)
        if weights > 0.5 * sum(s.bytes for s in memory):
            hw = _context(trace).hardware
            kind = hw.memory_kind if hw else "device memory"
            why.append(f"weights and caches read from {kind} every pass")
        verb = "is" if len(_by_model_layer(memory)) == 1 else "are"
        text = (f"{_count(memory)} {verb} memory-bound, {100 * share:.0f}% of the time ({_names(memory)})"
                + (": " + "; ".join(why) if why else "") + ".")
        add(share, "memory_bound", text, memory)

    reads = summ.get("hbm_read_bytes") or 0.0
    reload = summ.get("spill_reload_bytes") or 0.0
    if reads > 0 and reload / reads > SPILL_RELOAD_SHARE:
        spilling = [s for s in layers if s.spill_reload_bytes > 0]
        add(reload / reads, "spill",
            f"SBUF spills: {100 * reload / reads:.0f}% of device-memory reads reload spilled activations "
            f"({_names(spilling)}); {_or(_spill_remedies(trace.meta))} keep them on chip.", spilling)

    for engine in ("vector", "scalar", "gpsimd"):
        hot = [s for s in layers if s.bound == engine]
        share = _share(hot, total)
        if share >= ENGINE_HOTSPOT_SHARE:
            ops = [o for s in hot for o in s.ops if o.busy.get(engine, 0) > 0]
            top_ops = sorted({o.name for o in sorted(ops, key=lambda o: -o.time_ns)[:6]})[:3]
            add(share, f"{engine}_hotspot",
                f"{engine.capitalize()}E bounds {_count(hot)}, {100 * share:.0f}% of the time "
                f"({_names(hot)}; ops {', '.join(top_ops)}).", hot)

    if trace.track_index("collective") >= 0:
        _, exposed = communication(trace)
        run_s = trace.meta.get("total_ns", trace.duration_ns) * 1e-9
        if run_s > 0 and exposed / run_s >= EXPOSED_COMM_SHARE:
            waiting = [s for s in layers if s.bound == "collective"] or [s for s in layers if s.busy.get("collective")]
            add(exposed / run_s, "exposed_collectives",
                f"Collectives keep the cores waiting {100 * exposed / run_s:.0f}% of the time "
                f"({exposed * 1e3:,.2f} ms): overlap them with compute (bucketing, sequence parallelism) "
                "or use fewer ranks.", waiting)

    waiting = [s for s in layers if s.bound == "latency"]
    share = _share(waiting, total)
    if share >= LATENCY_BOUND_SHARE:
        add(share, "latency_bound",
            f"{_count(waiting)} leave every engine idle half their time or more, {100 * share:.0f}% of the "
            f"time ({_names(waiting)}): engines wait on each other's results (small ops, dependencies).", waiting)

    throttled = summ.get("tensor_throttled_percent")
    if throttled is not None and throttled / 100 >= THROTTLED_SHARE:
        hit = [s for s in layers if s.throttled_ns > 0]
        add(throttled / 100, "throttled",
            f"TensorE throttled: {throttled:.0f}% of its active time runs below full rate while the dI/dt limit "
            "ramps up after idle gaps; keeping the array above half use avoids it.", hit)

    waited = [s for s in layers if s.tensor_wait_ns > 0]
    share = sum(s.tensor_wait_ns for s in waited) / total if total > 0 else 0.0
    if share >= SEMAPHORE_WAIT_SHARE:
        add(share, "semaphore_wait",
            f"TensorE waits on its semaphores {100 * share:.0f}% of the time ({_names(waited)}): compiled code "
            "synchronises every matmul instruction with its operands' DMA and the PSUM evacuation; fewer, wider "
            f"instructions (a larger batch) or {_kernels_hint(trace.meta)} pipeline the wait away.", waited)

    evac = []
    for s in layers:
        if s.busy.get("tensor", 0) > 0.2 and max(s.busy.get("scalar", 0), s.busy.get("vector", 0)) > s.busy["tensor"]:
            evac.append(s)
    share = _share([s for s in evac if s.bound in ("scalar", "vector")], total)
    if share >= EVACUATION_SHARE:
        add(share, "psum_evacuation",
            f"PSUM evacuation: ScalarE/VectorE are busier than TensorE in {_count(evac)} with matmuls "
            f"({_names(evac)}); the array waits for PSUM banks to be emptied.", evac)

    run_ns = trace.meta.get("total_ns", trace.duration_ns)
    for phase in trace.meta.get("phases", ()):
        idle = phase["end_ns"] - phase["start_ns"]
        if phase["name"] == PIPELINE_BUBBLE and run_ns > 0 and idle / run_ns >= PIPELINE_BUBBLE_SHARE:
            add(idle / run_ns, "pipeline_bubble",
                f"Pipeline bubble: each step the slowest stage waits {idle * 1e-6:,.1f} ms ({100 * idle / run_ns:.1f}% "
                "of the step) while the other stages fill and drain the pipeline; more micro-batches a step "
                "(--grad-accum) or fewer stages (--pipeline) shrink it.", [],
                (phase["start_ns"] * 1e-3, phase["end_ns"] * 1e-3))

    host = [s for s in layers if s.kind == HOST and not s.name.endswith(PIPELINE_WAIT)]
    share = _share(host, total)
    if share >= HOST_SHARE:
        add(share, "host", f"The host takes {100 * share:.0f}% of the time ({_host_costs(host)}), while the "
            "NeuronCores wait: whatever the model does on the device, this is paid every request.", host)

    for k, other in enumerate(others):
        theirs = other_analyses[k] if other_analyses else None
        found += _comparisons(trace, layers, other, total, theirs.layers if theirs else None)
    found.sort(key=lambda x: -x[0])
    return [ins for _, ins in found]


def _host_costs(host: list[Stats]) -> str:
    """The host's layers by what they do (their name's last part), the longest first, with times."""
    by: dict[str, float] = {}
    for s in host:
        what = s.name.rsplit("/", 1)[-1]
        by[what] = by.get(what, 0.0) + s.time_ns
    return ", ".join(f"{what} {ns * 1e-6:,.2f} ms" for what, ns in sorted(by.items(), key=lambda kv: -kv[1]))


def _spill_remedies(meta) -> list[str]:
    """What keeps a run's activations in SBUF, of what it could still change: smaller tiles, a
    smaller batch (above one), a fused (flash) attention (when its attention is the compiler's)."""
    out = ["smaller tiles"]
    if meta.get("batch", 1) > 1:
        out.append("a smaller batch")
    if (meta.get("config") or {}).get("attention") != "flash":
        out.append("a fused (flash) attention")
    return out


def _or(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _kernels_hint(meta) -> str:
    """The NKI kernels a run could call: for a decoder's decode or serve run, NxD Inference's
    projection kernels it has not enabled."""
    if meta.get("mode") not in ("decode", "serve"):
        return "an NKI kernel"
    enabled = (meta.get("config") or {}).get("nki_kernels") or ()
    flags = [flag for name, flag in (("qkv", "--qkv-kernel-enabled"), ("mlp", "--mlp-kernel-enabled"))
             if name not in enabled]
    return f"an NKI kernel (NxD Inference's {' and '.join(flags)})" if flags else "an NKI kernel"


def _comparisons(trace: Trace, layers: list[Stats], other: Trace, total: float,
                 other_layers: list[Stats] | None = None) -> list[tuple[float, Insight]]:
    """The layers of this run that run much faster on ``other``, and why (one finding per run)."""
    theirs = {s.name: s for s in (other_layers if other_layers is not None else layer_table(other))}
    faster = [(s, theirs[s.name]) for s in layers if s.name in theirs and theirs[s.name].time_ns > 0
              and s.time_ns / theirs[s.name].time_ns >= COMPARE_FACTOR]
    if not faster:
        return []
    faster.sort(key=lambda pair: -(pair[0].time_ns - pair[1].time_ns))
    ours, top = faster[0]
    saved = sum(s.time_ns - t.time_ns for s, t in faster)
    share = saved / total
    reason = _why_faster(ours, top, roofs(trace), roofs(other), trace.meta.get("matmul_dtype", "bf16"))
    chip = other.meta.get("chip", "?")
    others = f" (and {len(faster) - 1} more layers, {100 * share:.0f}% of this run's time)" if len(faster) > 1 else ""
    subject = [s for s, _ in faster]
    a, b = _span(subject)
    return [(share, Insight(_severity(share), f"On {chip} {ours.name} is {ours.time_ns / top.time_ns:.1f}x faster"
                            f"{others}: {reason}.", tuple(s.name for s in subject), a, b, "comparison"))]


AGREES = 1.05  # a ratio explains a faster layer only when it favours the faster run by this much


def _why_faster(ours: Stats, theirs: Stats, our_roofs: Roofs | None, their_roofs: Roofs | None, dtype: str) -> str:
    """Why ``theirs`` takes less time than ``ours``: a peak only when the other run's is higher (a
    "because" agrees with its numbers), else less work or faster engines than their peaks say."""
    if our_roofs is not None and their_roofs is not None:
        if ours.bound == "memory":
            ratio = their_roofs.memory_bytes_per_s / our_roofs.memory_bytes_per_s
            if ratio >= AGREES:
                return (f"it is memory-bound here (MBU {100 * (ours.mbu or 0):.0f}%) and the copy there draws "
                        f"{their_roofs.memory_bytes_per_s / 1e9:,.0f} GB/s of {their_roofs.memory_kind} against "
                        f"{our_roofs.memory_bytes_per_s / 1e9:,.0f} GB/s ({ratio:.1f}x)")
        if ours.bound == "tensor" and dtype in our_roofs.compute and dtype in their_roofs.compute:
            ratio = their_roofs.compute[dtype] / our_roofs.compute[dtype]
            if ratio >= AGREES:
                return (f"it is TensorE-bound here and the copy there has {their_roofs.compute[dtype] / 1e12:,.0f} "
                        f"{dtype.upper()} TFLOP/s against {our_roofs.compute[dtype] / 1e12:,.0f} ({ratio:.1f}x)")
    if ours.bound == "memory" and ours.bytes >= AGREES * theirs.bytes:
        return (f"it is memory-bound here and moves {ours.bytes / 1e6:,.1f} MB of device memory against "
                f"{theirs.bytes / 1e6:,.1f} MB there")
    if ours.bound == "tensor" and ours.flops >= AGREES * theirs.flops:
        return (f"it is TensorE-bound here and does {ours.flops / 1e9:,.1f} GFLOP against {theirs.flops / 1e9:,.1f} "
                "there")
    return f"it is {ours.bound}-bound here, {theirs.bound}-bound there"


# --- the report ----------------------------------------------------------------------------------

LAYER_FIELDS = ("name", "time_us", "share_percent", "flops", "bytes", "arithmetic_intensity", "bound", "mfu", "mbu",
                "spill_save_bytes", "spill_reload_bytes")


def _finite(value):
    return value if value is None or math.isfinite(value) else None


def layer_record(s: Stats, total_ns: float) -> dict:
    share = 100 * s.time_ns / total_ns if total_ns else 0.0
    return {"name": s.name, "time_us": s.time_ns / 1e3, "share_percent": share,
            "flops": s.flops, "bytes": s.bytes, "arithmetic_intensity": _finite(s.arithmetic_intensity),
            "bound": s.bound, "mfu": s.mfu, "mbu": s.mbu, "spill_save_bytes": s.spill_save_bytes,
            "spill_reload_bytes": s.spill_reload_bytes}


def report_record(trace: Trace, others: list[Trace] = (), analysis: RunAnalysis | None = None,
                  other_analyses: list[RunAnalysis] | None = None) -> dict:
    """One run of ``neuronviz report --json``: summary, layer table and insights."""
    analysis = analysis or analyse(trace)
    m = trace.meta
    return {
        "chip": m.get("chip"), "instance": m.get("instance"), "model": m.get("model"), "mode": m.get("mode"),
        "summary": {k: _finite(float(v)) if isinstance(v, int | float) else v for k, v in analysis.summary.items()},
        "layers": [layer_record(s, analysis.total_ns) for s in analysis.layers],
        "insights": [{"severity": i.severity, "text": i.text, "layers": list(i.layers), "start_us": i.start_us,
                      "end_us": i.end_us} for i in insights(trace, others, analysis, other_analyses)],
    }


# --- regions -------------------------------------------------------------------------------------

def region_of_layers(trace: Trace, analysis: RunAnalysis, name: str, keep) -> Stats | None:
    """The layers ``keep(layer)`` accepts, as one region: their times, FLOPs and bytes summed, busy
    fractions and MFU/MBU over their summed time."""
    members = [replace(s, ops=()) for s in analysis.layers if keep(s)]
    if not members:
        return None
    return replace(_merge(members, _context(trace)), name=name, kind="region",
                   start_ns=min(s.start_ns for s in members), end_ns=max(s.end_ns for s in members))


def region_of_run(trace: Trace, name: str = "whole run") -> Stats:
    """The whole run as one region: the catalogue's figures of it (its span, FLOPs, bytes, MFU and
    MBU as every view gives them), each resource busy the share of the span its events cover."""
    met = compute_metrics(trace)
    span_ns = met.span_s * 1e9
    run_ns = span_ns * requests_back_to_back(trace)
    tracks = _core0_tracks(trace)
    busy = {}
    for resource, kinds in BOUND_RESOURCES.items():
        idx = [i for k in kinds for i in tracks.get(k, [])]
        if idx and run_ns > 0:
            busy[resource] = min(1.0, max(trace.run_busy_ns(i) for i in idx) / run_ns)
    return Stats(name, "region", 0.0, run_ns, span_ns, met.flops, met.hbm_read_bytes + met.hbm_write_bytes, busy,
                 met.mfu, met.mbu, met.spill_save_bytes, met.spill_reload_bytes)


def region_of_windows(trace: Trace, name: str, starts, ends) -> Stats:
    """Stretches of the run's timeline as one region: each event counts for the part of it inside
    them (its FLOPs and bytes pro rata); busy fractions are of their total length. Times are the
    stored events' (a window is a stretch of the timeline as drawn)."""
    ctx = _context(trace)
    ev = trace.events
    tracks = _core0_tracks(trace)
    starts, ends = np.atleast_1d(np.asarray(starts, float)), np.atleast_1d(np.asarray(ends, float))
    cover = _measure_before(starts, np.maximum(ends - starts, 0.0))
    first, last = (float(starts.min()), float(ends.max())) if len(starts) else (0.0, 0.0)
    width = float(cover(np.array([last]))[0]) if len(starts) else 0.0
    s, d = ev["start_ns"], ev["dur_ns"]
    overlap = cover(s + d) - cover(s)
    part = np.divide(overlap, d, out=(overlap > 0).astype(float), where=d > 0)
    on0 = np.isin(ev["track"], [i for v in tracks.values() for i in v])
    dma = np.isin(ev["track"], tracks.get("dma_read", []) + tracks.get("dma_write", []))
    flops = float(np.sum(ev["flops"][on0] * part[on0])) * ctx.shards
    nbytes = float(np.sum(ev["bytes"][dma] * part[dma])) * ctx.shards
    busy = {}
    for resource, kinds in BOUND_RESOURCES.items():
        idx = [i for k in kinds for i in tracks.get(k, [])]
        sel = np.isin(ev["track"], idx)
        if idx and width > 0:
            inside = cover(s[sel] + d[sel]) - cover(s[sel])  # these events don't overlap each other
            busy[resource] = float(np.clip(inside.sum() / width, 0.0, 1.0))
    t = width * 1e-9
    return Stats(name, "region", first, last, width, flops, nbytes, busy,
                 ctx.mfu(flops, t),
                 ctx.mbu(nbytes, t))


def region_of_collectives(trace: Trace, name: str = "collectives") -> Stats | None:
    """The stretches of the timeline when a collective runs on core 0."""
    idx = [i for i, t in enumerate(trace.tracks) if t.kind == "collective" and t.core == 0]
    sel = np.isin(trace.events["track"], idx)
    if not sel.any():
        return None
    s, d = trace.events["start_ns"][sel], trace.events["dur_ns"][sel]
    return region_of_windows(trace, name, s, s + d)

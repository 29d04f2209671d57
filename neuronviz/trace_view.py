"""Per-track indexes of a Trace for drawing and picking: sorted events, busy integrals, layers.

Built once per open run; everything a pane needs at 60 frames per second is a lookup here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from sim.host import HOST
from sim.integrals import BusyIntegral, CounterIntegral, IntegralStack, replayed
from sim.trace import Trace, union_intervals

NESTED_LOOKBACK = 64  # events checked backwards for an enclosing slice under the pointer
MAX_ANCESTORS = 3  # the slices holding a slice that its hover names, innermost first
ENGINE_ORDER = ("tensor", "vector", "scalar", "gpsimd", "dma_read", "dma_write", "collective")
ROW_ORDER = (HOST, *ENGINE_ORDER)  # the host's costs first: the device's work follows them


@dataclass(frozen=True)
class ReplayInfo:
    """A step of a phase that ran but was not stored as events: drawn as a repeat of the
    phase's first step (or, for a phase with none stored, of the first step of an identical one)."""

    phase: str
    step: int  # this one, counting from 1 in its phase
    first: int  # the phase's steps ``first`` to ``last`` are not stored
    last: int
    twin_phase: str  # the phase whose first step they repeat
    twin_start_ns: float


@dataclass(frozen=True)
class EventInfo:
    track: str
    op: str
    layer: str
    start_ns: float
    dur_ns: float
    flops: float
    nbytes: float
    event: int = -1  # its index among the trace's events


@dataclass(frozen=True)
class FlowInfo:
    """A flow arrow at an event: the event at its other end, and whether it leaves this one."""

    name: str
    outgoing: bool
    other: EventInfo


def slice_layout(trace: Trace) -> tuple[list[int] | None, tuple[np.ndarray, np.ndarray, list[str], np.ndarray]]:
    """What the importer of a trace of another tool says of its slices (``sim.io.chrome``): each
    track's depth under its thread's first track (None when the trace does not say, as for a
    simulation, or says it wrongly), and its flows as (from, to, names, name of each), event
    indices; a damaged description is ignored rather than trusted."""
    meta, n_tracks, n_events = trace.meta, len(trace.tracks), trace.n_events
    depth = meta.get("track_depth")
    if not (isinstance(depth, list | tuple) and len(depth) == n_tracks
            and all(type(d) is int and 0 <= d <= k for k, d in enumerate(depth))
            and all(d == 0 or depth[k - 1] == d - 1 for k, d in enumerate(depth))):
        depth = None
    none = (np.zeros(0, np.int64), np.zeros(0, np.int64), [], np.zeros(0, np.int64))
    flows = meta.get("flows")
    if depth is None or not isinstance(flows, Mapping):
        return depth, none
    try:
        a, b, which = (np.asarray(flows.get(k, ()), np.int64).reshape(-1) for k in ("from", "to", "name"))
    except (TypeError, ValueError, OverflowError):
        return depth, none
    names = flows.get("names")
    if not (isinstance(names, list | tuple) and all(type(n) is str for n in names) and len(a) == len(b) == len(which)
            and (not len(a) or (min(a.min(), b.min()) >= 0 and max(a.max(), b.max()) < n_events
                                and which.min() >= 0 and which.max() < len(names)))):
        return depth, none
    return depth, (a, b, list(names), which)


class TraceView:
    """Rows to draw (tracks that have events, engines first) and fast queries on them."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        ev = trace.events
        # every track's events by start, from one sort (not a pass over all events per track)
        order = np.lexsort((ev["start_ns"], ev["track"]))
        bounds = np.searchsorted(ev["track"][order], np.arange(len(trace.tracks) + 1))
        present = [i for i in range(len(trace.tracks)) if bounds[i + 1] > bounds[i]]
        rank = {k: n for n, k in enumerate(ROW_ORDER)}
        track_depth, (self.flow_from, self.flow_to, self.flow_names, self.flow_name) = slice_layout(trace)
        # slices of another tool come in the importer's order (its processes' and threads' sort
        # order, a thread's depths under it); engine rows by core and engine
        self.rows = present if track_depth is not None else sorted(
            present, key=lambda i: (trace.tracks[i].core, rank.get(trace.tracks[i].kind, 99), i))
        self.row_names = [trace.tracks[i].name for i in self.rows]
        self.row_kinds = [trace.tracks[i].kind for i in self.rows]
        # per row: its depth under its thread's first row (-1: an engine row, shaded by busy fraction)
        self.row_depth = [track_depth[i] if track_depth is not None else -1 for i in self.rows]
        self.row_of_track = np.full(len(trace.tracks) + 1, -1, np.int64)
        self.row_of_track[self.rows] = np.arange(len(self.rows))
        out_order = np.argsort(self.flow_from, kind="stable")
        in_order = np.argsort(self.flow_to, kind="stable")
        self._flows_out = (self.flow_from[out_order], out_order)  # flows by the event they leave
        self._flows_in = (self.flow_to[in_order], in_order)
        self._idx = []  # per row: its events, by start
        self._starts = []
        self.integrals = []  # per row: busy time over the union of its events (nested slices once)
        for track in self.rows:
            idx = order[bounds[track]:bounds[track + 1]]
            self._idx.append(idx)
            self._starts.append(ev["start_ns"][idx])
            # executions not stored as events are filled in from their stored twins
            self.integrals.append(replayed(BusyIntegral(*union_intervals(ev["start_ns"][idx], ev["dur_ns"][idx])),
                                           trace))
        self.row_stack = IntegralStack(self.integrals)  # all rows at once, for drawing

    @property
    def slice_rows(self) -> list[int]:
        """The rows of another tool's slices, drawn as slices coloured by name."""
        return [r for r, d in enumerate(self.row_depth) if d >= 0]

    def row_events(self, row: int) -> np.ndarray:
        """The events of ``row`` (indices into the trace's), by start."""
        return self._idx[row]

    def ancestors(self, row: int, info: EventInfo) -> list[EventInfo]:
        """The slices holding ``info`` (an event of ``row``) on the rows above it in its thread,
        innermost first, at most :data:`MAX_ANCESTORS`."""
        out: list[EventInfo] = []
        while 0 < row < len(self.rows) and self.row_depth[row] > 0 and len(out) < MAX_ANCESTORS:
            row -= 1
            parent = self.event_at(row, info.start_ns)
            if parent is None:
                break
            out.append(parent)
            info = parent
        return out

    def flows_at(self, event: int) -> list[FlowInfo]:
        """The flows leaving and entering ``event``."""
        out = []
        for (ends, order), outgoing in ((self._flows_out, True), (self._flows_in, False)):
            lo, hi = np.searchsorted(ends, event), np.searchsorted(ends, event, side="right")
            for f in order[lo:hi].tolist():
                other = int(self.flow_to[f] if outgoing else self.flow_from[f])
                out.append(FlowInfo(self.flow_names[int(self.flow_name[f])], outgoing, self._info(other)))
        return out

    def find_layers(self, text: str) -> np.ndarray:
        """Indices of the layers whose name, or the name of one of whose ops, contains ``text``
        (case-insensitive), in time order; empty for an empty ``text``."""
        tr = self.trace
        needle = text.strip().lower()
        if not needle:
            return np.zeros(0, np.int64)
        hit = np.array([needle in n.lower() for n in tr.layer_names] or [False])[: len(tr.layer_names)]
        ops = [o for o, n in enumerate(tr.op_names) if needle in n.lower()]
        if ops:
            hit[tr.op_layer[ops]] = True
        found = np.flatnonzero(hit)
        return found[np.argsort(tr.layer_start_ns[found], kind="stable")]

    def event_at(self, row: int, t_ns: float, slack_ns: float = 0.0) -> EventInfo | None:
        """The event of ``row`` covering ``t_ns``: the latest to start, so the innermost of nested
        slices (an imported trace); else the nearest one within ``slack_ns`` of it (a pointer a
        pixel or two off a thin event); None when there is none."""
        if not 0 <= row < len(self.rows):
            return None
        ev = self.trace.events
        idx = self._idx[row]
        i = int(np.searchsorted(self._starts[row], t_ns, side="right")) - 1
        lo = max(-1, i - NESTED_LOOKBACK)
        k = i
        while k > lo and t_ns > ev["start_ns"][idx[k]] + ev["dur_ns"][idx[k]]:
            k -= 1
        if k > lo:
            return self._info(int(idx[k]))
        # none covers it: the events starting before it end before it, the next one starts after it
        near = idx[lo + 1:i + 2]
        start, end = ev["start_ns"][near], ev["start_ns"][near] + ev["dur_ns"][near]
        gap = np.where(start > t_ns, start - t_ns, t_ns - end)
        best = int(np.argmin(gap)) if len(gap) else -1
        return self._info(int(near[best])) if best >= 0 and gap[best] <= slack_ns else None

    def _info(self, e: int) -> EventInfo:
        ev, tr = self.trace.events, self.trace
        layer = int(ev["layer"][e])
        return EventInfo(
            track=tr.tracks[int(ev["track"][e])].name, op=tr.op_names[int(ev["op"][e])],
            layer=tr.layer_names[layer] if 0 <= layer < len(tr.layer_names) else "",
            start_ns=float(ev["start_ns"][e]), dur_ns=float(ev["dur_ns"][e]),
            flops=float(ev["flops"][e]), nbytes=float(ev["bytes"][e]), event=e,
        )

    def replay_at(self, t_ns: float) -> ReplayInfo | None:
        """The step not stored as events that ran at ``t_ns``, if one did."""
        start, end, period, home = self.trace.replays
        i = int(np.searchsorted(start, t_ns, side="right")) - 1
        if i < 0 or t_ns >= end[i]:
            return None
        phases = self.trace.meta["phases"]
        p = phases[int(self.trace.replay_phases[i])]
        stored = p.get("stored", p["repeat"])
        twin = phases[p["same_as"]] if not stored and "same_as" in p else p
        return ReplayInfo(phase=p["name"], step=stored + int((t_ns - start[i]) // period[i]) + 1, first=stored + 1,
                          last=int(p["repeat"]), twin_phase=twin["name"], twin_start_ns=float(home[i]))

    def activity(self, t_ns: float, window_ns: float) -> dict[str, float]:
        """Busy fraction of each engine kind (core 0) in a window centred on ``t_ns``."""
        a, b = t_ns - window_ns / 2, t_ns + window_ns / 2
        out: dict[str, float] = {}
        for kind, track, bi in zip(self.row_kinds, self.rows, self.integrals, strict=True):
            if self.trace.tracks[track].core == 0:
                out[kind] = max(out.get(kind, 0.0), min(1.0, max(0.0, bi.window_mean(a, b))))
        return out


@dataclass(frozen=True)
class WindowStats:
    """What one run did in a time window: the aggregate of an area selection."""

    start_ns: float
    end_ns: float
    busy: dict[str, float]  # busy fraction of each row kind in the window (the busiest core)
    flops: float  # FLOPs of the events in the window, pro rata of their overlap, for the whole copy
    nbytes: float  # bytes moved by DMA events in the window, pro rata
    read_bytes: float  # HBM/DDR bytes read in the window (from the bandwidth counter)
    write_bytes: float
    top_ops: list[tuple[str, float]]  # (op name, its events' ns in the window) of the names taking the most, first


TOP_OPS = 5


def window_stats(view: TraceView, t0: float, t1: float) -> WindowStats:
    """Aggregate ``view``'s trace over ``[t0, t1]`` ns: busy %, FLOPs, bytes, the ops taking the most time."""
    tr = view.trace
    width = max(t1 - t0, 1e-9)
    edges = np.array([t0, t0 + width])
    busy: dict[str, float] = {}
    for kind, bi in zip(view.row_kinds, view.integrals, strict=True):
        busy[kind] = max(busy.get(kind, 0.0), float(bi.fractions(edges)[0]))
    ev = tr.events
    start, dur = ev["start_ns"], ev["dur_ns"]
    overlap = np.clip(np.minimum(start + dur, t1) - np.maximum(start, t0), 0.0, None)
    inside = overlap > 0
    share = np.where(dur[inside] > 0, overlap[inside] / np.where(dur[inside] > 0, dur[inside], 1.0), 1.0)
    kinds = np.array([t.kind for t in tr.tracks] or [""], dtype=object)
    dma = np.isin(kinds[ev["track"][inside]], ("dma_read", "dma_write"))
    per_op = np.bincount(ev["op"][inside], weights=overlap[inside], minlength=len(tr.op_names))
    names: dict[str, float] = {}
    for o in np.flatnonzero(per_op).tolist():
        names[tr.op_names[o]] = names.get(tr.op_names[o], 0.0) + float(per_op[o])
    top = sorted(names.items(), key=lambda kv: -kv[1])[:TOP_OPS]
    moved = {}
    for name in ("hbm_read_bytes_per_s", "hbm_write_bytes_per_s"):
        c = tr.counters.get(name)
        moved[name] = float(CounterIntegral(c.t_ns, c.value).means(edges)[0] * width / 1e9) if c is not None \
            and len(c.t_ns) else 0.0
    # the trace holds one core of a model copy; a copy spread over several cores (tensor parallel,
    # logical cores) does that much work in each, as compute_metrics counts it
    shards = float(tr.run.deployment.shards)
    return WindowStats(t0, t1, busy, float((ev["flops"][inside] * share).sum()) * shards,
                       float((ev["bytes"][inside][dma] * share[dma]).sum()) * shards,
                       moved["hbm_read_bytes_per_s"] * shards, moved["hbm_write_bytes_per_s"] * shards, top)

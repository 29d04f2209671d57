"""Several ranks as one view: device profiles of the NeuronCores of one instance, or of ranks on
several instances, on one clock, their collectives matched across ranks and the straggler of each
(the rank the others waited for: the last to arrive).

A profile's times count from its first hardware timestamp, whose wall time its Metadata gives
(``first_ts``, Unix time): on one clock, each rank's times are shifted by how much later than the
earliest rank's it started. Collectives are matched by their order on each rank's collectives
row (every rank of a collective runs the same sequence of them); a rank that ran fewer is matched
as far as it goes.

Over time (the overview row of each rank), :func:`activity` gives the share of any window its
engines were busy and it waited, for as many windows at once as a row has pixels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from sim.trace import Counter, Trace, union_intervals, union_length

ENGINES = ("tensor", "vector", "scalar", "gpsimd")
WAIT_OPS = ("semaphore wait", "DMA wait")  # the waits a device profile's instructions report (sim.io.explorer)
EPOCH = datetime.fromisoformat("1970-01-01 00:00:00+00:00")


def wall_start_ns(trace: Trace) -> int | None:
    """When a profile's first event happened, in ns of Unix time (None: it does not say; a
    profile written by neuronviz gives the epoch itself)."""
    profile = trace.meta.get("profile")
    text = profile.get("metadata", {}).get("first_ts") if isinstance(profile, dict) else None
    if not isinstance(text, str):
        return None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if when.tzinfo is None or when == EPOCH:
        return None
    delta = when - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def shifted(trace: Trace, ns: float) -> Trace:
    """``trace`` with every time ``ns`` later (its events, layers and counters)."""
    if not ns:
        return trace
    events = {**trace.events, "start_ns": trace.events["start_ns"] + ns}
    counters = {k: Counter(c.name, c.unit, c.t_ns + ns, c.value) for k, c in trace.counters.items()}
    return replace(trace, meta={**trace.meta, "clock_offset_ns": float(ns)}, events=events, counters=counters,
                   layer_start_ns=trace.layer_start_ns + ns, layer_end_ns=trace.layer_end_ns + ns)


def on_one_clock(traces: Sequence[Trace]) -> list[Trace]:
    """``traces`` on one clock: each profile that gives its wall start shifted by how much later
    it started than the earliest of them; the others as they are (fewer than two such profiles:
    all as they are)."""
    walls = [wall_start_ns(t) for t in traces]
    known = [w for w in walls if w is not None]
    if len(known) < 2:
        return list(traces)
    first = min(known)
    return [t if w is None else shifted(t, float(w - first)) for t, w in zip(traces, walls, strict=True)]


def _collective_track(trace: Trace) -> int:
    """The rank's collectives row: its first track of collectives (a profile's CC ops)."""
    return next((i for i, t in enumerate(trace.tracks) if t.kind == "collective"), -1)


def collective_events(trace: Trace) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Every collective of a rank (its collectives row) in time order: starts, ends and names."""
    track = _collective_track(trace)
    sel = np.flatnonzero(trace.events["track"] == track) if track >= 0 else np.zeros(0, np.int64)
    start = trace.events["start_ns"][sel]
    order = np.argsort(start, kind="stable")
    sel = sel[order]
    return (trace.events["start_ns"][sel], trace.events["start_ns"][sel] + trace.events["dur_ns"][sel],
            [trace.op_names[o] for o in trace.events["op"][sel].tolist()])


@dataclass(frozen=True)
class Collective:
    """The k-th collective of every rank: when each arrived (started) and finished."""

    index: int
    name: str
    starts: tuple[float, ...]  # per rank, ns on the shared clock (nan: the rank ran fewer)
    ends: tuple[float, ...]

    @property
    def straggler(self) -> int:
        """The rank that arrived last: the one the others waited for."""
        return int(np.nanargmax(self.starts))

    @property
    def waits_ns(self) -> tuple[float, ...]:
        """How long each rank waited in it for the straggler to arrive."""
        last = self.starts[self.straggler]
        return tuple(last - s if math.isfinite(s) else math.nan for s in self.starts)

    @property
    def spread_ns(self) -> float:
        """From the first arrival to the last."""
        return max(self.waits_ns)


def collectives(traces: Sequence[Trace]) -> list[Collective]:
    """The collectives of ``traces`` (ranks on one clock) matched by order, as far as two or more
    ranks ran them."""
    per_rank = [collective_events(t) for t in traces]
    n = sorted((len(s) for s, _, _ in per_rank), reverse=True)[1] if len(per_rank) > 1 else 0
    out = []
    for k in range(n):
        starts = tuple(float(s[k]) if k < len(s) else math.nan for s, _, _ in per_rank)
        ends = tuple(float(e[k]) if k < len(e) else math.nan for _, e, _ in per_rank)
        name = next(names[k] for _, _, names in per_rank if k < len(names))
        out.append(Collective(k, name, starts, ends))
    return out


@dataclass(frozen=True)
class RankSummary:
    """One rank over the span of the whole view: how busy its engines were, how long it waited."""

    busy: dict[str, float]  # share of the view's span each engine of its first core was busy
    wait_ns: float  # its instructions' semaphore and DMA waits
    collective_ns: float  # time on its collectives row
    waited_for_others_ns: float  # in its collectives, for the straggler to arrive
    last_arrivals: int  # collectives in which it was the straggler


def rank_summaries(traces: Sequence[Trace], matched: list[Collective] | None = None) -> list[RankSummary]:
    matched = collectives(traces) if matched is None else matched
    ends = [float((t.events["start_ns"] + t.events["dur_ns"]).max()) for t in traces if t.n_events]
    starts = [float(t.events["start_ns"].min()) for t in traces if t.n_events]
    span = max(ends, default=0.0) - min(starts, default=0.0)
    out = []
    for r, trace in enumerate(traces):
        busy = {}
        for kind in ENGINES:
            track = trace.track_index(kind, 0)
            if track >= 0:
                busy[kind] = trace.busy_ns(track) / span if span > 0 else 0.0
        waits = np.isin(np.asarray(trace.op_names, dtype=object), WAIT_OPS) if trace.op_names else np.zeros(0, bool)
        wait_ns = float(trace.events["dur_ns"][waits[trace.events["op"]]].sum()) if len(waits) else 0.0
        track = _collective_track(trace)
        sel = trace.events["track"] == track
        cc_ns = union_length(trace.events["start_ns"][sel], trace.events["dur_ns"][sel]) if track >= 0 else 0.0
        waited = sum(c.waits_ns[r] for c in matched if math.isfinite(c.waits_ns[r]))
        out.append(RankSummary(busy, wait_ns, cc_ns, waited, sum(c.straggler == r for c in matched)))
    return out


class Coverage:
    """How much of any window some intervals cover (overlaps counted once), for many windows at
    once: the time covered before each edge, read off the running sum of their union's lengths."""

    def __init__(self, start: np.ndarray, dur: np.ndarray) -> None:
        s, d = union_intervals(start, dur)
        self._start, self._end = s, s + d
        self._before = np.concatenate(([0.0], np.cumsum(d)))  # covered before each interval of the union

    def covered_ns(self, t: np.ndarray) -> np.ndarray:
        """The time covered before each of the times ``t``."""
        t = np.asarray(t, np.float64)
        i = np.searchsorted(self._start, t, "right")  # intervals begun by then
        ahead = np.where(i > 0, np.maximum(self._end[np.maximum(i - 1, 0)] - t, 0.0), 0.0) if len(self._end) else 0.0
        return self._before[i] - ahead  # less what the last begun has still to cover

    def shares(self, edges: np.ndarray) -> np.ndarray:
        """The share of each window between consecutive ``edges`` that is covered."""
        edges = np.asarray(edges, np.float64)
        width = np.diff(edges)
        return np.divide(np.diff(self.covered_ns(edges)), width, out=np.zeros(len(width)), where=width > 0)


@dataclass(frozen=True)
class RankActivity:
    """A rank over time: its engines' busy time (the engines of its first core, as
    :class:`RankSummary` counts them) and its waits."""

    engines: dict[str, Coverage]
    waits: Coverage

    def busy(self, edges: np.ndarray) -> np.ndarray:
        """The share of its engines busy in each window (their mean: 1 when all are busy throughout)."""
        if not self.engines:
            return np.zeros(max(len(edges) - 1, 0))
        return np.mean([c.shares(edges) for c in self.engines.values()], axis=0)

    def waiting(self, edges: np.ndarray) -> np.ndarray:
        """The share of each window in which some instruction of it waited (on a semaphore or a DMA)."""
        return self.waits.shares(edges)


def activity(trace: Trace) -> RankActivity:
    """What :class:`RankActivity` reads from a rank's events."""
    ev = trace.events
    engines = {}
    for kind in ENGINES:
        track = trace.track_index(kind, 0)
        if track >= 0:
            sel = ev["track"] == track
            engines[kind] = Coverage(ev["start_ns"][sel], ev["dur_ns"][sel])
    waits = np.isin(np.asarray(trace.op_names, dtype=object), WAIT_OPS) if trace.op_names else np.zeros(0, bool)
    sel = waits[ev["op"]] if len(waits) else np.zeros(trace.n_events, bool)
    return RankActivity(engines, Coverage(ev["start_ns"][sel], ev["dur_ns"][sel]))

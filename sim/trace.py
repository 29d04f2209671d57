"""The Trace: an immutable, columnar record of one simulated run, and what is derived from it.

Times are nanoseconds (float64) from the start of the run. Events are one row per engine or
DMA instruction group, or per cost of the host's (a launch, a copy, a request's handling, on the
track of kind ``host``): ``track`` indexes :attr:`Trace.tracks`, ``op`` indexes the op table and
``layer`` the layer table (-1: the host's work beside the engines', in no layer; an op's layer in
``op_layer`` is the same). Everything a reported time contains is an event: the metrics are
queries over them. Counters are step functions sampled at their change points.
Only one NeuronCore is simulated when every core runs the same program (data-parallel copies,
tensor-parallel shards); ``meta["cores_active"]`` says how many cores it stands for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

import numpy as np

from sim.description import RunDescription, describe

# the .nvtrace format: 1.1 gave each column its XXH3 checksum; 2.0 stores an op's name as an index
# into the run's distinct names; 3.0 draws the host's costs as events on a host track, some in no
# layer (-1), instead of recording them in the metadata (files of 1.x and 2.x still load: their
# latencies are then their events' span); 4.0 stores each column as a zstd frame of the differences
# between its values (sim/io/columns.py), about a byte an event where 3.0 took 40 to 90 (files of
# every earlier format still load)
TRACE_FORMAT_VERSION = "4.0"
# the phase (meta["phases"]) in which a pipelined training step's slowest stage waits for the others
PIPELINE_BUBBLE = "pipeline bubble"

EVENT_COLUMNS = {
    "track": np.int16, "start_ns": np.float64, "dur_ns": np.float64, "op": np.int32,
    "layer": np.int32, "flops": np.float64, "bytes": np.float64,
}


@dataclass(frozen=True)
class Counter:
    """A step function: ``value[i]`` holds from ``t_ns[i]`` until ``t_ns[i+1]``."""

    name: str
    unit: str
    t_ns: np.ndarray
    value: np.ndarray

    def at(self, t_ns: float) -> float:
        """Value of the counter at time ``t_ns`` (0 before the first sample)."""
        i = int(np.searchsorted(self.t_ns, t_ns, side="right")) - 1
        return float(self.value[i]) if i >= 0 else 0.0


@dataclass(frozen=True)
class Track:
    """One row of the timeline: an engine or queue of one NeuronCore (or a foreign thread)."""

    name: str
    kind: str  # tensor, vector, scalar, gpsimd, dma_read, dma_write, collective, host, or other
    core: int


def _freeze(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


def union_intervals(start: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The intervals ``[start, start + dur)`` merged where they overlap: sorted, disjoint starts
    and durations covering the same time."""
    s, d = np.asarray(start, np.float64), np.asarray(dur, np.float64)
    if not np.all(s[1:] >= s[:-1]):  # usually in order already: one track's events, as a Trace stores them
        order = np.argsort(s, kind="stable")
        s, d = s[order], d[order]
    e = s + d
    if len(s) < 2:
        return s, e - s
    reach = np.maximum.accumulate(e)
    new = np.concatenate(([True], s[1:] > reach[:-1]))
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(s)) - 1
    return s[first], reach[last] - s[first]


def union_length(start: np.ndarray, dur: np.ndarray) -> float:
    """Total time covered by the intervals ``[start, start + dur)``, overlaps counted once."""
    s = np.asarray(start, np.float64)
    if len(s) and np.all(s[1:] >= s[:-1]) and np.all(s[1:] >= (s + dur)[:-1]):
        return float(np.sum(dur))  # the usual case: in order (as Trace stores events) and no overlap
    return float(np.sum(union_intervals(start, dur)[1]))


@dataclass(frozen=True)
class Trace:
    """One run: events, counters, layer spans, op table and metadata. Arrays are read-only."""

    meta: Mapping[str, Any]
    tracks: tuple[Track, ...]
    events: Mapping[str, np.ndarray]
    op_names: tuple[str, ...]
    op_layer: np.ndarray
    layer_names: tuple[str, ...]
    layer_kinds: tuple[str, ...]
    layer_start_ns: np.ndarray
    layer_end_ns: np.ndarray
    counters: Mapping[str, Counter] = field(default_factory=dict)

    def __post_init__(self) -> None:
        events = {k: _freeze(np.asarray(self.events[k], dtype=t)) for k, t in EVENT_COLUMNS.items()}
        object.__setattr__(self, "events", MappingProxyType(events))
        object.__setattr__(self, "meta", MappingProxyType(dict(self.meta)))
        object.__setattr__(self, "counters", MappingProxyType(dict(self.counters)))
        for name in ("op_layer", "layer_start_ns", "layer_end_ns"):
            object.__setattr__(self, name, _freeze(getattr(self, name)))

    @cached_property
    def run(self) -> RunDescription:
        """What the run is, typed (:func:`sim.description.describe`): what every view reads of it."""
        return describe(self.meta)

    @property
    def n_events(self) -> int:
        return len(self.events["start_ns"])

    @cached_property
    def duration_ns(self) -> float:
        """Time from the first event's start to the last event's end."""
        if not self.n_events:
            return 0.0
        ends = self.events["start_ns"] + self.events["dur_ns"]
        return float(ends.max() - self.events["start_ns"].min())

    @cached_property
    def end_ns(self) -> float:
        """The last instant the trace describes (an event's end or a counter sample), from 0."""
        ends = [float((self.events["start_ns"] + self.events["dur_ns"]).max())] if self.n_events else []
        ends += [float(c.t_ns[-1]) for c in self.counters.values() if len(c.t_ns)]
        return max(0.0, *ends)

    def track_index(self, kind: str, core: int = 0) -> int:
        for i, t in enumerate(self.tracks):
            if t.kind == kind and t.core == core:
                return i
        return -1

    def busy_ns(self, track: int) -> float:
        """Time ``track`` was busy: the length of the union of its events (a simulated engine's
        events never overlap; nested slices of an imported trace count once)."""
        sel = self.events["track"] == track
        return union_length(self.events["start_ns"][sel], self.events["dur_ns"][sel])

    @cached_property
    def layer_repeats(self) -> np.ndarray:
        """Executions each stored layer stands for: the mean :attr:`event_repeats` of its events
        (1 for a layer without events)."""
        layer = self.events["layer"]
        layered = layer >= 0
        n = len(self.layer_names)
        counts = np.bincount(layer[layered], minlength=n)
        sums = np.bincount(layer[layered], weights=self.event_repeats[layered], minlength=n)
        return _freeze(np.where(counts > 0, sums / np.maximum(counts, 1), 1.0))

    @cached_property
    def event_repeats(self) -> np.ndarray:
        """Executions each event stands for: 1, or ``repeat / stored`` for the events of a phase
        that ran more often than it was stored as events (``meta["phases"]``: decode steps,
        micro-batches); its later executions were identical and counted in its time span. A
        phase with no execution stored names the earlier phase (``same_as``) whose stored
        executions of the same program stand for its executions too (a serving run's steps)."""
        out = np.ones(self.n_events)
        start = self.events["start_ns"]
        phases = self.meta.get("phases", ())
        runs = [float(p["repeat"]) for p in phases]
        for p in phases:
            if not p.get("stored", 1) and "same_as" in p:
                runs[p["same_as"]] += p["repeat"]
        for phase, ran in zip(phases, runs, strict=True):
            stored = phase.get("stored", phase["repeat"])  # older files stored every execution
            if stored and ran > stored:
                inside = (start >= phase["start_ns"]) & (start < phase["end_ns"])
                out[inside] = ran / stored
        return _freeze(out)

    @cached_property
    def unstored_spans(self) -> list[tuple[float, float, int]]:
        """``(start_ns, end_ns, executions)`` of the stretches of :attr:`replays`, adjacent ones
        merged: the view marks them, the figures count them."""
        out: list[tuple[float, float, int]] = []
        for start, end, period, _ in zip(*self.replays, strict=True):
            runs = int(round((end - start) / period))
            if out and start - out[-1][1] <= 1e-6 * max(1.0, start):
                out[-1] = (out[-1][0], float(end), out[-1][2] + runs)
            else:
                out.append((float(start), float(end), runs))
        return out

    @cached_property
    def replays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The executions that ran but were not stored as events, as stretches of identical ones:
        ``(start_ns, end_ns, period_ns, home_ns)``, time-ordered, where ``home_ns`` starts the
        stored execution of the same program that stands for each of them (its phase's first,
        or for a phase with none stored, the first of the phase it names in ``same_as``)."""
        a = self._replay_rows
        return a[:, 0].copy(), a[:, 1].copy(), a[:, 2].copy(), a[:, 3].copy()

    @cached_property
    def replay_phases(self) -> np.ndarray:
        """The index in ``meta["phases"]`` of the phase of each stretch of :attr:`replays`."""
        return self._replay_rows[:, 4].astype(np.intp)

    @cached_property
    def _replay_rows(self) -> np.ndarray:
        """:attr:`replays` as the rows ``(start_ns, end_ns, period_ns, home_ns, phase)``."""
        phases = self.meta.get("phases", ())
        rows = []
        for i, p in enumerate(phases):
            repeat, stored = p["repeat"], p.get("stored", p["repeat"])
            if stored >= repeat or p["end_ns"] <= p["start_ns"]:
                continue
            period = (p["end_ns"] - p["start_ns"]) / repeat
            home = phases[p["same_as"]]["start_ns"] if not stored and "same_as" in p else p["start_ns"]
            rows.append((p["start_ns"] + stored * period, p["end_ns"], period, home, i))
        return np.array(sorted(rows), np.float64).reshape(-1, 5)

    @property
    def run_end_ns(self) -> float:
        """The end of the run: its last event, or of the executions after it that were not stored,
        or of a phase in which the cores only wait (a pipeline's bubble)."""
        spans = self.unstored_spans
        phases = self.meta.get("phases", ())
        return max(self.end_ns, spans[-1][1] if spans else 0.0, max((p["end_ns"] for p in phases), default=0.0))

    def run_total(self, column: str, track: int | None = None) -> float:
        """Sum of an event column (``flops``, ``bytes``) over the whole run, on one track or all,
        with the executions that were not stored counted (:attr:`event_repeats`)."""
        values = self.events[column] * self.event_repeats
        return float(values.sum() if track is None else values[self.events["track"] == track].sum())

    def run_busy_ns(self, track: int) -> float:
        """:meth:`busy_ns` over the whole run: the executions that were not stored as events add
        their events' durations (they ran at other times, so they overlap nothing)."""
        sel = self.events["track"] == track
        extra = float(np.sum(self.events["dur_ns"][sel] * (self.event_repeats[sel] - 1.0)))
        return self.busy_ns(track) + extra

"""Integrals over time of a trace's tracks and counters: busy time and counter byte-seconds up to
any instant, so that the mean over any window (a pixel column of a view, the chip diagram's
window around the playhead) is two lookups. What the views draw at 60 frames a second reads
these; the metrics of a run are in :mod:`sim.metrics`.
"""

from __future__ import annotations

import math

import numpy as np

from sim.trace import Trace


def _right_index(sorted_values: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``sorted_values.searchsorted(t, side="right")``, searching only the stretch between the
    smallest and the largest ``t``: the pixel edges of a zoomed-in view touch a short, cache
    friendly part of a long track instead of the whole of it."""
    if not t.size:
        return np.zeros(t.shape, np.intp)
    first, last = t.min(), t.max()
    if not first <= last:  # NaN among t
        return sorted_values.searchsorted(t, side="right")
    lo, hi = sorted_values.searchsorted([first, last], side="right")
    return sorted_values[lo:hi].searchsorted(t, side="right") + lo


def _grid_right_index(sorted_values: np.ndarray, lo: float, step: float, count: int) -> np.ndarray:
    """``sorted_values.searchsorted(grid, side="right")`` for the grid ``lo + arange(count) * step``
    (step > 0), in O(values + grid) instead of a binary search per grid time: each value is
    placed on the first grid time at or after it (estimated by division, then checked against
    that grid time itself, so the answer is exact), and the placements are counted up."""
    first = np.ceil((sorted_values - lo) / step)
    np.clip(first, 0, count, out=first)
    index = first.astype(np.intp)
    while True:  # the division's rounding moves an estimate one grid time at most: settle it exactly
        late = (index > 0) & (lo + (index - 1) * step >= sorted_values)
        early = (index < count) & ~late
        early[early] = lo + index[early] * step < sorted_values[early]
        if not (late.any() or early.any()):
            break
        index += early.astype(np.intp) - late
    return np.cumsum(np.bincount(index, minlength=count + 1)[:count])


TABLE_INTERVALS = 1 << 16  # integrals of long tracks are also tabulated at this many + 1 evenly spaced times
TABLE_MIN_POINTS = 1 << 14  # tracks shorter than this are only searched: they fit in the CPU caches
TABLE_LINE = 8  # float64 values in a 64-byte cache line: short tracks share a table's rows up to this width


def _window_rates(points: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The mean rate of an integral over each window between consecutive ``points``, from its
    ``values`` there (the last axis); 0 for an empty window."""
    width = np.diff(points)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(width > 0, np.diff(values, axis=-1) / width, 0.0)


class _Integral:
    """An integral over time ``F(t)`` of a track, exact at any ``t`` by a search of its sorted
    times (:meth:`at`): zero before ``lo``, linear with slope ``slope_after`` after ``hi``."""

    n_points: int
    lo: float
    hi: float
    slope_after: float

    def at(self, t: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def on_grid(self, lo: float, step: float, count: int) -> np.ndarray:
        """:meth:`at` of ``lo + arange(count) * step`` (an :class:`IntegralStack`'s table)."""
        return self.at(lo + np.arange(count) * step)

    def value_at(self, t: float) -> float:
        """:meth:`at` of one instant (a chip diagram asks for two at every playback frame)."""
        return float(self.at(np.array([t]))[0])

    def window_mean(self, a: float, b: float) -> float:
        """The mean rate over ``[a, b)``, 0 for an empty window: one window of :meth:`means`."""
        return (self.value_at(b) - self.value_at(a)) / (b - a) if b > a else 0.0


class IntegralStack:
    """Several integrals of one run, evaluated together at the same window edges (the pixel
    columns of a view): their mean over each window, one row per integral.

    Zoomed out on long tracks, exact evaluation costs a search of up to a million events per
    edge with a cache miss per step. So long tracks are also tabulated at evenly spaced times
    (a mipmap of the integral), all of them at one time side by side in memory, and
    :meth:`means` may move each edge to the nearest of those times, as long as no edge moves
    further than ``tolerance`` times the narrowest window. The means then are exact averages
    over windows within that tolerance of the requested ones, at one gather per edge (short
    tracks that do not fit beside the long ones in a cache line are searched at the moved
    edges: they stay in the CPU caches). Where no track is as long as the table, the tracks are
    searched at the tabulated times instead of filling it: the same values.
    The last answer is kept: the rows of a pane and its busy % plot ask for the same edges."""

    def __init__(self, integrals: list[_Integral]) -> None:
        self.integrals = list(integrals)
        # long tracks are tabulated, and short ones beside them while a tabulated time's values
        # fit in one cache line (a gather reads them for free); other short tracks are searched
        # at the same moved edges
        long = [k for k, ig in enumerate(self.integrals) if ig.n_points >= TABLE_MIN_POINTS]
        short = [k for k in range(len(self.integrals)) if k not in long]
        room = max(0, TABLE_LINE - len(long)) if long else 0
        self._tabulated, self._searched = long + short[:room], short[room:]
        spans = [(self.integrals[k].lo, self.integrals[k].hi) for k in self._tabulated if self.integrals[k].n_points]
        self._lo = min((a for a, _ in spans), default=0.0)
        self._hi = max((b for _, b in spans), default=0.0)
        self._step = (self._hi - self._lo) / TABLE_INTERVALS if self._hi > self._lo else 0.0
        self._slopes = np.array([self.integrals[k].slope_after for k in self._tabulated], np.float64)[:, None]
        self._table: np.ndarray | None = None  # (TABLE_INTERVALS + 1, tabulated): made when first needed
        # made only for a track at least as long as the table: shorter ones cost less to search
        # at the tabulated times (their values) than the table's 65,537 rows to fill (a demo
        # pane's 50,000 events: 30 ms, a tenth of its first frame)
        self._long = any(self.integrals[k].n_points >= TABLE_INTERVALS for k in self._tabulated)
        self._last: tuple[tuple[bytes, float], np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.integrals)

    def evaluate(self, edges: np.ndarray, tolerance: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """``(points, F(points))`` with one row of values per integral: the ``edges`` themselves,
        or, when ``tolerance`` allows, the tabulated times nearest to them."""
        edges = np.asarray(edges, dtype=np.float64)
        step = self._step
        # moving an edge to its nearest tabulated time moves it by at most half a step
        if not (step and tolerance > 0 and edges.size > 1 and step <= 2 * tolerance * np.diff(edges).min()):
            return edges, np.array([ig.at(edges) for ig in self.integrals]).reshape(len(self), edges.size)
        if self._table is None and self._long:
            self._table = np.empty((TABLE_INTERVALS + 1, len(self._tabulated)))
            for column, k in enumerate(self._tabulated):
                self._table[:, column] = self.integrals[k].on_grid(self._lo, step, TABLE_INTERVALS + 1)
        j = np.rint((edges - self._lo) / step)
        inside = (j >= 0) & (j <= TABLE_INTERVALS)
        jc = np.minimum(np.maximum(j, 0), TABLE_INTERVALS).astype(np.intp)
        snapped = self._lo + jc * step  # the tabulated times, as the table's rows are at them
        points = np.where(inside, snapped, edges)  # outside the table F is exact as it is
        values = np.empty((len(self), edges.size))
        if self._table is not None:
            values[self._tabulated] = self._table[jc].T
        else:  # no track longer than the table: searched at the tabulated times, the table's values
            for k in self._tabulated:
                values[k] = self.integrals[k].at(snapped)
        if self._slopes.any():  # past the end, a counter keeps its last value
            with np.errstate(invalid="ignore"):
                values[self._tabulated] += np.where((self._slopes != 0) & (points > self._hi),
                                               self._slopes * (points - self._hi), 0.0)
        for k in self._searched:
            values[k] = self.integrals[k].at(points)
        return points, values

    def means(self, edges: np.ndarray, tolerance: float = 0.0) -> np.ndarray:
        """Mean of each integral's rate over each window between consecutive ``edges``: busy
        fractions of busy integrals, mean values of counters. Read-only."""
        key = (np.asarray(edges, np.float64).tobytes(), tolerance)
        if self._last is None or self._last[0] != key:
            result = _window_rates(*self.evaluate(edges, tolerance))
            result.flags.writeable = False
            self._last = (key, result)
        return self._last[1]


class BusyIntegral(_Integral):
    """Busy time of one track up to any instant, for activity over arbitrary windows.

    ``busy(t)`` is the total time the track's events covered before ``t``; the busy fraction
    of ``[a, b)`` is ``(busy(b) - busy(a)) / (b - a)``. Evaluating it at every pixel edge draws
    a track of a million events at any zoom in O(pixels x log events).
    """

    def __init__(self, start_ns: np.ndarray, dur_ns: np.ndarray) -> None:
        order = np.argsort(start_ns, kind="stable")
        self.start = np.ascontiguousarray(start_ns[order], dtype=np.float64)
        self.dur = np.ascontiguousarray(dur_ns[order], dtype=np.float64)
        self.before = np.concatenate([[0.0], np.cumsum(self.dur)[:-1]]) if len(self.dur) else np.zeros(0)
        self.n_points = n = len(self.start)
        self.lo = float(self.start[0]) if n else 0.0
        self.hi = float((self.start + self.dur).max()) if n else 0.0
        self.slope_after = 0.0

    @classmethod
    def of_track(cls, trace: Trace, track: int) -> BusyIntegral:
        sel = trace.events["track"] == track
        return cls(trace.events["start_ns"][sel], trace.events["dur_ns"][sel])

    def busy(self, t: np.ndarray, right: np.ndarray | None = None) -> np.ndarray:
        """Busy time before each of ``t`` (``right``: ``t``'s right indexes among the starts, if known)."""
        t = np.asarray(t, dtype=np.float64)
        if not len(self.start):
            return np.zeros_like(t)
        i = (_right_index(self.start, t) if right is None else right) - 1
        ic = np.clip(i, 0, None)
        inside = np.clip(t - self.start[ic], 0.0, self.dur[ic])
        return np.where(i >= 0, self.before[ic] + inside, 0.0)

    at = busy

    def on_grid(self, lo: float, step: float, count: int) -> np.ndarray:
        if not len(self.start):
            return np.zeros(count)
        return self.busy(lo + np.arange(count) * step, _grid_right_index(self.start, lo, step, count))

    def value_at(self, t: float) -> float:
        i = int(self.start.searchsorted(t, side="right")) - 1
        return float(self.before[i] + min(max(t - self.start[i], 0.0), self.dur[i])) if i >= 0 else 0.0

    def fractions(self, edges: np.ndarray) -> np.ndarray:
        """Busy fraction of each window between consecutive ``edges`` (clipped to [0, 1])."""
        return np.clip(_window_rates(edges, self.busy(edges)), 0.0, 1.0)


class ReplayedIntegral(_Integral):
    """``base`` with the executions a trace ran but did not store as events filled in from their
    stored twins (:attr:`Trace.replays`): the integral the fully stored run would have. Inside a
    replayed stretch the ``j``-th execution adds what the twin's does by the same offset, after
    ``j`` whole ones; later times add every replayed execution before them."""

    def __init__(self, base: _Integral, replays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> None:
        self.base = base
        self.start, self.end, self.period, self.home = replays
        home_at = base.at(self.home)
        self.per_run = base.at(self.home + self.period) - home_at  # what one execution adds
        self.home_at = home_at
        runs = np.rint((self.end - self.start) / self.period)
        self.before = np.concatenate([[0.0], np.cumsum(runs * self.per_run)])  # whole stretches before each
        self.n_points = base.n_points + len(self.start)
        self.lo = min(base.lo, float(self.start[0])) if len(self.start) else base.lo
        self.hi = max(base.hi, float(self.end.max())) if len(self.start) else base.hi
        self.slope_after = base.slope_after

    def at(self, t: np.ndarray, base_at: np.ndarray | None = None) -> np.ndarray:
        """The integral at each of ``t`` (``base_at``: ``base``'s there, if known)."""
        t = np.asarray(t, dtype=np.float64)
        out = self.base.at(t) if base_at is None else base_at
        if not len(self.start):
            return out
        i = np.searchsorted(self.start, t, side="right") - 1
        ic = np.clip(i, 0, None)
        inside = (i >= 0) & (t < self.end[ic])
        j = np.floor((t - self.start[ic]) / self.period[ic])
        offset = t - self.start[ic] - j * self.period[ic]
        partial = j * self.per_run[ic] + self.base.at(self.home[ic] + offset) - self.home_at[ic]
        extra = np.where(inside, self.before[ic] + partial, self.before[np.where(i >= 0, i + 1, 0)])
        return out + np.where(i >= 0, extra, 0.0)

    def on_grid(self, lo: float, step: float, count: int) -> np.ndarray:
        return self.at(lo + np.arange(count) * step, self.base.on_grid(lo, step, count))

    def value_at(self, t: float) -> float:
        """:meth:`at` of one instant in scalar arithmetic (the chip diagram's two a row a frame):
        numpy's per-call cost on one-element arrays was most of a frame of a replayed trace."""
        out = self.base.value_at(t)
        i = int(self.start.searchsorted(t, side="right")) - 1
        if i < 0:
            return out
        if t >= self.end[i]:
            return out + float(self.before[i + 1])
        start, period = float(self.start[i]), float(self.period[i])
        j = math.floor((t - start) / period)
        offset = t - start - j * period
        return out + float(self.before[i] + j * self.per_run[i] + self.base.value_at(float(self.home[i]) + offset)
                           - self.home_at[i])

    def fractions(self, edges: np.ndarray) -> np.ndarray:
        """Busy fraction of each window between consecutive ``edges`` (clipped to [0, 1])."""
        return np.clip(_window_rates(edges, self.at(edges)), 0.0, 1.0)

    def means(self, edges: np.ndarray) -> np.ndarray:
        return _window_rates(edges, self.at(edges))


def replayed(base: _Integral, trace: Trace) -> _Integral:
    """``base``, with ``trace``'s unstored executions filled in when it has any."""
    return ReplayedIntegral(base, trace.replays) if len(trace.replays[0]) else base


class CounterIntegral(_Integral):
    """Time integral of a counter (a step function), for its mean over arbitrary windows.

    The mean HBM bandwidth over a window is the bytes moved in it over its width; the mean SBUF
    use is its byte-seconds over the width. Evaluated at every pixel edge, a counter of any
    length draws exactly at any zoom.
    """

    def __init__(self, t_ns: np.ndarray, value: np.ndarray) -> None:
        self.t = np.asarray(t_ns, dtype=np.float64)
        self.v = np.asarray(value, dtype=np.float64)
        steps = np.diff(self.t) * self.v[:-1] if len(self.t) > 1 else np.zeros(0)
        self.cum = np.concatenate([[0.0], np.cumsum(steps)])
        self.n_points = n = len(self.t)
        self.lo = float(self.t[0]) if n else 0.0
        self.hi = float(self.t[-1]) if n else 0.0
        self.slope_after = float(self.v[-1]) if n else 0.0

    def integral(self, t: np.ndarray, right: np.ndarray | None = None) -> np.ndarray:
        """The integral up to each of ``t`` (``right``: ``t``'s right indexes among the times, if known)."""
        t = np.asarray(t, dtype=np.float64)
        if not len(self.t):
            return np.zeros_like(t)
        i = (_right_index(self.t, t) if right is None else right) - 1
        ic = np.clip(i, 0, None)
        return np.where(i >= 0, self.cum[ic] + self.v[ic] * (t - self.t[ic]), 0.0)

    at = integral

    def on_grid(self, lo: float, step: float, count: int) -> np.ndarray:
        if not len(self.t):
            return np.zeros(count)
        return self.integral(lo + np.arange(count) * step, _grid_right_index(self.t, lo, step, count))

    def value_at(self, t: float) -> float:
        i = int(self.t.searchsorted(t, side="right")) - 1
        return float(self.cum[i] + self.v[i] * (t - self.t[i])) if i >= 0 else 0.0

    def means(self, edges: np.ndarray) -> np.ndarray:
        """Mean value over each window between consecutive ``edges``."""
        return _window_rates(edges, self.integral(edges))

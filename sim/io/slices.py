"""Slices laid out as Perfetto lays them out: the nested slices of a thread stacked by depth,
overlapping async slices packed into lanes, and the slice a flow leaves or enters.

Everything is vectorised with NumPy and costs O(n log n) for n slices. A group of slices that
nest properly (each inside the one it starts in, as a thread's call stack does) gets its depths
in one pass of sorts and searches. Where slices overlap without nesting (async slices of several
ids, a damaged file, a device's instructions), the walk of a stack or of a set of lanes is made
cluster by cluster (a cluster: slices of a group following each other while one of them is still
open; between two clusters every slice has ended): the clusters of up to :data:`STEPPED` slices
side by side, the i-th slice of each at step i; a longer one by a loop over that cluster only.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np

STEPPED = 64  # clusters of at most this many slices are walked side by side in NumPy, longer ones in a loop


def stack_order(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The order slices are stacked in: by group, then start, the longer first (an enclosing slice
    before the slices it holds), then as given (a B before the B it holds at the same time).

    Sorted stably by start, then by group (a radix sort where groups fit 16 bits), and by length
    only when slices of one group start together in the wrong order: a lexsort of the four keys
    takes 15 times as long on a million events."""
    shorter = start - end
    narrow = len(group) and -(1 << 15) <= group.min() and group.max() < 1 << 15
    key = group.astype(np.int16) if narrow else group
    o = np.argsort(start, kind="stable")
    o = o[np.argsort(key[o], kind="stable")]
    g, s, d = key[o], start[o], shorter[o]
    if np.any((g[1:] == g[:-1]) & (s[1:] == s[:-1]) & (d[1:] < d[:-1])):
        o = np.argsort(shorter, kind="stable")
        o = o[np.argsort(start[o], kind="stable")]
        o = o[np.argsort(key[o], kind="stable")]
    return o


def stack_depths(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The depth (row) of each slice in its ``group``: 0 for a slice no other holds, one more than
    the slice holding it otherwise, so that slices of one group and depth never overlap.

    In a group whose slices nest, a slice's depth is the number of earlier slices (in
    :func:`stack_order`) still open at its start: the earlier ones minus those ended by then (a
    zero-length slice at the same time, stacked after it, is not earlier). A group where that
    puts two overlapping slices on one row is packed into lanes instead (:func:`_lanes`).
    """
    n = len(start)
    depth = np.zeros(n, np.int64)
    if not n:
        return depth
    order = stack_order(group, start, end)
    g, s, e = group[order], start[order], end[order]
    depth_sorted = np.empty(n, np.int64)
    for lo, hi in _group_ranges(g):
        depth_sorted[lo:hi] = _open_at_start(s[lo:hi], e[lo:hi])
    clashing = _clashing_slices(g, s, e, depth_sorted)
    if len(clashing):
        depth_sorted[clashing] = _lanes(g[clashing], s[clashing], e[clashing])
    depth[order] = depth_sorted
    return depth


def _group_ranges(g: np.ndarray) -> list[tuple[int, int]]:
    """The ranges of each group's slices in ``g``, sorted by group."""
    if not len(g):
        return []
    edges = (np.flatnonzero(np.diff(g)) + 1).tolist()
    return list(zip([0, *edges], [*edges, len(g)], strict=True))


def _open_at_start(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """For slices of one group in stacked order, how many earlier ones are open at each start."""
    n = len(s)
    ended = np.searchsorted(np.sort(e), s, side="right")  # slices of the group ended by then
    run_end = np.searchsorted(s, s, side="right")  # the end of the run of slices starting together
    zero = e == s
    zeros_on = np.append(np.cumsum(zero[::-1])[::-1], 0)  # zero-length ones from here on
    # zero-length slices of the same start are stacked after the others of it and end by its start:
    # they (and a zero-length slice itself) are among the ended but not among the earlier
    later = zeros_on[:n] - zeros_on[run_end]
    return np.maximum(np.arange(n) - (ended - later), 0)


def _clashing_slices(g: np.ndarray, s: np.ndarray, e: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """The slices (of the stacked order, in it) of the groups where two slices of one depth
    overlap (if any two of a row do, two neighbours by start do)."""
    by_row = np.lexsort((s, depth, g))
    rg, rd, rs, re = g[by_row], depth[by_row], s[by_row], e[by_row]
    clash = (rg[1:] == rg[:-1]) & (rd[1:] == rd[:-1]) & (rs[1:] < re[:-1])
    if not clash.any():
        return np.zeros(0, np.int64)
    bad = np.unique(rg[1:][clash])
    return _spans(np.searchsorted(g, bad, side="left"), np.searchsorted(g, bad, side="right"))


def _spans(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The indices of the ranges ``[lo, hi)``, one after another."""
    size = hi - lo
    return np.repeat(lo - np.cumsum(size) + size, size) + np.arange(int(size.sum()))


def _clusters(g: np.ndarray, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The clusters of slices in stacked order: the first slice and the number of slices of each
    run of a group's slices where each (but the first) starts before an earlier one has ended."""
    n = len(s)
    latest = np.empty_like(e)
    for lo, hi in _group_ranges(g):
        latest[lo:hi] = np.maximum.accumulate(e[lo:hi])  # the latest end so far
    new = np.ones(n, bool)
    new[1:] = (s[1:] >= latest[:-1]) | (g[1:] != g[:-1])
    first = np.flatnonzero(new)
    return first, np.diff(np.append(first, n))


Step = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def _stepped(s: np.ndarray, e: np.ndarray, first: np.ndarray, size: np.ndarray, step: Step, out: np.ndarray) -> None:
    """Walks clusters (``first``, ``size``) side by side: at step i, ``step(ends, s, e)`` takes the
    i-th slice of each cluster of more than i slices and returns its result (written to ``out``),
    ``ends`` being its cluster's row of end times (-inf where none is yet, i + 1 of them), which
    ``step`` updates. Clusters go in bands of sizes up to a power of two, so that the rows of a
    band hold at most twice as many times as the band's slices."""
    by = np.argsort(-size, kind="stable")
    first, size = first[by], size[by]
    band = np.ceil(np.log2(size)).astype(np.int64)  # larger first
    for lo, hi in _group_ranges(-band):
        f, z = first[lo:hi], size[lo:hi]
        ends = np.full((hi - lo, int(z[0])), -np.inf)
        for i, active in enumerate(np.searchsorted(-z, -np.arange(int(z[0])), side="left").tolist()):
            k = f[:active] + i
            out[k] = step(ends[:active, :i + 1], s[k], e[k])


def _stack_step(ends: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """A step of a stack: ``ends`` are the open slices' ends, innermost last (those already closed
    end no later than ``s``); a slice crossing the innermost open one is left out (True)."""
    height = np.count_nonzero(ends > s[:, None], axis=1)
    rows = np.arange(len(s))
    out = (height > 0) & (e > ends[rows, np.maximum(height - 1, 0)])
    push = np.flatnonzero(~out)
    ends[push, height[push]] = e[push]
    return out


def _lane_step(ends: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """A step of lanes: each slice in the lowest lane free at its start (its last slice ended)."""
    lane = np.argmax(ends <= s[:, None], axis=1)
    ends[np.arange(len(s)), lane] = e
    return lane


def _lanes(g: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Lanes for slices in stacked order: each in the lowest lane of its group free at its start
    (a lane is free again at the end of its last slice)."""
    lanes = np.zeros(len(s), np.int64)
    first, size = _clusters(g, s, e)  # each cluster starts with every lane free
    few = (size > 1) & (size <= STEPPED)
    _stepped(s, e, first[few], size[few], _lane_step, lanes)
    for lo, n in zip(first[size > STEPPED].tolist(), size[size > STEPPED].tolist(), strict=True):
        lanes[lo:lo + n] = _pack(s[lo:lo + n], e[lo:lo + n])
    return lanes


def _pack(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Lanes for slices in stacked order: each in the lowest lane free at its start (a lane is
    free again at the end of its last slice)."""
    lanes = np.zeros(len(start), np.int64)
    busy: list[tuple[float, int]] = []  # (end, lane) of the lanes in use
    free: list[int] = []
    used = 0
    for k, (s, e) in enumerate(zip(start.tolist(), end.tolist(), strict=True)):
        while busy and busy[0][0] <= s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, used = used, used + 1
        heapq.heappush(busy, (e, lane))
        lanes[k] = lane
    return lanes


class RowIndex:
    """Finds slices on rows: ``row``, ``start`` and ``end`` of slices sorted by row then start,
    queried with times from ``times`` (every time a query will ask about, so that rows and times
    combine into one exact integer key)."""

    def __init__(self, row: np.ndarray, start: np.ndarray, end: np.ndarray, times: np.ndarray) -> None:
        self._unique = np.unique(np.concatenate([start, times]))
        self._width = len(self._unique) + 1
        self._row, self._end = row, end
        self._key = row * self._width + np.searchsorted(self._unique, start)

    def _keys(self, row: np.ndarray, t: np.ndarray) -> np.ndarray:
        return row * self._width + np.searchsorted(self._unique, t)

    def holding(self, row: np.ndarray, t: np.ndarray) -> np.ndarray:
        """For each query, the last slice of ``row`` starting at or before ``t`` that has not
        ended before it; -1 where there is none."""
        i = np.searchsorted(self._key, self._keys(row, t), side="right") - 1
        ic = np.clip(i, 0, None)
        ok = (i >= 0) & (self._row[ic] == row) & (self._end[ic] >= t) if len(self._key) else np.zeros(len(t), bool)
        return np.where(ok, i, -1)

    def next_from(self, row: np.ndarray, t: np.ndarray) -> np.ndarray:
        """For each query, the first slice of ``row`` starting at or after ``t``; -1 where none does."""
        i = np.searchsorted(self._key, self._keys(row, t), side="left")
        ic = np.clip(i, 0, max(len(self._key) - 1, 0))
        ok = (i < len(self._key)) & (self._row[ic] == row) if len(self._key) else np.zeros(len(t), bool)
        return np.where(ok, i, -1)


def crossing(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Which slices a thread's stack cannot hold: in :func:`stack_order`, each slice of a group
    nests in the innermost one still open at its start (one ending at or before it is closed)
    when it ends no later, and is pushed on the stack; otherwise it crosses that one and is left
    out. Each cluster of overlapping slices is walked apart (the stack is empty between two):
    short ones side by side; a long one only when its slices do not all nest (each inside the
    last slice before it one depth above it, found in one pass)."""
    n = len(start)
    out = np.zeros(n, bool)
    if n < 2:
        return out
    order = stack_order(group, start, end)
    g, s, e = group[order], start[order], end[order]
    first, size = _clusters(g, s, e)
    few = (size > 1) & (size <= STEPPED)
    crossed = np.zeros(n, bool)
    _stepped(s, e, first[few], size[few], _stack_step, crossed)
    many = size > STEPPED
    if many.any():
        lo, hi = first[many], first[many] + size[many]
        for a, b in _not_nesting(g, s, e, lo, hi):
            crossed[a:b] = _crossing_walk(s[a:b], e[a:b])
    out[order] = crossed
    return out


def _not_nesting(g: np.ndarray, s: np.ndarray, e: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[tuple[int, int]]:
    """Of the clusters ``[lo, hi)`` of the stacked order, those where some slice does not nest in
    the last slice before it one depth above it (its depth: the earlier slices open at its start)."""
    idx = _spans(lo, hi)
    n = len(idx)
    cluster = np.repeat(np.arange(len(lo)), hi - lo)
    d = np.empty(n, np.int64)
    for a, b in _group_ranges(g[idx]):  # the clusters of a group end before the next starts
        d[a:b] = _open_at_start(s[idx[a:b]], e[idx[a:b]])
    level = cluster * (int(d.max()) + 2) + d  # a cluster's depth, as one integer, ascending in order
    by_level = np.argsort(level, kind="stable")
    codes, block = np.unique(level[by_level], return_inverse=True)
    key = block.reshape(-1).astype(np.int64) * (n + 1) + by_level  # sorted: by level, then stack order
    child = np.flatnonzero(d > 0)
    above = np.searchsorted(codes, level[child] - 1)  # the block of the depth above
    at = np.searchsorted(key, above * (n + 1) + child) - 1  # the last slice of it before the child
    parent = by_level[np.clip(at, 0, None)]
    held = (at >= 0) & (level[parent] == level[child] - 1) & (e[idx[parent]] >= e[idx[child]])
    bad = np.unique(cluster[child[~held]])
    return list(zip(lo[bad].tolist(), hi[bad].tolist(), strict=True))


def _crossing_walk(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """:func:`crossing` of one group's slices in stack order, by walking its stack."""
    out = np.zeros(len(start), bool)
    stack: list[float] = []  # the ends of the slices open, the innermost last
    for k, (s, e) in enumerate(zip(start.tolist(), end.tolist(), strict=True)):
        while stack and stack[-1] <= s:
            stack.pop()
        if stack and e > stack[-1]:
            out[k] = True
        else:
            stack.append(e)
    return out

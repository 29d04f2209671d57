"""Slices laid out as Perfetto lays them out: the nested slices of a thread stacked by depth,
overlapping async slices packed into lanes, and the slice a flow leaves or enters.

Everything is vectorised with NumPy and costs O(n log n) for n slices. A group of slices that
nest properly (each inside the one it starts in, as a thread's call stack does) gets its depths
in one pass of sorts and searches; a group where some overlap without nesting (async slices of
several ids, a damaged file) is packed by a greedy loop over that group only, each slice in the
lowest lane free at its start, which is the same depth wherever the slices do nest.
"""

from __future__ import annotations

import heapq

import numpy as np


def stack_order(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The order slices are stacked in: by group, then start, the longer first (an enclosing slice
    before the slices it holds), then as given (a B before the B it holds at the same time)."""
    return np.lexsort((np.arange(len(start)), start - end, start, group))


def stack_depths(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The depth (row) of each slice in its ``group``: 0 for a slice no other holds, one more than
    the slice holding it otherwise, so that slices of one group and depth never overlap.

    In a group whose slices nest, a slice's depth is the number of earlier slices (in
    :func:`stack_order`) still open at its start: the earlier ones minus those ended by then (a
    zero-length slice at the same time, stacked after it, is not earlier). A group where that
    puts two overlapping slices on one row is packed instead (:func:`_pack`).
    """
    n = len(start)
    depth = np.zeros(n, np.int64)
    if not n:
        return depth
    order = stack_order(group, start, end)
    g, s, e = group[order], start[order], end[order]
    depth_sorted = np.empty(n, np.int64)
    edges = np.flatnonzero(np.diff(g)) + 1
    for lo, hi in zip([0, *edges.tolist()], [*edges.tolist(), n], strict=True):
        depth_sorted[lo:hi] = _open_at_start(s[lo:hi], e[lo:hi])
    for lo, hi in _clashing_groups(g, s, e, depth_sorted):
        depth_sorted[lo:hi] = _pack(s[lo:hi], e[lo:hi])
    depth[order] = depth_sorted
    return depth


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


def _clashing_groups(g: np.ndarray, s: np.ndarray, e: np.ndarray, depth: np.ndarray) -> list[tuple[int, int]]:
    """The ranges (of the stacked order) of the groups where two slices of one depth overlap (if
    any two of a row do, two neighbours by start do)."""
    by_row = np.lexsort((s, depth, g))
    rg, rd, rs, re = g[by_row], depth[by_row], s[by_row], e[by_row]
    clash = (rg[1:] == rg[:-1]) & (rd[1:] == rd[:-1]) & (rs[1:] < re[:-1])
    if not clash.any():
        return []
    bad = np.unique(rg[1:][clash])
    lo = np.searchsorted(g, bad, side="left")
    hi = np.searchsorted(g, bad, side="right")
    return list(zip(lo.tolist(), hi.tolist(), strict=True))


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
    out. A group whose slices all nest (each inside the last slice before it one depth above it,
    found in one pass) is not walked; only a group where some cross is, slice by slice."""
    out = np.zeros(len(start), bool)
    some = _overlapping_groups(group, start, end)
    if some is not None:
        out[some] = _crossing_of(group[some], start[some], end[some])
    return out


def _overlapping_groups(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """The slices of the groups where some slice begins before another has ended, or None."""
    n = len(start)
    if n < 2:
        return None
    order = np.lexsort((start, group))
    g, s = group[order], start[order]
    ends = np.sort(end)
    first = np.flatnonzero(np.diff(g, prepend=g[0] - 1))  # each group's first slice
    # the latest end so far in each group, as a rank of the ends (the group above them all)
    rank = np.searchsorted(ends, end[order]) + np.repeat(np.arange(len(first), dtype=np.int64) * (n + 1),
                                                         np.diff(np.append(first, n)))
    latest = np.maximum.accumulate(rank)
    inside = s[1:] < ends[latest[:-1] % (n + 1)]
    inside[first[1:] - 1] = False  # a group's first slice follows no slice of it
    if not inside.any():
        return None
    return np.flatnonzero(np.isin(group, np.unique(g[1:][inside])))


def _crossing_of(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """:func:`crossing` of slices among which some overlap."""
    n = len(start)
    out = np.zeros(n, bool)
    order = stack_order(group, start, end)
    g, s, e = group[order], start[order], end[order]
    d = stack_depths(group, start, end)[order]
    rank = np.unique(g, return_inverse=True)[1].reshape(-1).astype(np.int64)
    level = rank * (int(d.max()) + 2) + d  # a group's depth, as one integer
    by_level = np.lexsort((np.arange(n), level))
    codes, block = np.unique(level[by_level], return_inverse=True)
    key = block.reshape(-1).astype(np.int64) * (n + 1) + by_level  # sorted: by level, then stack order
    child = np.flatnonzero(d > 0)
    above = np.searchsorted(codes, level[child] - 1)  # the block of the depth above
    at = np.searchsorted(key, above * (n + 1) + child) - 1  # the last slice of it before the child
    parent = by_level[np.clip(at, 0, None)]
    held = (at >= 0) & (level[parent] == level[child] - 1) & (e[parent] >= e[child])
    bad = np.unique(g[child[~held]])
    for lo, hi in zip(np.searchsorted(g, bad, "left").tolist(), np.searchsorted(g, bad, "right").tolist(),
                      strict=True):
        out[order[lo:hi]] = _crossing_walk(s[lo:hi], e[lo:hi])
    return out


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

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

"""Rebuild range nesting (depth, parent) from time containment, vectorised.

Neither Kineto nor nsys stores nesting; both store well-nested intervals per thread. With rows
sorted by (group, start, -end), the depth of a row is the number of rows of its group that
started before it minus those that had already ended, and its parent is the nearest earlier
row one level up. Both are searchsorted passes, not a Python loop over the events.
"""
from __future__ import annotations

import numpy as np


def nest(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (depth, parent) for each row; parent is a row index or -1.

    group: an integer key per row (e.g. pid << 24 | tid); rows of different groups never nest.
    """
    n = len(start)
    depth = np.zeros(n, dtype=np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return depth, parent
    group = np.unique(np.asarray(group, dtype=np.int64), return_inverse=True)[1].astype(np.int64)
    t0 = int(np.min(start))
    start = np.asarray(start, dtype=np.int64) - t0
    # A zero-length range would count as ended before it starts: give it 1 ns so it nests.
    end = np.maximum(np.asarray(end, dtype=np.int64) - t0, start + 1)
    span = np.int64(int(end.max()) + 1)
    if (int(group.max()) + 1) * int(span) >= 2**62:
        raise ValueError("trace span too long to nest ranges")
    order = np.lexsort((-end, start, group))  # by group, start, longest first
    g, s, e = group[order], start[order], end[order]
    del group, start, end      # temporaries are dropped at their last use: n-sized each
    # First position of each row's group in the sorted order.
    bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    group_first = np.repeat(bounds, np.diff(np.r_[bounds, n]))
    started_before = np.arange(n) - group_first
    del group_first
    # Ends sorted within each group, offset so one global searchsorted serves all groups.
    ends_sorted_idx = np.lexsort((e, g))
    e_sorted = e[ends_sorted_idx]
    g_sorted = g[ends_sorted_idx]
    del ends_sorted_idx
    # Count rows of the same group with end <= s: search within each group's slice.
    lo = np.searchsorted(g_sorted, g, side="left")
    # searchsorted on a (group, end) composite: rank ends within group by shifting by group id.
    comp = _composite(g_sorted, e_sorted, span)
    del g_sorted, e_sorted
    ended = np.searchsorted(comp, _composite(g, s, span), side="right") - lo
    del comp, lo, s, e
    d = np.maximum(started_before - ended, 0)
    del started_before, ended
    # Parent: the nearest earlier row (same group) with depth d - 1.
    par_sorted = np.full(n, -1, dtype=np.int64)
    positions = np.arange(n)
    for level in range(1, int(d.max()) + 1 if n else 0):
        child = positions[d == level]
        if len(child) == 0:
            continue
        cand = positions[d == level - 1]
        k = np.searchsorted(cand, child, side="left") - 1
        ok = k >= 0
        p = np.where(ok, cand[np.clip(k, 0, None)], -1)
        same = ok & (g[np.clip(p, 0, None)] == g[child])
        par_sorted[child] = np.where(same, order[np.clip(p, 0, None)], -1)
    depth[order] = d
    parent[order] = par_sorted
    return depth, parent


def _composite(g: np.ndarray, t: np.ndarray, span: np.int64) -> np.ndarray:
    """Order-preserving single int64 key for (group, time); groups are small dense ranks."""
    return g * span + t

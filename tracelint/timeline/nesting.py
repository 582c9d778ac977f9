"""Rebuild range nesting (depth, parent) from time containment, vectorised.

Neither Kineto nor nsys stores nesting; both store well-nested intervals per thread. With rows
sorted by (group, start, -end), the depth of a row is the number of rows of its group that
started before it minus those that had already ended, and its parent is the nearest earlier
row one level up. Both are searchsorted passes, not a Python loop over the events.
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def nest(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (depth, parent) for each row; parent is a row index or -1.

    group: an integer key per row (e.g. pid << 24 | tid); rows of different groups never nest.
    """
    n = len(start)
    depth = np.zeros(n, dtype=np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return depth, parent
    # Dense group numbers in any order (a hash, not a sort): only equality matters.
    group = pd.factorize(np.asarray(group, dtype=np.int64))[0].astype(np.int64)
    t0 = int(np.min(start))
    start = np.asarray(start, dtype=np.int64) - t0
    # A zero-length range would count as ended before it starts: give it 1 ns so it nests.
    end = np.maximum(np.asarray(end, dtype=np.int64) - t0, start + 1)
    span = np.int64(int(end.max()) + 1)
    if (int(group.max()) + 1) * int(span) >= 2**62:
        raise ValueError("trace span too long to nest ranges")
    base = group * span                  # (group, time) as one order-preserving int64 key
    key = base + start
    order = _by_start_longest_first(key, end)
    key, g = key[order], group[order]
    ends = np.sort(base + end, kind="stable")      # every row's (group, end), ascending
    del group, start, end, base      # temporaries are dropped at their last use: n-sized each
    # First position of each row's group in the sorted order (the same in `ends`).
    bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    group_first = np.repeat(bounds, np.diff(np.r_[bounds, n]))
    # Rows of the group that started before this one, less those that ended by its start.
    ended = np.searchsorted(ends, key, side="right") - group_first
    del ends, key
    d = np.maximum(np.arange(n) - group_first - ended, 0)
    del group_first, ended
    depth[order] = d
    parent[order] = _nearest_level_above(d, g, order)
    return depth, parent


def _by_start_longest_first(key: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The row order by (group, start) key, then longest first; ties keep row order. A
    stable sort of one key (traces are nearly in order already), then the rare rows that
    share a start are ordered by their end."""
    order = np.argsort(key, kind="stable")
    k = key[order]
    tie = k[1:] == k[:-1]
    if tie.any():
        at = np.flatnonzero(np.r_[tie, False] | np.r_[False, tie])
        order[at] = order[at][np.lexsort((-end[order[at]], k[at]))]
    return order


def _nearest_level_above(d: np.ndarray, g: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Per sorted row: the original index of the nearest earlier row one level up, or -1.
    Rows listed by (depth, position) make it one search for every row at once: a row's
    parent is the last entry of the level above that precedes it."""
    n = len(d)
    small = d.astype(np.uint16) if d.max() < 2**16 else d     # a radix sort for the levels
    by_level = np.argsort(small, kind="stable")
    level_pos = d[by_level] * n + by_level
    first = int(np.searchsorted(d[by_level], 1))
    child = by_level[first:]
    p = by_level[np.searchsorted(level_pos, level_pos[first:] - n) - 1]
    parent = np.full(n, -1, dtype=np.int64)
    parent[child] = np.where(g[p] == g[child], order[p], -1)
    return parent

"""Vectorised interval algebra on (start, end) int64 arrays: the toolkit every rule uses."""
from __future__ import annotations

import numpy as np


def merge(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as sorted, disjoint (start, end) arrays. Touching intervals merge."""
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    if len(start) == 0:
        return start.copy(), end.copy()
    if (start[1:] < start[:-1]).any():
        order = np.argsort(start, kind="stable")
        s, e = start[order], np.maximum(end[order], start[order])
    else:            # in start order already (a device's activity): no sort, no copies
        s, e = start, np.maximum(end, start)
    running_end = np.maximum.accumulate(e)
    new_block = np.r_[True, s[1:] > running_end[:-1]]
    idx = np.flatnonzero(new_block)
    block_end = np.maximum.reduceat(e, idx)
    return s[idx], block_end


def gaps(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Idle intervals between merged busy intervals (none before the first or after the last)."""
    s, e = merge(start, end)
    return e[:-1], s[1:]


def total(start: np.ndarray, end: np.ndarray) -> int:
    s, e = merge(start, end)
    return int((e - s).sum())


def uncovered(start: np.ndarray, end: np.ndarray, bs: np.ndarray, be: np.ndarray) -> int:
    """ns of the union of the intervals (start, end) that the union (bs, be) (merged+sorted)
    does not cover: each ns once, however many intervals hold it."""
    s, e = merge(start, end)
    return int((e - s).sum() - overlap_each(s, e, bs, be).sum())


def overlap_each(qs: np.ndarray, qe: np.ndarray, bs: np.ndarray, be: np.ndarray,
                 cum: np.ndarray | None = None) -> np.ndarray:
    """For each query interval, the ns it overlaps the union (bs, be) (must be merged+sorted).

    Uses a prefix sum of busy time: overlap = covered(qe) - covered(qs), where covered(t) is the
    busy time before t. O((n + m) log m), or O(n log m) given the prefix sums
    (cum = [0, cumsum(be - bs)]) of a union asked about many times.
    """
    qs = np.asarray(qs, dtype=np.int64)
    qe = np.asarray(qe, dtype=np.int64)
    if len(bs) == 0 or len(qs) == 0:
        return np.zeros(len(qs), dtype=np.int64)
    if cum is None:
        cum = np.r_[0, np.cumsum(be - bs)]
    return covered_before(qe, bs, be, cum) - covered_before(qs, bs, be, cum)


def overlaps_any(qs: np.ndarray, qe: np.ndarray, bs: np.ndarray, be: np.ndarray) -> np.ndarray:
    """Per query interval: does it overlap the union (bs, be) (merged+sorted) by at least 1 ns?
    overlap_each(...) > 0 with one search instead of two and no prefix sums: the first
    non-empty interval ending after the query's start must begin before its end."""
    qs = np.asarray(qs, dtype=np.int64)
    qe = np.asarray(qe, dtype=np.int64)
    real = be > bs
    bs, be = bs[real], be[real]
    if len(bs) == 0 or len(qs) == 0:
        return np.zeros(len(qs), dtype=bool)
    i = np.searchsorted(be, qs, side="right")
    hit = i < len(bs)
    hit[hit] = bs[i[hit]] < qe[hit]
    return hit & (qe > qs)


def covered_before(t: np.ndarray, bs: np.ndarray, be: np.ndarray, cum: np.ndarray) -> np.ndarray:
    """Busy time of merged intervals (bs, be) strictly before each time t."""
    j = np.searchsorted(bs, t, side="right") - 1     # the last interval starting at or before t
    before = j < 0
    np.maximum(j, 0, out=j)
    out = np.minimum(t, be[j])           # in place from here: one array for n queries, not six
    out -= bs[j]
    np.maximum(out, 0, out=out)          # t at or after that interval's end: all of it counts
    out += cum[j]
    out[before] = 0
    return out


def contains_count(points: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For each interval, how many of the sorted points fall in [start, end)."""
    points = np.asarray(points)
    return np.searchsorted(points, end, side="left") - np.searchsorted(points, start, side="left")


def innermost_enclosing(t: np.ndarray, group_t: np.ndarray, start: np.ndarray, end: np.ndarray,
                        group: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Index of the deepest interval of the same group enclosing each time t, or -1.

    Intervals must be well nested per group. Works level by level from the deepest, so it
    costs O(levels * n log n) and no Python loop over events.
    """
    t = np.asarray(t, dtype=np.int64)
    out = np.full(len(t), -1, dtype=np.int64)
    if len(start) == 0 or len(t) == 0:
        return out
    group = np.asarray(group, dtype=np.int64)
    group_t = np.asarray(group_t, dtype=np.int64)
    for level in range(int(depth.max()), -1, -1):
        todo = out < 0
        if not todo.any():
            break
        idx = np.flatnonzero(depth == level)
        if len(idx) == 0:
            continue
        order = np.lexsort((start[idx], group[idx]))
        idx = idx[order]
        gs, ss = group[idx], start[idx]
        # search (group, t) among (group, start) of this level
        q = np.flatnonzero(todo)
        lo = np.searchsorted(gs, group_t[q], side="left")
        hi = np.searchsorted(gs, group_t[q], side="right")
        # within the group's slice, last interval starting at or before t
        pos = np.empty(len(q), dtype=np.int64)
        for_same = hi > lo
        pos[:] = -1
        if for_same.any():
            # offset search: starts within [lo, hi)
            qq = np.flatnonzero(for_same)
            k = _search_in_slices(ss, lo[qq], hi[qq], t[q[qq]])
            pos[qq] = k
        ok = pos >= 0
        cand = idx[np.clip(pos, 0, None)]
        hit = ok & (start[cand] <= t[q]) & (end[cand] > t[q])
        out[q[hit]] = cand[hit]
    return out


def best_enclosing(q_group: np.ndarray, q_t: np.ndarray, group: np.ndarray, start: np.ndarray,
                   end: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Per query (group, t): the index of the interval of that group with start <= t <= end and
    the highest rank (ties: the lowest index), or -1. Nesting is not assumed: a query's
    candidates are the group's intervals that start between t minus the group's longest
    interval and t, so the cost follows the overlap, not queries x intervals."""
    q_group, q_t = np.asarray(q_group, np.int64), np.asarray(q_t, np.int64)
    group, start, end = (np.asarray(a, np.int64) for a in (group, start, end))
    rank = np.asarray(rank)
    out = np.full(len(q_t), -1, np.int64)
    for g in np.intersect1d(np.unique(q_group), group):  # loop over groups that have both
        mine = np.flatnonzero(group == g)
        mine = mine[np.argsort(start[mine], kind="stable")]
        s, e = start[mine], end[mine]
        q = np.flatnonzero(q_group == g)
        t = q_t[q]
        lo = np.searchsorted(s, t - int((e - s).max()), side="left")
        hi = np.searchsorted(s, t, side="right")
        n = hi - lo
        which = np.repeat(np.arange(len(q)), n)            # candidate -> its query
        cand = np.repeat(lo - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
        keep = e[cand] >= t[which]
        which, cand = which[keep], mine[cand[keep]]
        if len(cand) == 0:
            continue
        order = np.lexsort((cand, -rank[cand], which))      # per query: best rank, lowest index
        first = np.r_[True, which[order][1:] != which[order][:-1]]
        out[q[which[order][first]]] = cand[order][first]
    return out


def _search_in_slices(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per query, the last index in values[lo:hi] with value <= t, or -1. values sorted per slice."""
    # Binary search vectorised over queries.
    left = lo.copy()
    right = hi.copy()  # search in [left, right)
    while True:
        active = left < right
        if not active.any():
            break
        mid = (left + right) // 2
        go_right = active & (values[np.minimum(mid, len(values) - 1)] <= t)
        left = np.where(go_right, mid + 1, left)
        right = np.where(active & ~go_right, mid, right)
    res = left - 1
    return np.where(res >= lo, res, -1)


def starts_inside_per_thread(r, is_region, a, b) -> tuple[np.ndarray, np.ndarray]:
    """For each range row flagged in is_region: how many rows flagged `a`, and `b`, of the same
    thread (pid, tid) start inside it. r: a ranges-like table with start, end, pid, tid."""
    out_a = np.zeros(len(r), dtype=np.int64)
    out_b = np.zeros(len(r), dtype=np.int64)
    start, end = r["start"].to_numpy(), r["end"].to_numpy()
    thread = (r["pid"].to_numpy().astype(np.int64) << 32) ^ r["tid"].to_numpy().astype(np.int64)
    for t in np.unique(thread[is_region]):
        mine = np.flatnonzero(thread == t)
        mine = mine[np.argsort(start[mine], kind="stable")]
        ca = np.concatenate([[0], np.cumsum(a[mine])])
        cb = np.concatenate([[0], np.cumsum(b[mine])])
        regs = np.flatnonzero(is_region & (thread == t))
        lo = np.searchsorted(start[mine], start[regs], side="left")
        hi = np.searchsorted(start[mine], end[regs], side="left")
        out_a[regs], out_b[regs] = ca[hi] - ca[lo], cb[hi] - cb[lo]
    return out_a, out_b

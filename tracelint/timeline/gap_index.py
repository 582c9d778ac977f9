"""Per-gap lookups of timeline.gaps.attribute by binary search instead of a pass over a table,
and the loop over the gaps itself.

attribute() walks the reported gaps one by one. Each step used to build boolean masks over
every API call (the blocking calls of the launching thread, the stream waits of that thread)
and over every earlier GPU activity (the last linked one on the same stream): on the 287 MB
reference trace, 60,000 gaps x 250,000 calls, 95% of lint's time. The same rows come from
tables grouped by key (thread, stream) and sorted by start once, so each gap costs a few
binary searches. Results are the same rows as the masks gave.

The loop (`attribute_gaps`) is written in the subset numba compiles (tracelint.jit): on many
gaps it runs compiled; on few, as plain Python over memoryviews, where `_left` and `_right` are
the standard library's bisect (C) and the compiled path gets the same searches written out.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right

import numpy as np

from ..jit import Loop
from .codes import compact_row_codes

_NONE = np.zeros(0, dtype=np.int64)
CAUSES = ("late", "launch_call", "blocked", "event_wait", "graph", "queued", "no_launch", "unlinked")
(LATE, LAUNCH_CALL, BLOCKED, EVENT_WAIT, GRAPH, QUEUED, NO_LAUNCH, UNLINKED) = range(len(CAUSES))
#: Gaps from which the loop runs compiled when numba is installed. Plain, a gap costs 6-20 µs
#: (more with more blocking calls); loading numba and the cached loop costs about 0.4 s and
#: 90 MB, so the 287 MB reference (60 k gaps, 0.35 s plain) stays plain.
COMPILE_FROM = 100_000

_left, _right = bisect_left, bisect_right


def _bisect_left(a, x, lo, hi):
    """bisect.bisect_left, for the compiled path."""
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _bisect_right(a, x, lo, hi):
    """bisect.bisect_right, for the compiled path."""
    while lo < hi:
        mid = (lo + hi) // 2
        if x < a[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _span(keys, first, stop, key):
    """[first, stop) of `key`'s rows in a table grouped by key ((0, 0): none)."""
    k = _left(keys, key, 0, len(keys))
    if k < len(keys) and keys[k] == key:
        return first[k], stop[k]
    return 0, 0


def _candidates(keys, first, stop, start, cummax, key, lo, hi):
    """[i, j): the rows of `key` that may overlap [lo, hi) (start < hi, running end > lo);
    the ones among them with end > lo do."""
    a, b = _span(keys, first, stop, key)
    return _right(cummax, lo, a, b), _left(start, hi, a, b)


def _covered(start, end, i, j, lo, hi):
    """ns of [lo, hi) inside the union of rows [i, j) with end > lo (sorted by start)."""
    total, cur_s, cur_e = 0, lo, lo
    for k in range(i, j):
        if end[k] <= lo:
            continue
        s = start[k] if start[k] > lo else lo
        e = end[k] if end[k] > s else s
        if e > hi:
            e = hi
        if e <= s:
            continue
        if s > cur_e:
            total += cur_e - cur_s
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    return total + cur_e - cur_s


def _longest(rows, start, end, i, j, lo, hi):
    """The row among [i, j) with end > lo that overlaps [lo, hi) most (ties: the lowest row;
    one candidate: that row), or -1."""
    best, best_ov = -1, 0
    for k in range(i, j):
        if end[k] <= lo:
            continue
        ov = (end[k] if end[k] < hi else hi) - (start[k] if start[k] > lo else lo)
        if best < 0 or ov > best_ov or (ov == best_ov and rows[k] < best):
            best, best_ov = rows[k], ov
    return best


def _waited(p, li, t0, t1, d_stream, d_launch, a_start, a_thread, w_keys, w_first, w_stop,
            w_start, w_end, w_cummax, l_keys, l_first, l_stop, linked, s_keys, s_first, s_stop,
            s_start):
    """Did the stream of activity p wait on another stream's event before running it? (a GPU
    stream wait on that stream within [t0, t1], or a stream-wait call of the launching thread
    since the previous linked launch on that stream)"""
    stream = d_stream[p]
    i, j = _candidates(w_keys, w_first, w_stop, w_start, w_cummax, stream, t0 - 1, t1 + 1)
    for k in range(i, j):
        if w_end[k] > t0 - 1:
            return True
    if len(s_start) == 0:
        return False
    a, b = _span(l_keys, l_first, l_stop, stream)
    k = _left(linked, p, a, b) - 1
    lo = a_start[d_launch[linked[k]]] if k >= a else -1
    a, b = _span(s_keys, s_first, s_stop, a_thread[li])
    return _right(s_start, a_start[li], a, b) > _left(s_start, lo, a, b)


def attribute_gaps(gs, ge, pos, d_start, d_stream, d_launch, a_start, a_end, a_thread, is_graph,
                   b_keys, b_first, b_stop, b_rows, b_start, b_end, b_cummax,
                   n_rows, n_start, n_end, n_cummax,
                   w_keys, w_first, w_stop, w_start, w_end, w_cummax,
                   l_keys, l_first, l_stop, linked, s_keys, s_first, s_stop, s_start,
                   causes, nxt_pos, launch, blocker):
    """Per gap [gs, ge): ns per cause (columns CAUSES of `causes`), the next activity's
    position (nxt_pos), its launch call (launch) and the longest blocking call (blocker);
    -1 where there is none. b_*: blocking calls by thread; n_*: the same by start alone;
    w_*: GPU stream waits by stream; l_*: linked activity by stream; s_*: stream-wait calls
    by thread (see GapIndex)."""
    nd = len(d_start)
    for g in range(len(gs)):
        lo, hi = gs[g], ge[g]
        p = pos[g]
        if p >= nd or d_start[p] > hi:
            causes[g, NO_LAUNCH] = hi - lo
            i = _right(n_cummax, lo, 0, len(n_cummax))
            j = _left(n_start, hi, 0, len(n_start))
            blocker[g] = _longest(n_rows, n_start, n_end, i, j, lo, hi)
            continue
        nxt_pos[g] = p
        li = d_launch[p]
        if li < 0:
            causes[g, UNLINKED] = hi - lo
            continue
        launch[g] = li
        t_launch = a_start[li]
        t_launch = lo if t_launch < lo else (hi if t_launch > hi else t_launch)
        i, j = _candidates(b_keys, b_first, b_stop, b_start, b_cummax, a_thread[li], lo, t_launch)
        blocked = _covered(b_start, b_end, i, j, lo, t_launch)
        causes[g, BLOCKED] = blocked
        causes[g, LATE] = t_launch - lo - blocked
        blocker[g] = _longest(b_rows, b_start, b_end, i, j, lo, t_launch)
        t_ret = a_end[li]
        t_ret = t_launch if t_ret < t_launch else (hi if t_ret > hi else t_ret)
        causes[g, LAUNCH_CALL] = t_ret - t_launch
        queued = hi - t_ret
        if queued > 0 and _waited(p, li, t_launch, hi, d_stream, d_launch, a_start, a_thread,
                                  w_keys, w_first, w_stop, w_start, w_end, w_cummax,
                                  l_keys, l_first, l_stop, linked, s_keys, s_first, s_stop,
                                  s_start):
            causes[g, EVENT_WAIT] = queued
        elif is_graph[li]:
            causes[g, GRAPH] = queued
        else:
            causes[g, QUEUED] = queued


LOOP = Loop(attribute_gaps, COMPILE_FROM,
            helpers={"_left": _bisect_left, "_right": _bisect_right, "_span": _span,
                     "_candidates": _candidates, "_covered": _covered, "_longest": _longest,
                     "_waited": _waited})


def _groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted keys -> (distinct keys, first position, end position) of each key's run."""
    if len(keys) == 0:
        return _NONE, _NONE, _NONE
    first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return keys[first], first, np.r_[first[1:], len(keys)]


class Overlaps:
    """Rows grouped by an integer key, by start within a group, with the running maximum of
    their ends: the rows of one key that overlap [lo, hi) (start < hi and end > lo).

    key None: one group. Columns are taken at `rows` before any widening, and the sorted key
    is dropped once grouped: over the blocking calls of 3 M kernels each full-length int64
    copy was 53 MB of TL001's peak."""

    def __init__(self, key: np.ndarray | None, start: np.ndarray, end: np.ndarray,
                 rows: np.ndarray):
        rows = np.asarray(rows, dtype=np.int64)
        k = np.zeros(len(rows), np.int64) if key is None else \
            np.asarray(key)[rows].astype(np.int64, copy=False)
        s = np.asarray(start)[rows].astype(np.int64, copy=False)
        order = np.lexsort((rows, s, k))
        self.rows, self.start = rows[order], s[order]
        k = k[order]
        del s, order
        self.end = np.asarray(end)[self.rows].astype(np.int64, copy=False)
        self.cummax = self.end.copy()
        self.keys, self.first, self.stop = _groups(k)
        del k
        for a, b in zip(self.first.tolist(), self.stop.tolist()):
            self.cummax[a:b] = np.maximum.accumulate(self.cummax[a:b])

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.keys, self.first, self.stop, self.rows, self.start, self.end, self.cummax

    def find(self, key: int, lo: int, hi: int) -> np.ndarray:
        """Rows of `key` with start < hi and end > lo, ascending."""
        i, j = _candidates(self.keys, self.first, self.stop, self.start, self.cummax, key, lo, hi)
        return np.sort(self.rows[i:j][self.end[i:j] > lo]) if i < j else _NONE


class GapIndex:
    """What attribute() asks per gap, over one device's activity and the API calls, as the
    sorted, grouped arrays that attribute_gaps searches."""

    def __init__(self, d_stream, d_launch, a_start, a_end, a_pid, a_tid, block_mask, waits,
                 gpu_waits):
        # int32, one value stored once for one thread: a code per API call lives as long as
        # the index (23 M calls: 184 MB as int64)
        self.thread = compact_row_codes(a_pid, a_tid) if len(a_pid) else _NONE
        blocking = np.flatnonzero(block_mask)
        self.blocking = Overlaps(self.thread, a_start, a_end, blocking)
        self.any_blocking = Overlaps(None, a_start, a_end, blocking)
        self.d_stream, self.d_launch = np.asarray(d_stream, np.int64), np.asarray(d_launch, np.int64)
        self.a_start = np.asarray(a_start, np.int64)
        linked = np.flatnonzero(self.d_launch >= 0)      # activity with a known launch, by stream
        order = np.lexsort((linked, self.d_stream[linked]))
        self.linked = linked[order]
        self.l_groups = _groups(self.d_stream[self.linked])
        waits = np.asarray(waits, dtype=np.int64)         # stream-wait calls, by thread and start
        order = np.lexsort((waits, self.a_start[waits], self.thread[waits])) if len(waits) else waits
        self.s_groups = _groups(self.thread[waits[order]])
        self.s_start = self.a_start[waits[order]]
        n = len(gpu_waits)
        self.gpu_waits = Overlaps(gpu_waits["stream"].to_numpy(), gpu_waits["start"].to_numpy(),
                                  gpu_waits["end"].to_numpy(), np.arange(n)) if n else \
            Overlaps(_NONE, _NONE, _NONE, _NONE)

    def attribute(self, gs: np.ndarray, ge: np.ndarray, d_start: np.ndarray, a_end: np.ndarray,
                  is_graph: np.ndarray) -> tuple[np.ndarray, ...]:
        """attribute_gaps over gaps [gs, ge): (causes n x CAUSES, next activity position,
        launch call, longest blocking call), -1 where there is none."""
        gs, ge = np.asarray(gs, np.int64), np.asarray(ge, np.int64)
        n = len(gs)
        causes = np.zeros((n, len(CAUSES)), np.int64)
        nxt_pos, launch, blocker = (np.full(n, -1, np.int64) for _ in range(3))
        w = self.gpu_waits
        LOOP(n, gs, ge, np.searchsorted(d_start, ge, side="left"), d_start, self.d_stream,
             self.d_launch, self.a_start, np.asarray(a_end, np.int64), self.thread, is_graph,
             *self.blocking.arrays(), *self.any_blocking.arrays()[3:],
             w.keys, w.first, w.stop, w.start, w.end, w.cummax, *self.l_groups, self.linked,
             *self.s_groups, self.s_start, causes, nxt_pos, launch, blocker)
        return causes, nxt_pos, launch, blocker

    def wait_arrays(self) -> tuple[np.ndarray, ...]:
        """_waited's arguments after (p, li, t0, t1)."""
        w = self.gpu_waits
        return (self.d_stream, self.d_launch, self.a_start, self.thread, w.keys, w.first, w.stop,
                w.start, w.end, w.cummax, *self.l_groups, self.linked, *self.s_groups, self.s_start)

    def waited(self, p: int, li: int, t0: int, t1: int) -> bool:
        return bool(_waited(p, li, t0, t1, *self.wait_arrays()))

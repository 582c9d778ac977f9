"""Per-gap lookups of timeline.gaps.attribute by binary search instead of a pass over a table,
for every gap at once.

Each gap used to build boolean masks over every API call (the blocking calls of the launching thread, the stream waits of that thread)
and over every earlier GPU activity (the last linked one on the same stream): on the 287 MB
reference trace, 60,000 gaps x 250,000 calls, 95% of lint's time. The same rows come from
tables grouped by key (thread, stream) and sorted by start once, so each gap costs a few
binary searches. Results are the same rows as the masks gave.

The gaps are independent of each other, so all of them are answered together: the binary
searches run as one numpy search per group of rows (bisect_each), and the sums over a gap's
candidate rows run over the rows of all gaps laid end to end. The loop over gaps this replaced
(plain Python, or compiled by numba from 100,000 gaps) is the oracle of the tests
(tests/gap_oracle.py). The 287 MB reference's 60,585 gaps: 0.04 s against 0.48-0.57 s as that
loop; 199,118 gaps of 3 M nsys kernels: 0.37 s against 2.8 s plain and 0.36 s compiled (numba's
import included).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .codes import compact_row_codes, in_order
from .schema import take_rows

_NONE = np.zeros(0, dtype=np.int64)
CAUSES = ("late", "launch_call", "blocked", "event_wait", "graph", "queued", "no_launch", "unlinked")
(LATE, LAUNCH_CALL, BLOCKED, EVENT_WAIT, GRAPH, QUEUED, NO_LAUNCH, UNLINKED) = range(len(CAUSES))
#: Candidate rows expanded at once by the overlap sums (bounds the temporaries: a gap after a
#: long call on a busy thread can have many rows to look at).
EXPAND_CHUNK = 1 << 22


def _one(v: int) -> np.ndarray:
    """One query as the arrays the searches below take."""
    return np.array([v], np.int64)


def bisect_each(a: np.ndarray, x: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                right: bool = False) -> np.ndarray:
    """bisect.bisect_left (or _right) of x[q] in a[lo[q]:hi[q]] for every query q at once:
    one numpy search per distinct range. The ranges are a grouped table's groups (a thread's
    or a stream's rows), so there are few of them however many the gaps are."""
    lo, hi, x = np.asarray(lo, np.int64), np.asarray(hi, np.int64), np.asarray(x)
    out = lo.copy()
    if len(lo) == 0:
        return out
    order = np.lexsort((hi, lo))
    lo_s, hi_s = lo[order], hi[order]
    cut = np.flatnonzero(np.r_[True, (lo_s[1:] != lo_s[:-1]) | (hi_s[1:] != hi_s[:-1]), True])
    side = "right" if right else "left"
    for s, e in zip(cut[:-1].tolist(), cut[1:].tolist()):
        a0, b0 = int(lo_s[s]), int(hi_s[s])
        if a0 < b0:
            q = order[s:e]
            out[q] = a0 + np.searchsorted(a[a0:b0], x[q], side=side)
    return out


def _spans(keys: np.ndarray, first: np.ndarray, stop: np.ndarray, key: np.ndarray):
    """[first, stop) of each key's rows in a table grouped by key ((0, 0): none)."""
    key = np.asarray(key)
    if len(keys) == 0:
        return np.zeros(len(key), np.int64), np.zeros(len(key), np.int64)
    k = np.minimum(np.searchsorted(keys, key), len(keys) - 1)
    hit = keys[k] == key
    return np.where(hit, first[k], 0), np.where(hit, stop[k], 0)


def _candidates(keys, first, stop, start, cummax, key, lo, hi):
    """[i, j) per query: the rows of its key that may overlap [lo, hi) (start < hi, running end
    > lo); the ones among them with end > lo do."""
    a, b = _spans(keys, first, stop, key)
    return bisect_each(cummax, lo, a, b, right=True), bisect_each(start, hi, a, b)


def _expanded(i: np.ndarray, j: np.ndarray):
    """(query, row) of every row in [i[q], j[q]), queries in order, in chunks of about
    EXPAND_CHUNK rows."""
    n = np.maximum(j - i, 0)
    ends = np.cumsum(n)
    q0 = 0
    while q0 < len(n):
        done = int(ends[q0 - 1]) if q0 else 0          # rows laid out before query q0
        q1 = min(max(int(np.searchsorted(ends, done + EXPAND_CHUNK, side="right")), q0 + 1), len(n))
        cnt = n[q0:q1]
        query = np.repeat(np.arange(q0, q1), cnt)
        first = np.cumsum(cnt) - cnt
        row = i[query] + (np.arange(len(query)) - np.repeat(first, cnt))
        yield query, row
        q0 = q1


def covered_each(start, end, i, j, lo, hi) -> np.ndarray:
    """ns of [lo[q], hi[q]) inside the union of rows [i[q], j[q]) with end > lo[q], per query
    (rows sorted by start): each row adds what it reaches past the rows before it."""
    out = np.zeros(len(lo), np.int64)
    for q, k in _expanded(i, j):
        ok = end[k] > lo[q]
        q, k = q[ok], k[ok]
        s = np.maximum(start[k], lo[q])
        e = np.minimum(np.maximum(end[k], s), hi[q])
        ok = e > s
        q, s, e = q[ok], s[ok], e[ok]
        if not len(q):
            continue
        reach = pd.Series(e).groupby(q, sort=False).cummax().to_numpy()
        before = np.r_[np.int64(0), reach[:-1]]
        first = np.r_[True, q[1:] != q[:-1]]
        before[first] = lo[q[first]]
        np.add.at(out, q, np.maximum(e - np.maximum(s, before), 0))
    return out


def longest_each(rows, start, end, i, j, lo, hi) -> np.ndarray:
    """Per query: the row among [i, j) with end > lo that overlaps [lo, hi) most (ties: the
    lowest row), or -1."""
    out = np.full(len(lo), -1, np.int64)
    for q, k in _expanded(i, j):
        ok = end[k] > lo[q]
        q, k = q[ok], k[ok]
        if not len(q):
            continue
        ov = np.minimum(end[k], hi[q]) - np.maximum(start[k], lo[q])
        best = np.lexsort((rows[k], -ov, q))
        first = best[np.r_[True, q[best][1:] != q[best][:-1]]]
        out[q[first]] = rows[k[first]]
    return out


def waited_each(p, li, t0, t1, d_stream, d_launch, a_start, a_thread, w_keys, w_first, w_stop,
                w_start, w_end, w_cummax, l_keys, l_first, l_stop, linked, s_keys, s_first,
                s_stop, s_start) -> np.ndarray:
    """Per (activity p, its launch call li, window [t0, t1]): did p's stream wait on another
    stream's event before running it? (a GPU stream wait on that stream within [t0, t1], or a
    stream-wait call of the launching thread since the previous linked launch on that
    stream). The first row a window's running end passes has its own end there, so "any
    wait overlaps" is "some row is left between the two searches"."""
    stream = d_stream[p]
    i, j = _candidates(w_keys, w_first, w_stop, w_start, w_cummax, stream, t0 - 1, t1 + 1)
    out = i < j
    if len(s_start) == 0:
        return out
    a, b = _spans(l_keys, l_first, l_stop, stream)
    k = bisect_each(linked, p, a, b) - 1              # the stream's previous linked activity
    prev = np.full(len(k), -1, np.int64)              # its launch call's start, -1 when none
    has = k >= a
    prev[has] = a_start[d_launch[linked[k[has]]]]
    a, b = _spans(s_keys, s_first, s_stop, a_thread[li])
    return out | (bisect_each(s_start, a_start[li], a, b, right=True) > bisect_each(s_start, prev, a, b))


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
        k = np.zeros(1, np.int64) if key is None else take_rows(np.asarray(key), rows)
        if key is None or (k.strides == (0,) and len(k)):   # one key: stored once
            k = np.broadcast_to(k[:1].astype(np.int64), len(rows))
        k = k.astype(np.int64, copy=False)
        s = np.asarray(start)[rows].astype(np.int64, copy=False)
        if in_order(k, s, rows):      # API calls of one thread, by start: nothing to sort
            self.rows, self.start = rows, s
        else:
            order = np.lexsort((rows, s, k))
            self.rows, self.start = rows[order], s[order]
            k = k[order]
            del order
        del s
        self.end = np.asarray(end)[self.rows].astype(np.int64, copy=False)
        self.cummax = self.end.copy()
        self.keys, self.first, self.stop = _groups(k)
        del k
        for a, b in zip(self.first.tolist(), self.stop.tolist()):
            self.cummax[a:b] = np.maximum.accumulate(self.cummax[a:b])

    def one_group(self) -> "Overlaps":
        """These rows as one group (key None), sharing their arrays: rows of one key are in
        the order one group sorts them in (by start, then row)."""
        assert len(self.keys) <= 1
        g = object.__new__(Overlaps)
        g.__dict__.update(self.__dict__)
        g.keys = np.zeros(len(self.keys), np.int64)
        return g

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.keys, self.first, self.stop, self.rows, self.start, self.end, self.cummax

    def find(self, key: int, lo: int, hi: int) -> np.ndarray:
        """Rows of `key` with start < hi and end > lo, ascending."""
        i, j = (int(v[0]) for v in _candidates(self.keys, self.first, self.stop, self.start,
                                               self.cummax, _one(key), _one(lo), _one(hi)))
        return np.sort(self.rows[i:j][self.end[i:j] > lo]) if i < j else _NONE


class GapIndex:
    """What attribute() asks per gap, over one device's activity and the API calls, as sorted,
    grouped arrays that every gap searches at once."""

    def __init__(self, d_stream, d_launch, a_start, a_end, a_pid, a_tid, block_mask, waits,
                 gpu_waits):
        # int32, one value stored once for one thread: a code per API call lives as long as
        # the index (23 M calls: 184 MB as int64)
        self.thread = compact_row_codes(a_pid, a_tid) if len(a_pid) else _NONE
        blocking = np.flatnonzero(block_mask)
        self.blocking = Overlaps(self.thread, a_start, a_end, blocking)
        self.any_blocking = self.blocking.one_group() if len(self.blocking.keys) <= 1 else \
            Overlaps(None, a_start, a_end, blocking)
        self.d_stream, self.d_launch = np.asarray(d_stream, np.int64), np.asarray(d_launch, np.int64)
        self.a_start = np.asarray(a_start, np.int64)
        linked = np.flatnonzero(self.d_launch >= 0)      # activity with a known launch, by stream
        stream = take_rows(self.d_stream, linked)
        self.linked = linked if in_order(stream, linked) else \
            linked[np.lexsort((linked, stream))]
        del stream
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
        """Per gap [gs, ge): (causes n x CAUSES in ns, the next activity's position, its launch
        call, the longest blocking call), -1 where there is none. Every gap at once:

        - no activity starts at the gap's end: all of it is no_launch (blocker: the longest
          blocking call of any thread in it);
        - the activity that ends it has no launch call: unlinked;
        - else, up to the launch call's start: blocked (the launching thread's blocking calls
          cover it) or late (they do not); then the launch call itself (launch_call); then
          queued, or event_wait when the stream waited on another stream's event, or graph for
          a graph launch.
        """
        gs, ge = np.asarray(gs, np.int64), np.asarray(ge, np.int64)
        n, nd = len(gs), len(d_start)
        causes = np.zeros((n, len(CAUSES)), np.int64)
        nxt_pos, launch, blocker = (np.full(n, -1, np.int64) for _ in range(3))
        pos = np.searchsorted(d_start, ge, side="left")
        ends_gap = pos < nd
        ends_gap[ends_gap] = d_start[pos[ends_gap]] <= ge[ends_gap]
        g = np.flatnonzero(~ends_gap)
        causes[g, NO_LAUNCH] = ge[g] - gs[g]
        b = self.any_blocking
        blocker[g] = longest_each(b.rows, b.start, b.end, np.searchsorted(b.cummax, gs[g], side="right"),
                                  np.searchsorted(b.start, ge[g], side="left"), gs[g], ge[g])
        g = np.flatnonzero(ends_gap)
        nxt_pos[g] = pos[g]
        li = self.d_launch[pos[g]]
        causes[g[li < 0], UNLINKED] = ge[g[li < 0]] - gs[g[li < 0]]
        g, li = g[li >= 0], li[li >= 0]
        launch[g] = li
        lo, hi = gs[g], ge[g]
        t_launch = self.a_start[li]                  # within [lo, hi], lo first if inverted
        t_launch = np.where(t_launch < lo, lo, np.minimum(t_launch, hi))
        b = self.blocking
        i, j = _candidates(b.keys, b.first, b.stop, b.start, b.cummax, self.thread[li], lo, t_launch)
        blocked = covered_each(b.start, b.end, i, j, lo, t_launch)
        causes[g, BLOCKED] = blocked
        causes[g, LATE] = t_launch - lo - blocked
        blocker[g] = longest_each(b.rows, b.start, b.end, i, j, lo, t_launch)
        t_ret = np.asarray(a_end, np.int64)[li]      # within [t_launch, hi], the same way
        t_ret = np.where(t_ret < t_launch, t_launch, np.minimum(t_ret, hi))
        causes[g, LAUNCH_CALL] = t_ret - t_launch
        queued = hi - t_ret
        waits = queued > 0
        waits[waits] = waited_each(pos[g[waits]], li[waits], t_launch[waits], hi[waits],
                                   *self.wait_arrays())
        graph = ~waits & np.asarray(is_graph, bool)[li]
        causes[g, np.where(waits, EVENT_WAIT, np.where(graph, GRAPH, QUEUED))] = queued
        return causes, nxt_pos, launch, blocker

    def wait_arrays(self) -> tuple[np.ndarray, ...]:
        """waited_each's arguments after (p, li, t0, t1)."""
        w = self.gpu_waits
        return (self.d_stream, self.d_launch, self.a_start, self.thread, w.keys, w.first, w.stop,
                w.start, w.end, w.cummax, *self.l_groups, self.linked, *self.s_groups, self.s_start)

    def waited(self, p: int, li: int, t0: int, t1: int) -> bool:
        return bool(waited_each(_one(p), _one(li), _one(t0), _one(t1), *self.wait_arrays())[0])

"""Per-gap lookups of timeline.gaps.attribute by binary search instead of a pass over a table.

attribute() walks the reported gaps one by one. Each step used to build boolean masks over
every API call (the blocking calls of the launching thread, the stream waits of that thread)
and over every earlier GPU activity (the last linked one on the same stream): on the 287 MB
reference trace, 60,000 gaps x 250,000 calls, 95% of lint's time. The same rows come from
tables grouped by key (thread, stream) and sorted by start once, so each gap costs a few
binary searches (bisect on memoryviews of the arrays: a numpy call per scalar search cost
more than the search). Results are the same rows, in row order, as the masks gave.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right

import numpy as np

from .codes import row_codes

_NONE = np.zeros(0, dtype=np.int64)


def _view(a: np.ndarray) -> memoryview:
    """What bisect searches: a memoryview of the int64 array (items index as Python ints, as
    fast as a list, without a boxed int per row: 8 bytes a row instead of about 40)."""
    return memoryview(np.ascontiguousarray(a, dtype=np.int64))


class Overlaps:
    """Rows grouped by an integer key, by start within a group, with the running maximum of
    their ends: the rows of one key that overlap [lo, hi) (start < hi and end > lo)."""

    def __init__(self, key: np.ndarray, start: np.ndarray, end: np.ndarray, rows: np.ndarray):
        rows = np.asarray(rows, dtype=np.int64)
        k, s = np.asarray(key, np.int64)[rows], np.asarray(start, np.int64)[rows]
        order = np.lexsort((rows, s, k))
        self.rows, self.key, self.start = rows[order], k[order], s[order]
        self.end = np.asarray(end, np.int64)[self.rows]
        self.cummax = self.end.copy()
        bounds = np.flatnonzero(np.r_[True, self.key[1:] != self.key[:-1]]) if len(rows) else ()
        self.span: dict[int, tuple[int, int]] = {}     # key -> its rows [a, b)
        for a, b in zip(bounds, [*bounds[1:], len(rows)]):
            self.cummax[a:b] = np.maximum.accumulate(self.cummax[a:b])
            self.span[int(self.key[a])] = (int(a), int(b))
        self._start, self._cummax = _view(self.start), _view(self.cummax)

    def find(self, key: int, lo: int, hi: int) -> np.ndarray:
        """Rows of `key` with start < hi and end > lo, ascending."""
        a, b = self.span.get(key, (0, 0))
        j = bisect_left(self._start, hi, a, b)
        i = bisect_right(self._cummax, lo, a, b)
        if i >= j:
            return _NONE
        if j - i == 1:                 # most gaps: one candidate
            return self.rows[i:j] if self.end[i] > lo else _NONE
        return np.sort(self.rows[i:j][self.end[i:j] > lo])


class GapIndex:
    """What attribute() asks per gap, over one device's activity and the API calls."""

    def __init__(self, d_stream, d_launch, a_start, a_end, a_pid, a_tid, block_mask, waits,
                 gpu_waits):
        self.thread = row_codes(a_pid, a_tid)[0] if len(a_pid) else _NONE
        blocking = np.flatnonzero(block_mask)
        self.blocking = Overlaps(self.thread, a_start, a_end, blocking)
        self.any_blocking = Overlaps(np.zeros(len(a_start), np.int64), a_start, a_end, blocking)
        self.d_stream, self.d_launch, self.a_start = d_stream, d_launch, a_start
        linked = np.flatnonzero(d_launch >= 0)           # activity with a known launch, by stream
        order = np.lexsort((linked, d_stream[linked]))
        self.linked = linked[order]
        self.linked_span = _spans(d_stream[linked][order])
        self._linked = _view(self.linked)
        waits = np.asarray(waits, dtype=np.int64)         # stream-wait calls, by thread and start
        order = np.lexsort((waits, a_start[waits], self.thread[waits])) if len(waits) else waits
        self.waits = waits
        self.wait_span = _spans(self.thread[waits[order]])
        self._wait_start = _view(a_start[waits[order]])
        n = len(gpu_waits)
        self.gpu_waits = Overlaps(gpu_waits["stream"].to_numpy(), gpu_waits["start"].to_numpy(),
                                  gpu_waits["end"].to_numpy(), np.arange(n)) if n else None

    def blocking_on_thread(self, li: int, lo: int, hi: int) -> np.ndarray:
        """Blocking calls of the thread of call li overlapping [lo, hi)."""
        return self.blocking.find(int(self.thread[li]), lo, hi)

    def blocking_anywhere(self, lo: int, hi: int) -> np.ndarray:
        return self.any_blocking.find(0, lo, hi)

    def waited(self, p: int, li: int, t0: int, t1: int) -> bool:
        """Did the stream of activity p wait on another stream's event before running it? (a
        GPU stream wait on that stream within [t0, t1], or a stream-wait call of the launching
        thread since the previous linked launch on that stream)"""
        stream = int(self.d_stream[p])
        if self.gpu_waits is not None and len(self.gpu_waits.find(stream, t0 - 1, t1 + 1)):
            return True
        if len(self.waits) == 0:
            return False
        a, b = self.linked_span.get(stream, (0, 0))
        k = bisect_left(self._linked, p, a, b) - 1
        lo = int(self.a_start[self.d_launch[self._linked[k]]]) if k >= a else -1
        a, b = self.wait_span.get(int(self.thread[li]), (0, 0))
        return bisect_right(self._wait_start, int(self.a_start[li]), a, b) > \
            bisect_left(self._wait_start, lo, a, b)


def _spans(keys: np.ndarray) -> dict[int, tuple[int, int]]:
    """Sorted keys -> {key: [first, end) positions}."""
    if len(keys) == 0:
        return {}
    bounds = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    ends = [*bounds[1:].tolist(), len(keys)]
    return {int(keys[a]): (int(a), e) for a, e in zip(bounds.tolist(), ends)}

"""Per-gap lookups of timeline.gaps.attribute by binary search instead of a pass over a table.

attribute() walks the reported gaps one by one. Each step used to build boolean masks over
every API call (the blocking calls of the launching thread, the stream waits of that thread)
and over every earlier GPU activity (the last linked one on the same stream): on the 287 MB
reference trace, 60,000 gaps x 250,000 calls, 95% of lint's time. The same rows come from
tables grouped by key (thread, stream) and sorted by start once, so each gap costs a few
binary searches. Results are the same rows, in row order, as the masks gave.
"""
from __future__ import annotations

import numpy as np

from .codes import row_codes

_NONE = np.zeros(0, dtype=np.int64)


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
        for a, b in zip(bounds, [*bounds[1:], len(rows)]):
            self.cummax[a:b] = np.maximum.accumulate(self.cummax[a:b])

    def find(self, key: int, lo: int, hi: int) -> np.ndarray:
        """Rows of `key` with start < hi and end > lo, ascending."""
        a = int(np.searchsorted(self.key, key, side="left"))
        b = int(np.searchsorted(self.key, key, side="right"))
        j = a + int(np.searchsorted(self.start[a:b], hi, side="left"))
        i = a + int(np.searchsorted(self.cummax[a:b], lo, side="right"))
        if i >= j:
            return _NONE
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
        self.linked, self.linked_stream = linked[order], d_stream[linked][order]
        waits = np.asarray(waits, dtype=np.int64)         # stream-wait calls, by thread and start
        order = np.lexsort((waits, a_start[waits], self.thread[waits])) if len(waits) else waits
        self.waits = waits
        self.wait_thread, self.wait_start = self.thread[waits[order]], a_start[waits[order]]
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
        a = int(np.searchsorted(self.linked_stream, stream, side="left"))
        b = int(np.searchsorted(self.linked_stream, stream, side="right"))
        k = a + int(np.searchsorted(self.linked[a:b], p, side="left")) - 1
        lo = self.a_start[self.d_launch[self.linked[k]]] if k >= a else -1
        t = int(self.thread[li])
        a = int(np.searchsorted(self.wait_thread, t, side="left"))
        b = int(np.searchsorted(self.wait_thread, t, side="right"))
        ws = self.wait_start[a:b]
        return bool(np.searchsorted(ws, self.a_start[li], side="right")
                    > np.searchsorted(ws, lo, side="left"))

"""An edit of host time by interval: the host's own work (the time between API calls) inside
given time intervals on one thread no longer happens. A rule that measured which host work
filled an idle window (timeline.hostidle) states its fix with it: that work moved off the
launching thread (DataLoader workers, logging outside the loop, compilation before the loop).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..timeline import intervals
from .graph import RunGraph
from .replay import Plan


@dataclass(frozen=True)
class RemoveHostTime:
    """Remove the host work inside [starts, ends) on the thread that made api_calls row
    `api_row`. Idempotent with other host-work edits: a gap becomes its traced length less the
    covered time, or stays shorter where another edit already shortened it more, so the same
    work removed by two findings is saved once when all fixes are replayed together."""

    api_row: int
    starts: tuple
    ends: tuple

    def apply(self, g: RunGraph, p: Plan) -> None:
        hit = np.flatnonzero(g.h_api_row == self.api_row)
        if len(hit) == 0 or not self.starts:
            p.notes.append(f"RemoveHostTime: API call row {self.api_row} is not in the graph")
            return
        t = g.h_thread[hit[0]]
        rs, re_ = intervals.merge(np.asarray(self.starts, np.int64), np.asarray(self.ends, np.int64))
        on = np.flatnonzero((g.h_prev >= 0) & ~g.h_inside & (g.h_thread == t))
        lo, hi = g.h_end_of(g.h_prev[on]), g.h_start[on]
        ok = hi > lo
        on, lo, hi = on[ok], lo[ok], hi[ok]
        cov = intervals.overlap_each(lo, hi, rs, re_)
        p.writable("h_gap")
        p.h_gap[on] = np.minimum(p.h_gap[on], np.maximum(g.h_gap[on] - cov, 0))

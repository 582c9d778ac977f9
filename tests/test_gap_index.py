"""gap_index answers per gap what the masks over whole tables answered: the same rows in the
same order (brute force over random intervals, keys that collide and nest)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelint.timeline.gap_index import GapIndex, Overlaps


def test_overlaps_equal_brute_force():
    rng = np.random.default_rng(7)
    n = 3000
    key = rng.integers(0, 5, n)
    start = rng.integers(0, 10_000, n)
    end = start + rng.integers(0, 800, n)          # nested, overlapping and empty intervals
    rows = np.flatnonzero(rng.random(n) < 0.7)
    ov = Overlaps(key, start, end, rows)
    mask = np.zeros(n, bool)
    mask[rows] = True
    for _ in range(500):
        k, lo = int(rng.integers(0, 6)), int(rng.integers(-100, 10_500))
        hi = lo + int(rng.integers(0, 2000))
        want = np.flatnonzero(mask & (key == k) & (start < hi) & (end > lo))
        assert np.array_equal(ov.find(k, lo, hi), want)


def test_waited_equals_the_masks():
    """GapIndex.waited against the per-gap masks it replaced (written out here)."""
    rng = np.random.default_rng(3)
    na, nd = 400, 300
    a_start = np.sort(rng.integers(0, 100_000, na))
    a_end = a_start + rng.integers(1, 500, na)
    a_pid, a_tid = rng.integers(1, 3, na), rng.integers(10, 13, na)
    d_stream = rng.integers(7, 10, nd)
    d_launch = np.where(rng.random(nd) < 0.8, rng.integers(0, na, nd), -1)
    waits = np.flatnonzero(rng.random(na) < 0.1)
    gs_ = np.sort(rng.integers(0, 100_000, 40))
    gpu_waits = pd.DataFrame({"stream": rng.integers(7, 10, 40), "start": gs_,
                              "end": gs_ + rng.integers(0, 300, 40)})
    index = GapIndex(d_stream, d_launch, a_start, a_end, a_pid, a_tid, rng.random(na) < 0.5,
                     waits, gpu_waits)

    def brute(p, li, t0, t1):
        stream = d_stream[p]
        g = gpu_waits[(gpu_waits["stream"] == stream) & (gpu_waits["end"] >= t0)
                      & (gpu_waits["start"] <= t1)]
        if len(g):
            return True
        same = np.flatnonzero((d_stream[:p] == stream) & (d_launch[:p] >= 0))
        lo = a_start[d_launch[same[-1]]] if len(same) else -1
        w = waits[(a_pid[waits] == a_pid[li]) & (a_tid[waits] == a_tid[li])]
        return bool(((a_start[w] >= lo) & (a_start[w] <= a_start[li])).any())

    seen = set()
    for _ in range(600):
        p, li = int(rng.integers(0, nd)), int(rng.integers(0, na))
        t0 = int(rng.integers(0, 100_000))
        t1 = t0 + int(rng.integers(0, 3000))
        got = index.waited(p, li, t0, t1)
        assert got == brute(p, li, t0, t1)
        seen.add(got)
    assert seen == {True, False}

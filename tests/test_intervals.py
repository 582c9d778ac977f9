"""Sorted searches against the plain scans they replaced: quadratic loops over every query and
row, found by bench/bench_lint_scaling.py (TL009 took 10 s and TL030 2 s on a 2 GB trace)."""
from __future__ import annotations

import numpy as np
import pytest

from tracelint.timeline.intervals import best_enclosing


def _scan(q_group, q_t, group, start, end, rank):
    out = []
    for g, t in zip(q_group, q_t):
        hit = np.flatnonzero((group == g) & (start <= t) & (end >= t))
        hit = hit[np.argsort(-rank[hit], kind="stable")]
        out.append(int(hit[0]) if len(hit) else -1)
    return np.array(out, dtype=np.int64)


@pytest.mark.parametrize("seed", range(40))
def test_best_enclosing_equals_the_scan(seed):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(0, 60)), int(rng.integers(0, 80))
    group = rng.integers(0, 4, n)
    start = rng.integers(0, 200, n)
    end = start + rng.integers(0, 60, n)          # overlapping, not nested, zero-length too
    rank = rng.integers(0, 3, n)                  # ties: the lowest index wins
    q_group = rng.integers(0, 5, m)               # group 4 has no intervals
    q_t = rng.integers(-10, 270, m)
    q_t[: m // 4] = rng.choice(np.r_[start, end, 0], m // 4)   # exactly on a boundary
    got = best_enclosing(q_group, q_t, group, start, end, rank)
    assert got.tolist() == _scan(q_group, q_t, group, start, end, rank).tolist()


def test_last_in_row_order_and_nested_depth():
    # one thread: an outer op and two inner ones; rank = depth picks the inner, rank = row the last
    start, end = np.array([0, 10, 10]), np.array([100, 20, 20])
    group = np.zeros(3, np.int64)
    assert best_enclosing([0, 0, 1], [15, 50, 15], group, start, end,
                          np.array([0, 1, 1])).tolist() == [1, 0, -1]
    assert best_enclosing([0], [15], group, start, end, np.arange(3)).tolist() == [2]


@pytest.mark.parametrize("seed", range(30))
def test_calls_inside_equals_the_scan(seed):
    import pandas as pd

    from tracelint.timeline.host_scope import calls_inside
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(0, 80)), int(rng.integers(0, 12))
    api = pd.DataFrame({"pid": rng.integers(0, 2, n), "tid": rng.integers(0, 3, n),
                        "start": rng.integers(0, 100, n)})
    pid, tid = rng.integers(0, 2, m), rng.integers(0, 3, m)
    start = rng.integers(0, 100, m)
    end = start + rng.integers(-5, 40, m)             # empty and inverted ranges too
    want = np.zeros(n, bool)
    for p, t, s, e in zip(pid, tid, start, end):
        want |= (api["pid"] == p).to_numpy() & (api["tid"] == t).to_numpy() \
            & (api["start"] >= s).to_numpy() & (api["start"] < e).to_numpy()
    assert calls_inside(api, pid, tid, start, end).tolist() == want.tolist()


@pytest.mark.parametrize("seed", range(30))
def test_calls_in_each_and_launches_equal_one_range_at_a_time(seed):
    """calls_in_each gives, range by range, the rows calls_inside marks for that range alone;
    Launches.by gives the GPU rows launched_from finds for those calls."""
    import pandas as pd

    from tracelint.timeline.host_scope import Launches, calls_in_each, calls_inside, launched_from
    rng = np.random.default_rng(seed)
    n, m, k = int(rng.integers(0, 80)), int(rng.integers(0, 12)), int(rng.integers(0, 60))
    api = pd.DataFrame({"pid": rng.integers(0, 2, n), "tid": rng.integers(0, 3, n),
                        "start": rng.integers(0, 100, n)})
    pid, tid = rng.integers(0, 2, m), rng.integers(0, 3, m)
    start = rng.integers(0, 100, m)
    end = start + rng.integers(-5, 40, m)             # empty and inverted ranges too
    launch = rng.integers(-1, max(n, 1), k) if n else np.full(k, -1)   # several per call, unlinked
    each = calls_in_each(api, pid, tid, start, end)
    launches = Launches(launch)
    assert len(each) == m
    for j in range(m):
        mask = calls_inside(api, pid[j:j + 1], tid[j:j + 1], start[j:j + 1], end[j:j + 1])
        assert each[j].tolist() == np.flatnonzero(mask).tolist()
        assert launches.by(each[j]).tolist() == launched_from(launch, mask).tolist()


@pytest.mark.parametrize("seed", range(30))
def test_gap_covered_equals_merge_and_overlap(seed):
    from tracelint.timeline.gap_index import covered_each
    from tracelint.timeline.intervals import merge, overlap_each
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 8))
    s = rng.integers(0, 100, n)
    e = s + rng.integers(-3, 30, n)                   # inverted and touching calls too
    lo = int(rng.integers(0, 80))
    hi = lo + int(rng.integers(0, 40))
    bs, be = merge(s, e)
    want = int(overlap_each(np.array([lo]), np.array([hi]), bs, be)[0]) if len(bs) else 0
    order = np.argsort(s, kind="stable")              # the gap index's rows: sorted by start
    got = covered_each(s[order], e[order], *(np.array([v], np.int64) for v in (0, n, lo, hi)))
    assert got[0] == want


@pytest.mark.parametrize("seed", range(20))
def test_overlaps_any_is_a_positive_overlap(seed):
    """overlaps_any equals overlap_each(...) > 0: queries that touch a busy interval's edge,
    lie inside one, span several, have no length or end before they start; busy intervals
    of no length."""
    from tracelint.timeline.intervals import merge, overlap_each, overlaps_any
    rng = np.random.default_rng(seed)
    for _ in range(200):
        n, m = int(rng.integers(0, 40)), int(rng.integers(0, 40))
        bs = rng.integers(0, 200, m)
        bs, be = merge(bs, bs + rng.integers(0, 12, m))
        qs = rng.integers(-5, 210, n)
        qe = qs + rng.integers(-3, 15, n)
        assert overlaps_any(qs, qe, bs, be).tolist() == (overlap_each(qs, qe, bs, be) > 0).tolist()


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_nearest_on_thread_equals_the_scan(threads, seed):
    """The first item on the query's thread at or after its time (or the last at or before),
    as a scan finds it: items of one thread by time (taken as they are, unsorted), and of
    several threads interleaved (sorted first)."""
    from tracelint.timeline.host_scope import nearest_on_thread
    rng = np.random.default_rng(seed)
    n, m = 400, 300
    lthr = rng.integers(0, threads, n)
    lt = np.sort(rng.integers(0, 5_000, n))          # by time; interleaved threads: unsorted keys
    cthr, ct = rng.integers(0, threads, m), rng.integers(-100, 5_100, m)
    for after in (True, False):
        got = nearest_on_thread(cthr, ct, lthr, lt, after)
        for q in range(m):
            on = [i for i in range(n) if lthr[i] == cthr[q] and (lt[i] >= ct[q] if after else lt[i] <= ct[q])]
            # ties on time: the first such item in the sorted order (stable), else the last
            want = (min(on, key=lambda i: (lt[i], i)) if after else max(on, key=lambda i: (lt[i], i))) if on else -1
            assert got[q] == want


@pytest.mark.parametrize("ordered", [True, False])
def test_merge_equals_the_union_by_a_scan(ordered):
    """The union of intervals as a scan over each ns builds it, whether the starts come in
    order (taken as they are) or not (sorted first); touching intervals merge."""
    from tracelint.timeline.intervals import merge
    rng = np.random.default_rng(3)
    start = rng.integers(0, 2_000, 300)
    start = np.sort(start) if ordered else start
    end = start + rng.integers(-5, 60, 300)          # empty and inverted ones too
    covered = np.zeros(2_100, bool)
    for s, e in zip(start, end):
        covered[s:max(e, s)] = True
    s, e = merge(start, end)
    edges = np.flatnonzero(np.diff(np.r_[0, covered.astype(np.int8), 0]))
    want_s, want_e = edges[0::2], edges[1::2]
    zero = sorted(set(start[end <= start]) - set(np.flatnonzero(covered)))   # lone points
    got = [(a, b) for a, b in zip(s, e) if b > a]
    assert got == list(zip(want_s, want_e))
    assert all(any(a <= z <= b for a, b in zip(s, e)) for z in zero)

"""gap_index answers per gap what the masks over whole tables answered: the same rows in the
same order (brute force over random intervals, keys that collide and nest); and all gaps at
once what the loop over gaps it replaced answered one at a time (tests/gap_oracle.py), on
every device of every real trace and on random timelines."""
from __future__ import annotations

import bisect
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ALL_TRACES, needs_shared

import tracelint
from tracelint.engine.context import Context
from tracelint.timeline import gap_index, gaps
from tracelint.timeline.codes import in_order
from tracelint.timeline.gap_index import CAUSES, GapIndex, Overlaps

sys.path.insert(0, str(Path(__file__).parent))
import gap_oracle  # noqa: E402


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


@pytest.mark.parametrize("keys", ["sorted", "one", "shuffled"])
def test_overlaps_of_rows_in_order_equal_the_sorted_ones(keys):
    """Rows already grouped by key and by start (one thread's API calls) are taken as they
    are, not sorted: the same groups, rows, starts and running maxima as after the lexsort
    (a key of one value given as a stride-0 column too)."""
    rng = np.random.default_rng(11)
    n = 5000
    start = np.sort(rng.integers(0, 50_000, n))
    key = {"sorted": np.sort(rng.integers(0, 4, n)), "one": np.broadcast_to(np.int32(3), n),
           "shuffled": rng.integers(0, 4, n)}[keys]
    end = start + rng.integers(0, 900, n)
    rows = np.flatnonzero(rng.random(n) < 0.6)
    assert in_order(np.asarray(key)[rows], start[rows], rows) == (keys != "shuffled")
    ov = Overlaps(key, start, end, rows)
    order = np.lexsort((rows, start[rows], np.asarray(key)[rows]))
    k = np.asarray(key)[rows][order]
    assert np.array_equal(ov.rows, rows[order]) and np.array_equal(ov.start, start[rows][order])
    first = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    assert np.array_equal(ov.keys, k[first]) and np.array_equal(ov.first, first)
    for a, b in zip(ov.first, ov.stop):
        assert np.array_equal(ov.cummax[a:b], np.maximum.accumulate(end[ov.rows[a:b]]))
    if keys == "one":      # one key: the same arrays as one group (key None), shared
        for a, b in zip(ov.one_group().arrays(), Overlaps(None, start, end, rows).arrays()):
            assert np.array_equal(a, b)
    assert in_order(np.array([1, 1, 2]), np.array([5, 4, 0]), np.arange(3)) is False
    assert in_order(np.array([1, 2, 2]), np.array([5, 4, 4]), np.array([0, 2, 1])) is False


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


def _oracle(index: GapIndex, gs, ge, d_start, a_end, is_graph):
    """The loop over gaps that GapIndex.attribute replaced, on the same index."""
    n = len(gs)
    causes = np.zeros((n, len(CAUSES)), np.int64)
    nxt_pos, launch, blocker = (np.full(n, -1, np.int64) for _ in range(3))
    w = index.gpu_waits
    args = [np.asarray(gs, np.int64), np.asarray(ge, np.int64),
            np.searchsorted(d_start, ge, side="left"), d_start, index.d_stream, index.d_launch,
            index.a_start, np.asarray(a_end, np.int64), index.thread, is_graph,
            *index.blocking.arrays(), *index.any_blocking.arrays()[3:],
            w.keys, w.first, w.stop, w.start, w.end, w.cummax, *index.l_groups, index.linked,
            *index.s_groups, index.s_start]
    gap_oracle.attribute_gaps(*[a.tolist() if isinstance(a, np.ndarray) else a for a in args],
                              causes, nxt_pos, launch, blocker)
    return causes, nxt_pos, launch, blocker


def _random_timeline(seed: int):
    """A device's activity on a few streams, each launched by a call a little before it (some
    activity unlinked), more API calls on a few threads (blocking calls, stream waits), GPU
    stream waits, and gaps: most ending where an activity starts, some anywhere."""
    rng = np.random.default_rng(seed)
    nd, extra = int(rng.integers(1, 200)), int(rng.integers(0, 200))
    d_start = np.sort(rng.integers(0, 50_000, nd))
    d_stream = rng.integers(7, 10, nd)
    launch_start = d_start - rng.integers(0, 3_000, nd)
    a_start = np.r_[launch_start, rng.integers(0, 50_000, extra)]
    order = np.argsort(a_start, kind="stable")
    a_start = a_start[order]
    na = len(a_start)
    a_end = a_start + rng.integers(0, 2_000, na)          # long calls cover many gaps
    a_pid, a_tid = rng.integers(1, 3, na), rng.integers(10, 13, na)
    call_of = np.empty(na, np.int64)
    call_of[order] = np.arange(na)
    d_launch = np.where(rng.random(nd) < 0.85, call_of[:nd], -1)
    waits = np.flatnonzero(rng.random(na) < 0.1)
    m = int(rng.integers(0, 30))
    ws = np.sort(rng.integers(0, 50_000, m))
    gpu_waits = pd.DataFrame({"stream": rng.integers(7, 10, m), "start": ws,
                              "end": ws + rng.integers(0, 400, m)})
    index = GapIndex(d_stream, d_launch, a_start, a_end, a_pid, a_tid, rng.random(na) < 0.4,
                     waits, gpu_waits)
    k = int(rng.integers(0, 120))
    ge = np.where(rng.random(k) < 0.8, d_start[rng.integers(0, nd, k)],
                  rng.integers(-100, 52_500, k))
    gs = ge - rng.integers(0, 4_000, k)
    return index, gs, ge, d_start, a_end, rng.random(na) < 0.2


@pytest.mark.parametrize("seed", range(60))
def test_attribute_equals_the_loop_on_random_timelines(seed):
    index, gs, ge, d_start, a_end, is_graph = _random_timeline(seed)
    got = index.attribute(gs, ge, d_start, a_end, is_graph)
    want = _oracle(index, gs, ge, d_start, a_end, is_graph)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_random_timelines_reach_every_cause():
    """The random timelines above are not all one case: every cause has ns somewhere, and
    some gaps have a blocking call."""
    total = np.zeros(len(CAUSES), np.int64)
    blockers = 0
    for seed in range(60):
        index, gs, ge, d_start, a_end, is_graph = _random_timeline(seed)
        causes, _, _, blocker = index.attribute(gs, ge, d_start, a_end, is_graph)
        total += causes.sum(axis=0)
        blockers += int((blocker >= 0).sum())
    assert (total > 0).all(), dict(zip(CAUSES, total.tolist()))
    assert blockers > 0


def test_expansion_in_chunks_gives_the_same_sums(monkeypatch):
    """Candidate rows laid out a few at a time (EXPAND_CHUNK) give what one layout gives."""
    index, gs, ge, d_start, a_end, is_graph = _random_timeline(5)
    whole = index.attribute(gs, ge, d_start, a_end, is_graph)
    monkeypatch.setattr(gap_index, "EXPAND_CHUNK", 3)
    for a, b in zip(whole, index.attribute(gs, ge, d_start, a_end, is_graph)):
        np.testing.assert_array_equal(a, b)


def test_bisect_each_equals_bisect():
    """On sorted runs with repeats, every bound and sub-range, both sides."""
    rng = np.random.default_rng(11)
    a = np.sort(rng.integers(0, 50, 200))
    x = rng.integers(-5, 55, 3000)
    lo = rng.integers(0, 201, 3000)
    hi = lo + (rng.random(3000) * (201 - lo)).astype(np.int64)
    for right, ref in ((False, bisect.bisect_left), (True, bisect.bisect_right)):
        want = [ref(a, int(v), int(a0), int(b0)) for v, a0, b0 in zip(x, lo, hi)]
        assert gap_index.bisect_each(a, x, lo, hi, right=right).tolist() == want


@needs_shared()
@pytest.mark.parametrize("path", ALL_TRACES, ids=lambda p: p.name[:40])
def test_attribute_equals_the_loop_on_real_traces(path):
    """TL001's per-gap causes (timeline.gaps.attribute's index) on every idle gap of every
    device, and the time after the last activity."""
    tl = tracelint.load(path)
    if not tl.has_gpu_activity:
        pytest.skip("no GPU activity")
    ctx = Context(tl)
    block = gaps.blocking_rows(ctx)
    seen = 0
    for device in tl.devices_in_use():
        bs, be = tl.busy_intervals(device)
        keep = bs[1:] > be[:-1]
        gs, ge = np.r_[be[:-1][keep], be[-1]], np.r_[bs[1:][keep], be[-1] + 10**9]
        captured = {}
        real = GapIndex.attribute

        def spy(self, *a, **k):
            captured["index"], captured["args"] = self, a
            return real(self, *a, **k)
        GapIndex.attribute = spy
        try:
            frame = gaps.attribute(ctx, device, gs, ge, block)
        finally:
            GapIndex.attribute = real
        got = real(captured["index"], *captured["args"])
        want = _oracle(captured["index"], *captured["args"])
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        assert frame[list(gaps.CAUSES)].to_numpy().sum() == (ge - gs).sum()
        seen += len(gs)
    assert seen


def test_attribute_without_calls_waits_or_gaps():
    """No API calls at all (every gap unlinked), calls but no blocking call or stream wait,
    and no gaps: the same answers as the loop, and arrays of the right length."""
    e = np.zeros(0, np.int64)
    no_waits = pd.DataFrame({"stream": e, "start": e, "end": e})
    d_start, d_stream = np.array([10, 20, 30]), np.array([1, 1, 2])
    a_start = np.array([5, 15, 25])
    cases = [
        (GapIndex(d_stream, np.full(3, -1), e, e, e, e, np.zeros(0, bool), e, no_waits), e),
        (GapIndex(d_stream, np.arange(3), a_start, a_start + 2, np.ones(3, int), np.ones(3, int),
                  np.zeros(3, bool), e, no_waits), a_start + 2),
    ]
    for index, a_end in cases:
        is_graph = np.zeros(len(a_end), bool)
        for gs, ge in ((np.array([0, 12, 22, 40]), np.array([10, 20, 30, 50])), (e, e)):
            got = index.attribute(gs, ge, d_start, a_end, is_graph)
            want = _oracle(index, gs, ge, d_start, a_end, is_graph)
            assert [len(g) for g in got] == [len(gs)] * 4
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
            assert got[0].sum() == (ge - gs).sum()


def test_inverted_windows_clip_as_the_loop_did():
    """A window that ends before it starts (no caller makes one today) gets the loop's answers:
    the launch time clipped to the window's start first."""
    index, gs, ge, d_start, a_end, is_graph = _random_timeline(8)
    gs, ge = ge + 50, ge        # every window inverted by 50 ns
    got = index.attribute(gs, ge, d_start, a_end, is_graph)
    want = _oracle(index, gs, ge, d_start, a_end, is_graph)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)

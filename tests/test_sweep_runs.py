"""The replay with a thread's runs of calls summed (sweep._runs) gives every node the times the
loop that visited each host item gave (tests/sweep_oracle.py): on random graphs with threads,
nesting, blocking calls, extra waits, cross-stream waits and collectives, under any order of
the host items, and on every real trace, its edited plans and a job of ranks."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ALL_TRACES, needs_shared

import tracelint
from tracelint.whatif import sweep as sweep_mod
from tracelint.whatif.edits import EditSet, RemoveSync, Scale
from tracelint.whatif.graph import build
from tracelint.whatif.replay import Plan, _order, replay

sys.path.insert(0, str(Path(__file__).parent))
import sweep_oracle  # noqa: E402


def _random_run(seed: int, steps: int = 600, threads: int = 3, streams: int = 3,
                collectives: bool = False):
    """A run made event by event, each depending only on events made before it (so the order
    made is a valid replay order): calls nested or one after another on a few threads, some
    blocking on an op (some on more ops), ops launched by calls, queued on streams and waiting
    for other streams, and groups of ops on distinct streams that end together."""
    rng = np.random.default_rng(seed)
    h_prev, h_inside, h_thread, h_tgt, g_launch, g_spred, g_xpred, g_stream = ([] for _ in range(8))
    extra, members, events = {}, [], []
    last_item = [-1] * threads
    last_op = [-1] * streams
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.55:
            t = int(rng.integers(threads))
            i = len(h_prev)
            prev = last_item[t] if rng.random() > 0.02 else -1        # a few re-anchored items
            h_prev.append(prev)
            h_inside.append(bool(prev >= 0 and rng.random() < 0.15))
            h_thread.append(t)
            blocks = bool(g_stream) and rng.random() < 0.08
            h_tgt.append(int(rng.integers(len(g_stream))) if blocks else -1)
            events.append(("h", i))
            if blocks:
                if rng.random() < 0.3:
                    extra[i] = [int(x) for x in rng.integers(0, len(g_stream), 2)]
                events.append(("e", i))
            last_item[t] = i
        elif collectives and roll < 0.6 and len(g_stream) >= streams:
            ops = []
            for s in rng.choice(streams, size=2, replace=False):
                ops.append(_op(rng, int(s), h_prev, g_launch, g_spred, g_xpred, g_stream, last_op,
                               events, cross=False))
            members.append(ops)
            events.append(("c", len(members) - 1))
        else:
            _op(rng, int(rng.integers(streams)), h_prev, g_launch, g_spred, g_xpred, g_stream,
                last_op, events, cross=True)
    nh, ng = len(h_prev), len(g_stream)
    base = {"h": 0, "e": nh, "g": 2 * nh, "c": 2 * nh + ng}
    order = np.array([base[k] + i for k, i in events], np.int64)

    def rnd(n, hi=10_000):
        return rng.integers(0, hi, n).astype(np.int64)
    host = (np.array(h_prev, np.int64), np.array(h_inside, bool), rnd(nh, 10**9),
            rnd(nh).astype(np.int32), rnd(nh).astype(np.int32), np.array(h_tgt, np.int64),
            rnd(nh))
    gpu = (np.array(g_launch, np.int64), rnd(ng), np.array(g_spred, np.int64), rnd(ng),
           np.array(g_xpred, np.int64), rnd(ng), rnd(ng), rnd(ng, 10**9))
    coll = ([np.array(m, np.int64) for m in members], [rnd(len(m)) for m in members])
    by_thread = np.argsort(np.array(h_thread), kind="stable")
    return order, host, gpu, extra, ng, coll, by_thread, np.array(g_stream, np.int64)


def _op(rng, s, h_prev, g_launch, g_spred, g_xpred, g_stream, last_op, events, cross):
    j = len(g_stream)
    g_launch.append(int(rng.integers(len(h_prev))) if h_prev and rng.random() < 0.9 else -1)
    g_spred.append(last_op[s])
    others = [k for k in range(len(g_stream)) if g_stream[k] != s]
    g_xpred.append(int(rng.choice(others)) if cross and others and rng.random() < 0.1 else -1)
    g_stream.append(s)
    last_op[s] = j
    events.append(("g", j))
    return j


def _same(a, b):
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("seed", range(12))
def test_runs_summed_equal_every_item_visited(seed, monkeypatch):
    order, host, gpu, extra, ng, coll, by_thread, streams = _random_run(
        seed, collectives=seed % 2 == 0)
    want = sweep_oracle.sweep(order, host, gpu, extra, ng, coll)
    nh = len(host[0])
    rng = np.random.default_rng(seed)
    # any order of the host items is correct; the thread order only makes longer runs
    for chains in (by_thread, None, rng.permutation(nh)):
        _same(sweep_mod.sweep(order, host, gpu, extra, ng, coll, chains=chains), want)
    runs = sweep_mod._runs(by_thread, *host[:2], *host[3:6])
    assert runs is not None and runs.looped.sum() < nh / 2     # most items follow their head
    # with runs whatever their share, and with none at all
    for share in (1.0, 0.0):
        monkeypatch.setattr(sweep_mod, "LOOPED_AT_MOST", share)
        _same(sweep_mod.sweep(order, host, gpu, extra, ng, coll, chains=rng.permutation(nh)),
              want)
    monkeypatch.setattr(sweep_mod, "LOOPED_AT_MOST", 0.5)
    # ranges of ops as arrays: by stream, and by lanes that are not streams (the loop then
    # replays the ranges whose links do not follow them)
    monkeypatch.setattr(sweep_mod, "OPS_AT_ONCE", 3)
    assert sweep_mod._op_ranges(order, nh, ng, gpu[4])
    for lanes in (streams, rng.integers(0, 3, ng), np.zeros(ng, np.int64)):
        _same(sweep_mod.sweep(order, host, gpu, extra, ng, coll, chains=by_thread,
                              lanes=lanes), want)
    monkeypatch.setattr(sweep_mod, "OPS_AT_MOST", 4)      # long ranges in pieces
    assert max(b - a for a, b in sweep_mod._op_ranges(order, nh, ng, gpu[4])) <= 4
    _same(sweep_mod.sweep(order, host, gpu, extra, ng, coll, chains=by_thread, lanes=streams),
          want)


def test_ops_in_a_range_are_one_running_maximum_per_stream():
    """Two streams, ops launched at known times: each starts at the later of its launch and
    its predecessor's end plus the queue gap, wherever the loop would have put it."""
    nh, ng = 1, 6
    order = np.concatenate([[0], 2 * nh + np.arange(ng)])
    lanes = np.array([0, 1, 0, 1, 0, 0])
    spred = np.array([-1, -1, 0, 1, 2, 4])
    lat = np.array([0, 5, 10, 15, 100, 20])
    qgap = np.array([0, 0, 2, 2, 2, 2])
    dur = np.array([30, 30, 30, 30, 30, 30])
    host = (np.array([-1]), np.zeros(1, bool), np.array([1000]), np.zeros(1, np.int64),
            np.array([1]), np.array([-1]), np.zeros(1, np.int64))
    gpu = (np.zeros(ng, np.int64), lat, spred, qgap, np.full(ng, -1), np.zeros(ng, np.int64),
           dur, np.zeros(ng, np.int64))
    _, _, gs, ge = sweep_mod.sweep(order, host, gpu, {}, ng, lanes=lanes)
    assert sweep_mod._op_ranges(order, nh, ng, gpu[4]) == []        # too short at 128
    want = sweep_oracle.sweep(order, host, gpu, {}, ng)
    _same((gs, ge), want[2:])
    # stream 0: 1000 -> 1030; 1032 (launch 1010) -> 1062; 1100 (launch) -> 1130; 1132
    assert gs.tolist() == [1000, 1005, 1032, 1037, 1100, 1132]
    out = np.zeros(ng, np.int64), np.zeros(ng, np.int64)
    marks = np.zeros(ng, bool)
    gpu_args = (np.zeros(ng, np.int64), lat, spred, qgap, np.full(ng, -1), np.zeros(ng, np.int64),
                dur, np.zeros(ng, np.int64))
    assert sweep_mod._ops_at_once(np.arange(ng), lanes, marks, np.array([1000]), *gpu_args, *out)
    _same(out, (gs, ge))
    assert not marks.any()                  # the mask is left as it was found


def test_ops_whose_stream_predecessor_sits_in_another_lane_are_left_to_the_loop():
    """An edit moved op 2 to lane 1 but kept op 0 as its stream predecessor: the running
    maximum of lane 1 would not see op 0's end, so the range is refused and nothing written;
    with op 0 outside the range it is final already and the range is accepted."""
    ng = 4
    lanes = np.array([0, 0, 1, 1])
    spred = np.array([-1, 0, 0, 2])
    gpu_args = (np.zeros(ng, np.int64), np.zeros(ng, np.int64), spred, np.zeros(ng, np.int64),
                np.full(ng, -1), np.zeros(ng, np.int64), np.full(ng, 10), np.zeros(ng, np.int64))
    out = np.zeros(ng, np.int64), np.zeros(ng, np.int64)
    marks = np.zeros(ng, bool)
    assert not sweep_mod._ops_at_once(np.arange(ng), lanes, marks, np.array([0]), *gpu_args, *out)
    assert not out[0].any() and not out[1].any() and not marks.any()
    out[1][0] = 10                          # op 0 replayed before the range: ends at 10
    assert sweep_mod._ops_at_once(np.arange(1, ng), lanes, marks, np.array([0]), *gpu_args, *out)
    assert out[0][2] == 10 and out[1][3] == 30 and not marks.any()


def test_a_thread_of_plain_calls_is_one_run():
    """Calls one after another, none blocking: only the first is visited; each starts at the
    one before's start plus its duration plus the gap."""
    n = 5
    prev = np.array([-1, 0, 1, 2, 3])
    gap, dur = np.array([0, 1, 2, 3, 4]), np.array([10, 20, 30, 40, 50])
    runs = sweep_mod._runs(np.arange(n), prev, np.zeros(n, bool), gap, dur, np.full(n, -1))
    assert runs.looped.tolist() == [True, False, False, False, False]
    assert runs.head.tolist() == [0, 0, 0, 0, 0]
    assert runs.off.tolist() == [0, 11, 33, 66, 110]
    hs, he, _, _ = sweep_mod.sweep(np.arange(n), (prev, np.zeros(n, bool), np.array([100, 0, 0, 0, 0]),
                                                  gap, dur, np.full(n, -1), np.zeros(n)),
                                   (np.zeros(0, np.int64),) * 8, {}, 0, chains=np.arange(n))
    assert hs.tolist() == [100, 111, 133, 166, 210]
    assert (he - hs).tolist() == dur.tolist()


def test_a_blocking_call_and_a_nested_call_start_new_runs(monkeypatch):
    # 0 -> 1 (blocking on op 0) -> 2 after 1's end; 3 nested inside 2; 4 after 3
    prev = np.array([-1, 0, 1, 2, 3])
    inside = np.array([False, False, False, True, False])
    tgt = np.array([-1, 0, -1, -1, -1])
    args = (np.arange(5), prev, inside, np.ones(5, np.int64), np.full(5, 10), tgt)
    # four of five items would still be visited: not worth the passes
    assert sweep_mod._runs(*args) is None
    monkeypatch.setattr(sweep_mod, "LOOPED_AT_MOST", 1.0)
    runs = sweep_mod._runs(*args)
    assert runs.looped.tolist() == [True, True, True, True, False]
    assert runs.head.tolist() == [0, 0, 2, 3, 3]
    assert runs.off.tolist() == [0, 11, 0, 0, 11]


def test_ops_without_host_items():
    """A trace of kernels with no API calls: no runs to sum, the ops replay on their own."""
    ng = 200
    gpu = (np.full(ng, -1), np.zeros(ng, np.int64), np.arange(-1, ng - 1), np.full(ng, 3),
           np.full(ng, -1), np.zeros(ng, np.int64), np.full(ng, 10), 1000 + 20 * np.arange(ng))
    order = np.arange(ng)
    e = np.zeros(0, np.int64)
    _, _, gs, ge = sweep_mod.sweep(order, (e, np.zeros(0, bool), e, e, e, e, e), gpu, {}, ng,
                                   chains=e, lanes=np.zeros(ng, np.int64))
    _same((gs, ge), sweep_oracle.sweep(order, (e, np.zeros(0, bool), e, e, e, e, e), gpu, {}, ng)[2:])
    assert gs[1] == 1020 and ge[-1] == 1000 + 20 * (ng - 1) + 10


@needs_shared()
@pytest.mark.parametrize("path", ALL_TRACES, ids=lambda p: p.name)
def test_real_traces_replay_as_before(path):
    tl = tracelint.load(path)
    if not len(tl.kernels):
        pytest.skip("no GPU activity")
    g = build(tl)
    # as traced; every sync removed (runs join up); every call and op half as long
    plans = [Plan.of(g), EditSet([RemoveSync()]).plan(g), EditSet([Scale(".", 0.5)]).plan(g)]
    for p in plans:
        free = (p.g_launch < 0) & (p.g_spred < 0) & (p.g_xpred < 0)
        g_floor = np.where(free, g.g_start, -(1 << 62)).astype(np.int64)
        want = sweep_oracle.sweep(_order(g, p), (g.h_prev, g.h_inside, g.h_start, p.h_gap,
                                                 p.h_dur, p.h_target, p.h_ret),
                                  (p.g_launch, p.g_lat, p.g_spred, p.g_qgap, p.g_xpred,
                                   p.g_xgap, p.g_dur, g_floor), p.h_extra, g.n_gpu)
        r = replay(g, p)
        _same((r.h_start, r.h_end, r.g_start, r.g_end), want)


@needs_shared()
def test_a_job_of_real_ranks_replays_as_before(tmp_path, monkeypatch):
    """The 4-rank job made from a real NCCL rank (21 matched collectives, a straggler, clock
    offsets): the ranks replayed together give every node the oracle's times, with and
    without the straggler's fix."""
    from conftest import TRACES

    from tracelint.ranks.job import lint_job
    from tracelint.ranks.job_whatif import JobWhatIf
    from tracelint.ranks.synth import RawTrace, make_job
    from tracelint.whatif import job as job_mod
    raw = RawTrace.load(TRACES / "torch" / "hta_nccl_a100_rank0of2.json.gz")
    make_job(raw, tmp_path, ranks=4, straggler=1, delay_us=3000.0, exposed=2,
             clock_offsets_us=[0.0, 1700.0, -900.0, 400.0])
    rep = lint_job([str(tmp_path)], jobs=0)
    jg = JobWhatIf.from_members(rep.ranks, rep.context).jg
    assert jg.groups
    runs = {}
    for name, fn in (("now", sweep_mod.sweep),
                     ("oracle", lambda *a, chains=None, lanes=None: sweep_oracle.sweep(*a))):
        monkeypatch.setattr(job_mod, "sweep", fn)
        plans = [Plan.of(g) for g in jg.graphs]
        plans[1] = EditSet([Scale(".", 0.5)]).plan(jg.graphs[1])
        runs[name] = [jg.run(), jg.run(plans)]
    for a, b in zip(runs["now"], runs["oracle"]):
        for x, y in zip(a.ranks, b.ranks):
            _same((x.h_start, x.h_end, x.g_start, x.g_end), (y.h_start, y.h_end, y.g_start, y.g_end))

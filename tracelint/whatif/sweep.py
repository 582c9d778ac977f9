"""The replay's one sequential pass: every event in dependency order, each node's time from the
nodes it depends on. Shared by the single-run replay (replay.py) and the job replay (job.py),
so the two models cannot drift apart.

Events: a host item's start (ev < nh), a blocking call's end (< 2 nh), a GPU op (< 2 nh + ng)
and, in a job replay, a matched collective call whose members end together after the last
arrival (whatif/job.py). The loop is written once, in the subset numba compiles: a big replay
runs compiled (tracelint.jit), a small one as plain Python over memoryviews.

As plain Python the loop visits only the events that need it: a run of calls made one after
another on a thread is a cumulative sum from its first call (_runs), and a long range of GPU
ops with no other event between them one running maximum per stream (_ops_at_once).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..jit import Loop

#: Events from which a replay runs compiled when numba is installed: below this the plain loop
#: (about 0.25 µs an event) costs less than loading the compiled one.
COMPILE_FROM = 1_000_000
#: The runs of calls (_runs) are used when the loop then visits at most this share of the host
#: items (not with a sync after every launch, where nearly every item heads its own run).
LOOPED_AT_MOST = 0.5
#: Consecutive GPU ops in the event order from which the plain loop replays them as arrays
#: (_ops_at_once): about 100 numpy calls of fixed cost against about 1 µs an op in the loop.
OPS_AT_ONCE = 128
#: and at most this many ops at once (a longer range is replayed in pieces)
OPS_AT_MOST = 1 << 16


def _pass(order, h_prev, h_inside, h_anchor, h_gap, h_dur, h_tgt, h_ret, x_host, x_ptr, x_gpu,
          g_launch, g_lat, g_spred, g_qgap, g_xpred, g_xgap, g_dur, g_floor,
          c_ptr, c_gpu, c_after, hs, he, gs, ge):
    """Fill hs, gs, ge and the ends of blocking calls in he, in place (the end of a call that
    does not block is its start plus its duration, made after the loop).
    x_*: a blocking call's extra GPU ops it waits for (host indices sorted, CSR); c_*: each
    collective's member ops and their transfer times (CSR)."""
    nh = len(hs)
    n2 = 2 * nh
    n3 = n2 + len(gs)
    nx = len(x_host)
    for ev in order:
        if ev < nh:
            q = h_prev[ev]
            if q < 0:
                s = h_anchor[ev]
            elif h_inside[ev]:
                s = hs[q] + h_gap[ev]
            elif h_tgt[q] >= 0:
                s = he[q] + h_gap[ev]
            else:
                s = hs[q] + h_dur[q] + h_gap[ev]
            hs[ev] = s
        elif ev < n2:
            i = ev - nh
            r = h_ret[i]
            e = ge[h_tgt[i]] + r
            if nx:
                lo, hi = 0, nx
                while lo < hi:          # binary search: the few calls with extra waits
                    mid = (lo + hi) // 2
                    if x_host[mid] < i:
                        lo = mid + 1
                    else:
                        hi = mid
                if lo < nx and x_host[lo] == i:
                    for k in range(x_ptr[lo], x_ptr[lo + 1]):
                        if ge[x_gpu[k]] + r > e:
                            e = ge[x_gpu[k]] + r
            s = hs[i] + r
            he[i] = e if e > s else s
        elif ev < n3:
            j = ev - n2
            q = g_launch[j]
            s = hs[q] + g_lat[j] if q >= 0 else g_floor[j]
            q = g_spred[j]
            if q >= 0 and ge[q] + g_qgap[j] > s:
                s = ge[q] + g_qgap[j]
            q = g_xpred[j]
            if q >= 0 and ge[q] + g_xgap[j] > s:
                s = ge[q] + g_xgap[j]
            gs[j] = s
            ge[j] = s + g_dur[j]
        else:
            c = ev - n3
            last = gs[c_gpu[c_ptr[c]]]
            for k in range(c_ptr[c] + 1, c_ptr[c + 1]):
                if gs[c_gpu[k]] > last:
                    last = gs[c_gpu[k]]
            for k in range(c_ptr[c], c_ptr[c + 1]):
                j = c_gpu[k]
                e = last + c_after[k]
                ge[j] = e if e > gs[j] else gs[j]


LOOP = Loop(_pass, COMPILE_FROM)


def _csr(groups) -> tuple[np.ndarray, np.ndarray]:
    """(pointers, flat values) of a list of index lists: group k is flat[ptr[k]:ptr[k + 1]]."""
    ptr = np.zeros(len(groups) + 1, np.int64)
    ptr[1:] = np.cumsum([len(v) for v in groups])
    flat = np.concatenate([np.asarray(v, np.int64) for v in groups]) if groups else np.zeros(0, np.int64)
    return ptr, flat


def _i64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


def _ints(a) -> np.ndarray:
    """An array as it is when int32 or int64 (the graph's links are int32 below 2**31 events,
    its times where they fit: no int64 copy per replay), else as int64. The loop adds every
    int32 value to an int64 time, so nothing is summed in int32."""
    a = np.asarray(a)
    return np.ascontiguousarray(a) if a.dtype in (np.int32, np.int64) else _i64(a)


class Runs(NamedTuple):
    """A thread's runs of calls, summed (see _runs): which host items the loop visits, and for
    every item the run head it follows and its offset from that head's start."""

    looped: np.ndarray
    head: np.ndarray
    off: np.ndarray


def _runs(chains, h_prev, h_inside, h_gap, h_dur, h_tgt) -> Runs | None:
    """Why: most host items are calls made one after another on a thread, none of them
    blocking, so each starts a fixed time after the one before (its duration plus the gap).
    Such a run is one cumulative sum; only its first item (its head) needs the loop, the rest
    follow it. On the reference Kineto trace 254,000 of 388,000 replay events are host
    starts, 74 of them heads. The loop visits heads and blocking calls (a blocking end reads
    its call's start). None when the loop would still visit more than LOOPED_AT_MOST of the
    items (a sync after every launch): the passes would cost more than they save.

    chains: the host items in an order where each run is contiguous (by thread, then time);
    any order is correct, a bad one only makes more heads. Temporaries are made in place
    (about 30 bytes an item at the high-water mark: 7 M items at 3 M nsys kernels)."""
    nh = len(h_prev)
    prev = np.asarray(h_prev)
    q = np.maximum(prev, 0)
    blocking = np.asarray(h_tgt) >= 0
    cont = np.zeros(nh, bool)                # continues its predecessor's run
    cont[chains[1:]] = prev[chains[1:]] == chains[:-1]
    cont &= ~np.asarray(h_inside, bool)
    cont &= ~blocking[q]
    looped = ~cont
    looped |= blocking
    del blocking
    if np.count_nonzero(looped) > LOOPED_AT_MOST * nh:
        return None
    step = np.asarray(h_dur, np.int64)[q]    # from the predecessor's start
    del q
    step += h_gap
    step[~cont] = 0
    run_sum = step[chains]                   # in chain order
    del step
    np.cumsum(run_sum, out=run_sum)
    at = np.arange(nh, dtype=chains.dtype)
    at[cont[chains]] = 0
    del cont
    np.maximum.accumulate(at, out=at)        # each position's head position
    head_sum = run_sum[at]
    run_sum -= head_sum
    del head_sum
    off = np.empty(nh, np.int64)             # the item's start minus its head's start
    off[chains] = run_sum
    del run_sum
    head = np.empty(nh, chains.dtype)
    head[chains] = chains[at]
    return Runs(looped, head, off)


def _fold(runs: Runs, h_prev, h_inside, h_gap, h_dur, h_tgt) -> tuple[np.ndarray, ...]:
    """(h_prev, h_inside, h_gap) for the loop with runs: an item that is not anchored and does
    not follow a blocking call's end starts at its predecessor's run head plus an offset,
    which is the loop's 'inside' case with the offset as its gap."""
    inside = np.asarray(h_inside, bool)
    q = np.maximum(h_prev, 0)
    fold = np.asarray(h_tgt)[q] < 0
    fold |= inside
    fold &= np.asarray(h_prev) >= 0
    gap = runs.off[q]
    dur = np.asarray(h_dur)[q]
    np.add(gap, dur, out=gap, where=~inside)
    del dur
    gap += h_gap
    np.copyto(gap, h_gap, where=~fold)
    prev = runs.head[q].astype(np.asarray(h_prev).dtype, copy=False)
    del q
    np.copyto(prev, h_prev, where=~fold)
    return prev, inside | fold, gap


def _visited(order: np.ndarray, runs: Runs) -> np.ndarray:
    """The order without the host starts the runs fill in after the loop (a mask by event id:
    no temporary the size of the order but booleans)."""
    visit = np.ones(len(order) and int(order.max()) + 1, bool)
    visit[:len(runs.looped)] = runs.looped
    return order[visit[order]]


def _op_ranges(order: np.ndarray, nh: int, ng: int, g_xpred: np.ndarray) -> list[tuple[int, int]]:
    """(a, b): ranges of at least OPS_AT_ONCE events of the order that are GPU ops only, none
    waiting for another stream's op but the first. Whatever such an op depends on is final
    before the range (a host start, a blocking end, an op on another stream: all earlier
    events) except the op before it on its stream, so each stream's ops there are one
    running maximum (_ops_at_once)."""
    is_op = (order >= 2 * nh) & (order < 2 * nh + ng)
    waits = np.zeros(len(order), bool)
    waits[is_op] = np.asarray(g_xpred)[order[is_op] - 2 * nh] >= 0
    starts = np.flatnonzero(is_op & (waits | np.concatenate([[True], ~is_op[:-1]])))
    breaks = np.flatnonzero(~is_op | waits)
    stops = np.append(breaks, len(order))[np.searchsorted(breaks, starts, side="right")]
    keep = stops - starts >= OPS_AT_ONCE
    # a long range in pieces: each piece's ops depend on the one before only through values
    # final by then, and the array pass's temporaries stay small (3 M ops in one range cost
    # 480 MB of them)
    return [(a, min(a + OPS_AT_MOST, b)) for a, b in zip(starts[keep].tolist(), stops[keep].tolist())
            for a in range(a, b, OPS_AT_MOST)]


def _ops_at_once(ops, lanes, marks, hs, g_launch, g_lat, g_spred, g_qgap, g_xpred, g_xgap,
                 g_dur, g_floor, gs, ge) -> bool:
    """Replay a range of GPU ops (_op_ranges) as arrays; False, writing nothing, when an op's
    stream predecessor is in the range but not the op before it in its lane (an edit moved
    it to another stream): the loop then replays the range. marks: one False per GPU op, left
    as it was found (a membership test by mask: np.isin sorted both sides, 12 ms a replay of
    the reference trace).

    On a stream, op k starts at max(A_k, end_{k-1} + qgap_k), A_k its launch (or floor) and
    cross-stream wait; so end_k - S_k = max(A_k + dur_k - S_k, end_{k-1} - S_{k-1}) with S
    the running sum of qgap + dur from the run's first op: a running maximum."""
    by = np.argsort(lanes[ops], kind="stable")
    j = ops[by]
    m = len(j)
    lane = lanes[j]
    sp = np.asarray(g_spred[j], np.int64)
    cont = np.zeros(m, bool)            # follows the op before it (same lane, its predecessor)
    cont[1:] = (lane[1:] == lane[:-1]) & (sp[1:] == j[:-1])
    head = ~cont
    outside = sp[head]
    outside = outside[outside >= 0]
    if len(outside):
        marks[ops] = True
        inside = marks[outside].any()
        marks[ops] = False
        if inside:
            return False
    la = np.asarray(g_launch[j], np.int64)
    a = np.where(la >= 0, hs[np.maximum(la, 0)] + g_lat[j], g_floor[j])
    xp = np.asarray(g_xpred[j], np.int64)
    w = xp >= 0
    if w.any():
        a[w] = np.maximum(a[w], ge[xp[w]] + g_xgap[j][w])
    w = head & (sp >= 0)
    a[w] = np.maximum(a[w], ge[sp[w]] + g_qgap[j][w])
    dur = np.asarray(g_dur[j], np.int64)
    step = dur.copy()
    step[cont] += g_qgap[j][cont]
    total = np.cumsum(step)
    first = np.maximum.accumulate(np.where(head, np.arange(m), 0))
    run_sum = total - total[first] + step[first]
    b = a + dur - run_sum
    # one running maximum per run, runs shifted apart so that each run's first value exceeds
    # every value before it (a run's later values below that first one never matter)
    width = int(b.max()) - int(b[head].min()) + 1
    runs = np.cumsum(head) - 1
    if int(runs[-1]) * width < (1 << 62):
        shift = runs * np.int64(width)
        f = np.maximum.accumulate(b + shift) - shift
    else:                              # pragma: no cover - spans of years in one range
        f = np.empty(m, np.int64)
        bounds = np.append(np.flatnonzero(head), m)
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            f[lo:hi] = np.maximum.accumulate(b[lo:hi])
    ge[j] = f + run_sum
    gs[j] = ge[j] - dur
    return True


def _plain(order, ranges, lanes, nh, args) -> None:
    """The loop as plain Python, with the ranges of GPU ops replayed as arrays in between."""
    views = [memoryview(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a
             for a in args]
    ops, (hs, _, gs, ge) = args[10:18], args[21:]     # the GPU ops' arrays; the outputs
    ov = memoryview(order)
    marks = np.zeros(len(lanes), bool)
    done = 0
    try:
        for a, b in ranges:
            if a > done:
                _pass(ov[done:a], *views)
            if not _ops_at_once(order[a:b] - 2 * nh, lanes, marks, hs, *ops, gs, ge):
                _pass(ov[a:b], *views)
            done = b
        if done < len(order):
            _pass(ov[done:], *views)
    finally:
        for v in views + [ov]:
            if isinstance(v, memoryview):
                v.release()


def runs_plain(n_events: int) -> bool:
    """Whether a replay of this many events runs as plain Python (then worth the array
    passes, whose inputs callers build only then: RunGraph.h_chains and g_lanes)."""
    return not LOOP.use_compiled(n_events)


def sweep(order: np.ndarray, host: tuple, gpu: tuple, extra: dict, n_gpu: int,
          collectives: tuple | None = None, chains: np.ndarray | None = None,
          lanes: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Replayed (host start, host end, GPU start, GPU end) arrays.

    host = (h_prev, h_inside, h_anchor, h_gap, h_dur, h_target, h_ret); gpu = (g_launch,
    g_lat, g_spred, g_qgap, g_xpred, g_xgap, g_dur, g_floor); extra: host item -> extra GPU
    ops its blocking call waits for; collectives = (members, transfer times), one array of
    GPU ops and one of times per matched call; chains: host items by thread then time (given:
    the plain loop leaves runs of calls to an array pass, _runs); lanes: each GPU op's stream
    as a number (given with chains: long ranges of ops too, _op_ranges).

    Compiled, the loop visits every event: it is fast there, and the passes' arrays only cost
    memory (160 MiB more peak at 3 M nsys kernels when they ran there too)."""
    h_prev, h_inside, h_anchor, h_gap, h_dur, h_tgt, h_ret = host
    g_launch, g_lat, g_spred, g_qgap, g_xpred, g_xgap, g_dur, g_floor = gpu
    nh = len(h_prev)
    order = _ints(order)
    runs = None
    if chains is not None and nh and runs_plain(len(order)):
        runs = _runs(np.asarray(chains), h_prev, h_inside, h_gap, h_dur, h_tgt)
    if runs is not None:
        h_prev, h_inside, h_gap = _fold(runs, h_prev, h_inside, h_gap, h_dur, h_tgt)
        launched = np.asarray(g_launch) >= 0     # a launch likewise: its head plus an offset
        li = np.maximum(g_launch, 0)
        g_lat = np.where(launched, runs.off[li] + g_lat, 0)
        g_launch = np.where(launched, runs.head[li], -1)
        del li, launched
        order = _visited(order, runs)
    keys = sorted(extra)
    x_host = np.array(keys, np.int64)
    x_ptr, x_gpu = _csr([extra[k] for k in keys])
    members, t_after = collectives or ((), ())
    c_ptr, c_gpu = _csr(list(members))
    c_after = (np.concatenate([np.asarray(t, np.int64) for t in t_after]) if len(t_after)
               else np.zeros(0, np.int64))
    hs, he = np.zeros(nh, np.int64), np.zeros(nh, np.int64)
    gs, ge = np.zeros(n_gpu, np.int64), np.zeros(n_gpu, np.int64)
    args = (_ints(h_prev), np.ascontiguousarray(h_inside, dtype=bool), _i64(h_anchor),
            *map(_ints, (h_gap, h_dur, h_tgt, h_ret)), x_host, x_ptr, x_gpu,
            *map(_ints, (g_launch, g_lat, g_spred, g_qgap, g_xpred, g_xgap, g_dur)),
            _i64(g_floor), c_ptr, c_gpu, c_after, hs, he, gs, ge)
    ranges = (_op_ranges(order, nh, n_gpu, g_xpred) if runs is not None and lanes is not None
              else [])
    if ranges:
        _plain(order, ranges, np.asarray(lanes), nh, args)
    else:
        LOOP(len(order), order, *args)
    if runs is not None:        # the items the loop skipped follow their run's head (a visited
        np.add(hs[runs.head], runs.off, out=hs)     # item is its own head, or has that start)
    # the end of a call that does not block: its start plus its duration (in place: 23 M
    # items at 10 M kernels)
    np.add(hs, h_dur, out=he, where=np.asarray(h_tgt) < 0)
    return hs, he, gs, ge

"""The replay's one sequential pass: every event in dependency order, each node's time from the
nodes it depends on. Shared by the single-run replay (replay.py) and the job replay (job.py),
so the two models cannot drift apart.

Events: a host item's start (ev < nh), a blocking call's end (< 2 nh), a GPU op (< 2 nh + ng)
and, in a job replay, a matched collective call whose members end together after the last
arrival (whatif/job.py). The loop is written once, in the subset numba compiles: a big replay
runs compiled (tracelint.jit), a small one as plain Python over memoryviews.

The loop visits only the host items that need it (_runs): a run of calls made one after
another on a thread is a cumulative sum from its first call, filled in after the loop.
"""
from __future__ import annotations

import numpy as np

from ..jit import Loop

#: Events from which a replay runs compiled when numba is installed: below this the plain loop
#: (about 0.25 µs an event) costs less than loading the compiled one.
COMPILE_FROM = 1_000_000
#: Consecutive GPU ops in the event order from which the plain loop replays them as arrays
#: (_ops_at_once): about 100 numpy calls of fixed cost against about 1 µs an op in the loop.
OPS_AT_ONCE = 128


def _pass(order, h_src, h_soff, h_tgt, h_ret, x_host, x_ptr, x_gpu, g_src, g_soff, g_spred,
          g_qgap, g_xpred, g_xgap, g_dur, c_ptr, c_gpu, c_after, t, gs, ge):
    """Fill t (host starts [0, nh), blocking calls' ends [nh, 2 nh), a zero at 2 nh), gs and ge
    in place. A host item starts at t[h_src] + h_soff, a GPU op no earlier than t[g_src] +
    g_soff (its launch, folded the same way; see _runs). x_*: a blocking call's extra GPU ops
    it waits for (host indices sorted, CSR); c_*: each collective's member ops and their
    transfer times (CSR)."""
    nh = (len(t) - 1) // 2
    n2 = 2 * nh
    n3 = n2 + len(gs)
    nx = len(x_host)
    for ev in order:
        if ev < nh:
            t[ev] = t[h_src[ev]] + h_soff[ev]
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
            s = t[i] + r
            t[ev] = e if e > s else s
        elif ev < n3:
            j = ev - n2
            s = t[g_src[j]] + g_soff[j]
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


def _runs(chains, h_prev, h_inside, h_anchor, h_gap, h_dur, h_tgt):
    """(src, soff, looped): every host item's start as t[src] + soff, and which items the loop
    visits.

    Why: most host items are calls made one after another on a thread, none of them blocking,
    so each starts a fixed time after the one before (its duration plus the gap). Such a run
    is one cumulative sum; only its first item (its head) needs the loop, the rest follow it.
    On the reference Kineto trace 254,000 of 388,000 replay events are host starts, about 600
    of them heads. src is the head of the item's run (its start is t[head]), the end of the
    blocking call it follows (t[nh + call]), or the zero at t[2 nh] for an item anchored at
    its own time (soff is then that time). looped: heads and blocking calls (a blocking end
    reads its call's start).

    chains: the host items in an order where each run is contiguous (by thread, then time);
    any order is correct, a bad one only makes more heads."""
    nh = len(h_prev)
    prev = np.asarray(h_prev, np.int64)
    q = np.maximum(prev, 0)
    blocking = np.asarray(h_tgt) >= 0
    after = (prev >= 0) & ~np.asarray(h_inside, bool)
    via_end = after & blocking[q]
    chains = np.asarray(chains, np.int64)
    cont = np.zeros(nh, bool)                # continues its predecessor's run
    cont[chains[1:]] = prev[chains[1:]] == chains[:-1]
    cont &= after & ~via_end
    step = np.where(after, np.asarray(h_dur, np.int64)[q], 0)    # from the predecessor's start
    step += h_gap
    run_sum = np.cumsum(np.where(cont, step, 0)[chains])        # in chain order
    at = np.arange(nh)
    head_at = np.maximum.accumulate(np.where(cont[chains], 0, at))
    head = np.empty(nh, np.int64)
    head[chains] = chains[head_at]
    off = np.empty(nh, np.int64)            # start of the item minus its head's start
    off[chains] = run_sum - run_sum[head_at]
    del run_sum, head_at, at
    src = np.where(via_end, nh + q, head[q])
    src[prev < 0] = 2 * nh
    soff = np.where(via_end, np.asarray(h_gap, np.int64), off[q] + step)
    soff[prev < 0] = np.asarray(h_anchor, np.int64)[prev < 0]
    return src, soff, ~cont | blocking


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
    return list(zip(starts[keep].tolist(), stops[keep].tolist()))


def _ops_at_once(ops, lanes, t, g_src, g_soff, g_spred, g_qgap, g_xpred, g_xgap, g_dur,
                 gs, ge) -> bool:
    """Replay a range of GPU ops (_op_ranges) as arrays; False, writing nothing, when an op's
    stream predecessor is in the range but not the op before it in its lane (an edit moved
    it to another stream): the loop then replays the range.

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
    if len(outside) and np.isin(outside, ops).any():
        return False
    a = t[g_src[j]] + g_soff[j]
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
    ops, out = args[7:14], args[17:]     # the GPU ops' arrays; t, gs, ge (written by both)
    ov = memoryview(order)
    done = 0
    try:
        for a, b in ranges:
            if a > done:
                _pass(ov[done:a], *views)
            if not _ops_at_once(order[a:b] - 2 * nh, lanes, out[0], *ops, *out[1:]):
                _pass(ov[a:b], *views)
            done = b
        if done < len(order):
            _pass(ov[done:], *views)
    finally:
        for v in views + [ov]:
            if isinstance(v, memoryview):
                v.release()


def sweep(order: np.ndarray, host: tuple, gpu: tuple, extra: dict, n_gpu: int,
          collectives: tuple | None = None, chains: np.ndarray | None = None,
          lanes: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Replayed (host start, host end, GPU start, GPU end) arrays.

    host = (h_prev, h_inside, h_anchor, h_gap, h_dur, h_target, h_ret); gpu = (g_launch,
    g_lat, g_spred, g_qgap, g_xpred, g_xgap, g_dur, g_floor); extra: host item -> extra GPU
    ops its blocking call waits for; collectives = (members, transfer times), one array of
    GPU ops and one of times per matched call; chains: host items by thread then time (see
    _runs; index order when None); lanes: each GPU op's stream as a number (the plain loop
    replays long ranges of ops as arrays, _op_ranges; not when None)."""
    h_prev, h_inside, h_anchor, h_gap, h_dur, h_tgt, h_ret = host
    nh = len(h_prev)
    src, soff, looped = _runs(np.arange(nh) if chains is None else chains,
                              h_prev, h_inside, h_anchor, h_gap, h_dur, h_tgt)
    order = np.asarray(order)
    if nh:
        order = order[(order >= nh) | looped[np.minimum(order, nh - 1)]]
    keys = sorted(extra)
    x_host = np.array(keys, np.int64)
    x_ptr, x_gpu = _csr([extra[k] for k in keys])
    members, t_after = collectives or ((), ())
    c_ptr, c_gpu = _csr(list(members))
    c_after = (np.concatenate([np.asarray(t, np.int64) for t in t_after]) if len(t_after)
               else np.zeros(0, np.int64))
    g_launch, g_lat, g_spred, g_qgap, g_xpred, g_xgap, g_dur, g_floor = gpu
    launched = np.asarray(g_launch) >= 0
    li = np.maximum(g_launch, 0)
    g_src = np.where(launched, src[li], 2 * nh)
    g_soff = np.where(launched, soff[li] + np.asarray(g_lat, np.int64), g_floor)
    del li, launched
    t = np.zeros(2 * nh + 1, np.int64)
    gs, ge = np.zeros(n_gpu, np.int64), np.zeros(n_gpu, np.int64)
    order = _ints(order)
    args = (_ints(src), _i64(soff), _ints(h_tgt), _ints(h_ret), x_host, x_ptr, x_gpu,
            _ints(g_src), _i64(g_soff), *map(_ints, (g_spred, g_qgap, g_xpred, g_xgap, g_dur)),
            c_ptr, c_gpu, c_after, t, gs, ge)
    ranges = ([] if lanes is None or LOOP.use_compiled(len(order))
              else _op_ranges(order, nh, n_gpu, g_xpred))
    if ranges:
        _plain(order, ranges, np.asarray(lanes), nh, args)
    else:
        LOOP(len(order), order, *args)
    # the items the loop skipped follow their run's head; ends of calls that do not block
    # are their start plus their duration
    rest = np.flatnonzero(~looped)
    t[rest] = t[src[rest]] + soff[rest]
    hs = t[:nh]
    he = t[nh:2 * nh]
    free = ~(np.asarray(h_tgt) >= 0)
    he[free] = hs[free] + np.asarray(h_dur, np.int64)[free]
    return hs, he, gs, ge

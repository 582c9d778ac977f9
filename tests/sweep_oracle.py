"""The replay loop before sweep._runs took a thread's runs of calls out of it, kept as the
oracle its tests compare against: every host item's start and end visited one by one, as
numpy arrays (git: tracelint/whatif/sweep.py at af8ea4b)."""
from __future__ import annotations

import numpy as np


def _pass(order, h_prev, h_inside, h_anchor, h_gap, h_dur, h_tgt, h_ret, x_host, x_ptr, x_gpu,
          g_launch, g_lat, g_spred, g_qgap, g_xpred, g_xgap, g_dur, g_floor,
          c_ptr, c_gpu, c_after, hs, he, gs, ge):
    """Fill hs, he, gs, ge in place. x_*: a blocking call's extra GPU ops it waits for (host
    indices sorted, CSR); c_*: each collective's member ops and their transfer times (CSR)."""
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
            else:
                s = he[q] + h_gap[ev]
            hs[ev] = s
            if h_tgt[ev] < 0:
                he[ev] = s + h_dur[ev]
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


def sweep(order: np.ndarray, host: tuple, gpu: tuple, extra: dict, n_gpu: int,
          collectives: tuple | None = None) -> tuple[np.ndarray, ...]:
    """Replayed (host start, host end, GPU start, GPU end) arrays.

    host = (h_prev, h_inside, h_anchor, h_gap, h_dur, h_target, h_ret); gpu = (g_launch,
    g_lat, g_spred, g_qgap, g_xpred, g_xgap, g_dur, g_floor); extra: host item -> extra GPU
    ops its blocking call waits for; collectives = (members, transfer times), one array of
    GPU ops and one of times per matched call."""
    h_prev, h_inside, h_anchor, h_gap, h_dur, h_tgt, h_ret = host
    nh = len(h_prev)
    keys = sorted(extra)
    x_host = np.array(keys, np.int64)
    x_ptr, x_gpu = _csr([extra[k] for k in keys])
    members, t_after = collectives or ((), ())
    c_ptr, c_gpu = _csr(list(members))
    c_after = (np.concatenate([np.asarray(t, np.int64) for t in t_after]) if len(t_after)
               else np.zeros(0, np.int64))
    out = [np.zeros(nh, np.int64), np.zeros(nh, np.int64),
           np.zeros(n_gpu, np.int64), np.zeros(n_gpu, np.int64)]
    g_launch, g_lat, g_spred, g_qgap, g_xpred, g_xgap, g_dur, g_floor = gpu
    args = (_ints(order), _ints(h_prev), np.ascontiguousarray(h_inside, dtype=bool),
            _i64(h_anchor), *map(_ints, (h_gap, h_dur, h_tgt, h_ret)), x_host, x_ptr, x_gpu,
            *map(_ints, (g_launch, g_lat, g_spred, g_qgap, g_xpred, g_xgap, g_dur)),
            _i64(g_floor), c_ptr, c_gpu, c_after, *out)
    _pass(*[memoryview(a) if isinstance(a, np.ndarray) else a for a in args])
    return tuple(out)

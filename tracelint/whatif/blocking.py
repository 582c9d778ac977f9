"""Which host calls of a run blocked on which GPU op: synchronize calls, synchronous copies, and
any other call that returned right after an op ended and took far longer than its name
usually takes (an implicit sync: cudaMemcpy, cudaFree). Part of the what-if graph (graph.py).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..timeline import classify
from ..timeline.codes import row_codes, stable_order
from ..timeline.model import Timeline
from .indexes import index_dtype

#: A non-sync call counts as blocked on a GPU op when it returned within this long of the op's
#: end and spent most of its time after the op started (implicit syncs: cudaMemcpy, cudaFree).
RETURN_SLACK_NS = 20_000
#: ... and took at least this much longer than the median call of its name.
EXCESS_NS = 10_000
#: Host calls tested for a blocking wait at a time (bounds the test's temporaries).
BLOCK_CHUNK = 1 << 20
_QUERY = re.compile(r"Query", re.IGNORECASE)
_SYNC_COPY = re.compile(r"^(cuda|hip)Memcpy(2D|3D)?(ToSymbol|FromSymbol)?$|^cuMemcpy[A-Za-z]*(_v2)?$")


def by_name(names: np.ndarray | pd.Categorical, fn) -> np.ndarray:
    """fn over the distinct names only, mapped back to every row (bool); a missing name is
    asked as 'nan'."""
    if len(names) == 0:
        return np.zeros(0, bool)
    if isinstance(names, pd.Categorical):
        return classify.label_mask(names, lambda u: fn(str(u)), missing=bool(fn("nan")))
    # factorize hashes the objects in place; np.unique(names.astype(str)) built a fixed-width
    # unicode copy (4 bytes x longest name x rows: hundreds of MB on long kernel names)
    codes, uniq = pd.factorize(np.asarray(names, dtype=object), use_na_sentinel=False)
    return np.array([bool(fn(str(u))) for u in uniq], bool)[codes]


def blocking_calls(tl: Timeline, h: pd.DataFrame, g: pd.DataFrame, g_launch: np.ndarray,
                   is_api: np.ndarray):
    """Which host calls waited for which GPU op, and the return latency after it (h: the
    graph's host items, is_api: which of them are API calls; g: its GPU ops)."""
    nh = len(h)
    target = np.full(nh, -1, dtype=index_dtype(len(g)))    # int32 below 2**31 ops
    ret = np.zeros(nh, dtype=np.int64)
    extra: dict[int, list[int]] = {}
    if len(g) == 0:
        return target, ret, extra
    role, name = h["role"].array, h["name"].array
    hs, he = h["start"].to_numpy(np.int64), h["end"].to_numpy(np.int64)
    cand = np.flatnonzero(is_api & (role != "launch") & (he > hs))
    if len(cand) == 0:
        return target, ret, extra
    gend, gstart = g["end"].to_numpy(np.int64), g["start"].to_numpy(np.int64)
    launched_at = np.where(g_launch >= 0, hs[np.maximum(g_launch, 0)], gstart)
    nsys = tl.meta.format == "nsys-sqlite"
    one = np.int64(0)                   # one process: a shared zero, not a column of them
    gpid = g["pid"].to_numpy() if nsys else np.broadcast_to(one, len(g))
    hpid = h["pid"].to_numpy() if nsys else np.broadcast_to(one, nh)
    procs = np.unique(hpid[cand])
    for p in procs:                     # one process: the candidates as they are, not a copy
        _blocked_in_process(cand if len(procs) == 1 else cand[hpid[cand] == p],
                            np.flatnonzero(gpid == p), hs, he, gstart, gend, launched_at, name,
                            role, target, ret)
    del cand            # before the device syncs' own temporaries
    _device_sync_extras(h, g, target, launched_at, extra)
    return target, ret, extra


def _blocked_in_process(c, ops, hs, he, gstart, gend, launched_at, name, role, target, ret):
    """Fill target and ret for the host calls c of one process, whose GPU ops are ops."""
    if len(ops) == 0:
        return
    by_end = ops[np.argsort(gend[ops], kind="stable")]
    # any call other than a sync or a synchronous copy counts only when it took far longer
    # than its name usually takes (an implicit sync), not when a short call merely
    # overlapped an op's end: the typical duration is over all the process's calls
    dur = he[c] - hs[c]
    codes, typical = _median_by_code(np.asarray(name.codes)[c], dur)
    for lo in range(0, len(c), BLOCK_CHUNK):      # bounded temporaries (23 M calls)
        part = slice(lo, lo + BLOCK_CHUNK)
        t, r = _waited_op(c[part], by_end, hs, he, gstart, gend, launched_at, name, role,
                          dur[part], typical[codes[part]])
        target[c[part][t >= 0]], ret[c[part][t >= 0]] = t[t >= 0], r[t >= 0]


def _median_by_code(codes: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes shifted to start at 0, the median of the values of each code): med[codes] is
    what a groupby's median transform gives per row, without its float column per row and its
    temporaries (at 23 M calls they made the build's peak). A missing name (code -1) has no
    median (NaN), as the groupby drops it."""
    codes = codes.astype(np.int32) + 1
    order = stable_order(codes)
    bounds = np.searchsorted(codes[order], np.arange(int(codes.max()) + 2 if len(codes) else 1))
    med = np.array([np.median(values[order[a:b]]) if b > a and k > 0 else np.nan
                    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))])
    return codes, med


def _waited_op(c, by_end, hs, he, gstart, gend, launched_at, name, role, dur, typical):
    """(op, return latency) of the host calls c that blocked on a GPU op (op -1 elsewhere):
    the last op on their process ending before the call returns (by_end: its ops by end)."""
    k = np.searchsorted(gend[by_end], he[c], side="right") - 1
    t = np.where(k >= 0, by_end[np.maximum(k, 0)], -1)
    tt = np.maximum(t, 0)
    ok = (t >= 0) & (gend[tt] > hs[c]) & (launched_at[tt] <= hs[c])
    r = he[c] - gend[tt]
    waited = gend[tt] - np.maximum(hs[c], gstart[tt])
    is_sync = (role[c] == "sync") & by_name(name[c], lambda n: not _QUERY.search(n) and
                                             classify.sync_kind(n) != "stream_wait_event")
    sync_copy = by_name(name[c], lambda n: bool(_SYNC_COPY.match(n)))
    generic = (r <= np.maximum(RETURN_SLACK_NS, dur // 20)) & (2 * waited > dur) & \
        (dur - typical >= EXCESS_NS)
    blocked = ok & (is_sync | sync_copy | generic)
    return np.where(blocked, t, -1), r


def _device_sync_extras(h, g, target, launched_at, extra) -> None:
    """Device-wide syncs wait for the last op launched before them on every stream."""
    blocking = np.flatnonzero(target >= 0)
    names = h["name"].array[blocking]
    rows = blocking[by_name(names, lambda n: classify.sync_kind(n) == "device")]
    if len(rows) == 0:
        return
    hs = h["start"].to_numpy(np.int64)
    he = h["end"].to_numpy(np.int64)
    gend = g["end"].to_numpy(np.int64)
    for ops in _by_stream(g["device"].to_numpy(), g["stream"].to_numpy()):
        order = ops[np.argsort(launched_at[ops], kind="stable")]
        launched = launched_at[order]
        for lo in range(0, len(rows), BLOCK_CHUNK):   # a sync after every kernel: 10 M of them
            part = rows[lo:lo + BLOCK_CHUNK]
            k = np.searchsorted(launched, hs[part], side="right") - 1
            last = order[np.maximum(k, 0)]      # the stream's last op launched before the sync
            waits = (k >= 0) & (last != target[part]) & (gend[last] <= he[part])
            for i, op in zip(part[waits].tolist(), last[waits].tolist()):
                extra.setdefault(i, []).append(op)


def _by_stream(dev: np.ndarray, stream: np.ndarray):
    """Rows of each (device, stream), ascending, streams in the order of their "device:stream"
    text (as a groupby on that text key gives it) without building a string per row."""
    codes = row_codes(dev, stream)[0]       # a shared (one-value) column costs nothing
    by = stable_order(codes)
    bounds = np.searchsorted(codes[by], np.arange(int(codes.max()) + 2 if len(codes) else 1))
    labels = [f"{int(dev[f])}:{int(stream[f])}" for f in by[bounds[:-1]]]
    for c in sorted(range(len(labels)), key=labels.__getitem__):
        yield by[bounds[c]:bounds[c + 1]]

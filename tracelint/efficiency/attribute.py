"""Attribute each op's modelled work to the kernels it launched.

Link: kernel -> launching runtime call (correlation id, Timeline.launch_index) -> the innermost
framework op (ranges kind "op") on the launching thread whose time contains the call -> that
op's recorded shapes (meta.extra["op_inputs"], by External id). Time containment rather than
the runtime call's External id, because older Kineto traces number the two differently.
An op that launches several kernels (cuDNN: layout transform + convolution) gets its work
once, over the summed time of all its kernels.
"""
from __future__ import annotations

import msgspec
import numpy as np
import pandas as pd

from tracelint.timeline.model import Timeline

from .work import Work, op_work

CAPTURE_HINT = ("record op shapes: torch.profiler.profile(record_shapes=True, ...) "
                "(tracelint capture sets it); Nsight Systems traces carry no op shapes")


def shapes_available(tl: Timeline) -> bool:
    return bool(tl.meta.extra.get("op_inputs"))


def launching_ops(tl: Timeline, launch: np.ndarray) -> np.ndarray:
    """For each kernel (its api_calls row in `launch`, -1 if none), the ranges row of the
    innermost op containing the launch on the same thread, or -1."""
    out = np.full(len(launch), -1, dtype=np.int64)
    r = tl.ranges
    if len(r) == 0 or len(tl.api_calls) == 0:
        return out
    is_op = (r["kind"] == "op").to_numpy()
    starts, ends = r["start"].to_numpy(), r["end"].to_numpy()
    parent = r["parent"].to_numpy()
    api = tl.api_calls
    a_pid, a_tid, a_t = api["pid"].to_numpy(), api["tid"].to_numpy(), api["start"].to_numpy()
    uniq, inv = np.unique(launch, return_inverse=True)
    found = np.full(len(uniq), -1, dtype=np.int64)
    valid = uniq >= 0
    # one sorted key space over (thread, start): ranges and launches of a thread are adjacent
    r_key = _thread_key(r["pid"].to_numpy(), r["tid"].to_numpy())
    order = np.lexsort((starts, r_key))
    a_rows = uniq[valid]
    a_key = _thread_key(a_pid[a_rows], a_tid[a_rows])
    pos = _searchsorted2(r_key[order], starts[order], a_key, a_t[a_rows]) - 1
    cand = np.where(pos >= 0, order[np.clip(pos, 0, None)], -1)
    cand = np.where((cand >= 0) & (r_key[np.clip(cand, 0, None)] == a_key), cand, -1)
    t = a_t[a_rows]
    res = np.full(len(a_rows), -1, dtype=np.int64)
    for i in range(len(a_rows)):                 # walk up only where the candidate is not it
        row = int(cand[i])
        while row >= 0 and not (is_op[row] and starts[row] <= t[i] < ends[row]):
            row = int(parent[row])
        res[i] = row
    found[valid] = res
    out = found[inv]
    out[launch < 0] = -1
    return out


def _thread_key(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    return (pid.astype(np.int64) << 32) ^ (tid.astype(np.int64) & 0xFFFFFFFF)


def _searchsorted2(k_sorted, t_sorted, k, t) -> np.ndarray:
    """searchsorted (side right) on (key, time) pairs sorted lexicographically."""
    lo = np.searchsorted(k_sorted, k, side="left")
    hi = np.searchsorted(k_sorted, k, side="right")
    out = np.empty(len(k), dtype=np.int64)
    for key in np.unique(k):
        m = k == key
        a, b = lo[m][0], hi[m][0]
        out[m] = a + np.searchsorted(t_sorted[a:b], t[m], side="right")
    return out


def op_works(tl: Timeline, launch: np.ndarray) -> pd.DataFrame:
    """One row per op call that launched kernels and has a work model.

    Columns: op_row, op, device, first_start, last_end, kernel_ns, kernels, main_kernel,
    flops, bytes, dtype, kind, shape (text), work (Work), kernel_rows (list).
    """
    inputs = tl.meta.extra.get("op_inputs") or {}
    k = tl.kernels
    cols = ["op_row", "op", "device", "first_start", "last_end", "kernel_ns", "kernels",
            "main_kernel", "flops", "bytes", "dtype", "kind", "shape", "work", "kernel_rows"]
    if not inputs or len(k) == 0:
        return pd.DataFrame(columns=cols)
    op_row = launching_ops(tl, launch)
    sel = np.flatnonzero(op_row >= 0)
    r = tl.ranges
    ext = r["external_id"].to_numpy()
    r_codes = r["name"].cat.codes.to_numpy()
    r_cats = np.asarray(r["name"].cat.categories, dtype=object)
    ks, ke = k["start"].to_numpy(), k["end"].to_numpy()
    dur, kdev = ke - ks, k["device"].to_numpy()
    kcodes = k["name"].cat.codes.to_numpy()
    kcats = np.asarray(k["name"].cat.categories, dtype=object)
    # kernels grouped by op call, longest first within each group: per-group sums by reduceat
    order = sel[np.lexsort((-dur[sel], op_row[sel]))]
    if len(order) == 0:
        return pd.DataFrame(columns=cols)
    first = np.r_[0, np.flatnonzero(np.diff(op_row[order])) + 1]
    g_start = np.minimum.reduceat(ks[order], first)
    g_end = np.maximum.reduceat(ke[order], first)
    g_ns = np.add.reduceat(dur[order], first)
    g_n = np.diff(np.r_[first, len(order)])
    memo: dict[tuple, tuple[Work | None, str]] = {}
    rows = []
    for i, at in enumerate(first):
        main = order[at]                                    # the longest kernel of the call
        orow = int(op_row[main])
        rec = inputs.get(int(ext[orow]))
        if rec is None or rec[0] != r_cats[r_codes[orow]]:
            continue
        if rec not in memo:
            dims, types, concrete = (_decoded(x) for x in rec[1:4])
            w = op_work(rec[0], dims, types, concrete)
            memo[rec] = (w, shape_text(dims, types) if w is not None else "")
        w, shape = memo[rec]
        if w is None:
            continue
        rows.append((orow, rec[0], int(kdev[main]), int(g_start[i]), int(g_end[i]), int(g_ns[i]),
                     int(g_n[i]), str(kcats[kcodes[main]]), w.flops, w.bytes, w.dtype, w.kind, shape,
                     w, np.sort(order[at:at + g_n[i]]).tolist()))
    return pd.DataFrame(rows, columns=cols)


def _decoded(value):
    """The importer keeps op inputs as JSON bytes (decoded here, once per distinct record)."""
    if isinstance(value, (bytes, bytearray)):
        if not value:
            return None
        try:
            return msgspec.json.decode(value)
        except msgspec.DecodeError:
            return None
    return value


def shape_text(dims, types) -> str:
    """A compact shape signature: tensor shapes and dtypes, e.g. '[16,5185,64]bf16 x [16,64,5185]bf16'."""
    from .work import DTYPES
    parts = []
    for i, d in enumerate(dims if isinstance(dims, list) else []):
        t = types[i] if isinstance(types, list) and i < len(types) else ""
        if isinstance(d, list) and d and t in DTYPES:
            parts.append("[" + ",".join(str(x) for x in d) + "]" + DTYPES[t][0])
    return " x ".join(parts)

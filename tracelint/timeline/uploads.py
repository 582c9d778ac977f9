"""Host-to-device copies with their host side, one row per H2D copy that has a launching call.

For each upload: the runtime call that issued it; whether the host waited for the copy in that
call (a synchronous API, or a pageable "async" copy the driver stages and returns from only
when most of the data has crossed) or in a stream / device synchronisation issued right after it
(PyTorch's `.to(device)` with non_blocking=False copies, then synchronises the stream); the
framework op that moved it (the outermost `aten::to` / `_to_copy` / `copy_` around the call);
and a factory op (`aten::zeros`, `arange`, ...) that ended just before that op on the same
thread, at the same nesting level, without launching any GPU work (the tensor was created on
the CPU). TL032 blocking-or-pageable-h2d and TL033 cpu-tensor-moved-each-step read these facts.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from . import classify, intervals
from .codes import thread_codes

#: A stream / device sync that starts within this long after a copy call returns, on the same
#: thread, and ends after the copy, is the copy's own wait (`memcpy_and_sync`).
SYNC_AFTER_NS = 50_000
#: A factory op that ended at most this long before the moving op created its tensor.
FACTORY_GAP_NS = 100_000

COLUMNS = ("copy", "device", "stream", "start", "end", "bytes", "src_kind", "api", "api_name",
           "pid", "tid", "call_start", "call_end", "call_blocks", "sync", "sync_name", "sync_end", "sync_in_op",
           "blocked_ns", "step", "in_step", "mover", "factory")


def uploads(tl, sync_after_ns: int = SYNC_AFTER_NS, factory_gap_ns: int = FACTORY_GAP_NS) -> pd.DataFrame:
    """The facts above, one row per H2D copy with a launching call (see COLUMNS). `copy`, `api`,
    `sync`, `mover` and `factory` are row positions in the copies, api_calls and ranges tables
    (-1: none). `blocked_ns`: host time in the calls that waited for the copy; `sync_in_op`: the
    sync ran inside the moving op (`.to()` with non_blocking=False), not after it."""
    c, api = tl.copies, tl.api_calls
    if len(c) == 0 or len(api) == 0:
        return pd.DataFrame({k: [] for k in COLUMNS})
    launch = tl.launch_index("copies")
    rows = np.flatnonzero((c["kind"].astype(str).to_numpy() == "H2D") & (launch >= 0))
    if len(rows) == 0:
        return pd.DataFrame({k: [] for k in COLUMNS})
    a = launch[rows]
    xs, xe = c["start"].to_numpy()[rows], c["end"].to_numpy()[rows]
    a_s, a_e = api["start"].to_numpy(), api["end"].to_numpy()
    call_names = classify.labels_at(api["name"], a)
    cs, ce = a_s[a], a_e[a]
    # the host waited in the call: a synchronous API, or the call covered most of the copy
    waited = np.maximum(0, np.minimum(ce, xe) - np.maximum(cs, xs))
    sync_api = np.array(["async" not in n.lower() for n in call_names], dtype=bool)
    call_blocks = sync_api | ((xe > xs) & (2 * waited >= xe - xs))
    sync = _sync_after(api, a, xe, sync_after_ns)
    has_sync = sync >= 0
    blocked = np.where(call_blocks, ce - cs, 0) + np.where(has_sync, a_e[np.maximum(sync, 0)] -
                                                           a_s[np.maximum(sync, 0)], 0)
    pid, tid = api["pid"].to_numpy()[a], api["tid"].to_numpy()[a]
    step = _step_at(tl, pid, tid, cs)
    has_steps = bool(len(tl.ranges)) and bool((tl.ranges["kind"] == "step").any())
    mover, factory = _ops_around(tl, pid, tid, cs, factory_gap_ns)
    # the sync runs inside the op that moved the tensor (PyTorch's memcpy_and_sync), not after it
    r = tl.ranges
    ms, me = (r["start"].to_numpy()[np.maximum(mover, 0)], r["end"].to_numpy()[np.maximum(mover, 0)]) \
        if len(r) else (np.zeros(len(rows), np.int64), np.zeros(len(rows), np.int64))
    s_start = a_s[np.maximum(sync, 0)]
    sync_in_op = has_sync & (mover >= 0) & (ms <= s_start) & (s_start < me)
    return pd.DataFrame({
        "copy": rows, "device": c["device"].to_numpy()[rows], "stream": c["stream"].to_numpy()[rows],
        "start": xs, "end": xe, "bytes": c["bytes"].to_numpy()[rows],
        "src_kind": classify.labels_at(c["src_kind"], rows), "api": a, "api_name": call_names,
        "pid": pid, "tid": tid, "call_start": cs, "call_end": ce, "call_blocks": call_blocks,
        "sync": sync, "sync_name": np.where(has_sync, classify.labels_at(api["name"], np.maximum(sync, 0)), ""),
        "sync_end": np.where(has_sync, a_e[np.maximum(sync, 0)], -1), "sync_in_op": sync_in_op,
        "blocked_ns": blocked.astype(np.int64), "step": step,
        "in_step": (step >= 0) if has_steps else np.ones(len(rows), bool),
        "mover": mover, "factory": factory})


def _sync_after(api: pd.DataFrame, a: np.ndarray, copy_end: np.ndarray, within: int) -> np.ndarray:
    """Per copy call: the api row of the stream / device sync that follows it on its thread
    (the next call, starting within `within` ns of its return and ending after the copy)."""
    pid, tid, start = api["pid"].to_numpy(), api["tid"].to_numpy(), api["start"].to_numpy()
    n = np.full(len(a), -1, dtype=np.int64)            # the next call on the same thread
    for p, t in set(zip(pid[a].tolist(), tid[a].tolist())):   # loop over the copies' threads
        rows = np.flatnonzero((pid == p) & (tid == t))
        by_start = np.argsort(start[rows], kind="stable")   # ties in row order
        order = rows[by_start]
        pos = np.empty(len(rows), dtype=np.int64)          # each row's place in that order
        pos[by_start] = np.arange(len(rows))
        mine = np.flatnonzero((pid[a] == p) & (tid[a] == t))
        at = pos[np.searchsorted(rows, a[mine])] + 1
        n[mine] = np.where(at < len(order), order[np.minimum(at, len(order) - 1)], -1)
    ok = n >= 0
    n = np.maximum(n, 0)
    kinds = np.array([classify.api_role(x) == "sync" and classify.sync_kind(x) in ("stream", "device")
                      for x in classify.labels_at(api["name"], n)], dtype=bool) if len(n) else np.zeros(0, bool)
    end = api["end"].to_numpy()
    ok &= kinds & (start[n] - end[a] <= within) & (end[n] >= copy_end)
    return np.where(ok, n, -1)


def _step_at(tl, pid, tid, t) -> np.ndarray:
    """Iteration number whose step range (any thread) contains each time, else -1."""
    r = tl.ranges
    out = np.full(len(t), -1, dtype=np.int64)
    if len(r) == 0:
        return out
    st = r[(r["kind"] == "step").to_numpy()].sort_values("start")
    if len(st) == 0:
        return out
    ss, se = st["start"].to_numpy(), st["end"].to_numpy()
    k = np.searchsorted(ss, t, side="right") - 1
    hit = (k >= 0) & (t < se[np.maximum(k, 0)])
    out[hit] = st["step"].to_numpy()[k[hit]]
    return out


def _ops_around(tl, pid, tid, t, gap_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """(mover, factory) range rows per call time: the outermost device-move op around the call,
    and the factory op just before it (same thread, same parent, no GPU work inside)."""
    n = len(t)
    mover, factory = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    r = tl.ranges
    if len(r) == 0:
        return mover, factory
    # framework ops: Kineto cpu_op, or NVTX ranges named by emit_nvtx ("aten::to, seq = 7")
    is_op = classify.in_labels(r["kind"], ("op",)) | (
        classify.in_labels(r["kind"], ("nvtx",))
        & classify.name_mask(r["name"], lambda s: s.startswith("aten::")))
    ops = np.flatnonzero(is_op)
    if len(ops) == 0:
        return mover, factory
    move = np.asarray(classify.classify_categorical(r["name"], lambda x: "y" if classify.device_move_op(x) else ""),
                      dtype=object) == "y"
    fact = np.asarray(classify.classify_categorical(r["name"], lambda x: "y" if classify.factory_op(x) else ""),
                      dtype=object) == "y"
    rs, re_ = r["start"].to_numpy(), r["end"].to_numpy()
    parent, depth = r["parent"].to_numpy(), r["depth"].to_numpy()
    r_thr, q_thr = thread_codes((r["pid"].to_numpy()[ops], r["tid"].to_numpy()[ops]), (pid, tid))
    inner = intervals.innermost_enclosing(t, q_thr, rs[ops], re_[ops], r_thr, depth[ops])
    api = tl.api_calls
    gpu_call = classify.in_labels(tl.api_role, ("launch", "copy", "memset"))
    a_thr, r_thr_all = thread_codes((api["pid"].to_numpy(), api["tid"].to_numpy()),
                                    (r["pid"].to_numpy(), r["tid"].to_numpy()))
    a_start = api["start"].to_numpy()
    by_end: dict[int, np.ndarray] = {}       # per thread: op rows sorted by end
    launches: dict[int, np.ndarray] = {}     # per thread: sorted starts of GPU-work calls
    for i in np.flatnonzero(inner >= 0):
        m = int(ops[inner[i]])
        if not move[m]:
            continue
        while parent[m] >= 0 and is_op[parent[m]] and move[parent[m]]:
            m = int(parent[m])
        mover[i] = m
        th = int(r_thr_all[m])
        if th not in by_end:
            mine = ops[r_thr_all[ops] == th]
            by_end[th] = mine[np.argsort(re_[mine], kind="stable")]
            launches[th] = np.sort(a_start[gpu_call & (a_thr == th)])
        cand = by_end[th]
        k = int(np.searchsorted(re_[cand], rs[m], side="right")) - 1
        # the op that ended last before the mover started is its previous sibling, if any
        # (a sibling ends after everything nested in it)
        if k < 0:
            continue
        f = int(cand[k])
        if parent[f] != parent[m] or not fact[f] or rs[m] - re_[f] > gap_ns:
            continue
        ls = launches[th]
        if np.searchsorted(ls, re_[f], side="left") > np.searchsorted(ls, rs[f], side="left"):
            continue                    # it launched GPU work: created on the device
        factory[i] = f
    return mover, factory

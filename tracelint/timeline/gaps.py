"""Why a device sat idle: idle windows per iteration, and what the host threads and streams
did in each (launched late, blocked in a synchronous call, a stream waiting on another stream's
event, nothing launched), plus the host activity that filled the idle time.

Each idle gap [gs, ge) ends at the next GPU activity, launched by an API call at time L:

* [gs, L): the launch had not been issued. Where the launching thread sat in a blocking call
  (a sync, a copy or memset without `Async`, an async copy from pageable memory) that time is
  *blocked*; the rest is *late* (the host was busy elsewhere: Python, data, dispatch).
* [L, L_end): the host sat inside the launch call itself (*launch call*: lazy kernel
  loading on a first launch, driver contention).
* [L_end, ge): the work was launched but did not run. When a stream-wait-event on its stream
  came between the previous launch on that stream and this one (or the trace's GPU-side sync
  records say so) that time is *event wait*; inside one CUDA graph launch it is *graph* (the
  graph's own dependencies); otherwise *queued* (launch latency, or a dependency the trace
  does not record: another device or process).
* a gap whose next activity has no launch call in the trace is *unlinked*; a gap that no
  activity ends (idle until the iteration ends) is *no launch*.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from . import classify, intervals
from .gap_index import CAUSES, GapIndex
from .schema import rows_where


def blocking_rows(ctx) -> np.ndarray:
    """Boolean mask over api_calls: calls that block the host until device work finishes."""
    tl = ctx.tl
    api = tl.api_calls
    if len(api) == 0:
        return np.zeros(0, dtype=bool)
    mask = np.asarray(classify.classify_categorical(api["name"], classify.blocks_host), dtype=bool)
    c = tl.copies
    if len(c):
        pageable = ((c["src_kind"].astype(str) == "pageable") | (c["dst_kind"].astype(str) == "pageable")).to_numpy()
        rows = ctx.launch_index("copies")[pageable]
        mask[rows[rows >= 0]] = True
    return mask


def step_windows(tl) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of each iteration (ProfilerStep ranges), in time order."""
    r = tl.ranges
    if len(r) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    s = r[classify.in_labels(r["kind"], ("step",))].sort_values("start")
    return s["start"].to_numpy(), s["end"].to_numpy()


def iteration_windows(ctx, device: int, st_s: np.ndarray, st_e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each iteration's window on the device: from its host step start to the later of the step
    end and the end of the last GPU activity it launched (a host that runs ahead leaves its
    work to finish after the step), clipped so windows never overlap."""
    if len(st_s) == 0:
        return st_s, st_e
    act = ctx.tl.gpu_activity
    on = act["device"].to_numpy() == device
    li = ctx.activity_launch[on]
    a_start = ctx.tl.api_calls["start"].to_numpy()
    t = np.where(li >= 0, a_start[np.clip(li, 0, None)] if len(a_start) else -1, -1)
    k = np.searchsorted(st_s, t, side="right") - 1
    inside = (li >= 0) & (k >= 0) & (t < st_e[np.clip(k, 0, None)])
    hi = st_e.copy()
    np.maximum.at(hi, k[inside], act["end"].to_numpy()[on][inside])
    lo = st_s.copy()
    lo[1:] = np.maximum(lo[1:], np.maximum.accumulate(hi)[:-1])
    return lo, np.maximum(hi, lo)


def idle_in(busy_s, busy_e, lo, hi) -> tuple[np.ndarray, np.ndarray]:
    """Idle intervals of [lo, hi) given merged busy intervals."""
    i0, i1 = np.searchsorted(busy_e, lo, side="right"), np.searchsorted(busy_s, hi, side="left")
    bs, be = np.clip(busy_s[i0:i1], lo, hi), np.clip(busy_e[i0:i1], lo, hi)
    starts = np.concatenate([[lo], be])
    ends = np.concatenate([bs, [hi]])
    keep = ends > starts
    return starts[keep], ends[keep]


def attribute(ctx, device: int, gs: np.ndarray, ge: np.ndarray, block_mask: np.ndarray) -> pd.DataFrame:
    """Per gap: ns per cause (columns CAUSES), the next activity's position in the device's
    activity frame (-1: none), its launch row (-1: none) and the longest blocking call's name."""
    tl = ctx.tl
    act = tl.gpu_activity
    on = rows_where(act["device"].to_numpy() == device)
    d_start, d_stream = act["start"].to_numpy()[on], act["stream"].to_numpy()[on]
    d_launch = ctx.activity_launch[on]
    api = tl.api_calls
    a_start, a_end = api["start"].to_numpy(), api["end"].to_numpy()
    names = classify.RowLabels(api["name"])
    is_graph = (classify.label_mask(api["name"], lambda s: "GraphLaunch" in s) if len(api)
                else np.zeros(0, bool))
    index = GapIndex(d_stream, d_launch, a_start, a_end, api["pid"].to_numpy(),
                     api["tid"].to_numpy(), block_mask, _stream_wait_rows(tl),
                     _gpu_stream_waits(tl, device))
    causes, nxt_pos, launch, blocker = index.attribute(gs, ge, d_start, a_end, is_graph)
    df = pd.DataFrame({c: causes[:, k] for k, c in enumerate(CAUSES)})
    df["next_pos"], df["launch"] = nxt_pos, launch
    labels = np.array(names.labels + [""], dtype=object)     # -1 (no blocking call): ""
    label = np.full(len(blocker), -1, np.int64)
    some = blocker >= 0
    label[some] = np.asarray(names.codes)[blocker[some]]      # no copy of the codes column
    df["blocker"] = labels[label]
    return df


def _stream_wait_rows(tl) -> np.ndarray:
    api = tl.api_calls
    if len(api) == 0:
        return np.zeros(0, dtype=np.int64)
    # decided per name, not per call: an object array of 23 M labels is 184 MB and 0.3 s
    return np.flatnonzero(classify.label_mask(api["name"], lambda n: classify.sync_kind(n) == "stream_wait_event"))


def _gpu_stream_waits(tl, device) -> pd.DataFrame:
    s = tl.syncs
    if len(s) == 0:
        return s
    return s[(s["sync_type"].astype(str) == "stream_wait_event") & (s["device"] == device)]


def host_activity(ctx, pid: int | None, s: np.ndarray, e: np.ndarray, top: int = 3) -> list[tuple[str, int]]:
    """The host work overlapping idle windows [s, e): innermost CPU ops and innermost user
    Python functions, by ns of overlap, largest first (what the host did while the GPU idled)."""
    tl = ctx.tl
    if len(s) == 0:
        return []
    ws, we = intervals.merge(s, e)
    out: dict[str, int] = {}
    r = tl.ranges
    if len(r):
        ops = np.flatnonzero(classify.in_labels(r["kind"], ("op",))
                             & ((r["pid"].to_numpy() == pid) if pid is not None else True))
        leaf = ops[~np.isin(ops, r["parent"].to_numpy()[ops])]
        _add(out, classify.labels_at(r["name"], leaf), r["start"].to_numpy()[leaf],
             r["end"].to_numpy()[leaf], ws, we)
    f = tl.python_frames
    if len(f):
        user = classify.label_mask(f["file"], lambda x: not classify.LIBRARY_CODE.search(str(x)),
                                   missing=not classify.LIBRARY_CODE.search("nan"))
        user &= (f["pid"].to_numpy() == pid) if pid is not None else True
        rows = np.flatnonzero(user)
        inner = rows[~np.isin(rows, f["parent"].to_numpy()[rows])]
        labels = np.array([f"{fn} ({fl}:{ln})" for fn, fl, ln in
                           zip(classify.labels_at(f["function"], inner),
                               classify.labels_at(f["file"], inner),
                               f["line"].to_numpy()[inner])], dtype=object)
        _add(out, labels, f["start"].to_numpy()[inner], f["end"].to_numpy()[inner], ws, we)
    return sorted(out.items(), key=lambda kv: -kv[1])[:top]


def _add(out: dict, names, rs, re_, ws, we) -> None:
    if len(names) == 0:
        return
    ov = _overlap_rows(rs, re_, ws, we)
    keep = ov > 0
    for name, ns in pd.Series(ov[keep]).groupby(names[keep]).sum().items():
        out[str(name)] = out.get(str(name), 0) + int(ns)


def _overlap_rows(rs, re_, ws, we) -> np.ndarray:
    """ns of each row [rs, re_) inside the union of merged windows [ws, we)."""
    cum = np.concatenate([[0], np.cumsum(we - ws)])

    def covered(t):
        i = np.searchsorted(ws, t, side="right")
        inside = np.where(i > 0, np.minimum(t, we[np.maximum(i - 1, 0)]) - ws[np.maximum(i - 1, 0)], 0)
        return cum[np.maximum(i - 1, 0)] + np.maximum(inside, 0) * (i > 0)

    return covered(re_) - covered(rs)

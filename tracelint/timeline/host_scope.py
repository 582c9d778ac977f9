"""What a host range holds: the API calls made inside it on its own thread, the GPU work those
calls launched, and which ranges are outermost; and, from the other side, the outermost CPU
operator around a launch call, and the op and NVTX path around any host time. Rules ask these
questions; the answers are measurement, not judgement, so they live here once instead of in
each rule."""
from __future__ import annotations

import numpy as np
import pandas as pd

from . import classify
from .codes import distinct_labels, in_order, row_codes, thread_codes
from .name_groups import per_category


def _thread_slices(api, pid, tid, start, end):
    """Per thread of the host ranges (arrays pid, tid, start, end): (that thread's api_calls
    rows sorted by start, the ranges' indexes, and per range the slice [lo, hi) of those rows
    that start inside it). Each thread's calls are sorted once, for all its ranges: the cost
    follows the calls, not ranges x calls (a scan of every call per range took 1.5 s in TL030
    on a 2 GB trace, a sort per range 0.37 s in TL036 on param_resnet)."""
    a_pid, a_tid, a_t = api["pid"].to_numpy(), api["tid"].to_numpy(), api["start"].to_numpy()
    pid, tid = np.asarray(pid, np.int64), np.asarray(tid, np.int64)
    start, end = np.asarray(start, np.int64), np.asarray(end, np.int64)
    for p, t in set(zip(pid.tolist(), tid.tolist())):  # loop over the ranges' threads
        mine = np.flatnonzero((a_pid == p) & (a_tid == t))
        mine = mine[np.argsort(a_t[mine], kind="stable")]
        ranges = np.flatnonzero((pid == p) & (tid == t))
        lo = np.searchsorted(a_t[mine], start[ranges], side="left")
        hi = np.searchsorted(a_t[mine], end[ranges], side="left")
        yield mine, ranges, lo, hi


def calls_inside(api, pid, tid, start, end) -> np.ndarray:
    """Mask over api_calls: the calls that start inside any of the host ranges given as arrays
    (pid, tid, start, end), on the range's own thread; a range holds [start, end)."""
    inside = np.zeros(len(api), dtype=bool)
    for mine, _, lo, hi in _thread_slices(api, pid, tid, start, end):
        lo, hi = lo[lo < hi], hi[lo < hi]              # ranges that hold at least one call
        cover = np.zeros(len(mine) + 1, np.int64)     # +1 where a range's slice opens, -1 closes
        np.add.at(cover, lo, 1)
        np.add.at(cover, hi, -1)
        inside[mine] = np.cumsum(cover)[:-1] > 0
    return inside


def calls_in_each(api, pid, tid, start, end) -> list[np.ndarray]:
    """For each host range (arrays pid, tid, start, end): the api_calls rows that start inside
    it on its own thread, ascending; what calls_inside() marks for that range alone."""
    out = [np.zeros(0, np.int64)] * len(np.asarray(start))
    for mine, ranges, lo, hi in _thread_slices(api, pid, tid, start, end):
        for j, a, b in zip(ranges.tolist(), lo.tolist(), hi.tolist()):
            if a < b:
                out[j] = np.sort(mine[a:b])
    return out


class Launches:
    """The GPU rows that given api_calls rows launched, for many sets of calls: launched_from()
    reads every GPU row for each set, this looks up only the calls of the set."""

    def __init__(self, launch: np.ndarray):
        launch = np.asarray(launch, np.int64)
        self._order = np.argsort(launch, kind="stable")
        self._sorted = launch[self._order]

    def by(self, calls: np.ndarray) -> np.ndarray:
        """The GPU rows launched by `calls` (api_calls rows), ascending: launched_from() with
        a mask of these calls."""
        lo = np.searchsorted(self._sorted, calls, side="left")
        n = np.searchsorted(self._sorted, calls, side="right") - lo
        lo, n = lo[n > 0], n[n > 0]
        if len(n) == 0:
            return np.zeros(0, np.int64)
        at = np.repeat(lo - np.cumsum(np.r_[0, n[:-1]]), n) + np.arange(int(n.sum()))
        return np.sort(self._order[at])


def launched_from(launch: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """Rows of a GPU table (launch: its api_calls row per GPU row, -1 unlinked) whose launch call
    is marked in the api_calls mask `calls`."""
    if len(calls) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero((launch >= 0) & calls[np.clip(launch, 0, None)])


def launched_inside(tl, table: str, ranges) -> np.ndarray:
    """Rows of the GPU table `table` launched by a call made inside any of the host ranges (rows
    with pid, tid, start, end), on the range's own thread."""
    inside = calls_inside(tl.api_calls, ranges["pid"], ranges["tid"], ranges["start"], ranges["end"])
    return launched_from(tl.launch_index(table), inside)


def first_start_inside(ranges, region) -> int:
    """When the first of `ranges` starting inside the host range `region` (a row with pid, tid,
    start, end) on its thread starts; the region's own start when none does."""
    o = ranges[(ranges["pid"] == region["pid"]) & (ranges["tid"] == region["tid"])
               & (ranges["start"] >= region["start"]) & (ranges["start"] < region["end"])]
    return int(o["start"].min()) if len(o) else int(region["start"])


def outermost(parent: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """The selected ranges with no selected ancestor (parent: a range row per row, -1 at top)."""
    def nested(row: int) -> bool:
        p = parent[row]
        while p >= 0:
            if sel[p]:
                return True
            p = parent[p]
        return False
    return np.array([row for row in np.flatnonzero(sel) if not nested(row)], dtype=np.int64)


def outer_op_names(tl, launch: np.ndarray) -> np.ndarray:
    """The outermost CPU op around each launch call ('no CPU op recorded' where none): the
    operator the user called (`aten::clone`), not the `aten::copy_` inside it."""
    out = np.full(len(launch), "no CPU op recorded", dtype=object)
    r = tl.ranges
    if len(r) == 0 or not (launch >= 0).any():
        return out
    ops = r[classify.in_labels(r["kind"], ("op",))]
    api = tl.api_calls
    li = np.clip(launch, 0, None)
    for (pid, tid), o in ops.groupby(["pid", "tid"], observed=True):  # loop over host threads
        sel = np.flatnonzero((launch >= 0) & (api["pid"].to_numpy()[li] == pid) & (api["tid"].to_numpy()[li] == tid))
        if len(sel) == 0:
            continue
        t = api["start"].to_numpy()[launch[sel]]
        todo = np.ones(len(sel), dtype=bool)
        for _, lvl in o.groupby("depth", sort=True):  # loop over nesting depths, outermost first
            lvl = lvl.sort_values("start")
            s, e = lvl["start"].to_numpy(), lvl["end"].to_numpy()
            i = np.searchsorted(s, t, side="right") - 1
            hit = todo & (i >= 0) & (t < e[np.clip(i, 0, None)])
            out[sel[hit]] = classify.labels_at(lvl["name"], i[hit])
            todo &= ~hit
    return out


def nearest_on_thread(cthr, ct, lthr, lt, after: bool) -> np.ndarray:
    """Per query (thread, time): the index in (lthr, lt) of the first item on the same thread
    at or after the time (after=True), or of the last at or before it; -1 where none. One
    sorted search over keys thread * span + time covers every thread."""
    if len(lt) == 0 or len(ct) == 0:
        return np.full(len(ct), -1, dtype=np.int64)
    t0 = int(min(lt.min(), ct.min()))
    span = np.int64(int(max(lt.max(), ct.max())) - t0 + 2)
    lk = lthr * span + (lt - t0)
    order = None if in_order(lk) else np.argsort(lk, kind="stable")   # one thread's, by time
    if order is not None:
        lk = lk[order]
    pos = np.searchsorted(lk, cthr * span + (ct - t0), side="left" if after else "right")
    pos -= not after
    pc = np.clip(pos, 0, len(lk) - 1)
    ok = (pos >= 0) & (pos < len(lk)) & (lk[pc] // span == cthr)
    return np.where(ok, pc if order is None else order[pc], -1)


def host_context(tl, t: np.ndarray, pid: np.ndarray, tid: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per host time t on its thread (pid, tid; TL005 asks for its calls' starts): the outermost
    CPU op enclosing it ('' when none) and its NVTX / annotation path ('a/b/c', iterations and
    ops left out), from time containment level by level (vectorised over the times; zero-length
    ranges enclose nothing and are skipped). Returned as (op code, the ops, path code, the
    paths)."""
    n = len(t)
    nothing = np.zeros(n, dtype=np.int64), np.array([""], dtype=object)
    r = tl.ranges
    if len(r) == 0:
        return nothing + nothing
    cat = r["name"].array    # its codes: a str per range sorted again took 0.6 s (332,000 names)
    if not isinstance(cat, pd.Categorical):
        cat = pd.Categorical(r["name"].astype(str))     # a missing name stays missing: code -1
    emit = per_category(cat.categories, classify.emit_nvtx_op)     # once per op, not per id
    norm = np.array([op if op is not None else str(c) for op, c in
                     zip(emit, cat.categories.tolist())] + [""], dtype=object)
    emitted = np.array([op is not None for op in emit] + [False], dtype=bool)
    step_name = np.array(per_category(cat.categories, classify.is_profiler_step) + [False], bool)
    codes = np.where(cat.codes >= 0, cat.codes, len(emit))
    kind = r["kind"].astype(str).to_numpy()
    oplike = (kind == "op") | ((kind == "nvtx") & emitted[codes])
    annot = np.isin(kind, ["nvtx", "annotation"]) & ~oplike & ~step_name[codes]
    rs, re_ = r["start"].to_numpy(), r["end"].to_numpy()
    rows = np.flatnonzero((oplike | annot) & (re_ > rs))
    if len(rows) == 0:
        return nothing + nothing
    cthr, rthr = thread_codes((pid, tid), (r["pid"].to_numpy()[rows], r["tid"].to_numpy()[rows]))
    depth = r["depth"].to_numpy()[rows]
    t0 = int(min(rs[rows].min(), t.min()))
    span = np.int64(int(max(re_[rows].max(), t.max())) - t0 + 2)
    qk = cthr * span + (t - t0)
    root = np.full(n, -1, dtype=np.int64)
    levels = []
    for level in np.unique(depth):  # loop over nesting levels, outermost first
        at = rows[depth == level]
        key = rthr[depth == level] * span + (rs[at] - t0)
        order = np.argsort(key, kind="stable")
        key, at = key[order], at[order]
        pos = np.searchsorted(key, qk, side="right") - 1
        c = at[np.clip(pos, 0, None)]
        hit = (pos >= 0) & (key[np.clip(pos, 0, None)] // span == cthr) & (re_[c] > t)
        levels.append(np.where(hit & annot[c], codes[c], -1))
        root = np.where((root < 0) & hit & oplike[c], c, root)
    op_code, op_names = distinct_labels(norm)          # norm's last label is "": no enclosing op
    ops = op_code[np.where(root >= 0, codes[np.maximum(root, 0)], len(norm) - 1)]
    inv, first = row_codes(*levels)  # = np.unique(mat, axis=0, return_inverse=True), faster
    uniq = np.stack(levels, axis=1)[first]
    text = np.array(["/".join(norm[c] for c in u if c >= 0) for u in uniq], dtype=object)
    path_code, path_names = distinct_labels(text)    # the join above loops over distinct paths only
    return ops, op_names, path_code[inv], path_names

"""Edits: what a fix changes in the run, applied to a replay Plan.

Each edit names what it touches by a regular expression over names (kernel, copy, API call or
host range names; searched, case-insensitive) and optional row selections, so rules can state
their fix precisely and users can ask their own questions from the command line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..timeline import classify, intervals
from .blocking import by_name
from .graph import API, RunGraph
from .replay import Plan


def _match(names: np.ndarray, pattern: str) -> np.ndarray:
    """Boolean mask of names the pattern finds (over distinct names only)."""
    rx = re.compile(pattern, re.IGNORECASE)
    return by_name(names, lambda n: rx.search(n))


def _isin(values, wanted) -> np.ndarray:
    """Rows whose value is one of wanted: a categorical decided per category (its codes)."""
    if isinstance(values, pd.Categorical):
        return classify.in_labels(values, wanted)
    return np.isin(values, list(wanted))


def _label_rank(values: pd.Categorical) -> np.ndarray:
    """Per row, the rank of its label among the labels present, in sorted order ('nan' for a
    missing one): np.unique(labels, return_inverse=True)[1] without a string per row."""
    codes = np.asarray(values.codes)
    present = np.unique(codes)
    text = [str(values.categories[c]) if c >= 0 else "nan" for c in present]
    rank = {t: i for i, t in enumerate(sorted(set(text)))}
    return np.array([rank[t] for t in text], np.int64)[np.searchsorted(present, codes)]


def _sel(n: int, rows) -> np.ndarray:
    m = np.zeros(n, bool)
    if rows is not None:
        m[np.asarray(rows, dtype=np.int64)] = True
    return m


@dataclass(frozen=True)
class Ops:
    """Which GPU ops an edit touches: every criterion given must hold (an empty Ops selects
    none). pattern: regex over names; classes: kernel classes (or copy/memset); devices;
    kernel_rows / copy_rows: rows of the Timeline's tables (what rules know)."""

    pattern: str | None = None
    classes: tuple = ()
    devices: tuple = ()
    kinds: tuple = ()
    kernel_rows: tuple = ()
    copy_rows: tuple = ()

    def mask(self, g: RunGraph) -> np.ndarray:
        m = np.ones(g.n_gpu, bool)
        given = False
        if self.pattern:
            m &= _match(g.g_name, self.pattern)
            given = True
        for vals, arr in ((self.classes, g.g_class), (self.devices, g.g_device), (self.kinds, g.g_kind)):
            if vals:
                m &= _isin(arr, vals)
                given = True
        if self.kernel_rows or self.copy_rows:
            rows = np.zeros(g.n_gpu, bool)
            for table, sel in (("kernels", self.kernel_rows), ("copies", self.copy_rows)):
                if sel:
                    rows |= (g.g_table == table) & np.isin(g.g_row, np.asarray(sel, dtype=np.int64))
            m &= rows
            given = True
        return m & given


@dataclass(frozen=True)
class Scale:
    """Scale the duration of matching GPU ops, API calls and host ranges by factor.

    Host ranges (framework ops, NVTX) scale the host work between calls that they cover.
    ops: GPU ops selected otherwise (class, device, table rows), besides the pattern.
    """

    pattern: str | None
    factor: float
    ops: Ops | None = None
    gpu_only: bool = False
    with_launch: bool = False      # the selected ops' launch calls scale too (op removed)

    def apply(self, g: RunGraph, p: Plan) -> None:
        p.writable("g_dur", "h_dur")
        gm = self.ops.mask(g) if self.ops else np.zeros(g.n_gpu, bool)
        if self.pattern:
            gm |= _match(g.g_name, self.pattern)
        p.g_dur[gm] = np.round(p.g_dur[gm] * self.factor).astype(np.int64)
        if self.with_launch:
            calls = g.g_launch[gm][g.g_launch[gm] >= 0]
            p.h_dur[calls] = np.round(p.h_dur[calls] * self.factor).astype(np.int64)
        if self.gpu_only or not self.pattern:
            return
        hm = _match(g.h_name, self.pattern) & (g.h_kind == API)
        p.h_dur[hm] = np.round(p.h_dur[hm] * self.factor).astype(np.int64)
        _scale_host_work(g, p, _match(g.r_name, self.pattern) & ~g.r_step, self.factor)


def _scale_host_work(g: RunGraph, p: Plan, ranges: np.ndarray, factor: float) -> None:
    """Scale the part of each host gap (time between calls) that matching ranges cover."""
    if not ranges.any():
        return
    p.writable("h_gap")
    after = (g.h_prev >= 0) & ~g.h_inside
    q = np.maximum(g.h_prev, 0)
    lo, hi = g.h_end_of(q), g.h_start
    for t in np.unique(g.r_thread[ranges]):
        rs, re_ = intervals.merge(g.r_start[ranges & (g.r_thread == t)], g.r_end[ranges & (g.r_thread == t)])
        on = np.flatnonzero(after & (g.h_thread == t) & (hi > lo))
        cov = intervals.overlap_each(lo[on], hi[on], rs, re_)
        p.h_gap[on] -= np.round(cov * (1.0 - factor)).astype(np.int64)


@dataclass(frozen=True)
class RemoveHostWork:
    """Remove the host work inside matching ranges (Scale to 0 of their host time only).

    rows: rows of the Timeline's ranges table to remove besides (or instead of) the pattern."""

    pattern: str | None = None
    rows: tuple = ()

    def apply(self, g: RunGraph, p: Plan) -> None:
        m = _match(g.r_name, self.pattern) if self.pattern else np.zeros(len(g.r_name), bool)
        if self.rows:
            m |= _sel(len(g.r_name), self.rows)
        _scale_host_work(g, p, m & ~g.r_step, 0.0)


@dataclass(frozen=True)
class RemoveSync:
    """Matching blocking calls no longer wait for the GPU: the host continues at once
    (each keeps its return latency as its own cost).

    within: only calls inside host ranges matching this pattern (e.g. aten::item).
    host_items: indices of host items instead of the pattern (None: not given).
    """

    pattern: str | None = None
    within: str | None = None
    host_items: tuple | None = None

    def apply(self, g: RunGraph, p: Plan) -> None:
        m = _sel(g.n_host, self.host_items)
        if self.pattern:
            m |= _match(g.h_name, self.pattern)
        elif self.host_items is None:      # no pattern, no items: every call (within ranges)
            m[:] = True
        if self.within:
            m &= _inside_ranges(g, _match(g.r_name, self.within))
        m &= p.h_target >= 0
        p.writable("h_target", "h_dur")
        p.h_target[m] = -1
        p.h_dur[m] = np.minimum(p.h_dur[m], p.h_ret[m])
        _drop_extra_waits(p, m)


@dataclass(frozen=True)
class NonBlocking:
    """Selected host calls (rows of the Timeline's api_calls table: what rules know) no longer
    wait for the GPU and cost at most `cost_ns` each, e.g. a copy from pinned memory with
    non_blocking=True (no staging, no stream synchronisation after it); 0 removes the calls'
    host cost. The GPU work they issued keeps its place in stream order."""

    api_rows: tuple
    cost_ns: int = 5_000

    def apply(self, g: RunGraph, p: Plan) -> None:
        m = np.isin(g.h_api_row, np.asarray(self.api_rows, dtype=np.int64)) & (g.h_api_row >= 0)
        p.writable("h_target", "h_dur")
        p.h_target[m] = -1
        p.h_dur[m] = np.minimum(p.h_dur[m], max(int(self.cost_ns), 0))
        _drop_extra_waits(p, m)


def _drop_extra_waits(p: Plan, m: np.ndarray) -> None:
    """The selected host items wait for no extra GPU ops. Walks the items that have extra
    waits (device syncs), not the selection: a Python step per selected call was 0.8 s for
    the synchronize calls of 3 M kernels."""
    for i in [k for k in p.h_extra if m[k]]:
        del p.h_extra[i]


def _inside_ranges(g: RunGraph, ranges: np.ndarray) -> np.ndarray:
    """Host items that start inside one of the given ranges on their thread."""
    out = np.zeros(g.n_host, bool)
    for t in np.unique(g.r_thread[ranges]):
        rs, re_ = intervals.merge(g.r_start[ranges & (g.r_thread == t)], g.r_end[ranges & (g.r_thread == t)])
        on = np.flatnonzero(g.h_thread == t)
        k = np.searchsorted(rs, g.h_start[on], side="right") - 1
        out[on] = (k >= 0) & (g.h_start[on] < re_[np.maximum(k, 0)])
    return out


@dataclass(frozen=True)
class CopyAtRate:
    """Selected copies (rows of the Timeline's copies table, with their bytes) move their
    bytes at `gbps`: each takes bytes / rate, never longer than traced. What a pinned copy
    could reach where the trace measured a pageable one (whatif.pinned)."""

    copy_rows: tuple
    nbytes: tuple
    gbps: float

    def apply(self, g: RunGraph, p: Plan) -> None:
        rows = np.asarray(self.copy_rows, dtype=np.int64)
        order = np.argsort(rows)
        ops = np.flatnonzero((g.g_table == "copies") & np.isin(g.g_row, rows))
        if not len(ops) or self.gbps <= 0:
            return
        k = order[np.searchsorted(rows[order], g.g_row[ops])]
        at_rate = np.ceil(np.asarray(self.nbytes, dtype=np.float64)[k] / self.gbps).astype(np.int64)
        p.writable("g_dur")
        p.g_dur[ops] = np.minimum(p.g_dur[ops], np.maximum(at_rate, 1))


@dataclass(frozen=True)
class AsyncCopies:
    """Matching copies run on their own stream, prefetched from pinned memory: they no
    longer queue behind or block compute, and the host does not wait for them. call_cost_ns:
    their launching calls then cost at most this (an async copy from pinned memory returns at
    once; from pageable memory the call lasted as long as the driver's staging, which the
    replay would otherwise keep as host work even where the copy ends after the call)."""

    pattern: str | None = None
    kinds: tuple = ()              # copy kinds (H2D, D2H, ...)
    ops: Ops | None = None
    call_cost_ns: int | None = None

    def apply(self, g: RunGraph, p: Plan) -> None:
        m = self.ops.mask(g) if self.ops else np.zeros(g.n_gpu, bool)
        if self.pattern:
            m |= _match(g.g_name, self.pattern)
        if self.kinds:
            m |= _isin(g.g_kind, self.kinds)
        m &= g.g_table == "copies"
        if self.call_cost_ns is not None:
            calls = g.g_launch[m][g.g_launch[m] >= 0]
            p.writable("h_dur")
            p.h_dur[calls] = np.minimum(p.h_dur[calls], max(int(self.call_cost_ns), 0))
        spred, qgap = p.g_spred.copy(), p.g_qgap.copy()
        _detach(g, p, m)
        # data still flows: an upload is waited for by the op after it on its old stream, a
        # download (or other copy) still waits for the op before it; nothing else waits
        h2d = m & (g.g_kind == "H2D")
        succ = np.full(g.n_gpu, -1, dtype=np.int64)
        has = spred >= 0
        succ[spred[has]] = np.flatnonzero(has)
        up = np.flatnonzero(h2d & (succ >= 0))
        up = up[~m[succ[up]]]
        p.writable("g_xpred", "g_xgap")
        p.g_xpred[succ[up]], p.g_xgap[succ[up]] = up, 0
        down = np.flatnonzero(m & ~h2d & (spred >= 0))
        down = down[~m[spred[down]]]
        p.g_xpred[down], p.g_xgap[down] = spred[down], np.minimum(qgap[down], 1_000)


@dataclass(frozen=True)
class Overlap:
    """Selected ops (e.g. a collective) overlap with compute: own stream, nothing waits for
    them and they wait for nothing but their launch and their own stream."""

    ops: Ops

    def apply(self, g: RunGraph, p: Plan) -> None:
        m = self.ops.mask(g)
        _detach(g, p, m)
        p.writable("g_xpred")
        p.g_xpred[m] = -1


def uploads_only(g: RunGraph, p: Plan) -> np.ndarray:
    """Host calls whose wait a moved copy may drop: only uploads (the host already has the
    data); a download's caller still needs the data, so it keeps waiting."""
    t = np.maximum(p.h_target, 0)
    return (p.h_target >= 0) & ((g.g_table[t] != "copies") | (g.g_kind[t] == "H2D"))


def _detach(g: RunGraph, p: Plan, m: np.ndarray) -> None:
    if not m.any():
        return
    _restream(g, p, m)
    p.writable("g_xpred")
    p.g_xpred[np.isin(p.g_xpred, np.flatnonzero(m)) & ~m] = -1
    blocked_on = np.isin(p.h_target, np.flatnonzero(m))
    own_call = np.zeros(g.n_host, bool)
    own_call[g.g_launch[m][g.g_launch[m] >= 0]] = True
    RemoveSync(host_items=tuple(np.flatnonzero(blocked_on & own_call & uploads_only(g, p)))).apply(g, p)


def _restream(g: RunGraph, p: Plan, moved: np.ndarray) -> None:
    """Put the moved ops on a stream of their own per device; relink both streams' order.

    From the plan's streams, not the graph's: an earlier edit's moved ops stay where it put
    them (two fixes that each moved one GPU's uploads, replayed together, put the first GPU's
    back in its compute stream's order)."""
    # one stream per device and direction: each direction has one copy engine and one link,
    # numbered below every stream of the trace
    kind = _label_rank(g.g_kind)
    below = min(int(g.g_stream.min()), 0) - 1 if g.n_gpu else -1
    skey = p.g_stream = np.where(moved, below - kind, p.g_stream)   # a new array: the plan's own
    order = np.lexsort((g.g_start, skey, g.g_device))
    dev, st = g.g_device[order], skey[order]
    same = np.r_[False, (dev[1:] == dev[:-1]) & (st[1:] == st[:-1])]
    new_pred = np.where(same, np.r_[-1, order[:-1]], -1)
    changed = order[new_pred != p.g_spred[order]]
    p.writable("g_spred", "g_qgap")
    p.g_spred[order] = new_pred
    p.g_qgap[changed] = np.minimum(p.g_qgap[changed], 1_000)


@dataclass(frozen=True)
class Fuse:
    """Runs of consecutive matching kernels on a stream become one launch (a fused kernel
    or a graph launch): the run's GPU time is kept, the launches after the first and the
    host work between them disappear, and the GPU runs the pieces back to back."""

    pattern: str | None = None
    ops: Ops | None = None
    min_run: int = 2

    def apply(self, g: RunGraph, p: Plan) -> None:
        m = self.ops.mask(g) if self.ops else np.zeros(g.n_gpu, bool)
        if self.pattern:
            m |= _match(g.g_name, self.pattern)
        m &= g.g_table == "kernels"
        p.writable("g_dur", "g_launch", "g_xpred", "g_qgap", "h_dur", "h_gap")
        first, last = _runs(g, m)
        fused = last - first + 1 >= self.min_run
        first, last = first[fused], last[fused]
        if not len(first):
            return
        # GPU: the run's first op carries the run's time; the ops after it lose their launch,
        # their own wait and their queue gap (runs are disjoint: all of them at once)
        total = np.r_[0, np.cumsum(p.g_dur)]
        p.g_dur[first] = total[last + 1] - total[first]
        rest = _covered(g.n_gpu, first + 1, last + 1)
        p.g_dur[rest] = 0
        p.g_launch[rest] = -1
        p.g_xpred[rest] = -1
        p.g_qgap[rest] = 0
        # host: the API calls after the first launch up to the last one (same thread) go, but
        # for those something waits on; iteration markers stay where they are
        la, lb = g.g_launch[first], g.g_launch[last]
        same = (la >= 0) & (lb > la)
        same[same] = g.h_thread[la[same]] == g.h_thread[lb[same]]
        span = _covered(g.n_host, la[same] + 1, lb[same] + 1) & (g.h_kind == API)
        p.h_dur[span & (p.h_target < 0)] = 0
        p.h_gap[span & ~np.asarray(g.h_inside, bool)] = 0


def _covered(n: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Mask of n items inside any of the ranges [lo, hi) (a difference array: no loop)."""
    edge = np.zeros(n + 1, np.int64)
    np.add.at(edge, lo, 1)
    np.add.at(edge, hi, -1)
    return np.cumsum(edge[:-1]) > 0


def _runs(g: RunGraph, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and last op of each run of consecutive selected ops on one stream (ops are in
    stream order): a run's last op is one that no selected op continues, found with numpy
    (stepping through every run in Python cost 0.2 s of the reference's savings, and fusing
    them one by one 0.28 s more)."""
    same = np.r_[False, (g.g_device[1:] == g.g_device[:-1]) & (g.g_stream[1:] == g.g_stream[:-1])]
    cont = m & same & np.r_[False, m[:-1]]
    return np.flatnonzero(m & ~cont), np.flatnonzero(m & ~np.r_[cont[1:], False])


@dataclass
class EditSet:
    """Edits applied in order to a fresh plan."""

    edits: list = field(default_factory=list)

    def plan(self, g: RunGraph) -> Plan:
        p = Plan.of(g)
        for e in self.edits:
            e.apply(g, p)
        return p

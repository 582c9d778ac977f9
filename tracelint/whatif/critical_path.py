"""The critical path of a replay: the chain of nodes and waits that set the end time.

Per iteration, the path is the part of the one trace path inside the iteration's window.

Walking back from the last node to end, each step follows the dependency that bound the node
(found with numpy after the replay); every nanosecond of the replayed span lands in exactly one
segment, so the breakdown by class adds up to the span.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..jit import Loop
from ..timeline.categories import sorted_ranks
from .indexes import index_dtype
from .replay import Replay
from .sweep import COMPILE_FROM

#: Breakdown classes, in display order. GPU compute is split by kernel class ("gpu:gemm").
HOST_CLASSES = ("host launch", "host blocked in sync", "host other")
OTHER_CLASSES = ("communication", "copies", "idle")
#: Walk steps labelled, and path segments summed, at a time: bounded temporaries.
SEGMENT_CHUNK = 1 << 19
_I32_MAX = np.iinfo(np.int32).max
_HOST_ROLE_CLASS = {"launch": "host launch", "copy": "host launch", "memset": "host launch",
                    "sync": "host blocked in sync"}


@dataclass
class CriticalPath:
    """Segments of the path in time order: start, duration, and the codes of their class and
    item name (-1: no name) into `classes` and `items`. Segments do not overlap, so ends are
    in order too. Durations are int32 where they fit and class codes int16 (a few dozen
    classes): tens of millions of segments at 10 M kernels."""

    start: np.ndarray
    dur: np.ndarray
    cls: np.ndarray
    item: np.ndarray
    classes: list[str]
    items: list[str]

    @property
    def end(self) -> np.ndarray:
        return self.start + self.dur

    @property
    def length_ns(self) -> int:
        return int(self.dur.sum(dtype=np.int64))

    def _chunks(self, lo: int | None, hi: int | None):
        """Durations, class codes and item codes of the segments inside [lo, hi), a bounded
        slice at a time (segments are in time order, so a window is a slice): the path of a
        10 M-kernel export has tens of millions of segments, and temporaries over all of
        them set the what-if stage's peak."""
        s = self.start
        a, b = 0, len(s)
        if lo is not None:
            k = int(np.searchsorted(s, lo, side="right")) - 1     # the first segment ending
            a = k if k >= 0 and s[k] + self.dur[k] > lo else k + 1  # after lo
            b = int(np.searchsorted(s, hi, side="left"))
        for k in range(a, max(a, b), SEGMENT_CHUNK):
            z = min(k + SEGMENT_CHUNK, b)
            if lo is None:
                d = self.dur[k:z].astype(np.int64)
            else:
                ss = s[k:z]
                ee = ss + self.dur[k:z]
                d = np.minimum(ee, hi) - np.maximum(ss, lo)
            yield np.maximum(d, 0), self.cls[k:z], self.item[k:z]

    def breakdown(self, lo: int | None = None, hi: int | None = None) -> dict[str, int]:
        """ns per class, largest first (ties by name), optionally only the part of the path
        inside [lo, hi)."""
        # float sums of integer ns are exact below 2**53 ns (104 days)
        ns = np.zeros(len(self.classes))
        for d, cc, _ in self._chunks(lo, hi):
            ns += np.bincount(cc, weights=d, minlength=len(self.classes))
        ns = ns.astype(np.int64)
        shown = [k for k in sorted(range(len(self.classes)), key=self.classes.__getitem__)
                 if ns[k] > 0]
        shown.sort(key=lambda k: -ns[k])
        return {self.classes[k]: int(ns[k]) for k in shown}

    def top_items(self, n: int = 10, lo: int | None = None, hi: int | None = None) -> list[dict]:
        """The classes and names that take most time on the path (all their pieces summed),
        optionally only inside [lo, hi); ties in order of first appearance."""
        width = len(self.items) + 1
        keys, sums, counts = [], [], []        # per slice: its (class, item) pairs in order of
        for d, cc, ic in self._chunks(lo, hi):  # first appearance, their ns and counts
            named = ic >= 0                      # a segment without a name is not an item
            key = cc[named].astype(np.int64)
            key *= width
            key += ic[named]
            pair, first = pd.factorize(key)
            keys.append(first)
            sums.append(np.bincount(pair, weights=d[named], minlength=len(first)))
            counts.append(np.bincount(pair, minlength=len(first)))
        if not keys:
            return []
        # the slices' pairs in order are every pair in order of first appearance
        pair, first = pd.factorize(np.concatenate(keys))
        if not len(first):
            return []
        ns = np.bincount(pair, weights=np.concatenate(sums), minlength=len(first)).astype(np.int64)
        count = np.bincount(pair, weights=np.concatenate(counts), minlength=len(first)).astype(np.int64)
        shown = np.flatnonzero(ns > 0)
        shown = shown[np.argsort(-ns[shown], kind="stable")][:n]
        return [{"name": self.items[first[k] % width], "class": self.classes[first[k] // width],
                 "ns": int(ns[k]), "count": int(count[k])} for k in shown]

    def to_dict(self, span_ns: int, iterations: dict[int, tuple[int, int]] | None = None,
                top: int = 10) -> dict:
        """Breakdown and top items; per iteration, the part of the path inside the iteration's
        window (its host step range, replayed), so iterations add up along the one path."""
        return {"length_ns": self.length_ns, "span_ns": int(span_ns),
                "breakdown_ns": self.breakdown(), "top_items": self.top_items(top),
                "iterations": [{"step": k, "start_ns": int(a), "end_ns": int(b),
                                "length_ns": int(b - a), "breakdown_ns": self.breakdown(a, b),
                                "top_items": self.top_items(5, a, b)}
                               for k, (a, b) in (iterations or {}).items()]}


def _bindings(r: Replay):
    """For each GPU op: 0 launch, 1 stream, 2 other stream, -1 anchored; for each host end:
    the GPU op it waited for or -1 (own duration)."""
    g, p = r.graph, r.plan
    gs, ge, hs, he = r.g_start, r.g_end, r.h_start, r.h_end
    # the constraint that gives each op its start; later ones win, so on ties the GPU side
    # (another stream, then the stream) is preferred over the launch: a queued op waits for
    # the GPU, not the host. One constraint at a time (10 M ops: no 3 x n matrix).
    gb = np.full(g.n_gpu, -1, dtype=np.int8)
    for k, (pred, src, off) in enumerate(((p.g_launch, hs, p.g_lat), (p.g_spred, ge, p.g_qgap),
                                          (p.g_xpred, ge, p.g_xgap))):
        ok = np.flatnonzero(pred >= 0)
        gb[ok[src[pred[ok]] + off[ok] == gs[ok]]] = k
    hb = np.full(g.n_host, -1, dtype=index_dtype(g.n_gpu))
    t = p.h_target >= 0
    blocked = t & (he > hs + p.h_ret)
    hb[blocked] = p.h_target[blocked]
    for i, xs in p.h_extra.items():
        if blocked[i]:
            hb[i] = max([hb[i], *xs], key=lambda j: ge[j])
    return gb, hb


def _walk(node, i, lo, ge, hs, he, gb, hb, prev, inside, launch, spred, xpred, kinds, idx):
    """Follow the bindings back from (node, i) until a step's last segment starts at or before
    lo or has no predecessor; write the steps into kinds, idx while they fit and return how many
    there are (so a caller can count first, then fill)."""
    n, cap = 0, len(kinds)
    while True:
        if n < cap:
            kinds[n] = node
            idx[n] = i
        n += 1
        if node == _G:
            b = gb[i]
            if b == 0:
                i = launch[i]
                last, node = hs[i], _HS
            elif b == 1 or b == 2:
                i = spred[i] if b == 1 else xpred[i]
                last = ge[i]
            else:
                break
        elif node == _HE:
            t = hb[i]
            if t >= 0:
                last, node, i = ge[t], _G, t
            else:
                last, node = hs[i], _HS
        else:
            q = prev[i]
            if q < 0:
                break
            if inside[i]:
                last, i = hs[q], q
            else:
                last, node, i = he[q], _HE, q
        if last <= lo:
            break
    return n


#: The walk, compiled on big graphs (tracelint.jit).
WALK = Loop(_walk, COMPILE_FROM)
#: Nodes up to which a plain walk gets room for every node and runs once (9 bytes a node).
PLAIN_WALK_ROOM = 1 << 22


_UNCODED = -2         # _Vocab.codes: a category not labelled yet


class _Vocab:
    """Labels numbered once each, whichever column they come from (a name that is both a call
    and a range is one item)."""

    def __init__(self):
        self.labels: list[str] = []
        self._code: dict[str, int] = {}

    def of(self, label: str) -> int:
        code = self._code.get(label)
        if code is None:
            code = self._code[label] = len(self.labels)
            self.labels.append(label)
        return code

    def codes(self, values: pd.Categorical, fn=str, missing: int = -1):
        """A function from rows of `values` to the code of fn(label) of each, decided once per
        category and only for the categories on the path (it is labelled a slice at a time):
        the 332,000 range names of an emit_nvtx-scale export were each labelled, twice, for the
        few hundred on the path. `missing` where a row has no label. Codes are handed out in
        the order the slices meet the labels: see in_label_order."""
        cats = values.categories
        lut = np.full(len(cats) + 1, _UNCODED, np.int32)
        lut[-1] = missing
        codes = np.asarray(values.codes)

        def of_rows(rows: np.ndarray) -> np.ndarray:
            c = codes[rows]
            c = np.where(c >= 0, c, len(lut) - 1)
            new = np.unique(c[lut[c] == _UNCODED])
            if len(new):
                lut[new] = [self.of(fn(str(x))) for x in cats[new].tolist()]
            return lut[c]
        return of_rows

    def in_label_order(self, codes: np.ndarray) -> list[str]:
        """Renumbers `codes` in place so that code order is label order and returns the labels:
        the path's codes are then the same however it was sliced."""
        labels, rank = sorted_ranks(self.labels, codes.dtype)   # code -1 (no label) stays -1
        for a in range(0, len(codes), SEGMENT_CHUNK):      # bounded temporaries
            part = codes[a:a + SEGMENT_CHUNK]
            part[...] = rank[part]
        return labels


def _gpu_class(c: str) -> str:
    if c == "communication":
        return "communication"
    return "copies" if c in ("copy", "memset") else "gpu:" + c


_G, _HE, _HS = 0, 1, 2       # a step of the walk: a GPU op, a host item's end, its start


class _Walker:
    """Walks back along the bindings of one replay: the loop only follows the chain (which node
    bound which), and the segments of every step are made afterwards with numpy."""

    def __init__(self, r: Replay):
        p = r.plan
        self.gb, self.hb = _bindings(r)
        self.r = r
        self.launch, self.spred, self.xpred = p.g_launch, p.g_spred, p.g_xpred

    def walk(self, node: str, i: int, lo: int) -> CriticalPath:
        kinds, idx = self._chase({"g": _G, "he": _HE, "hs": _HS}[node], i, lo)
        return self._segments(kinds, idx, lo)

    def _chase(self, node: int, i: int, lo: int) -> tuple[np.ndarray, np.ndarray]:
        """The steps from the end back to lo: (kind, node index) each, in walk order."""
        r, g = self.r, self.r.graph
        args = (node, i, lo, r.g_end, r.h_start, r.h_end, self.gb, self.hb, g.h_prev,
                np.ascontiguousarray(g.h_inside, dtype=bool), self.launch, self.spred, self.xpred)
        size = g.n_gpu + 2 * g.n_host       # the walk visits a node at most once (a DAG)
        # a small graph: room for every node, one pass; a big one (or compiled): count, then
        # fill exactly, with no array of every node (56 M at 10 M kernels)
        cap = 0 if size > PLAIN_WALK_ROOM or WALK.use_compiled(size) else size + 1
        at = index_dtype(max(g.n_gpu, g.n_host))
        kinds, idx = np.empty(cap, np.int8), np.empty(cap, at)
        n = WALK(size, *args, kinds, idx)
        if n > cap:
            kinds, idx = np.empty(n, np.int8), np.empty(n, at)
            WALK(size, *args, kinds, idx)
        return kinds[:n], idx[:n]

    def _segments(self, kinds: np.ndarray, idx: np.ndarray, lo: int) -> CriticalPath:
        """Each step's segments (a GPU step adds its op, then the wait before it; a host step
        the wait before it), written straight into time order: start, end, class and item
        codes. One array each, so a path of tens of millions of segments is not copied."""
        r, g = self.r, self.r.graph
        gs, ge, hs, he = r.g_start, r.g_end, r.h_start, r.h_end
        classes, items = _Vocab(), _Vocab()
        has_op = kinds == _G
        # walk order is (op, wait) per GPU step; time order is the walk reversed: each step's
        # wait segment is at m - 1 - (cumulative width - 1), computed in place (27 M steps)
        wait_at = np.cumsum(has_op, dtype=index_dtype(2 * len(has_op)))
        wait_at += np.arange(1, len(has_op) + 1, dtype=wait_at.dtype)
        m = int(wait_at[-1]) if len(wait_at) else 0
        np.subtract(m, wait_at, out=wait_at)
        del has_op
        S, D = np.empty(m, np.int64), np.empty(m, np.int32)     # D: int64 once one needs it
        C, It = np.empty(m, np.int16), np.empty(m, np.int32)    # classes: a fixed few dozen

        def put(at, start, end, cls, item) -> None:
            """Segments [max(start, lo), end) at positions `at`, as start and duration."""
            nonlocal D
            start = np.maximum(start, lo)
            dur = np.maximum(end - start, 0)
            if D.dtype != np.int64 and len(dur) and int(dur.max()) > _I32_MAX:
                D = D.astype(np.int64)
            S[at], D[at], C[at], It[at] = start, dur, cls, item
        host_class = lambda x: _HOST_ROLE_CLASS.get(x, "host other")  # noqa: E731
        op_class = classes.codes(g.g_class, _gpu_class, classes.of(_gpu_class("nan")))
        op_name = items.codes(g.g_name)
        call_name = items.codes(g.h_name)
        role_class = classes.codes(g.h_role, host_class, classes.of("host other"))
        work_name = items.codes(g.h_name, lambda x: x or "host work")
        gap_name = items.codes(g.h_gap_owner, lambda x: x or "host work between calls")
        label = {text: (classes.of(c), items.of(text)) for c, text in (
            ("host launch", "launch latency"), ("idle", "GPU waits"),
            ("idle", "before first activity"), ("idle", "before thread start"))}
        sync, other = classes.of("host blocked in sync"), classes.of("host other")
        for a in range(0, len(kinds), SEGMENT_CHUNK):    # bounded temporaries, in place
            kk, ii, wa = kinds[a:a + SEGMENT_CHUNK], idx[a:a + SEGMENT_CHUNK], \
                wait_at[a:a + SEGMENT_CHUNK]
            k = np.flatnonzero(kk == _G)
            i = ii[k]
            put(wa[k] + 1, gs[i], ge[i], op_class(i), op_name(i))
            b = self.gb[i]
            for sel, start, text in (
                    (b == 0, lambda j: hs[self.launch[j]], "launch latency"),
                    (b == 1, lambda j: ge[self.spred[j]], "GPU waits"),
                    (b == 2, lambda j: ge[self.xpred[j]], "GPU waits"),
                    (b < 0, lambda j: lo, "before first activity")):
                j = i[sel]
                put(wa[k[sel]], start(j), gs[j], *label[text])
            k = np.flatnonzero(kk == _HE)
            i = ii[k]
            t = self.hb[i]
            w, o = t >= 0, t < 0
            put(wa[k[w]], ge[t[w]], he[i[w]], sync, call_name(i[w]))
            put(wa[k[o]], hs[i[o]], he[i[o]], role_class(i[o]), work_name(i[o]))
            k = np.flatnonzero(kk == _HS)
            i = ii[k]
            q = g.h_prev[i]
            first, nested = q < 0, (q >= 0) & g.h_inside[i]
            after = (q >= 0) & ~g.h_inside[i]
            put(wa[k[first]], lo, hs[i[first]], *label["before thread start"])
            qn = q[nested]
            put(wa[k[nested]], hs[qn], hs[i[nested]], role_class(qn), work_name(qn))
            qa = q[after]
            put(wa[k[after]], he[qa], hs[i[after]], other, gap_name(i[after]))
        keep = D > 0
        if not keep.all():            # one array at a time: never two full copies at once
            S = S[keep]
            D = D[keep]
            C = C[keep]
            It = It[keep]
        return CriticalPath(S, D, C, It, classes.in_label_order(C), items.in_label_order(It))


def critical_path(r: Replay) -> CriticalPath:
    """The path that ends with the last GPU op or driving thread's call (see Replay.work_end)."""
    g = r.graph
    host = _last_end(r.h_end, g.h_driving if g.n_gpu or g.h_driving.any() else None)
    if not g.n_gpu and host is None:
        z = np.zeros(0, np.int64)
        return CriticalPath(z, z, z.astype(np.int16), z.astype(np.int32), [], [])
    if g.n_gpu and (host is None or r.g_end.max() >= r.h_end[host]):
        node, i = "g", int(np.argmax(r.g_end))
    else:
        node, i = "he", host
    return _Walker(r).walk(node, i, g.span_start)


def _last_end(end: np.ndarray, among: np.ndarray | None) -> int | None:
    """The first item with the latest end among the items `among` selects (every item when
    None), or None when it selects none. Without a list of the selected items when all are
    (a trace whose threads all drive the GPU: 23 M items at 10 M kernels)."""
    if among is None or among.all():
        return int(np.argmax(end)) if len(end) else None
    sel = np.flatnonzero(among)
    return int(sel[np.argmax(end[sel])]) if len(sel) else None

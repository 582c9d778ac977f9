"""The critical path of a replay: the chain of nodes and waits that set the end time.

Per iteration, the path is the part of the one trace path inside the iteration's window.

Walking back from the last node to end, each step follows the dependency that bound the node
(found with numpy after the replay); every nanosecond of the replayed span lands in exactly one
segment, so the breakdown by class adds up to the span.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .replay import Replay

#: Breakdown classes, in display order. GPU compute is split by kernel class ("gpu:gemm").
HOST_CLASSES = ("host launch", "host blocked in sync", "host other")
OTHER_CLASSES = ("communication", "copies", "idle")
_HOST_ROLE_CLASS = {"launch": "host launch", "copy": "host launch", "memset": "host launch",
                    "sync": "host blocked in sync"}


@dataclass
class CriticalPath:
    """Segments of the path in time order: (start, end, class, item name)."""

    start: np.ndarray
    end: np.ndarray
    cls: np.ndarray
    item: np.ndarray

    @property
    def length_ns(self) -> int:
        return int((self.end - self.start).sum())

    def _clip(self, lo: int | None, hi: int | None):
        """Durations, classes and items of the segments inside [lo, hi) (segments are in
        time order, so a window is a slice)."""
        s, e, c, it = self.start, self.end, self.cls, self.item
        if lo is not None:
            a, b = np.searchsorted(e, lo, side="right"), np.searchsorted(s, hi, side="left")
            s, e, c, it = np.maximum(s[a:b], lo), np.minimum(e[a:b], hi), c[a:b], it[a:b]
        return np.maximum(e - s, 0), c, it

    def breakdown(self, lo: int | None = None, hi: int | None = None) -> dict[str, int]:
        """ns per class, optionally only the part of the path inside [lo, hi)."""
        d, c, _ = self._clip(lo, hi)
        agg = pd.Series(d).groupby(c).sum()
        agg = agg[agg > 0].sort_values(ascending=False, kind="stable")
        return {str(k): int(v) for k, v in agg.items()}

    def top_items(self, n: int = 10, lo: int | None = None, hi: int | None = None) -> list[dict]:
        """The classes and names that take most time on the path (all their pieces summed),
        optionally only inside [lo, hi)."""
        d, c, it = self._clip(lo, hi)
        if not len(d):
            return []
        df = pd.DataFrame({"cls": c, "item": it, "d": d})
        agg = df.groupby(["cls", "item"], sort=False)["d"].agg(["sum", "size"])
        agg = agg[agg["sum"] > 0].sort_values("sum", ascending=False, kind="stable").head(n)
        return [{"name": str(item), "class": str(cls), "ns": int(r["sum"]), "count": int(r["size"])}
                for (cls, item), r in agg.iterrows()]

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
    neg = np.int64(-(1 << 62))
    cand = np.full((3, g.n_gpu), neg, dtype=np.int64)
    for k, (pred, src, off) in enumerate(((p.g_launch, hs, p.g_lat), (p.g_spred, ge, p.g_qgap),
                                          (p.g_xpred, ge, p.g_xgap))):
        ok = pred >= 0
        cand[k, ok] = src[pred[ok]] + off[ok]
    # prefer the GPU-side constraint on ties (a queued op waits for the GPU, not the host)
    gb = 2 - np.argmax(cand[::-1] == gs, axis=0) if g.n_gpu else np.zeros(0, np.int64)
    gb = np.where((cand == gs).any(axis=0), gb, -1)
    hb = np.full(g.n_host, -1, dtype=np.int64)
    t = p.h_target >= 0
    blocked = t & (he > hs + p.h_ret)
    hb[blocked] = p.h_target[blocked]
    for i, xs in p.h_extra.items():
        if blocked[i]:
            hb[i] = max([hb[i], *xs], key=lambda j: ge[j])
    return gb, hb


def _mv(a: np.ndarray, dtype=np.int64) -> memoryview:
    return memoryview(np.ascontiguousarray(a, dtype=dtype))


class _Classes:
    """Breakdown class of node i, computed from its role/kernel class on access."""

    def __init__(self, values: np.ndarray, fn):
        self.values, self.fn, self.memo = values, fn, {}

    def __getitem__(self, i: int) -> str:
        v = self.values[i]
        c = self.memo.get(v)
        if c is None:
            c = self.memo[v] = self.fn(v)
        return c


class _Walker:
    """Walks back along the bindings of one replay."""

    def __init__(self, r: Replay):
        g, p = r.graph, r.plan
        gb, hb = _bindings(r)
        self.r = r
        # memoryviews, not lists: items index as Python ints without a boxed copy of every
        # node (the walk visits only the nodes on the path)
        self.gs, self.ge = _mv(r.g_start), _mv(r.g_end)
        self.hs, self.he = _mv(r.h_start), _mv(r.h_end)
        self.g_cls = _Classes(g.g_class, lambda c: "gpu:" + c if c not in (
            "communication", "copy", "memset") else ("communication" if c == "communication"
                                                     else "copies"))
        self.h_cls = _Classes(g.h_role, lambda x: _HOST_ROLE_CLASS.get(x, "host other"))
        self.g_name, self.h_name = g.g_name, g.h_name
        self.prev, self.inside = _mv(g.h_prev), _mv(g.h_inside, bool)
        self.owner = g.h_gap_owner
        self.gb, self.hb = _mv(gb), _mv(hb)
        self.launch, self.spred, self.xpred = _mv(p.g_launch), _mv(p.g_spred), _mv(p.g_xpred)

    def walk(self, node: str, i: int, lo: int) -> CriticalPath:
        gs, ge, hs, he = self.gs, self.ge, self.hs, self.he
        # segments as two int64 arrays and two lists of shared strings, not a tuple each
        seg_s, seg_e, seg_c, seg_n = array("q"), array("q"), [], []

        def seg(s, e, c, n):
            seg_s.append(s)
            seg_e.append(e)
            seg_c.append(c)
            seg_n.append(n)

        while True:
            if node == "g":
                seg(gs[i], ge[i], self.g_cls[i], self.g_name[i])
                b = self.gb[i]
                if b == 0:
                    q = self.launch[i]
                    seg(hs[q], gs[i], "host launch", "launch latency")
                    node, i = "hs", q
                elif b in (1, 2):
                    q = self.spred[i] if b == 1 else self.xpred[i]
                    seg(ge[q], gs[i], "idle", "GPU waits")
                    node, i = "g", q
                else:
                    seg(lo, gs[i], "idle", "before first activity")
                    break
            elif node == "he":
                t = self.hb[i]
                if t >= 0:
                    seg(ge[t], he[i], "host blocked in sync", self.h_name[i])
                    node, i = "g", t
                else:
                    seg(hs[i], he[i], self.h_cls[i], self.h_name[i] or "host work")
                    node = "hs"
            else:
                q = self.prev[i]
                if q < 0:
                    seg(lo, hs[i], "idle", "before thread start")
                    break
                if self.inside[i]:
                    seg(hs[q], hs[i], self.h_cls[q], self.h_name[q] or "host work")
                    node, i = "hs", q
                else:
                    seg(he[q], hs[i], "host other", self.owner[i] or "host work between calls")
                    node, i = "he", q
            if seg_s[-1] <= lo:
                break
        for x in (seg_s, seg_e, seg_c, seg_n):
            x.reverse()
        start = np.frombuffer(seg_s, dtype=np.int64).copy() if len(seg_s) else np.zeros(0, np.int64)
        end = np.frombuffer(seg_e, dtype=np.int64).copy() if len(seg_e) else np.zeros(0, np.int64)
        start = np.maximum(start, lo)
        keep = end > start
        return CriticalPath(start[keep], end[keep], np.array(seg_c, object)[keep],
                            np.array(seg_n, object)[keep])


def critical_path(r: Replay) -> CriticalPath:
    """The path that ends with the last GPU op or driving thread's call (see Replay.work_end)."""
    g = r.graph
    hd = np.flatnonzero(g.h_driving) if g.n_host else np.zeros(0, np.int64)
    if not g.n_gpu and not len(hd):
        hd = np.arange(g.n_host)
    if not g.n_gpu and not len(hd):
        z = np.zeros(0, np.int64)
        return CriticalPath(z, z, np.zeros(0, object), np.zeros(0, object))
    if g.n_gpu and (not len(hd) or r.g_end.max() >= r.h_end[hd].max()):
        node, i = "g", int(np.argmax(r.g_end))
    else:
        node, i = "he", int(hd[np.argmax(r.h_end[hd])])
    return _Walker(r).walk(node, i, g.span_start)

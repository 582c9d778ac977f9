"""Why did it get slower? A waterfall from A's to B's iteration time.

Per steady iteration (means, so the parts add up; whole traces when a run has no iterations):

    Δ wall = Δ GPU busy + Δ GPU idle
    Δ GPU busy = Σ Δ GPU time per kernel class - Δ overlap (work on concurrent streams)

GPU time is per device (summed over devices, divided by their number), like busy time. The
top kernels (by |Δ|) and the change in launches per iteration come with it, and the findings
that appeared. Values are means over runs of per-run means.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .buckets import TraceProfile, short_kernel_name

TOP = 8


def _facts(p: TraceProfile) -> dict[str, Any]:
    ndev = max(len(p.meta.get("devices") or []), 1)
    it = p.iteration
    if it is not None and it.gpu_ns is not None and it.busy_ns is not None:
        c, n = it.cold, len(it.steady)
        return {"scope": "mean per steady iteration", "wall": float(it.steady.mean()),
                "busy": float(it.busy_ns[c:].mean()),
                "classes": {k: float(v[c:].sum()) / n / ndev for k, v in it.class_ns.items()},
                "kernels": {k: v / n / ndev for k, v in it.kernel_ns.items()},
                "launches": float(it.launches[c:].mean()) if it.launches is not None else None}
    kern: dict[str, float] = {}
    for k in p.kernels.values():
        kern[k.key] = kern.get(k.key, 0.0) + float(k.durations.sum()) / ndev
    return {"scope": "whole trace", "wall": float(p.span_ns), "busy": float(p.gpu_busy_ns) / ndev,
            "classes": {k: float(v) / ndev for k, v in p.class_ns.items()}, "kernels": kern,
            "launches": float(sum(len(k.durations) for k in p.kernels.values()))}


def _mean(side: list[dict[str, Any]], key: str) -> float:
    return float(np.mean([f[key] for f in side])) if side else float("nan")


def _mean_map(side: list[dict[str, Any]], key: str) -> dict[str, float]:
    names = set().union(*[f[key].keys() for f in side]) if side else set()
    return {n: float(np.mean([f[key].get(n, 0.0) for f in side])) for n in names}


def waterfall(A: Sequence[TraceProfile], B: Sequence[TraceProfile],
              gained: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """One waterfall (a list with one dict; empty when the scopes differ)."""
    fa, fb = [_facts(p) for p in A], [_facts(p) for p in B]
    if not fa or not fb or {f["scope"] for f in fa + fb} != {fa[0]["scope"]}:
        return []
    wall = (_mean(fa, "wall"), _mean(fb, "wall"))
    busy = (_mean(fa, "busy"), _mean(fb, "busy"))
    ca, cb = _mean_map(fa, "classes"), _mean_map(fb, "classes")
    ka, kb = _mean_map(fa, "kernels"), _mean_map(fb, "kernels")
    classes = sorted(({"class": c, "a": ca.get(c, 0.0), "b": cb.get(c, 0.0),
                       "delta": cb.get(c, 0.0) - ca.get(c, 0.0)} for c in set(ca) | set(cb)),
                     key=lambda r: -abs(r["delta"]))
    overlap = (sum(ca.values()) - busy[0], sum(cb.values()) - busy[1])
    kernels = sorted(({"kernel": short_kernel_name(k, 80), "a": ka.get(k, 0.0), "b": kb.get(k, 0.0),
                       "delta": kb.get(k, 0.0) - ka.get(k, 0.0)}
                      for k in (set(ka) | set(kb)) - {"copy", "memset"}),     # kernels only
                     key=lambda r: -abs(r["delta"]))[:TOP]
    la = [f["launches"] for f in fa if f["launches"] is not None]
    lb = [f["launches"] for f in fb if f["launches"] is not None]
    return [{"scope": fa[0]["scope"], "wall": {"a": wall[0], "b": wall[1], "delta": wall[1] - wall[0]},
             "busy": {"a": busy[0], "b": busy[1], "delta": busy[1] - busy[0]},
             "idle": {"a": wall[0] - busy[0], "b": wall[1] - busy[1],
                      "delta": (wall[1] - busy[1]) - (wall[0] - busy[0])},
             "overlap": {"a": overlap[0], "b": overlap[1], "delta": overlap[1] - overlap[0]},
             "classes": classes, "kernels": kernels,
             "launches": ({"a": float(np.mean(la)), "b": float(np.mean(lb)),
                           "delta": float(np.mean(lb) - np.mean(la))} if la and lb else None),
             "findings_gained": [f"{f.get('rule')} {f.get('title', '')}".strip() for f in gained]}]


def waterfall_lines(w: dict[str, Any], fmt_ns) -> list[tuple[str, str, str, float | None]]:
    """(label, A → B, Δ as text, Δ in ns or None) rows for the renderers."""
    def row(label, d):
        return (label, f"{fmt_ns(d['a'])} → {fmt_ns(d['b'])}", _signed(d["delta"], fmt_ns),
                d["delta"])
    out = [row(f"wall time ({w['scope']})", w["wall"]), row("  GPU busy", w["busy"])]
    out += [row(f"    {c['class']}", c) for c in w["classes"] if c["a"] or c["b"]]
    if abs(w["overlap"]["a"]) > 0 or abs(w["overlap"]["b"]) > 0:
        out.append(row("    − overlap of concurrent work", w["overlap"]))
    out.append(row("  GPU idle", w["idle"]))
    if w["launches"]:
        la = w["launches"]
        out.append(("launches (GPU activities)", f"{la['a']:.0f} → {la['b']:.0f}", f"{la['delta']:+.0f}", None))
    out += [row(f"top kernel: {k['kernel']}", k) for k in w["kernels"]]
    out += [("finding appeared", f, "", None) for f in w["findings_gained"]]
    return out


def _signed(ns: float, fmt_ns) -> str:
    return ("+" if ns >= 0 else "−") + fmt_ns(abs(ns))

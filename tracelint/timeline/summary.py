"""What a user wants to know first about a trace (`tracelint info`), as plain data."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .model import Timeline


def top_kernels(tl: Timeline, n: int = 10) -> list[dict[str, Any]]:
    k = tl.kernels
    if len(k) == 0:
        return []
    dur = (k["end"] - k["start"]).to_numpy()
    g = pd.DataFrame({"name": k["name"], "dur": dur}).groupby("name", observed=True)["dur"]
    agg = pd.DataFrame({"total_ns": g.sum(), "count": g.size(), "median_ns": g.median()})
    agg = agg.sort_values("total_ns", ascending=False).head(n)
    total = int(dur.sum())
    return [{"name": str(name), "total_ns": int(r.total_ns), "count": int(r["count"]),
             "median_ns": float(r.median_ns), "share": (float(r.total_ns) / total) if total else 0.0}
            for name, r in agg.iterrows()]


def streams(tl: Timeline) -> list[dict[str, Any]]:
    act = tl.gpu_activity
    if len(act) == 0:
        return []
    dur = act["end"] - act["start"]
    g = pd.DataFrame({"device": act["device"], "stream": act["stream"], "dur": dur}) \
        .groupby(["device", "stream"])["dur"]
    return [{"device": int(d), "stream": int(s), "events": int(c), "busy_ns": int(b)}
            for (d, s), c, b in zip(g.size().index, g.size().to_numpy(), g.sum().to_numpy())]


def trace_info(tl: Timeline) -> dict[str, Any]:
    m = tl.meta
    counts = tl.counts()
    timed = m.extra.get("kernel_timing") != "synthetic"     # CUPTI range profiler: placeholders
    devices = []
    for d in sorted(set(tl.devices_in_use()) | {dev.id for dev in m.devices}):
        info = m.device(d)
        in_use = d in tl.devices_in_use()
        devices.append({
            "id": d,
            "name": info.name if info else None,
            "sm_count": info.sm_count if info else None,
            "memory_bytes": info.memory_bytes if info else None,
            "active": in_use,
            "busy_share": round(tl.gpu_busy_fraction(d), 6) if in_use and timed else None,
        })
    resolved = tl.correlation_resolved_fraction()
    return {
        "source": m.source,
        "format": m.format,
        "format_version": m.format_version,
        "producer": m.producer,
        "span_ns": int(tl.span_ns),
        "start_ns": int(tl.span[0]),
        "end_ns": int(tl.span[1]),
        "rank": m.rank,
        "world_size": m.world_size,
        "has_gpu_activity": tl.has_gpu_activity,
        "devices": devices,
        "streams": streams(tl) if timed else [],
        "counts": counts,
        "iterations": int((tl.ranges["kind"] == "step").sum()) if len(tl.ranges) else 0,
        "correlation_resolved_fraction": None if resolved is None else round(resolved, 6),
        "captured": sorted(m.captured),
        "top_kernels": top_kernels(tl) if timed else [],
        "notes": list(m.notes),
        "kernel_timing": "measured" if timed else "synthetic",
    }


def percentile(values: np.ndarray, q: float) -> float:
    """The one percentile definition used everywhere: linear interpolation between closest
    ranks (numpy's default, Hyndman & Fan type 7)."""
    values = np.asarray(values, dtype=float)
    return float(np.percentile(values, q)) if len(values) else float("nan")

"""CUPTI range-profiler events in a Kineto trace (cat `cuda_profiler_range`) as kernels with
per-kernel hardware counters.

Why it is built this way: torch.profiler with `_ExperimentalConfig(profiler_metrics=[...])`
runs the CUPTI range profiler, which cannot run beside CUPTI activity tracing, so the trace has
no `kernel` events. In per-kernel (auto-range) mode Kineto names each range after the kernel it
measured, in launch order, and places the ranges by splitting the profiling window evenly
("the actual times do not really matter", CuptiRangeProfiler.cpp). So the kernels, their order
and their counters are measured; their start, end and duration are NOT. The Timeline keeps the
evenly spread slots (the order is real) and says `kernel_timing: synthetic` so that rules which
measure time skip, and the counters go to Timeline.kernel_counters for the microarchitecture
layer of the rules that do run.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..timeline.model import Timeline
from ..timeline.schema import make_table

RANGE_CAT = "cuda_profiler_range"
#: Host calls that launch exactly one kernel (graph and host-function launches do not).
_LAUNCH = re.compile(r"^(cuda|hip)Launch(Kernel|CooperativeKernel)\w*$|^cuLaunch(Kernel|CooperativeKernel)\w*$")


def add_range_kernels(tl: Timeline, specials: list[dict], to_ns) -> None:
    """Add the range-profiler events of `specials` to tl.kernels and tl.kernel_counters.

    to_ns: the importer's exact µs -> ns converter (values, ok mask). Does nothing when the
    trace has real kernel activity or no range events.
    """
    ranges = [e for e in specials if e.get("cat") == RANGE_CAT and e.get("ph") == "X"
              and isinstance(e.get("args"), dict)]
    if not ranges or len(tl.kernels):
        return
    start, ok = to_ns([e.get("ts") for e in ranges])
    dur, ok_d = to_ns([e.get("dur", 0) for e in ranges])
    keep = np.flatnonzero(ok & ok_d)
    ranges = [ranges[i] for i in keep]
    start, end = start[keep], start[keep] + dur[keep]
    order = np.argsort(start, kind="stable")
    ranges, start, end = [ranges[i] for i in order], start[order], end[order]
    device = np.array([e["pid"] if isinstance(e.get("pid"), int) else -1 for e in ranges], np.int64)
    lane = np.array([e["tid"] if isinstance(e.get("tid"), int) else -1 for e in ranges], np.int64)
    names = [str(e.get("name") or "__missing__") for e in ranges]
    corr, pid, note = _correlate_by_order(tl, device)
    tl.kernels = make_table("kernels", {
        "device": device, "stream": lane, "start": start, "end": end,
        "name": pd.Categorical(names), "correlation": corr, "pid": pid}, len(ranges))
    rows = [(i, names[i], key, float(v)) for i, e in enumerate(ranges)
            for key, v in e["args"].items() if _is_number(v)]
    tl.kernel_counters = pd.DataFrame(rows, columns=["launch", "kernel", "metric", "value"])
    tl.kernel_counters["unit"] = [_unit(m) for m in tl.kernel_counters["metric"]]
    meta = tl.meta
    meta.notes[:] = [n for n in meta.notes if not n.startswith("no GPU activity")]
    meta.extra["kernel_timing"] = "synthetic"
    meta.extra["kernel_counters"] = "CUPTI range profiler (Kineto cuda_profiler_range)"
    meta.captured.add("kernel_counters")
    meta.notes.append(
        f"{len(ranges)} kernels from CUPTI range-profiler events with "
        f"{tl.kernel_counters['metric'].nunique()} counters each; their times are synthetic "
        "(Kineto spreads the ranges evenly over the profiling window), so durations, gaps and "
        "time shares of these kernels are not measured")
    if note:
        meta.notes.append(note)
    if meta.raw_event_counts:
        meta.raw_event_counts["kernels"] = len(ranges)
    for cached in ("gpu_activity", "span", "kernel_class", "_launch_index"):
        tl.__dict__.pop(cached, None)         # cached views computed before the kernels existed
    meta.extra["correlation_resolved_fraction"] = tl.correlation_resolved_fraction()


def _correlate_by_order(tl: Timeline, device: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
    """Auto-range mode records one range per kernel launch, in launch order: when the trace's
    kernel-launch calls and the ranges agree in number (one profiled device), the i-th range is
    the i-th launch. Otherwise the link is left unknown (-1) rather than guessed."""
    n = len(device)
    none = np.full(n, -1, np.int64)
    api = tl.api_calls
    if len(api) == 0:
        return none, none.copy(), ""
    launch = api["name"].astype(str).str.match(_LAUNCH).to_numpy()
    rows = np.flatnonzero(launch)
    rows = rows[np.argsort(api["start"].to_numpy()[rows], kind="stable")]
    if len(np.unique(device)) != 1 or len(rows) != n:
        return none, none.copy(), (f"{n} profiled ranges but {len(rows)} kernel-launch calls: "
                                   "ranges not linked to their launches")
    corr = api["correlation"].to_numpy()[rows].astype(np.int64)
    return corr, api["pid"].to_numpy()[rows].astype(np.int64), (
        "kernel ranges linked to launch calls by order (auto-range: one range per launch)")


def _is_number(v) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return True
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def _unit(metric: str) -> str:
    """CUPTI / Nsight Compute metric-name conventions: `.pct_of_peak_*` and `.pct` are percent,
    `bytes` counts bytes, `.ratio` is a ratio, every other `.sum`/`.avg` a count."""
    m = metric.lower()
    if "pct" in m:
        return "%"
    if "bytes" in m:
        return "bytes"
    if m.endswith(".ratio"):
        return "ratio"
    return "count"

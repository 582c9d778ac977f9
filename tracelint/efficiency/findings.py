"""What the efficiency rules share: one Efficiency per lint run, and its evidence wording."""
from __future__ import annotations

from typing import Any

import pandas as pd

from tracelint.engine.finding import Evidence, Measure, Where

from .roofline import FORMULA, Efficiency, cached_efficiency


def for_context(ctx) -> Efficiency:
    """The trace's Efficiency, computed once per Timeline (reports reuse it)."""
    return cached_efficiency(ctx.tl, ctx.launch_index("kernels"))


def roofline_evidence(rows: pd.DataFrame, summary: str, supports: bool = True) -> Evidence:
    """Kernel-layer evidence for op calls: an estimate, with its formula and inputs."""
    t = float(rows["kernel_ns"].sum())
    f, b, tmin = float(rows["flops"].sum()), float(rows["bytes"].sum()), float(rows["t_min_ns"].sum())
    first = rows.iloc[0]
    inputs: dict[str, Any] = {"op": str(first["op"]), "shape": str(first["shape"]),
                              "calls": int(len(rows)), "flops": f, "bytes": b,
                              "math": str(first["math"]), "peak_flops_per_s": float(first["peak"]),
                              "bandwidth_bytes_per_s": float(first["bandwidth"]),
                              "model": first["work"].formula}
    return Evidence.estimated(
        summary, FORMULA, inputs, supports=supports,
        achieved_tflops=Measure(round(f / t / 1e3, 3) if t else 0.0, "TFLOP/s"),
        achieved_gbps=Measure(round(b / t, 1) if t else 0.0, "GB/s"),
        pct_of_bound=Measure(round(tmin / t, 4) if t else 0.0, "ratio"),
        kernel_ns=Measure(int(t), "ns"))


def where_for_call(ctx, tl, row) -> Where:
    """Where of an op call: its first kernel, located at the launching host call."""
    k = tl.kernels
    first = int(row["kernel_rows"][0])
    launch = ctx.launch_index("kernels")[first]
    where = ctx.where_for_api(int(launch)) if launch >= 0 else Where(rank=tl.meta.rank)
    where.device, where.stream = int(k["device"].iat[first]), int(k["stream"].iat[first])
    where.kernel = str(row["main_kernel"])
    where.start_ns, where.end_ns = int(k["start"].iat[first]), int(k["end"].iat[first])
    return where

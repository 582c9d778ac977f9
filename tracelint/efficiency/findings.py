"""What the efficiency rules share: one Efficiency per lint run, and its evidence wording."""
from __future__ import annotations

from typing import Any

import pandas as pd

from tracelint.engine.finding import Evidence, Measure, Where

from .roofline import FORMULA, Efficiency, cached_efficiency


def for_context(ctx) -> Efficiency:
    """The trace's Efficiency, computed once per Timeline (reports reuse it)."""
    return cached_efficiency(ctx.tl, ctx.launch_index("kernels"))


def heavy_groups(ctx, select, by, min_share: float, min_ns: int):
    """(device summary, group key, op-call rows, kernel ns) for groups of the selected op calls
    that take at least min_share of their device's kernel time and min_ns; nothing without
    shapes. `select(calls)` returns a boolean mask over the calls."""
    eff = for_context(ctx)
    if not eff.available:
        return
    calls = eff.calls[select(eff.calls)]
    for dev in eff.devices:
        for key, rows in calls[calls["device"] == dev.device].groupby(by, sort=False):
            t = int(rows["kernel_ns"].sum())
            if dev.kernel_ns > 0 and t >= min_share * dev.kernel_ns and t >= min_ns:
                yield dev, key, rows, t


def share_evidence(label: str, calls: int, t: int, dev, fact: str) -> Evidence:
    """System-layer evidence: the group's measured share of its device's kernel time."""
    share = t / dev.kernel_ns
    gpu = dev.name or f"GPU {dev.device}"
    return Evidence.measured(
        f"{label}: {calls} call(s), {t / 1e6:.2f} ms = {share:.1%} of {gpu}'s kernel time.",
        **{fact: Measure(t, "ns"), "share": Measure(round(share, 4), "ratio")})


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

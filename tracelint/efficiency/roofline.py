"""Roofline per kernel and MFU per device and iteration, from modelled work and kernel time.

For an op call with F FLOPs and B minimum bytes whose kernels ran t ns on a device with peak P
(for its math type) and bandwidth W, the roofline's shortest time is t_min = max(F/P, B/W);
`pct_of_bound` = t_min / t, the share of the hardware limit reached (achieved ÷ attainable).
Arithmetic intensity F/B against the ridge P/W says compute- or memory-bound. MFU counts
model FLOPs (GEMM, convolution, attention) over the device's busy window: Σ(F_i / P_i) / window.
All of it is estimated: shapes and datasheets, no counters.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tracelint.timeline.model import Timeline

from .attribute import CAPTURE_HINT, op_works, shapes_available
from .devices import DeviceSpec, Match, match_trace_device

TENSOR_KINDS = ("gemm", "conv", "attention")
_TF32_KERNEL = re.compile(r"tf32|xf32|s1688|s16816|s1616", re.IGNORECASE)

FORMULA = ("t_min = max(FLOPs / peak[math], bytes / bandwidth); % of bound = t_min / kernel time; "
           "arithmetic intensity = FLOPs / bytes; FLOPs and minimum bytes from the op's recorded "
           "input shapes, peaks from the device table")


def math_type(kind: str, dtype: str, kernel: str, spec: DeviceSpec | None) -> str:
    """The peak an op is held to: tensor cores for GEMM-like work in low precision (TF32 when
    the kernel name says so), the vector units for everything else."""
    if dtype in ("fp64",):
        return "fp64_tc" if kind in TENSOR_KINDS and spec and "fp64_tc" in spec.peak_flops else "fp64"
    if kind not in TENSOR_KINDS:
        return "fp32"
    if dtype == "fp32":
        return "tf32" if _TF32_KERNEL.search(kernel) else "fp32"
    if spec is not None and spec.peak(dtype) is None:
        return "fp16" if dtype == "bf16" and spec.peak("fp16") else "fp32"
    return dtype if dtype in ("fp16", "bf16", "fp8", "fp4") else "fp32"


@dataclass
class DeviceSummary:
    device: int
    name: str | None
    match: Match
    window_ns: int                       # first kernel start -> last kernel end
    kernel_ns: int                       # all kernel time on the device
    modelled_ns: int                     # kernel time of op calls with a work model
    model_flops: float                   # GEMM/conv/attention FLOPs
    flops: float
    bytes: float
    mfu: float | None                    # None for an unknown device
    iterations: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        s = self.match.spec
        return {"device": self.device, "name": self.name, "matched": s.key if s else None,
                "match": self.match.reason, "source": s.source if s else None,
                "window_ns": self.window_ns, "kernel_ns": self.kernel_ns,
                "modelled_ns": self.modelled_ns,
                "modelled_share": round(self.modelled_ns / self.kernel_ns, 4) if self.kernel_ns else 0.0,
                "model_flops": self.model_flops,
                "model_tflops_per_s": round(self.model_flops / self.window_ns / 1e3, 3) if self.window_ns else None,
                "mfu": None if self.mfu is None else round(self.mfu, 5),
                "achieved_min_bandwidth_gbps": round(self.bytes / self.window_ns, 2) if self.window_ns else None,
                "iterations": self.iterations, "status": "estimated"}


@dataclass
class Efficiency:
    """Per-op-call and per-kernel efficiency for one trace; `available` False says why not."""

    available: bool
    reason: str
    calls: pd.DataFrame
    kernels: pd.DataFrame
    devices: list[DeviceSummary]
    capture_hint: str | None = None

    def to_dict(self, top: int = 50, ncu: pd.DataFrame | None = None) -> dict[str, Any]:
        """JSON form; with Nsight Compute results (`--ncu`), each kernel row also carries the
        measured throughput metrics of that kernel beside the estimate (they win)."""
        out: dict[str, Any] = {"status": "estimated", "available": self.available,
                               "reason": self.reason, "formula": FORMULA,
                               "devices": [d.to_dict() for d in self.devices]}
        if self.capture_hint:
            out["capture_hint"] = self.capture_hint
        rows = []
        for r in self.kernels.head(top).itertuples(index=False):
            rows.append({
                "device": int(r.device), "op": r.op, "kernel": r.main_kernel, "math": r.math,
                "calls": int(r.calls), "shapes": int(r.shapes), "kernel_ns": int(r.kernel_ns),
                "flops": float(r.flops), "bytes": float(r.bytes),
                "achieved_tflops_per_s": _round(r.achieved_flops / 1e12),
                "achieved_gbps": _round(r.achieved_bps / 1e9),
                "arithmetic_intensity": _round(r.intensity),
                "bound": r.bound, "pct_of_bound": _round(r.pct_of_bound, 4)})
            measured = _ncu_for(ncu, str(r.main_kernel))
            if measured:
                rows[-1]["measured"] = {"source": "Nsight Compute", "status": "measured", "metrics": measured}
        out["kernels"] = rows
        return out


_NCU_THROUGHPUT = re.compile(r"throughput|tensor|Memory \[%\]|Compute \(SM\)|dram__bytes", re.IGNORECASE)


def _ncu_for(ncu: pd.DataFrame | None, kernel: str) -> dict[str, float]:
    """Mean of the throughput metrics Nsight Compute measured for this kernel (by full name,
    or by its function name without the parameter list)."""
    if ncu is None or len(ncu) == 0:
        return {}
    base = kernel.split("(")[0].removeprefix("void ").strip()
    names = ncu["kernel"].astype(str)
    rows = ncu[(names == kernel) | (names.str.split("(").str[0].str.removeprefix("void ").str.strip() == base)]
    rows = rows[rows["metric"].astype(str).str.contains(_NCU_THROUGHPUT)]
    return {str(m): round(float(v), 3) for m, v in rows.groupby("metric")["value"].mean().items()}


def _round(x, nd: int = 3):
    return None if x is None or not np.isfinite(x) else round(float(x), nd)


def cached_efficiency(tl: Timeline, launch: np.ndarray | None = None) -> Efficiency:
    """efficiency(tl), computed once per Timeline: rules, the JSON/HTML reports and `info`
    share one result."""
    cached = getattr(tl, "_tracelint_efficiency", None)
    if cached is None:
        cached = efficiency(tl, launch)
        tl._tracelint_efficiency = cached
    return cached


def efficiency(tl: Timeline, launch: np.ndarray | None = None) -> Efficiency:
    """Roofline and MFU for every device; never raises on a trace without shapes."""
    if launch is None:
        launch = tl.launch_index("kernels")
    if len(tl.kernels) == 0:
        return Efficiency(False, "no kernels in the trace", pd.DataFrame(), pd.DataFrame(), [])
    if not shapes_available(tl):
        why = ("op input shapes were not recorded" if tl.meta.format == "kineto-json"
               else "this trace format carries no op input shapes")
        return Efficiency(False, why, pd.DataFrame(), pd.DataFrame(), [], CAPTURE_HINT)
    calls = op_works(tl, launch)
    specs = {d: match_trace_device(tl.meta.device(d)) for d in tl.devices_in_use()}
    calls = _roofline(calls, specs)
    devices = [_device_summary(tl, d, m, calls, launch) for d, m in specs.items()]
    reason = (f"{len(calls)} op calls with a work model" if len(calls)
              else "no kernel was launched by an op with a work model")
    return Efficiency(bool(len(calls)), reason, calls, _by_kernel(calls), devices)


def _roofline(calls: pd.DataFrame, specs: dict[int, Match]) -> pd.DataFrame:
    if len(calls) == 0:
        return calls.assign(math=[], peak=[], bandwidth=[], t_min_ns=[], achieved_flops=[],
                            achieved_bps=[], intensity=[], bound=[], pct_of_bound=[])
    c = calls.copy()
    sp = [specs.get(d) for d in c["device"]]
    sp = [m.spec if m is not None else None for m in sp]
    c["math"] = [math_type(k, dt, kn, s) for k, dt, kn, s in zip(c["kind"], c["dtype"], c["main_kernel"], sp)]
    c["peak"] = [(s.peak(m) or s.peak("fp32")) if s else np.nan for s, m in zip(sp, c["math"])]
    c["bandwidth"] = [s.memory_bps if s else np.nan for s in sp]
    t = c["kernel_ns"].to_numpy(dtype=float)
    f, b = c["flops"].to_numpy(dtype=float), c["bytes"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        tc, tm = f / c["peak"].to_numpy() * 1e9, b / c["bandwidth"].to_numpy() * 1e9
        c["t_min_ns"] = np.maximum(tc, tm)
        c["achieved_flops"] = np.where(t > 0, f / t * 1e9, np.nan)
        c["achieved_bps"] = np.where(t > 0, b / t * 1e9, np.nan)
        c["intensity"] = np.where(b > 0, f / b, np.nan)
        c["pct_of_bound"] = np.where(t > 0, c["t_min_ns"] / t, np.nan)
    c["bound"] = np.where(np.isnan(tc), "unknown", np.where(tc >= tm, "compute", "memory"))
    return c


def _by_kernel(c: pd.DataFrame) -> pd.DataFrame:
    """Op calls grouped by (device, op, main kernel, math type), most kernel time first."""
    if len(c) == 0:
        return pd.DataFrame()
    g = c.groupby(["device", "op", "main_kernel", "math"], sort=False, observed=True).agg(
        calls=("op", "size"), shapes=("shape", "nunique"), kernel_ns=("kernel_ns", "sum"),
        flops=("flops", "sum"), bytes=("bytes", "sum"), t_min_ns=("t_min_ns", "sum"),
        peak=("peak", "first"), bandwidth=("bandwidth", "first"), kind=("kind", "first")).reset_index()
    t = g["kernel_ns"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        g["achieved_flops"] = np.where(t > 0, g["flops"] / t * 1e9, np.nan)
        g["achieved_bps"] = np.where(t > 0, g["bytes"] / t * 1e9, np.nan)
        g["intensity"] = np.where(g["bytes"] > 0, g["flops"] / g["bytes"], np.nan)
        g["pct_of_bound"] = np.where(t > 0, g["t_min_ns"] / t, np.nan)
        tc = g["flops"] / g["peak"] * 1e9
        tm = g["bytes"] / g["bandwidth"] * 1e9
    g["bound"] = np.where(tc.isna(), "unknown", np.where(tc >= tm, "compute", "memory"))
    return g.sort_values("kernel_ns", ascending=False, ignore_index=True)


def _device_summary(tl: Timeline, device: int, m: Match, calls: pd.DataFrame,
                    launch: np.ndarray) -> DeviceSummary:
    k = tl.kernels
    on = k["device"].to_numpy() == device
    ks, ke = k["start"].to_numpy()[on], k["end"].to_numpy()[on]
    window = int(ke.max() - ks.min()) if on.any() else 0
    c = calls[calls["device"] == device] if len(calls) else calls
    info = tl.meta.device(device)
    mfu_sum, iters = _mfu_parts(c)
    summary = DeviceSummary(
        device=device, name=info.name if info else None, match=m, window_ns=window,
        kernel_ns=int((ke - ks).sum()), modelled_ns=int(c["kernel_ns"].sum()) if len(c) else 0,
        model_flops=float(c.loc[c["kind"].isin(TENSOR_KINDS), "flops"].sum()) if len(c) else 0.0,
        flops=float(c["flops"].sum()) if len(c) else 0.0,
        bytes=float(c["bytes"].sum()) if len(c) else 0.0,
        mfu=(mfu_sum / window * 1e9) if (m.known and window > 0) else None)
    summary.iterations = _iterations(tl, device, c, launch) if m.known else []
    return summary


def _mfu_parts(c: pd.DataFrame) -> tuple[float, list]:
    """Σ FLOPs/peak (seconds at peak) over the model-FLOP op calls."""
    if len(c) == 0:
        return 0.0, []
    t = c[c["kind"].isin(TENSOR_KINDS)]
    return float((t["flops"] / t["peak"]).sum()), []


def _iterations(tl: Timeline, device: int, c: pd.DataFrame, launch: np.ndarray) -> list[dict]:
    """MFU per profiler step: op calls starting in the step, over its kernels' GPU window."""
    r = tl.ranges
    steps = r[r["kind"] == "step"] if len(r) else r
    if len(steps) == 0 or len(c) == 0:
        return []
    k = tl.kernels
    api_start = tl.api_calls["start"].to_numpy()
    kstart = np.where(launch >= 0, api_start[np.clip(launch, 0, None)], -1)
    on = np.flatnonzero((k["device"].to_numpy() == device) & (launch >= 0))
    on = on[np.argsort(kstart[on], kind="stable")]          # the device's kernels by launch time
    k_t, k_s, k_e = kstart[on], k["start"].to_numpy()[on], k["end"].to_numpy()[on]
    op_start = r["start"].to_numpy()[c["op_row"].to_numpy()]
    by_op = np.argsort(op_start, kind="stable")
    op_t = op_start[by_op]
    out = []
    for step, s, e in zip(steps["step"], steps["start"], steps["end"]):   # slices, not scans
        k0, k1 = np.searchsorted(k_t, [s, e], side="left")
        c0, c1 = np.searchsorted(op_t, [s, e], side="left")
        if k1 <= k0 or c1 <= c0:
            continue
        cin = c.iloc[np.sort(by_op[c0:c1])]
        window = int(k_e[k0:k1].max() - k_s[k0:k1].min())
        at_peak, _ = _mfu_parts(cin)
        out.append({"step": int(step), "window_ns": window,
                    "model_flops": float(cin.loc[cin["kind"].isin(TENSOR_KINDS), "flops"].sum()),
                    "mfu": round(at_peak / window * 1e9, 5) if window else None,
                    "achieved_min_bandwidth_gbps": round(float(cin["bytes"].sum()) / window, 2) if window else None})
    return out

"""The HTML report's efficiency section: MFU per device, the roofline plot and the per-kernel
efficiency table, all labelled as estimates; or why there is none and how to capture shapes."""
from __future__ import annotations

from typing import Any

from markupsafe import Markup

from .fmt import clean, fmt_ms
from .roofline_svg import plot_for_device

MAX_ROWS = 25


def efficiency_section(report) -> dict[str, Any] | None:
    from ..efficiency.roofline import cached_efficiency
    tl = report.timeline
    if not len(tl.kernels):
        return None
    eff = cached_efficiency(tl)
    if not eff.available:
        return {"available": False, "reason": clean(eff.reason),
                "hint": clean(eff.capture_hint) if eff.capture_hint else None}
    devices, plots = [], []
    for d in eff.devices:
        dd = d.to_dict()
        devices.append({
            "id": d.device, "name": clean(d.name or f"GPU {d.device}", 60), "match": clean(d.match.reason),
            "mfu": f"{d.mfu:.1%}" if d.mfu is not None else "unknown (no peak for this device)",
            "model_tflops": f"{dd['model_tflops_per_s']:.1f}" if dd["model_tflops_per_s"] is not None else "?",
            "bandwidth": f"{dd['achieved_min_bandwidth_gbps']:.0f}" if dd["achieved_min_bandwidth_gbps"] else "?",
            "modelled": f"{dd['modelled_share']:.0%}"})
        svg = plot_for_device(eff, d.device)
        if svg:
            plots.append(Markup(svg))
    rows = []
    for r in eff.kernels.head(MAX_ROWS).itertuples(index=False):
        pct = r.pct_of_bound
        rows.append({"op": clean(r.op), "kernel": clean(r.main_kernel, 90), "math": r.math,
                     "calls": f"{int(r.calls):,}", "shapes": int(r.shapes), "time": fmt_ms(int(r.kernel_ns)),
                     "tflops": f"{r.achieved_flops / 1e12:.2f}", "gbps": f"{r.achieved_bps / 1e9:.0f}",
                     "ai": f"{r.intensity:.3g}" if r.intensity == r.intensity else "–",
                     "bound": r.bound, "pct": f"{pct:.0%}" if pct == pct else "?",
                     "over": bool(pct == pct and pct > 1.0)})
    return {"available": True, "devices": devices, "plots": plots, "rows": rows,
            "more": max(len(eff.kernels) - MAX_ROWS, 0)}

"""MFU and achieved bandwidth for `tracelint info`: a compact summary of the estimate."""
from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from tracelint.timeline.model import Timeline

from .roofline import cached_efficiency


def efficiency_info(tl: Timeline, top: int = 5) -> dict[str, Any]:
    """The efficiency estimate in brief: per-device MFU and the top kernels (JSON-ready)."""
    if not len(tl.kernels):
        return {"status": "estimated", "available": False, "reason": "no kernels in the trace"}
    d = cached_efficiency(tl).to_dict(top=top)
    return {k: d[k] for k in ("status", "available", "reason", "capture_hint", "devices", "kernels") if k in d}


def print_efficiency(console, data: dict[str, Any]) -> None:
    if not data.get("available"):
        hint = f"; {data['capture_hint']}" if data.get("capture_hint") else ""
        console.print(f"[bold]efficiency[/] not estimated: {escape(data.get('reason', ''))}{escape(hint)}")
        return
    t = Table(title="Efficiency (estimated from op shapes and datasheet peaks)", title_justify="left")
    for col, j in (("device", "left"), ("matched", "left"), ("MFU", "right"), ("model TFLOP/s", "right"),
                   ("≥ GB/s", "right"), ("modelled", "right")):
        t.add_column(col, justify=j)
    for dv in data["devices"]:
        mfu = f"{dv['mfu']:.1%}" if dv["mfu"] is not None else "unknown device"
        tf = dv["model_tflops_per_s"]
        bw = dv["achieved_min_bandwidth_gbps"]
        t.add_row(f"{dv['device']} {escape(dv['name'] or '?')}", escape(dv["matched"] or dv["match"]), mfu,
                  f"{tf:.1f}" if tf is not None else "?", f"{bw:.0f}" if bw is not None else "?",
                  f"{dv['modelled_share']:.0%}")
    console.print(t)
    k = Table(title="Top kernels: achieved vs roofline bound (estimated)", title_justify="left")
    for col, j in (("op", "left"), ("math", "left"), ("time ms", "right"), ("TFLOP/s", "right"),
                   ("GB/s", "right"), ("bound", "left"), ("% of bound", "right")):
        k.add_column(col, justify=j)
    for r in data["kernels"]:
        pct = r["pct_of_bound"]
        k.add_row(escape(r["op"]), r["math"], f"{r['kernel_ns'] / 1e6:.2f}",
                  f"{r['achieved_tflops_per_s']:.2f}" if r["achieved_tflops_per_s"] is not None else "?",
                  f"{r['achieved_gbps']:.0f}" if r["achieved_gbps"] is not None else "?", r["bound"],
                  f"{pct:.0%}" if pct is not None else "?")
    console.print(k)

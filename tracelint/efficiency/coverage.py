"""Shape coverage: which input shapes each op ran with, and the "only the prettiest shape" check.

A benchmark that times one GEMM shape says little about production that runs twenty. diff and
gate call `coverage_warnings(baseline_summary, candidate_summary)` with two `shape_summary`
results (plain JSON, so a saved baseline can carry one).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tracelint.timeline.model import Timeline

from .attribute import op_works, shapes_available


def shape_summary(tl: Timeline, launch: np.ndarray | None = None) -> dict[str, dict[str, dict[str, int]]]:
    """{op: {shape: {"calls": n, "kernel_ns": t}}} over op calls that launched kernels and have
    a work model; {} when the trace has no shapes."""
    if not shapes_available(tl) or len(tl.kernels) == 0:
        return {}
    if launch is None:
        launch = tl.launch_index("kernels")
    calls = op_works(tl, launch)
    out: dict[str, dict[str, dict[str, int]]] = {}
    if len(calls) == 0:
        return out
    g = calls.groupby(["op", "shape"], sort=False).agg(calls=("op", "size"), kernel_ns=("kernel_ns", "sum"))
    for (op, shape), r in g.iterrows():
        out.setdefault(str(op), {})[str(shape)] = {"calls": int(r["calls"]), "kernel_ns": int(r["kernel_ns"])}
    return out


def coverage_warnings(baseline: dict[str, Any], candidate: dict[str, Any], *, min_shapes: int = 3,
                      min_op_share: float = 0.05, max_covered: float = 0.5) -> list[str]:
    """One line per op the candidate covers poorly: the baseline runs it with at least
    `min_shapes` shapes, the op takes at least `min_op_share` of the baseline's modelled
    kernel time, and the shapes the candidate ran cover less than `max_covered` of the
    baseline's time in that op. Empty when either side has no shapes (nothing to compare)."""
    if not baseline or not candidate:
        return []
    total = sum(s["kernel_ns"] for shapes in baseline.values() for s in shapes.values())
    out = []
    for op, shapes in sorted(baseline.items(), key=lambda kv: -sum(s["kernel_ns"] for s in kv[1].values())):
        op_ns = sum(s["kernel_ns"] for s in shapes.values())
        if len(shapes) < min_shapes or total <= 0 or op_ns < min_op_share * total:
            continue
        ran = candidate.get(op, {})
        covered = sum(s["kernel_ns"] for shape, s in shapes.items() if shape in ran) / op_ns if op_ns else 0.0
        if covered >= max_covered:
            continue
        which = (f"{len(ran)} shape" + ("s" if len(ran) != 1 else "")) if ran else "no call"
        example = f" ({next(iter(ran))})" if len(ran) == 1 else ""
        out.append(f"{op}: the comparison covers {which}{example} where the baseline shows "
                   f"{len(shapes)}; the shapes it ran are {covered:.0%} of the baseline's {op} time "
                   f"({op_ns / total:.0%} of its modelled kernel time): benchmark the production "
                   "shape mix before trusting the result")
    return out


def merge_summaries(summaries) -> dict[str, dict[str, dict[str, int]]]:
    """Several runs' shape_summary results as one (calls and time added per op and shape)."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for s in summaries:
        for op, shapes in (s or {}).items():
            for shape, v in shapes.items():
                cur = out.setdefault(op, {}).setdefault(shape, {"calls": 0, "kernel_ns": 0})
                cur["calls"] += int(v.get("calls", 0))
                cur["kernel_ns"] += int(v.get("kernel_ns", 0))
    return out

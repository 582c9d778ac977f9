"""Hand-built Timeline tables (ranges, kernels, devices) and the helpers the TL005, TL007,
TL008 and TL009 tests share: every asserted number is recomputed with a plain loop."""
from __future__ import annotations

import numpy as np

from tracelint.api import lint
from tracelint.engine.config import Config
from tracelint.timeline.model import Device, Meta, Timeline
from tracelint.timeline.nesting import nest
from tracelint.timeline.schema import make_table


US = 1_000
PID = TID = 100


def _ranges(rows):
    """rows: (name, kind, start, end[, step]) on thread (PID, TID); depth/parent rebuilt."""
    if not rows:
        return make_table("ranges", {})
    start = np.array([r[2] for r in rows])
    end = np.array([r[3] for r in rows])
    depth, parent = nest(np.zeros(len(rows), dtype=np.int64), start, end)
    return make_table("ranges", {
        "pid": [PID] * len(rows), "tid": [TID] * len(rows), "start": start, "end": end,
        "name": [r[0] for r in rows], "kind": [r[1] for r in rows], "depth": depth,
        "parent": parent, "step": [r[4] if len(r) > 4 else -1 for r in rows]})


def _kernels(rows, **cols):
    """rows: (name, start, end, correlation, stream[, device])."""
    base = {"name": [r[0] for r in rows], "start": [r[1] for r in rows],
            "end": [r[2] for r in rows], "correlation": [r[3] for r in rows],
            "stream": [r[4] for r in rows], "device": [r[5] if len(r) > 5 else 0 for r in rows],
            "pid": [PID] * len(rows)}
    base.update(cols)
    return make_table("kernels", base)


def _timeline(cc="8.0", devices=(0,), **tables):
    meta = Meta(format="kineto-json",
                devices=[Device(id=d, vendor="nvidia", compute_capability=cc) for d in devices])
    return Timeline(meta=meta, **tables)


def _run(tl, rule, **options):
    cfg = Config(select=[rule], options={rule: options} if options else {})
    return [f for f in lint(tl, cfg).findings if f.rule == rule]


def _merge(iv):
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _overlap(s, e, merged):
    return sum(max(0, min(e, b) - max(s, a)) for a, b in merged)


GEMM = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8"
RELU = "void at::native::vectorized_elementwise_kernel<4, relu>"

"""TL006 layout-transform: hand-built layout conversions with the key numbers recomputed by
plain loops, near-misses that must stay silent, and a real-trace cross-check."""
from __future__ import annotations

import pytest

from conftest import needs_shared
from mini_trace import US, Trace, lint
from raw_traces import TORCH, load, raw_kineto


def layout_trace(every_step=True, steps=10):
    t = Trace()
    cur = 0
    for s in range(steps):
        r0 = cur
        t.kernel("implicit_convolve_sgemm", cur + 10 * US, 100 * US, api_t=cur)
        if every_step or s == 0:
            n = 1 if every_step else 10
            for j in range(n):
                t.kernel("nchwToNhwcKernel", cur + 111 * US + j * 21 * US, 20 * US, api_t=cur + 6 * US)
        cur += 400 * US
        t.range(f"ProfilerStep#{s}", r0, cur, kind="step", step=s)
    return t


def test_tl006_recurring_transposes():
    t = layout_trace()
    (f,) = lint(t.timeline(), "TL006")
    lay = sum(k["end"] - k["start"] for k in t.k if k["name"] == "nchwToNhwcKernel")
    total = sum(k["end"] - k["start"] for k in t.k)
    assert f.impact_ns == lay == 200 * US
    assert f.metrics["layout_share"].value == pytest.approx(round(lay / total, 4))
    assert f.occurrences == 10 and f.where.kernel == "nchwToNhwcKernel"
    assert f.evidence["system"].facts["recurrence"].value == 1.0


def test_tl006_near_miss_one_off_conversion():
    t = layout_trace(every_step=False)   # 10 conversions, all in the first iteration: 200 us = 16.7 %
    assert sum(k["end"] - k["start"] for k in t.k if k["name"] == "nchwToNhwcKernel") == 200 * US
    assert lint(t.timeline(), "TL006") == []


def test_tl006_near_miss_small_share():
    assert lint(layout_trace().timeline(), "TL006", min_share=0.2) == []


@needs_shared()
def test_tl006_real_cudnn_nhwc_conversions():
    name = "hta_nccl_a100_rank0of2.json.gz"
    (f,) = lint(load(TORCH / name), "TL006")
    kernels = [e for e in raw_kineto(name) if e.get("cat") == "kernel" and e["args"]["device"] == 0]
    words = ("nchwToNhwc", "nhwcToNchw", "CatArrayBatchedCopy", "transpose", "permute", "copy_kernel")
    layout = sum(k["e"] - k["s"] for k in kernels if any(w in k["name"] for w in words))
    total = sum(k["e"] - k["s"] for k in kernels)
    assert f.impact_ns == layout
    assert f.metrics["layout_share"].value == pytest.approx(round(layout / total, 4))
    assert f.where.kernel.startswith("void cudnn::ops::nchwToNhwcKernel")

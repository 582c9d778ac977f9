"""TL002 small-op-storm: hand-built storms with the key numbers recomputed by plain loops,
near-misses that must stay silent, and a real-trace cross-check."""
from __future__ import annotations

import pytest

from conftest import needs_shared
from mini_trace import US, Trace, lint, union_len
from raw_traces import TORCH, load, raw_kineto


def storm_trace(n=30, graph=False, api="cudaLaunchKernel", linked=True, kdur=2 * US):
    t = Trace()
    t.kernel("volta_sgemm_128x64_nn", 0, 500 * US)
    for i in range(n):   # a tiny elementwise kernel every 6 us: 4 us idle between them
        t.kernel("vectorized_elementwise_kernel<add>", 600 * US + i * 6 * US, kdur, api=api, graph=graph,
                 linked=linked)
    t.kernel("volta_sgemm_128x64_nn", 600 * US + n * 6 * US + 50 * US, 500 * US)
    return t


def test_tl002_fires_with_idle_inside_the_storm():
    t = storm_trace()
    tl = t.timeline()
    (f,) = lint(tl, "TL002")
    small = [k for k in t.k if k["name"].startswith("vectorized")]
    w0, w1 = min(k["start"] for k in small), max(k["end"] for k in small)
    busy = union_len([(max(k["start"], w0), min(k["end"], w1)) for k in t.k
                      if k["end"] > w0 and k["start"] < w1])
    assert f.impact_ns == (w1 - w0) - busy == 29 * 4 * US
    assert f.metrics["small_kernels"].value == 30
    assert f.evidence["kernel"].facts["median_launch_ns"].value == 5 * US
    assert f.evidence["kernel"].facts["median_small_kernel_ns"].value == 2 * US
    assert f.where.kernel == "vectorized_elementwise_kernel<add>"
    assert (f.where.start_ns, f.where.end_ns) == (w0, w1)
    assert f.key == "device0"
    assert f.evidence["microarch"].status == "not_captured"


def test_tl002_unlinked_kernels_use_max_kernel_ns():
    (f,) = lint(storm_trace(linked=False).timeline(), "TL002")
    assert f.metrics["small_kernels"].value == 30
    assert lint(storm_trace(linked=False).timeline(), "TL002", max_kernel_ns=2 * US) == []


@pytest.mark.parametrize("kw", [dict(graph=True), dict(api="cudaGraphLaunch"), dict(api="hipGraphLaunch"),
                                dict(n=19), dict(kdur=6 * US)],
                         ids=["graph_launched", "cudaGraphLaunch", "hipGraphLaunch", "short-run", "not-small"])
def test_tl002_near_misses(kw):
    assert lint(storm_trace(**kw).timeline(), "TL002") == []


def test_tl002_busy_device_does_not_fire():
    t = storm_trace()
    t.kernel("volta_sgemm_128x64_nn", 590 * US, 300 * US, stream=8)   # another stream fills the storm
    assert lint(t.timeline(), "TL002") == []


GPU_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}


def merged(ivs):
    out = []
    for s, e in sorted(ivs):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


@needs_shared()
def test_tl002_real_resnet50_optimizer_storm():
    name = "kineto_tbplugin_resnet50_v100_2021-06.pt.trace.json.gz"
    (f,) = lint(load(TORCH / name), "TL002")
    ev = raw_kineto(name)
    runtime = {e["args"]["correlation"]: e for e in ev if e.get("cat") in ("Runtime", "cuda_runtime", "cuda_driver")}
    kernels = [e for e in ev if e.get("cat") in ("kernel", "Kernel") and e["args"].get("device", 0) == 0]
    small = {}
    for k in kernels:
        dur, api = k["e"] - k["s"], runtime.get(k["args"].get("correlation"))
        if api is not None:
            small[id(k)] = dur < api["e"] - api["s"] and dur < 50_000 and "GraphLaunch" not in api["name"]
        else:
            small[id(k)] = dur < 10_000
    windows = []
    by_stream = {}
    for k in sorted(kernels, key=lambda k: k["s"]):
        by_stream.setdefault(k["args"]["stream"], []).append(k)
    for ks in by_stream.values():
        run = []
        for k in ks + [None]:
            if k is not None and small[id(k)]:
                run.append(k)
                continue
            if len(run) >= 20:
                windows.append((run[0]["s"], run[-1]["e"]))
            run = []
    busy = merged([(e["s"], e["e"]) for e in ev if e.get("cat") in GPU_CATS and e["args"].get("device", 0) == 0])
    idle = 0
    for ws, we in merged(windows):
        idle += (we - ws) - sum(max(0, min(be, we) - max(bs, ws)) for bs, be in busy)
    assert f.impact_ns == idle
    assert f.occurrences == len(windows)
    assert f.metrics["small_kernels"].value == sum(small.values())

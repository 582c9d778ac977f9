"""TL002 small-op-storm, TL003 dequant-overhead, TL004 unoverlapped-copy, TL006 layout-transform:
hand-built Timelines with the key numbers recomputed by plain Python loops, near-misses that must
stay silent, and one real-trace cross-check per rule."""
from __future__ import annotations

import numpy as np
import pytest

from tracelint.engine.config import Config
from tracelint import api
from tracelint.timeline.model import Meta, Timeline
from tracelint.timeline.nesting import nest
from tracelint.timeline.schema import make_table

US = 1_000
PID, TID = 100, 101


# ----------------------------------------------------------------------------- helpers
class Trace:
    """A tiny mutable trace: kernels and copies with their launch calls, ranges, steps."""

    def __init__(self):
        self.k, self.c, self.a, self.r = [], [], [], []
        self.corr = 1

    def _api(self, name, t, dur):
        self.a.append(dict(pid=PID, tid=TID, start=t, end=t + dur, name=name, correlation=self.corr))
        self.corr += 1
        return self.corr - 1

    def kernel(self, name, start, dur, *, stream=7, device=0, api="cudaLaunchKernel", api_t=None,
               api_dur=5 * US, linked=True, graph=False):
        corr = self._api(api, start - 10 * US if api_t is None else api_t, api_dur) if linked else -1
        self.k.append(dict(device=device, stream=stream, start=start, end=start + dur, name=name,
                           correlation=corr, graph_launched=graph))

    def copy(self, kind, start, dur, nbytes, *, src="pageable", dst="device", stream=7, device=0):
        corr = self._api("cudaMemcpyAsync", start - 5 * US, 4 * US)
        self.c.append(dict(device=device, stream=stream, start=start, end=start + dur, correlation=corr,
                           name=f"Memcpy {kind}", bytes=nbytes, kind=kind, src_kind=src, dst_kind=dst))

    def range(self, name, start, end, kind="annotation", step=-1):
        self.r.append(dict(pid=PID, tid=TID, start=start, end=end, name=name, kind=kind, step=step))

    def timeline(self) -> Timeline:
        def cols(rows, table):
            if not rows:
                return make_table(table, {}, 0)
            return make_table(table, {key: [r[key] for r in rows] for key in rows[0]})
        ranges = cols(self.r, "ranges")
        if len(ranges):
            depth, parent = nest(np.zeros(len(ranges), np.int64), ranges["start"].to_numpy(),
                                 ranges["end"].to_numpy())
            ranges["depth"], ranges["parent"] = depth, parent
        return Timeline(kernels=cols(self.k, "kernels"), copies=cols(self.c, "copies"),
                        api_calls=cols(self.a, "api_calls"), ranges=ranges,
                        meta=Meta(format="kineto-json"))


def lint(tl, rule, **options):
    cfg = Config(select=[rule], options={rule: options} if options else {})
    return [f for f in api.lint(tl, cfg).findings if f.rule == rule]


def union_len(ivs):
    """Total length of a union of intervals, by a plain sweep."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(ivs):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0)


def uncovered(query, cover):
    """Length of the union of `query` intervals not covered by the union of `cover`."""
    both = union_len(list(query) + list(cover))
    return both - union_len(cover)


# ----------------------------------------------------------------------------- TL002
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


# ----------------------------------------------------------------------------- TL003
def w4a16_trace(prefill_gemm=30 * US, decode_gemm=400 * US, deq="dequantize_int4_kernel"):
    t = Trace()
    cur = 0
    for phase, gemm in (("prefill", prefill_gemm), ("decode", decode_gemm)):
        r0 = cur
        for _ in range(10):
            t.kernel(deq, cur + 10 * US, 20 * US, api_t=cur)
            t.kernel("sm80_xmma_gemm_f16f16_f16f32", cur + 31 * US, gemm, api_t=cur + 6 * US)
            t.kernel("vectorized_elementwise_kernel<silu>", cur + 32 * US + gemm, 3 * US, api_t=cur + 12 * US)
            cur += 40 * US + gemm
        t.range(phase, r0, cur)
    return t


def test_tl003_worst_bucket_is_short_prefill():
    t = w4a16_trace()
    (f,) = lint(t.timeline(), "TL003")
    shares = {}
    for r in t.r:
        deq = sum(k["end"] - k["start"] for k in t.k if "dequant" in k["name"] and r["start"] <= k["start"] < r["end"])
        gemm = sum(k["end"] - k["start"] for k in t.k if "gemm" in k["name"] and r["start"] <= k["start"] < r["end"])
        shares[r["name"]] = (deq, deq / (deq + gemm))
    assert shares["prefill"][1] == pytest.approx(0.4) and shares["decode"][1] < 0.10
    assert f.impact_ns == shares["prefill"][0] == 200 * US      # only buckets at or above min_share
    assert f.metrics["worst_share"].value == pytest.approx(0.4)
    assert f.metrics["best_share"].value == pytest.approx(round(shares["decode"][1], 4))
    assert f.where.nvtx_path == ["prefill"]
    assert "decode" in f.message and "prefill" in f.message
    assert f.evidence["microarch"].status == "not_captured"


def test_tl003_by_iteration_without_annotations():
    t = w4a16_trace()
    for r in t.r:
        r["kind"], r["step"], r["name"] = "step", {"prefill": 0, "decode": 1}[r["name"]], "ProfilerStep#x"
    (f,) = lint(t.timeline(), "TL003")
    assert f.where.iteration == 0 and f.impact_ns == 200 * US


def test_tl003_near_miss_fused_dequant_gemm():
    t = w4a16_trace(deq="gptq_marlin_gemm_kernel")   # fused dequant-GEMM: GEMM time, no overhead
    assert lint(t.timeline(), "TL003") == []


def test_tl003_near_miss_amortised():
    t = w4a16_trace(prefill_gemm=400 * US)          # long GEMMs everywhere: 20/420 < 10 %
    assert lint(t.timeline(), "TL003") == []


# ----------------------------------------------------------------------------- TL004
def copy_trace(pinned_overlapped=False):
    t = Trace()
    if pinned_overlapped:
        t.kernel("volta_sgemm_128x64_nn", 0, 3000 * US, stream=7)
        t.copy("H2D", 100 * US, 1000 * US, 16 << 20, src="pinned", stream=8)
        t.copy("D2H", 1500 * US, 800 * US, 8 << 20, src="device", dst="pinned", stream=8)
        return t
    t.kernel("volta_sgemm_128x64_nn", 0, 300 * US, stream=7)
    t.copy("H2D", 400 * US, 1000 * US, 16 << 20, stream=7)                 # fully exposed, same stream
    t.kernel("volta_sgemm_128x64_nn", 1500 * US, 300 * US, stream=7)
    t.copy("H2D", 1700 * US, 400 * US, 16 << 20, src="pinned", stream=8)   # half overlapped
    t.kernel("ncclDevKernel_AllReduce_Sum_f32", 1800 * US, 500 * US, stream=9)  # comm is not compute
    t.copy("H2D", 2300 * US, 2 * US, 1024, stream=7)                        # tiny: ignored
    return t


def test_tl004_unoverlapped_h2d():
    t = copy_trace()
    (f,) = lint(t.timeline(), "TL004")
    compute = [(k["start"], k["end"]) for k in t.k if "nccl" not in k["name"]]
    copies = [(c["start"], c["end"]) for c in t.c if c["kind"] == "H2D" and c["bytes"] >= 65_536]
    assert f.impact_ns == uncovered(copies, compute) == 1000 * US + 300 * US
    assert f.key == "device0/H2D"
    sysf = f.evidence["system"].facts
    assert sysf["pageable_copies"].value == 1 and sysf["same_stream_copies"].value == 1
    assert sysf["copies"].value == 2
    kf = f.evidence["kernel"].facts
    assert kf["bytes"].value == 2 * (16 << 20)
    assert kf["achieved_gbps"].value == pytest.approx(2 * (16 << 20) / (1400 * US), abs=0.01)
    assert "link_peak_gbps" not in kf     # the timeline names no GPU: no PCIe generation is guessed
    assert (f.where.start_ns, f.where.end_ns) == (400 * US, 1400 * US)


def test_tl004_near_miss_pinned_and_overlapped():
    assert lint(copy_trace(pinned_overlapped=True).timeline(), "TL004") == []


def test_tl004_min_bytes():
    t = Trace()
    t.copy("D2H", 0, 500 * US, 1000, src="device")
    t.kernel("k", 600 * US, 100 * US)
    assert lint(t.timeline(), "TL004") == []
    assert len(lint(t.timeline(), "TL004", min_bytes=1)) == 1


# ----------------------------------------------------------------------------- TL006
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


# ----------------------------------------------------------------------------- real traces
# Each test recomputes the finding's key number with plain loops over the raw events of a
# small real trace (exact Decimal microseconds -> integer ns), independent of the importers.
import gzip  # noqa: E402
import json  # noqa: E402
import sqlite3  # noqa: E402
from decimal import Decimal  # noqa: E402

from conftest import TRACES, needs_shared  # noqa: E402

TORCH = TRACES / "torch"
NSYS = TRACES / "nsys"
GPU_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}


def raw_kineto(name):
    with gzip.open(TORCH / name, "rt") as fh:
        doc = json.load(fh, parse_float=Decimal)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    out = []
    for e in events:
        if e.get("ph") != "X" or "ts" not in e:
            continue
        s = int(Decimal(e["ts"]) * 1000)
        out.append(dict(e, s=s, e=s + int(Decimal(e.get("dur", 0)) * 1000)))
    return out


def merged(ivs):
    out = []
    for s, e in sorted(ivs):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def load(path):
    import tracelint
    return tracelint.load(path)


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


@needs_shared()
def test_tl003_real_fp8_quantize_share_per_iteration():
    from tracelint.timeline.classify import kernel_class
    name = "hta_sampled_rank0of128.json.gz"
    (f,) = lint(load(TORCH / name), "TL003", min_share=0.0, min_bucket_ns=0)
    ev = raw_kineto(name)
    runtime = {e["args"]["correlation"]: e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    steps = {int(e["name"].split("#")[1]): (e["s"], e["e"]) for e in ev if str(e["name"]).startswith("ProfilerStep#")}
    kernels = sorted((e for e in ev if e.get("cat") == "kernel"), key=lambda k: k["s"])
    cls = {id(k): kernel_class(k["name"].replace("fbgemm", "")) for k in kernels}
    near_gemm = set()
    by_stream = {}
    for k in kernels:
        by_stream.setdefault((k["args"]["device"], k["args"]["stream"]), []).append(k)
    for ks in by_stream.values():
        for i, k in enumerate(ks):
            if any(cls[id(n)] == "gemm" for n in ks[max(i - 2, 0):i] + ks[i + 1:i + 3]):
                near_gemm.add(id(k))
    over, gemm = {}, {}
    for k in kernels:
        api = runtime.get(k["args"].get("correlation"))
        t = api["s"] if api is not None else k["s"]
        step = next((n for n, (s, e) in steps.items() if s <= t < e), None)
        if step is None:
            continue
        if cls[id(k)] == "dequant" and id(k) in near_gemm:
            over[step] = over.get(step, 0) + k["e"] - k["s"]
        elif cls[id(k)] == "gemm":
            gemm[step] = gemm.get(step, 0) + k["e"] - k["s"]
    share = {s: over.get(s, 0) / (over.get(s, 0) + gemm[s]) for s in gemm}
    worst = max(share, key=share.get)
    assert f.where.iteration == worst == 552
    assert f.evidence["kernel"].facts["conversion_kernels"].value == 0
    assert f.evidence["kernel"].facts["worst_dequant_ns"].value == over[worst]
    assert f.evidence["kernel"].facts["worst_gemm_ns"].value == gemm[worst]
    assert f.metrics["worst_share"].value == pytest.approx(round(share[worst], 4))
    assert f.impact_ns == sum(over.values())
    assert lint(load(TORCH / name), "TL003") == []          # 5.7 % < 10 %: silent by default


@needs_shared()
def test_tl003_real_fused_mxfp4_matmul_is_gemm_time():
    """vLLM decode on MI300X: Triton `matmul_ogs ... mxfp4` kernels classify as dequant by name
    but are fused dequant-GEMMs: no overhead, even with every threshold at zero."""
    name = "tracelens_mi300x_vllm_decode_graph_exec.json.gz"
    fused = [e for e in raw_kineto(name) if e.get("cat") == "kernel" and "mxfp4" in e["name"]]
    assert len(fused) == 48
    assert lint(load(TORCH / name), "TL003", min_share=0.0, min_bucket_ns=0) == []


@needs_shared()
def test_tl004_real_saxpy_pageable_copies():
    path = NSYS / "nsys2022.2_pipit-saxpy-mpi-cuda_a100.sqlite"
    findings = {f.key: f for f in lint(load(path), "TL004")}
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    kernels = con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = 0").fetchall()
    for copy_kind, key in ((1, "device0/H2D"), (2, "device0/D2H")):
        copies = con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = ? AND "
                             "deviceId = 0 AND bytes >= 65536", (copy_kind,)).fetchall()
        assert findings[key].impact_ns == uncovered(copies, kernels)
        assert findings[key].metrics["pageable_copies"].value == len(copies)   # srcKind/dstKind 0 = pageable
    con.close()


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

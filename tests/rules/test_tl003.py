"""TL003 dequant-overhead: hand-built low-bit GEMM traces with the key numbers recomputed by
plain loops, near-misses that must stay silent, and real-trace cross-checks."""
from __future__ import annotations

import pytest

from conftest import needs_shared
from mini_trace import US, Trace, lint
from raw_traces import TORCH, load, raw_kineto


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

"""TL003 dequant-overhead: the W4A16 case (built-in case w4a16-ttft) — a dequant pass before every linear
layer; worst in short prefill, amortised in long decode — and its near-misses (a fused
dequant-GEMM such as Marlin, long decode only)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

LAYERS = 16
DEQ = "void dequantize_int4_to_fp16_kernel<128>(const uint4*, half*, int)"
GEMM = "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize64x64x64"
FUSED = "void marlin::Marlin<256, 1, 8, 8, 4, 8>(const int4*, const int4*, int4*, const int4*, int, int, int)"
SILU = "void at::native::vectorized_elementwise_kernel<4, at::native::silu_kernel<c10::Half>>"
DEQ_NS, PREFILL_GEMM_NS, DECODE_GEMM_NS = 15_000, 25_000, 300_000


def _layers(b: TraceBuilder, gemm_ns: int, deq: str | None, gemm: str = GEMM) -> None:
    for _ in range(LAYERS):
        if deq:
            b.launch(deq, DEQ_NS)
        b.launch(gemm, gemm_ns)
        b.launch(SILU, 4_000)


def _serve(deq: str | None, gemm: str = GEMM, prefill: bool = True, decode_tokens: int = 4) -> TraceBuilder:
    b = TraceBuilder()
    with b.step(0), b.python("serve.py", 88, "generate"):
        if prefill:
            with b.range("prefill"):
                _layers(b, PREFILL_GEMM_NS, deq, gemm)
                b.sync("cudaStreamSynchronize")
        for _ in range(decode_tokens):
            with b.range("decode"):
                _layers(b, DECODE_GEMM_NS, deq, gemm)
                b.sync("cudaStreamSynchronize")
    return b


def w4a16() -> TraceBuilder:
    return _serve(DEQ)


def marlin() -> TraceBuilder:
    return _serve(None, gemm=FUSED)


def long_decode() -> TraceBuilder:
    return _serve(DEQ, prefill=False, decode_tokens=8)


def by_iteration() -> TraceBuilder:
    """No annotations: iterations are the buckets; small-batch GEMMs throughout."""
    b = TraceBuilder()
    for s in range(3):
        with b.step(s):
            _layers(b, PREFILL_GEMM_NS, DEQ)
            b.sync("cudaStreamSynchronize")
    return b


SCENARIOS = [
    Scenario(rule="TL003", name="positive-w4a16-prefill", build=w4a16, fires=True,
             expect={"impact_ns": LAYERS * DEQ_NS, "where.nvtx_path": ["prefill"],
                     "metrics.worst_share": round(DEQ_NS / (DEQ_NS + PREFILL_GEMM_NS), 4),
                     "metrics.best_share": round(DEQ_NS / (DEQ_NS + DECODE_GEMM_NS), 4)}),
    Scenario(rule="TL003", name="positive-by-iteration", build=by_iteration, fires=True,
             expect={"impact_ns": 3 * LAYERS * DEQ_NS}),
    Scenario(rule="TL003", name="near-miss-fused-marlin", build=marlin, fires=False),
    Scenario(rule="TL003", name="near-miss-long-decode", build=long_decode, fires=False),
]

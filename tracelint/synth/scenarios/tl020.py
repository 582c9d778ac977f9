"""TL020 gemm-efficiency: a BF16 GEMM with K not a multiple of 8, an aligned GEMM at 10 % of its
roofline bound, and near-misses (an aligned GEMM at 60 %, a misaligned one too small to matter,
the same trace as nsys without shapes)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

STEPS = 6
N = 4096
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<c10::BFloat16>>"
BF16 = "c10::BFloat16"
#: H100 SXM: 2·4096³ FLOPs at 989.4 TFLOP/s = 138.9 µs, the roofline bound (compute-bound).
T_MIN_NS = 2 * N ** 3 / 989.4e12 * 1e9


def _trace(k: int, gemm_ns: int, other_ns: int = 100_000) -> TraceBuilder:
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s), b.python("model.py", 30, "forward"):
            with b.op("aten::mm", {"Input Dims": [[N, k], [k, N]], "Input type": [BF16, BF16]}):
                b.launch(GEMM, gemm_ns)
            with b.op("aten::add", {"Input Dims": [[N, N], [N, N], []], "Input type": [BF16, BF16, "Scalar"]}):
                b.launch(ADD, other_ns)
            b.sync("cudaDeviceSynchronize")
    return b


def misaligned() -> TraceBuilder:
    """K = 4095: 60 % of the bound, but not a multiple of 8."""
    return _trace(N - 1, int(T_MIN_NS / 0.6))


def far_below_bound() -> TraceBuilder:
    """Aligned 4096³ GEMM taking 10x its roofline time."""
    return _trace(N, int(T_MIN_NS / 0.10))


def aligned_fast() -> TraceBuilder:
    return _trace(N, int(T_MIN_NS / 0.6))


def misaligned_tiny() -> TraceBuilder:
    """Misaligned, but 2 % of kernel time."""
    return _trace(N - 1, int(T_MIN_NS / 0.6), other_ns=12_000_000)


SHAPE_MIS = f"[{N},{N - 1}]bf16 x [{N - 1},{N}]bf16"
SHAPE_OK = f"[{N},{N}]bf16 x [{N},{N}]bf16"

SCENARIOS = [
    Scenario(rule="TL020", name="positive-misaligned-k", build=misaligned, fires=True, formats=("kineto",),
             expect={"key": f"aten::mm|{SHAPE_MIS}", "occurrences": STEPS, "where.line": 30}),
    Scenario(rule="TL020", name="positive-far-below-bound", build=far_below_bound, fires=True,
             formats=("kineto",), expect={"key": f"aten::mm|{SHAPE_OK}", "metrics.pct_of_bound": 0.1}),
    Scenario(rule="TL020", name="near-miss-aligned-at-60pct", build=aligned_fast, fires=False, formats=("kineto",)),
    Scenario(rule="TL020", name="near-miss-misaligned-tiny", build=misaligned_tiny, fires=False,
             formats=("kineto",)),
    Scenario(rule="TL020", name="near-miss-no-shapes-in-nsys", build=misaligned, fires=False, formats=("nsys",)),
]

"""Clean controls: well-behaved traces on which no rule may fire (every rule selected)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
NORM = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>"


def gpu_bound_training() -> TraceBuilder:
    """Host runs ahead: long GEMMs back to back, a pinned prefetch on a side stream overlapped
    with compute, no syncs inside steps, equal steps."""
    b = TraceBuilder()
    for s in range(6):
        with b.step(s), b.python("train.py", 20, "train_step"):
            b.copy("H2D", 4 << 20, 150_000, src_kind="pinned", stream=9)
            for _ in range(6):
                b.launch(GEMM, 900_000, registers=128, block=(256, 1, 1), grid=(132, 1, 1))
                b.launch(NORM, 120_000, registers=40, block=(512, 1, 1), grid=(1024, 1, 1))
    return b


SCENARIOS = [
    Scenario("*", "clean-gpu-bound-training", gpu_bound_training, False),
]

"""TL006 layout-transform: NCHW<->NHWC conversions around every convolution, and near-misses
(a one-off conversion at model load, a channels_last model with one small transpose)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

STEPS, CONVS = 4, 6
CONV = "sm86_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32"
TO_NHWC = "void cudnn::ops::nchwToNhwcKernel<__half, __half, float, false, true>(cudnn::ops::nchw2nhwc_params_t<float>, __half const*, __half*)"
TO_NCHW = "void cudnn::ops::nhwcToNchwKernel<__half, __half, float, true, false>(cudnn::ops::nhwc2nchw_params_t<float>, __half const*, __half*)"
TRANSPOSE = "void at::native::batched_transpose_kernel<float>(float const*, float*, int, int)"
CONV_NS, CONVERT_NS = 200_000, 30_000


def converts_every_conv() -> TraceBuilder:
    b = TraceBuilder("NVIDIA GeForce RTX 3090")
    for s in range(STEPS):
        with b.step(s), b.python("model.py", 57, "forward"):
            for _ in range(CONVS):
                b.launch(TO_NHWC, CONVERT_NS)
                b.launch(CONV, CONV_NS)
                b.launch(TO_NCHW, CONVERT_NS)
            b.sync("cudaStreamSynchronize")
    return b


def one_off_at_load() -> TraceBuilder:
    """Weights converted once before the first step; the steps run channels_last throughout."""
    b = TraceBuilder("NVIDIA GeForce RTX 3090")
    with b.range("load_model"):
        for _ in range(60):
            b.launch(TO_NHWC, CONVERT_NS)
        b.sync("cudaStreamSynchronize")
    for s in range(STEPS):
        with b.step(s):
            for _ in range(CONVS):
                b.launch(CONV, CONV_NS)
            b.sync("cudaStreamSynchronize")
    return b


def small_share() -> TraceBuilder:
    b = TraceBuilder("NVIDIA GeForce RTX 3090")
    for s in range(STEPS):
        with b.step(s):
            for _ in range(CONVS):
                b.launch(CONV, CONV_NS)
            b.launch(TRANSPOSE, 20_000)      # 20 / 1220 us: under 5 %
            b.sync("cudaStreamSynchronize")
    return b


SCENARIOS = [
    Scenario(rule="TL006", name="positive", build=converts_every_conv, fires=True,
             expect={"impact_ns": STEPS * CONVS * 2 * CONVERT_NS, "occurrences": STEPS * CONVS * 2,
                     "metrics.layout_share": round(2 * CONVERT_NS / (2 * CONVERT_NS + CONV_NS), 4)}),
    Scenario(rule="TL006", name="near-miss-one-off-at-load", build=one_off_at_load, fires=False),
    Scenario(rule="TL006", name="near-miss-small-share", build=small_share, fires=False),
]

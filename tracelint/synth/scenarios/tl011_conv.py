"""TL011 fp32-gemm, convolutions: a ResNet-style FP32 training step on an A100 whose backward
convolutions run in cuDNN's FP32 engines (`dgrad_engine<float>`, `wgrad_alg0_engine<float>`)
next to cuBLAS sgemm: all of them count (56 % here, 6 % if only the sgemm counted). Near-miss:
the same engines in FP16 (`<__half>`), which are not FP32 CUDA-core math."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

SGEMM = "ampere_sgemm_128x64_nn"
BN = "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>(float, float)"
RELU = "void at::native::vectorized_elementwise_kernel<4, at::native::threshold_kernel_cuda>(int)"


def dgrad(t: str) -> str:
    return f"void cudnn::detail::dgrad_engine<{t}, 128, 6, 8, 3, 3, 5, false>(int, int, int, {t} const*)"


def wgrad(t: str) -> str:
    return f"void cudnn::detail::wgrad_alg0_engine<{t}, 128, 5, 5, 3, 3, 3, false, 512>(int, int, {t}*)"


def _step(t: str) -> TraceBuilder:
    b = TraceBuilder(device_name="NVIDIA A100-SXM4-80GB")
    for s in range(3):
        with b.step(s):
            for _ in range(4):
                b.launch(dgrad(t), 200_000, registers=64, block=(128, 1, 1), grid=(512, 1, 1))
                b.launch(wgrad(t), 200_000, registers=64, block=(128, 1, 1), grid=(512, 1, 1))
                b.launch(SGEMM, 50_000, registers=120, block=(256, 1, 1), grid=(108, 1, 1))
                b.launch(BN, 200_000)
                b.launch(RELU, 150_000)
    return b


#: FP32 share: (200 + 200 + 50) / (200 + 200 + 50 + 200 + 150) = 450 / 800 µs.
SCENARIOS = [
    Scenario("TL011", "positive-fp32-cudnn-conv-engines", lambda: _step("float"), True,
             expect={"metrics.fp32_gemm_share": round(450 / 800, 4),
                     "metrics.fp32_gemm_ns": 3 * 4 * 450_000}),
    Scenario("TL011", "near-miss-fp16-conv-engines", lambda: _step("__half"), False),
]

"""TL011 fp32-gemm: an FP32 model on an H100 whose GEMMs run on CUDA cores (cuBLAS sgemm);
near-misses: the same model under BF16 autocast (tensor-core GEMMs), FP32 GEMMs that are a small
share, and FP32 GEMMs on a Pascal GPU (no tensor cores)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

SGEMM = "ampere_sgemm_128x64_tn"
BF16 = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
NORM = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>"
P100 = {"totalGlobalMem": 17071734784, "computeMajor": 6, "computeMinor": 0, "numSms": 56}


def _model(gemm: str, gemm_ns: int, device_name: str = "NVIDIA H100 80GB HBM3", props=None) -> TraceBuilder:
    b = TraceBuilder(device_name=device_name, device_props=props)
    for s in range(4):
        with b.step(s), b.python("model.py", 40, "forward"):
            for _ in range(6):
                b.launch(gemm, gemm_ns, registers=120, block=(256, 1, 1), grid=(264, 1, 1))
                b.launch(NORM, 150_000)
    return b


SCENARIOS = [
    Scenario("TL011", "positive-sgemm-on-h100", lambda: _model(SGEMM, 900_000), True,
             expect={"where.kernel": SGEMM}),
    Scenario("TL011", "near-miss-bf16-autocast", lambda: _model(BF16, 300_000), False),
    Scenario("TL011", "near-miss-small-share", lambda: _model(SGEMM, 10_000), False),
    Scenario("TL011", "near-miss-pascal", lambda: _model(SGEMM, 900_000, "Tesla P100-PCIE-16GB", P100), False),
]

"""TL021 old-arch-kernel: Turing (sm75) CUTLASS tensor-core kernels taking most of an H100's time,
and near-misses (sm80 kernels on an H100, Volta kernels on a Turing GPU, an sm75 kernel too
small to matter)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

STEPS = 4
SM75 = "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_tn_align1>(cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_tn_align1::Params)"
SM80 = "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x128_32x3_tn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x128_32x3_tn_align8::Params)"
VOLTA = "volta_h884gemm_128x128_ldg8_nn"
SOFTMAX = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16>"


def _trace(gemm: str, gemm_ns: int = 800_000, other_ns: int = 400_000, **kw) -> TraceBuilder:
    b = TraceBuilder(**kw)
    for s in range(STEPS):
        with b.step(s), b.python("model.py", 12, "attention"):
            b.launch(gemm, gemm_ns, op="aten::bmm")
            b.launch(SOFTMAX, other_ns, op="aten::_softmax")
            b.sync("cudaDeviceSynchronize")
    return b


def sm75_on_h100() -> TraceBuilder:
    return _trace(SM75)


def sm80_on_h100() -> TraceBuilder:
    return _trace(SM80)


def volta_on_turing() -> TraceBuilder:
    return _trace(VOLTA, device_name="Quadro RTX 6000",
                  device_props={"computeMajor": 7, "computeMinor": 5, "numSms": 72})


def sm75_tiny() -> TraceBuilder:
    return _trace(SM75, gemm_ns=10_000, other_ns=1_000_000)


SCENARIOS = [
    Scenario(rule="TL021", name="positive-sm75-on-h100", build=sm75_on_h100, fires=True,
             expect={"where.kernel": SM75, "occurrences": STEPS, "impact_ns": STEPS * 800_000,
                     "key": "device0"}),
    Scenario(rule="TL021", name="near-miss-sm80-on-h100", build=sm80_on_h100, fires=False),
    Scenario(rule="TL021", name="near-miss-volta-on-turing", build=volta_on_turing, fires=False),
    Scenario(rule="TL021", name="near-miss-tiny", build=sm75_tiny, fires=False),
]

"""TL022 memory-bound-dominant: an unfused attention softmax over an S×S score matrix taking most
of the GPU time (the vision-transformer case), and near-misses (the same softmax as a small
share next to long GEMMs, a compute-bound GEMM dominating, the nsys twin without shapes)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

STEPS = 3
S, HEADS, D = 4096, 16, 64
BF16 = "c10::BFloat16"
BMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x64"
SOFTMAX = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16>"
#: softmax reads and writes 16·4096² bf16: 1.07 GB in 1.0 ms = 1074 GB/s, 32 % of the H100's 3350.
SOFTMAX_NS = 1_000_000


def _trace(bmm_ns: int) -> TraceBuilder:
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s), b.python("vit.py", 88, "attention"):
            with b.op("aten::bmm", {"Input Dims": [[HEADS, S, D], [HEADS, D, S]], "Input type": [BF16, BF16]}):
                b.launch(BMM, bmm_ns)
            with b.op("aten::_softmax", {"Input Dims": [[HEADS, S, S], [], []],
                                         "Input type": [BF16, "Scalar", "Scalar"],
                                         "Concrete Inputs": ["", "-1", "False"]}):
                b.launch(SOFTMAX, SOFTMAX_NS)
            b.sync("cudaDeviceSynchronize")
    return b


def softmax_dominant() -> TraceBuilder:
    return _trace(bmm_ns=400_000)


def softmax_small_share() -> TraceBuilder:
    return _trace(bmm_ns=6_000_000)


SCENARIOS = [
    Scenario(rule="TL022", name="positive-unfused-softmax", build=softmax_dominant, fires=True,
             formats=("kineto",),
             expect={"key": "aten::_softmax|device0", "occurrences": STEPS, "where.line": 88}),
    Scenario(rule="TL022", name="near-miss-small-share", build=softmax_small_share, fires=False,
             formats=("kineto",)),
    Scenario(rule="TL022", name="near-miss-no-shapes-in-nsys", build=softmax_dominant, fires=False,
             formats=("nsys",)),
]

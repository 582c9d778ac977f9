"""TL033 cpu-tensor-moved-each-step: every step builds a mask with `torch.zeros` on the CPU and
moves it with `.to(device)` (non_blocking=False: copy, then a stream sync that drains the queued
forward kernels). Near-misses: the mask made on the device (a fill kernel, no copy), a batch
collated on the host and uploaded (real host data, TL032's), and the constant moved once before
the loop. nsys carries the ops only as emit_nvtx ranges (nvtx_ops)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

STEPS = 5
GEMM = "sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
LINE = 88
MASK_BYTES = 64 << 10


def _moved_constant(b: TraceBuilder, factory: str = "aten::zeros") -> None:
    b.cpu(25_000, name=factory)                      # filled on the CPU
    b.advance(3_000)
    with b.op("aten::to"), b.op("aten::_to_copy"), b.op("aten::copy_"):
        b.copy("H2D", MASK_BYTES, 8_000, src_kind="pageable")
        b.sync("cudaStreamSynchronize")


def loop(kind: str = "cpu", factory: str = "aten::zeros") -> TraceBuilder:
    b = TraceBuilder("NVIDIA A100-SXM4-80GB")
    if kind == "hoisted":
        with b.python("model.py", 20, "__init__"):
            _moved_constant(b, factory)
    for s in range(STEPS):
        with b.step(s):
            b.launch(GEMM, 600_000)                   # queued work the sync will wait for
            with b.python("model.py", LINE, "forward"):
                if kind == "cpu":
                    _moved_constant(b, factory)
                elif kind == "device":                # torch.zeros(..., device="cuda")
                    with b.op(factory):
                        b.launch(FILL, 3_000)
                elif kind == "batch":                 # collated on the host, then uploaded
                    b.cpu(25_000, name="aten::stack")
                    b.advance(3_000)
                    with b.op("aten::to"), b.op("aten::_to_copy"), b.op("aten::copy_"):
                        b.copy("H2D", MASK_BYTES, 8_000, src_kind="pageable")
                        b.sync("cudaStreamSynchronize")
            for _ in range(3):
                b.launch(GEMM, 300_000)
            b.sync("cudaDeviceSynchronize")
    return b


SCENARIOS = [
    Scenario(rule="TL033", name="positive-python-line", build=loop, fires=True, formats=("kineto",),
             expect={"where.file": "model.py", "where.line": LINE, "occurrences": STEPS,
                     "key": f"model.py:{LINE}"}),
    Scenario(rule="TL033", name="positive", build=loop, fires=True, nvtx_ops=True,
             expect={"occurrences": STEPS, "metrics.copies": STEPS}),
    Scenario(rule="TL033", name="positive-arange", build=lambda: loop(factory="aten::arange"), fires=True,
             nvtx_ops=True, expect={"occurrences": STEPS}),
    Scenario(rule="TL033", name="near-miss-made-on-device", build=lambda: loop("device"), fires=False,
             nvtx_ops=True),
    Scenario(rule="TL033", name="near-miss-host-batch", build=lambda: loop("batch"), fires=False,
             nvtx_ops=True),
    Scenario(rule="TL033", name="near-miss-hoisted", build=lambda: loop("hoisted"), fires=False,
             nvtx_ops=True),
]

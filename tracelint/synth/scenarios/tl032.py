"""TL032 blocking-or-pageable-h2d: each step uploads its batch with `.to(device)` from pageable
memory and non_blocking=False (the copy call blocks, then a stream sync), then prepares on the
host before launching compute; a pinned non_blocking=False variant (the sync alone blocks).
Near-misses: pinned non_blocking copies, blocking uploads only at set-up (outside the
iterations), and a constant made on the CPU and moved (TL033's, not reported twice)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

STEPS = 4
COPY_BYTES, COPY_NS = 16 << 20, 1_500_000       # 16 MiB at ~11 GB/s (pageable)
GEMM = "sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32"
LINE = 57


def _upload(b: TraceBuilder, src_kind: str, non_blocking: bool, nbytes: int = COPY_BYTES,
            dur: int = COPY_NS) -> None:
    """`x.to(device)`: aten::to > _to_copy > copy_ around cudaMemcpyAsync (+ the stream sync of
    non_blocking=False)."""
    with b.op("aten::to"), b.op("aten::_to_copy"), b.op("aten::copy_"):
        b.copy("H2D", nbytes, dur, src_kind=src_kind)
        if not non_blocking:
            b.sync("cudaStreamSynchronize")


def loop(src_kind: str = "pageable", non_blocking: bool = False, setup_only: bool = False,
         constant: bool = False, explicit_sync: bool = False) -> TraceBuilder:
    b = TraceBuilder("NVIDIA A100-SXM4-80GB")
    if setup_only:                      # weights / data set uploaded once, before the loop
        for _ in range(3):
            _upload(b, "pageable", False)
    for s in range(STEPS):
        with b.step(s):
            with b.python("train.py", LINE, "train_step"):
                if constant:            # torch.zeros(...).to(device): TL033's pattern
                    b.cpu(30_000, name="aten::zeros")
                    b.advance(2_000)
                if setup_only:
                    _upload(b, "pinned", True)
                else:
                    _upload(b, src_kind, non_blocking)
                if explicit_sync:       # torch.cuda.synchronize() right after the copy
                    b.sync("cudaDeviceSynchronize")
            b.cpu(1_000_000, name="aten::stack")      # host work the copy could overlap
            for _ in range(4):
                b.launch(GEMM, 400_000)
            b.sync("cudaDeviceSynchronize")
    return b


SCENARIOS = [
    Scenario(rule="TL032", name="positive-pageable-python-line", build=loop, fires=True,
             formats=("kineto",),
             expect={"where.file": "train.py", "where.line": LINE, "occurrences": STEPS,
                     "metrics.pageable_copies": STEPS, "metrics.synced_copies": STEPS}),
    Scenario(rule="TL032", name="positive-pageable", build=loop, fires=True,
             expect={"occurrences": STEPS, "metrics.pageable_copies": STEPS}),
    Scenario(rule="TL032", name="positive-pinned-non-blocking-false",
             build=lambda: loop("pinned", non_blocking=False), fires=True,
             expect={"occurrences": STEPS, "metrics.pageable_copies": 0, "metrics.synced_copies": STEPS}),
    Scenario(rule="TL032", name="near-miss-pinned-non-blocking", build=lambda: loop("pinned", True),
             fires=False),
    Scenario(rule="TL032", name="near-miss-setup-upload", build=lambda: loop(setup_only=True), fires=False),
    Scenario(rule="TL032", name="near-miss-constant-is-tl033", build=lambda: loop(constant=True),
             fires=False, nvtx_ops=True),
]

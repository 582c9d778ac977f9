"""TL004 unoverlapped-copy: a pageable input copy on the compute stream before every step,
and near-misses (pinned copies prefetched on a side stream under compute, tiny reads)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

STEPS = 3
COPY_BYTES, COPY_NS = 64 << 20, 5_000_000          # 64 MiB at ~13 GB/s (pageable)
GEMM = "sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32"


def pageable_input() -> TraceBuilder:
    b = TraceBuilder("NVIDIA A100-SXM4-80GB")
    for s in range(STEPS):
        with b.step(s), b.python("train.py", 31, "train_step"):
            b.copy("H2D", COPY_BYTES, COPY_NS, src_kind="pageable", op="aten::copy_")
            for _ in range(4):
                b.launch(GEMM, 1_000_000)
            b.sync("cudaStreamSynchronize")
    return b


def pinned_prefetch() -> TraceBuilder:
    """The next batch is copied from pinned memory on stream 8 while stream 7 computes."""
    b = TraceBuilder("NVIDIA A100-SXM4-80GB")
    for s in range(STEPS):
        with b.step(s):
            for _ in range(4):
                b.launch(GEMM, 1_500_000)
            b.copy("H2D", COPY_BYTES, 3_000_000, src_kind="pinned", stream=8)
            b.sync("cudaDeviceSynchronize")
    return b


def tiny_reads() -> TraceBuilder:
    """`.item()`-style 4-byte reads after each kernel: exposed, but TL005's, not TL004's."""
    b = TraceBuilder("NVIDIA A100-SXM4-80GB")
    for s in range(STEPS):
        with b.step(s):
            for _ in range(20):
                b.launch(GEMM, 50_000)
                b.copy("D2H", 4, 3_000, dst_kind="pageable", api="cudaMemcpyAsync")
    return b


SCENARIOS = [
    Scenario(rule="TL004", name="positive-pageable", build=pageable_input, fires=True,
             expect={"impact_ns": STEPS * COPY_NS, "metrics.pageable_copies": STEPS,
                     "key": "device0/H2D"}),
    Scenario(rule="TL004", name="near-miss-pinned-prefetch", build=pinned_prefetch, fires=False),
    Scenario(rule="TL004", name="near-miss-tiny-reads", build=tiny_reads, fires=False),
]

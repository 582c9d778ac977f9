"""TL001 launch-gap: host-side Python work between short kernels leaves the GPU idle; the
near-misses are the same work with the host running ahead (GPU-bound) and gaps below the
threshold."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>"


def host_bound() -> TraceBuilder:
    """Each step: 8 kernels of 30 µs, each followed by 120 µs of Python work at model.py:57."""
    b = TraceBuilder()
    for s in range(4):
        with b.step(s), b.python("model.py", 57, "forward"):
            for _ in range(8):
                b.launch(KERNEL, 30_000)
                b.cpu(120_000, name="aten::view")
    return b


def gpu_bound() -> TraceBuilder:
    """Same Python work, but kernels of 400 µs: the host runs ahead and the GPU never waits."""
    b = TraceBuilder()
    for s in range(4):
        with b.step(s), b.python("model.py", 57, "forward"):
            for _ in range(8):
                b.launch(KERNEL, 400_000)
                b.cpu(120_000, name="aten::view")
    return b


def short_gaps() -> TraceBuilder:
    """Host work of 8 µs between 30 µs kernels: gaps below min_gap_ns (20 µs)."""
    b = TraceBuilder()
    for s in range(4):
        with b.step(s):
            for _ in range(8):
                b.launch(KERNEL, 30_000)
                b.cpu(8_000)
    return b


SCENARIOS = [
    Scenario("TL001", "positive-host-bound", host_bound, True,
             expect={"where.device": 0, "where.line": 57}, formats=("kineto",)),
    Scenario("TL001", "positive-host-bound-any-format", host_bound, True, expect={"where.device": 0}),
    Scenario("TL001", "near-miss-gpu-bound", gpu_bound, False),
    Scenario("TL001", "near-miss-short-gaps", short_gaps, False),
]

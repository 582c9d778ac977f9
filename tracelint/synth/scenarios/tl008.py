"""TL008 tail-latency: a training loop where 2 of 24 steps stall (a data-loader wait and a
burst of extra kernels), a data-loader range with a long tail, cold start reported apart, and
near-misses (steady steps with small jitter; steady steps after a cold start; a last step
cut by the profiler window)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

STEPS = 24
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"
JITTER = (0, 20_000, -15_000, 10_000, -5_000, 25_000)     # host jitter per step, ns


def _step(b: TraceBuilder, s: int, *, load_ns: int = 200_000, extra: int = 0,
          cut: bool = False) -> None:
    with b.step(s), b.python("train.py", 30, "train"):
        with b.range("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"):
            b.cpu(load_ns + JITTER[s % len(JITTER)])
        with b.range("forward"):
            for _ in range(6 + extra):
                b.launch(GEMM, 100_000)
        if cut:                       # the profiler window closes mid-step
            b.sync("cudaStreamSynchronize")
            return
        b.launch(ADD, 20_000)
        b.sync("cudaStreamSynchronize")


def tail_steps() -> TraceBuilder:
    """Steps 9 and 17 are slow: a 2.5 ms data-loader stall and 20 extra GEMMs (+2 ms)."""
    b = TraceBuilder()
    for s in range(STEPS):
        _step(b, s, load_ns=2_700_000 if s == 9 else 200_000, extra=20 if s == 17 else 0)
    return b


def steady() -> TraceBuilder:
    b = TraceBuilder()
    for s in range(STEPS):
        _step(b, s)
    return b


def cold_then_steady() -> TraceBuilder:
    """The first two steps compile / autotune (+4 ms of host time each), then a steady state."""
    b = TraceBuilder()
    for s in range(STEPS):
        if s < 2:
            b.cpu(0)
            with b.step(s), b.range("torch.compile"):
                b.cpu(4_000_000)
            continue
        _step(b, s)
    return b


def cut_last_step() -> TraceBuilder:
    """Steady steps; the last one ends at the trace end, half done (profiler stopped)."""
    b = TraceBuilder()
    for s in range(STEPS):
        _step(b, s, cut=s == STEPS - 1)
    return b


SCENARIOS = [
    Scenario(rule="TL008", name="positive-iterations", build=tail_steps, fires=True,
             expect={"key": "iterations", "where.iteration": 9}),
    Scenario(rule="TL008", name="positive-dataloader-range", build=tail_steps, fires=True,
             expect={"key": "range|enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"}),
    Scenario(rule="TL008", name="cold-start-info", build=cold_then_steady, fires=True,
             expect={"key": "cold-start|iterations", "severity": "info", "occurrences": 2}),
    Scenario(rule="TL008", name="near-miss-steady-jitter", build=steady, fires=False),
    Scenario(rule="TL008", name="near-miss-cut-last-step", build=cut_last_step, fires=False),
]

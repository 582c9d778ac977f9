"""TL002 small-op-storm: a launch-bound elementwise storm, and three near-misses (the same
work replayed from a CUDA graph, tiny kernels queued behind a long GEMM, kernels longer
than their launch)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

STEPS, SMALL = 3, 50
API_NS, SMALL_NS = 5_000, 2_000          # launch call 5 us, kernel 2 us: 3 us idle after each
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"
GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32"


def storm() -> TraceBuilder:
    """Per step: a GEMM, host work, then 50 tiny adds launched one by one (optimizer-style)."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s), b.python("train.py", 42, "train_step"):
            b.launch(GEMM, 200_000)
            b.cpu(250_000)                        # Python work while the GEMM runs
            with b.python("optim.py", 17, "step"):
                for _ in range(SMALL):
                    b.launch(ADD, SMALL_NS, api_dur_ns=API_NS)
            b.launch(GEMM, 200_000)
            b.sync("cudaStreamSynchronize")
    return b


def graph_replay() -> TraceBuilder:
    """The same kernels replayed from one cudaGraphLaunch per step (1 us apart on the GPU)."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s):
            head = b.launch(GEMM, 200_000, api="cudaGraphLaunch", api_dur_ns=12_000)
            t = head.end
            for _ in range(SMALL):
                t += 1_000
                b.kernel(ADD, SMALL_NS, start_ns=t, correlation=head.correlation)
                t += SMALL_NS
            b.kernel(GEMM, 200_000, start_ns=t + 1_000, correlation=head.correlation)
            b.sync("cudaStreamSynchronize")
    return b


def queued_behind_gemm() -> TraceBuilder:
    """Tiny kernels, but the host runs far ahead: they queue behind a 2 ms GEMM and the GPU never
    idles inside the run (GPU-bound: fusion would save little wall time)."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s):
            b.launch(GEMM, 2_000_000)
            for _ in range(SMALL):
                b.launch(ADD, SMALL_NS, api_dur_ns=API_NS)
            b.sync("cudaStreamSynchronize")
    return b


def long_kernels() -> TraceBuilder:
    """50 kernels per step, each 20 us: longer than its 5 us launch, so not a storm."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s):
            for _ in range(SMALL):
                b.launch(ADD, 20_000, api_dur_ns=API_NS, gap_after_ns=10_000)
            b.sync("cudaStreamSynchronize")
    return b


# GPU idle inside each storm: 49 gaps of (5 us launch period - 2 us kernel).
STORM_IDLE_NS = STEPS * (SMALL - 1) * (API_NS - SMALL_NS)

SCENARIOS = [
    Scenario(rule="TL002", name="positive", build=storm, fires=True,
             expect={"impact_ns": STORM_IDLE_NS, "metrics.small_kernels": STEPS * SMALL,
                     "occurrences": STEPS, "key": "device0"}),
    Scenario(rule="TL002", name="positive-source-line", build=storm, fires=True, formats=("kineto",),
             expect={"where.file": "optim.py", "where.line": 17}),
    Scenario(rule="TL002", name="near-miss-cuda-graph", build=graph_replay, fires=False),
    Scenario(rule="TL002", name="near-miss-gpu-bound-queue", build=queued_behind_gemm, fires=False),
    Scenario(rule="TL002", name="near-miss-long-kernels", build=long_kernels, fires=False),
]

"""TL009 exposed-communication: a data-parallel step whose gradient all-reduce runs after the
backward pass with nothing to overlap (and the optimizer waits for it), and near-misses (the
same all-reduce bucketed under backward compute on a side stream; a tiny broadcast)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

STEPS = 4
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
ADAM = "void at::native::multi_tensor_apply_kernel<at::native::FusedAdamMathFunctor<float>>"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
BCAST = "ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
COMP, COMM = 7, 20
AR_NS = 400_000


def exposed() -> TraceBuilder:
    """backward (6 x 150 us) -> all-reduce 400 us alone on stream 20 -> optimizer waits for it."""
    b = TraceBuilder()
    b.rank(0, 8)
    for s in range(STEPS):
        with b.step(s), b.python("train.py", 40, "train_step"):
            with b.range("backward"):
                for _ in range(6):
                    b.launch(GEMM, 150_000, stream=COMP)
            with b.python("ddp.py", 120, "finalize_backward"), b.range("nccl:all_reduce"):
                b.sync("cudaStreamWaitEvent", stream=COMM, wait_stream=COMP)
                b.launch(ALLREDUCE, AR_NS, stream=COMM)
            b.sync("cudaStreamWaitEvent", stream=COMP, wait_stream=COMM)
            b.launch(ADAM, 50_000, stream=COMP)
            b.sync("cudaDeviceSynchronize")
    return b


def bucketed() -> TraceBuilder:
    """Same work, but each gradient bucket's all-reduce (100 us) runs on stream 20 while the
    next backward GEMM (150 us) runs on stream 7: fully hidden."""
    b = TraceBuilder()
    b.rank(0, 8)
    for s in range(STEPS):
        with b.step(s):
            b.launch(GEMM, 150_000, stream=COMP)
            for _ in range(4):
                b.sync("cudaStreamWaitEvent", stream=COMM, wait_stream=COMP)
                b.launch(GEMM, 150_000, stream=COMP)
                b.launch(ALLREDUCE, 100_000, stream=COMM)
            b.launch(GEMM, 150_000, stream=COMP)
            b.sync("cudaStreamWaitEvent", stream=COMP, wait_stream=COMM)
            b.launch(ADAM, 50_000, stream=COMP)
            b.sync("cudaDeviceSynchronize")
    return b


def tiny_broadcast() -> TraceBuilder:
    """A 5 us broadcast of a flag per step, exposed but negligible."""
    b = TraceBuilder()
    b.rank(0, 8)
    for s in range(STEPS):
        with b.step(s):
            for _ in range(6):
                b.launch(GEMM, 150_000, stream=COMP)
            b.sync("cudaStreamWaitEvent", stream=COMM, wait_stream=COMP)
            b.launch(BCAST, 5_000, stream=COMM)
            b.sync("cudaDeviceSynchronize")
    return b


SCENARIOS = [
    Scenario(rule="TL009", name="positive", build=exposed, fires=True,
             expect={"key": "AllReduce|device0", "impact_ns": STEPS * AR_NS,
                     "occurrences": STEPS, "where.kernel": ALLREDUCE}),
    Scenario(rule="TL009", name="positive-python-line", build=exposed, fires=True,
             formats=("kineto",), expect={"where.file": "ddp.py", "where.line": 120}),
    Scenario(rule="TL009", name="near-miss-bucketed-overlap", build=bucketed, fires=False),
    Scenario(rule="TL009", name="near-miss-tiny-broadcast", build=tiny_broadcast, fires=False),
]

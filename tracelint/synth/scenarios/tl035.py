"""TL035 data-parallel: a training step under torch.nn.DataParallel over two GPUs: Scatter of
the batch, Broadcast of the parameters (replicate), the replicas' forward on both GPUs, Gather of
the outputs on GPU 0, and in backward BroadcastBackward summing the gradients on GPU 0 (ops in
Kineto, emit_nvtx ranges in nsys; the Kineto trace also carries the data_parallel.py frames).
Near-misses: DataParallel over one GPU (a Scatter, nothing replicated or gathered) and
DistributedDataParallel (one process per GPU, an NCCL all-reduce, no DataParallel Function)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
DP = "torch/nn/parallel/data_parallel.py"


def _on(b: TraceBuilder, device: int, fn) -> None:
    """Issue work on another GPU (its own stream), as DataParallel's replica threads do."""
    old = b.device_id
    b.device_id = device
    try:
        fn()
    finally:
        b.device_id = old


def data_parallel(gpus: int = 2, steps: int = 4) -> TraceBuilder:
    b = TraceBuilder()
    for s in range(steps):
        with b.step(s):
            with b.python("train.py", 52, "train_step"):
                with b.python(DP, 171, "forward"):
                    with b.op("Scatter"):
                        for d in range(gpus):
                            _on(b, d, lambda d=d: b.copy("H2D", bytes=16 << 20, dur_ns=400_000, stream=7 + 10 * d))
                    if gpus > 1:
                        with b.python("torch/nn/parallel/replicate.py", 87, "replicate"):
                            with b.op("Broadcast"):
                                for d in range(1, gpus):
                                    _on(b, d, lambda d=d: b.copy("P2P", bytes=200 << 20, dur_ns=2_500_000,
                                                                 stream=7 + 10 * d))
                    for d in range(gpus):
                        for _ in range(6):
                            _on(b, d, lambda d=d: b.launch(GEMM, 300_000, stream=7 + 10 * d))
                    if gpus > 1:
                        with b.op("Gather"):
                            _on(b, 1, lambda: b.copy("P2P", bytes=4 << 20, dur_ns=60_000, stream=17))
            for d in range(gpus):
                for _ in range(6):
                    _on(b, d, lambda d=d: b.launch(GEMM, 600_000, stream=7 + 10 * d))
            if gpus > 1:
                with b.op("autograd::engine::evaluate_function: BroadcastBackward"):
                    with b.op("BroadcastBackward"):
                        with b.op("ReduceAddCoalesced"):
                            _on(b, 1, lambda: b.copy("P2P", bytes=200 << 20, dur_ns=2_500_000, stream=17))
                            b.launch(ADD, 150_000)
            b.cpu(300_000)
    return b


def ddp(steps: int = 4) -> TraceBuilder:
    b = TraceBuilder()
    b.rank(0, 2)
    for s in range(steps):
        with b.step(s):
            with b.python("torch/nn/parallel/distributed.py", 1637, "forward"):
                b.copy("H2D", bytes=8 << 20, dur_ns=200_000)
                for _ in range(6):
                    b.launch(GEMM, 300_000)
            for _ in range(6):
                b.launch(GEMM, 600_000)
            with b.op("nccl:all_reduce"):
                b.launch(ALLREDUCE, 900_000, stream=21)
            b.cpu(300_000)
    return b


SCENARIOS = [
    Scenario("TL035", "positive-two-gpus", data_parallel, True,
             expect={"occurrences": 4, "key": "data_parallel", "metrics.gpus": 2}, nvtx_ops=True),
    Scenario("TL035", "near-miss-one-gpu", lambda: data_parallel(gpus=1), False, nvtx_ops=True),
    Scenario("TL035", "near-miss-ddp", ddp, False, nvtx_ops=True),
]

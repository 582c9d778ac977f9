"""TL036 cudnn-autotune-in-steps: cudnn.benchmark=True with an input size that changes every
step: in every step the first call of each convolution for the new shape times 8 candidate
algorithms (cudnn_frontend time_sorted_plan: run, cudaDeviceSynchronize, cudaEventRecord, run,
cudaEventRecord, cudaEventSynchronize per plan) before running the chosen one. Near-misses:
fixed shapes, tuned once in the first profiled step; and benchmark=False (heuristics, no
search: the trace cannot tell it from an already-tuned run, and the rule does not try)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

CANDIDATES = [f"sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize{t}_stage{s}"
              for t in ("64x64x64", "128x64x64", "128x128x64", "256x64x32") for s in (3, 4)]
CHOSEN = CANDIDATES[2]
LAYERS = 3


def _tuned_conv(b: TraceBuilder) -> None:
    with b.op("aten::conv2d"):
        with b.op("aten::convolution"):
            with b.op("aten::_convolution"):
                with b.op("aten::cudnn_convolution"):
                    b.sync("cudaDeviceSynchronize")
                    for name in CANDIDATES:
                        b.launch(name, 200_000)                 # warm-up run of the plan
                        b.sync("cudaDeviceSynchronize")
                        b.api("cudaEventRecord", 2_000)
                        b.launch(name, 200_000)                 # the timed run
                        b.sync("cudaEventSynchronize")
                        b.api("cudaEventElapsedTime", 1_000)
                    b.launch(CHOSEN, 150_000)                   # the real convolution


def _plain_conv(b: TraceBuilder) -> None:
    with b.op("aten::conv2d"):
        with b.op("aten::convolution"):
            with b.op("aten::_convolution"):
                with b.op("aten::cudnn_convolution"):
                    b.launch(CHOSEN, 150_000)


def steps(retune_every_step: bool = True, benchmark: bool = True, n: int = 4) -> TraceBuilder:
    b = TraceBuilder()
    for s in range(n):
        with b.step(s):
            with b.python("train.py", 63, "train_step"):
                for _ in range(LAYERS):
                    tune = benchmark and (retune_every_step or s == 0)
                    (_tuned_conv if tune else _plain_conv)(b)
                    b.launch("void at::native::vectorized_elementwise_kernel<4, at::native::relu>", 20_000)
            b.cpu(100_000)
    return b


SCENARIOS = [
    Scenario("TL036", "positive-shape-changes-every-step", steps, True,
             expect={"occurrences": 12, "key": "cudnn_autotune", "metrics.later_iterations": 3},
             nvtx_ops=True),
    Scenario("TL036", "near-miss-fixed-shapes-tuned-once", lambda: steps(retune_every_step=False), False,
             nvtx_ops=True),
    Scenario("TL036", "near-miss-benchmark-off", lambda: steps(benchmark=False), False, nvtx_ops=True),
]

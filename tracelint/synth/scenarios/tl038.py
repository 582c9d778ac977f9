"""TL038 cuda-graph-opportunity: the same 20 kernels launched one by one in every iteration,
each after 10 µs of Python, so the GPU waits 7 µs before each (kernels of 8 µs are longer than
their 5 µs launch call: TL002 stays silent, only a graph removes the host from between them);
CUDA graphs captured and instantiated again in every iteration. Near-misses: the same kernels
replayed from a graph, shapes that change every iteration, a GPU-bound sequence, and a graph
captured once and replayed."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

STEPS, N = 4, 20
PY_NS, API_NS, KERNEL_NS = 10_000, 5_000, 8_000
NAMES = ("void at::native::vectorized_layer_norm_kernel<float, float>",
         "triton_poi_fused_gelu_0", "void at::native::vectorized_elementwise_kernel<4, AddFunctor<float>>",
         "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64")
CAPTURE_ARGS = {"begin_ns": 3_000, "launches": 10, "end_ns": 3_000, "instantiate_ns": 2_000_000}


def _region(b: TraceBuilder, step: int, grid=(64, 1, 1), kernel_ns: int = KERNEL_NS, py_ns: int = PY_NS):
    with b.python("model.py", 58, "decode_step"):
        for i in range(N):
            b.cpu(py_ns)
            b.launch(NAMES[i % len(NAMES)], kernel_ns, api_dur_ns=API_NS, grid=grid)


def launch_bound(grid_of=lambda s: (64, 1, 1), kernel_ns: int = KERNEL_NS, py_ns: int = PY_NS) -> TraceBuilder:
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s), b.python("model.py", 90, "generate"):
            _region(b, s, grid_of(s), kernel_ns, py_ns)
            b.sync("cudaStreamSynchronize")
    return b


def _replay(b: TraceBuilder) -> None:
    head = b.launch(NAMES[0], KERNEL_NS, api="cudaGraphLaunch", api_dur_ns=8_000, grid=(64, 1, 1))
    t = head.end
    for i in range(1, N):
        t += 1_000
        b.kernel(NAMES[i % len(NAMES)], KERNEL_NS, start_ns=t, correlation=head.correlation, grid=(64, 1, 1))
        t += KERNEL_NS


def _capture(b: TraceBuilder) -> None:
    """Stream capture: the launches record nodes, nothing runs on the GPU; then instantiate."""
    b.api("cudaStreamBeginCapture", CAPTURE_ARGS["begin_ns"])
    for _ in range(CAPTURE_ARGS["launches"]):
        b.api("cudaLaunchKernel", API_NS)
    b.api("cudaStreamEndCapture", CAPTURE_ARGS["end_ns"])
    b.api("cudaGraphInstantiateWithFlags", CAPTURE_ARGS["instantiate_ns"])


def graphed(recapture: bool) -> TraceBuilder:
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s), b.python("model.py", 90, "generate"):
            if s == 0 or recapture:
                with b.python("model.py", 70, "capture_graph"):
                    _capture(b)
            _replay(b)
            b.sync("cudaStreamSynchronize")
    return b


# GPU idle per region: 19 gaps of (launch period - kernel) between 20 kernels.
REGION_IDLE_NS = (N - 1) * (PY_NS + API_NS - KERNEL_NS)
# Host time of one re-recording: begin .. end of capture plus the instantiation right after it.
RERECORD_NS = (CAPTURE_ARGS["begin_ns"] + CAPTURE_ARGS["launches"] * API_NS + CAPTURE_ARGS["end_ns"]
               + CAPTURE_ARGS["instantiate_ns"])

SCENARIOS = [
    Scenario("TL038", "positive", launch_bound, True,
             expect={"key": "device0", "impact_ns": STEPS * REGION_IDLE_NS, "occurrences": STEPS,
                     "metrics.regions": 1, "metrics.region_kernels": STEPS * N}),
    Scenario("TL038", "positive-source-line", launch_bound, True, formats=("kineto",),
             expect={"key": "device0", "where.file": "model.py", "where.function": "decode_step"}),
    Scenario("TL038", "positive-rerecord", lambda: graphed(True), True,
             expect={"key": "graph-rerecord", "impact_ns": (STEPS - 1) * RERECORD_NS,
                     "occurrences": 2 * (STEPS - 1), "metrics.graph_launches": STEPS}),
    Scenario("TL038", "near-miss-graph-replay", lambda: graphed(False), False),
    Scenario("TL038", "near-miss-shapes-change", lambda: launch_bound(grid_of=lambda s: (64 * (s + 1), 1, 1)), False),
    Scenario("TL038", "near-miss-gpu-bound", lambda: launch_bound(kernel_ns=60_000, py_ns=1_000), False),
]

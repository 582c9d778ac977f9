"""TL005 hidden-sync: a `.item()` read in the middle of the forward pass (named by its Python
line in Kineto), `cudaFree` mid-iteration, the loss read at the end of each step followed by
host work that idles the GPU, and near-misses (the same step-end read with no idle after it, a sync on a copy stream while compute keeps the GPU busy, allocations in warm-up,
a GPU-side `cudaStreamWaitEvent`)."""
from __future__ import annotations

from ..builder import SYNC_EXIT_NS, TraceBuilder
from . import Scenario

STEPS = 6
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
RELU = "void at::native::vectorized_elementwise_kernel<4, at::native::relu_kernel<float>>"
LATENCY = 4_000            # TraceBuilder's default launch latency


def _forward(b: TraceBuilder, n: int = 4, dur: int = 50_000) -> None:
    for _ in range(n):
        b.launch(GEMM, dur, op="aten::mm")
        b.launch(RELU, 10_000, op="aten::relu")


def item_mid_forward() -> TraceBuilder:
    """`if mask.sum().item() > 0:` at model.py:42, between two halves of the forward pass."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s), b.python("train.py", 88, "train_step"):
            with b.range("forward"):
                with b.python("model.py", 30, "forward"):
                    _forward(b)
                with b.python("model.py", 42, "forward"), b.op("aten::item"), \
                        b.op("aten::_local_scalar_dense"):
                    b.copy("D2H", 4, 2_000, dst_kind="pinned")
                    b.sync("cudaStreamSynchronize")
                with b.python("model.py", 45, "forward"):
                    _forward(b)
            b.sync("cudaStreamSynchronize")      # end of step: excluded (logging)
    return b


def loss_item_at_step_end() -> TraceBuilder:
    """`loss.item()` once per step, after the optimizer: the last GPU-facing call of the step."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s), b.python("train.py", 88, "train_step"):
            _forward(b)
            with b.python("train.py", 95, "train_step"), b.op("aten::item"), \
                    b.op("aten::_local_scalar_dense"):
                b.copy("D2H", 4, 2_000, dst_kind="pinned")
                b.sync("cudaStreamSynchronize")
            b.cpu(300_000, name="log_metrics")
    return b


def loss_item_at_step_end_no_idle() -> TraceBuilder:
    """`loss.item()` ends each 2 ms step and the next step launches at once: the GPU idles only
    a launch latency per step (0.3 % of the span), so the step-end exemption holds."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s), b.python("train.py", 88, "train_step"):
            _forward(b, dur=500_000)
            with b.python("train.py", 95, "train_step"), b.op("aten::item"), \
                    b.op("aten::_local_scalar_dense"):
                b.copy("D2H", 4, 2_000, dst_kind="pinned")
                b.sync("cudaStreamSynchronize")
    return b


def copy_stream_sync() -> TraceBuilder:
    """A small D2H copy on side stream 9 is awaited while a 2 ms kernel keeps stream 7 busy."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s):
            b.launch(GEMM, 2_000_000)
            b.copy("D2H", 1 << 16, 10_000, dst_kind="pinned", stream=9)
            b.sync("cudaStreamSynchronize", stream=9)
            _forward(b)
            b.sync("cudaDeviceSynchronize")
    return b


def free_mid_step() -> TraceBuilder:
    """The caching allocator frees memory (`torch.cuda.empty_cache()`) in the middle of each
    step: the host sits 300 us in cudaFree while the GPU drains."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s), b.python("train.py", 88, "train_step"):
            _forward(b, n=2, dur=20_000)
            with b.python("train.py", 91, "train_step"):
                b.api("cudaFree", 300_000)
            _forward(b, n=2, dur=20_000)
            b.sync("cudaStreamSynchronize")
    return b


def alloc_in_warmup() -> TraceBuilder:
    """cudaMalloc / cudaFree before the first profiled step (warm-up): not mid-iteration."""
    b = TraceBuilder()
    for _ in range(4):
        b.api("cudaMalloc", 400_000)
        _forward(b, n=1)
        b.api("cudaFree", 300_000)
    for s in range(STEPS):
        with b.step(s):
            _forward(b)
            b.sync("cudaStreamSynchronize")
    return b


def stream_wait_event() -> TraceBuilder:
    """cudaStreamWaitEvent orders stream 9 after stream 7 on the GPU; the host never blocks."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s):
            _forward(b)
            b.sync("cudaStreamWaitEvent", stream=9, wait_stream=7)
            b.launch(RELU, 10_000, stream=9)
            _forward(b)
            b.sync("cudaDeviceSynchronize")
    return b


#: Per `.item()`: the sync returns SYNC_EXIT_NS after the copy drains, the next kernel starts
#: one launch latency after the next call: that much GPU idle per call.
ITEM_IDLE_NS = STEPS * (SYNC_EXIT_NS + LATENCY)

SCENARIOS = [
    Scenario(rule="TL005", name="positive-python-line", build=item_mid_forward, fires=True,
             formats=("kineto",),
             expect={"where.file": "model.py", "where.line": 42, "occurrences": STEPS,
                     "impact_ns": ITEM_IDLE_NS}),
    Scenario(rule="TL005", name="positive", build=item_mid_forward, fires=True,
             expect={"occurrences": STEPS, "impact_ns": ITEM_IDLE_NS,
                     "where.nvtx_path": ["forward"]}),
    Scenario(rule="TL005", name="positive-free-mid-step", build=free_mid_step, fires=True,
             expect={"occurrences": STEPS}),
    # A step-end read followed by host work idles the GPU every step: reported (nsys analyze
    # catches it too); the exemption holds only when the idle is almost nothing.
    Scenario(rule="TL005", name="positive-step-end-item-then-host-work", build=loss_item_at_step_end,
             fires=True, expect={"where.line": 95}, formats=("kineto",)),
    Scenario(rule="TL005", name="positive-step-end-item-then-host-work-any-format",
             build=loss_item_at_step_end, fires=True),
    Scenario(rule="TL005", name="near-miss-step-end-item-no-idle", build=loss_item_at_step_end_no_idle,
             fires=False),
    Scenario(rule="TL005", name="near-miss-copy-stream-busy-gpu", build=copy_stream_sync, fires=False),
    Scenario(rule="TL005", name="near-miss-alloc-in-warmup", build=alloc_in_warmup, fires=False),
    Scenario(rule="TL005", name="near-miss-stream-wait-event", build=stream_wait_event, fires=False),
]

"""TL001 causes and warm-up: each gap attributed from what the host thread and streams did in
it, warm-up reported apart (info), and the idle before the first kernel of an iteration
measured. Each pattern has a near-miss twin (see tests/test_gap_causes.py for the checks on
cause and severity, which the Scenario expectations cannot express alone)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

K = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>"
PRODUCER = 8


def _busy_step(b: TraceBuilder, n: int = 8, ns: int = 200_000) -> None:
    for _ in range(n):
        b.launch(K, ns)


def _four_steps(at_step: int, host_work) -> TraceBuilder:
    """Four GPU-bound iterations ending in a sync; `host_work(b)` runs mid-iteration `at_step`."""
    b = TraceBuilder()
    for s in range(4):
        with b.step(s):
            _busy_step(b, 4)
            if s == at_step:
                host_work(b)
            _busy_step(b, 4)
            b.sync("cudaStreamSynchronize")     # the step ends with loss.item()
    return b


def warmup_first_iteration() -> TraceBuilder:
    """Iteration 0 loads modules (3 ms of cuModuleLoadData) between kernels; 1-3 are GPU-bound."""
    return _four_steps(0, lambda b: b.api("cuModuleLoadData", 3_000_000))


def steady_gap() -> TraceBuilder:
    """Twin: the same 3 ms of host work in iteration 2, as Python work (no loading): a gap."""
    return _four_steps(2, lambda b: b.cpu(3_000_000, name="aten::to"))


def two_kernels() -> TraceBuilder:
    """A trace of two kernels 2 ms apart: no steady state."""
    b = TraceBuilder()
    b.launch(K, 50_000)
    b.cpu(2_000_000)
    b.launch(K, 50_000)
    return b


def blocked_in_copy() -> TraceBuilder:
    """Each iteration ends its forward with a blocking 60-byte cudaMemcpy D2H to pageable
    memory that holds the host 2 ms after the copy ran: the GPU idles while the host is blocked."""
    b = TraceBuilder()
    for s in range(4):
        with b.step(s):
            _busy_step(b, 4)
            b.copy("D2H", 60, 2_000, api="cudaMemcpy", api_dur_ns=2_000_000, dst_kind="pageable")
            _busy_step(b, 4)
    return b


def late_after_async_copy() -> TraceBuilder:
    """Twin: the copy is async to pinned memory and the host then runs 2 ms of Python: late."""
    b = TraceBuilder()
    for s in range(4):
        with b.step(s):
            _busy_step(b, 4)
            b.copy("D2H", 60, 2_000, api="cudaMemcpyAsync", dst_kind="pinned")
            b.cpu(2_000_000, name="aten::to")
            _busy_step(b, 4)
    return b


def event_wait() -> TraceBuilder:
    """The next kernel is launched at once but its stream waits on an event of a producer stream
    held 2 ms by work outside this trace (another process or device); meanwhile the host sits in
    a blocking 60-byte copy queued behind it (the ROCm hipMemcpyWithStream shape)."""
    b = TraceBuilder()
    for s in range(4):
        with b.step(s):
            _busy_step(b, 4)
            b._free[PRODUCER] = b.gpu_free(7) + 2_000_000   # the outside work, invisible here
            b.sync("cudaStreamWaitEvent", stream=7, wait_stream=PRODUCER)
            b.launch(K, 200_000)
            b.copy("D2H", 60, 2_000, api="cudaMemcpy", dst_kind="pageable")
            _busy_step(b, 3)
    return b


def preprocess_first() -> TraceBuilder:
    """One profiled iteration: 2.5 ms of CPU preprocessing before the first kernel, then 2.4 ms
    of GPU-bound work (the GPU busy 99 % of its own active window, idle ~51 % of the step)."""
    b = TraceBuilder()
    with b.step(0):
        with b.python("video_model.py", 88, "preprocess"):
            b.cpu(2_500_000, name="torchvision::decode_and_resize")
        _busy_step(b, 12)
    return b


def preprocess_outside() -> TraceBuilder:
    """Twin: the preprocessing runs before the profiled iteration starts."""
    b = TraceBuilder()
    with b.python("video_model.py", 88, "preprocess"):
        b.cpu(2_500_000, name="torchvision::decode_and_resize")
    with b.step(0):
        _busy_step(b, 12)
    return b


SCENARIOS = [
    Scenario("TL001", "positive-gap-in-steady-iteration", steady_gap, True,
             expect={"severity": "warning", "key": "device0"}),
    Scenario("TL001", "positive-blocked-in-blocking-copy", blocked_in_copy, True,
             expect={"key": "device0"}),
    Scenario("TL001", "positive-idle-before-first-kernel", preprocess_first, True,
             expect={"severity": "warning"}),
    Scenario("TL001", "near-miss-preprocess-outside-iteration", preprocess_outside, False),
]

"""TL039 allocator-churn: `torch.cuda.empty_cache()` at the end of every step (the caching
allocator gives its segments back and cudaMallocs them again next step; both formats: Kineto's
Total Reserved, nsys's driver-level memory events), 32 MiB CPU temporaries made anew every step
at train.py:20 (Kineto only: nsys does not see the CPU allocator); near-misses: the same steps
without empty_cache (reserved grows once, then stays), empty_cache once after the loop, and
1 MiB CPU temporaries."""
from __future__ import annotations

from ..builder import TraceBuilder
from ..memory import memory
from . import Scenario

STEPS = 6
MIB = 1 << 20
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"


def _cuda_step(b: TraceBuilder, empty_cache: bool) -> None:
    mem = memory(b)
    with b.python("train.py", 30, "train_step"):
        acts = [mem.alloc(256 * MIB, op="aten::empty") for _ in range(3)]
        for _ in range(3):
            b.launch(GEMM, 400_000, op="aten::mm")
        for a in acts:
            mem.free(a)
    if empty_cache:
        with b.python("train.py", 34, "train_step"):
            mem.empty_cache()


def empty_cache_every_step() -> TraceBuilder:
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s):
            _cuda_step(b, empty_cache=True)
    return b


def stable_cache() -> TraceBuilder:
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s):
            _cuda_step(b, empty_cache=False)
    return b


def empty_cache_after_loop() -> TraceBuilder:
    b = stable_cache()
    memory(b).empty_cache()
    return b


def cpu_temporaries(size: int = 32 * MIB) -> TraceBuilder:
    """`tmp = x * scale` (a fresh tensor each step) at train.py:20, then a reduction."""
    b = TraceBuilder()
    mem = memory(b, device_type="cpu")
    for s in range(STEPS):
        with b.step(s), b.python("train.py", 18, "train_step"):
            with b.python("train.py", 20, "train_step"), b.op("aten::mul"):
                tmp = mem.alloc(size)
                b.cpu(2_000_000)
            with b.python("train.py", 21, "train_step"), b.op("aten::sum"):
                b.cpu(1_000_000)
            mem.free(tmp)
    return b


SCENARIOS = [
    Scenario("TL039", "positive-empty-cache-every-step", empty_cache_every_step, True,
             expect={"key": "release|cuda|0"}, nvtx_ops=True),
    Scenario("TL039", "positive-cpu-temporaries", cpu_temporaries, True, formats=("kineto",),
             expect={"occurrences": STEPS, "where.line": 20,
                     "metrics.transient_bytes_per_iteration": 32 * MIB}),
    Scenario("TL039", "near-miss-stable-cache", stable_cache, False, nvtx_ops=True),
    Scenario("TL039", "near-miss-empty-cache-after-loop", empty_cache_after_loop, False,
             nvtx_ops=True),
    Scenario("TL039", "near-miss-small-cpu-temporaries", lambda: cpu_temporaries(1 * MIB), False,
             formats=("kineto",)),
]

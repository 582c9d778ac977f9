"""TL040 memory-peak-near-capacity: an 80 GB H100 whose allocator peaks at ~76 GiB in
iteration 2 (an extra buffer at train.py:52 in `aten::cat`), in both formats (Kineto: the
caching allocator's Total Reserved, deviceProperties.totalGlobalMem; nsys: driver-level memory
events, TARGET_INFO_GPU.totalMemory); near-misses: the same run peaking at ~60 %, and a trace
whose device properties give no memory size (the share is not known: silent)."""
from __future__ import annotations

from ..builder import TraceBuilder
from ..memory import memory
from . import Scenario

GIB = 1 << 30
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"


def peak_run(base_gib: int = 70, extra_gib: int = 6, props: dict | None = None) -> TraceBuilder:
    b = TraceBuilder(device_props=props)
    mem = memory(b)
    with b.python("train.py", 40, "setup"):
        weights = mem.alloc(base_gib * GIB, op="aten::empty")
    for s in range(4):
        with b.step(s), b.python("train.py", 50, "train_step"):
            b.launch(GEMM, 500_000, op="aten::mm")
            if s == 2:
                with b.python("train.py", 52, "train_step"):
                    extra = mem.alloc(extra_gib * GIB, op="aten::cat")
                b.launch(GEMM, 500_000, op="aten::mm")
                mem.free(extra)
    mem.free(weights)
    return b


SCENARIOS = [
    Scenario("TL040", "positive-peak-in-iteration-2", peak_run, True,
             expect={"where.iteration": 2, "where.device": 0,
                     "metrics.peak_bytes": 76 * GIB}, nvtx_ops=True),
    Scenario("TL040", "positive-python-line", peak_run, True, formats=("kineto",),
             expect={"where.line": 52}),
    Scenario("TL040", "near-miss-peak-at-60-percent", lambda: peak_run(44, 4), False,
             nvtx_ops=True),
    Scenario("TL040", "near-miss-no-memory-size", lambda: peak_run(props={"totalGlobalMem": None}),
             False, nvtx_ops=True),
]

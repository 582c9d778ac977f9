"""TL031 dataloader-main-process: each step loads its batch on the training thread (3 ms) while
the GPU waits; near-misses: worker processes (a fast __next__), and a GPU-bound step whose
kernels keep running while the main process loads the next batch."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

CONV = "sm80_xmma_fprop_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x64"
SINGLE = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
MULTI = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


def loader_step(name: str = SINGLE, load_ns: int = 3_000_000, kernel_ns: int = 150_000) -> TraceBuilder:
    b = TraceBuilder()
    for s in range(5):
        with b.step(s):
            with b.range(name):
                b.cpu(load_ns, name="aten::stack")
            b.copy("H2D", bytes=8 << 20, dur_ns=300_000)
            for _ in range(8):
                b.launch(CONV, kernel_ns)
    return b


SCENARIOS = [
    Scenario("TL031", "positive-num-workers-0", loader_step, True,
             expect={"occurrences": 5, "key": "main_process"}),
    Scenario("TL031", "near-miss-worker-processes", lambda: loader_step(MULTI, load_ns=40_000), False),
    Scenario("TL031", "near-miss-gpu-bound", lambda: loader_step(kernel_ns=900_000), False),
]

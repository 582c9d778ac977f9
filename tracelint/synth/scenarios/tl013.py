"""TL013: the GPU idles at the start of every iteration while the launching thread loads the
next batch (a DataLoader `__next__` range, Python frames in Kineto); near-misses: the same
loading overlapped with the iteration's GPU work (prefetch), and loading before the first
kernel in the first iteration only (warm-up)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

K = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>"
NEXT = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
LOAD_NS = 1_500_000
KERNEL_NS = 200_000
STEPS = 5


def _load(b: TraceBuilder) -> None:
    """The training loop's `for batch in loader` (train.py:42) runs the DataLoader in-process."""
    with b.python("train.py", 42, "train"):
        with b.range(NEXT):
            with b.python("torch/utils/data/dataloader.py", 733, "__next__"):
                b.cpu(LOAD_NS, name="aten::stack")


def _gpu(b: TraceBuilder) -> None:
    with b.python("train.py", 44, "train"):
        for _ in range(8):
            b.launch(K, KERNEL_NS)


def load_first() -> TraceBuilder:
    """Each iteration loads its batch (1.5 ms) before launching 8 x 200 µs of kernels and ends
    with a sync: the GPU idles ~1.5 ms at the start of every iteration (~48 %)."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s):
            _load(b)
            _gpu(b)
            b.sync("cudaStreamSynchronize")
    return b


def load_overlapped() -> TraceBuilder:
    """Twin: the iteration launches its GPU work first and loads the next batch while it runs
    (prefetch), so its first kernel starts at once."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s):
            _gpu(b)
            _load(b)
            b.sync("cudaStreamSynchronize")
    return b


def load_first_warmup_only() -> TraceBuilder:
    """Twin: only the first iteration loads before its kernels (warm-up); later ones prefetch."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s):
            if s == 0:
                _load(b)
                _gpu(b)
            else:
                _gpu(b)
                _load(b)
            b.sync("cudaStreamSynchronize")
    return b


SCENARIOS = [
    Scenario("TL013", "positive-dataloader-before-first-kernel", load_first, True,
             expect={"severity": "warning", "key": "device0", "occurrences": STEPS - 1}),
    Scenario("TL013", "positive-dataloader-python-line", load_first, True,
             expect={"where.line": 42, "where.file": "train.py"}, formats=("kineto",)),
    Scenario("TL013", "near-miss-prefetched-batch", load_overlapped, False),
    Scenario("TL013", "near-miss-warmup-only", load_first_warmup_only, False),
]

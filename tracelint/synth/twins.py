"""Fixed twins: each planted anti-pattern next to the same workload with its fix applied, so a
finding's projected saving (replayed) can be checked against the real difference of the pair.

A twin's build takes the set of fixes to apply; `planted` applies none and `fixed` applies the
twin's own. The overlap twin plants two patterns whose fixes interact (a sync that waits for a
long GEMM, then a launch-bound storm): fixing both saves less than the sum of each alone.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .builder import TraceBuilder

STEPS = 4
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"
FUSED = "triton_poi_fused_add_0"
TO_NHWC = "void cudnn::ops::nchwToNhwcKernel<__half, __half, float, false, true>(cudnn::ops::nchw2nhwc_params_t<float>, __half const*, __half*)"
CONV = "sm86_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32"
SMALL, SMALL_NS, API_NS = 50, 2_000, 5_000


@dataclass(frozen=True)
class Twin:
    name: str
    rules: tuple[str, ...]                     # the findings whose fixes the twin applies
    build: Callable[[frozenset], TraceBuilder]

    def planted(self) -> TraceBuilder:
        return self.build(frozenset())

    def fixed(self) -> TraceBuilder:
        return self.build(frozenset(self.rules))


def _storm(b: TraceBuilder, fixed: bool) -> None:
    """50 tiny adds launched one by one, or one fused kernel doing the same GPU work."""
    if fixed:
        b.launch(FUSED, SMALL * SMALL_NS, api_dur_ns=API_NS)
        return
    for _ in range(SMALL):
        b.launch(ADD, SMALL_NS, api_dur_ns=API_NS)


def _item(b: TraceBuilder, fixed: bool) -> None:
    """`.item()` mid-step: a 4-byte read and a stream sync; fixed, the read stays async."""
    with b.op("aten::item"), b.op("aten::_local_scalar_dense"):
        b.copy("D2H", 4, 2_000, dst_kind="pinned")
        if not fixed:
            b.sync("cudaStreamSynchronize")


def storm(fixes: frozenset) -> TraceBuilder:
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s):
            b.launch(GEMM, 200_000)
            b.cpu(250_000)
            _storm(b, "TL002" in fixes)
            b.launch(GEMM, 200_000)
            b.sync("cudaStreamSynchronize")
    return b


def hidden_sync(fixes: frozenset) -> TraceBuilder:
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s), b.range("forward"):
            for _ in range(4):
                b.launch(GEMM, 150_000, op="aten::mm")
            _item(b, "TL005" in fixes)
            b.cpu(100_000)
            for _ in range(4):
                b.launch(GEMM, 150_000, op="aten::mm")
            b.sync("cudaStreamSynchronize")
    return b


def layout(fixes: frozenset) -> TraceBuilder:
    b = TraceBuilder("NVIDIA GeForce RTX 3090")
    for s in range(STEPS):
        with b.step(s):
            for _ in range(6):
                if "TL006" not in fixes:
                    b.launch(TO_NHWC, 30_000)
                b.launch(CONV, 200_000)
            b.sync("cudaStreamSynchronize")
    return b


def sync_then_storm(fixes: frozenset) -> TraceBuilder:
    """A read waits for a 1 ms GEMM, then a launch-bound storm: with the read async the storm
    queues behind the GEMM and is no longer launch-bound, so the two fixes overlap."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s):
            b.launch(GEMM, 1_000_000)
            _item(b, "TL005" in fixes)
            b.cpu(100_000)
            _storm(b, "TL002" in fixes)
            b.launch(GEMM, 200_000)
            b.sync("cudaStreamSynchronize")
    return b


TWINS = [Twin("storm", ("TL002",), storm), Twin("hidden-sync", ("TL005",), hidden_sync),
         Twin("layout", ("TL006",), layout)]
OVERLAP = Twin("sync-then-storm", ("TL002", "TL005"), sync_then_storm)

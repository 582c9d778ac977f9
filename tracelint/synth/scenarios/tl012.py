"""TL012 device-copy: `aten::clone` of a 256 MiB activation every step (a device-to-device
memcpy) plus an Inductor clone kernel take ~16 % of GPU time; near-misses: the same clones
4 MiB in size (under 1 %), and a layout-changing `.contiguous()` (TL006's, not counted here)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
CLONE_K = "triton_poi_fused_clone_0"
TRANSPOSE = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_cuda>>(int)"


def _trace(copy_ns: int, nbytes: int, with_kernel: bool = True, layout: bool = False) -> TraceBuilder:
    b = TraceBuilder()
    for s in range(4):
        with b.step(s), b.python("model.py", 70, "forward"):
            for _ in range(4):
                b.launch(GEMM, 500_000, op="aten::mm")
            with b.op("aten::clone"):
                b.copy("D2D", nbytes, copy_ns, api="cudaMemcpyAsync", op="aten::copy_")
            if with_kernel:
                b.launch(CLONE_K, copy_ns // 2, op="CompiledFunction")
            if layout:
                b.launch(TRANSPOSE, 300_000, op="aten::contiguous")
            b.sync("cudaStreamSynchronize")
    return b


SCENARIOS = [
    Scenario("TL012", "positive-clone-d2d", lambda: _trace(300_000, 256 << 20), True,
             expect={"metrics.copy_ns": 4 * 450_000, "where.kernel": "Memcpy DtoD (Device -> Device)",
                     "key": "device0"}),
    Scenario("TL012", "positive-clone-names-the-op", lambda: _trace(300_000, 256 << 20), True,
             formats=("kineto",), expect={"where.line": 70}),
    Scenario("TL012", "near-miss-small-clones", lambda: _trace(10_000, 4 << 20), False),
    Scenario("TL012", "near-miss-layout-copy-is-tl006s", lambda: _trace(10_000, 4 << 20, False, True), False),
]

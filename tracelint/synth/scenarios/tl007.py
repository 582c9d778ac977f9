"""TL007 register-spill: an over-fused Triton kernel whose registers cap occupancy at 12.5 %,
the same kernel spilling to local memory (nsys records spills; Kineto does not), and
near-misses (a tensor-core GEMM at low occupancy by design, a spilling kernel too small in
share to matter, a lean kernel at full occupancy)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

STEPS = 4
FUSED = "triton_per_fused_add_gelu_native_layer_norm_mul_0"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"


def _trace(fused_regs: int, fused_local: int, fused_ns: int = 300_000,
           gemm_regs: int = 168, other_ns: int = 100_000) -> TraceBuilder:
    b = TraceBuilder()   # H100: 64 warps and 65536 registers per SM
    for s in range(STEPS):
        with b.step(s), b.python("model.py", 57, "forward"):
            b.launch(GEMM, other_ns, grid=(132, 1, 1), block=(384, 1, 1), registers=gemm_regs,
                     dynamic_smem=200_000)
            with b.python("model.py", 61, "fused_block"):
                b.launch(FUSED, fused_ns, grid=(4096, 1, 1), block=(256, 1, 1),
                         registers=fused_regs, local_mem=fused_local, op="triton_fused")
            b.launch(ADD, other_ns, grid=(4096, 1, 1), block=(128, 1, 1), registers=24)
            b.sync("cudaStreamSynchronize")
    return b


def reg_capped() -> TraceBuilder:
    """255 registers x 256 threads: 8192 registers per warp, 8 warps per SM = 12.5 %."""
    return _trace(fused_regs=255, fused_local=0)


def spilling() -> TraceBuilder:
    """128 registers (50 % occupancy, not capped) but 96 B/thread of local memory: spills."""
    return _trace(fused_regs=128, fused_local=96)


def lean() -> TraceBuilder:
    """40 registers x 256 threads: registers allow full occupancy."""
    return _trace(fused_regs=40, fused_local=0)


def gemm_low_occupancy() -> TraceBuilder:
    """Only the tensor-core GEMM is register-heavy (240 regs x 384 threads), by design."""
    return _trace(fused_regs=40, fused_local=0, gemm_regs=240, other_ns=400_000)


def tiny_spill() -> TraceBuilder:
    """The fused kernel spills, but takes 1 % of kernel time (below min_share)."""
    return _trace(fused_regs=128, fused_local=64, fused_ns=2_000, other_ns=200_000)


SCENARIOS = [
    Scenario(rule="TL007", name="positive-register-cap", build=reg_capped, fires=True,
             expect={"where.kernel": FUSED, "occurrences": STEPS,
                     "metrics.theoretical_occupancy": 0.125, "metrics.registers_per_thread": 255,
                     "impact_ns": STEPS * 300_000, "key": f"regcap|{FUSED}"}),
    Scenario(rule="TL007", name="positive-python-line", build=reg_capped, fires=True,
             formats=("kineto",), expect={"where.file": "model.py", "where.line": 61}),
    Scenario(rule="TL007", name="positive-spill", build=spilling, fires=True, formats=("nsys",),
             expect={"key": f"spill|{FUSED}", "metrics.local_mem_per_thread": 96,
                     "impact_ns": STEPS * 300_000}),
    Scenario(rule="TL007", name="near-miss-spill-invisible-in-kineto", build=spilling, fires=False,
             formats=("kineto",)),
    Scenario(rule="TL007", name="near-miss-lean-kernel", build=lean, fires=False),
    Scenario(rule="TL007", name="near-miss-gemm-by-design", build=gemm_low_occupancy, fires=False),
    Scenario(rule="TL007", name="near-miss-tiny-spill", build=tiny_spill, fires=False),
]

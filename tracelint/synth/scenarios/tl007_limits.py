"""TL007 occupancy limits: registers must be the one binding limit. Tensor-core library GEMMs
(cuBLAS nvjet, TensorRT-LLM FP4 grouped `bmm_*`) that shared memory already holds to one block
per SM stay silent, as does a custom kernel whose shared memory ties with its registers; a
kernel on a GPU whose recorded register file is half the usual fires (limits read from the
trace, both formats)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

STEPS = 4
NVJET = "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNT"
BMM_FP4 = "bmm_E2m1_E2m1E2m1_Fp32_t128x8x512u2_s3_et128x8_m128x8x64_cga1x1x1_16dp256b_TN_transOut_schedS_sm100a"
CUSTOM = "my_project::fused_mlp_block_kernel"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"


def _trace(name: str, regs: int, threads: int, smem: int, device_props=None) -> TraceBuilder:
    b = TraceBuilder(device_props=device_props)
    for s in range(STEPS):
        with b.step(s):
            b.launch(name, 400_000, grid=(132, 1, 1), block=(threads, 1, 1), registers=regs,
                     dynamic_smem=smem)
            b.launch(ADD, 100_000, grid=(4096, 1, 1), block=(128, 1, 1), registers=24)
            b.sync("cudaStreamSynchronize")
    return b


def nvjet_smem_bound() -> TraceBuilder:
    """168 regs x 384 threads allow 1 block; 200 KB of shared memory allow 1 block too."""
    return _trace(NVJET, 168, 384, 200_000)


def bmm_fp4_smem_bound() -> TraceBuilder:
    return _trace(BMM_FP4, 168, 384, 200_000)


def custom_smem_tie() -> TraceBuilder:
    """The same limits on a non-library kernel: a tie, so fewer registers would not help."""
    return _trace(CUSTOM, 168, 384, 200_000)


def custom_regs_bound() -> TraceBuilder:
    """The same kernel with 40 KB of shared memory: 5 blocks by smem, 1 by registers."""
    return _trace(CUSTOM, 168, 384, 40_000)


def small_register_file() -> TraceBuilder:
    """128 regs x 256 threads and 100 KB smem: on an H100 registers and smem both allow 2 blocks
    (a tie); the trace records a 32 Ki register file, so registers allow 1 (12.5 %)."""
    return _trace(CUSTOM, 128, 256, 100_000, device_props={"regsPerMultiprocessor": 32768})


def h100_tie() -> TraceBuilder:
    return _trace(CUSTOM, 128, 256, 100_000)


SCENARIOS = [
    Scenario(rule="TL007", name="near-miss-nvjet-smem-bound", build=nvjet_smem_bound, fires=False),
    Scenario(rule="TL007", name="near-miss-bmm-fp4-smem-bound", build=bmm_fp4_smem_bound, fires=False),
    Scenario(rule="TL007", name="near-miss-smem-ties-registers", build=custom_smem_tie, fires=False),
    Scenario(rule="TL007", name="positive-registers-bind", build=custom_regs_bound, fires=True,
             expect={"where.kernel": CUSTOM, "metrics.theoretical_occupancy": 0.1875}),
    Scenario(rule="TL007", name="positive-trace-register-file", build=small_register_file, fires=True,
             expect={"where.kernel": CUSTOM, "metrics.theoretical_occupancy": 0.125}),
    Scenario(rule="TL007", name="near-miss-h100-register-file-tie", build=h100_tie, fires=False),
]

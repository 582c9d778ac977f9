"""TL011 fp32-gemm."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.rule import Rule, option
from tracelint.timeline import classify

@dataclass(frozen=True)
class Options:
    min_share: float = option(0.10, "Report when FP32 (CUDA-core) GEMMs take at least this share of the device's kernel time.")
    min_ns: int = option(1_000_000, "... and at least this much time (ns).")


#: The fix on a GPU whose tensor cores take FP16 only (Volta, Turing): the docstring's TF32 and
#: BF16 advice would change nothing there.
FP16_ONLY_FIX = ("This GPU's tensor cores take FP16 only (no TF32, no BF16): run the model under "
                 "autocast in FP16 (`torch.autocast(\"cuda\", dtype=torch.float16)`), with a "
                 "gradient scaler when training (`torch.amp.GradScaler(\"cuda\")`); TF32 and BF16 "
                 "settings change nothing on this generation.")


def tensor_core_support(name: str | None, cc: str | None) -> str | None:
    """'tf32' (FP32 inputs can use TF32 tensor cores), 'fp16' (only FP16 tensor cores), None (none/unknown)."""
    if cc:
        try:
            major = int(str(cc).split(".")[0])
        except ValueError:
            major = 0
        return "tf32" if major >= 8 else "fp16" if major >= 7 else None
    return classify.tensor_cores_by_name(name)


class Fp32Gemm(Rule):
    """GEMMs and convolutions run in FP32 on the CUDA cores of a GPU that has tensor cores.

    What it detects: GEMM / convolution kernels whose library names show FP32 math on the CUDA
    cores (cuBLAS `ampere_sgemm_*`, xmma `gemm_f32f32_f32f32_f32_*_ffma`, cuDNN `scudnn` and
    its FP32 engines `dgrad_engine<float>`, `wgrad_alg0_engine<float>`; classify.py's list),
    taking at least `min_share` of a device's kernel time, on a GPU with tensor cores (compute
    capability 7.0+, from the trace's device properties or the GPU name).
    Why it hurts: tensor cores run the same GEMM many times faster: on an A100 FP32 peaks at 19.5
    TFLOP/s on CUDA cores but 156 TFLOP/s as TF32 and 312 as BF16; on an H100 about 67 vs 495
    (TF32) and 990 (BF16). A model left in FP32 with TF32 disabled (PyTorch's default for
    matmuls) pays that gap on its largest kernels.
    Evidence: system: the share of kernel time in FP32 GEMMs per device; kernel: the kernel names,
    counts and time, and whether TF32 is available on the device; microarch: tensor-pipe activity
    (GPU metrics or Nsight Compute), expected low.
    Fix: allow TF32 for FP32 matmuls and convolutions (`torch.set_float32_matmul_precision("high")`,
    `torch.backends.cudnn.allow_tf32 = True`), or run the model under autocast in BF16/FP16
    (`torch.autocast("cuda", dtype=torch.bfloat16)`); on Volta/Turing (no TF32) use FP16
    autocast with a gradient scaler.
    Counter-example (when it does not apply): workloads that need full FP32 accuracy (some
    scientific codes, ill-conditioned solvers, a loss that diverges under TF32); GEMMs too small to
    reach tensor-core throughput (launch-bound, see TL002); GPUs without tensor cores.
    """

    id = "TL011"
    slug = "fp32-gemm"
    title = "FP32 GEMMs on CUDA cores where tensor cores apply"
    severity = Severity.WARNING
    groups = frozenset({"kernel", "precision"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    needs = frozenset({"kernels"})
    Options = Options
    uses_kernel_times = False     # on synthetic times, shares of counted FP instructions

    def fix_edits(self, finding, ctx):
        return None, "the TF32/BF16 speed-up depends on the GEMM shapes; try `tracelint whatif --scale GEMM_REGEX=0.5`"

    def check(self, ctx):
        tl, opt = ctx.tl, self.options
        k = tl.kernels
        if len(k) == 0:
            return
        is_fp32 = np.asarray(classify.classify_categorical(k["name"], classify.is_fp32_cuda_core_gemm),
                             dtype=bool)
        if not is_fp32.any():
            return
        dur, unit = ctx.kernel_weight()
        dev = k["device"].to_numpy()
        for device in np.unique(dev[is_fp32]):
            on = dev == device
            total = int(dur[on].sum())
            sel = on & is_fp32
            fp32_ns = int(dur[sel].sum())
            if total <= 0 or fp32_ns < opt.min_share * total or (unit == "ns" and fp32_ns < opt.min_ns):
                continue
            info = tl.meta.device(int(device))
            tc = tensor_core_support(info.name if info else None, info.compute_capability if info else None)
            if tc is None and info is not None and (info.name or info.compute_capability):
                continue                      # a known GPU without tensor cores
            names = pd.Series(dur[sel]).groupby(k["name"].to_numpy()[sel], observed=True).agg(["sum", "count"])
            names = names.sort_values("sum", ascending=False)
            top = names.index[0]
            first = int(np.flatnonzero(sel)[0])
            launch = ctx.launch_index("kernels")[first]
            where = ctx.where_for_api(int(launch)) if launch >= 0 else Where(rank=tl.meta.rank)
            where.device, where.stream, where.kernel = int(device), int(k["stream"].iat[first]), str(top)
            where.start_ns, where.end_ns = int(k["start"].iat[first]), int(k["end"].iat[first])
            share = fp32_ns / total
            gpu = (info.name if info and info.name else f"GPU {device}")
            tc_text = {"tf32": "TF32 and BF16/FP16 tensor cores are available",
                       "fp16": "FP16 tensor cores are available (no TF32 on this generation)",
                       None: "the GPU model is not recorded; tensor cores assumed (compute capability 7.0+)"}[tc]
            timed = unit == "ns"       # else: shares of counted FP instructions or launches
            amount = (f"{fp32_ns / 1e6:.2f} ms" if timed else
                      f"{fp32_ns:,.0f} {unit}; kernel times are not measured in this trace")
            of_what = ("kernel time" if timed else "CUDA-core FP instructions counted"
                       if unit == "instructions" else "kernel launches")
            listing = "; ".join(f"`{str(n)[:70]}` ×{int(r['count'])} "
                                f"{r['sum'] / 1e6:.2f} ms" if timed else
                                f"`{str(n)[:70]}` ×{int(r['count'])}"
                                for n, r in names.head(3).iterrows())
            share_facts = dict(fp32_gemm_share=Measure(round(share, 4), "ratio"))
            if timed:
                share_facts.update(fp32_gemm_ns=Measure(fp32_ns, "ns"), kernel_ns=Measure(total, "ns"))
            system = Evidence.measured(
                f"FP32 CUDA-core GEMMs take {share:.1%} of {gpu}'s {of_what} ({amount}).", **share_facts)
            kernel = Evidence.measured(
                f"{int(sel.sum())} FP32 GEMM launches in {len(names)} kernel(s): {listing}. {tc_text}.",
                kernels=Measure(int(sel.sum()), "count"), distinct_kernels=Measure(len(names), "count"))
            micro = ctx.microarch(int(device), where.start_ns, where.end_ns,
                                  kernels=[str(n) for n in names.index],
                                  expect={r"Tensor|tensor_op|pipe_tensor": "low",
                                          r"^fp32_share_of_fp": "high"})
            yield self.finding(
                ctx,
                message=(f"{gpu}: FP32 GEMMs on CUDA cores take {share:.1%} of {of_what} "
                         f"({amount}); {tc_text}"),
                impact_ns=fp32_ns if timed else 0, where=where, occurrences=int(sel.sum()),
                evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
                metrics={k: v for k, v in share_facts.items() if k != "kernel_ns"},
                key=f"device{int(device)}", **({"fix": FP16_ONLY_FIX} if tc == "fp16" else {}))

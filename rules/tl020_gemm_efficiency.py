"""TL020 gemm-efficiency."""
from __future__ import annotations

from dataclasses import dataclass

from tracelint.efficiency.findings import heavy_groups, roofline_evidence, share_evidence, where_for_call
from tracelint.engine.finding import Layer, Measure, Severity
from tracelint.engine.rule import Rule, option

#: Elements per 16 bytes: cuBLAS/CUTLASS tensor-core kernels need N and K (the contiguous
#: dimensions) to be multiples of this, else they fall back to slower, narrower kernels.
ALIGN = {"fp16": 8, "bf16": 8, "fp8": 16, "tf32": 4}


@dataclass(frozen=True)
class Options:
    min_share: float = option(0.05, "Report a GEMM shape taking at least this share of the device's kernel time.")
    min_ns: int = option(1_000_000, "... and at least this much time (ns).")
    max_pct_of_bound: float = option(0.30, "An aligned GEMM is reported when it reaches less than this share of its roofline bound.")
    target_pct: float = option(0.70, "The share of the roofline bound a well-shaped GEMM reaches; the saving is the time above it.")


def misaligned(work, math: str) -> list[str]:
    """Names of GEMM dimensions (N, K) that are not multiples of the tensor-core alignment."""
    a = ALIGN.get(math)
    if not a:
        return []
    return [f"{d}={work.inputs[d]}" for d in ("N", "K") if work.inputs.get(d, 0) % a]


class GemmEfficiency(Rule):
    """Tensor-core GEMMs with unaligned dimensions or far below their roofline bound.

    What it detects: GEMMs (mm, addmm, bmm, baddbmm, linear; shapes from torch.profiler
    `record_shapes=True`) in FP16/BF16/FP8/TF32 on a GPU in the device table, taking at least
    `min_share` of the device's kernel time, whose N or K dimension is not a multiple of 8
    (FP16/BF16), 16 (FP8) or 4 (TF32), or that reach less than `max_pct_of_bound` of their
    roofline bound (max of FLOPs ÷ peak and minimum bytes ÷ bandwidth).
    Why it hurts: tensor-core kernels load 16-byte vectors; an odd N or K forces the library to
    a narrow-load fallback (often an older-architecture kernel, see TL021) that runs at a
    fraction of peak. A shape far below its bound leaves the tensor cores idle for the same work.
    Evidence: system: the shape's share of kernel time (measured); kernel: achieved TFLOP/s,
    bandwidth and % of the roofline bound (estimated from shapes and datasheet peaks, with the
    formula); microarch: tensor-pipe utilisation where GPU metrics or Nsight Compute exist
    (they win over the estimate).
    Fix: pad the dimension to a multiple of 8 (16 for FP8): vocabulary and hidden sizes, head
    dimensions, sequence lengths in attention matmuls (pad the sequence, or use
    `torch.nn.functional.scaled_dot_product_attention`, which handles odd lengths in a fused
    kernel); for slow aligned GEMMs, batch small GEMMs together or try `torch.compile(mode="max-autotune")`.
    Counter-example (when it does not apply): shapes fixed by the data (odd sequence lengths
    at inference) where padding costs more than it saves; tiny GEMMs that are launch-bound
    (TL002); a roofline bound that ignores L2 reuse (the estimate is then pessimistic).
    """

    id = "TL020"
    slug = "gemm-efficiency"
    title = "Tensor-core GEMMs misaligned or far below their roofline bound"
    severity = Severity.WARNING
    groups = frozenset({"kernel", "efficiency"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    needs = frozenset({"kernels"})
    Options = Options

    def check(self, ctx):
        opt = self.options

        def gemms(c):
            return (c["kind"] == "gemm") & c["math"].isin(list(ALIGN)) & (c["bound"] != "unknown")
        for dev, (op, shape), rows, t in heavy_groups(ctx, gemms, ["op", "shape"], opt.min_share, opt.min_ns):
            first = rows.iloc[0]
            bad = misaligned(first["work"], first["math"])
            pct = float(rows["t_min_ns"].sum()) / t
            if bad or pct < opt.max_pct_of_bound:
                yield self._finding(ctx, dev, op, shape, rows, t, pct, bad)

    def _finding(self, ctx, dev, op, shape, rows, t, pct, bad):
        opt, first = self.options, rows.iloc[0]
        target = float(rows["t_min_ns"].sum()) / opt.target_pct
        saving = max(0, int(t - target))
        share = t / dev.kernel_ns
        gpu = dev.name or f"GPU {dev.device}"
        why = (f"{' and '.join(bad)} not a multiple of {ALIGN[first['math']]}" if bad
               else f"{pct:.0%} of its roofline bound")
        where = where_for_call(ctx, ctx.tl, first)
        system = share_evidence(f"{op} {shape}", len(rows), t, dev, "gemm_ns")
        kernel = roofline_evidence(rows, (
            f"{first['math'].upper()} GEMM at {pct:.0%} of its {first['bound']}-bound roofline limit "
            f"({rows['flops'].sum() / t / 1e3:.1f} TFLOP/s achieved vs {first['peak'] / 1e12:.0f} peak); "
            + (f"{', '.join(bad)} not a multiple of {ALIGN[first['math']]}." if bad else "dimensions aligned.")))
        micro = ctx.microarch(dev.device, where.start_ns, where.end_ns, kernels=[str(first["main_kernel"])],
                              expect={r"Tensor|tensor_op|pipe_tensor": "low"})
        return self.finding(
            ctx, message=(f"{gpu}: {op} {shape} takes {share:.1%} of kernel time at {pct:.0%} of "
                          f"its roofline bound ({why}); reaching {opt.target_pct:.0%} would save "
                          f"~{saving / 1e6:.2f} ms (estimated)"),
            impact_ns=saving, where=where, occurrences=len(rows),
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            metrics={"gemm_ns": Measure(t, "ns"), "pct_of_bound": Measure(round(pct, 4), "ratio"),
                     "share": Measure(round(share, 4), "ratio")},
            key=f"{op}|{shape}")

"""TL022 memory-bound-dominant."""
from __future__ import annotations

from dataclasses import dataclass

from tracelint.efficiency.findings import heavy_groups, roofline_evidence, share_evidence, where_for_call
from tracelint.engine.finding import Layer, Measure, Severity
from tracelint.engine.rule import Rule, option

#: Op kind -> the fused alternative that removes the memory traffic.
FUSED_FIX = {
    "softmax": ("fuse attention: `torch.nn.functional.scaled_dot_product_attention` (FlashAttention / "
                "memory-efficient kernels) never writes the S×S score matrix that this softmax reads "
                "and writes; in Hugging Face models set `attn_implementation=\"sdpa\"`"),
    "norm": ("use a fused normalisation kernel (torch.compile, apex FusedLayerNorm/FusedRMSNorm, "
             "Triton/Liger kernels) and fuse it with the residual add before it"),
    "elementwise": ("fuse the chain of elementwise ops: `torch.compile` generates one kernel for "
                    "them; for optimizer updates use `fused=True` / foreach optimizers"),
    "copy": ("remove the copies: keep tensors in the compute dtype and layout (channels_last, "
             "no `.contiguous()` / `.to(dtype)` inside the loop)"),
    "reduction": "fuse the reduction into its producer (`torch.compile`)",
    "embedding": "fuse the gather with its consumer, or use a fused embedding-bag kernel",
}


@dataclass(frozen=True)
class Options:
    min_share: float = option(0.20, "Report a memory-bound op taking at least this share of the device's kernel time.")
    min_ns: int = option(1_000_000, "... and at least this much time (ns).")


class MemoryBoundDominant(Rule):
    """Memory-bound ops (softmax, norms, elementwise, copies) dominating GPU time.

    What it detects: an op type whose kernels are memory-bound on the roofline (arithmetic
    intensity below the device's ridge point; shapes from torch.profiler `record_shapes=True`,
    peaks from the device table) and that takes at least `min_share` of the device's kernel
    time: e.g. the unfused attention softmax of a vision transformer taking 47.6 % of GPU time.
    Why it hurts: such an op does a few FLOPs per byte, so its time is set by moving tensors
    through DRAM; when it dominates, the GPU's compute sits idle most of the step. Fusing it
    with its neighbours removes the round trips to memory altogether.
    Evidence: system: the op's share of kernel time (measured); kernel: achieved bandwidth,
    arithmetic intensity and % of the memory roofline (estimated from shapes and datasheet
    bandwidth, with the formula); microarch: DRAM throughput where GPU metrics or Nsight
    Compute exist (they win over the estimate).
    Fix: the fused alternative for the op's kind: scaled-dot-product attention for a softmax
    between two bmm's, fused norms, `torch.compile` for elementwise chains, no dtype/layout copies.
    Counter-example (when it does not apply): a workload that is memory-bound by nature
    (embedding lookups in recommenders, decode-phase inference) with nothing left to fuse;
    an op already fused (one kernel per op and near its bandwidth bound).
    """

    id = "TL022"
    slug = "memory-bound-dominant"
    title = "Memory-bound ops dominating GPU time"
    severity = Severity.WARNING
    groups = frozenset({"kernel", "efficiency"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    needs = frozenset({"kernels"})
    Options = Options

    def check(self, ctx):
        opt = self.options

        def memory_bound(c):
            return c["kind"].isin(list(FUSED_FIX)) & (c["bound"] == "memory")
        for dev, op, rows, t in heavy_groups(ctx, memory_bound, "op", opt.min_share, opt.min_ns):
            yield self._finding(ctx, dev, op, rows, t)

    def _finding(self, ctx, dev, op, rows, t):
        rows = rows.sort_values("kernel_ns", ascending=False)
        first, kind = rows.iloc[0], str(rows.iloc[0]["kind"])
        share, tmin = t / dev.kernel_ns, float(rows["t_min_ns"].sum())
        pct, gbps = tmin / t, float(rows["bytes"].sum()) / t
        saving = max(0, int(t - tmin))
        gpu = dev.name or f"GPU {dev.device}"
        fix = FUSED_FIX[kind]
        where = where_for_call(ctx, ctx.tl, first)
        system = share_evidence(op, len(rows), t, dev, "op_ns")
        kernel = roofline_evidence(rows, (
            f"memory-bound ({kind}): {gbps:.0f} GB/s achieved, {pct:.0%} of the "
            f"{first['bandwidth'] / 1e9:.0f} GB/s bound; arithmetic intensity "
            f"{rows['flops'].sum() / max(rows['bytes'].sum(), 1):.2f} FLOP/byte; largest shape {first['shape']}."))
        micro = ctx.microarch(dev.device, where.start_ns, where.end_ns, kernels=[str(first["main_kernel"])],
                              expect={r"DRAM|dram__throughput|Memory": "high"})
        return self.finding(
            ctx, message=(f"{gpu}: memory-bound {op} takes {share:.1%} of kernel time "
                          f"({t / 1e6:.2f} ms at {gbps:.0f} GB/s); fix: {fix.split(':')[0]}"),
            impact_ns=saving, where=where, occurrences=len(rows), fix=fix + ".",
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            metrics={"op_ns": Measure(t, "ns"), "share": Measure(round(share, 4), "ratio"),
                     "achieved_gbps": Measure(round(gbps, 1), "GB/s")},
            key=f"{op}|device{dev.device}")

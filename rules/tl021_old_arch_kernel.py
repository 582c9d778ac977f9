"""TL021 old-arch-kernel."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelint.efficiency.devices import match_trace_device
from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.rule import Rule, option
from tracelint.timeline.classify import arch_of, is_align1_kernel, is_old, is_tensor_op_kernel


@dataclass(frozen=True)
class Options:
    min_share: float = option(0.05, "Report when old-architecture tensor-core kernels take at least this share of the device's kernel time.")
    min_ns: int = option(1_000_000, "... and at least this much time (ns).")


def device_cc(info) -> tuple[int, int] | None:
    text = info.compute_capability if info is not None else None
    if not text:
        spec = match_trace_device(info).spec
        text = spec.limits.get("cc") if spec and spec.limits.get("vendor") == "nvidia" else None
    try:
        major, minor = str(text).split(".")[:2]
        return int(major), int(minor)
    except (ValueError, TypeError):
        return None


class OldArchKernel(Rule):
    """Tensor-core kernels built for an older GPU architecture running on a newer GPU.

    What it detects: GEMM / convolution kernels whose names carry an architecture tag
    (`cutlass_75_tensorop_*`, `sm75_xmma_*`, `volta_h884gemm_*`, `arch::Sm75`) two or more
    generations older than the device's compute capability (or Volta/Turing kernels on
    Ampere and newer), taking at least `min_share` of the device's kernel time. NVIDIA only;
    the device's compute capability comes from the trace (or the device table).
    Why it hurts: an sm75 kernel on an H100 uses Turing-era mma instructions: no wgmma, no TMA,
    no Hopper-size tiles; it reaches a fraction of the H100's tensor throughput. Libraries pick
    such kernels when no newer one accepts the problem, most often because a dimension is not
    16-byte aligned (`align1` in the name; see TL020), or when the library build lacks the
    newer architecture.
    Evidence: system: the time share of old-architecture kernels (measured); kernel: kernel
    names, their architecture tag against the device's (measured); microarch: tensor-pipe
    utilisation where GPU metrics or Nsight Compute exist.
    Fix: make the shapes aligned (pad N/K, sequence lengths and head dims to multiples of 8;
    use `scaled_dot_product_attention` instead of bmm-softmax-bmm); use a PyTorch / cuBLAS /
    CUTLASS build with kernels for the device (`torch.cuda.get_arch_list()` must list it).
    Counter-example (when it does not apply): a workload whose shapes cannot be aligned and
    whose old-architecture kernel is still the fastest the library has (check with
    `torch.backends.cuda.preferred_blas_library` / autotuning); tiny kernels.
    """

    id = "TL021"
    slug = "old-arch-kernel"
    title = "Old-architecture tensor-core kernels on a newer GPU"
    severity = Severity.WARNING
    groups = frozenset({"kernel", "efficiency"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    needs = frozenset({"kernels"})
    Options = Options

    def check(self, ctx):
        tl, opt = ctx.tl, self.options
        k = tl.kernels
        cats = [str(c) for c in k["name"].cat.categories.tolist()]
        arch = [arch_of(n) if is_tensor_op_kernel(n) else None for n in cats]
        if not any(arch):
            return
        codes = k["name"].cat.codes.to_numpy()
        dur = (k["end"] - k["start"]).to_numpy()
        dev = k["device"].to_numpy()
        for device in np.unique(dev):
            info = tl.meta.device(int(device))
            if info is not None and info.vendor == "amd":
                continue
            cc = device_cc(info)
            if cc is None:
                continue
            old_cat = np.array([a is not None and is_old(a, cc) for a in arch], dtype=bool)
            on = dev == device
            sel = on & (codes >= 0) & old_cat[np.clip(codes, 0, None)]
            total, old_ns = int(dur[on].sum()), int(dur[sel].sum())
            if not sel.any() or total <= 0 or old_ns < opt.min_share * total or old_ns < opt.min_ns:
                continue
            yield self._finding(ctx, int(device), info, cc, sel, dur, total, old_ns, arch, codes)

    def _finding(self, ctx, device, info, cc, sel, dur, total, old_ns, arch, codes):
        tl = ctx.tl
        k = tl.kernels
        names = pd.Series(dur[sel]).groupby(k["name"].to_numpy()[sel], observed=True).agg(["sum", "count"])
        names = names.sort_values("sum", ascending=False)
        top = str(names.index[0])
        tag = arch_of(top)
        first = int(np.flatnonzero(sel & (k["name"].to_numpy() == names.index[0]))[0])
        launch = ctx.launch_index("kernels")[first]
        where = ctx.where_for_api(int(launch)) if launch >= 0 else Where(rank=tl.meta.rank)
        where.device, where.stream, where.kernel = device, int(k["stream"].iat[first]), top
        where.start_ns, where.end_ns = int(k["start"].iat[first]), int(k["end"].iat[first])
        share = old_ns / total
        gpu = info.name if info is not None and info.name else f"GPU {device}"
        aligned1 = any(is_align1_kernel(str(n)) for n in names.index)
        listing = "; ".join(f"`{str(n)[:80]}` (sm{arch_of(str(n))[0]}{arch_of(str(n))[1]}) ×{int(r['count'])} "
                            f"{r['sum'] / 1e6:.2f} ms" for n, r in names.head(3).iterrows())
        system = Evidence.measured(
            f"Old-architecture tensor-core kernels take {share:.1%} of {gpu}'s kernel time ({old_ns / 1e6:.2f} ms).",
            old_arch_ns=Measure(old_ns, "ns"), old_arch_share=Measure(round(share, 4), "ratio"),
            kernel_ns=Measure(total, "ns"))
        kernel = Evidence.measured(
            f"{int(sel.sum())} launches in {len(names)} kernel(s) built for sm{tag[0]}{tag[1]} on a "
            f"compute capability {cc[0]}.{cc[1]} device: {listing}."
            + (" `align1` in the names: the library fell back for unaligned dimensions (see TL020)."
               if aligned1 else ""),
            kernels=Measure(int(sel.sum()), "count"), distinct_kernels=Measure(len(names), "count"))
        micro = ctx.microarch(device, where.start_ns, where.end_ns, kernels=[top],
                              expect={r"Tensor|tensor_op|pipe_tensor": "low"})
        return self.finding(
            ctx, message=(f"{gpu} (sm{cc[0]}{cc[1]}): tensor-core kernels built for sm{tag[0]}{tag[1]} "
                          f"take {share:.1%} of kernel time ({old_ns / 1e6:.2f} ms)"
                          + ("; `align1` says unaligned dimensions made the library fall back" if aligned1 else "")),
            impact_ns=old_ns, where=where, occurrences=int(sel.sum()),
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            metrics={"old_arch_share": Measure(round(share, 4), "ratio"), "old_arch_ns": Measure(old_ns, "ns")},
            key=f"device{device}")

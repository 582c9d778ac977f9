"""TL006 layout-transform."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelint.engine.finding import Evidence, Layer, Measure, Severity
from tracelint.engine.rule import Rule, option
from tracelint.reporters.fmt import short_name
from tracelint.whatif.edits import Ops, Scale


@dataclass(frozen=True)
class Options:
    min_share: float = option(0.05, "Report when layout kernels take at least this share of the device's "
                                    "kernel time.")
    min_recurrence: float = option(0.3, "... and appear in at least this share of iterations (or, without "
                                         "iterations, of ten equal slices of the device's active window).")
    top: int = option(5, "How many kernel names to list.")


class LayoutTransform(Rule):
    """Transpose / permute / contiguous / copy kernels take a large share of GPU time.

    What it detects: kernels classified `layout` — transpose, permute, `.contiguous()` and copy
    kernels, im2col/col2im, nchwToNhwc / nhwcToNchw conversions, batched transposes (CUDA, cuDNN,
    MIOpen and hipBLASLt names alike) — whose summed duration is at least `min_share` of a device's
    kernel time, and that recur: present in at least `min_recurrence` of the iterations (or of ten
    equal time slices when the trace has no iterations), so a one-off conversion does not count.
    Why it hurts: a layout change moves every byte of a tensor through DRAM twice and computes
    nothing; it is the hidden price of "FLOPs without data flow" — an operator that wants another
    layout than its producer wrote (NCHW vs NHWC, a transposed weight, a permuted attention head
    dimension) pays for it on every call.
    Evidence: system: share of the device's kernel time and of its active window; kernel: count,
    time, the heaviest layout kernels and their median duration, device-to-device copy bytes next
    to them; microarch: DRAM / SM activity while the heaviest layout kernel runs (GPU metrics or
    Nsight Compute) — layout kernels are bandwidth-bound, high DRAM and low SM throughput.
    Fix: keep tensors in the layout their consumer needs end to end (model.to(memory_format=
    torch.channels_last) with channels_last inputs, pre-transpose weights once at load), fuse the
    transpose into the producer or consumer (torch.compile, a GEMM with transposed operands,
    cuDNN/MIOpen in the native layout), and drop needless .contiguous() calls.
    Counter-example (when it does not apply): a one-off conversion at model load or in the first
    iteration (the recurrence test keeps it silent); layout kernels that are a small share of
    GPU time next to large GEMMs/convolutions.
    """

    id = "TL006"
    slug = "layout-transform"
    title = "Layout-transform kernels take a large share of GPU time"
    severity = Severity.WARNING
    groups = frozenset({"memory", "kernel"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    needs = frozenset({"kernels"})
    Options = Options

    def fix_edits(self, finding, ctx):
        """Fix: the layout transforms disappear (tensors kept in the layout their consumers want)."""
        return [Scale(None, 0.0, ops=Ops(classes=("layout",), devices=(finding.where.device,)), with_launch=True)], ""

    def check(self, ctx):
        tl, opt = ctx.tl, self.options
        k = tl.kernels
        if len(k) == 0:
            return
        layout = np.asarray(tl.kernel_class) == "layout"
        if not layout.any():
            return
        device = k["device"].to_numpy()
        start, end = k["start"].to_numpy(), k["end"].to_numpy()
        dur = end - start
        t = ctx.issue_time("kernels")
        for d in np.unique(device[layout]):
            on = device == d
            lay = on & layout
            total, lay_ns = int(dur[on].sum()), int(dur[lay].sum())
            if total <= 0 or lay_ns < opt.min_share * total:
                continue
            slot_kind, recurrence = self._recurrence(ctx, t, start, end, on, lay)
            if recurrence < opt.min_recurrence:
                continue
            yield self._finding(ctx, int(d), on, lay, dur, total, lay_ns, recurrence, slot_kind)

    @staticmethod
    def _recurrence(ctx, t, start, end, on, lay) -> tuple[str, float]:
        """Share of iterations (else of ten equal slices of the active window) with layout kernels."""
        if len(ctx.steps) >= 2:
            sid = ctx.step_positions(t)
            n_all = len(np.unique(sid[on & (sid >= 0)]))
            if n_all >= 2:
                return "iterations", len(np.unique(sid[lay & (sid >= 0)])) / n_all
        lo, hi = int(start[on].min()), int(end[on].max())
        width = max((hi - lo) / 10, 1.0)
        slices = np.minimum(((start[lay] - lo) / width).astype(np.int64), 9)
        return "ten time slices of the active window", len(np.unique(slices)) / 10

    def _finding(self, ctx, d, on, lay, dur, total, lay_ns, recurrence, slot_kind):
        tl, opt = ctx.tl, self.options
        k = tl.kernels
        bs, be = tl.busy_intervals(d)
        window = int(be[-1] - bs[0]) if len(bs) else 0
        df = pd.DataFrame({"name": k["name"].to_numpy()[lay], "dur": dur[lay]})
        g = df.groupby("name", observed=True)["dur"].agg(["sum", "size", "median"])
        g = g.sort_values("sum", ascending=False)
        top = g.head(opt.top)
        top_name = str(top.index[0])
        rows = np.flatnonzero(lay & (k["name"].astype(str).to_numpy() == top_name))
        r0 = int(rows[np.argmax(dur[rows])])
        where = ctx.where_for_kernel(r0)
        share = lay_ns / total
        n = int(lay.sum())
        system = Evidence.measured(
            f"Layout kernels take {share:.1%} of GPU {d}'s kernel time ({lay_ns / 1e6:.3f} ms"
            + (f", {lay_ns / window:.1%} of its active window" if window else "")
            + f") and recur in {recurrence:.0%} of the {slot_kind}.",
            layout_ns=Measure(lay_ns, "ns"), kernel_ns=Measure(total, "ns"),
            layout_share=Measure(round(share, 4), "ratio"),
            recurrence=Measure(round(recurrence, 4), "ratio"))
        c = tl.copies
        d2d = ((c["device"].to_numpy() == d) & (c["kind"].astype(str).to_numpy() == "D2D")
               if len(c) else np.zeros(0, bool))
        kfacts = {"layout_kernels": Measure(n, "count"), "distinct_names": Measure(len(g), "count"),
                  "top_kernel_ns": Measure(int(top["sum"].iat[0]), "ns"),
                  "top_kernel_median_ns": Measure(float(top["median"].iat[0]), "ns")}
        d2d_txt = ""
        if d2d.any():
            b = c["bytes"].to_numpy()[d2d]
            kfacts["d2d_copies"] = Measure(int(d2d.sum()), "count")
            kfacts["d2d_bytes"] = Measure(int(b[b >= 0].sum()), "bytes")
            d2d_txt = f" Besides, {int(d2d.sum())} device-to-device copies moved {b[b >= 0].sum() / 1e6:.1f} MB."
        kernel = Evidence.measured(
            f"{n} layout kernels in {len(g)} names; heaviest: "
            + ", ".join(f"`{short_name(nm)}` ×{int(r['size'])} {r['sum'] / 1e6:.3f} ms" for nm, r in top.head(3).iterrows())
            + ". Bytes moved are not in the kernel records (Nsight Compute dram__bytes gives them)." + d2d_txt,
            **kfacts)
        micro = ctx.microarch(d, where.start_ns, where.end_ns, kernels=[str(x) for x in top.index[:3]])
        return self.finding(
            ctx,
            message=(f"GPU {d}: {n} layout-transform kernels take {share:.1%} of kernel time "
                     f"({lay_ns / 1e6:.2f} ms); heaviest `{short_name(top_name, 80)}`"),
            impact_ns=lay_ns, where=where, occurrences=n,
            windows=[(int(k["start"].iat[r0]), int(k["end"].iat[r0]))],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            metrics={"layout_ns": Measure(lay_ns, "ns"), "layout_share": Measure(round(share, 4), "ratio")},
            key=f"device{d}")

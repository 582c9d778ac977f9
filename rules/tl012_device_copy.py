"""TL012 device-copy."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.rule import Rule, duration_text, option
from tracelint.timeline import classify, host_scope, intervals


@dataclass(frozen=True)
class Options:
    min_share: float = option(0.05, "Report when device-to-device copies take at least this share of the device's busy time.")
    min_ns: int = option(1_000_000, "... and at least this long in total (ns).")
    top: int = option(3, "How many launching operators to list.")


class DeviceCopy(Rule):
    """Device-to-device copies (`clone`, `copy_`, `.to()`, compiled-graph copies) take a large share of GPU time.

    What it detects: device-to-device memory copies (cudaMemcpy*/hipMemcpy* DtoD records) and
    kernels that copy a tensor unchanged (`copy_`, `clone`, `_to_copy`, Inductor's fused clones;
    classify.is_copy_kernel, leaving out the layout-changing copies TL006 reports) whose time on
    a device is at least `min_share` of its busy time and `min_ns`. Copies between devices (P2P)
    are communication, not counted.
    Why it hurts: a copy moves every byte through DRAM twice and computes nothing. Defensive
    `.clone()`/`.contiguous()`, `.to()` of a tensor already on the device, out-of-place updates
    of large buffers and the input copies of a compiled graph (CUDA-graph static inputs, graph
    breaks) add up to a bandwidth tax on every step.
    Evidence: system: copy time and its share of the device's busy time, count, and the CPU
    operators that issued the copies (the outermost op around each launch: `aten::clone`,
    `aten::contiguous`, `aten::copy_`, a compiled graph); kernel: bytes moved and achieved GB/s,
    the largest copy; microarch: DRAM activity during the largest copy (GPU metrics).
    Fix: remove copies that nothing needs: drop `.clone()`/`.contiguous()` where the consumer
    accepts a view, update buffers in place (`out=`), skip `.to()` when device and dtype already
    match; under torch.compile mark static inputs (`torch._dynamo.mark_static_address`) so CUDA
    graphs do not copy them on each replay, and remove graph breaks that force tensors to be
    materialised.
    Counter-example (when it does not apply): a copy the algorithm needs (a snapshot kept while
    the original is updated, double buffering); one-off copies at load; copies small in share.
    """

    id = "TL012"
    slug = "device-copy"
    title = "Device-to-device copies take a large share of GPU time"
    severity = Severity.WARNING
    groups = frozenset({"memory", "copy"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    needs = frozenset({"kernels", "copies"})
    Options = Options

    def check(self, ctx):
        tl, opt = ctx.tl, self.options
        parts = []
        c = tl.copies
        if len(c):
            parts.append(_rows(c, "copies", (c["kind"].astype(str) == "D2D").to_numpy(), c["bytes"].to_numpy()))
        k = tl.kernels
        if len(k):
            copy_k = np.asarray(classify.classify_categorical(k["name"], classify.is_copy_kernel), dtype=bool)
            copy_k &= ~classify.in_labels(tl.kernel_class, ("layout",))
            parts.append(_rows(k, "kernels", copy_k, np.full(len(k), -1, dtype=np.int64)))
        if not parts:
            return
        cp = pd.concat(parts, ignore_index=True)
        for device, g in cp.groupby("device", sort=True):
            bs, be = tl.busy_intervals(int(device))
            busy = int((be - bs).sum())
            us, ue = intervals.merge(g["start"].to_numpy(), g["end"].to_numpy())
            copy_ns = int((ue - us).sum())
            if busy <= 0 or copy_ns < opt.min_ns or copy_ns < opt.min_share * busy:
                continue
            yield self._finding(ctx, int(device), g.reset_index(drop=True), copy_ns, busy)

    def _finding(self, ctx, device, g, copy_ns, busy):
        tl, opt = ctx.tl, self.options
        dur = (g["end"] - g["start"]).to_numpy()
        nbytes = g["bytes"].to_numpy()
        known = (nbytes >= 0) & (g["table"].to_numpy() == "copies")
        launch = np.array([ctx.launch_index(t)[r] for t, r in zip(g["table"], g["row"])], dtype=np.int64)
        by_op = pd.Series(dur).groupby(host_scope.outer_op_names(tl, launch)).sum().sort_values(ascending=False)
        op_txt = ", ".join(f"`{n}` {v / 1e6:.2f} ms" for n, v in by_op.head(opt.top).items())
        i0 = int(np.argmax(dur))
        where = ctx.where_for_api(int(launch[i0])) if launch[i0] >= 0 else Where(rank=tl.meta.rank)
        where.device, where.stream, where.kernel = device, int(g["stream"].iat[i0]), str(g["name"].iat[i0])
        where.start_ns, where.end_ns = int(g["start"].iat[i0]), int(g["end"].iat[i0])
        share = copy_ns / busy
        n_mem, n_ker = int((g["table"] == "copies").sum()), int((g["table"] == "kernels").sum())
        system = Evidence.measured(
            f"{len(g)} device-to-device copies ({n_mem} memcpy, {n_ker} copy kernels) take "
            f"{copy_ns / 1e6:.3f} ms, {share:.1%} of GPU {device}'s busy time; issued by {op_txt}.",
            copy_ns=Measure(copy_ns, "ns"), copy_share=Measure(round(share, 4), "ratio"),
            copies=Measure(n_mem, "count"), copy_kernels=Measure(n_ker, "count"))
        if known.any():
            b = int(nbytes[known].sum())
            gbps = b / max(int(dur[known].sum()), 1)     # bytes/ns == GB/s
            kernel = Evidence.measured(
                f"The memcpy records move {b / 1e9:.2f} GB at {gbps:.0f} GB/s; the largest copy "
                f"`{where.kernel}` lasts {duration_text(dur[i0])}"
                + (f" ({n_ker} copy kernels record no byte count)" if n_ker else "") + ".",
                bytes=Measure(b, "bytes"), achieved_gbps=Measure(round(gbps, 2), "GB/s"),
                largest_copy_ns=Measure(int(dur[i0]), "ns"))
        else:
            kernel = Evidence.measured(
                f"Copy kernels only (kernel records carry no byte count); the largest `{where.kernel}` "
                f"lasts {duration_text(dur[i0])}.", largest_copy_ns=Measure(int(dur[i0]), "ns"))
        micro = ctx.microarch(device, where.start_ns, where.end_ns, kernels=[where.kernel],
                              expect={r"DRAM|dram__throughput": "high"})
        return self.finding(
            ctx,
            message=(f"GPU {device}: device-to-device copies take {share:.1%} of busy time "
                     f"({copy_ns / 1e6:.2f} ms in {len(g)} copies), mostly from `{by_op.index[0]}`"),
            impact_ns=copy_ns, where=where, occurrences=len(g),
            windows=[(int(g["start"].iat[i]), int(g["end"].iat[i])) for i in np.argsort(-dur, kind="stable")[:5]],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            metrics={"copy_ns": Measure(copy_ns, "ns"), "copy_share": Measure(round(share, 4), "ratio")},
            key=f"device{device}")


def _rows(df: pd.DataFrame, table: str, sel: np.ndarray, nbytes: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"table": table, "row": np.flatnonzero(sel),
                         "device": df["device"].to_numpy()[sel], "stream": df["stream"].to_numpy()[sel],
                         "start": df["start"].to_numpy()[sel], "end": df["end"].to_numpy()[sel],
                         "bytes": nbytes[sel], "name": classify.labels_at(df["name"], sel)})


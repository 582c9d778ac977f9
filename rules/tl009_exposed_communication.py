"""TL009 exposed-communication."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelint.engine.finding import Evidence, Layer, Measure, Severity
from tracelint.engine.rule import Rule, duration_text, option
from tracelint.timeline import classify, intervals
from tracelint.timeline.codes import largest_first
from tracelint.timeline.collectives import kernel_collectives, next_compute_after
from tracelint.whatif.edits import Ops, Overlap


@dataclass(frozen=True)
class Options:
    min_share: float = option(0.02, "Report a collective when its exposed time is at least this share of the device's active window.")
    min_exposed_ns: int = option(50_000, "Ignore collectives with less exposed time than this (ns) in total.")
    top: int = option(5, "How many of the most exposed instances to list as windows.")


class ExposedCommunication(Rule):
    """Communication kernels (NCCL / RCCL collectives) that no compute overlaps.

    What it detects: on each device, the time communication kernels (kernel class
    `communication`: NCCL, RCCL, custom all-reduce, DeepEP, ...) run while no compute kernel runs
    on the same device: exposed time = communication time minus its overlap with the union of all
    non-communication kernels, on any stream. One finding per collective (AllReduce, AllGather,
    ReduceScatter, ...) per device whose exposed time is at least `min_share` of the device's
    active window and `min_exposed_ns`.
    Why it hurts: while a collective runs alone, the GPU's SMs wait on the network or NVLink; in
    data-parallel and sharded training the intended design is to bucket gradients and run the
    collective on a side stream during backward, so that only the last bucket is exposed.
    Exposed communication scales with model size and rank count and caps scaling efficiency.
    Evidence: system: total communication time, exposed time, the share overlapped and the share
    of the active window, per collective; kernel: the collective's kernels, launch count, median
    duration, the most exposed instance and the compute kernel that waited for it; microarch:
    GPU metrics over the most exposed instance (SM activity and NVLink / PCIe throughput, when
    captured). Part of a collective's time can be waiting for a slower rank (cross-rank skew):
    compare ranks before attributing all of it to bandwidth.
    Fix: overlap communication with compute: DDP gradient bucketing (`bucket_cap_mb`) with
    communication on its own stream, FSDP / ZeRO prefetch (`forward_prefetch`,
    `backward_prefetch`), async tensor-parallel collectives fused with the adjacent GEMM, fewer
    and larger collectives, and reduce the volume (bf16 / fp8 gradients, compression). Check that
    no synchronisation between the comm and compute streams serialises them.
    Counter-example (when it does not apply): communication fully hidden under compute on another
    stream (no exposed time); inference or pipeline stages where the collective is on the
    critical path by construction (tensor-parallel all-reduce between layers with nothing to
    overlap); the exposed time is a wait for a straggler rank, not the collective itself.
    """

    id = "TL009"
    slug = "exposed-communication"
    title = "Communication not overlapped with compute"
    severity = Severity.WARNING
    groups = frozenset({"distributed", "overlap"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    needs = frozenset({"kernels"})
    Options = Options

    def fix_edits(self, finding, ctx):
        """Fix: the collective overlaps compute (bucketed / async), nothing waits on it in line."""
        return [Overlap(Ops(classes=("communication",), devices=(finding.where.device,)))], ""

    def check(self, ctx):
        tl = ctx.tl
        k = tl.kernels
        if len(k) == 0:
            return
        is_comm = classify.in_labels(tl.kernel_class, ("communication",))
        if not is_comm.any():
            return
        dev = k["device"].to_numpy()
        for device in np.unique(dev[is_comm]):  # loop over devices
            yield from self._device(ctx, int(device), is_comm)

    def _device(self, ctx, device: int, is_comm: np.ndarray):
        tl, opt = ctx.tl, self.options
        k = tl.kernels
        on = k["device"].to_numpy() == device
        ks, ke = k["start"].to_numpy(), k["end"].to_numpy()
        bs, be = intervals.merge(ks[on & ~is_comm], ke[on & ~is_comm])
        crow = np.flatnonzero(on & is_comm)
        cs, ce = ks[crow], ke[crow]
        overlap = intervals.overlap_each(cs, ce, bs, be)
        exposed = (ce - cs) - overlap
        as_, ae = tl.busy_intervals(device)
        window = int(ae.max() - as_.min()) if len(as_) else 0
        if window <= 0:
            return
        coll = kernel_collectives(tl, crow)
        # Device-wide, each exposed ns once: union of comm minus its overlap with compute.
        dev_exposed = intervals.uncovered(cs, ce, bs, be)
        for c in pd.unique(coll):  # loop over collectives
            sel = coll == c
            comm_ns = intervals.total(cs[sel], ce[sel])
            exp_ns = intervals.uncovered(cs[sel], ce[sel], bs, be)
            if exp_ns <= 0 or exp_ns < opt.min_share * window or exp_ns < opt.min_exposed_ns:
                continue
            yield self._finding(ctx, device, c, crow[sel], exposed[sel], overlap[sel], comm_ns, exp_ns,
                                window, dev_exposed, bs)

    def _finding(self, ctx, device, coll, rows, exposed, overlap, comm_ns, exp_ns, window, dev_exposed, bs):
        tl, opt = ctx.tl, self.options
        k = tl.kernels
        n = len(rows)
        i0 = int(np.argmax(exposed))
        rep = int(rows[i0])
        where = ctx.where_for_kernel(rep)
        name = where.kernel
        share = exp_ns / window
        hidden = 1 - exp_ns / comm_ns if comm_ns else 0.0
        kd = (k["end"].to_numpy()[rows] - k["start"].to_numpy()[rows])
        system = Evidence.measured(
            f"{coll} on GPU {device}: {n} kernels run {comm_ns / 1e6:.3f} ms, of which "
            f"{exp_ns / 1e6:.3f} ms with no compute kernel on the device ({hidden:.0%} overlapped); "
            f"exposed {share:.1%} of the device's active window. All collectives on this device: "
            f"{dev_exposed / 1e6:.3f} ms exposed.",
            comm_ns=Measure(comm_ns, "ns"), exposed_ns=Measure(exp_ns, "ns"),
            overlapped_share=Measure(round(hidden, 4), "ratio"),
            exposed_share=Measure(round(share, 4), "ratio"), kernels=Measure(n, "count"),
            device_exposed_ns=Measure(dev_exposed, "ns"))
        # The compute kernel that waited: the first one starting after the most exposed instance.
        nxt = next_compute_after(tl, device, where.end_ns, bs)
        after = (f"; the next compute kernel, `{nxt[0]}`, starts {duration_text(nxt[1] - where.end_ns)} after it ends"
                 if nxt else "; no compute kernel follows it")
        top_names = pd.Series(classify.labels_at(k["name"], rows)).value_counts().head(3)
        kernel = Evidence.measured(
            f"Kernels: {', '.join(f'`{a}` ×{b}' for a, b in top_names.items())}; median "
            f"{duration_text(np.median(kd))}; most exposed instance `{name}` "
            f"{duration_text(exposed[i0])} alone of {duration_text(kd[i0])}{after}.",
            median_kernel_ns=Measure(float(np.median(kd)), "ns"),
            largest_exposed_ns=Measure(int(exposed[i0]), "ns"),
            instances_fully_exposed=Measure(int((overlap == 0).sum()), "count"))
        micro = ctx.microarch(device, where.start_ns, where.end_ns, kernels=[name])
        order = largest_first(exposed, opt.top)
        return self.finding(
            ctx,
            message=(f"{coll} on GPU {device} is exposed for {exp_ns / 1e6:.2f} ms ({share:.1%} of the "
                     f"active window; {hidden:.0%} of its {comm_ns / 1e6:.2f} ms overlaps compute)"),
            impact_ns=exp_ns, where=where, occurrences=n,
            windows=[(int(k["start"].iat[int(rows[i])]), int(k["end"].iat[int(rows[i])])) for i in order],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            metrics={"exposed_ns": Measure(exp_ns, "ns"), "comm_ns": Measure(comm_ns, "ns"),
                     "exposed_share": Measure(round(share, 4), "ratio")},
            key=f"{coll}|device{device}")


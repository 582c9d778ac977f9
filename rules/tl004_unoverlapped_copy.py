"""TL004 unoverlapped-copy."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.rule import Rule, duration_text, option
from tracelint.engine.runtime_advice import JAX_COPY_FIX
from tracelint.timeline import classify, intervals
from tracelint.timeline.codes import largest_first
from tracelint.whatif.edits import AsyncCopies, Ops
from tracelint.whatif.pinned import at_link_rate, link_peak, pageable_caveat

DIRECTIONS = {"H2D": "host-to-device", "D2H": "device-to-host"}

@dataclass(frozen=True)
class Options:
    min_bytes: int = option(65_536, "Copies smaller than this (bytes) are ignored (tiny reads are TL005's).")
    min_share: float = option(0.02, "Report when un-overlapped copy time is at least this share of the "
                                    "device's active window.")
    min_ns: int = option(100_000, "... and at least this long in total (ns).")
    link_gbps: float = option(0.0, "Peak host-link bandwidth (GB/s) to compare copies against; 0: infer "
                                   "from the GPU name the trace records, else no comparison.")
    top: int = option(5, "How many of the largest un-overlapped copies to list as windows.")


class UnoverlappedCopy(Rule):
    """Host<->device copies that no compute overlaps: the GPU waits for the bus.

    What it detects: host-to-device and device-to-host copies (cudaMemcpy*/cuMemcpy*/hipMemcpy*)
    of at least `min_bytes` during which no compute kernel runs on the same device (kernels of any
    stream; communication kernels do not count as compute). Reported per device and direction when
    the un-overlapped copy time reaches `min_share` of the device's active window and `min_ns`;
    copies launched outside the iterations (set-up) are left out when the trace marks iterations.
    It also counts the two usual causes: pageable (not pinned) host memory, and copies issued on a
    stream that also carries compute (stream order forbids overlap).
    Why it hurts: while a copy runs alone the SMs are idle and the step waits on PCIe. Copies from
    pageable memory go through a staging buffer, run at a fraction of link speed and are
    synchronous with respect to the host; copies on the compute stream serialise with kernels.
    Evidence: system: un-overlapped copy time (union, ns), its share of the active window and of
    copy time, how many copies are pageable or share a stream with compute; kernel: bytes moved,
    achieved GB/s (bytes / duration) versus the host-link peak (from the GPU name the trace
    records, else no comparison is made), pinned versus pageable bandwidth, and how much of the
    copy time the compute could hide at most (compute time no copy covers); microarch: SM activity during the
    largest un-overlapped copy (GPU metrics) — low SM activity confirms the idle compute.
    Fix: follows what was measured: pageable copies -> allocate host buffers pinned
    (DataLoader(pin_memory=True), tensor.pin_memory(), cudaHostAlloc / hipHostMalloc); copies on
    the compute stream -> issue them with non_blocking=True on a side stream and prefetch the
    next batch while the current one computes; too little compute to hide them -> move fewer
    bytes (keep data resident on the device, copy results back once per step, not per op). A
    program that is not PyTorch's gets the runtime's calls instead (cudaMallocHost,
    cudaMemcpyAsync on a second stream).
    Counter-example (when it does not apply): a one-off upload of weights or a dataset at start-up
    (when the trace marks iterations, copies launched outside them are left out and counted);
    copies fully overlapped with kernels on another stream from pinned memory (the rule measures
    overlap, so those never count); tiny copies below `min_bytes`.
    """

    id = "TL004"
    slug = "unoverlapped-copy"
    title = "Host<->device copies not overlapped with compute"
    severity = Severity.WARNING
    groups = frozenset({"memory", "copy", "latency"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    needs = frozenset({"copies"})
    Options = Options

    def fix_edits(self, finding, ctx):
        """Fix: these copies run on their own stream from pinned memory, prefetched; the upper
        end of its saving runs the pageable ones at the host link's peak too (whatif.pinned)."""
        direction, d = finding.key.rsplit("/", 1)[-1], finding.where.device
        c = ctx.tl.copies
        rows = np.flatnonzero((c["device"].to_numpy() == d) & (c["kind"].astype(str).to_numpy() == direction))
        return ([AsyncCopies(ops=Ops(devices=(d,), kinds=(direction,)), call_cost_ns=ctx.launch_cost_ns)],
                pageable_caveat(finding),
                at_link_rate(ctx.tl, d, rows, self.options.link_gbps))

    def check(self, ctx):
        tl, opt = ctx.tl, self.options
        c = tl.copies
        if len(c) == 0:
            return
        kind = c["kind"].astype(str).to_numpy()
        nbytes = c["bytes"].to_numpy()
        big = (nbytes < 0) | (nbytes >= opt.min_bytes)   # unknown size: kept
        k = tl.kernels
        compute = ~classify.in_labels(tl.kernel_class, ("communication",)) if len(k) else np.zeros(0, bool)
        kdev, kstr = k["device"].to_numpy(), k["stream"].to_numpy()
        compute_streams = pd.MultiIndex.from_arrays([kdev[compute], kstr[compute]]).unique()
        cdev, cstr = c["device"].to_numpy(), c["stream"].to_numpy()
        same_stream = pd.MultiIndex.from_arrays([cdev, cstr]).isin(compute_streams)
        src, dst = c["src_kind"].astype(str).to_numpy(), c["dst_kind"].astype(str).to_numpy()
        pageable = (src == "pageable") | (dst == "pageable")
        cs, ce = c["start"].to_numpy(), c["end"].to_numpy()
        in_steps = self._in_iterations(ctx, cs)
        for d in np.unique(cdev):
            ks, ke = intervals.merge(k["start"].to_numpy()[compute & (kdev == d)],
                                     k["end"].to_numpy()[compute & (kdev == d)])
            bs, be = tl.busy_intervals(int(d))
            window = int(be[-1] - bs[0]) if len(bs) else 0
            for direction in DIRECTIONS:
                sel = (cdev == d) & (kind == direction) & big
                if in_steps is not None and (sel & in_steps).any():
                    sel &= in_steps          # set-up copies outside the iterations do not count
                if not sel.any() or window <= 0:
                    continue
                us, ue = intervals.merge(cs[sel], ce[sel])
                lost = int((ue - us).sum() - intervals.overlap_each(us, ue, ks, ke).sum())
                if lost < opt.min_ns or lost < opt.min_share * window:
                    continue
                # compute time no copy covers: the most that overlap could hide
                free = int((ke - ks).sum() - intervals.overlap_each(ks, ke, us, ue).sum())
                outside = (cdev == d) & (kind == direction) & big & ~sel
                yield self._finding(ctx, int(d), direction, np.flatnonzero(sel), lost, window, ks, ke,
                                    same_stream, pageable, min(free, lost), np.flatnonzero(outside))

    @staticmethod
    def _in_iterations(ctx, t) -> np.ndarray | None:
        """Per copy, whether its launch call (else its start) falls inside an iteration; None
        when the trace marks no iterations."""
        r = ctx.tl.ranges
        steps = r[r["kind"] == "step"].sort_values("start") if len(r) else r
        if len(steps) == 0:
            return None
        launch = ctx.launch_index("copies")
        api_t = ctx.tl.api_calls["start"].to_numpy()
        if len(api_t):
            t = np.where(launch >= 0, api_t[np.clip(launch, 0, None)], t)
        ss, se = steps["start"].to_numpy(), np.maximum.accumulate(steps["end"].to_numpy())
        pos = np.searchsorted(ss, t, side="right") - 1
        return (pos >= 0) & (t < se[np.clip(pos, 0, None)])

    def _finding(self, ctx, d, direction, rows, lost, window, ks, ke, same_stream, pageable, hideable,
                 outside):
        tl, opt = ctx.tl, self.options
        c = tl.copies
        s, e = c["start"].to_numpy()[rows], c["end"].to_numpy()[rows]
        dur = e - s
        un = dur - intervals.overlap_each(s, e, ks, ke)
        nbytes = c["bytes"].to_numpy()[rows]
        pg, ss = pageable[rows], same_stream[rows]
        known = nbytes >= 0
        copy_time = int(dur.sum())
        order = largest_first(un, opt.top)
        i0 = int(rows[order[0]])
        lrow = int(ctx.launch_index("copies")[i0])
        where = ctx.where_for_api(lrow) if lrow >= 0 else Where(rank=tl.meta.rank)
        where.device, where.stream = d, int(c["stream"].iat[i0])
        where.start_ns, where.end_ns = int(c["start"].iat[i0]), int(c["end"].iat[i0])
        where.kernel = str(c["name"].iat[i0])
        peak, link, inferred = link_peak(tl, d, self.options.link_gbps)

        def gbps(mask):
            m = mask & known & (dur > 0)
            return float(nbytes[m].sum() / dur[m].sum()) if m.any() else None  # bytes/ns == GB/s

        achieved, bw_pg, bw_pin = gbps(np.ones(len(rows), bool)), gbps(pg), gbps(~pg)
        n_un = int((un > 0).sum())
        system = Evidence.measured(
            f"{n_un} of {len(rows)} {DIRECTIONS[direction]} copies run (partly) with no compute on GPU {d}: "
            f"{lost / 1e6:.3f} ms un-overlapped ({lost / window:.1%} of the active window, "
            f"{lost / copy_time:.0%} of copy time); {int(pg.sum())} from pageable memory, "
            f"{int(ss.sum())} on a stream that also runs compute."
            + (f" Only {hideable / 1e6:.3f} ms of compute could hide them: the step is transfer-bound, "
               f"so move fewer bytes (keep data resident) as well as overlapping." if hideable < lost / 2 else "")
            + (f" {len(outside)} copies outside the iterations (set-up) are not counted." if len(outside) else ""),
            hideable_ns=Measure(int(hideable), "ns"),
            outside_iterations_copies=Measure(int(len(outside)), "count"),
            unoverlapped_ns=Measure(lost, "ns"), copies=Measure(len(rows), "count"),
            unoverlapped_copies=Measure(n_un, "count"), copy_ns=Measure(copy_time, "ns"),
            unoverlapped_share=Measure(round(lost / window, 4), "ratio"),
            pageable_copies=Measure(int(pg.sum()), "count"),
            pageable_ns=Measure(int(dur[pg].sum()), "ns"),
            same_stream_copies=Measure(int(ss.sum()), "count"))
        if achieved is not None and peak is None:
            kernel = Evidence.measured(
                f"{nbytes[known].sum() / 1e6:.1f} MB moved at {achieved:.1f} GB/s"
                + (f"; pageable {bw_pg:.1f} GB/s vs pinned {bw_pin:.1f} GB/s" if bw_pg is not None and bw_pin is not None
                   else f"; {'all' if pg.all() else 'none'} from pageable memory")
                + ". The trace does not name the GPU, so the host link (PCIe generation, NVLink-C2C) "
                "is unknown and no peak is assumed: set link_gbps to compare.",
                bytes=Measure(int(nbytes[known].sum()), "bytes"),
                achieved_gbps=Measure(round(achieved, 2), "GB/s"))
        elif achieved is not None:
            note = "" if not inferred else " (assumed from the GPU name; set link_gbps to override)"
            kfacts = {"bytes": Measure(int(nbytes[known].sum()), "bytes"),
                      "achieved_gbps": Measure(round(achieved, 2), "GB/s"),
                      "link_peak_gbps": Measure(peak, "GB/s"),
                      "of_peak": Measure(round(achieved / peak, 4), "ratio")}
            if bw_pg is not None and bw_pin is not None:   # both kinds present: compare them
                kfacts["pageable_gbps"] = Measure(round(bw_pg, 2), "GB/s")
                kfacts["pinned_gbps"] = Measure(round(bw_pin, 2), "GB/s")
            else:
                bw_pg = bw_pin = None
            kernel = Evidence.measured(
                f"{nbytes[known].sum() / 1e6:.1f} MB moved at {achieved:.1f} GB/s, {achieved / peak:.0%} of the "
                f"{peak:g} GB/s {link} peak{note}"
                + (": above it, so the real link is faster than assumed" if achieved > peak * 1.05 else "")
                + (f"; pageable {bw_pg:.1f} GB/s vs pinned {bw_pin:.1f} GB/s" if bw_pg is not None else "")
                + (f"; {'all' if pg.all() else 'none'} from pageable memory" if bw_pg is None else "") + ".",
                supports=None, **kfacts)
        else:
            kernel = Evidence.not_captured(
                "The trace does not record copy sizes, so bandwidth cannot be computed.",
                ctx.capture_hint("copy_sizes"))
        micro = ctx.microarch(d, where.start_ns, where.end_ns, kernels=None,
                              expect={r"SM.?Active|SMs Active|sm__throughput": "low"})
        if micro.status == "not_captured":   # copies are not kernels: ncu cannot help here
            micro = Evidence.not_captured(
                "No GPU metric samples during the copy (SM activity, PCIe throughput).",
                ctx.capture_hint("copy_metrics"))
        hide_txt = (f"; compute could hide at most {duration_text(hideable)} of it" if hideable < lost
                    else "")
        return self.finding(
            ctx,
            message=(f"GPU {d}: {DIRECTIONS[direction]} copies leave {duration_text(lost)} without overlapping "
                     f"compute ({lost / window:.1%} of its active time); {int(pg.sum())} of {len(rows)} "
                     f"from pageable memory{hide_txt}"),
            fix=JAX_COPY_FIX if ctx.framework == "jax" else _fix(int(pg.sum()), int(ss.sum()), hideable, lost,
                                                                  torch=ctx.is_pytorch),
            impact_ns=lost, where=where, occurrences=n_un,
            windows=[(int(s[i]), int(e[i])) for i in order],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            metrics={"unoverlapped_ns": Measure(lost, "ns"),
                     "unoverlapped_share": Measure(round(lost / window, 4), "ratio"),
                     "pageable_copies": Measure(int(pg.sum()), "count")},
            key=f"device{d}/{direction}")


def _fix(pageable: int, same_stream: int, hideable: int, lost: int, torch: bool = True) -> str:
    """The fix for what was measured: pinned memory only when copies were pageable, a side
    stream only when they shared the compute stream, fewer bytes when compute cannot hide them;
    in PyTorch's terms for a PyTorch program, else in the GPU runtime's."""
    parts = []
    if pageable:
        how = ("DataLoader(pin_memory=True), tensor.pin_memory(), cudaHostAlloc / hipHostMalloc" if torch else
               "cudaMallocHost / cudaHostRegister, hipHostMalloc; OpenMP and OpenACC runtimes have a "
               "pinned-allocation option")
        parts.append(f"Allocate the {pageable} pageable host buffers pinned ({how}): pageable copies "
                     "are staged, slower and synchronous.")
    if same_stream:
        how = ("issue them with non_blocking=True on a side stream" if torch else
               "issue them with cudaMemcpyAsync (hipMemcpyAsync) from pinned memory on a second stream")
        parts.append(f"{same_stream} of the copies share the compute stream: {how} and prefetch the "
                     "next batch while the current one computes.")
    elif hideable >= lost / 2:
        parts.append("Start the copies earlier (prefetch the next batch on a side stream) so they run "
                     "under the current step's compute.")
    if hideable < lost:
        parts.append(f"Compute could hide at most {hideable / 1e6:.2f} ms of the {lost / 1e6:.2f} ms: move "
                     "fewer bytes (keep data resident on the device, copy results back once per step, "
                     "compress or downcast before the copy).")
    return " ".join(parts)

"""TL002 small-op-storm."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.rule import Rule, option
from tracelint.timeline import classify, intervals
from tracelint.timeline.codes import largest_first
from tracelint.whatif.edits import Fuse, Ops

@dataclass(frozen=True)
class Options:
    max_kernel_ns: int = option(10_000, "A kernel without a linked launch call is small when it runs "
                                        "shorter than this (ns): the typical cost of one launch.")
    ceiling_ns: int = option(50_000, "A kernel at least this long (ns) is never small, even when its "
                                     "launch call took longer (a launch blocked on a full queue).")
    min_run: int = option(20, "Smallest number of consecutive small kernels on one stream that makes a storm.")
    min_idle_share: float = option(0.02, "Report when GPU idle time inside storms is at least this share "
                                         "of the device's active window.")
    top: int = option(5, "How many storm windows and small-kernel names to list.")


def stream_runs(group: np.ndarray, flag: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Runs of consecutive True flags within each group (rows already ordered by group, time).

    Returns (first_row, length) per run.
    """
    n = len(flag)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    new_group = np.r_[True, group[1:] != group[:-1]]
    prev_flag = np.r_[False, flag[:-1]]
    starts = flag & (new_group | ~prev_flag)
    run_id = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    length = np.bincount(run_id[flag], minlength=len(first)) if len(first) else np.zeros(0, dtype=np.int64)
    return first.astype(np.int64), length.astype(np.int64)


class SmallOpStorm(Rule):
    """Storms of tiny kernels that run shorter than it takes to launch them.

    What it detects: kernels whose GPU duration is shorter than the host launch call that issued
    them (cudaLaunchKernel, cuLaunchKernel, hipLaunchKernel, hipModuleLaunchKernel, ...) or, when
    the trace does not link a kernel to its launch call, shorter than `max_kernel_ns`; and runs of
    at least `min_run` such kernels back to back on one stream (a storm). A device is reported
    when the GPU sits idle inside its storms for at least `min_idle_share` of its active window.
    Kernels replayed from a CUDA/HIP graph (`graph_launched`, or launched by cudaGraphLaunch /
    hipGraphLaunch) never count: their launch cost is already amortised.
    Why it hurts: every launch costs the host a few microseconds and the device a fixed
    ramp-up/tail; when the kernel's work is smaller than that, the GPU finishes each kernel before
    the next one arrives and waits on the CPU. Throughput is then set by Python and the driver,
    not by the hardware: many tiny ops mean launch overhead, whose fix is fusion or graphs.
    Evidence: system: GPU idle time inside the storm windows, GPU busy % of the active window;
    kernel: how many kernels are small, their share of kernels versus their share of GPU time,
    median small-kernel duration versus median launch-call duration, the longest storm and the
    most frequent small-kernel names; microarch: SM activity during the longest storm (GPU
    metrics or Nsight Compute): small grids leave most SMs idle.
    Fix: capture the steady-state loop in a CUDA graph (torch.cuda.CUDAGraph,
    torch.compile(mode="reduce-overhead"); hipGraph on ROCm), fuse chains of elementwise ops
    (torch.compile, a fused optimizer such as foreach/fused Adam, fused layer norm), and batch
    tiny per-parameter or per-token work into fewer, larger launches.
    Counter-example (when it does not apply): kernels already inside CUDA/HIP graphs; short
    kernels the host issues far ahead of the GPU (the device stays busy, no idle inside the
    storm, so the rule stays silent); a one-off warm-up or initialisation phase.
    """

    id = "TL002"
    slug = "small-op-storm"
    title = "Storm of kernels shorter than their launch cost"
    severity = Severity.WARNING
    groups = frozenset({"latency", "host", "launch"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    needs = frozenset({"kernels"})
    Options = Options

    def fix_edits(self, finding, ctx):
        """Fix: the storm's small kernels on this GPU run as one launch (fusion / CUDA graph)."""
        k = ctx.tl.kernels
        launch = ctx.launch_index("kernels")
        api = ctx.tl.api_calls
        li = np.clip(launch, 0, None)
        dur = (k["end"] - k["start"]).to_numpy()
        ldur = (api["end"] - api["start"]).to_numpy()[li] if len(api) else np.zeros(len(k), np.int64)
        small = np.where(launch >= 0, dur < ldur, dur < self.options.max_kernel_ns) & \
            (dur < self.options.ceiling_ns) & (k["device"].to_numpy() == finding.where.device)
        rows = tuple(np.flatnonzero(small).tolist())
        return ([Fuse(ops=Ops(kernel_rows=rows), min_run=self.options.min_run)], "") if rows else \
            (None, "no small kernels left to fuse")

    def check(self, ctx):
        tl, opt = ctx.tl, self.options
        k = tl.kernels
        if len(k) == 0:
            return
        api = tl.api_calls
        launch = ctx.launch_index("kernels")
        linked = launch >= 0
        li = np.clip(launch, 0, None)
        a_start, a_end = api["start"].to_numpy(), api["end"].to_numpy()
        launch_dur = np.where(linked, (a_end[li] - a_start[li]) if len(api) else 0, -1)
        if len(api):
            a_graph = np.asarray(api["name"].cat.categories.map(lambda n: classify.is_graph_launch(str(n))),
                                 dtype=bool)[np.maximum(api["name"].cat.codes.to_numpy(), 0)]
            by_graph = linked & a_graph[li]
        else:
            by_graph = np.zeros(len(k), dtype=bool)
        in_graph = k["graph_launched"].to_numpy(dtype=bool) | by_graph
        start, end = k["start"].to_numpy(), k["end"].to_numpy()
        dur = end - start
        small = np.where(linked, dur < launch_dur, dur < opt.max_kernel_ns) & (dur < opt.ceiling_ns) & ~in_graph

        device, stream = k["device"].to_numpy(), k["stream"].to_numpy()
        order = np.lexsort((start, stream, device))
        grp = np.stack([device[order], stream[order]])
        gkey = np.r_[True, (grp[:, 1:] != grp[:, :-1]).any(axis=0)].cumsum()
        first, length = stream_runs(gkey, small[order])
        storm = length >= opt.min_run
        first, length = first[storm], length[storm]
        last = first + length - 1
        run_dev = device[order][first]
        run_s, run_e = start[order][first], end[order][last]
        # end of a run: the latest end among its kernels (kernels on one stream do not overlap)
        for d in tl.devices_in_use():
            sel = run_dev == d
            if not sel.any():
                continue
            ms, me = intervals.merge(run_s[sel], run_e[sel])
            storm_idle = int((me - ms).sum() - ctx.busy_in(d, ms, me).sum())
            bs, be = tl.busy_intervals(d)
            window = int(be[-1] - bs[0]) if len(bs) else 0
            if window <= 0 or storm_idle < opt.min_idle_share * window:
                continue
            yield self._finding(ctx, d, window, storm_idle, small, dur, launch_dur, linked, in_graph,
                                order, first[sel], length[sel], run_s[sel], run_e[sel], launch)

    def _finding(self, ctx, d, window, storm_idle, small, dur, launch_dur, linked, in_graph,
                 order, first, length, run_s, run_e, launch):
        tl, opt = ctx.tl, self.options
        k = tl.kernels
        on_dev = k["device"].to_numpy() == d
        n_dev = int(on_dev.sum())
        sm = small & on_dev
        n_small = int(sm.sum())
        in_storm = np.zeros(len(k), dtype=bool)
        storm_rows = order[np.repeat(first, length) + _ramp(length)]
        in_storm[storm_rows] = True
        n_storm = int(in_storm.sum())
        gpu_time = int(dur[on_dev].sum())
        small_time = int(dur[sm].sum())
        sm_linked = sm & linked
        med_kernel = float(np.median(dur[sm])) if n_small else 0.0
        med_launch = float(np.median(launch_dur[sm_linked])) if sm_linked.any() else None
        busy = tl.gpu_busy_fraction(d)
        names = pd.Series(k["name"].to_numpy()[sm]).value_counts().head(opt.top)
        top_names = [(str(n), int(c)) for n, c in names.items()]

        # The worst storm: most GPU idle inside it.
        idle_each = (run_e - run_s) - ctx.busy_in(d, run_s, run_e)
        rank = largest_first(idle_each, opt.top)
        w0 = int(rank[0])
        row0 = int(order[first[w0]])
        lrow = int(launch[row0])
        where = ctx.where_for_api(lrow) if lrow >= 0 else Where(rank=tl.meta.rank)
        where.device, where.stream = int(d), int(k["stream"].iat[row0])
        where.start_ns, where.end_ns = int(run_s[w0]), int(run_e[w0])
        storm_names = pd.Series(k["name"].to_numpy()[order[first[w0]:first[w0] + length[w0]]])
        where.kernel = str(storm_names.value_counts().index[0])

        share_k = n_small / n_dev if n_dev else 0.0
        share_t = small_time / gpu_time if gpu_time else 0.0
        system = Evidence.measured(
            f"{len(first)} storm(s) of ≥ {opt.min_run} small kernels; the GPU idled "
            f"{storm_idle / 1e6:.3f} ms inside them ({storm_idle / window:.1%} of its active window); "
            f"GPU busy {busy:.1%} of its active window.",
            storm_idle_ns=Measure(storm_idle, "ns"), storms=Measure(len(first), "count"),
            storm_idle_share=Measure(round(storm_idle / window, 4), "ratio"),
            gpu_busy_share=Measure(round(busy, 4), "ratio"))
        launch_txt = (f"median launch call {med_launch / 1e3:.1f} µs" if med_launch is not None
                      else "no launch calls linked (threshold max_kernel_ns used)")
        kernel = Evidence.measured(
            f"{n_small} of {n_dev} kernels ({share_k:.0%}) are shorter than their launch but take "
            f"{share_t:.1%} of GPU kernel time; median small kernel {med_kernel / 1e3:.1f} µs vs "
            f"{launch_txt}; {n_storm} sit in storms, the longest {int(length.max())} kernels. "
            f"Most frequent: " + ", ".join(f"`{_short(n)}` ×{c}" for n, c in top_names[:3]) + ".",
            small_kernels=Measure(n_small, "count"), kernels=Measure(n_dev, "count"),
            storm_kernels=Measure(n_storm, "count"),
            small_kernel_share=Measure(round(share_k, 4), "ratio"),
            small_time_share=Measure(round(share_t, 4), "ratio"),
            median_small_kernel_ns=Measure(med_kernel, "ns"),
            **({"median_launch_ns": Measure(med_launch, "ns")} if med_launch is not None else {}),
            longest_storm=Measure(int(length.max()), "count"),
            graph_kernels=Measure(int((in_graph & on_dev).sum()), "count"))
        micro = ctx.microarch(int(d), int(run_s[w0]), int(run_e[w0]), kernels=[n for n, _ in top_names[:3]],
                              expect={r"SM.?Active|SMs Active|sm__throughput": "low"})
        return self.finding(
            ctx,
            message=(f"GPU {d}: {n_small} kernels ({share_k:.0%} of kernels, {share_t:.1%} of GPU time) run "
                     f"shorter than their launch; {len(first)} storm(s) leave the GPU idle "
                     f"{storm_idle / 1e6:.2f} ms ({storm_idle / window:.1%} of its active time)"),
            impact_ns=storm_idle, where=where, occurrences=int(len(first)),
            windows=[(int(run_s[i]), int(run_e[i])) for i in rank],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            metrics={"storm_idle_ns": Measure(storm_idle, "ns"), "small_kernels": Measure(n_small, "count"),
                     "small_kernel_share": Measure(round(share_k, 4), "ratio"),
                     "small_time_share": Measure(round(share_t, 4), "ratio")},
            key=f"device{d}")


def _short(name: str, n: int = 100) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def _ramp(length: np.ndarray) -> np.ndarray:
    """0..len-1 for each run, concatenated (positions inside runs), without a Python loop."""
    total = int(length.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(np.cumsum(length) - length, length)
    return np.arange(total, dtype=np.int64) - offsets

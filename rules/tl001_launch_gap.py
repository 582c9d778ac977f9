"""TL001 launch-gap."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.rule import Rule, option
from tracelint.timeline import intervals



@dataclass(frozen=True)
class Options:
    min_gap_ns: int = option(20_000, "Idle gaps shorter than this (ns) are ignored.")
    min_share: float = option(0.05, "Report when gaps take at least this share of the device's active window.")
    top: int = option(5, "How many of the largest gaps to list as windows.")


class LaunchGap(Rule):
    """GPU idles between kernels while the host is still launching or busy.

    What it detects: idle gaps on a device, between the end of one GPU activity (kernel, copy,
    memset) and the start of the next, longer than `min_gap_ns`, whose sum is at least
    `min_share` of the device's active window. For each gap it checks what the host did: whether
    the next activity's launch call started only after the GPU had gone idle (the host was late),
    and whether a synchronising call was in flight.
    Why it hurts: an idle GPU does no work; when the host issues work more slowly than the GPU
    finishes it (Python overhead, per-op dispatch, data loading, synchronisation), the device
    waits, and end-to-end time is set by the CPU, not the GPU.
    Evidence: system: total idle time in gaps, their count and median, the share of the active
    window, and the share of gaps the host started the next launch late; kernel: the kernels on
    either side of the largest gaps and their durations; microarch: SM activity sampled inside the
    largest gap (GPU metrics) — low SM activity confirms the idle time.
    Fix: take host work off the launch path: CUDA graphs or torch.compile(mode="reduce-overhead")
    for launch-bound loops, larger fused kernels, move data loading to worker processes with pinned
    memory, and remove synchronisation inside the loop (see TL005).
    Counter-example (when it does not apply): gaps that are deliberate (a profiler window start, a
    checkpoint, an evaluation pass) or that another device or stream fills; a workload whose
    iterations are dominated by a few long kernels where the gaps are small in share.
    """

    id = "TL001"
    slug = "launch-gap"
    title = "GPU idle between kernels while the host launches"
    severity = Severity.WARNING
    groups = frozenset({"latency", "host"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    needs = frozenset({"kernels"})
    Options = Options

    def fix_edits(self, finding, ctx):
        return None, "idle gaps have many causes; the rules that name one (TL002, TL005, TL010) carry its saving"

    def check(self, ctx):
        tl = ctx.tl
        opt = self.options
        act = tl.gpu_activity
        act_launch = ctx.activity_launch
        api = tl.api_calls
        api_start = api["start"].to_numpy()
        role = np.asarray(tl.api_role)
        sync_s = api_start[role == "sync"]
        sync_e = api["end"].to_numpy()[role == "sync"]
        for device in tl.devices_in_use():
            on_dev = act["device"].to_numpy() == device
            d = act[on_dev]
            d_launch = act_launch[on_dev]  # act is sorted by (device, start): d is by start
            bs, be = intervals.merge(d["start"].to_numpy(), d["end"].to_numpy())
            if len(bs) < 2:
                continue
            gs, ge = be[:-1], bs[1:]
            glen = ge - gs
            big = glen >= opt.min_gap_ns
            window = int(be[-1] - bs[0])
            idle = int(glen[big].sum())
            if window <= 0 or idle < opt.min_share * window:
                continue
            gs, ge, glen = gs[big], ge[big], glen[big]
            # The activity that ends each gap: first activity starting at the gap end.
            pos = np.clip(np.searchsorted(d["start"].to_numpy(), ge, side="left"), 0, len(d) - 1)
            nxt = d.iloc[pos]
            nxt_launch = d_launch[pos]
            linked = nxt_launch >= 0
            late = linked & (api_start[np.clip(nxt_launch, 0, None)] > gs) if len(api) else linked & False
            sync_overlap = intervals.overlap_each(gs, ge, *intervals.merge(sync_s, sync_e)) if len(sync_s) else np.zeros(len(gs), dtype=np.int64)
            order = np.argsort(-glen, kind="stable")[: opt.top]
            i0 = order[0]
            where = ctx.where_for_api(int(nxt_launch[i0])) if linked[i0] else Where(rank=tl.meta.rank)
            where.device, where.start_ns, where.end_ns = device, int(gs[i0]), int(ge[i0])
            where.stream = int(nxt["stream"].iat[i0])
            where.kernel = str(nxt["name"].iat[i0])
            late_share = float(glen[late].sum() / idle) if idle else 0.0
            sync_share = float(sync_overlap.sum() / idle) if idle else 0.0
            prev_pos = max(int(pos[i0]) - 1, 0)
            system = Evidence.measured(
                f"{len(glen)} gaps ≥ {opt.min_gap_ns / 1e3:g} µs idle the GPU for {idle / 1e6:.3f} ms "
                f"({idle / window:.1%} of its active window); the host issued the next launch late in "
                f"{late_share:.0%} of gap time and was in a sync call for {sync_share:.0%}.",
                idle_ns=Measure(idle, "ns"), gaps=Measure(len(glen), "count"),
                median_gap_ns=Measure(float(np.median(glen)), "ns"),
                idle_share=Measure(round(idle / window, 4), "ratio"),
                host_late_share=Measure(round(late_share, 4), "ratio"),
                in_sync_share=Measure(round(sync_share, 4), "ratio"),
                unlinked_gaps=Measure(int((~linked).sum()), "count"))
            kdur = (d["end"] - d["start"]).to_numpy()
            kernel = Evidence.measured(
                f"Largest gap {glen[i0] / 1e3:.1f} µs between `{d['name'].iat[prev_pos]}` and "
                f"`{where.kernel}`; median GPU activity lasts {np.median(kdur) / 1e3:.1f} µs.",
                largest_gap_ns=Measure(int(glen[i0]), "ns"),
                median_activity_ns=Measure(float(np.median(kdur)), "ns"))
            micro = ctx.microarch(device, int(gs[i0]), int(ge[i0]), kernels=[where.kernel],
                                  expect={r"SM.?Active|SMs Active|sm__throughput": "low"})
            yield self.finding(
                ctx,
                message=(f"GPU {device} idle {idle / 1e6:.2f} ms in {len(glen)} gaps "
                         f"({idle / window:.1%} of its active time); largest {glen[i0] / 1e3:.0f} µs"),
                impact_ns=idle, where=where, occurrences=int(len(glen)),
                windows=[(int(gs[i]), int(ge[i])) for i in order],
                evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
                metrics={"idle_ns": Measure(idle, "ns"), "idle_share": Measure(round(idle / window, 4), "ratio")},
                key=f"device{device}")

"""TL001 launch-gap."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.rule import Rule, duration_text, option
from tracelint.engine.runtime_advice import first_call_libraries, launch_gap_fix, past_warmup
from tracelint.timeline import classify, gaps, hostidle, intervals
from tracelint.timeline.codes import largest_first, mode_label



@dataclass(frozen=True)
class Options:
    min_gap_ns: int = option(20_000, "Idle gaps shorter than this (ns) are ignored.")
    min_share: float = option(0.05, "Report when gaps take at least this share of the steady-state window (iterations after the first, else the device's active window).")
    top: int = option(5, "How many of the largest gaps to list as windows.")
    min_activities: int = option(8, "A device with fewer GPU activities than this shows no steady state: its gaps are reported as warm-up (info).")
    first_call_share: float = option(0.5, "A gap in which module loading or allocation calls take at least this share is a first-call cost (warm-up).")
    name_share: float = option(0.1, "Name the launching thread's top host activity in the message when it fills at least this share of the idle time.")
    long_gap_ns: int = option(1_000_000, "Gaps at least this long (ns) are host work between launches, not launch overhead: where they hold most of the late-launch idle time, the fix names that work, not CUDA graphs or fusion.")


CAUSE_TEXT = {
    "late": "the host issued the next launch late",
    "launch_call": "the host sat in the launch call itself",
    "blocked": "the host thread was blocked in a synchronous call",
    "event_wait": "the stream waited on another stream's event",
    "graph": "the work waited inside a CUDA graph launch",
    "queued": "launched work started late with no recorded wait",
    "no_launch": "nothing was launched",
    "unlinked": "the next activity has no launch call in the trace",
}

FIX_BY_CAUSE = {
    "late": ("Take host work off the launch path: CUDA graphs or torch.compile(mode=\"reduce-overhead\") "
             "for launch-bound loops, larger fused kernels, move data loading and preprocessing to "
             "DataLoader workers (num_workers, pin_memory) so the next launch is ready when the GPU is."),
    "blocked": ("Remove the synchronous call from the loop: a blocking copy (cudaMemcpy, hipMemcpy, "
                "hipMemcpyWithStream, cuMemcpyDtoH, any copy to or from pageable memory) waits for the "
                "device like a sync; use non_blocking copies from pinned memory, keep values on the GPU "
                "instead of .item()/.cpu(), and synchronise once per step at most (see TL005)."),
    "event_wait": ("The stream waited on an event recorded on another stream: the producer stream is the "
                   "critical path. Start the producer's work earlier, split it so the consumer can begin on "
                   "the first part, or drop the cross-stream wait where the data is not needed yet."),
    "launch_call": ("The launch calls themselves were slow: a first launch loads the kernel's module "
                    "(CUDA_MODULE_LOADING=LAZY moves that cost into the loop; warm up before timing), and "
                    "a contended driver lock (many host threads launching) serialises launches."),
    "graph": ("The GPU idled between nodes of one CUDA graph launch: the graph's nodes wait on each other "
              "or on an event outside it. Check the captured dependencies (nsys --cuda-graph-trace=node) "
              "and remove waits that serialise independent work."),
    "queued": ("The work was already launched and no host call or recorded stream wait explains the "
               "delay: launch latency for short gaps, else a dependency the trace does not show (another "
               "device or process, an IPC event, a collective waiting for a peer). Profile the other "
               "side (all ranks, --cuda-event-trace) before changing code."),
    "late_long": ("The gaps are long ({facts}), and a launch costs microseconds, so CUDA graphs or "
                  "fused kernels would not close them: between launches the host does other work (the host "
                  "activity named in the evidence; where the trace records none, profile the host: py-spy, "
                  "or nsys -t osrt --sample=cpu). Overlap it with GPU work: load and preprocess data in "
                  "DataLoader workers, move preprocessing to the GPU, launch the next step before host-side "
                  "bookkeeping, or move that work off the launching thread."),
    "no_launch": ("Nothing was launched while the GPU idled: the host was doing other work (see the host "
                  "activity named in the evidence). Overlap it with GPU work: prefetch the next batch in "
                  "DataLoader workers, move preprocessing to the GPU, or run it on another thread."),
    "unlinked": ("The trace does not link these activities to launch calls, so the cause is not measured: "
                 "re-capture with CUDA API tracing (nsys -t cuda, torch.profiler ProfilerActivity.CUDA)."),
}


class LaunchGap(Rule):
    """GPU idles between kernels while the host is still launching or busy.

    What it detects: idle gaps on a device longer than `min_gap_ns`, whose sum is at least
    `min_share` of the steady-state window: the iterations after the first (ProfilerStep
    ranges, including the idle before the first kernel of each iteration), else the device's
    active window. Each gap is attributed from what the host threads and streams did in it
    (tracelint.timeline.gaps): the next launch was issued late, the launching thread was
    blocked in a synchronous call (a sync, or any blocking copy), the stream waited on another
    stream's event, the work sat queued, or nothing was launched at all. What the launching host
    thread did in the idle time is named by exclusive time (tracelint.timeline.hostidle): data
    loading, compilation, garbage collection, logging, a blocking call, CPU ops, Python
    functions, or no host activity recorded, with the user's Python line where the trace has
    stacks. The idle before the first kernel of each iteration is part of this rule's measured
    idle (its impact); TL013 names that part apart and owns its fix: TL001 states no fix edit,
    so the projected saving of all fixes together (saving_all_ns) counts it once, through
    TL013's replayed edit. Warm-up is reported apart, as
    info: the first iteration, gaps spent mostly in module loading or allocation (first-call
    costs), and devices with fewer than `min_activities` GPU activities.
    Why it hurts: an idle GPU does no work; when the host issues work more slowly than the GPU
    finishes it (Python overhead, per-op dispatch, data loading, synchronisation), the device
    waits, and end-to-end time is set by the CPU, not the GPU.
    Evidence: system: idle time in gaps, their count and median, the share of the window, the
    split by cause, the host activity in the idle time (innermost CPU ops and Python functions,
    and the launching thread's time by activity, exclusive; the other host threads busy in it)
    and the idle share of the whole profiled window; kernel: the activities on either side of
    the largest gap; microarch: SM activity sampled inside the largest gap (GPU metrics) — low
    SM activity confirms the idle time.
    Fix: follows the measured cause: for a late host, CUDA graphs or torch.compile
    (mode="reduce-overhead"), fused kernels and data loading in worker processes; for a blocked
    host, remove the synchronous call or copy (see TL005); for a cross-stream wait, start the
    producer stream's work earlier; for no launch, overlap the host work with GPU work. A
    program that is not PyTorch's gets the runtime's terms (a CUDA graph by stream capture,
    async copies from pinned memory).
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
        tl, opt = ctx.tl, self.options
        block = gaps.blocking_rows(ctx)
        first_call = classify.in_labels(tl.api_role, ("load", "alloc"))
        st_s, st_e = gaps.step_windows(tl)
        act_dev = tl.gpu_activity["device"].to_numpy()
        for device in tl.devices_in_use():
            bs, be = tl.busy_intervals(device)
            if len(bs) == 0:
                continue
            ws, we = gaps.iteration_windows(ctx, device, st_s, st_e)
            on = (we > bs[0]) & (ws < be[-1])
            ws, we = ws[on], we[on]
            n_act = int((act_dev == device).sum())
            if len(ws) >= 2:
                warm_w, steady_w, where_txt = [(ws[0], we[0])], list(zip(ws[1:], we[1:])), "its iterations after the first"
            elif len(ws) == 1:
                warm_w, steady_w, where_txt = [], [(ws[0], we[0])], "its iteration"
            else:
                warm_w, steady_w, where_txt = [], [(bs[0], be[-1])], "its active window"
            if n_act < opt.min_activities:
                warm_w, steady_w = warm_w + steady_w, []
            warm_s, warm_e = _idle(bs, be, warm_w, opt.min_gap_ns)
            gs, ge = _idle(bs, be, steady_w, opt.min_gap_ns)
            fc = _first_call(ctx, device, first_call, gs, ge, opt.first_call_share)
            window = int(sum(int(e - s) for s, e in steady_w))
            if fc.any():
                warm_s, warm_e = np.concatenate([warm_s, gs[fc]]), np.concatenate([warm_e, ge[fc]])
                gs, ge = gs[~fc], ge[~fc]
            if len(warm_s):
                yield self._warmup(ctx, device, warm_s, warm_e, n_act, bool(warm_w), int(fc.sum()))
            idle = int((ge - gs).sum())
            if window <= 0 or len(gs) == 0 or idle < opt.min_share * window:
                continue
            yield self._gap_finding(ctx, device, gs, ge, idle, window, where_txt, block, bs, be)

    def _gap_finding(self, ctx, device, gs, ge, idle, window, where_txt, block, bs, be):
        tl, opt = ctx.tl, self.options
        glen = ge - gs
        att = gaps.attribute(ctx, device, gs, ge, block)
        by_cause = {c: int(att[c].sum()) for c in gaps.CAUSES}
        cause = max(by_cause, key=lambda c: by_cause[c])
        order = largest_first(glen, opt.top)
        i0 = int(order[0])
        li, p = int(att["launch"].iat[i0]), int(att["next_pos"].iat[i0])
        where = ctx.where_for_api(li) if li >= 0 else Where(rank=tl.meta.rank)
        where.device, where.start_ns, where.end_ns = device, int(gs[i0]), int(ge[i0])
        d = tl.gpu_activity[tl.gpu_activity["device"] == device]
        if p >= 0:
            where.stream, where.kernel = int(d["stream"].iat[p]), str(d["name"].iat[p])
        pid = int(tl.api_calls["pid"].iat[li]) if li >= 0 else None
        host = gaps.host_activity(ctx, pid, gs, ge)
        thread = hostidle.launching_thread(ctx, device)
        hidle = hostidle.attribute(ctx, thread, gs, ge)
        top_cat, top_ns, top = hidle.top_category()
        site = (ctx.where_for_host(thread[0], thread[1], top.start).source_text()
                if thread is not None and top is not None and top.start >= 0 else None)
        named = (f"; host thread: {hidle.headline(site=site)}" if top is not None and top_ns >= opt.name_share * idle
                 else "")
        largest = ", ".join(hidle.describe(a) for a in hidle.activities[:3])
        others = hostidle.other_threads(ctx, thread, gs, ge)
        thread_txt = (f" The launching thread (pid {thread[0]}, tid {thread[1]}) in the idle time, by exclusive "
                      f"time: {hidle.breakdown()}; largest: {largest}." if thread is not None and hidle.window_ns else "")
        thread_txt += hostidle.others_text(others, hidle.window_ns)
        split = ", ".join(f"{CAUSE_TEXT[c]} {v / idle:.0%}" for c, v in
                          sorted(by_cause.items(), key=lambda kv: -kv[1]) if v > 0)
        codes, labels = pd.factorize(att["blocker"].to_numpy()[att["blocked"].to_numpy() > 0])
        blocker = mode_label(np.asarray(labels, dtype=object), codes)   # counted per label
        block_txt = f" The blocking call most often: `{blocker}`." if blocker is not None else ""
        host_txt = ("; host work in the idle time: " + ", ".join(f"`{n}` {ns / 1e6:.2f} ms" for n, ns in host)
                    if host else "")
        lo, hi = tl.span
        prof_idle = _idle_total(bs, be, lo, hi)
        system = Evidence.measured(
            f"{len(glen)} gaps ≥ {opt.min_gap_ns / 1e3:g} µs idle the GPU for {idle / 1e6:.3f} ms "
            f"({idle / window:.1%} of {where_txt}); by cause: {split}{host_txt}.{block_txt}{thread_txt} Over the "
            f"whole profiled window ({(hi - lo) / 1e6:.1f} ms) the GPU is idle {prof_idle / max(hi - lo, 1):.1%}.",
            idle_ns=Measure(idle, "ns"), gaps=Measure(len(glen), "count"),
            median_gap_ns=Measure(float(np.median(glen)), "ns"),
            idle_share=Measure(round(idle / window, 4), "ratio"),
            host_late_share=Measure(round(by_cause["late"] / idle, 4), "ratio"),
            in_sync_share=Measure(round(by_cause["blocked"] / idle, 4), "ratio"),
            event_wait_share=Measure(round(by_cause["event_wait"] / idle, 4), "ratio"),
            queued_share=Measure(round(by_cause["queued"] / idle, 4), "ratio"),
            no_launch_share=Measure(round(by_cause["no_launch"] / idle, 4), "ratio"),
            unlinked_gaps=Measure(int((att["unlinked"] > 0).sum()), "count"),
            profiled_window_idle_share=Measure(round(prof_idle / max(hi - lo, 1), 4), "ratio"),
            host_top_category_ns=Measure(top_ns, "ns"),
            host_top_activity_ns=Measure(int(top.ns) if top else 0, "ns"),
            host_unrecorded_share=Measure(round(hidle.unrecorded_ns / max(hidle.window_ns, 1), 4), "ratio"),
            other_thread_busy_ns=Measure(others[0][1] if others else 0, "ns"))
        prev = np.flatnonzero(d["end"].to_numpy() == gs[i0])[-1:]   # the row the gap follows
        prev_txt = f"`{classify.labels_at(d['name'], prev)[0]}`" if len(prev) else \
            "the iteration start"
        kdur = (d["end"] - d["start"]).to_numpy()
        kernel = Evidence.measured(
            f"Largest gap {duration_text(glen[i0])} between {prev_txt} and "
            f"{'`' + where.kernel + '`' if where.kernel else 'the iteration end'}; median GPU activity lasts "
            f"{duration_text(np.median(kdur))}.",
            largest_gap_ns=Measure(int(glen[i0]), "ns"),
            median_activity_ns=Measure(float(np.median(kdur)), "ns"))
        micro = ctx.microarch(device, int(gs[i0]), int(ge[i0]), kernels=[where.kernel] if where.kernel else None,
                              expect={r"SM.?Active|SMs Active|sm__throughput": "low"})
        return self.finding(
            ctx,
            message=(f"GPU {device} idle {duration_text(idle)} in {len(glen)} gaps ({idle / window:.1%} of "
                     f"{where_txt}); mostly {CAUSE_TEXT[cause]} ({by_cause[cause] / idle:.0%}){named}"),
            impact_ns=idle, where=where, occurrences=int(len(glen)),
            windows=[(int(gs[i]), int(ge[i])) for i in order],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            metrics={"idle_ns": Measure(idle, "ns"), "idle_share": Measure(round(idle / window, 4), "ratio"),
                     "cause_share": Measure(round(by_cause[cause] / idle, 4), "ratio")},
            fix=self._fix(cause, ctx.framework, glen, att["late"].to_numpy()),
            key=f"device{device}")

    def _fix(self, cause: str, framework: str, glen: np.ndarray, late: np.ndarray) -> str:
        """The fix for the main cause. Late launches whose idle time is mostly in long gaps
        (late: each gap's late-launch time) are host work between launches (late_long), which
        launch-overhead fixes (CUDA graphs, fusion) do not touch."""
        long = glen >= self.options.long_gap_ns
        share = late[long].sum() / max(late.sum(), 1)
        if cause != "late" or share < 0.5:
            return launch_gap_fix(cause, framework, FIX_BY_CAUSE[cause])
        facts = (f"{share:.0%} of the late-launch idle time is in {int(long.sum())} gaps of "
                 f"{duration_text(self.options.long_gap_ns)} or more, the largest {duration_text(glen.max())}")
        return launch_gap_fix("late_long", framework, FIX_BY_CAUSE["late_long"]).format(facts=facts)

    def _warmup(self, ctx, device, s, e, n_act, first_iteration, first_calls):
        tl = ctx.tl
        idle = int((e - s).sum())
        parts = []
        if first_iteration:
            parts.append("the first iteration")
        if first_calls:
            parts.append(f"{first_calls} gap(s) spent mostly in module loading or allocation (first-call costs)")
        if n_act < self.options.min_activities:
            parts.append(f"only {n_act} GPU activities on the device: no steady state to judge")
        system = Evidence.measured(
            f"{len(s)} warm-up gaps idle GPU {device} for {idle / 1e6:.3f} ms: {'; '.join(parts)}. "
            f"Lazy module loading, {first_call_libraries(ctx.vendor)}, allocator growth and first-iteration "
            "compilation happen once; they are not launch gaps.",
            idle_ns=Measure(idle, "ns"), gaps=Measure(len(s), "count"),
            activities=Measure(n_act, "count"))
        i0 = int(np.argmax(e - s))
        return self.finding(
            ctx, severity=Severity.INFO,
            message=f"GPU {device} warm-up: {duration_text(idle)} idle in {len(s)} gaps ({parts[0]}), apart from steady state",
            impact_ns=idle, where=Where(rank=tl.meta.rank, device=device, start_ns=int(s[i0]), end_ns=int(e[i0])),
            occurrences=int(len(s)), windows=[(int(a), int(b)) for a, b in zip(s, e)][:self.options.top],
            evidence={Layer.SYSTEM: system,
                      Layer.KERNEL: Evidence.not_applicable("warm-up idle: first calls, not kernels"),
                      Layer.MICROARCH: Evidence.not_applicable("warm-up idle: first calls, not kernels")},
            metrics={"idle_ns": Measure(idle, "ns")},
            fix=(f"Nothing to fix in steady state. Profile past warm-up ({past_warmup(ctx.framework, ctx.vendor)}) "
                 "to see steady-state behaviour."),
            key=f"warmup|device{device}")


def _idle(bs, be, windows, min_gap) -> tuple[np.ndarray, np.ndarray]:
    """Idle intervals of at least min_gap ns inside each window."""
    out_s, out_e = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for lo, hi in windows:  # loop over iterations
        s, e = gaps.idle_in(bs, be, int(lo), int(hi))
        keep = (e - s) >= min_gap
        out_s.append(s[keep])
        out_e.append(e[keep])
    return np.concatenate(out_s).astype(np.int64), np.concatenate(out_e).astype(np.int64)


def _idle_total(bs, be, lo, hi) -> int:
    s, e = gaps.idle_in(bs, be, int(lo), int(hi))
    return int((e - s).sum())


def _first_call(ctx, device, mask, gs, ge, share) -> np.ndarray:
    """Gaps that are first-call costs: module-loading or allocation calls cover at least `share`
    of the gap, or the gap ends at the first launch of a kernel whose launch call covers it."""
    tl = ctx.tl
    out = np.zeros(len(gs), dtype=bool)
    if len(gs) == 0 or len(tl.api_calls) == 0:
        return out
    a = tl.api_calls
    a_s, a_e = a["start"].to_numpy(), a["end"].to_numpy()
    if mask.any():
        s, e = intervals.merge(a_s[mask], a_e[mask])
        out |= intervals.overlap_each(gs, ge, s, e) >= share * (ge - gs)
    act = tl.gpu_activity
    on = act["device"].to_numpy() == device
    starts, li = act["start"].to_numpy()[on], ctx.activity_launch[on]
    first = ~act["name"][on].duplicated().to_numpy()
    pos = np.clip(np.searchsorted(starts, ge, side="left"), 0, max(len(starts) - 1, 0))
    nli = li[pos]
    call = np.where(nli >= 0, np.minimum(a_e[np.clip(nli, 0, None)], ge) - np.maximum(a_s[np.clip(nli, 0, None)], gs), 0)
    return out | (first[pos] & (nli >= 0) & (call >= share * (ge - gs)))

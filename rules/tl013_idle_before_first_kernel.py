"""TL013 idle-before-first-kernel."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.rule import Rule, option
from tracelint.engine.runtime_advice import iteration_start_fix
from tracelint.timeline import gaps, hostidle, intervals
from tracelint.whatif.host_time import RemoveHostTime


@dataclass(frozen=True)
class Options:
    min_share: float = option(0.1, "An iteration counts when the idle before its first GPU activity is at least this share of the iteration.")
    min_idle_ns: int = option(20_000, "... and at least this long (ns), TL001's shortest gap.")
    min_iterations: int = option(2, "Report when at least this many iterations after the first count ...")
    recur_share: float = option(0.5, "... and they are at least this share of the iterations after the first (recurring, not warm-up).")


FIX_BY_ACTIVITY = {
    "data_loading": ("Load the next batch off the launching thread: DataLoader(num_workers>0, pin_memory=True, "
                     "persistent_workers=True, prefetch_factor=2..4) and .to(device, non_blocking=True), so the "
                     "batch is ready when the iteration starts (see TL031)."),
    "compilation": ("Compile before the measured loop: warm torch.compile up on representative shapes, mark "
                    "varying dimensions dynamic (torch._dynamo.mark_dynamic) and remove what recompiles."),
    "gc": ("Take Python garbage collection out of the step: gc.freeze() after setup, gc.disable() in the "
           "loop with gc.collect() every N steps, fewer short-lived Python objects per step."),
    "logging": ("Log less often and off the critical path: keep metrics on the GPU and log every N steps, "
                "use an asynchronous writer, no print()/.item() at the start of the iteration."),
    "sync": ("The iteration starts blocked in a synchronous call: remove it, or move it where the GPU "
             "still has queued work (see TL005)."),
    "cuda_api": ("The iteration starts in CUDA/HIP API calls (allocation, module loading): keep allocations "
                 "cached (no empty_cache() in the loop) and warm up before measuring."),
    "unrecorded": ("The trace records nothing on the launching thread then: re-capture with Python stacks "
                   "(torch.profiler with_stack=True) or NVTX ranges (nsys -t cuda,nvtx,osrt "
                   "--python-backtrace=cuda) to name the host work, then overlap it with GPU work."),
}
FIX_DEFAULT = ("Overlap the host work at the start of the iteration with GPU work: issue the iteration's "
               "GPU work first and do the host work while it runs, prepare inputs ahead (prefetch on a "
               "side stream, DataLoader workers), move preprocessing to the GPU, or capture the step in "
               "a CUDA graph so its launch costs one call.")
#: Activities whose host time the replay can remove (time between API calls on the thread).
REMOVABLE = ("data_loading", "compilation", "gc", "logging", "cpu_op", "python", "annotation")


class IdleBeforeFirstKernel(Rule):
    """The GPU idles at the start of each iteration until the host issues its first kernel.

    What it detects: per iteration (ProfilerStep or NVTX step ranges, the window TL001 uses:
    from the host step start, or the end of the previous iteration's GPU work when that runs
    later, to the end of its own work), the idle time on the device before the iteration's
    first GPU activity, and what the launching host thread did in it, by exclusive time
    (tracelint.timeline.hostidle: data loading, compilation, garbage collection, logging, a
    blocking call, CPU ops, Python functions, or nothing recorded). It fires when that idle is
    at least `min_share` of the iteration in at least `min_iterations` iterations after the
    first, and in at least `recur_share` of them: it recurs, it is not warm-up. The first
    iteration is never counted. Ownership: TL001 measures all idle inside iterations, this
    idle included, and states no fix edit; TL013 owns the fix and projected saving of the idle
    before the first kernel, so the saving of all fixes replayed together (saving_all_ns)
    counts it once. TL013's impact is a part of TL001's on the same device, not an addition.
    Why it hurts: every iteration pays the host's preparation (the next batch, Python set-up,
    logging of the last step, garbage collection) with an idle GPU before any work is queued;
    the GPU's speed does not matter for that part of the step.
    Evidence: system: the iterations counted, the idle before the first kernel (total, median
    per iteration, share of the iteration), the host thread's time in it by activity and the
    top activity with its Python line, and the other host threads busy in it; kernel: the first GPU activity that ends the idle in the
    worst iteration and the GPU time of that iteration; microarch: SM activity sampled in the
    worst idle window (GPU metrics) — low confirms the idle. Projected saving: the host work of
    the top activity category removed inside those windows (moved off the launching thread or
    overlapped with GPU work), replayed
    (tracelint.whatif); none is stated when the idle is a blocking call (TL005 carries it), CUDA
    API calls, or nothing recorded, or when other host threads (the autograd engine's backward
    thread) also launch the device's work: the replay does not model their wait on the
    launching thread, so it would move one thread and not the other.
    Fix: follows the named activity: DataLoader workers and pinned, non-blocking copies for
    data loading; compile before the loop; gc.freeze()/gc.disable() for garbage collection;
    log every N steps; otherwise issue the GPU work first and overlap the host work with it.
    Counter-example (when it does not apply): only the first iteration (warm-up, compilation,
    allocator growth); a profile of one iteration; steps whose first kernel follows a deliberate
    host phase (evaluation, checkpointing); idle that is small against the iteration.
    """

    id = "TL013"
    slug = "idle-before-first-kernel"
    title = "GPU idle at the start of every iteration while the host prepares it"
    severity = Severity.WARNING
    groups = frozenset({"latency", "host"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    needs = frozenset({"kernels", "ranges"})
    Options = Options

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._edits: dict = {}

    def fix_edits(self, finding, ctx):
        return self._edits.get((id(ctx), finding.key), (None, "the fix was not recorded for this finding"))

    def check(self, ctx):
        tl, opt = ctx.tl, self.options
        st_s, st_e = gaps.step_windows(tl)
        if len(st_s) < 2:
            return
        for device in tl.devices_in_use():
            bs, be = tl.busy_intervals(device)
            if len(bs) == 0:
                continue
            ws, we = gaps.iteration_windows(ctx, device, st_s, st_e)
            head, first = head_idle(bs, be, ws, we)
            win = np.maximum(we - ws, 1)
            steady = np.arange(1, len(ws))
            ok = (first[steady] >= 0) & (head[steady] >= opt.min_idle_ns) & (head[steady] >= opt.min_share * win[steady])
            sig = steady[ok]
            n_steady = len(steady)
            if len(sig) < opt.min_iterations or len(sig) < opt.recur_share * n_steady:
                continue
            yield self._finding(ctx, device, ws, we, head, first, sig, n_steady, bs, be)

    def _finding(self, ctx, device, ws, we, head, first, sig, n_steady, bs, be):
        tl = ctx.tl
        hs, he = ws[sig], ws[sig] + head[sig]
        idle = int(head[sig].sum())
        shares = head[sig] / np.maximum(we[sig] - ws[sig], 1)
        thread = hostidle.launching_thread(ctx, device)
        hid = hostidle.attribute(ctx, thread, hs, he)
        cat, cat_ns, top = hid.top_category()
        others = hostidle.other_threads(ctx, thread, hs, he)
        worst = int(np.argmax(head[sig]))
        k = int(sig[worst])
        site = None
        if thread is not None and top is not None and top.start >= 0:
            where = ctx.where_for_host(thread[0], thread[1], top.start,
                                       device=device, start_ns=int(hs[worst]), end_ns=int(he[worst]))
            site = where.source_text()
        else:
            where = Where(rank=tl.meta.rank, device=device, start_ns=int(hs[worst]), end_ns=int(he[worst]))
        warm = int(head[0]) if first[0] >= 0 else 0
        med = float(np.median(head[sig]))
        top_share = cat_ns / max(hid.window_ns, 1)
        system = Evidence.measured(
            f"{len(sig)} of {n_steady} iterations after the first start with the GPU idle before their "
            f"first GPU activity: {idle / 1e6:.3f} ms in all, median {med / 1e6:.3f} ms "
            f"({float(np.median(shares)):.1%} of the iteration); the first iteration (warm-up, not "
            f"counted) {warm / 1e6:.3f} ms. The launching thread in that time, by exclusive time: "
            f"{hid.breakdown() or 'nothing'}; largest: "
            f"{', '.join(hid.describe(a) for a in hid.activities[:3]) or 'none'}.{hostidle.others_text(others, idle)}",
            idle_ns=Measure(idle, "ns"), iterations=Measure(len(sig), "count"),
            steady_iterations=Measure(n_steady, "count"),
            median_idle_ns=Measure(med, "ns"), median_idle_share=Measure(round(float(np.median(shares)), 4), "ratio"),
            warmup_idle_ns=Measure(warm, "ns"),
            top_category_ns=Measure(cat_ns, "ns"),
            top_activity_ns=Measure(int(top.ns) if top else 0, "ns"),
            top_category_share=Measure(round(top_share, 4), "ratio"),
            unrecorded_share=Measure(round(hid.unrecorded_ns / max(hid.window_ns, 1), 4), "ratio"),
            other_thread_busy_ns=Measure(others[0][1] if others else 0, "ns"))
        act = tl.gpu_activity
        d = act[act["device"].to_numpy() == device]
        p = int(np.searchsorted(d["start"].to_numpy(), first[k], side="left"))
        kname = str(d["name"].iat[p]) if p < len(d) else ""
        busy = int(intervals.overlap_each(np.array([ws[k]]), np.array([we[k]]), bs, be)[0])
        kernel = Evidence.measured(
            f"In iteration {k} (the longest idle, {head[k] / 1e6:.3f} ms) the idle ends at `{kname}`; "
            f"the GPU is busy {busy / 1e6:.3f} ms of the iteration's {(we[k] - ws[k]) / 1e6:.3f} ms.",
            largest_idle_ns=Measure(int(head[k]), "ns"), iteration_gpu_busy_ns=Measure(busy, "ns"),
            iteration_ns=Measure(int(we[k] - ws[k]), "ns"))
        where.kernel = kname or None
        micro = ctx.microarch(device, int(hs[worst]), int(he[worst]), kernels=None,
                              expect={r"SM.?Active|SMs Active|sm__throughput": "low"})
        key = f"device{device}"
        self._edits[(id(ctx), key)] = self._fix(tl, thread, hid, cat, top, hs, he, _other_launchers(ctx, device, thread))
        return self.finding(
            ctx,
            message=(f"GPU {device} idles {med / 1e6:.2f} ms at the start of {len(sig)} of {n_steady} "
                     f"iterations ({float(np.median(shares)):.0%} of each) before its first kernel; host "
                     f"thread: {hid.headline(per=len(sig), site=site) or 'no host activity recorded'}"),
            impact_ns=idle, where=where, occurrences=int(len(sig)),
            windows=[(int(a), int(b)) for a, b in zip(hs, he)][:5],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            metrics={"idle_ns": Measure(idle, "ns"), "median_idle_ns": Measure(med, "ns"),
                     "top_category_share": Measure(round(top_share, 4), "ratio")},
            fix=iteration_start_fix(ctx.framework, FIX_BY_ACTIVITY.get(cat, FIX_DEFAULT)), key=key)

    @staticmethod
    def _fix(tl, thread, hid, cat, top, hs, he, other_launches=0):
        """(edits, why): remove the host work of the top activity category inside the idle
        windows (RemoveHostTime over the ranges that name it)."""
        if other_launches:
            return None, (f"{other_launches} of the device's launches come from other host threads "
                          "(PyTorch's autograd backward thread, JAX's PjRt workers), which wait on this "
                          "thread in ways the replay does not model: moving this thread's work would not "
                          "move theirs, so no saving can be established")
        if top is None or cat == "unrecorded":
            return None, "nothing is recorded on the launching thread in the idle time: no host work to remove"
        if cat == "sync":
            return None, f"the host is blocked in `{top.name}`: removing the sync is TL005's fix and saving"
        if cat not in REMOVABLE:
            return None, f"the idle is spent in CUDA/HIP API calls (`{top.name}`), whose cost the replay keeps"
        a = tl.api_calls
        rows = np.flatnonzero((a["pid"].to_numpy() == thread[0]) & (a["tid"].to_numpy() == thread[1])) \
            if thread is not None and len(a) else np.zeros(0, np.int64)
        if len(rows) == 0:
            return None, "the launching thread has no API call in the trace to anchor the replay's edit"
        cs, ce = clip_to(*hid.anchors_of(cat), hs, he)
        if len(cs) == 0:
            return None, "the named work does not overlap the idle windows"
        return [RemoveHostTime(int(rows[0]), tuple(int(x) for x in cs), tuple(int(x) for x in ce))], ""


def _other_launchers(ctx, device, thread) -> int:
    """Launches of the device's work made by host threads other than `thread`."""
    act = ctx.tl.gpu_activity
    li = ctx.activity_launch[act["device"].to_numpy() == device]
    li = li[li >= 0]
    if thread is None or len(li) == 0:
        return 0
    a = ctx.tl.api_calls
    return int(((a["pid"].to_numpy()[li] != thread[0]) | (a["tid"].to_numpy()[li] != thread[1])).sum())


def head_idle(bs, be, ws, we) -> tuple[np.ndarray, np.ndarray]:
    """Per window [ws, we): idle ns before the first busy instant, and that instant (-1: the
    device does nothing in the window)."""
    i = np.searchsorted(be, ws, side="right")
    has = i < len(bs)
    nb = np.where(has, bs[np.minimum(i, len(bs) - 1)], np.iinfo(np.int64).max)
    has &= nb < we
    first = np.where(has, np.maximum(nb, ws), -1)
    return np.where(has, np.maximum(nb - ws, 0), 0).astype(np.int64), first.astype(np.int64)


def clip_to(rs, re_, ws, we) -> tuple[np.ndarray, np.ndarray]:
    """The parts of intervals [rs, re_) inside merged windows [ws, we)."""
    rs, re_ = intervals.merge(np.asarray(rs, np.int64), np.asarray(re_, np.int64))
    out_s, out_e = [], []
    for lo, hi in zip(*intervals.merge(ws, we)):    # loop over the idle windows (one per iteration)
        j = np.flatnonzero((rs < hi) & (re_ > lo))
        out_s.append(np.maximum(rs[j], lo))
        out_e.append(np.minimum(re_[j], hi))
    if not out_s:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(out_s), np.concatenate(out_e)

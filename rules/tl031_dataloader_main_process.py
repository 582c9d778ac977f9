"""TL031 dataloader-main-process."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelint.engine.finding import Evidence, Layer, Measure, Severity
from tracelint.engine.rule import Rule, option
from tracelint.timeline import classify, intervals


@dataclass(frozen=True)
class Options:
    min_idle_share: float = option(0.05, "Report when the GPU idles at least this share of the span while the main process loads batches.")
    min_idle_ns: int = option(1_000_000, "... and at least this much time (ns).")


class DataLoaderMainProcess(Rule):
    """The DataLoader runs in the training process (num_workers=0) while the GPU waits.

    What it detects: `enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__` ranges —
    PyTorch records them when a DataLoader has num_workers=0 — during which the GPU is idle:
    reading, decoding, augmenting and collating the next batch on the thread that launches the
    GPU work. The idle time is measured on every device in use, inside those ranges only.
    Why it hurts: the launching thread cannot queue GPU work while it builds a batch, so the
    GPU's speed does not matter until loading moves off that thread; the gap repeats every step.
    Evidence: system: batches loaded in the main process, host time in them, GPU idle inside
    them and its share of the span; kernel and microarch: not applicable (the GPU is idle, not
    slow). A trace without GPU activity is skipped, with the loads it shows in the reason: there
    is no idle time to measure.
    Fix: `DataLoader(dataset, num_workers=4..8, pin_memory=True, persistent_workers=True,
    prefetch_factor=2..4)` and `.to(device, non_blocking=True)`; move heavy decode/augmentation
    to the GPU (torchvision.io.decode_jpeg(device='cuda'), DALI) when the CPU cannot keep up.
    Counter-example (when it does not apply): data already in memory (tensors indexed in the
    loop) where workers would only add IPC; debugging runs with num_workers=0 on purpose; a
    GPU-bound step that keeps the GPU busy while the next batch loads (no idle inside the ranges).
    """

    id = "TL031"
    slug = "dataloader-main-process"
    title = "DataLoader in the main process while the GPU idles"
    severity = Severity.WARNING
    groups = frozenset({"framework", "host", "input"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL})
    needs = frozenset({"ranges"})
    frameworks = frozenset({"pytorch"})     # reads PyTorch op / DataLoader range names
    Options = Options

    def applicable(self, ctx) -> str | None:
        """A CPU-only trace shows the loading but has no GPU whose idle time could be measured."""
        if ctx.tl.has_gpu_activity:
            return None
        loads = _main_process_loads(ctx.tl.ranges)
        seen = (f"; it shows {len(loads)} batch(es) loaded on the training thread "
                f"({int((loads['end'] - loads['start']).sum()) / 1e6:.2f} ms)") if len(loads) else ""
        return ("no GPU activity in the trace: this rule measures GPU idle time while the main "
                f"process loads batches{seen}")

    def check(self, ctx):
        tl = ctx.tl
        loads = _main_process_loads(tl.ranges)
        if len(loads) == 0 or not tl.has_gpu_activity:
            return
        # idle inside the GPU's active window: a load before the first kernel is warm-up
        act = tl.gpu_activity
        lo, hi = int(act["start"].min()), int(act["end"].max())
        s = np.clip(loads["start"].to_numpy(), lo, hi)
        e = np.clip(loads["end"].to_numpy(), lo, hi)
        idle = np.full(len(loads), np.iinfo(np.int64).max, dtype=np.int64)
        for device in tl.devices_in_use():      # idle on every device in use, not on one
            bs, be = tl.busy_intervals(device)
            idle = np.minimum(idle, (e - s) - intervals.overlap_each(s, e, bs, be))
        idle_ns = int(idle.sum())
        span = max(tl.span_ns, 1)
        if idle_ns < self.options.min_idle_ns or idle_ns < self.options.min_idle_share * span:
            return
        host_ns = int((e - s).sum())
        worst = int(np.argmax(idle))
        row = loads.iloc[worst]
        where = ctx.where_for_host(int(row["pid"]), int(row["tid"]), int(row["start"]),
                                   start_ns=int(row["start"]), end_ns=int(row["end"]))
        system = Evidence.measured(
            f"{len(loads)} batches loaded by `{row['name']}` on the training thread take "
            f"{host_ns / 1e6:.2f} ms; the GPU is idle for {idle_ns / 1e6:.2f} ms of it "
            f"({idle_ns / span:.1%} of the span); the longest load idles it {idle[worst] / 1e6:.2f} ms.",
            batches=Measure(len(loads), "count"), load_time_ns=Measure(host_ns, "ns"),
            idle_ns=Measure(idle_ns, "ns"), idle_share=Measure(round(idle_ns / span, 4), "ratio"))
        kernel = Evidence.not_applicable(
            "the GPU is idle, not slow: no kernel runs while the batch loads")
        yield self.finding(
            ctx, message=(f"DataLoader with num_workers=0: the GPU idles {idle_ns / 1e6:.2f} ms "
                          f"({idle_ns / span:.1%} of the span) while the training thread loads "
                          f"{len(loads)} batches"),
            impact_ns=idle_ns, where=where, occurrences=len(loads),
            windows=[(int(loads["start"].iat[i]), int(loads["end"].iat[i]))
                     for i in np.argsort(-idle)[:5]],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel,
                      Layer.MICROARCH: Evidence.not_applicable("input pipeline on the host")},
            metrics={"idle_ns": Measure(idle_ns, "ns"), "idle_share": Measure(round(idle_ns / span, 4), "ratio"),
                     "batches": Measure(len(loads), "count")},
            key="main_process")


def _main_process_loads(r):
    """The `enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__` host ranges."""
    kind = np.asarray(classify.classify_categorical(r["name"], lambda n: classify.dataloader_iter(n) or ""),
                      dtype=object)
    host = np.isin(r["kind"].astype(str).to_numpy(), ("annotation", "nvtx", "op"))   # legacy: op
    return r[(kind == "main_process") & host]

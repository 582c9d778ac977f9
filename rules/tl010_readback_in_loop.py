"""TL010 readback-in-loop."""
from __future__ import annotations

from dataclasses import dataclass

import re

import numpy as np

from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.rule import Rule, option
from tracelint.timeline import classify
from tracelint.whatif.edits import RemoveSync


@dataclass(frozen=True)
class Options:
    min_share_of_iterations: float = option(0.5, "Report a call site that reads back in at least this share of iterations.")
    min_count: int = option(2, "Call sites with fewer read-backs than this are ignored.")


class ReadbackInLoop(Rule):
    """Device-to-host read-backs (`.item()`, `.cpu()`, `.tolist()`, `nonzero`) every iteration, seen in a trace without GPU activity.

    What it detects: framework ops that copy a tensor value back to the host (`aten::item`,
    `aten::_local_scalar_dense`, `aten::nonzero`, `aten::cpu`, ...) issued inside most iterations
    (ProfilerStep ranges), grouped by Python call site when the trace has stacks. It runs on
    traces with no GPU activity — a CPU run of a training script, or a CPU-only capture — where the
    read-back costs little but would block the host on a GPU. On GPU traces TL005 hidden-sync
    measures the real blocking and this rule stays silent.
    Why it hurts: on a GPU every read-back waits for all queued work to finish (a hidden
    synchronisation); the host cannot run ahead to launch the next kernels, so the GPU idles
    between iterations. Catching it in a CPU run finds the line before the GPU bill arrives.
    Evidence: system: read-backs per iteration, their call site (Python file:line from stacks);
    kernel and microarch: not captured — the trace has no GPU activity; capture the same script on
    a GPU to measure the blocked time (TL005).
    Fix: keep values on the device inside the loop (accumulate losses as tensors, log every N
    steps), use tensor ops instead of data-dependent Python control flow (`torch.where`, masks
    instead of `nonzero`), read back once after the loop.
    Counter-example (when it does not apply): tensors that live on the CPU in production as well
    (CPU inference); a read-back once per epoch or for periodic logging (below the iteration share);
    reads a framework op or the optimizer makes inside itself (a fused AdamW's scalars,
    single-tensor AdamW's `step.item()` on CPU step counts): they are not the program's.
    """

    id = "TL010"
    slug = "readback-in-loop"
    title = "Device-to-host read-back every iteration"
    severity = Severity.INFO
    groups = frozenset({"sync", "host"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    needs = frozenset({"ranges"})
    frameworks = frozenset({"pytorch"})     # aten:: read-back ops
    Options = Options

    def fix_edits(self, finding, ctx):
        """Fix: the read-back leaves the loop, so its op no longer blocks on the GPU."""
        op = finding.key.split("@", 1)[0]
        return [RemoveSync(within=f"^{re.escape(op)}(?![\\w:])")], ""

    def check(self, ctx):
        tl = ctx.tl
        if tl.has_gpu_activity:
            return
        r = tl.ranges
        steps = r[r["kind"] == "step"]
        if len(steps) == 0:
            return
        ops = r[(r["kind"] == "op").to_numpy() & classify.name_mask(r["name"], classify.is_host_readback_op)]
        if len(ops) == 0:
            return
        # Keep the program's own read-backs: outermost ones (aten::item encloses
        # aten::_local_scalar_dense), not those a framework op or the optimizer makes inside
        # itself (a fused AdamW reading its step counts, single-tensor AdamW's step.item()).
        parent_names = classify.labels_at(r["name"], np.clip(ops["parent"].to_numpy(), 0, None))
        internal = (ops["parent"].to_numpy() >= 0) & np.array(
            [n.startswith("aten::") or classify.optimizer_region(n) is not None for n in parent_names],
            dtype=bool)
        ops = ops[~internal]
        s_start, s_end = steps["start"].to_numpy(), steps["end"].to_numpy()
        order = np.argsort(s_start)
        s_start, s_end, s_num = s_start[order], s_end[order], steps["step"].to_numpy()[order]
        k = np.searchsorted(s_start, ops["start"].to_numpy(), side="right") - 1
        inside = (k >= 0) & (ops["start"].to_numpy() < s_end[np.clip(k, 0, None)])
        ops, k = ops[inside], k[inside]
        if len(ops) == 0:
            return
        sites: dict[tuple, list[int]] = {}
        for i, (pid, tid, t, name) in enumerate(zip(ops["pid"], ops["tid"], ops["start"], ops["name"])):
            frame = ctx.source_at(int(pid), int(tid), int(t))
            sites.setdefault((str(name), frame), []).append(i)
        n_steps = len(steps)
        for (name, frame), rows in sites.items():
            iters = np.unique(s_num[k[rows]])
            if len(rows) < self.options.min_count or len(iters) < self.options.min_share_of_iterations * n_steps:
                continue
            sel = ops.iloc[rows]
            host_ns = int((sel["end"] - sel["start"]).sum())
            first = sel.iloc[0]
            where = Where(pid=int(first["pid"]), tid=int(first["tid"]), start_ns=int(first["start"]),
                          end_ns=int(first["end"]), rank=tl.meta.rank,
                          iteration=int(s_num[k[rows[0]]]))
            if frame is not None:
                frame.apply(where)
            loc = f" {where.source_text()}" if frame else ""
            system = Evidence.measured(
                f"`{name}` reads a value back to the host {len(rows)} times in {len(iters)} of "
                f"{n_steps} iterations{loc}.",
                readbacks=Measure(len(rows), "count"), iterations=Measure(int(len(iters)), "count"),
                per_iteration=Measure(round(len(rows) / max(len(iters), 1), 2), "count"),
                host_time_ns=Measure(host_ns, "ns"))
            gpu_hint = ("torch.profiler with ProfilerActivity.CUDA on a GPU machine (tracelint capture "
                        "adds it when CUDA is available); TL005 then measures the blocked time")
            yield self.finding(
                ctx,
                message=f"`{name}` every iteration{loc}: {len(rows)} read-backs in {len(iters)} iterations "
                        "(each would block the host on a GPU)",
                impact_ns=host_ns, where=where, occurrences=len(rows),
                windows=[(int(a), int(b)) for a, b in zip(sel["start"].head(5), sel["end"].head(5))],
                evidence={Layer.SYSTEM: system,
                          Layer.KERNEL: Evidence.not_captured("No GPU activity in this trace.", gpu_hint),
                          Layer.MICROARCH: Evidence.not_captured("No GPU activity in this trace.", gpu_hint)},
                metrics={"readbacks": Measure(len(rows), "count")},
                key=f"{name}@{where.file}:{where.line}" if frame else name)

"""TL030 per-parameter-optimizer."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelint.engine.finding import Evidence, Layer, Measure, Severity
from tracelint.engine.rule import Rule, option
from tracelint.timeline import classify, host_scope, intervals

REGION_WORDS = {"step": ("The optimizer step", "foreach=True or fused=True"),
                "zero_grad": ("`zero_grad()`", "zero_grad(set_to_none=True)"),
                "clip": ("Gradient clipping", "clip_grad_norm_(..., foreach=True)")}


@dataclass(frozen=True)
class Options:
    min_ops: int = option(32, "Report when a region runs at least this many one-tensor ops (median over its instances).")


class PerParameterOptimizer(Rule):
    """The optimizer step, zero_grad or gradient clipping loops over parameters one tensor at a time.

    What it detects: the ranges PyTorch records around optimizer work (`Optimizer.step#AdamW.step`,
    `Optimizer.zero_grad#...`; for `clip_grad_norm_`, which records no range, its Python frame
    when the trace has stacks) that run many one-tensor ops (`aten::add_`,
    `mul_`, `addcdiv_`, `lerp_`, `sqrt`, `zero_`, `norm`, ...) and no multi-tensor ones
    (`aten::_foreach_*`, `aten::_fused_*`): an optimizer built with foreach=False, a custom
    per-parameter update loop, `zero_grad(set_to_none=False)` (one `aten::zero_` per parameter),
    or clipping that computes a norm per parameter. One finding per kind of region.
    Why it hurts: each op is a kernel launch of a few microseconds on a small tensor; a model with
    hundreds of parameters turns one optimizer step into thousands of launches, the host becomes
    the bottleneck and the GPU waits between tiny kernels (TL002 sees the storm; this rule names
    its cause in PyTorch terms).
    Evidence: system: instances of the region, one-tensor ops per instance, host time in the
    regions, kernel launches issued from them (on a GPU trace the launches must be as many as the
    ops: one kernel serving many tensors, as apex's FusedAdam does, is not a loop; on a CPU-only
    trace the ops are host work on CPU tensors, reported as such, with no launch claimed); kernel: GPU time of those kernels and their median
    duration, not captured without GPU activity; microarch: not applicable (the cost is launches,
    not kernel efficiency). The location is the Python line that issued the first one-tensor op.
    Fix: `torch.optim.AdamW(params, fused=True)` (or foreach=True, the default when all params
    are on CUDA: check nothing forces foreach=False); `optimizer.zero_grad(set_to_none=True)` (the
    default since PyTorch 2.0); `clip_grad_norm_(params, max_norm, foreach=True)`; for a custom
    update, torch._foreach_* ops or torch.compile of the step.
    Counter-example (when it does not apply): a model with a handful of large parameters (few
    launches, each long); optimizers without a multi-tensor implementation (some sparse or
    research optimizers) where the loop is the only way.
    """

    id = "TL030"
    slug = "per-parameter-optimizer"
    title = "Optimizer work one tensor at a time"
    severity = Severity.WARNING
    groups = frozenset({"framework", "host", "launch"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL})
    needs = frozenset({"ranges"})
    frameworks = frozenset({"pytorch"})     # reads aten:: op names
    Options = Options

    def check(self, ctx):
        tl = ctx.tl
        r = tl.ranges
        region_kind = classify.name_labels(r["name"], classify.optimizer_region)
        host_range = classify.in_labels(r["kind"], ("annotation", "nvtx", "op"))  # legacy: op
        region_kind = np.where(host_range, region_kind, "")
        r, region_kind = _with_clip_frames(r, region_kind, tl.python_frames)
        scope = classify.name_labels(r["name"], classify.op_tensor_scope)
        is_region = region_kind != ""
        if not is_region.any():
            return
        counts = intervals.starts_inside_per_thread(r, is_region, scope == "per_tensor", scope == "multi_tensor")
        self._per_tensor = r[scope == "per_tensor"]
        for kind in ("step", "zero_grad", "clip"):
            rows = np.flatnonzero(is_region & (region_kind == kind))
            if len(rows) == 0:
                continue
            per, multi = counts[0][rows], counts[1][rows]
            if multi.sum() > 0 or np.median(per) < self.options.min_ops:
                continue
            found = self._finding(ctx, kind, r.iloc[rows], per)
            if found is not None:
                yield found

    def _finding(self, ctx, kind, regions, per):
        what, fix = REGION_WORDS[kind]
        host_ns = int((regions["end"] - regions["start"]).sum())
        k_rows = host_scope.launched_inside(ctx.tl, "kernels", regions)   # on the regions' threads
        launches = len(k_rows)
        if ctx.tl.has_gpu_activity and launches < self.options.min_ops * len(regions):
            return None     # the ops run on the host or one kernel serves many (apex, amp_C)
        k = ctx.tl.kernels.iloc[k_rows]
        gpu_ns = int((k["end"] - k["start"]).sum()) if len(k) else 0
        name = str(regions["name"].iat[0])
        first = regions.iloc[0]
        # Where: at the region's first one-tensor op, whose Python stack names the call.
        t0 = host_scope.first_start_inside(self._per_tensor, first)
        where = ctx.where_for_host(int(first["pid"]), int(first["tid"]), t0,
                                   start_ns=int(first["start"]), end_ns=int(first["end"]))
        med = int(np.median(per))
        on = (f"{launches} kernel launches" if ctx.tl.has_gpu_activity else
              "no GPU activity in the trace: the ops ran on CPU tensors, as host work")
        system = Evidence.measured(
            f"{len(regions)} `{name}` region(s) run {med} one-tensor ops each (median) and no "
            f"_foreach_/_fused_ op; {host_ns / 1e6:.3f} ms of host time, {on}.",
            regions=Measure(len(regions), "count"), ops_per_region=Measure(med, "count"),
            host_time_ns=Measure(host_ns, "ns"), launches=Measure(launches, "count"))
        if len(k):
            kernel = Evidence.measured(
                f"The {len(k)} kernels launched from these regions take {gpu_ns / 1e6:.3f} ms of GPU "
                f"time, median {float(np.median(k['end'] - k['start'])) / 1e3:.1f} µs each.",
                kernels=Measure(len(k), "count"), gpu_time_ns=Measure(gpu_ns, "ns"))
        else:
            kernel = Evidence.not_captured(
                "No kernels linked to these regions (no GPU activity, or launches not linked).",
                "torch.profiler with ProfilerActivity.CUDA on the GPU run")
        cost = f"{launches} kernel launches, " if launches else ""
        return self.finding(
            ctx, message=(f"{what} runs one tensor at a time: {med} one-tensor ops per "
                          f"`{name}` × {len(regions)}, no multi-tensor op ({cost}"
                          f"{host_ns / 1e6:.2f} ms of host time); use {fix}"),
            impact_ns=max(host_ns, gpu_ns), where=where, occurrences=len(regions),
            windows=[(int(a), int(b)) for a, b in zip(regions["start"].head(5), regions["end"].head(5))],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel,
                      Layer.MICROARCH: Evidence.not_applicable("the cost is launches, not kernel efficiency")},
            metrics={"ops_per_region": Measure(med, "count"), "launches": Measure(launches, "count")},
            key=kind)


def _with_clip_frames(r, region_kind, frames):
    """Gradient clipping records no range: with Python stacks, its frame
    (`torch/nn/utils/clip_grad.py: clip_grad_norm_`) is the region. Ranges first, when present."""
    if (region_kind == "clip").any() or len(frames) == 0:
        return r, region_kind
    fn = frames["function"].astype(str)
    clip = frames[fn.str.fullmatch(r"clip_grad_(norm|value)_") & frames["file"].astype(str).str.contains("torch/")]
    if len(clip) == 0:
        return r, region_kind
    extra = pd.DataFrame({"pid": clip["pid"].to_numpy(), "tid": clip["tid"].to_numpy(),
                          "start": clip["start"].to_numpy(), "end": clip["end"].to_numpy(),
                          "name": clip["function"].astype(str).to_numpy(), "kind": "python"})
    both = pd.concat([r[["pid", "tid", "start", "end", "name", "kind"]].astype({"name": str, "kind": str}),
                      extra], ignore_index=True)
    return both, np.concatenate([region_kind, np.full(len(extra), "clip", dtype=object)])


"""TL036 cudnn-autotune-in-steps."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelint.engine.finding import Evidence, Layer, Measure, Severity
from tracelint.engine.rule import Rule, option
from tracelint.timeline import classify, host_scope
from tracelint.whatif.edits import Ops, Scale


@dataclass(frozen=True)
class Options:
    min_kernels: int = option(6, "A convolution call is an autotuning call when it launches at least this many kernels ...")
    min_distinct: int = option(3, "... of at least this many distinct kernels ...")
    min_syncs: int = option(2, "... and blocks the host on the GPU at least this many times.")
    min_iterations: int = option(2, "Report when autotuning calls run in at least this many iterations after the first profiled one.")


class CudnnAutotuneInSteps(Rule):
    """cuDNN autotuning (torch.backends.cudnn.benchmark=True) runs again inside the training steps.

    What it detects: convolution calls (`aten::conv2d` ... and `aten::convolution_backward`, as
    torch.profiler ops or emit_nvtx ranges) that benchmark candidate algorithms instead of
    running one: with cudnn.benchmark=True, the first call for each new input shape times every
    candidate plan (cudnn_frontend's time_sorted_plan: each plan run, then
    cudaDeviceSynchronize / cudaEventRecord / cudaEventSynchronize around it). In the trace such
    a call launches many kernels of many different names and blocks the host on the GPU several
    times; a normal convolution call launches a few kernels and never blocks. The rule reports
    when those calls recur in iterations after the first profiled one, which means the input
    shapes keep changing (variable image sizes, sequence lengths, a last partial batch). Traces
    without iteration marks (ProfilerStep / NVTX steps) are not judged: first-call warm-up
    cannot be told from re-tuning there.
    What it does not detect: cudnn.benchmark=False. A convolution that was never tuned looks
    exactly like one tuned before the capture began, so no trace can show the flag is off.
    Why it hurts: each new shape costs the time of running every candidate algorithm (up to
    torch.backends.cudnn.benchmark_limit of them) plus host-device synchronisations that drain
    the launch queue, for every convolution layer, forward and backward; with shapes that
    change every step the tuning never pays back.
    Evidence: system: autotuning calls, the iterations they fall in, their host time and the
    blocking calls inside them; kernel: the kernels they launch (count, distinct names, GPU
    time); microarch: not applicable.
    Fix: make shapes repeat (pad or bucket inputs to a few sizes, drop_last=True) so each is
    tuned once; or set torch.backends.cudnn.benchmark=False when shapes never repeat; cap the
    search with torch.backends.cudnn.benchmark_limit. The projected saving removes the
    candidate kernels (all but the last kernel of each call) and their launches: a lower bound,
    the host time cuDNN spends building the plans is not removed.
    Counter-example (when it does not apply): a fixed-shape model whose tuning happens once, in
    the first profiled iteration (profile after warm-up instead); a few distinct shapes that
    will be reused for the rest of training (tuning amortises).
    """

    id = "TL036"
    slug = "cudnn-autotune-in-steps"
    title = "cuDNN autotuning inside the steps (benchmark=True with changing shapes)"
    severity = Severity.WARNING
    groups = frozenset({"framework", "host", "sync"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL})
    needs = frozenset({"kernels"})
    frameworks = frozenset({"pytorch"})     # reads aten:: convolution op names
    Options = Options

    def fix_edits(self, finding, ctx):
        a = self.once_per_context(ctx, self._analyse)
        rows = tuple(a["candidate_kernels"]) if a else ()
        if not rows:
            return None, "no candidate kernels to remove"
        return [Scale(None, 0.0, ops=Ops(kernel_rows=rows), with_launch=True)], ""

    def check(self, ctx):
        a = self.once_per_context(ctx, self._analyse)
        if not a or len(a["later_iterations"]) < self.options.min_iterations:
            return
        r = ctx.tl.ranges
        calls, kernels = a["calls"], a["kernels"]
        k = ctx.tl.kernels.iloc[kernels]
        host_ns = int(sum(int(r["end"].iat[c] - r["start"].iat[c]) for c in calls))
        gpu_ns = int((k["end"] - k["start"]).sum())
        names = int(k["name"].nunique())
        later = a["later_iterations"]
        where = ctx.where_for_range(r.iloc[int(calls[0])])
        system = Evidence.measured(
            f"{len(calls)} convolution call(s) benchmark candidate algorithms, in "
            f"{len(a['iterations'])} iteration(s) ({len(later)} after the first profiled one); "
            f"they take {host_ns / 1e6:.2f} ms of host time and block the host on the GPU "
            f"{a['syncs']} times.",
            calls=Measure(len(calls), "count"), iterations=Measure(len(a["iterations"]), "count"),
            later_iterations=Measure(len(later), "count"), host_time_ns=Measure(host_ns, "ns"),
            blocking_calls=Measure(a["syncs"], "count"))
        kernel = Evidence.measured(
            f"They launch {len(k)} kernels of {names} distinct names ({gpu_ns / 1e6:.2f} ms of GPU "
            f"time); a normal convolution call launches a few kernels and never blocks.",
            kernels=Measure(len(k), "count"), distinct_kernels=Measure(names, "count"),
            gpu_time_ns=Measure(gpu_ns, "ns"))
        yield self.finding(
            ctx, message=(f"cuDNN autotuning runs inside {len(later)} iteration(s) after the first: "
                          f"{len(calls)} convolution calls time {len(k)} candidate kernels "
                          f"({host_ns / 1e6:.2f} ms of host time): input shapes keep changing under "
                          f"cudnn.benchmark=True"),
            impact_ns=host_ns, where=where, occurrences=len(calls),
            windows=[(int(r["start"].iat[c]), int(r["end"].iat[c])) for c in calls[:5]],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel,
                      Layer.MICROARCH: Evidence.not_applicable("algorithm search, not kernel efficiency")},
            metrics={"calls": Measure(len(calls), "count"), "later_iterations": Measure(len(later), "count"),
                     "host_time_ns": Measure(host_ns, "ns")},
            key="cudnn_autotune")

    def _analyse(self, ctx):
        tl, opt = ctx.tl, self.options
        r, api = tl.ranges, tl.api_calls
        if len(r) == 0 or len(api) == 0:
            return None
        is_op = np.isin(r["kind"].astype(str).to_numpy(), ("op", "nvtx"))
        conv = is_op & classify.name_mask(r["name"], lambda n: classify.model_op(n) in ("conv", "conv_backward"))
        parent = r["parent"].to_numpy()
        outer = np.flatnonzero(conv & ~((parent >= 0) & conv[np.clip(parent, 0, None)]))
        if len(outer) == 0:
            return None
        blocking = classify.name_mask(api["name"], lambda n: classify.api_role(n) == "sync" and classify.blocks_host(n))
        launch = ctx.launch_index("kernels")
        k_names = tl.kernels["name"].to_numpy()
        a_t = api["start"].to_numpy()
        r_start, r_end = r["start"].to_numpy(), r["end"].to_numpy()
        inside_each = host_scope.calls_in_each(api, r["pid"].to_numpy()[outer],
                                               r["tid"].to_numpy()[outer], r_start[outer],
                                               r_end[outer])
        launches = host_scope.Launches(launch)
        calls, kernels, candidates, syncs, its = [], [], [], 0, set()
        for c, inside in zip(outer, inside_each):
            s = int(r_start[c])
            n_sync = int(blocking[inside].sum())
            if n_sync < opt.min_syncs:
                continue
            ks = launches.by(inside)
            if len(ks) < opt.min_kernels or len(set(k_names[ks])) < opt.min_distinct:
                continue
            calls.append(int(c))
            kernels += ks.tolist()
            order = ks[np.argsort(a_t[launch[ks]], kind="stable")]
            candidates += order[:-1].tolist()      # the last launch runs the chosen algorithm
            syncs += n_sync
            it = ctx.iteration_at(s)
            if it is not None:
                its.add(it)
        if not calls:
            return None
        first_it = ctx.first_iteration
        later = sorted(i for i in its if first_it is not None and i != first_it)
        return {"calls": calls, "kernels": np.array(kernels, dtype=np.int64),
                "candidate_kernels": candidates, "syncs": syncs, "iterations": sorted(its),
                "later_iterations": later}

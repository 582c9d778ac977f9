"""TL035 data-parallel."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelint.engine.finding import Evidence, Layer, Measure, Severity
from tracelint.engine.rule import Rule, option
from tracelint.timeline import classify, host_scope

PARTS = ("replicate", "scatter", "gather", "reduce")
NO_SAVING = ("DistributedDataParallel removes the per-step replicate / scatter / gather measured "
             "here and the replica threads' contention for the GIL, but adds a bucketed gradient "
             "all-reduce (overlapped with backward) that this trace cannot show: no saving can "
             "be projected from it")


@dataclass(frozen=True)
class Options:
    min_iterations: int = option(2, "Report when DataParallel replicates or gathers in at least this many iterations (or calls, without iteration marks).")


class DataParallel(Rule):
    """torch.nn.DataParallel splits each batch across GPUs from one process, every step.

    What it detects: the autograd Functions of torch.nn.DataParallel, which PyTorch records by
    class name: `Broadcast` (replicate the module's parameters to every GPU), `Scatter` (split
    the batch), `Gather` (collect the outputs on one GPU) and, in backward, `BroadcastBackward` /
    `ReduceAddCoalesced` (sum the replicas' gradients on one GPU); Kineto records them as ops,
    nsys as emit_nvtx ranges. It reports when replication or gathering (they only happen with
    two or more GPUs) recurs in at least two iterations and either two or more GPUs are busy or
    the Python stacks run through torch/nn/parallel/data_parallel.py. A single-GPU DataParallel
    (a Scatter and nothing else) and DistributedDataParallel are not reported.
    Why it hurts: one Python process drives every GPU: the model is copied from GPU 0 to every
    other GPU each forward, inputs are scattered and outputs gathered through GPU 0, gradients
    are summed there, and the replicas run in Python threads that contend for the GIL. GPU 0
    carries extra memory and work, and the overhead grows with the number of GPUs; PyTorch's
    documentation recommends DistributedDataParallel instead, even on one machine.
    Evidence: system: iterations with DataParallel work, host time in the DataParallel
    Functions per iteration, GPUs busy, the Python line of the wrapped model's call; kernel:
    the copies those Functions issue (count, bytes, GPU time); microarch: not applicable.
    Fix: one process per GPU with `torch.nn.parallel.DistributedDataParallel(model,
    device_ids=[rank])` launched by `torchrun --nproc_per_node=N`, a `DistributedSampler` for
    the data, and the batch size per process. No saving is projected: DDP's all-reduce is not
    in this trace.
    Counter-example (when it does not apply): a quick single-node experiment where the
    DataParallel overhead is small next to long GPU steps; DataParallel over one GPU (nothing is
    replicated); inference code paths that cannot run several processes.
    """

    id = "TL035"
    slug = "data-parallel"
    title = "torch.nn.DataParallel instead of DistributedDataParallel"
    severity = Severity.WARNING
    groups = frozenset({"framework", "model", "communication"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL})
    needs = frozenset({"ranges"})
    frameworks = frozenset({"pytorch"})     # reads torch.nn.parallel Function names
    Options = Options

    def fix_edits(self, finding, ctx):
        return None, NO_SAVING

    def check(self, ctx):
        tl = ctx.tl
        r = tl.ranges
        is_op = classify.in_labels(r["kind"], ("op", "nvtx"))
        part = classify.name_labels(r["name"], classify.data_parallel_op)
        dp = is_op & (part != "")
        if not dp.any():
            return
        outer = host_scope.outermost(r["parent"].to_numpy(), dp)
        multi = outer[np.isin(part[outer], ("replicate", "gather", "reduce"))]
        if len(multi) == 0:
            return
        devices = tl.devices_in_use()
        frames = tl.python_frames
        dp_frames = 0
        if len(frames):
            files = np.asarray(classify.classify_categorical(frames["file"], lambda f: "y" if classify.is_data_parallel_file(f) else ""),
                               dtype=object)
            dp_frames = int((files == "y").sum())
        if len(devices) < 2 and not dp_frames:
            return
        starts = r["start"].to_numpy()
        its = [ctx.iteration_at(int(starts[row])) for row in multi]
        marked = [i for i in its if i is not None]
        n_iter = len(set(marked)) if marked else len(multi)
        if n_iter < self.options.min_iterations:
            return
        yield self._finding(ctx, r, outer, part, multi, devices, dp_frames, n_iter, bool(marked))

    def _finding(self, ctx, r, outer, part, multi, devices, dp_frames, n_iter, marked):
        dur = (r["end"] - r["start"]).to_numpy()
        host_ns = int(dur[outer].sum())
        by_part = {p: int(dur[outer[part[outer] == p]].sum()) for p in PARTS}
        where = ctx.where_for_range(r.iloc[int(multi[0])])
        unit = "iteration" if marked else "call"
        per = host_ns / max(n_iter, 1)
        parts_txt = ", ".join(f"{p} {by_part[p] / 1e6:.2f} ms" for p in PARTS if by_part[p])
        stack_txt = (f"; {dp_frames} Python frames in torch/nn/parallel" if dp_frames else "")
        system = Evidence.measured(
            f"DataParallel replicates or gathers in {n_iter} {unit}(s) on {len(devices)} GPU(s); "
            f"{len(outer)} DataParallel Function calls take {host_ns / 1e6:.2f} ms of host time "
            f"({parts_txt}), {per / 1e6:.2f} ms per {unit}{stack_txt}.",
            iterations=Measure(n_iter, "count"), gpus=Measure(len(devices), "count"),
            host_time_ns=Measure(host_ns, "ns"), per_iteration_ns=Measure(int(per), "ns"),
            **{f"{p}_ns": Measure(by_part[p], "ns") for p in PARTS if by_part[p]})
        kernel = _copy_evidence(ctx, r, outer)
        return self.finding(
            ctx, message=(f"torch.nn.DataParallel over {len(devices)} GPU(s): replicate / scatter / "
                          f"gather take {host_ns / 1e6:.2f} ms of host time in {n_iter} {unit}(s) "
                          f"({per / 1e6:.2f} ms each); use DistributedDataParallel"),
            impact_ns=host_ns, where=where, occurrences=n_iter,
            windows=[(int(r["start"].iat[i]), int(r["end"].iat[i])) for i in multi[:5]],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel,
                      Layer.MICROARCH: Evidence.not_applicable("process structure, not kernel efficiency")},
            metrics={"host_time_ns": Measure(host_ns, "ns"), "per_iteration_ns": Measure(int(per), "ns"),
                     "gpus": Measure(len(devices), "count")},
            key="data_parallel", saving_note=NO_SAVING)


def _copy_evidence(ctx, r, outer) -> Evidence:
    """Copies launched from inside the DataParallel Functions (same thread, inside the op)."""
    tl = ctx.tl
    c, api = tl.copies, tl.api_calls
    if len(c) == 0 or len(api) == 0:
        return Evidence.not_captured(
            "No copies linked to the DataParallel Functions (no GPU activity captured, or none linked).",
            "torch.profiler with ProfilerActivity.CUDA, or nsys profile -t cuda,nvtx with emit_nvtx")
    rows = host_scope.launched_inside(tl, "copies", r.iloc[outer])
    if len(rows) == 0:
        return Evidence.not_captured(
            "No copies linked to the DataParallel Functions in this trace.",
            "torch.profiler with ProfilerActivity.CUDA, or nsys profile -t cuda,nvtx with emit_nvtx")
    cc = c.iloc[rows]
    gpu_ns = int((cc["end"] - cc["start"]).sum())
    nbytes = int(cc["bytes"].sum())
    return Evidence.measured(
        f"The DataParallel Functions issue {len(rows)} copies: {nbytes / 1e6:.1f} MB, "
        f"{gpu_ns / 1e6:.2f} ms of GPU time (parameters to every GPU, batch shards, outputs "
        f"and gradients through one GPU).",
        copies=Measure(len(rows), "count"), bytes=Measure(nbytes, "bytes"), gpu_time_ns=Measure(gpu_ns, "ns"))

"""TL033 cpu-tensor-moved-each-step."""
from __future__ import annotations

from dataclasses import dataclass

from tracelint.engine.finding import Evidence, Layer, Measure, Severity
from tracelint.engine.rule import Rule, option
from tracelint.whatif.edits import NonBlocking, Ops, Scale


@dataclass(frozen=True)
class Options:
    min_share_of_iterations: float = option(0.5, "Report a call site that moves a fresh CPU tensor in at least this share of iterations.")
    min_count: int = option(2, "Call sites with fewer such copies than this are ignored.")


class CpuTensorMovedEachStep(Rule):
    """A tensor built on the CPU by a factory op is copied to the device every iteration.

    What it detects: host-to-device copies made by a framework op that moves a tensor
    (`aten::to` / `aten::_to_copy` / `aten::copy_`) right after a factory op (`aten::zeros`,
    `ones`, `full`, `arange`, `linspace`, `eye`, `rand*`, `scalar_tensor`, ...: ops that compute
    the values from their arguments alone) that ended at most 100 µs earlier on the same thread,
    at the same nesting level, without launching any GPU work: the tensor was created on the CPU
    and moved at once — PyTorch's former profiler matcher called it "Extra CUDA Copy".
    `torch.tensor(data)` and `torch.empty` record `aten::empty` (values from Python, or none):
    the trace cannot tell a constant from fresh host data there, so those are not counted. Grouped by call site (the Python line of the
    `.to()` when the trace has stacks, else the factory and move op names); one finding per site
    that does it in at least `min_share_of_iterations` of the iterations (ProfilerStep / NVTX
    step ranges) and `min_count` times. Formats: Kineto traces (torch.profiler), and nsys traces
    only when the framework ops were recorded as NVTX ranges (`torch.autograd.profiler.emit_nvtx`):
    a plain nsys capture has the copies but not the ops that name them, so the rule stays silent
    there. A CPU-only trace has no copy to see: `.to('cpu')` is a no-op and the trace does not
    record the target device, so the rule needs the GPU trace.
    Why it hurts: each step pays a CPU fill, a host-to-device copy on the compute stream and,
    with the default non_blocking=False, a stream synchronisation that drains the GPU's queue —
    for a value the device could build itself with one small kernel, or keep from the last step.
    Evidence: system: copies, iterations affected, host time in the moving ops (copy calls and
    the syncs after them included) and in the factory ops, host time blocked waiting for the
    copies; kernel: bytes and GPU copy time; microarch: not applicable.
    Fix: create it on the device: `torch.zeros(shape, device=x.device)`, `torch.arange(n,
    device=device)`, `torch.full(..., device=...)`, `x.new_zeros(...)`; or, for a constant, build
    it once before the loop (or register it as a buffer, `self.register_buffer(...)`) and reuse it.
    The projected saving replays the copy removed, its call costing one kernel launch (the
    device-side fill that replaces it) and its sync removed; the fill kernel's few microseconds
    of GPU time are not added, and the factory op's CPU time is left in place.
    Counter-example (when it does not apply): data that genuinely comes from the host (a batch,
    values computed in Python every step); a one-off move outside the loop; factory ops that ran
    on the device (they launch a kernel and are not counted).
    """

    id = "TL033"
    slug = "cpu-tensor-moved-each-step"
    title = "Tensor created on the CPU and moved to the device every iteration"
    severity = Severity.WARNING
    groups = frozenset({"framework", "copy", "host"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL})
    needs = frozenset({"copies"})
    frameworks = frozenset({"pytorch"})     # reads aten:: factory and move op names
    Options = Options

    def fix_edits(self, finding, ctx):
        """Fix: the tensor is made on the device: the copy and its sync disappear."""
        u = self.once_per_context(ctx, self._candidates)
        g = u[u["key"] == finding.key] if len(u) else u
        if len(g) == 0:
            return None, "the copies of this finding were not found again"
        syncs = tuple(int(s) for s in g["sync"] if s >= 0)
        edits = [Scale(None, 0.0, ops=Ops(copy_rows=tuple(int(c) for c in g["copy"]))),
                 NonBlocking(api_rows=tuple(int(a) for a in g["api"]), cost_ns=ctx.launch_cost_ns)]
        if syncs:
            edits.append(NonBlocking(api_rows=syncs, cost_ns=0))
        return edits, ""

    def check(self, ctx):
        u = self.once_per_context(ctx, self._candidates)
        if len(u) == 0:
            return
        n_steps = len(ctx.steps)
        for key, g in u.groupby("key", sort=True):
            steps = g.loc[g["step"] >= 0, "step"].nunique()
            if len(g) < self.options.min_count:
                continue
            if n_steps and steps < self.options.min_share_of_iterations * n_steps:
                continue
            yield self._finding(ctx, key, g, steps, n_steps)

    def _candidates(self, ctx):
        """The candidate copies, computed once per context (check, then fix_edits per finding)."""
        tl = ctx.tl
        u = ctx.uploads
        if len(u) == 0:
            return u
        u = u[(u["factory"] >= 0) & (u["mover"] >= 0) & u["in_step"].to_numpy()]
        names = tl.ranges["name"].astype(str).to_numpy()
        starts = tl.ranges["start"].to_numpy()
        keys = [ctx.site_key(int(pid), int(tid), int(starts[int(m)]), f"{_op(names[f])} -> {_op(names[m])}")
                for pid, tid, m, f in zip(u["pid"], u["tid"], u["mover"], u["factory"])]
        return u.assign(key=keys)

    def _finding(self, ctx, key, g, steps, n_steps):
        r = ctx.tl.ranges
        rs, re_ = r["start"].to_numpy(), r["end"].to_numpy()
        names = r["name"].astype(str).to_numpy()
        m, f = g["mover"].to_numpy(), g["factory"].to_numpy()
        move_ns = int((re_[m] - rs[m]).sum())
        fact_ns = int((re_[f] - rs[f]).sum())
        blocked = int(g["blocked_ns"].sum())
        synced = int((g["sync"] >= 0).sum())
        factories = sorted({_op(names[i]) for i in f})
        movers = sorted({_op(names[i]) for i in m})
        row = g.iloc[0]
        where = ctx.where_for_range(r.iloc[int(row["mover"])])     # the first move, on its thread
        where.device, where.stream = int(row["device"]), int(row["stream"])
        it_txt = f" in {steps} of {n_steps} iterations" if n_steps else ""
        system = Evidence.measured(
            f"{len(g)} tensors made by {', '.join(factories)} on the CPU and moved by "
            f"{', '.join(movers)} right after{it_txt}: {move_ns / 1e6:.3f} ms of host time in the "
            f"moves ({blocked / 1e6:.3f} ms of it waiting for the copies; {synced} followed by a "
            f"stream sync), {fact_ns / 1e6:.3f} ms in the CPU factory ops.",
            copies=Measure(len(g), "count"), iterations=Measure(int(steps), "count"),
            move_host_ns=Measure(move_ns, "ns"), factory_host_ns=Measure(fact_ns, "ns"),
            blocked_ns=Measure(blocked, "ns"), synced_copies=Measure(synced, "count"))
        kernel = self._copy_evidence(g, int(row["device"]), ctx.capture_hint("copy_sizes"))
        site = key if ":" in key and " -> " not in key else f"`{key}`"
        return self.finding(
            ctx, message=(f"{site}: a tensor made by {', '.join(factories)} on the CPU is copied to the "
                          f"device {len(g)} times{it_txt} ({move_ns / 1e6:.2f} ms of host time in the moves); "
                          f"create it on the device or once outside the loop"),
            impact_ns=move_ns, where=where, occurrences=len(g),
            windows=[(int(rs[i]), int(re_[i])) for i in m[:5]],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel,
                      Layer.MICROARCH: Evidence.not_applicable("the cost is the copy and the host wait, not a kernel")},
            metrics={"copies": Measure(len(g), "count"), "move_host_ns": Measure(move_ns, "ns"),
                     "blocked_ns": Measure(blocked, "ns")},
            key=key)

    @staticmethod
    def _copy_evidence(g, device: int, hint: str) -> Evidence:
        """The copies' bytes and time; bytes only over the copies whose size the trace records
        (-1: not recorded), and not captured when none does: never "0 bytes"."""
        nbytes = g["bytes"].to_numpy()
        dur = (g["end"] - g["start"]).to_numpy()
        known = nbytes >= 0
        if not known.any():
            return Evidence.not_captured(
                f"The trace does not record the size of these {len(g)} copies ("
                f"{dur.sum() / 1e3:.1f} µs of copy time on GPU {device}).", hint)
        of = "" if known.all() else f" (by the {int(known.sum())} of {len(g)} copies that record it)"
        return Evidence.measured(
            f"{int(nbytes[known].sum())} bytes copied to GPU {device}{of} in "
            f"{dur.sum() / 1e3:.1f} µs of copy time.",
            bytes=Measure(int(nbytes[known].sum()), "bytes"), copy_ns=Measure(int(dur.sum()), "ns"))


def _op(name: str) -> str:
    """An op name without emit_nvtx's `, seq = N` suffix."""
    return name.split(",", 1)[0]

"""TL040 memory-peak-near-capacity."""
from __future__ import annotations

from dataclasses import dataclass

from tracelint.engine.finding import Evidence, Layer, Measure, Severity
from tracelint.engine.rule import Rule, option
from tracelint.timeline.memory import device_memory

GIB = 1 << 30


@dataclass(frozen=True)
class Options:
    min_share: float = option(0.9, "Report when the device's peak memory reaches this share of its memory size.")


class MemoryPeakNearCapacity(Rule):
    """The device's memory peak comes close to its capacity: one larger batch or sequence away from an out-of-memory error.

    What it detects: from the memory timeline (torch.profiler `profile_memory=True`, or nsys
    `--cuda-memory-usage=true`), the peak of the memory a device's allocator holds — reserved
    (the caching allocator's segments, or the driver-level total nsys records) where the trace
    has it, else allocated — compared with the device's memory size from the trace's own
    device properties (Kineto `deviceProperties.totalGlobalMem`, nsys `TARGET_INFO_GPU.totalMemory`).
    Reports when the peak reaches `min_share` of it, naming the iteration and the op at the
    peak. Without a memory size in the trace it says nothing (the share cannot be known).
    Why it hurts: the peak is where an out-of-memory error happens: a longer sequence, a larger
    batch, another process or fragmentation of the cache tips it over. Near the limit the caching
    allocator also frees its cache and retries (cudaFree, device synchronisation) before it
    fails, so iterations slow down before they crash.
    Evidence: system: peak reserved and allocated, their share of the device memory, the
    iteration and op at the peak, fragmentation (reserved - allocated) at the peak; kernel: not
    applicable (a capacity risk, not GPU time); microarch: not applicable.
    Fix: lower the peak where it happens: activation checkpointing (`torch.utils.checkpoint`)
    for the layers alive at the peak, a smaller micro-batch with gradient accumulation, bf16 /
    fp16 activations (autocast), freeing references the loop keeps (losses kept as tensors,
    outputs stored for logging), `optimizer.zero_grad(set_to_none=True)`, sharded optimizer
    states (ZeRO / FSDP); against fragmentation, `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`.
    Counter-example (when it does not apply): a job sized on purpose to fill the device with a
    fixed shape (the peak is the same every step and was tested); a reserve made on purpose
    (`torch.cuda.set_per_process_memory_fraction`, vLLM's KV-cache pre-allocation): the
    reserved peak is then a setting, not a risk.
    """

    id = "TL040"
    slug = "memory-peak-near-capacity"
    title = "Memory peak near the device's capacity"
    severity = Severity.WARNING
    groups = frozenset({"memory", "reliability"})
    layers = frozenset({Layer.SYSTEM})
    needs = frozenset({"memory"})
    uses_kernel_times = False
    Options = Options

    def check(self, ctx):
        for dm in device_memory(ctx.tl):
            if dm.device < 0 or not dm.capacity or not dm.peak:
                continue          # host memory, or no memory size in the trace: not known
            share = dm.peak / dm.capacity
            if share < self.options.min_share:
                continue
            yield self._finding(ctx, dm, share)

    def _finding(self, ctx, dm, share):
        reserved = bool(dm.peak_reserved)
        at = dm.at_peak_reserved if reserved else dm.at_peak_allocated
        where = ctx.where_for_host(at["pid"], at["tid"], at["ts"]) if at["pid"] >= 0 else None
        if where is None:
            from tracelint.engine.finding import Where
            where = Where(rank=ctx.tl.meta.rank, iteration=at["iteration"])
        where.device = dm.device
        where.start_ns = where.end_ns = at["ts"]
        it = f"iteration {at['iteration']}" if at["iteration"] is not None else "outside the iterations"
        op = f"`{at['op']}`" if at["op"] else "an unrecorded op"
        what = "reserved" if reserved else "allocated"
        frag = (f"; {dm.fragmentation_at_peak / GIB:.2f} GiB of it reserved but not allocated "
                "(fragmentation)" if dm.fragmentation_at_peak is not None else "")
        facts = {"peak_bytes": Measure(dm.peak, "bytes"), "capacity_bytes": Measure(dm.capacity, "bytes"),
                 "peak_share": Measure(round(share, 4), "ratio")}
        if dm.peak_allocated is not None:
            facts["peak_allocated_bytes"] = Measure(dm.peak_allocated, "bytes")
        if dm.fragmentation_at_peak is not None:
            facts["fragmentation_at_peak_bytes"] = Measure(dm.fragmentation_at_peak, "bytes")
        src = "driver-level memory events (nsys)" if dm.source == "driver" else "the allocator's own totals"
        system = Evidence.measured(
            f"{dm.label} peaks at {dm.peak / GIB:.2f} GiB {what} ({share:.1%} of its "
            f"{dm.capacity / GIB:.2f} GiB) in {it}, at {op}{frag}; from {src}.", **facts)
        na = Evidence.not_applicable("an out-of-memory risk, not GPU time")
        loc = f" {where.source_text()}" if where.file else ""
        return self.finding(
            ctx, message=(f"{dm.label} memory peaks at {share:.1%} of capacity "
                          f"({dm.peak / GIB:.2f} of {dm.capacity / GIB:.2f} GiB {what}) in {it} "
                          f"at {op}{loc}: close to out of memory"),
            impact_ns=0, where=where, occurrences=1, windows=[(at["ts"], at["ts"])],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: na, Layer.MICROARCH: na},
            metrics=facts, key=f"{dm.device_type}|{dm.device}")

    def fix_edits(self, finding, ctx):
        return None, "none can be established: the risk is running out of memory, not lost time"

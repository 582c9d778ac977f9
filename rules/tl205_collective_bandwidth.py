"""TL205 collective-bandwidth."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.job_context import JobContext, link_peak_for
from tracelint.engine.rule import Rule, option


@dataclass(frozen=True)
class Options:
    link_peak_gbps: float = option(0.0, "Peak bandwidth of one GPU's link, GB/s per direction (0: unknown; see intra_node).")
    intra_node: bool = option(False, "The collectives stay inside one node: take the peak from the GPU name's NVLink / Infinity Fabric figure.")
    min_efficiency: float = option(0.4, "Report a collective whose median bus bandwidth is below this share of the link peak.")
    min_bytes: int = option(1 << 20, "Only judge calls moving at least this many bytes (smaller ones are latency-bound).")
    min_calls: int = option(2, "Calls of a collective with a known size needed before judging.")


class CollectiveBandwidth(Rule):
    """Collectives move data far below the link's bandwidth.

    What it detects: for collective calls whose size the trace records (Kineto: the NCCL
    kernel's or `record_param_comms`' "In/Out msg nelems" and "dtype"), the algorithm bandwidth
    algbw = S / t and the bus bandwidth busbw = algbw x factor, NCCL's convention
    (nccl-tests PERFORMANCE.md): AllReduce 2(n-1)/n; ReduceScatter, AllGather and AllToAll
    (n-1)/n; Broadcast, Reduce and point-to-point 1; S is the larger of the input and output
    buffers, n the process group size, and t the time from the last rank's arrival to the end
    (the transfer alone; a call seen on one rank only is timed by its kernel, waiting included,
    which under-states its bandwidth). A collective is reported when the median busbw of its
    calls of at least `min_bytes` is below `min_efficiency` of the link peak. The peak is not in
    any trace: give it (`link_peak_gbps`) or declare the collectives intra-node (`intra_node`) to
    use the GPU's NVLink figure; without either the rule only tabulates the bandwidths.
    Why it hurts: busbw is comparable to the hardware peak whatever the rank count; well-tuned
    NCCL reaches 70-90 % of NVLink or NIC bandwidth on large messages. Far less means the job
    pays for communication it should not: a wrong protocol or algorithm, traffic over PCIe or
    the host instead of NVLink, an unbalanced or misconfigured network, or messages too small.
    Evidence: system: calls, bytes, transfer time, algbw, busbw and efficiency per collective;
    kernel: the NCCL kernel (its name carries the algorithm and protocol, e.g. RING_LL);
    microarch: NVLink / NIC throughput counters, when captured.
    Fix: check topology and transport (NCCL_DEBUG=INFO: NVLink/P2P vs SHM vs NET, GPUDirect RDMA),
    NCCL_ALGO / NCCL_PROTO choices (LL is for small messages), larger buckets so messages are
    bandwidth-bound, one process per GPU bound to the right NUMA node and NIC, and run nccl-tests
    on the same nodes as the reference.
    Counter-example (when it does not apply): small messages (latency-bound, below `min_bytes`);
    inter-node collectives judged against an NVLink peak (set `link_peak_gbps` to the NIC's);
    calls timed by a kernel that includes waiting for other ranks (single-rank traces).
    """

    scope = "job"
    needs = frozenset()

    id = "TL205"
    slug = "collective-bandwidth"
    title = "Collective bus bandwidth far below the link peak"
    severity = Severity.INFO
    groups = frozenset({"distributed", "bandwidth", "cross-rank"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    Options = Options
    min_ranks = 1

    def peak(self, ctx: JobContext) -> tuple[float | None, str]:
        if self.options.link_peak_gbps > 0:
            return float(self.options.link_peak_gbps), "configured link_peak_gbps"
        if self.options.intra_node:
            p = link_peak_for(ctx.gpu_name())
            if p:
                return p, f"intra-node peak of {ctx.gpu_name()}"
        return None, ""

    def check(self, ctx: JobContext):
        bw = ctx.bandwidth
        opt = self.options
        peak, why = self.peak(ctx)
        if not len(bw) or peak is None:
            return
        big = bw[bw["bytes"] >= opt.min_bytes]
        for coll, g in big.groupby("coll", sort=False):
            if len(g) < opt.min_calls:
                continue
            med = float(np.median(g["busbw_gbps"]))
            eff = med / peak
            if eff >= opt.min_efficiency:
                continue
            ideal_ns = (g["time_ns"] * g["busbw_gbps"] / peak).to_numpy()
            lost = int((g["time_ns"].to_numpy() - ideal_ns).clip(min=0).sum())
            timed = ", ".join(sorted(set(g["timed_by"])))
            c = ctx.collectives
            kern = c[c["coll"] == coll]["kernel"].value_counts()
            kname = str(kern.index[0]) if len(kern) else coll
            system = Evidence.measured(
                f"{coll}: {len(g)} calls of ≥ {opt.min_bytes / 2**20:.0f} MiB, median "
                f"{np.median(g['bytes']) / 2**20:.1f} MiB in {np.median(g['time_ns']) / 1e3:.0f} µs "
                f"(timed by {timed}), algbw {np.median(g['algbw_gbps']):.1f} GB/s, busbw {med:.1f} GB/s "
                f"(n = {int(np.median(g['n']))}) = {eff:.0%} of {peak:.0f} GB/s ({why}).",
                calls=Measure(len(g), "count"), median_bytes=Measure(float(np.median(g["bytes"])), "bytes"),
                algbw=Measure(round(float(np.median(g["algbw_gbps"])), 2), "GB/s"),
                busbw=Measure(round(med, 2), "GB/s"), peak=Measure(peak, "GB/s"),
                efficiency=Measure(round(eff, 4), "ratio"))
            kernel = Evidence.measured(
                f"Kernel `{kname[:100]}` ({int(kern.iloc[0]) if len(kern) else 0} launches over the job); "
                "its name gives NCCL's algorithm and protocol.",
                kernels=Measure(int(kern.sum()) if len(kern) else 0, "count"))
            yield self.finding(
                ctx,
                message=(f"{coll} reaches a median bus bandwidth of {med:.1f} GB/s, {eff:.0%} of the "
                         f"{peak:.0f} GB/s link peak, on {len(g)} calls of ≥ {opt.min_bytes / 2**20:.0f} MiB"),
                impact_ns=lost, where=Where(kernel=kname), occurrences=int(len(g)),
                evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel,
                          Layer.MICROARCH: Evidence.not_captured(
                              "No NVLink / NIC throughput counters in the summaries.",
                              "nsys profile --gpu-metrics-devices=all --nic-metrics=true; or run "
                              "nccl-tests (all_reduce_perf -b 8 -e 1G -f 2) on the same nodes")},
                metrics={"busbw": Measure(round(med, 2), "GB/s"),
                         "efficiency": Measure(round(eff, 4), "ratio")},
                key=f"{coll}")

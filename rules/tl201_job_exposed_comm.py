"""TL201 job-exposed-communication."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.job_context import JobContext
from tracelint.engine.rule import Rule, option

_HINT = ("nsys profile --gpu-metrics-devices=all (NVLink / PCIe throughput per GPU), "
         "--nic-metrics=true for InfiniBand / RoCE NICs")


@dataclass(frozen=True)
class Options:
    min_share: float = option(0.10, "Report the job when the median rank's exposed communication is at least this share of its iteration time.")
    outlier_ratio: float = option(1.10, "A rank is an outlier when its exposed transfer time is at least this multiple of the job median.")
    min_excess_share: float = option(0.005, "... and exceeds the median by at least this share of the rank's iteration time.")
    min_excess_ns: int = option(1_000_000, "... and by at least this many ns in total.")


class JobExposedCommunication(Rule):
    """Communication that no compute overlaps, per rank and over the whole job.

    What it detects: for every rank, the time its NCCL / RCCL kernels run while no compute
    kernel runs on its GPU (exposed communication), split with the other ranks' timing into
    *waiting* (from this rank's start of a collective until the last rank arrives) and
    *transfer* (from the last arrival to the end). A job finding when the median rank's exposed
    time, waiting left out (that is TL202's), is at least `min_share` of its iteration time
    (communication is exposed everywhere);
    a rank finding when one rank's exposed transfer time stands out from the job's median by
    `outlier_ratio`, `min_excess_share` of its iterations and `min_excess_ns` (that rank, and not
    the others, fails to overlap).
    Why it hurts: in data-parallel and sharded training every rank waits for the slowest
    collective; time a collective runs alone is added to each iteration of every rank. When one
    rank serialises communication and compute (a different code path, a missing bucket hook, a
    synchronisation on the communication stream), the whole job pays for it at the next
    collective.
    Evidence: system: exposed, waiting and transfer time per rank, the job total and the median
    rank's share of iteration time; kernel: the collectives with the most exposed transfer time on
    the outlier rank and their overlap on other ranks; microarch: NVLink / NIC throughput counters
    over the exposed windows, when captured.
    Fix: overlap communication with compute on every rank: DDP gradient bucketing with the
    all-reduce on its own stream (`bucket_cap_mb`), FSDP / ZeRO prefetch, no synchronisation
    between the communication and compute streams; for an outlier rank, diff its code path and
    configuration against a normal rank (environment, NCCL settings, a rank-0-only logging or
    checkpoint path).
    Counter-example (when it does not apply): waiting time caused by a straggler (see TL202:
    the exposed time of the other ranks is the straggler's fault, not theirs); tensor-parallel
    collectives that sit on the critical path by construction; the last gradient bucket, which
    nothing can hide.
    """

    scope = "job"
    needs = frozenset()

    id = "TL201"
    slug = "job-exposed-communication"
    title = "Communication exposed across the job"
    severity = Severity.WARNING
    groups = frozenset({"distributed", "overlap", "cross-rank"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    Options = Options

    def check(self, ctx: JobContext):
        rt = ctx.rank_table
        if not len(rt) or int(rt["comm_ns"].sum()) == 0:
            return
        opt = self.options
        it_ns = rt["iteration_ns"].clip(lower=1)
        # Waiting for a late rank is the straggler's cost (TL202): judge the rest.
        own = (rt["exposed_comm_ns"] - rt["exposed_wait_ns"]).clip(lower=0)
        share = own / it_ns
        total = int(rt["exposed_comm_ns"].sum())
        med_own = float(np.median(own))
        med_share = float(np.median(share))
        wait = int(rt["exposed_wait_ns"].sum())
        if med_share >= opt.min_share:
            worst = int(share.idxmax())
            system = Evidence.measured(
                f"Exposed communication per rank, waiting for late ranks left out: median "
                f"{med_own / 1e6:.2f} ms ({med_share:.1%} of iteration time), worst rank {worst} "
                f"{own[worst] / 1e6:.2f} ms ({share[worst]:.1%}). Over all {ctx.n} ranks "
                f"{total / 1e6:.2f} ms of communication ran with no compute, {wait / 1e6:.2f} ms of it "
                f"waiting for a later rank to arrive.",
                exposed_total_ns=Measure(total, "ns"),
                exposed_median_ns=Measure(int(med_own), "ns"),
                exposed_median_share=Measure(round(med_share, 4), "ratio"),
                waiting_ns=Measure(wait, "ns"), ranks=Measure(ctx.n, "count"))
            yield self.finding(
                ctx,
                message=(f"Communication is exposed for {med_own / 1e6:.2f} ms on the median rank "
                         f"({med_share:.1%} of iteration time); {total / 1e6:.1f} ms over {ctx.n} ranks"),
                impact_ns=int(med_own), where=Where(), occurrences=ctx.n,
                evidence={Layer.SYSTEM: system, Layer.KERNEL: self._kernel_evidence(ctx, None),
                          Layer.MICROARCH: Evidence.not_captured(
                              "No interconnect counters in the summaries.", _HINT)},
                metrics={"exposed_total_ns": Measure(total, "ns"),
                         "exposed_median_share": Measure(round(med_share, 4), "ratio")},
                key="job")
        tr = rt["exposed_transfer_ns"]
        if int((rt["matched"] > 0).sum()) < 2:
            return
        med_tr = float(np.median(tr))
        for r in rt.index:
            excess = float(tr[r] - med_tr)
            if tr[r] < opt.outlier_ratio * med_tr or excess < opt.min_excess_ns or \
                    excess < opt.min_excess_share * it_ns[r]:
                continue
            yield self._outlier(ctx, int(r), excess, med_tr)

    def _kernel_evidence(self, ctx: JobContext, rank: int | None) -> Evidence:
        c = ctx.collectives
        if not len(c):
            return Evidence.not_applicable("No collective kernels.")
        sel = c if rank is None else c[c["rank"] == rank]
        g = sel.groupby("coll")["exposed_transfer_ns"].sum().sort_values(ascending=False)
        top = ", ".join(f"{k} {v / 1e6:.2f} ms" for k, v in g.head(3).items())
        return Evidence.measured(
            f"Exposed transfer time by collective{'' if rank is None else f' on rank {rank}'}: {top}.",
            **{f"{k}_exposed_transfer_ns": Measure(int(v), "ns") for k, v in g.head(3).items()})

    def _outlier(self, ctx: JobContext, r: int, excess: float, med_tr: float):
        rt = ctx.rank_table
        c = ctx.collectives
        mine = c[(c["rank"] == r) & (c["key"] != "")]
        others = c[(c["rank"] != r) & (c["key"].isin(mine["key"]))]
        ov_mine = float(mine["overlap_ns"].sum() / max(mine["dur_ns"].sum(), 1))
        ov_others = float(others["overlap_ns"].sum() / max(others["dur_ns"].sum(), 1)) if len(others) else 0.0
        tr = int(rt.at[r, "exposed_transfer_ns"])
        # The call with the largest exposed transfer relative to the same call on other ranks.
        med_other = others.groupby("key")["exposed_transfer_ns"].median()
        diff = mine.set_index("key")["exposed_transfer_ns"] - med_other.reindex(mine["key"]).fillna(0).to_numpy()
        worst_key = diff.idxmax() if len(diff) else None
        w = mine[mine["key"] == worst_key].iloc[0] if worst_key is not None else None
        where = Where(rank=r, device=ctx.device_of(r))
        if w is not None:
            where.kernel, where.start_ns, where.end_ns = str(w["kernel"]), int(w["start"]), int(w["end"])
            where.iteration = int(w["step"]) if w["step"] >= 0 else None
        system = Evidence.measured(
            f"Rank {r} runs its collectives' transfer phase {tr / 1e6:.2f} ms without compute, the "
            f"job median is {med_tr / 1e6:.2f} ms (+{excess / 1e6:.2f} ms, "
            f"{excess / max(rt.at[r, 'iteration_ns'], 1):.1%} of its iteration time). Compute "
            f"overlaps {ov_mine:.0%} of its collective time against {ov_others:.0%} on the other ranks.",
            exposed_transfer_ns=Measure(tr, "ns"), job_median_ns=Measure(int(med_tr), "ns"),
            excess_ns=Measure(int(excess), "ns"),
            overlapped_share=Measure(round(ov_mine, 4), "ratio"),
            others_overlapped_share=Measure(round(ov_others, 4), "ratio"))
        kernel = self._kernel_evidence(ctx, r)
        if w is not None:
            kernel.summary += (f" Most exposed call: {w['coll']} (call {int(w['occurrence'])}), "
                               f"{int(w['exposed_transfer_ns']) / 1e3:.0f} µs alone here against "
                               f"{float(med_other.get(worst_key, 0)) / 1e3:.0f} µs on the median other rank.")
        return self.finding(
            ctx,
            message=(f"Rank {r} does not overlap its communication: {tr / 1e6:.2f} ms of collective "
                     f"transfer with no compute, {excess / 1e6:.2f} ms more than the job median "
                     f"(compute overlaps {ov_mine:.0%} here, {ov_others:.0%} on other ranks)"),
            impact_ns=int(excess), where=where, occurrences=int(len(mine)),
            windows=[(int(a), int(b)) for a, b in mine.nlargest(5, "exposed_transfer_ns")[["start", "end"]].to_numpy()],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel,
                      Layer.MICROARCH: Evidence.not_captured(
                          "No interconnect counters in the summaries.", _HINT)},
            metrics={"excess_ns": Measure(int(excess), "ns"),
                     "overlapped_share": Measure(round(ov_mine, 4), "ratio")},
            key=f"rank{r}")

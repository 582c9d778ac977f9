"""TL203 slow-rank-iterations."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.job_context import JobContext
from tracelint.engine.rule import Rule, option


@dataclass(frozen=True)
class Options:
    min_slowdown: float = option(0.05, "Report a rank whose median iteration is at least this much slower than the other ranks' (0.05 = 5 %).")
    min_iteration_share: float = option(0.66, "... and slower than the others' median in at least this share of iterations.")
    min_iterations: int = option(2, "Iterations matched across ranks needed before judging.")


class SlowRankIterations(Rule):
    """A rank's iterations are consistently slower than the other ranks'.

    What it detects: per iteration (ProfilerStep#N, matched across ranks by step number, else
    by position), each rank's iteration time against the median of the other ranks. A rank
    whose median ratio is at least 1 + `min_slowdown` and that is slower in at least
    `min_iteration_share` of the iterations is reported, with its compute, communication and
    idle time per iteration beside the others'.
    Why it hurts: in synchronous training the job moves at the pace of its slowest rank; in
    loosely coupled jobs (pipeline stages, parameter servers, independent inference replicas
    behind one router) a slow rank lowers throughput and lengthens the tail directly.
    Evidence: system: median and per-iteration times of the rank against the others, the share
    of iterations it is slower, and where its extra time goes (compute, exposed communication,
    the rest: host or idle); kernel: its compute time per iteration against the others';
    microarch: GPU clocks and throttling counters, when captured.
    Fix: compare the slow rank's host and device: GPU clocks and throttling (nvidia-smi -q -d
    PERFORMANCE), PCIe link width, NUMA / CPU affinity of its process, data-loader workers, and
    the size of its share of the work (sequence lengths, shards); rebalance or replace the node.
    Counter-example (when it does not apply): in tightly synchronised data-parallel training
    every rank's iteration lasts as long as the slowest, so this rule rarely fires there: look at
    TL202 (late arrival) and TL204 (compute imbalance) instead; profiler windows that cover
    different iterations on different ranks (check the step numbers).
    """

    scope = "job"
    needs = frozenset()

    id = "TL203"
    slug = "slow-rank-iterations"
    title = "Rank's iterations consistently slower"
    severity = Severity.WARNING
    groups = frozenset({"distributed", "straggler", "cross-rank"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    Options = Options

    def check(self, ctx: JobContext):
        opt = self.options
        mx = ctx.iteration_matrix["dur_ns"]
        if mx.empty or mx.shape[1] < opt.min_iterations or mx.shape[0] < 2:
            return
        comp = ctx.iteration_matrix["compute_ns"]
        exp = ctx.iteration_matrix["exposed_comm_ns"]
        for r in mx.index:
            others = mx.drop(index=r)
            ref = others.median(axis=0)
            ratio = (mx.loc[r] / ref.replace(0, np.nan)).dropna()
            if len(ratio) < opt.min_iterations:
                continue
            med = float(np.median(ratio))
            slower = float((ratio > 1 + opt.min_slowdown / 2).mean())
            if med < 1 + opt.min_slowdown or slower < opt.min_iteration_share:
                continue
            extra = float((mx.loc[r] - ref).clip(lower=0).sum())
            d_comp = float((comp.loc[r] - comp.drop(index=r).median(axis=0)).mean())
            d_exp = float((exp.loc[r] - exp.drop(index=r).median(axis=0)).mean())
            d_all = float((mx.loc[r] - ref).mean())
            d_rest = d_all - d_comp - d_exp
            worst_it = ratio.idxmax()
            it = ctx.iterations
            row = it[(it["rank"] == r) & (it["it"] == worst_it)]
            where = Where(rank=int(r), device=ctx.device_of(int(r)), iteration=int(worst_it))
            if len(row):
                where.start_ns, where.end_ns = int(row["start"].iat[0]), int(row["end"].iat[0])
            system = Evidence.measured(
                f"Rank {r}'s median iteration takes {mx.loc[r].median() / 1e6:.2f} ms against "
                f"{ref.median() / 1e6:.2f} ms on the other ranks (×{med:.3f}); slower in "
                f"{slower:.0%} of {len(ratio)} iterations. Per iteration the extra "
                f"{d_all / 1e6:.2f} ms is {d_comp / 1e6:.2f} ms compute, {d_exp / 1e6:.2f} ms exposed "
                f"communication and {d_rest / 1e6:.2f} ms elsewhere (host, idle, copies).",
                median_ratio=Measure(round(med, 4), "ratio"),
                slower_share=Measure(round(slower, 4), "ratio"),
                extra_ns=Measure(int(extra), "ns"),
                extra_compute_ns=Measure(int(d_comp), "ns"),
                extra_exposed_comm_ns=Measure(int(d_exp), "ns"),
                extra_other_ns=Measure(int(d_rest), "ns"))
            kernel = Evidence.measured(
                f"Compute per iteration: {comp.loc[r].median() / 1e6:.2f} ms on rank {r} against "
                f"{comp.drop(index=r).median(axis=0).median() / 1e6:.2f} ms on the others.",
                compute_median_ns=Measure(float(comp.loc[r].median()), "ns"))
            yield self.finding(
                ctx,
                message=(f"Rank {r}'s iterations are {med - 1:.1%} slower than the other ranks' "
                         f"(median {mx.loc[r].median() / 1e6:.2f} ms vs {ref.median() / 1e6:.2f} ms, "
                         f"slower in {slower:.0%} of iterations)"),
                impact_ns=int(extra), where=where, occurrences=int(len(ratio)),
                windows=[(int(a), int(b)) for a, b in
                         it[it["rank"] == r][["start", "end"]].to_numpy()[:5]],
                evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel,
                          Layer.MICROARCH: Evidence.not_captured(
                              "No GPU clock or throttling counters in the summaries.",
                              "nsys profile --gpu-metrics-devices=all, or nvidia-smi -q -d "
                              "PERFORMANCE,CLOCK on the slow rank's node")},
                metrics={"median_ratio": Measure(round(med, 4), "ratio"),
                         "extra_ns": Measure(int(extra), "ns")},
                key=f"rank{r}")

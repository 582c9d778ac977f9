"""TL204 compute-imbalance."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.job_context import JobContext
from tracelint.engine.rule import Rule, option


@dataclass(frozen=True)
class Options:
    min_imbalance: float = option(0.05, "Report when the median iteration's imbalance (max / mean - 1 of compute time across ranks) is at least this.")
    min_compute_ns: int = option(1_000_000, "Ignore iterations whose mean compute time per rank is below this (ns).")
    consistent_share: float = option(0.5, "Name a worst rank when it is the heaviest in at least this share of iterations.")


class ComputeImbalance(Rule):
    """Compute load is unevenly spread across ranks.

    What it detects: per iteration, each rank's compute time — the union of its non-communication
    kernels launched in that iteration — and the imbalance across ranks, max / mean - 1 (the
    load-imbalance factor). Reported when the median iteration's imbalance is at least
    `min_imbalance`; the heaviest rank is named when it is the heaviest in at least
    `consistent_share` of the iterations, with the kernels that make its extra time.
    Why it hurts: ranks synchronise at every collective, so each iteration lasts as long as the
    heaviest rank's compute; the others idle inside the next collective (max - mean of compute,
    every iteration). A 10 % imbalance on 1024 GPUs idles the equivalent of ~90 GPUs.
    Evidence: system: compute time per rank and iteration (mean, max, spread), the imbalance
    factor, the idle time it causes the other ranks; kernel: the kernels whose time differs most
    between the heaviest rank and the median rank; microarch: not captured in the summaries
    (SM clocks and throttling would show a slower GPU doing equal work).
    Fix: balance the work: sequence-length-aware batching or packing, even embedding-table / MoE
    expert placement, equal pipeline stages; when the heaviest rank does the same kernels slower,
    check that GPU (clocks, thermal throttling, ECC errors, a different SKU).
    Counter-example (when it does not apply): roles that differ by design (rank 0 doing
    evaluation or logging, pipeline stages of different sizes that the schedule accounts for);
    iterations whose compute time is tiny (`min_compute_ns`); noise below a few percent.
    """

    scope = "job"
    needs = frozenset()

    id = "TL204"
    slug = "compute-imbalance"
    title = "Compute load imbalanced across ranks"
    severity = Severity.WARNING
    groups = frozenset({"distributed", "imbalance", "cross-rank"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    Options = Options

    def check(self, ctx: JobContext):
        opt = self.options
        comp = ctx.iteration_matrix["compute_ns"]
        if comp.empty or comp.shape[0] < 2:
            return
        comp = comp.dropna(axis=1)
        mean = comp.mean(axis=0)
        comp = comp.loc[:, mean >= opt.min_compute_ns]
        if comp.shape[1] == 0:
            return
        mean = comp.mean(axis=0)
        mx = comp.max(axis=0)
        imb = mx / mean - 1
        med_imb = float(np.median(imb))
        if med_imb < opt.min_imbalance:
            return
        heaviest = comp.idxmax(axis=0)
        counts = heaviest.value_counts()
        worst = int(counts.index[0])
        share = float(counts.iloc[0] / comp.shape[1])
        consistent = share >= opt.consistent_share
        idle = float(((mx - comp).sum(axis=0)).sum())          # rank-ns the others wait
        lost = float((mx - mean).sum())                         # wall ns vs a balanced job
        spread = (mx - comp.min(axis=0))
        system = Evidence.measured(
            f"Compute per iteration across {comp.shape[0]} ranks: mean {mean.median() / 1e6:.2f} ms, "
            f"max {mx.median() / 1e6:.2f} ms, spread {spread.median() / 1e6:.2f} ms (medians over "
            f"{comp.shape[1]} iterations); imbalance max/mean - 1 = {med_imb:.1%}. The other ranks "
            f"wait {idle / 1e6:.2f} rank-ms in total for the heaviest rank of each iteration.",
            imbalance=Measure(round(med_imb, 4), "ratio"),
            compute_mean_ns=Measure(float(mean.median()), "ns"),
            compute_max_ns=Measure(float(mx.median()), "ns"),
            spread_ns=Measure(float(spread.median()), "ns"),
            others_idle_ns=Measure(int(idle), "ns"),
            heaviest_share=Measure(round(share, 4), "ratio"))
        kernel = self._kernel_diff(ctx, worst) if consistent else Evidence.not_applicable(
            "The heaviest rank changes from iteration to iteration: no single rank's kernels to compare.")
        where = Where(rank=worst if consistent else None,
                      device=ctx.device_of(worst) if consistent else None)
        if consistent:
            it = ctx.iterations
            worst_it = (comp.loc[worst] - mean).idxmax()
            row = it[(it["rank"] == worst) & (it["it"] == worst_it)]
            where.iteration = int(worst_it)
            if len(row):
                where.start_ns, where.end_ns = int(row["start"].iat[0]), int(row["end"].iat[0])
            msg = (f"Rank {worst} computes {comp.loc[worst].median() / mean.median() - 1:.1%} more than the "
                   f"mean rank (heaviest in {share:.0%} of iterations); imbalance {med_imb:.1%} costs "
                   f"{lost / 1e6:.2f} ms of wall time")
        else:
            msg = (f"Compute time differs by {med_imb:.1%} (max/mean) across ranks per iteration; the "
                   f"heaviest rank changes between iterations")
        yield self.finding(
            ctx, message=msg, impact_ns=int(lost), where=where, occurrences=int(comp.shape[1]),
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel,
                      Layer.MICROARCH: Evidence.not_captured(
                          "No SM clock or throttling counters in the summaries.",
                          "nsys profile --gpu-metrics-devices=all on the heaviest rank")},
            metrics={"imbalance": Measure(round(med_imb, 4), "ratio"),
                     "lost_ns": Measure(int(lost), "ns")},
            key=f"rank{worst}" if consistent else "job")

    def _kernel_diff(self, ctx: JobContext, worst: int) -> Evidence:
        tops = {s.rank: {n: t for n, t, _ in s.top_kernels} for s in ctx.ranks}
        mine = tops.get(worst, {})
        names = set(mine)
        for r, d in tops.items():
            names |= set(d)
        diffs = []
        for n in names:
            others = [d.get(n, 0) for r, d in tops.items() if r != worst]
            diffs.append((mine.get(n, 0) - float(np.median(others)) if others else 0.0, n))
        diffs.sort(reverse=True)
        top = [(d, n) for d, n in diffs[:3] if d > 0]
        if not top:
            return Evidence.measured("Its top kernels take the same time as on the other ranks.",
                                     supports=None)
        text = "; ".join(f"`{n[:80]}` +{d / 1e6:.2f} ms" for d, n in top)
        return Evidence.measured(
            f"Kernels with the most extra time on rank {worst} against the median rank (whole trace): "
            f"{text}.", **{f"kernel{i + 1}_extra_ns": Measure(int(d), "ns") for i, (d, _) in enumerate(top)})

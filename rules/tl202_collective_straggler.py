"""TL202 collective-straggler."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.job_context import JobContext
from tracelint.engine.rule import Rule, option


@dataclass(frozen=True)
class Options:
    min_late_ns: int = option(100_000, "A rank is late when its median arrival is at least this many ns after the other ranks'.")
    min_last_share: float = option(0.5, "... and it arrives last at no fewer than this share of the collectives it takes part in.")
    min_matched: int = option(3, "Collective calls matched across ranks needed before judging.")
    min_impact_share: float = option(0.005, "Report when the wait it causes is at least this share of the median iteration time.")


class CollectiveStraggler(Rule):
    """A rank arrives late at collectives, so every other rank waits for it.

    What it detects: collective calls (AllReduce, AllGather, ReduceScatter, Broadcast, AllToAll,
    ...) matched across ranks (the k-th call of each collective, per process group and
    iteration) and their arrival times on clocks aligned by collective end times. A rank that
    arrives last at no fewer than `min_last_share` of them, with a median lateness of at least
    `min_late_ns` after the other ranks, is a straggler; the others' collective kernels show the
    same time as waiting. When arrival skew is large but no single rank is consistently late,
    one job finding describes the skew instead.
    Why it hurts: a collective completes only when the last rank has contributed. Every ns the
    straggler is late is a ns every other rank's GPU spends inside the NCCL kernel doing
    nothing (it looks like slow communication on the healthy ranks). At scale the slowest rank
    sets the pace of the whole job.
    Evidence: system: per rank, the calls matched, how often it was last, its median and p90
    lateness, the clock offset applied, and the waiting it caused the others; kernel: the
    collective with the largest skew and the straggler's compute time per iteration against the
    job's (a longer compute phase explains late arrival); microarch: not applicable — arrival
    skew is a timing fact between ranks.
    Fix: find why that rank is slower before the collective: more work (uneven data or sequence
    lengths, embedding shards, pipeline stage sizes), a slower or throttled GPU (clocks, thermal,
    ECC, PCIe link width), host interference (data loading, logging or checkpointing on that
    rank only, CPU affinity, noisy neighbours); rebalance the work or exclude the bad node.
    Counter-example (when it does not apply): point-to-point transfers (Send / Recv in pipeline
    parallelism) are excluded, as their ranks are expected to differ; a constant, small skew
    within the clock-alignment error (tens of µs); deliberately asymmetric roles (a rank-0-only
    evaluation step).
    """

    scope = "job"
    needs = frozenset()

    id = "TL202"
    slug = "collective-straggler"
    title = "Rank arrives late at collectives"
    severity = Severity.WARNING
    groups = frozenset({"distributed", "straggler", "cross-rank"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    Options = Options

    def check(self, ctx: JobContext):
        mt = ctx.matched
        opt = self.options
        if len(mt) < opt.min_matched:
            return
        c = ctx.collectives
        m = c[c["key"].isin(mt["key"])]
        flagged = []
        for r in ctx.rank_ids:
            mine = m[m["rank"] == r]
            n = len(mine)
            if n < opt.min_matched:
                continue
            last = int((mt["last_rank"] == r).sum())
            late = mine["late_ns"].to_numpy()
            med_late = float(np.median(late))
            # wall time the job lost: how much later than the second-to-last rank it arrived
            lost = int(mt.loc[mt["last_rank"] == r, "last_gap_ns"].sum())
            # repeatedly last, and late by a margin: typically (median) or on average when last
            # (a rank 7 ms late at one call and slightly late at the rest is still the straggler)
            if last / n < opt.min_last_share or max(med_late, lost / max(last, 1)) < opt.min_late_ns:
                continue
            waited = int(c.loc[(c["rank"] != r) & c["key"].isin(mine["key"]), "wait_ns"].sum())
            if lost < opt.min_impact_share * ctx.window_ns:
                continue
            flagged.append(r)
            yield self._rank_finding(ctx, r, mine, last, med_late, lost, waited)
        skew = mt["skew_ns"].to_numpy()
        total_skew = int(mt["last_gap_ns"].sum())
        if not flagged and float(np.median(skew)) >= opt.min_late_ns and \
                total_skew >= opt.min_impact_share * ctx.window_ns:
            yield self._job_finding(ctx, mt, total_skew)

    def _rank_finding(self, ctx, r, mine, last, med_late, lost, waited):
        rt = ctx.rank_table
        n = len(mine)
        p90 = float(np.percentile(mine["late_ns"], 90))
        worst = mine.loc[mine["late_ns"].idxmax()]
        where = Where(rank=r, device=int(worst["device"]), kernel=str(worst["kernel"]),
                      start_ns=int(worst["start"]), end_ns=int(worst["end"]),
                      iteration=int(worst["step"]) if worst["step"] >= 0 else None)
        by_coll = mine.groupby("coll")["late_ns"].median().sort_values(ascending=False)
        colls = ", ".join(f"{k} {v / 1e3:.0f} µs" for k, v in by_coll.head(4).items())
        system = Evidence.measured(
            f"Rank {r} arrives last at {last} of {n} matched collective calls, a median "
            f"{med_late / 1e3:.0f} µs (p90 {p90 / 1e3:.0f} µs) after the other ranks (clock offset "
            f"applied: {ctx.offsets.get(r, 0) / 1e3:.0f} µs). The other ranks spend {waited / 1e6:.2f} ms "
            f"in these collectives before it arrives; the job loses {lost / 1e6:.2f} ms of wall time "
            f"waiting for it.",
            matched=Measure(n, "count"), last_arrivals=Measure(last, "count"),
            median_late_ns=Measure(int(med_late), "ns"), p90_late_ns=Measure(int(p90), "ns"),
            others_wait_ns=Measure(waited, "ns"), job_lost_ns=Measure(lost, "ns"),
            clock_offset_ns=Measure(int(ctx.offsets.get(r, 0)), "ns"))
        comp = rt["compute_median_ns"]
        others = comp.drop(index=r)
        ratio = float(comp[r] / np.median(others)) if len(others) and np.median(others) > 0 else float("nan")
        kernel = Evidence.measured(
            f"Median lateness by collective: {colls}. Its compute per iteration is "
            f"{comp[r] / 1e6:.2f} ms against {np.median(others) / 1e6:.2f} ms on the other ranks "
            f"(×{ratio:.3f})" + (" — more work before each collective explains the late arrival."
                                 if ratio > 1.02 else "; its compute is not longer: look at the host "
                                 "(data loading, CPU contention) or the GPU clocks."),
            compute_ratio=Measure(round(ratio, 4), "ratio"),
            compute_median_ns=Measure(float(comp[r]), "ns"))
        system.summary += " " + _per_call(ctx)
        return self.finding(
            ctx,
            message=(f"Rank {r} arrives last at {last}/{n} collectives, a median {med_late / 1e3:.0f} µs "
                     f"after the other ranks (worst {mine['late_ns'].max() / 1e3:.0f} µs); they wait "
                     f"{waited / 1e6:.2f} ms for it in total"),
            impact_ns=lost, where=where, occurrences=n,
            windows=[(int(a), int(b)) for a, b in mine.nlargest(5, "late_ns")[["start", "end"]].to_numpy()],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel,
                      Layer.MICROARCH: Evidence.not_applicable(
                          "Arrival skew is a timing fact between ranks; hardware counters do not "
                          "change it.")},
            metrics={"median_late_ns": Measure(int(med_late), "ns"),
                     "last_share": Measure(round(last / n, 4), "ratio"),
                     "job_lost_ns": Measure(lost, "ns")},
            key=f"rank{r}")

    def _job_finding(self, ctx, mt, total_skew):
        sk = ctx.skew_by_collective.sort_values("median_skew_ns", ascending=False)
        top = sk.iloc[0]
        lr = mt["last_rank"].value_counts(normalize=True)
        spread = ", ".join(f"rank {int(k)} {v:.0%}" for k, v in lr.head(4).items())
        system = Evidence.measured(
            f"Median arrival skew {np.median(mt['skew_ns']) / 1e3:.0f} µs over {len(mt)} matched calls "
            f"(worst collective {top['coll']}: median {top['median_skew_ns'] / 1e3:.0f} µs, max "
            f"{top['max_skew_ns'] / 1e3:.0f} µs); the last rank changes from call to call ({spread}). " + _per_call(ctx),
            matched=Measure(len(mt), "count"),
            median_skew_ns=Measure(float(np.median(mt["skew_ns"])), "ns"),
            job_lost_ns=Measure(total_skew, "ns"))
        return self.finding(
            ctx,
            message=(f"Collectives start up to {mt['skew_ns'].max() / 1e3:.0f} µs apart across ranks "
                     f"(median {np.median(mt['skew_ns']) / 1e3:.0f} µs) with no single straggler"),
            impact_ns=total_skew, where=Where(), occurrences=int(len(mt)),
            evidence={Layer.SYSTEM: system,
                      Layer.KERNEL: Evidence.not_applicable("No single rank or kernel to blame."),
                      Layer.MICROARCH: Evidence.not_applicable(
                          "Arrival skew is a timing fact between ranks.")},
            metrics={"median_skew_ns": Measure(float(np.median(mt["skew_ns"])), "ns")},
            key="job")


def _per_call(ctx, top: int = 5) -> str:
    """Arrival skew of the most skewed matched calls (collective, occurrence, iteration, skew,
    last rank), and how often each rank was last: the per-collective view of the straggling."""
    mt = ctx.matched
    worst = mt.nlargest(top, "skew_ns")
    calls = "; ".join(f"{row.coll} #{int(row.k)}" + (f" (iteration {int(row.step)})" if row.step >= 0 else "")
                      + f" {row.skew_ns / 1e3:.0f} µs, last rank {int(row.last_rank)}"
                      for row in worst.itertuples())
    lr = mt.loc[mt["last_rank"] >= 0, "last_rank"].value_counts()
    last = ", ".join(f"rank {int(k)} {int(v)}/{len(mt)}" for k, v in lr.head(4).items())
    return f"Largest arrival skews: {calls}. Last to arrive: {last}."

"""Job-level projected savings: the job's ranks replayed together through their matched
collectives (whatif/job.py), and the cross-rank findings' fixes replayed as edits.

The map step's workers build each rank's graph while its trace is loaded (a few MB each,
returned with the summary), so the reduce step never loads a trace again; a summary without
one (made elsewhere) has its trace loaded here. Only for jobs up to MAX_RANKS ranks and
MAX_EVENTS events in all, else every job finding says why it has no saving.

Fixes, as edits of one rank's plan:
- TL202 collective-straggler: before each matched call, the straggler's work since its previous
  matched call (GPU ops and host calls and gaps that start in that window) scaled to the median
  rank's length of the same window (never stretched).
- TL204 load-imbalance: the heaviest rank's compute kernels scaled to the median rank's compute
  per iteration.
- TL203 slow-iterations: the slow rank runs at the other ranks' pace: all its work but its
  collectives (GPU ops, host calls and the host's own work between them) scaled by the inverse
  of its median iteration-time ratio.
- TL201, TL205: no edit states the fix (overlap needs a schedule the trace does not show, a slow
  link's cause is unknown): a statement, no number.

A job whose ranks share no collective at all is replayed rank by rank (the job span is the
longest rank's); a job whose collectives could not be matched (clocks or windows disagree) gets
no number, as the coupling between its ranks is unknown.
"""
from __future__ import annotations

import numpy as np

from ..whatif.graph import RunGraph, build
from ..whatif.job import JobGraph, JobRun, traced_span_ns
from ..whatif.replay import Plan

#: Job replay only for jobs this small: the reduce step holds every rank's graph.
MAX_RANKS = 64
MAX_EVENTS = 4_000_000
#: A fix whose job saving is below this share of how much earlier the last matched call ends
#: gets no number (see project_job_savings).
DECOUPLED_SHARE = 0.5

NO_EDIT = {
    "TL201": ("no saving can be established: overlapping this communication with compute needs a "
              "schedule (bucketing, async collectives) the trace does not show, so no edit of the "
              "recorded work states the fix"),
    "TL205": ("no saving can be established: a faster link or algorithm changes the transfer "
              "itself, which the trace measures but cannot predict"),
}


def _load_graphs(members) -> list[RunGraph]:
    """The ranks' graphs: built by the map step's workers (summarize_source(graphs=True)), else
    by loading the trace again here."""
    from ..importers import load
    from .processes import split_processes
    from .summary import local_copy
    out = []
    for s in members:
        if s.graph is not None:
            out.append(s.graph)
            continue
        with local_copy(str(s.source)) as path:
            tl = load(path)
        parts = split_processes(tl)
        part = next((p for pid, _, _, p in parts if pid == s.process), parts[0][3])
        out.append(build(part))
    return out


def _groups(ctx, graphs: list[RunGraph]) -> list[list[tuple[int, int]]]:
    """Matched calls as (rank position, GPU op index): a collective row is found in its rank's
    graph by device, stream and start (both come from the same Timeline)."""
    pos = {r: i for i, r in enumerate(ctx.rank_ids)}
    c = ctx.collectives
    if not len(ctx.matched) or not len(c):
        return []
    m = c[c["key"].isin(ctx.matched["key"])]
    lookup = []          # only the ops starting when a matched call does: not a key per op
    for g in graphs:
        at = np.flatnonzero(np.isin(g.g_start, m["start"].to_numpy()))
        lookup.append({(int(g.g_device[i]), int(g.g_stream[i]), int(g.g_start[i])): int(i)
                       for i in at})
    groups: dict[str, list] = {}
    for key, rank, dev, st, t in zip(m["key"], m["rank"], m["device"], m["stream"], m["start"]):
        i = pos[int(rank)]
        j = lookup[i].get((int(dev), int(st), int(t)))
        if j is not None:
            groups.setdefault(key, []).append((i, j))
    return list(groups.values())


class JobWhatIf:
    """The job's graphs, matched calls and base replay, built once for every finding."""

    def __init__(self, ctx, graphs: list[RunGraph]):
        self.ctx = ctx
        self.graphs = graphs
        self.offsets = [int(ctx.offsets.get(r, 0)) for r in ctx.rank_ids]
        self.jg = JobGraph(graphs, self.offsets, _groups(ctx, graphs))
        self.base: JobRun = self.jg.run()

    @classmethod
    def from_members(cls, members, ctx) -> JobWhatIf:
        return cls(ctx, _load_graphs(members))

    def plans(self) -> list[Plan]:
        return [Plan.of(g) for g in self.graphs]

    def saving(self, plans: list[Plan]) -> int:
        return self.saving_and_calls(plans)[0]

    def last_call_end(self, run: JobRun) -> int | None:
        """Aligned end of the job's last matched call (None without calls)."""
        ends = [int(run.ranks[r].g_end[j]) - self.offsets[r] for grp in self.jg.groups for r, j in grp]
        return max(ends) if ends else None

    def saving_and_calls(self, plans: list[Plan]) -> tuple[int, int | None]:
        """(job span saved, how much earlier the last matched call ends)."""
        e = self.jg.run(plans)
        a, b = self.last_call_end(self.base), self.last_call_end(e)
        return self.base.work_span_ns - e.work_span_ns, (a - b if a is not None else None)

    def fidelity(self) -> dict:
        """Traced vs replayed span, per rank and for the job (no edit)."""
        b = self.base
        ranks = [{"rank": r, "span_ns": int(g.span_end - g.span_start), "replayed_span_ns": int(x.span_ns)}
                 for r, g, x in zip(self.ctx.rank_ids, self.graphs, b.ranks)]
        return {"ranks": ranks, "matched_calls": len(self.jg.groups),
                "job_span_ns": traced_span_ns(self.graphs, self.offsets),
                "replayed_job_span_ns": int(b.span_ns), "work_span_ns": int(b.work_span_ns)}

    # ----- fixes -----------------------------------------------------------------------------
    def straggler_plans(self, rank: int) -> list[Plan]:
        """The rank's work before each matched call scaled to the median rank's (TL202)."""
        plans = self.plans()
        i = self.ctx.rank_ids.index(rank)
        g, p = self.graphs[i], plans[i]
        # per rank, the matched calls in (aligned) arrival order: window = previous call's end
        # (or the rank's start) to this call's start
        per_rank: dict[int, list] = {}
        for grp in self.jg.groups:
            for r, j in grp:
                per_rank.setdefault(r, []).append(j)
        win: dict[int, dict[int, tuple[int, int]]] = {}
        for r, js in per_rank.items():
            gr = self.graphs[r]
            js = sorted(js, key=lambda j: gr.g_start[j])
            prev = gr.span_start
            win[r] = {}
            for j in js:
                win[r][j] = (int(prev), int(gr.g_start[j]))
                prev = max(prev, int(gr.g_end[j]))
        for grp in self.jg.groups:
            mine = [j for r, j in grp if r == i]
            if not mine:
                continue
            lo, hi = win[i][mine[0]]
            own = hi - lo
            others = [win[r][j][1] - win[r][j][0] for r, j in grp if r != i]
            med = float(np.median(others)) if others else own
            if own <= 0 or med >= own:
                continue
            f = med / own
            gsel = (g.g_start >= lo) & (g.g_start < hi)
            p.writable("g_dur", "g_qgap", "h_dur", "h_gap")
            p.g_dur[gsel] = np.round(p.g_dur[gsel] * f).astype(np.int64)
            gap = gsel & (p.g_spred >= 0)
            p.g_qgap[gap] = np.round(p.g_qgap[gap] * f).astype(np.int64)
            hsel = (g.h_start >= lo) & (g.h_start < hi)
            hsel_own = hsel & (p.h_target < 0)
            p.h_dur[hsel_own] = np.round(p.h_dur[hsel_own] * f).astype(np.int64)
            p.h_gap[hsel] = np.round(p.h_gap[hsel] * f).astype(np.int64)
        return plans

    def balance_plans(self, rank: int) -> tuple[list[Plan] | None, str]:
        """The rank's compute kernels scaled to the median rank's compute per iteration (TL204)."""
        comp = self.ctx.iteration_matrix["compute_ns"].dropna(axis=1)
        if rank not in comp.index or comp.shape[0] < 2:
            return None, "no per-iteration compute to balance against"
        med = comp.drop(index=rank).median(axis=0)
        ratio = float(np.median(med / comp.loc[rank].clip(lower=1)))
        if ratio >= 1.0:
            return None, "the rank's compute is not above the median rank's"
        plans = self.plans()
        i = self.ctx.rank_ids.index(rank)
        g, p = self.graphs[i], plans[i]
        sel = (g.g_table == "kernels") & (g.g_class != "communication")
        p.writable("g_dur")
        p.g_dur[sel] = np.round(p.g_dur[sel] * ratio).astype(np.int64)
        return plans, ""

    def pace_plans(self, rank: int, f) -> tuple[list[Plan] | None, str]:
        """The rank's work, collectives aside, at the other ranks' pace (TL203)."""
        m = f.metrics.get("median_ratio")
        ratio = float(m.value) if m is not None else 1.0
        if not ratio > 1.0:
            return None, "the rank's iterations are not slower than the other ranks'"
        plans = self.plans()
        i = self.ctx.rank_ids.index(rank)
        g, p = self.graphs[i], plans[i]
        k = 1.0 / ratio
        sel = g.g_class != "communication"
        p.writable("g_dur", "g_qgap", "h_dur", "h_gap")
        p.g_dur[sel] = np.round(p.g_dur[sel] * k).astype(np.int64)
        p.g_qgap[sel] = np.round(p.g_qgap[sel] * k).astype(np.int64)
        own = p.h_target < 0
        p.h_dur[own] = np.round(p.h_dur[own] * k).astype(np.int64)
        p.h_gap[:] = np.round(p.h_gap * k).astype(np.int64)
        return plans, ""

    def fix(self, f) -> tuple[list[Plan] | None, str]:
        rank = f.where.rank
        if f.rule in NO_EDIT:
            return None, NO_EDIT[f.rule]
        if rank is None:
            return None, ("no saving can be established: no single rank to fix (the late or heavy "
                          "rank changes between calls)")
        if f.rule == "TL202":
            return self.straggler_plans(int(rank)), ""
        if f.rule == "TL204":
            return self.balance_plans(int(rank))
        if f.rule == "TL203":
            return self.pace_plans(int(rank), f)
        return None, "no edit states this rule's fix"


def project_job_savings(members, findings, ctx) -> dict | None:
    """Fill saving_ns / saving_note of the job findings from the job replay; return the job's
    what-if summary (fidelity and saving_all_ns) or None when no replay was made."""
    if ctx is None or not findings:
        return None
    why = None
    events = sum(int(sum(v for v in s.counts.values() if isinstance(v, (int, np.integer))))
                 for s in members)
    if not len(ctx.matched) and len(ctx.collectives):
        why = ("no collective call was matched across ranks (clocks or recorded windows disagree), "
               "so how the ranks wait for each other is unknown")
    elif len(members) > MAX_RANKS or events > MAX_EVENTS:
        why = (f"the job replay is limited to {MAX_RANKS} ranks and {MAX_EVENTS:,} events "
               f"(this job: {len(members)} ranks, {events:,} events)")
    if why:
        for f in findings:
            f.saving_note = "no saving can be established: " + why
        return None
    w = JobWhatIf.from_members(members, ctx)
    span = max(int(w.base.work_span_ns), 1)
    fixes: list[list[Plan]] = []
    for f in findings:
        try:
            plans, note = w.fix(f)
        except Exception as exc:   # a fix must never break the lint
            plans, note = None, f"the fix could not be replayed ({type(exc).__name__})"
        if plans is None:
            f.saving_note = note
            continue
        saved, calls = w.saving_and_calls(plans)
        if calls is not None and calls > 0 and saved < DECOUPLED_SHARE * calls:
            # the calls end earlier but the ranks' work after them does not follow: it is bound
            # by host time the trace shows no dependency for (host gaps replay as fixed work)
            f.saving_note = (
                f"no saving can be established: the fix ends the job's last matched collective "
                f"{calls / 1e6:.2f} ms earlier, yet the replayed job span moves by "
                f"{saved / 1e6:.2f} ms: the ranks' host work between collectives records no wait "
                "on them (no blocking call), so the replay keeps it where it was and cannot carry "
                "the fix through the job")
            continue
        fixes.append(plans)
        f.saving_ns = int(saved)
        f.saving_share = f.saving_ns / span
        f.saving_note = None
    out = w.fidelity()
    if fixes:
        out["saving_all_ns"] = int(w.saving(_combine(w, fixes)))
    return out


def _combine(w: JobWhatIf, fixes: list[list[Plan]]) -> list[Plan]:
    """All fixes at once: per rank and array, the smallest duration any fix gave."""
    base = w.plans()
    out = []
    for r, p in enumerate(base):
        names = ("g_dur", "g_qgap", "h_dur", "h_gap")
        p.writable(*names)
        for name in names:
            arr = getattr(p, name)
            for plans in fixes:
                np.minimum(arr, getattr(plans[r], name), out=arr)
        out.append(p)
    return out


__all__ = ["MAX_EVENTS", "MAX_RANKS", "JobWhatIf", "project_job_savings"]

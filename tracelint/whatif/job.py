"""Job-level replay: every rank's RunGraph replayed together, coupled through matched
collectives.

The model (docs/whatif.md, "Jobs"): a collective kernel starts on each rank when its own graph
lets it (launch, stream order, cross-stream waits: its *arrival*), then waits inside the kernel
until the last rank of the call has arrived, then transfers. So on rank r

    end_r = max(start_r, L + t_r),   L = max over the call's ranks of start (aligned clocks)

where t_r = traced end_r - traced L is the rank's own transfer time (its duration minus its
wait share). With no edit, L and every start are the traced ones, so every end is the traced
end: the replay reproduces each rank. When an edit makes the last rank arrive earlier, L moves
and every rank's collective (and all that depends on it) ends earlier by as much.

Clocks: ranks on different hosts differ by a constant offset (estimated by the job context from
collective end times); times are aligned by subtracting it before the ranks are merged, and
the per-rank results are given back on each rank's own clock.

The merged graph is one event list in aligned time order (repaired where a dependency sorts
late, as replay._order does), with one extra event per matched call that sets the call's end
on every rank after all arrivals, swept by the same loop as a single run (replay.sweep).
Pure: numpy and the whatif graph/replay types.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .graph import RunGraph
from .replay import Plan, Replay
from .sweep import runs_plain, sweep


@dataclass
class JobRun:
    """One job replay: per-rank Replays (each on its rank's own clock) and the job span."""

    ranks: list[Replay]
    offsets: list[int]
    groups: int
    notes: list = field(default_factory=list)

    @property
    def start(self) -> int:
        return min(r.graph.span_start - o for r, o in zip(self.ranks, self.offsets))

    @property
    def span_ns(self) -> int:
        """Job span: first rank's start to the last rank's end, on aligned clocks."""
        return max(r.end - o for r, o in zip(self.ranks, self.offsets)) - self.start

    @property
    def work_span_ns(self) -> int:
        """Job span to the end of the last rank's GPU work and driving threads (what a fix can
        move; see Replay.work_end)."""
        return max(r.work_end - o for r, o in zip(self.ranks, self.offsets)) - self.start


def traced_span_ns(graphs: list[RunGraph], offsets: list[int]) -> int:
    """The job span of the traces themselves (aligned clocks)."""
    return (max(g.span_end - o for g, o in zip(graphs, offsets))
            - min(g.span_start - o for g, o in zip(graphs, offsets)))


class JobGraph:
    """The ranks' graphs, their clock offsets and the matched collective calls.

    groups: one list per matched call of (rank position, GPU op index in that rank's graph).
    """

    def __init__(self, graphs: list[RunGraph], offsets: list[int], groups: list[list[tuple[int, int]]]):
        self.graphs = graphs
        self.offsets = [int(o) for o in offsets]
        self.groups = [g for g in groups if len({r for r, _ in g}) >= 2]
        self.h_base = np.cumsum([0] + [g.n_host for g in graphs])
        self.g_base = np.cumsum([0] + [g.n_gpu for g in graphs])
        self.nh, self.ng = int(self.h_base[-1]), int(self.g_base[-1])
        # members of each group as global GPU op ids, and their transfer offsets t_r
        gid = [np.array([self.g_base[r] + j for r, j in grp], np.int64) for grp in self.groups]
        self.members = gid
        ts = self._cat(lambda g, o: g.g_start - o, gpu=True)
        te = self._cat(lambda g, o: g.g_end - o, gpu=True)
        self.t_after = [te[m] - ts[m].max() for m in gid]
        self.member_of = np.full(self.ng, -1, np.int64)
        for k, m in enumerate(gid):
            self.member_of[m] = k

    def _cat(self, fn, gpu: bool) -> np.ndarray:
        parts = [np.asarray(fn(g, o)) for g, o in zip(self.graphs, self.offsets)]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def _merge(self, plans: list[Plan]) -> dict:
        """Global arrays of the merged graph and plans (indices shifted, times aligned)."""
        hb, gb = self.h_base, self.g_base

        def sh(arrs, bases):          # shift indices, keep -1
            return np.concatenate([np.where(a >= 0, a + b, -1) for a, b in zip(arrs, bases)]) \
                if arrs else np.zeros(0, np.int64)
        G, P = self.graphs, plans
        extra = {}
        for r, p in enumerate(P):
            for i, js in p.h_extra.items():
                extra[int(i + hb[r])] = [int(j + gb[r]) for j in js]
        free = [(p.g_launch < 0) & (p.g_spred < 0) & (p.g_xpred < 0) for p in P]
        return dict(
            h_prev=sh([g.h_prev for g in G], hb[:-1]), h_inside=np.concatenate([g.h_inside for g in G]),
            h_anchor=self._cat(lambda g, o: g.h_start - o, False),
            h_key_s=self._cat(lambda g, o: g.h_start - o, False),
            h_key_e=self._cat(lambda g, o: g.h_end - o, False),
            g_key=self._cat(lambda g, o: g.g_start - o, True),
            h_gap=np.concatenate([p.h_gap for p in P]), h_dur=np.concatenate([p.h_dur for p in P]),
            h_target=sh([p.h_target for p in P], gb[:-1]), h_ret=np.concatenate([p.h_ret for p in P]),
            h_extra=extra,
            g_launch=sh([p.g_launch for p in P], hb[:-1]), g_lat=np.concatenate([p.g_lat for p in P]),
            g_spred=sh([p.g_spred for p in P], gb[:-1]), g_qgap=np.concatenate([p.g_qgap for p in P]),
            g_xpred=sh([p.g_xpred for p in P], gb[:-1]), g_xgap=np.concatenate([p.g_xgap for p in P]),
            g_dur=np.concatenate([p.g_dur for p in P]),
            g_floor=np.concatenate([np.where(f, g.g_start - o, -(1 << 62))
                                    for f, g, o in zip(free, G, self.offsets)]))

    def _order(self, m: dict) -> np.ndarray:
        """Events: host starts [0, nh), host ends [nh, 2nh), GPU ops [2nh, 2nh+ng), call ends
        after; aligned time order repaired along every dependency (as replay._order)."""
        nh, ng, nc = self.nh, self.ng, len(self.groups)
        call_key = np.array([8 * int(m["g_key"][mm].max()) + 4 for mm in self.members], np.int64)
        key = np.concatenate([8 * m["h_key_s"] + 2, 8 * m["h_key_e"] + 1, 8 * m["g_key"] + 3,
                              call_key]).astype(np.int64)
        key -= key.min() if len(key) else 0
        hi = np.arange(nh)
        has_prev = m["h_prev"] >= 0
        src_prev = np.where(m["h_inside"], m["h_prev"], nh + m["h_prev"])[has_prev]
        edges = [(src_prev, hi[has_prev]), (hi, nh + hi)]
        t = m["h_target"] >= 0
        edges.append((2 * nh + m["h_target"][t], nh + hi[t]))
        if m["h_extra"]:
            ex = [(2 * nh + j, nh + i) for i, js in m["h_extra"].items() for j in js]
            edges.append((np.array([a for a, _ in ex]), np.array([b for _, b in ex])))
        gi = np.arange(ng)
        for pred, off in ((m["g_launch"], 0), (m["g_spred"], 2 * nh), (m["g_xpred"], 2 * nh)):
            ok = pred >= 0
            edges.append((off + pred[ok], 2 * nh + gi[ok]))
        src = np.concatenate([e[0] for e in edges]).astype(np.int64)
        dst = np.concatenate([e[1] for e in edges]).astype(np.int64)
        if nc:
            # every arrival before its call's end; whatever reads a member's end after the call
            msrc = np.concatenate(self.members)
            mcall = np.concatenate([np.full(len(mm), k) for k, mm in enumerate(self.members)])
            reads = (src >= 2 * nh) & (src < 2 * nh + ng)
            grp = np.where(reads, self.member_of[np.clip(src - 2 * nh, 0, max(ng - 1, 0))], -1)
            rd = grp >= 0
            src = np.concatenate([src, 2 * nh + msrc, 2 * nh + ng + grp[rd]])
            dst = np.concatenate([dst, 2 * nh + ng + mcall, dst[rd]])
        for _ in range(10_000):
            need = key[src] + 1
            bad = need > key[dst]
            if not bad.any():
                break
            np.maximum.at(key, dst[bad], need[bad])
        else:   # pragma: no cover - would need a dependency cycle
            raise ValueError("dependency cycle in the job graph")
        order = np.argsort(key, kind="stable")
        drop = np.zeros(len(key), bool)
        drop[nh:2 * nh] = m["h_target"] < 0
        return order[~drop[order]]

    def _chains(self) -> np.ndarray:
        """Every rank's host items by thread then time (RunGraph.h_chains), in merged ids."""
        parts = [g.h_chains.astype(np.int64) + b for g, b in zip(self.graphs, self.h_base[:-1])]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def _lanes(self) -> np.ndarray:
        """Every rank's GPU streams as numbers (RunGraph.g_lanes), distinct across ranks."""
        parts, base = [], 0
        for g in self.graphs:
            parts.append(g.g_lanes.astype(np.int64) + base)
            base += int(g.g_lanes.max()) + 1 if g.n_gpu else 0
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def run(self, plans: list[Plan] | None = None) -> JobRun:
        """Replay every rank together (plans: one per rank, the graphs' own when None)."""
        plans = plans or [Plan.of(g) for g in self.graphs]
        m = self._merge(plans)
        # the order's length, without holding the order here once sweep has filtered it
        plain = runs_plain(self.nh + int(np.count_nonzero(m["h_target"] >= 0)) + self.ng
                           + len(self.groups))
        hs, he, gs, ge = sweep(self._order(m),
                               tuple(m[k] for k in ("h_prev", "h_inside", "h_anchor", "h_gap",
                                                    "h_dur", "h_target", "h_ret")),
                               tuple(m[k] for k in ("g_launch", "g_lat", "g_spred", "g_qgap",
                                                    "g_xpred", "g_xgap", "g_dur", "g_floor")),
                               m["h_extra"], self.ng, (self.members, self.t_after),
                               chains=self._chains() if plain else None,
                               lanes=self._lanes() if plain else None)
        out = []
        for r, (g, p, o) in enumerate(zip(self.graphs, plans, self.offsets)):
            a, b = int(self.h_base[r]), int(self.h_base[r + 1])
            c, d = int(self.g_base[r]), int(self.g_base[r + 1])
            out.append(Replay(g, p, hs[a:b] + o, he[a:b] + o, gs[c:d] + o, ge[c:d] + o))
        return JobRun(out, self.offsets, len(self.groups))


__all__ = ["JobGraph", "JobRun", "traced_span_ns"]

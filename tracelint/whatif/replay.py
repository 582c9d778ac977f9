"""Discrete-event replay of a RunGraph: every node starts when its dependencies allow.

The graph's arrays fix the order (time order of the trace, repaired where clock skew puts a
node before what it depends on); the one sequential pass (sweep.py) is a loop, because each
node's time depends on nodes just before it: compiled on big graphs when numba is installed.
Everything else (building the order, the bindings the critical path follows) is numpy.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .graph import RunGraph
from .sweep import runs_plain, sweep

#: Nodes whose dependency edges are checked at a time while ordering the events.
EDGE_CHUNK = 1 << 20
#: Plan arrays of times (ns): int32 in the graph where every value fits, int64 once an edit
#: writes them (a scaled or summed duration need not fit).
TIMES = frozenset({"h_dur", "h_gap", "g_dur", "g_lat", "g_qgap", "g_xgap"})


def _shared(a: np.ndarray) -> np.ndarray:
    """A read-only view: the plan reads the array it came from until an edit writes it."""
    v = a.view()
    v.setflags(write=False)
    return v


@dataclass
class Plan:
    """The replay's parameters: the graph's, then changed by edits (see edits.py).

    Copy on write: a plan shares the graph's arrays (and a copy shares its source's) as
    read-only views, and an edit calls `writable(...)` for the arrays it changes, which copies
    only those. Every plan used to copy all eleven arrays, 1.2 GB per replayed fix at 10 M
    kernels; a write an edit forgot to declare fails loudly (read-only array)."""

    h_dur: np.ndarray
    h_gap: np.ndarray
    h_target: np.ndarray
    h_ret: np.ndarray
    h_extra: dict
    g_dur: np.ndarray
    g_launch: np.ndarray
    g_lat: np.ndarray
    g_spred: np.ndarray
    g_qgap: np.ndarray
    g_xpred: np.ndarray
    g_xgap: np.ndarray
    g_stream: np.ndarray        # each op's stream as the plan has it (edits.py's _restream)
    notes: list = field(default_factory=list)

    @classmethod
    def of(cls, g: RunGraph) -> "Plan":
        return cls(h_dur=_shared(g.h_dur), h_gap=_shared(g.h_gap),
                   h_target=_shared(g.h_target), h_ret=_shared(g.h_ret),
                   h_extra={k: list(v) for k, v in g.h_extra.items()},
                   g_dur=_shared(g.g_dur), g_launch=_shared(g.g_launch),
                   g_lat=_shared(g.g_lat), g_spred=_shared(g.g_spred), g_qgap=_shared(g.g_qgap),
                   g_xpred=_shared(g.g_xpred), g_xgap=_shared(g.g_xgap),
                   g_stream=_shared(g.g_stream))

    def writable(self, *names: str) -> "Plan":
        """Own copies of the named arrays, made before an edit writes them (times as int64)."""
        for name in names:
            a = getattr(self, name)
            if not a.flags.writeable:
                setattr(self, name, a.astype(np.int64) if name in TIMES else a.copy())
        return self

    def copy(self) -> "Plan":
        """An independent plan: arrays this plan owns are copied, shared ones stay shared."""
        arrays = {k: (v.copy() if v.flags.writeable else v) for k, v in self.__dict__.items()
                  if isinstance(v, np.ndarray)}
        arrays["h_extra"] = {k: list(v) for k, v in self.h_extra.items()}
        arrays["notes"] = list(self.notes)
        return replace(self, **arrays)


@dataclass
class Replay:
    """Replayed start/end of every node, and the span they cover."""

    graph: RunGraph
    plan: Plan
    h_start: np.ndarray
    h_end: np.ndarray
    g_start: np.ndarray
    g_end: np.ndarray

    @property
    def end(self) -> int:
        ends = [int(a.max()) for a in (self.h_end, self.g_end) if len(a)]
        return max(ends) if ends else self.graph.span_end

    @property
    def span_ns(self) -> int:
        return self.end - self.graph.span_start

    @property
    def work_end(self) -> int:
        """End of the GPU work and of the threads that drive it (launch or wait): what a fix
        can move. Threads that never touch the GPU keep their traced times."""
        d = self.graph.h_driving
        ends = [int(self.g_end.max())] if len(self.g_end) else []
        if d.any():        # a masked max: h_end[d] copied every end (184 MB at 10 M kernels)
            ends.append(int(self.h_end.max(where=d, initial=np.iinfo(np.int64).min)))
        return max(ends) if ends else self.end

    @property
    def work_span_ns(self) -> int:
        return self.work_end - self.graph.span_start

    def work_ends_of(self, pids) -> dict[int, int]:
        """work_end of each of these processes alone: its GPU ops and its threads that drive
        them. A trace of several processes (ranks, replicas) ends with the slowest; a fix on
        another process shortens that process's own run, which this measures."""
        g = self.graph
        item_pid = g.thread_pid[g.h_thread] if len(g.h_thread) else np.zeros(0, np.int64)
        low = np.iinfo(np.int64).min
        out = {}
        for pid in pids:
            ends = [int(self.g_end.max(where=g.g_pid == pid, initial=low))] if len(self.g_end) \
                else []
            if len(self.h_end):
                ends.append(int(self.h_end.max(where=g.h_driving & (item_pid == pid), initial=low)))
            end = max(ends, default=low)
            if end > low:
                out[int(pid)] = end
        return out

    def windows(self) -> dict[int, tuple[int, int]]:
        """Replayed (start, end) of every iteration (ProfilerStep ranges), by step number."""
        g = self.graph
        out: dict[int, list] = {}
        for i in np.flatnonzero(g.h_step >= 0):
            out.setdefault(int(g.h_step[i]), [0, 0])[int(g.h_step_edge[i])] = int(self.h_start[i])
        return {k: (v[0], v[1]) for k, v in sorted(out.items())}

    def iterations(self) -> dict[int, int]:
        """Replayed duration of every iteration, by step number."""
        return {k: b - a for k, (a, b) in self.windows().items()}


def _order(g: RunGraph, p: Plan) -> np.ndarray:
    """Event order: host starts, host ends and GPU ops by their traced time, then repaired
    (vectorised passes) wherever a node sorts before one it depends on.

    Only blocking calls have an end event (sweep.py): the end of any other call is its start
    plus its duration, set at its start. Such ends are not sorted at all (23 M of 56 M events
    at 10 M kernels): the item after one sorts two steps after the call's start, which is all
    the end event passed on (its traced time needs no floor: an item after another started at
    or after that one's traced end, graph._chain). Keys are kept for [host starts | blocking
    ends | GPU ops] and mapped back to event ids (< nh, < 2 nh, < 2 nh + ng) after the sort."""
    nh, ng = g.n_host, g.n_gpu
    blocking = np.flatnonzero(p.h_target >= 0)     # calls with an end event, ascending
    nb = len(blocking)
    first_op = nh + nb                              # key position of GPU op 0
    key = np.empty(first_op + ng, dtype=np.int64)   # written in place: no temporaries
    np.multiply(g.h_start, 8, out=key[:nh])
    key[:nh] += 2
    np.multiply(g.h_end_of(blocking), 8, out=key[nh:first_op])
    key[nh:first_op] += 1
    np.multiply(g.g_start, 8, out=key[first_op:])
    key[first_op:] += 3
    lo = key.min() if len(key) else np.int64(0)    # int64 arithmetic, as the keys (ns x 8)
    key -= lo

    def end_of(items: np.ndarray) -> np.ndarray:
        """Key position of the end event of blocking calls."""
        return nh + np.searchsorted(blocking, items)

    def edges():
        """(src, dst, steps) of every dependency as key positions, EDGE_CHUNK nodes at a time:
        on 10 M kernels all edges at once, with their temporaries, cost gigabytes, and one
        group at a time (a node array each: 23 M host items) still half a gigabyte."""
        for a in range(0, nh, EDGE_CHUNK):          # an item after (or inside) another ...
            prev = g.h_prev[a:a + EDGE_CHUNK]
            has = prev >= 0
            dst = a + np.flatnonzero(has)
            src = prev[has]                         # ... that one's start ...
            after = ~g.h_inside[dst]
            via_end = after & (p.h_target[src] >= 0)  # ... or its end event, when it has one
            src[via_end] = end_of(src[via_end])
            yield src, dst, (after & ~via_end).view(np.int8) + np.int8(1)
        for a in range(0, nb, EDGE_CHUNK):
            calls = blocking[a:a + EDGE_CHUNK]
            at_end = nh + a + np.arange(len(calls))
            yield calls, at_end, 1
            yield first_op + p.h_target[calls], at_end, 1
        ex = [(first_op + j, i) for i, js in p.h_extra.items() if p.h_target[i] >= 0 for j in js]
        if ex:
            yield (np.array([a for a, _ in ex], np.int64),
                   end_of(np.array([i for _, i in ex], np.int64)), 1)
        for pred, off in ((p.g_launch, 0), (p.g_spred, first_op), (p.g_xpred, first_op)):
            for a in range(0, ng, EDGE_CHUNK):
                part = pred[a:a + EDGE_CHUNK]
                has = part >= 0
                yield off + part[has], first_op + a + np.flatnonzero(has), 1

    # raise each node's key above its dependencies' until none sorts before one it depends
    # on; applying the edges a chunk at a time reaches the same least fixpoint as all at once
    for _ in range(64):
        moved = False
        for src, dst, steps in edges():
            need = key[src] + steps
            bad = need > key[dst]
            if bad.any():
                np.maximum.at(key, dst[bad], need[bad])
                moved = True
        if not moved:
            break
    else:   # pragma: no cover - would need a dependency cycle
        raise ValueError("dependency cycle in the run graph")
    order = np.argsort(key, kind="stable")
    del key
    is_end, is_op = (order >= nh) & (order < first_op), order >= first_op
    order[is_op] += nh - nb                         # GPU op j: 2 nh + j
    order[is_end] = nh + blocking[order[is_end] - nh]
    return order


def replay(g: RunGraph, plan: Plan | None = None) -> Replay:
    """Run the graph with a plan (the graph's own when None) and return every node's times."""
    p = plan or Plan.of(g)
    # an op with no dependency at all keeps its traced start
    free = (p.g_launch < 0) & (p.g_spred < 0) & (p.g_xpred < 0)
    g_floor = np.where(free, g.g_start, -(1 << 62)).astype(np.int64)
    # the order's length, without holding the order here once sweep has filtered it
    plain = runs_plain(g.n_host + int(np.count_nonzero(p.h_target >= 0)) + g.n_gpu)
    hs, he, gs, ge = sweep(_order(g, p), (g.h_prev, g.h_inside, g.h_start, p.h_gap, p.h_dur,
                                          p.h_target, p.h_ret),
                           (p.g_launch, p.g_lat, p.g_spred, p.g_qgap, p.g_xpred, p.g_xgap,
                            p.g_dur, g_floor), p.h_extra, g.n_gpu,
                           chains=g.h_chains if plain else None,
                           lanes=g.g_lanes if plain else None)
    return Replay(g, p, hs, he, gs, ge)

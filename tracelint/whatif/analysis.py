"""One entry point for callers (CLI, info, reports, savings): build, replay, critical path,
and the same with edits, as plain data."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..heap import trim
from ..timeline.model import Timeline
from .critical_path import critical_path
from .edits import EditSet
from .graph import RunGraph, build
from .replay import Replay, replay


class WhatIf:
    """A trace's graph and its replay without edits, built once and reused for every edit."""

    def __init__(self, tl: Timeline):
        self.tl = tl
        self.graph: RunGraph = build(tl)
        trim()                     # the build's freed frames, before the replays (tracelint.heap)
        self.base: Replay | None = replay(self.graph)
        self._base_span = self.base.work_span_ns
        self._base_its = self.base.iterations()
        g_pid = self.graph.g_pid      # one process: a stride-0 column, not sorted (10 M ops)
        pids = [int(p) for p in (g_pid[:1] if g_pid.strides == (0,) else pd.unique(g_pid))
                if p >= 0]
        #: work end of each process driving a GPU, when there are several that run no
        #: collective together (else empty)
        self._base_own = self.base.work_ends_of(pids) if len(pids) > 1 and \
            not self._coupled() else {}

    def release_base(self) -> None:
        """Drop the base replay's times once its critical path is taken: savings need only its
        totals, and at 10 M kernels the times are 0.5 GB beside every replay with edits."""
        self.base = None

    def run(self, edits: Sequence) -> Replay:
        out = replay(self.graph, EditSet(list(edits)).plan(self.graph))
        trim()
        return out

    def _coupled(self) -> bool:
        """Whether two or more processes run collectives (NCCL, RCCL): in the real run each
        waits for the others at every one, which this graph of one trace does not model, so
        a fix on one process alone cannot be measured on its own run."""
        g = self.graph
        comm = np.asarray(g.g_class == "communication", dtype=bool)
        return bool(comm.any()) and len(np.unique(g.g_pid[comm])) > 1

    def process_of(self, pid: int | None, device: int | None) -> int | None:
        """The process whose own run a finding's saving is measured on, in a trace of several
        processes driving GPUs: its pid, else the one process that uses its device; None in a
        trace of one process, or when neither says."""
        if pid in self._base_own:
            return pid
        if self._base_own and device is not None:
            on = np.unique(self.graph.g_pid[self.graph.g_device == device])
            if len(on) == 1 and int(on[0]) in self._base_own:
                return int(on[0])
        return None

    def saving(self, edits: Sequence) -> tuple[int, dict[int, int], dict[int, int]]:
        """Wall time saved by the edits over the run, per iteration, and per process (the
        work end of each process alone, when the trace holds several; see Replay.work_ends_of)
        (ns, never negative noise: a slower result is reported as it is)."""
        e = self.run(edits)
        e_it = e.iterations()
        own = {p: self._base_own[p] - end for p, end in e.work_ends_of(self._base_own).items()}
        return (self._base_span - e.work_span_ns,
                {k: v - e_it.get(k, v) for k, v in self._base_its.items()}, own)

    def critical_path_dict(self, r: Replay | None = None, top: int = 10) -> dict[str, Any]:
        r = r or self.base
        return critical_path(r).to_dict(r.work_span_ns, r.windows(), top=top)

    def to_dict(self, edits: Sequence = (), top: int = 10) -> dict[str, Any]:
        b = self.base
        out: dict[str, Any] = {
            "span_ns": int(self.tl.span_ns), "replayed_span_ns": b.span_ns,
            "work_span_ns": b.work_span_ns, "critical_path": self.critical_path_dict(b, top)}
        trace_it = _trace_iterations(self.tl)
        its = [{"step": k, "span_ns": trace_it.get(k), "replayed_ns": v}
               for k, v in b.iterations().items()]
        if edits:
            e = self.run(edits)
            out.update({"edited_span_ns": e.span_ns, "edited_work_span_ns": e.work_span_ns,
                        "saving_ns": b.work_span_ns - e.work_span_ns,
                        "edited_critical_path": self.critical_path_dict(e, top)})
            e_it = e.iterations()
            for it in its:
                it["edited_ns"] = e_it.get(it["step"])
            out["notes"] = list(e.plan.notes)
        out["iterations"] = its
        return out


def _trace_iterations(tl: Timeline) -> dict[int, int]:
    r = tl.ranges
    if not len(r):
        return {}
    st = r[(r["kind"] == "step").to_numpy()]
    return {int(s): int(e - b) for s, b, e in zip(st["step"], st["start"], st["end"])}

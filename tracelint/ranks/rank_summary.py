"""RankSummary: everything the reduce step of a job knows about one rank (picklable, small),
and how a rank is named from its file name."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

_RANK_NAME = re.compile(r"(?:^|[^a-z0-9])rank[-_]?(\d+)(?:of(\d+))?", re.I)
_OF_NAME = re.compile(r"(?:^|[^a-z0-9])(\d+)of(\d+)(?:[^0-9]|$)", re.I)


def rank_from_name(name: str) -> tuple[int | None, int | None]:
    """(rank, world_size) from a file name: rank3, rank_3, rank-3, rank3of8, _3of8."""
    base = os.path.basename(name.rstrip("/"))
    m = _RANK_NAME.search(base)
    if m:
        return int(m.group(1)), (int(m.group(2)) if m.group(2) else None)
    m = _OF_NAME.search(base)
    if m and int(m.group(1)) < int(m.group(2)):
        return int(m.group(1)), int(m.group(2))
    return None, None


# ----- the summary ------------------------------------------------------------------------------
@dataclass
class RankSummary:
    """Everything the reduce step knows about one rank. Picklable; a few hundred KB at most."""

    source: str
    label: str                              # file name, plus #pid when a file held several ranks
    process: int | None = None              # pid, when one file held several processes (nsys)
    ok: bool = True
    error: str | None = None
    rank: int | None = None                 # final rank id (assigned by the reduce step)
    rank_hint: int | None = None
    rank_source: str = ""                   # distributedInfo | nsys MPI rank | file name | ...
    world_size: int | None = None
    format: str = ""
    producer: str = ""
    backend: str | None = None
    devices: list[dict[str, Any]] = field(default_factory=list)
    start_ns: int = 0                       # trace clock
    end_ns: int = 0
    epoch_start_ns: int | None = None       # Unix epoch, when the trace says
    epoch_end_ns: int | None = None
    iterations: pd.DataFrame = field(default_factory=pd.DataFrame)
    pseudo_iterations: bool = False         # no iteration markers: one iteration = whole trace
    collectives: pd.DataFrame = field(default_factory=pd.DataFrame)
    overlap: pd.DataFrame = field(default_factory=pd.DataFrame)   # compute inside comm kernels (cid)
    top_kernels: list[tuple[str, int, int]] = field(default_factory=list)  # name, total ns, count
    totals: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    suppressed: int = 0
    notes: list[str] = field(default_factory=list)
    timing_s: dict[str, float] = field(default_factory=dict)
    worker_peak_rss_bytes: int | None = None
    worker: str | None = None
    # the rank's what-if graph (whatif.graph.RunGraph), built in the map step for the job replay
    # so the reduce step need not load every trace again; dropped once the replay is made
    graph: Any = field(default=None, repr=False, compare=False)
    # what the output sink must remove (secrets.sink.found_in of the worker's copy of the trace);
    # moved to JobReport.scanned by lint_job, never serialised
    found_secrets: Any = field(default=None, repr=False, compare=False)

    @property
    def steps(self) -> int:
        return int(len(self.iterations))

    def findings_by_severity(self) -> dict[str, int]:
        out = {"error": 0, "warning": 0, "info": 0}
        for f in self.findings:
            out[f["severity"]] = out.get(f["severity"], 0) + 1
        return out


ITER_COLUMNS = ("step", "start", "end", "dur_ns", "compute_ns", "comm_ns", "exposed_comm_ns",
                "busy_ns", "kernels")
COLL_COLUMNS = ("device", "stream", "start", "end", "dur_ns", "kernel", "coll", "kind", "pg",
                "step", "occurrence", "k_in_step", "exposed_ns", "overlap_ns", "in_nelems",
                "out_nelems", "dtype", "bytes", "group_size", "size_source", "cid")

"""The unified Timeline: columnar tables every importer fills and every rule reads."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from . import classify, intervals
from .schema import (GPU_ACTIVITY_TABLES, INSTANT_TABLES, TABLES, empty_table,
                     share_constant_columns)


@dataclass
class Device:
    """One GPU as the trace describes it; None where the source does not say."""

    id: int
    name: str | None = None
    vendor: str | None = None           # nvidia | amd | None
    sm_count: int | None = None
    memory_bytes: int | None = None
    memory_bandwidth_bps: float | None = None   # peak DRAM bytes/s
    clock_hz: float | None = None
    compute_capability: str | None = None
    #: Per-SM limits the trace records (keys: registers, warps, blocks, shared_memory in
    #: bytes); missing keys fall back to the compute-capability table (timeline.occupancy).
    sm_limits: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


@dataclass
class Meta:
    """What the trace is and what it captured.

    captured: names of sources that were recorded (cuda, nvtx, osrt, python_stacks,
    gpu_metrics, shapes, ...). A table that is empty while its source is captured means
    "none happened"; empty and not captured means "not captured".
    """

    source: str = ""
    format: str = ""                 # "nsys-sqlite" | "kineto-json"
    format_version: str = ""         # nsys exporter version, or Kineto schemaVersion
    producer: str = ""               # e.g. "PyTorch 2.3.0", "Nsight Systems 2024.5.1"
    devices: list[Device] = field(default_factory=list)
    rank: int | None = None
    world_size: int | None = None
    captured: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)   # inferences and importer warnings
    raw_event_counts: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    load_s: float = 0.0              # seconds the importer took: a report's timing_s["load"]

    def device(self, device_id: int) -> Device | None:
        return next((d for d in self.devices if d.id == device_id), None)


@dataclass
class Timeline:
    """Columnar tables (see schema.TABLES) plus metadata; times are integer ns. Nothing writes
    into a loaded table: its constant columns are shared read-only views
    (schema.share_constant_columns)."""

    kernels: pd.DataFrame = field(default_factory=lambda: empty_table("kernels"))
    copies: pd.DataFrame = field(default_factory=lambda: empty_table("copies"))
    memsets: pd.DataFrame = field(default_factory=lambda: empty_table("memsets"))
    api_calls: pd.DataFrame = field(default_factory=lambda: empty_table("api_calls"))
    ranges: pd.DataFrame = field(default_factory=lambda: empty_table("ranges"))
    syncs: pd.DataFrame = field(default_factory=lambda: empty_table("syncs"))
    metrics: pd.DataFrame = field(default_factory=lambda: empty_table("metrics"))
    python_frames: pd.DataFrame = field(default_factory=lambda: empty_table("python_frames"))
    memory: pd.DataFrame = field(default_factory=lambda: empty_table("memory"))
    meta: Meta = field(default_factory=Meta)
    #: Per-kernel hardware counters recorded in the trace itself (CUPTI range profiler):
    #: launch (row in kernels), kernel (name), metric, value, unit; the --ncu CSV's columns.
    kernel_counters: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["launch", "kernel", "metric", "value", "unit"]))

    # ----- basic facts -------------------------------------------------------------------
    def table(self, name: str) -> pd.DataFrame:
        if name not in TABLES:
            raise KeyError(name)
        return getattr(self, name)

    @property
    def has_gpu_activity(self) -> bool:
        return any(len(self.table(t)) for t in GPU_ACTIVITY_TABLES)

    @cached_property
    def gpu_activity(self) -> pd.DataFrame:
        """Kernels, copies and memsets in one frame, sorted by (device, start).

        Columns: device, stream, start, end, correlation, name, table (a categorical over
        GPU_ACTIVITY_TABLES: a byte a row, where a str column was a pointer), row (row in its
        table).
        """
        return self.gpu_activity_by(("device", "start"))

    def gpu_activity_by(self, keys: tuple[str, ...]) -> pd.DataFrame:
        """gpu_activity's rows in a new frame sorted stably by `keys` (ties in table order,
        then row), not kept: the what-if graph's (device, stream, start) order straight from
        the tables, without the cached frame and a sorted copy of it (0.9 GB at 10 M kernels).
        """
        table_dtype = pd.CategoricalDtype(GPU_ACTIVITY_TABLES)
        parts = [(i, self.table(t)) for i, t in enumerate(GPU_ACTIVITY_TABLES) if len(self.table(t))]
        if not parts:
            return pd.DataFrame({"device": pd.Series([], dtype="int64"),
                                 "stream": pd.Series([], dtype="int64"),
                                 "start": pd.Series([], dtype="int64"),
                                 "end": pd.Series([], dtype="int64"),
                                 "correlation": pd.Series([], dtype="int64"),
                                 "name": pd.Series([], dtype="category"),
                                 "table": pd.Series([], dtype=table_dtype),
                                 "row": pd.Series([], dtype="int64")})
        # one array per column, never a 2-D block: a block keeps every row of a column that
        # share_constant_columns replaces (device and stream: 160 MB at 10 M kernels)
        def column(c: str) -> np.ndarray:
            return np.concatenate([df[c].to_numpy() for _, df in parts])
        key = [column(k) for k in keys]
        order = None if len(key) == 2 and _sorted_by(*key) else np.lexsort(key[::-1])  # stable
        del key

        def ordered(a):
            return a if order is None else a[order]
        cols = {"device": ordered(column("device")), "stream": ordered(column("stream")),
                "start": ordered(column("start")), "end": ordered(column("end")),
                "correlation": ordered(column("correlation")),
                "name": ordered(union_categoricals([df["name"].array for _, df in parts],
                                                   ignore_order=True)),
                "table": pd.Categorical.from_codes(ordered(np.concatenate(
                    [np.full(len(df), i, np.int8) for i, df in parts])), dtype=table_dtype),
                "row": ordered(np.concatenate([np.arange(len(df), dtype=np.int64)
                                               for _, df in parts]))}
        return share_constant_columns(pd.DataFrame(cols, copy=False))

    @cached_property
    def span(self) -> tuple[int, int]:
        """(first start, last end) over every timed table, in ns; (0, 0) when empty."""
        lo, hi = [], []
        for t in TABLES:
            df = self.table(t)
            if len(df) == 0:
                continue
            col_s = "ts" if t in INSTANT_TABLES else "start"
            col_e = "ts" if t in INSTANT_TABLES else "end"
            lo.append(int(df[col_s].min()))
            hi.append(int(df[col_e].max()))
        return (min(lo), max(hi)) if lo else (0, 0)

    @property
    def span_ns(self) -> int:
        return self.span[1] - self.span[0]

    @cached_property
    def kernel_class(self) -> pd.Categorical:
        """Class of every kernel row (gemm, attention, communication, dequant, ...)."""
        return classify.classify_categorical(self.kernels["name"], classify.kernel_class)

    @cached_property
    def api_role(self) -> pd.Categorical:
        """Role of every api_calls row (launch, sync, copy, memset, alloc, other)."""
        return classify.classify_categorical(self.api_calls["name"], classify.api_role)

    def devices_in_use(self) -> list[int]:
        ids: set[int] = set()
        for t in GPU_ACTIVITY_TABLES:
            ids.update(int(x) for x in self.table(t)["device"].unique())
        return sorted(ids)

    def busy_intervals(self, device: int) -> tuple[np.ndarray, np.ndarray]:
        """Merged busy intervals on one device (union of kernels, copies, memsets); made once
        per device (rules ask for them per window) and read-only."""
        return self._busy_union(device)[:2]

    def busy_in(self, device: int, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """ns of the device's busy time overlapping each [start, end) window; the prefix sums
        are made once per device (rules ask window by window: 860 calls on a 2 GB trace)."""
        bs, be, cum = self._busy_union(device)
        return intervals.overlap_each(start, end, bs, be, cum)

    def _busy_union(self, device: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        got = self._busy.get(device)
        if got is None:
            g = self.gpu_activity
            sel = g["device"].to_numpy() == device
            bs, be = intervals.merge(g["start"].to_numpy()[sel], g["end"].to_numpy()[sel])
            got = (bs, be, np.r_[0, np.cumsum(be - bs)])
            for a in got:
                a.setflags(write=False)
            self._busy[device] = got
        return got

    @cached_property
    def _busy(self) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        return {}

    def release_rule_caches(self) -> None:
        """Forget the busy intervals and the gpu_activity frame made so far (the next ask makes
        them again): the rules read them, the what-if stage after them does not, and at 10 M
        kernels they are 230 and 330 MB beside its graph."""
        self.__dict__.pop("_busy", None)
        self.__dict__.pop("gpu_activity", None)

    def gpu_busy_fraction(self, device: int) -> float:
        """Busy time over the device's own active window (first to last activity)."""
        s, e = self.busy_intervals(device)
        if len(s) == 0:
            return 0.0
        window = int(e.max() - s.min())
        return float((e - s).sum() / window) if window > 0 else 1.0

    def counts(self) -> dict[str, int]:
        return {
            "kernels": len(self.kernels), "copies": len(self.copies),
            "memsets": len(self.memsets), "api_calls": len(self.api_calls),
            "ranges": len(self.ranges), "syncs": len(self.syncs),
            "metrics": len(self.metrics), "python_frames": len(self.python_frames),
            "memory": len(self.memory),
        }

    def launch_index(self, table: str) -> np.ndarray:
        """For each row of a GPU table (kernels, copies, memsets), the api_calls row that
        launched it, or -1 (timeline.links)."""
        return self._launch_index[table]

    @cached_property
    def _launch_index(self) -> dict[str, np.ndarray]:
        from .links import launch_rows
        per_process = self.meta.format == "nsys-sqlite"
        return {t: launch_rows(self.api_calls, self.table(t), per_process) for t in GPU_ACTIVITY_TABLES}

    def correlation_resolved_fraction(self) -> float | None:
        """Share of kernels linked to the host API call that launched them (None: no kernels)."""
        if len(self.kernels) == 0:
            return None
        return float((self.launch_index("kernels") >= 0).mean())

    def graph(self, **kwargs):
        """The networkx view (launch, nesting, stream order); see timeline.graph."""
        from .graph import build_graph
        return build_graph(self, **kwargs)


def _sorted_by(major: np.ndarray, minor: np.ndarray) -> bool:
    """Whether rows are already in (major, minor) order: then a stable sort is the identity,
    and its copy of every column (10 M kernels: 0.5 GB) is skipped."""
    d = np.diff(major)
    if (d < 0).any():
        return False
    same = d == 0
    return bool((minor[1:][same] >= minor[:-1][same]).all())

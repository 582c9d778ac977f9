"""The memory timeline: allocated and reserved bytes over time per device, from the Timeline's
memory table (torch.profiler `[memory]` events, nsys CUDA_GPU_MEMORY_USAGE_EVENTS).

- allocated: the bytes the framework's allocator handed out (torch "Total Allocated");
- reserved: the bytes it holds from the driver (torch "Total Reserved": the caching
  allocator's segments; nsys: the running sum of cudaMalloc/cudaFree-level events, which for a
  PyTorch process are the caching allocator's segments too);
- fragmentation: reserved - allocated (held by the cache, not by any tensor);
- churn per iteration: allocations and frees inside each ProfilerStep, and reserved memory
  released and re-acquired inside it (`torch.cuda.empty_cache()` in the loop).

Pure numpy/pandas over the Timeline: rules, `tracelint info` and the reports share it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import re

import numpy as np
import pandas as pd

#: emit_nvtx op ranges ("aten::mul, seq = 3, op_id = 12"): the op is the first word.
_EMIT_NVTX = re.compile(r"^([^,\s]+), (?:seq|op_id|sizes|stashed seq) = ")
#: Range kinds that can own an allocation (iterations and GPU-side annotations cannot).
_OWNER_KINDS = ("op", "annotation", "nvtx")


def enclosing_ops(ranges: pd.DataFrame, pid: np.ndarray, tid: np.ndarray,
                  ts: np.ndarray) -> np.ndarray:
    """Per (pid, tid, ts): the name of the innermost CPU op / annotation / NVTX range on that
    thread with start <= ts < end (or ts == start for an empty range), "" when none."""
    q, short = innermost_owners(ranges, pid, tid, ts)
    return np.array(short, dtype=object)[q]


def enclosing_ops_categorical(ranges: pd.DataFrame, pid: np.ndarray, tid: np.ndarray,
                              ts: np.ndarray) -> pd.Categorical:
    """enclosing_ops as a Categorical (the same categories and codes as one made from its
    strings), made from integer codes: no string per row (168 k [memory] events of the
    287 MB reference: 0.070-0.100 s -> 0.044-0.073 s with the Categorical)."""
    return owners_categorical(*innermost_owners(ranges, pid, tid, ts))


def owners_categorical(q: np.ndarray, short: list[str]) -> pd.Categorical:
    """The Categorical of innermost_owners' answer (computed apart from it: by a parallel
    load's worker, importers/kineto_tables.ranges_work)."""
    used = np.unique(q)
    cats = sorted({short[i] for i in used})          # names may repeat: "", emit_nvtx ops
    final = np.zeros(len(short), np.int64)
    final[used] = [cats.index(short[i]) for i in used]
    return pd.Categorical.from_codes(final[q], categories=cats)


def innermost_owners(ranges: pd.DataFrame, pid, tid, ts) -> tuple[np.ndarray, list[str]]:
    """(per query, the index of its innermost owner range's short name; the short name of each
    distinct range name, with "" last for none); vectorised per thread of the queries, one
    search per nesting level. A thread's owner ranges are sorted once by (depth, start), so
    each level is one contiguous slice (168 k events of the reference: 57 -> 25 ms)."""
    n = len(ts)
    if n == 0 or len(ranges) == 0:
        return np.zeros(n, np.int64), [""]
    r = ranges
    rs, re_ = r["start"].to_numpy(), r["end"].to_numpy()
    owner = r["kind"].isin(_OWNER_KINDS).to_numpy() & (re_ >= rs)
    cat = pd.Categorical(r["name"].array)      # each distinct name parsed once
    short = [m.group(1) if (m := _EMIT_NVTX.match(n)) else n for n in cat.categories.astype(str).tolist()]
    short.append("")                           # no name (code -1) and no enclosing range
    code = np.arange(len(short))[np.asarray(cat.codes)]
    out = np.full(n, len(short) - 1, np.int64)
    if not owner.any():
        return out, short
    rkey = _thread_key(r["pid"].to_numpy(), r["tid"].to_numpy())
    qkey = _thread_key(np.asarray(pid, np.int64), np.asarray(tid, np.int64))
    ts = np.asarray(ts, np.int64)
    depth = r["depth"].to_numpy()
    for key in np.unique(qkey):            # the few threads that allocate
        q = np.flatnonzero(qkey == key)
        tq = ts[q]
        rows = np.flatnonzero(owner & (rkey == key))
        if not len(rows):
            continue
        rows = rows[_by_level_then_start(depth[rows], rs[rows])]
        lvl, starts = depth[rows], rs[rows]
        cut = np.flatnonzero(lvl[1:] != lvl[:-1]) + 1
        for lo, hi in zip([0, *cut.tolist()], [*cut.tolist(), len(rows)]):
            # outermost first: deeper levels overwrite
            pos = np.searchsorted(starts[lo:hi], tq, side="right") - 1
            c = rows[lo:hi][np.clip(pos, 0, None)]
            hit = (pos >= 0) & ((re_[c] > tq) | (rs[c] == tq))
            out[q[hit]] = code[c[hit]]
    return out, short


def _by_level_then_start(depth: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The stable order by (depth, start). Ranges come sorted by start (the importers sort
    them), so a stable sort by depth alone gives it, a radix sort when depth fits 16 bits."""
    if len(start) > 1 and (start[1:] < start[:-1]).any():
        return np.lexsort((start, depth))
    small = len(depth) and 0 <= depth.min() and depth.max() < 1 << 15
    return np.argsort(depth.astype(np.int16) if small else depth, kind="stable")


def _thread_key(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    return (pid << 32) | (tid & 0xFFFFFFFF)


@dataclass
class StepChurn:
    """Allocator activity inside one iteration on one device."""

    step: int
    allocs: int = 0
    alloc_bytes: int = 0
    frees: int = 0
    free_bytes: int = 0
    reserved_grown: int = 0        # bytes the allocator obtained from the driver in the step
    reserved_released: int = 0     # bytes it gave back to the driver in the step

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class DeviceMemory:
    """The memory timeline of one device (device -1: host memory)."""

    device_type: str
    device: int
    source: str                    # allocator | driver
    events: int
    allocs: int
    frees: int
    capacity: int | None           # device memory size from the trace's device properties
    peak_allocated: int | None = None
    peak_reserved: int | None = None
    #: The event at each peak: ts, iteration (None outside), op ("" unknown), pid, tid, row.
    at_peak_allocated: dict[str, Any] = field(default_factory=dict)
    at_peak_reserved: dict[str, Any] = field(default_factory=dict)
    fragmentation_at_peak: int | None = None     # reserved - allocated at the reserved peak
    max_fragmentation: int | None = None
    steps: list[StepChurn] = field(default_factory=list)
    #: Plot series: (ts, allocated, reserved) per event, -1 where the source has no value.
    ts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    allocated: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    reserved: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)

    @property
    def label(self) -> str:
        return "host (CPU)" if self.device < 0 else f"{self.device_type.upper()} {self.device}"

    @property
    def peak(self) -> int | None:
        """The peak that matters for running out of memory: reserved when known."""
        return self.peak_reserved if self.peak_reserved else self.peak_allocated

    def to_dict(self, points: int = 0) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("ts", "allocated", "reserved", "steps")}
        out["label"] = self.label
        out["steps"] = [s.to_dict() for s in self.steps]
        if points:
            out["series"] = series_points(self, points)
        return out


def device_memory(tl, steps: pd.DataFrame | None = None) -> list[DeviceMemory]:
    """The memory timeline of each device in tl.memory (sorted: host first, then devices)."""
    m = tl.memory
    if len(m) == 0:
        return []
    if steps is None:
        r = tl.ranges
        steps = r[r["kind"] == "step"].sort_values("start") if len(r) else r
    return [_one_device(tl, m, rows, steps) for rows in _device_rows(m)]


def _device_rows(m: pd.DataFrame) -> list[np.ndarray]:
    """The rows of each (device, device type) present, in file order, the groups ordered by
    device, then device type (what groupby(sort=True, observed=True) gives; a missing type is
    dropped as there), without a copy of every column per group."""
    dev = m["device"].to_numpy()
    kind = np.asarray(m["device_type"].array.codes, np.int64)
    keep = np.flatnonzero(kind >= 0)
    order = keep[np.lexsort((kind[keep], dev[keep]))]
    d, k = dev[order], kind[order]
    cut = np.flatnonzero((d[1:] != d[:-1]) | (k[1:] != k[:-1])) + 1
    return np.split(order, cut) if len(order) else []


def _one_device(tl, m: pd.DataFrame, rows: np.ndarray, steps: pd.DataFrame) -> DeviceMemory:
    first = int(rows[0])
    dtype, dev = str(m["device_type"].iat[first]), int(m["device"].iat[first])
    source = str(m["source"].iat[first])
    ts = m["ts"].to_numpy()[rows]
    nbytes = m["bytes"].to_numpy()[rows]
    alloc, res = m["total_allocated"].to_numpy()[rows], m["total_reserved"].to_numpy()[rows]
    d = tl.meta.device(dev) if dev >= 0 else None
    cap = d.memory_bytes if d is not None and d.memory_bytes else None
    dm = DeviceMemory(dtype, dev, source, len(rows), int((nbytes > 0).sum()),
                      int((nbytes < 0).sum()), cap, ts=ts, allocated=alloc, reserved=res)
    step_no = _step_of(steps, ts)
    if (alloc >= 0).any():
        i = int(np.argmax(np.where(alloc >= 0, alloc, -1)))
        dm.peak_allocated = int(alloc[i])
        dm.at_peak_allocated = _at(m, int(rows[i]), step_no[i])
    has_res = (res >= 0).any() and res.max() > 0     # CPU: reserved is always 0 (no cache)
    if has_res:
        i = int(np.argmax(np.where(res >= 0, res, -1)))
        dm.peak_reserved = int(res[i])
        dm.at_peak_reserved = _at(m, int(rows[i]), step_no[i])
        both = (alloc >= 0) & (res >= 0)
        if both.any():
            frag = np.where(both, res - alloc, -1)
            dm.fragmentation_at_peak = int(frag[i]) if both[i] else None
            dm.max_fragmentation = int(frag.max())
    dm.steps = _churn(step_no, nbytes, res if has_res else None, source)
    return dm


def _at(m: pd.DataFrame, i: int, step: int) -> dict[str, Any]:
    """Row i of the memory table, in iteration `step` (-1: none)."""
    return {"ts": int(m["ts"].iat[i]), "iteration": int(step) if step >= 0 else None,
            "op": str(m["op"].iat[i]), "pid": int(m["pid"].iat[i]), "tid": int(m["tid"].iat[i]),
            "bytes": int(m["bytes"].iat[i])}


def _step_of(steps: pd.DataFrame, ts: np.ndarray) -> np.ndarray:
    """Iteration number per timestamp (by time: the allocator runs on several threads), -1."""
    if len(steps) == 0:
        return np.full(len(ts), -1, np.int64)
    ss, se = steps["start"].to_numpy(), steps["end"].to_numpy()
    i = np.searchsorted(ss, ts, side="right") - 1
    ok = (i >= 0) & (ts < se[np.clip(i, 0, None)])
    return np.where(ok, steps["step"].to_numpy()[np.clip(i, 0, None)], -1)


def _churn(step_no: np.ndarray, nbytes: np.ndarray, res: np.ndarray | None,
           source: str) -> list[StepChurn]:
    """Per iteration: allocations, frees and the reserved bytes grown and released. Reserved
    changes come from the change of the reserved total between consecutive events (allocator
    events), or are the events themselves (driver events: each one is a segment)."""
    if source == "driver":
        delta = nbytes
    elif res is not None:
        delta = np.diff(res, prepend=res[0] if len(res) else 0)
        delta = np.where((res >= 0) & (np.roll(res, 1) >= 0), delta, 0)
    else:
        delta = np.zeros(len(nbytes), np.int64)
    # events grouped by iteration once, each sum a reduceat over the groups (a mask of every
    # event per iteration was quadratic in the trace's length)
    inside = np.flatnonzero(step_no >= 0)
    order = inside[np.argsort(step_no[inside], kind="stable")]
    steps = step_no[order]
    first = np.flatnonzero(np.r_[True, steps[1:] != steps[:-1]]) if len(order) else order
    b, dr = np.asarray(nbytes, np.int64)[order], np.asarray(delta, np.int64)[order]

    def per_step(x: np.ndarray) -> list[int]:
        return np.add.reduceat(x.astype(np.int64), first).tolist() if len(first) else []

    columns = [per_step(b > 0), per_step(np.where(b > 0, b, 0)), per_step(b < 0),
               per_step(np.where(b < 0, -b, 0)), per_step(np.where(dr > 0, dr, 0)),
               per_step(np.where(dr < 0, -dr, 0))]
    return [StepChurn(int(s), *values) for s, *values in zip(steps[first].tolist(), *columns)]


def series_points(dm: DeviceMemory, points: int = 400) -> dict[str, list[int]]:
    """At most `points` samples of the step curves, keeping each bucket's maximum (the peak
    survives downsampling): ts, allocated, reserved (-1: not in the source)."""
    n = len(dm.ts)
    if n <= points:
        idx = np.arange(n)
    else:
        edges = np.linspace(0, n, points + 1).astype(np.int64)
        key = np.maximum(dm.allocated, dm.reserved)
        idx = np.array([lo + int(np.argmax(key[lo:hi])) for lo, hi in zip(edges[:-1], edges[1:]) if hi > lo])
        peaks = [int(np.argmax(dm.allocated)), int(np.argmax(dm.reserved))]
        idx = np.unique(np.concatenate([idx, peaks]))
    return {"ts": [int(x) for x in dm.ts[idx]], "allocated": [int(x) for x in dm.allocated[idx]],
            "reserved": [int(x) for x in dm.reserved[idx]]}


def memory_summary(tl, points: int = 0) -> dict[str, Any]:
    """The JSON form: per device the peaks (with iteration and op), fragmentation, capacity
    and churn per iteration (medians and each iteration); `series` with points > 0."""
    devices = []
    for dm in device_memory(tl):
        d = dm.to_dict(points)
        for k in ("allocs", "alloc_bytes", "frees", "reserved_grown", "reserved_released"):
            vals = [getattr(s, k) for s in dm.steps]
            d.setdefault("per_iteration_median", {})[k] = int(np.median(vals)) if vals else None
        d["peak_share_of_capacity"] = (round(dm.peak / dm.capacity, 6)
                                       if dm.peak and dm.capacity else None)
        devices.append(d)
    return {"captured": "memory" in tl.meta.captured, "events": int(len(tl.memory)),
            "devices": devices}

"""Buckets: the units a latency distribution is kept for (iterations, annotated phases,
user patterns, per-request TTFT/TPOT), and a per-trace profile of them.

A *bucket* is a set of *instances* (time windows on the CPU side). Per bucket we keep the
duration of every instance and the GPU work attributed to it:

* GPU work (kernels, copies, memsets) is attributed through its launching API call (the
  correlation join: Kineto on correlation id, nsys on (pid, correlation id)): the call's start
  time and thread must fall inside an instance of the bucket, on the same thread.
* For iteration buckets (ranges of kind ``step``) the step window is enough: work whose
  launching call starts in the window (or, unlaunched work, whose own start does) belongs to
  the step, whatever the thread (backward kernels are launched from autograd threads).

Statistics use :func:`tracelint.timeline.summary.percentile` (linear interpolation, numpy's
default, Hyndman & Fan type 7) and are computed over *steady-state* instances: leading cold
instances (JIT, autotuning, cache warm-up) are detected and reported apart (see
:func:`cold_prefix` and docs/statistics.md).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from ..timeline import classify, intervals
from ..timeline.codes import thread_codes as _thread_codes
from ..timeline.model import Timeline
from ..timeline.summary import percentile
from .attribution import _activity, _Activity, _assign
from .kernel_calls import kernel_calls
from .names import (exact_kernel_name, finding_identity, lint_fingerprints,  # noqa: F401
                    normalise_kernel_name, normalise_range_name, short_kernel_name)
from .serving import TPOT, TTFT, parse_request_range, serving_values  # noqa: F401

#: Percentiles kept for every bucket (and compared by diff).
QUANTILES: tuple[tuple[str, float], ...] = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0),
                                           ("p999", 99.9))

#: A leading instance is "cold" when it is longer than COLD_FACTOR x the steady median and
#: more than COLD_MADS robust deviations above it (see cold_prefix).
COLD_FACTOR = 1.5
COLD_MADS = 5.0
COLD_MIN_INSTANCES = 4

#: Range kinds whose names become buckets automatically.
NAME_KINDS = ("nvtx", "annotation")
#: Per-operator NVTX ranges (torch.autograd.profiler.emit_nvtx: "aten::mm, seq = 12, op_id = 5")
#: are operators, not phases: they get no automatic bucket (use --bucket to ask for one).
OP_RANGE = re.compile(r",\s*(?:seq|op_id)\s*=\s*\d+")

ITERATION = "iteration"

# ----- cold start ----------------------------------------------------------------------------

def cold_prefix(durations: Sequence[float], factor: float = COLD_FACTOR,
                mads: float = COLD_MADS) -> int:
    """How many leading instances are cold-start outliers.

    With n >= 4 instances in time order, the steady reference is the last ceil(n/2):
    m = their median, s = 1.4826 x their median absolute deviation. Instance i (from the
    first) is cold while d_i > max(factor x m, m + mads x s); the first instance that is not
    ends the cold prefix, which never exceeds floor(n/2) instances.
    """
    d = np.asarray(durations, dtype=float)
    n = len(d)
    if n < COLD_MIN_INSTANCES:
        return 0
    ref = d[n // 2:]
    m = float(np.median(ref))
    s = 1.4826 * float(np.median(np.abs(ref - m)))
    threshold = max(factor * m, m + mads * s)
    k = 0
    while k < n // 2 and d[k] > threshold:
        k += 1
    return k


# ----- bucket ----------------------------------------------------------------------------------

@dataclass
class Bucket:
    """One bucket of one trace. Arrays are per instance, in start order."""

    key: str
    kind: str                       # iteration | range | pattern | serving
    start: np.ndarray
    end: np.ndarray
    values: np.ndarray              # duration (end - start), or the TTFT/TPOT value, ns
    cold: int = 0                   # leading cold instances
    busy_ns: np.ndarray | None = None      # GPU busy time in each window (mean over devices)
    gpu_ns: np.ndarray | None = None       # GPU time attributed to each instance
    class_ns: dict[str, np.ndarray] = field(default_factory=dict)   # class -> per instance
    names: list[str] = field(default_factory=list)   # raw range names (up to a few)
    launches: np.ndarray | None = None     # GPU activities attributed to each instance
    kernel_ns: dict[str, float] = field(default_factory=dict)   # kernel key -> steady total

    @property
    def count(self) -> int:
        return len(self.values)

    @property
    def steady(self) -> np.ndarray:
        return self.values[self.cold:]

    def stats(self) -> dict[str, Any]:
        """Steady-state distribution, cold instances apart, GPU attribution."""
        v = self.steady
        out: dict[str, Any] = {"key": self.key, "kind": self.kind, "count": self.count,
                               "steady_count": int(len(v)), "cold_count": int(self.cold),
                               "cold_ns": [int(x) for x in self.values[: self.cold]]}
        for name, q in QUANTILES:
            out[f"{name}_ns"] = percentile(v, q)
        out["mean_ns"] = float(v.mean()) if len(v) else float("nan")
        out["min_ns"] = float(v.min()) if len(v) else float("nan")
        out["max_ns"] = float(v.max()) if len(v) else float("nan")
        out["total_ns"] = int(v.sum())
        if self.busy_ns is not None:
            win = (self.end - self.start)[self.cold:]
            busy = self.busy_ns[self.cold:]
            out["gpu_busy_pct"] = float(100.0 * busy.sum() / win.sum()) if win.sum() > 0 else None
        if self.gpu_ns is not None:
            g = self.gpu_ns[self.cold:]
            out["gpu_ns_per_instance"] = float(g.mean()) if len(g) else float("nan")
            out["gpu_class_ns"] = {c: int(a[self.cold:].sum()) for c, a in sorted(self.class_ns.items())
                                   if a[self.cold:].sum() > 0}
        return out


# ----- building buckets --------------------------------------------------------------------------

def _outermost(rows: np.ndarray, parent: np.ndarray, n: int) -> np.ndarray:
    """Rows of a bucket without those nested inside another row of the same bucket."""
    if len(rows) == 0 or (parent < 0).all():
        return rows
    member = np.zeros(n, dtype=bool)
    member[rows] = True
    nested = np.zeros(len(rows), dtype=bool)
    cur = parent[rows].copy()
    for _ in range(256):
        live = cur >= 0
        if not live.any():
            break
        nested[live] |= member[cur[live]]
        cur = np.where(live, parent[np.clip(cur, 0, None)], -1)
    return rows[~nested]


class _Ranges:
    def __init__(self, tl: Timeline):
        r = tl.ranges
        self.n = len(r)
        self.start = r["start"].to_numpy().astype(np.int64)
        self.end = r["end"].to_numpy().astype(np.int64)
        self.pid = r["pid"].to_numpy().astype(np.int64)
        self.tid = r["tid"].to_numpy().astype(np.int64)
        self.kind = np.asarray(r["kind"].astype(str)) if self.n else np.zeros(0, dtype=object)
        self.parent = r["parent"].to_numpy().astype(np.int64)
        cat = r["name"].array if self.n else pd.Categorical([])
        if not isinstance(cat, pd.Categorical):
            cat = pd.Categorical(cat)
        self.categories = [str(c) for c in cat.categories.tolist()]
        self.codes = np.asarray(cat.codes, dtype=np.int64)

    def name(self, i: int) -> str:
        c = self.codes[i]
        return self.categories[c] if c >= 0 else ""

    def names_matching(self, fn) -> np.ndarray:
        """Per row, fn(category name) evaluated once per distinct name."""
        labels = np.array([fn(c) for c in self.categories] + [fn("")], dtype=object)
        return labels[np.where(self.codes >= 0, self.codes, len(self.categories))]


def _make_bucket(key: str, kind: str, rows: np.ndarray, rg: _Ranges,
                 act: _Activity | None, busy: list[tuple[np.ndarray, np.ndarray]],
                 by_thread: bool, detect_cold: bool = True) -> Bucket:
    order = np.lexsort((rg.end[rows], rg.start[rows]))
    rows = rows[order]
    s, e = rg.start[rows], rg.end[rows]
    b = Bucket(key=key, kind=kind, start=s, end=e, values=np.maximum(e - s, 0).astype(np.int64))
    b.names = sorted({rg.name(i) for i in rows[:200]})[:5]
    if detect_cold:
        b.cold = cold_prefix(b.values)
    if busy:
        tot = np.zeros(len(s), dtype=np.float64)
        for bs, be in busy:
            tot += intervals.overlap_each(s, e, bs, be)
        b.busy_ns = tot / len(busy)
    if act is not None:
        if by_thread:
            sel = np.flatnonzero(act.resolved)
            ig, qg = _thread_codes((rg.pid[rows], rg.tid[rows]), (act.pid[sel], act.tid[sel]))
            idx = _assign(ig, s, e, qg, act.t[sel])
        else:
            pids = np.unique(rg.pid[rows])
            sel = np.arange(len(act.t))
            if len(pids) <= 1:
                idx = _assign(np.zeros(len(s), np.int64), s, e, np.zeros(len(sel), np.int64), act.t)
            else:       # several processes with steps: join on the launching process
                idx = _assign(rg.pid[rows], s, e, act.pid, act.t)
        hit = idx >= 0
        inst = idx[hit]
        dur = act.dur[sel][hit].astype(np.float64)
        b.gpu_ns = np.bincount(inst, weights=dur, minlength=len(s)).astype(np.int64)
        cls = act.cls[sel][hit]
        for c in np.unique(cls) if len(cls) else []:
            m = cls == c
            b.class_ns[str(c)] = np.bincount(inst[m], weights=dur[m], minlength=len(s)).astype(np.int64)
        b.launches = np.bincount(inst, minlength=len(s)).astype(np.int64)
        if kind == "iteration":          # per-kernel totals: the diff's waterfall
            steady = inst >= b.cold
            lab = pd.Series(dur[steady]).groupby(act.label[sel][hit][steady]).sum()
            b.kernel_ns = {str(k): float(v) for k, v in lab.items()}
    return b


def compile_patterns(patterns: Iterable[str]) -> list[re.Pattern]:
    """Compile --bucket regexes; raises ValueError with the offending pattern."""
    out = []
    for p in patterns or ():
        try:
            out.append(re.compile(p))
        except re.error as exc:
            raise ValueError(f"bad --bucket regex {p!r}: {exc}") from None
    return out


def _pattern_key(rx: re.Pattern, name: str) -> str | None:
    m = rx.search(name)
    if m is None:
        return None
    groups = [g for g in m.groups() if g is not None]
    return "/".join(groups) if groups else rx.pattern


def build_buckets(tl: Timeline, patterns: Sequence[str] = (), *, names: bool = True,
                  max_name_buckets: int = 64) -> list[Bucket]:
    """Every bucket of a trace: iterations, annotation/NVTX names, user patterns, serving.

    * ``iteration``: ranges of kind ``step`` (``ProfilerStep#N``), attributed by window;
    * one bucket per normalised name of ``nvtx``/``annotation`` ranges (the
      ``max_name_buckets`` longest in total), attributed through the launching thread;
    * one bucket per ``--bucket`` regex (``re.search`` over range names of any kind; with
      capture groups, one bucket per distinct group value), attributed by thread;
    * ``TTFT`` / ``TPOT`` for per-request serving annotations.
    Nested ranges of the same bucket on one thread count once (the outermost).
    """
    rx = compile_patterns(patterns)
    rg = _Ranges(tl)
    act = _activity(tl) if tl.has_gpu_activity else None
    busy = [tl.busy_intervals(d) for d in tl.devices_in_use()]
    out: list[Bucket] = []
    if rg.n:
        steps = np.flatnonzero(rg.kind == "step")
        if len(steps):
            out.append(_make_bucket(ITERATION, "iteration", steps, rg, act, busy, by_thread=False))
        if names:
            norm = rg.names_matching(normalise_range_name)
            is_op = rg.names_matching(lambda c: OP_RANGE.search(c) is not None).astype(bool)
            cand = np.flatnonzero(np.isin(rg.kind, NAME_KINDS) & ~is_op)
            if len(cand):
                df = pd.DataFrame({"key": norm[cand], "row": cand,
                                   "dur": (rg.end - rg.start)[cand]})
                tot = df.groupby("key", sort=False)["dur"].sum().sort_values(ascending=False)
                keep = list(tot.index[:max_name_buckets])
                groups = df.groupby("key", sort=False)["row"]
                for key in keep:
                    rows = _outermost(groups.get_group(key).to_numpy(), rg.parent, rg.n)
                    out.append(_make_bucket(str(key), "range", rows, rg, act, busy, by_thread=True))
        for r in rx:
            keys = rg.names_matching(lambda c, r=r: _pattern_key(r, c))
            valid = np.flatnonzero(keys != None)  # noqa: E711  (object array)
            if not len(valid):
                out.append(Bucket(key=r.pattern, kind="pattern", start=np.zeros(0, np.int64),
                                  end=np.zeros(0, np.int64), values=np.zeros(0, np.int64)))
                continue
            for key in sorted(set(keys[valid])):
                rows = _outermost(valid[keys[valid] == key], rg.parent, rg.n)
                out.append(_make_bucket(str(key), "pattern", rows, rg, act, busy, by_thread=True))
        out.extend(Bucket(key=k, kind="serving", start=t, end=t, values=v)
                   for k, t, v in serving_values(rg))
    # unique keys: a pattern bucket may collide with a name bucket
    seen: dict[str, int] = {}
    for b in out:
        if b.key in seen:
            seen[b.key] += 1
            b.key = f"{b.key} ({b.kind})" if seen[b.key] == 2 else f"{b.key} ({b.kind} {seen[b.key]})"
        else:
            seen[b.key] = 1
    return out


# ----- the profile of one trace ------------------------------------------------------------------

@dataclass
class KernelGroup:
    name: str            # exact name (hex addresses removed)
    key: str             # normalised name (template args / argument lists stripped)
    cls: str
    durations: np.ndarray


@dataclass
class TraceProfile:
    """Everything diff and gate compare about one run (one trace)."""

    source: str
    meta: dict[str, Any]
    buckets: dict[str, Bucket]
    kernels: dict[str, KernelGroup]              # by exact name
    syncs: dict[str, np.ndarray]                 # sync name -> durations
    gpu_total_ns: int                            # sum of GPU activity durations
    gpu_busy_ns: int                             # union per device, summed over devices
    class_ns: dict[str, int]                     # whole trace, by class
    span_ns: int
    lint: dict[str, dict[str, str]] | None = None   # identity -> {rule, key, ...}; None: not run
    lint_error: str | None = None
    calls: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # kernel_calls.py

    @property
    def iteration(self) -> Bucket | None:
        b = self.buckets.get(ITERATION)
        return b if b is not None and b.kind == "iteration" and len(b.steady) else None

    def gpu_scope(self) -> tuple[str, float, dict[str, float]]:
        """(scope, GPU time, GPU time by class): per steady iteration when the trace has
        iterations (so traces of different lengths compare), else for the whole trace."""
        it = self.iteration
        if it is not None and it.gpu_ns is not None:
            n = len(it.steady)
            cls = {c: float(a[it.cold:].sum()) / n for c, a in it.class_ns.items()}
            return "per_iteration", float(it.gpu_ns[it.cold:].sum()) / n, cls
        return "trace", float(self.gpu_total_ns), {c: float(v) for c, v in self.class_ns.items()}

    def to_dict(self) -> dict[str, Any]:
        scope, gpu, cls = self.gpu_scope()
        kern = sorted(self.kernels.values(), key=lambda k: -int(k.durations.sum()))
        return {
            "source": self.source, "meta": self.meta, "span_ns": int(self.span_ns),
            "gpu_total_ns": int(self.gpu_total_ns), "gpu_busy_ns": int(self.gpu_busy_ns),
            "gpu_class_ns": {k: int(v) for k, v in sorted(self.class_ns.items())},
            "gpu_scope": scope, "gpu_ns_scoped": gpu,
            "buckets": [b.stats() for b in self.buckets.values()],
            "kernels": [{"name": k.name, "key": k.key, "class": k.cls, "count": len(k.durations),
                         "total_ns": int(k.durations.sum()),
                         "p50_ns": percentile(k.durations, 50), "p99_ns": percentile(k.durations, 99)}
                        for k in kern],
            "syncs": {n: {"count": len(d), "total_ns": int(d.sum())} for n, d in sorted(self.syncs.items())},
        }


def trace_meta(tl: Timeline) -> dict[str, Any]:
    """Hardware and versions from the trace metadata (for baselines)."""
    m = tl.meta
    versions = {"format": m.format, "format_version": m.format_version, "producer": m.producer}
    for k, v in (m.extra or {}).items():
        if "version" in str(k).lower() and isinstance(v, (str, int, float)):
            versions[str(k)] = v
    used = set(tl.devices_in_use())
    devices = [d for d in m.devices if not used or d.id in used] or list(m.devices)
    from ..efficiency.coverage import shape_summary
    return {"devices": [d.name or f"device {d.id}" for d in devices], "versions": versions,
            "rank": m.rank, "world_size": m.world_size, "shapes": shape_summary(tl)}


def _syncs(tl: Timeline) -> dict[str, np.ndarray]:
    out: dict[str, list[np.ndarray]] = {}
    api = tl.api_calls
    if len(api):
        sel = np.flatnonzero(classify.in_labels(tl.api_role, ("sync",)))
        if len(sel):
            names = np.asarray(api["name"].astype(str))[sel]
            dur = (api["end"].to_numpy() - api["start"].to_numpy())[sel]
            for n in np.unique(names):
                out.setdefault(str(n), []).append(dur[names == n])
    sy = tl.syncs
    if len(sy):
        types = np.asarray(sy["sync_type"].astype(str))
        dur = (sy["end"].to_numpy() - sy["start"].to_numpy())
        for t in np.unique(types):
            out.setdefault(f"GPU {t} sync", []).append(dur[types == t])
    return {k: np.concatenate(v).astype(np.int64) for k, v in out.items()}


def _kernels(tl: Timeline) -> dict[str, KernelGroup]:
    k = tl.kernels
    if len(k) == 0:
        return {}
    cat = k["name"].array
    if not isinstance(cat, pd.Categorical):
        cat = pd.Categorical(cat)
    exact = np.array([exact_kernel_name(c) for c in cat.categories.tolist()] + ["?"], dtype=object)
    codes = np.asarray(cat.codes)
    # sort integer codes, not a fixed-width unicode array (kernels x longest name x 4 bytes)
    uniq = sorted({str(x) for x in exact})
    rank = {n: i for i, n in enumerate(uniq)}
    cat_rank = np.array([rank[str(x)] for x in exact], dtype=np.int64)
    row = cat_rank[np.where(codes >= 0, codes, len(exact) - 1)]
    dur = (k["end"].to_numpy() - k["start"].to_numpy()).astype(np.int64)
    cls = np.asarray(tl.kernel_class, dtype=object)
    order = np.argsort(row, kind="stable")
    sc = row[order]
    bounds = np.flatnonzero(np.r_[True, sc[1:] != sc[:-1]]) if len(sc) else np.zeros(0, int)
    out = {}
    for lo, hi in zip(bounds, np.r_[bounds[1:], len(sc)]):
        idx = order[lo:hi]
        n = uniq[sc[lo]]
        out[n] = KernelGroup(name=n, key=normalise_kernel_name(n), cls=str(cls[idx[0]]),
                             durations=np.sort(dur[idx]))
    return out


def profile(tl: Timeline, patterns: Sequence[str] = (), *, findings: bool = False,
            config=None, names: bool = True, max_name_buckets: int = 64) -> TraceProfile:
    """Profile one trace: buckets, kernels, syncs, GPU time; optionally lint findings."""
    act = tl.gpu_activity
    dur = (act["end"] - act["start"]).to_numpy() if len(act) else np.zeros(0, np.int64)
    class_ns: dict[str, int] = {}
    if len(tl.kernels):
        kd = (tl.kernels["end"] - tl.kernels["start"]).to_numpy()
        s = pd.Series(kd).groupby(np.asarray(tl.kernel_class, dtype=object)).sum()
        class_ns.update({str(c): int(v) for c, v in s.items()})
    for t, label in (("copies", "copy"), ("memsets", "memset")):
        df = tl.table(t)
        if len(df):
            class_ns[label] = int((df["end"] - df["start"]).sum())
    busy = 0
    for d in tl.devices_in_use():
        bs, be = tl.busy_intervals(d)
        busy += int((be - bs).sum())
    buckets = build_buckets(tl, patterns, names=names, max_name_buckets=max_name_buckets)
    it = next((b for b in buckets if b.kind == "iteration" and len(b.steady)), None)
    calls = kernel_calls(tl, int(it.start[it.cold]) if it is not None else None)
    p = TraceProfile(source=tl.meta.source, meta=trace_meta(tl),
                     buckets={b.key: b for b in buckets}, kernels=_kernels(tl), syncs=_syncs(tl),
                     gpu_total_ns=int(dur.sum()), gpu_busy_ns=busy, class_ns=class_ns,
                     span_ns=int(tl.span_ns), calls=calls)
    if findings:
        p.lint, p.lint_error = lint_fingerprints(tl, config)
    return p

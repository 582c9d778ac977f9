"""The map step of multi-rank analysis: one trace (one rank) -> one compact, picklable summary.

A worker loads one rank's trace, runs the per-trace rules on it, and keeps only what the
cross-rank rules need: a per-iteration table, a per-collective table (occurrence index, start,
end, bytes, the compute time overlapping each collective), the per-rank findings as dicts and
the device facts. The Timeline is dropped before the summary leaves the worker, so the
coordinating process only ever holds summaries: memory grows with one rank, not with the job.

Times in a summary are integer ns on the rank's own clock (the trace's time base); the reduce
step (job.py) estimates clock offsets between ranks from collective end times.

Collective sizes are not part of the Timeline schema, so for Kineto traces a second, narrow
pass over the JSON reads them (only when the file mentions them): NCCL kernel args
("Collective name", "In msg nelems", "Out msg nelems", "dtype", "Group size", newer PyTorch)
and the `record_param_comms` CPU op that encloses each collective's launch (same keys).
"""
from __future__ import annotations

import contextlib
import dataclasses
import gzip
import os
import re
import resource
import shutil
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import msgspec
import numpy as np
import pandas as pd

from ..timeline import intervals
from ..timeline.collectives import (canonical_collective, collective_kind, dtype_bytes,
                                    issuing_collective)

_RANK_NAME = re.compile(r"(?:^|[^a-z0-9])rank[-_]?(\d+)(?:of(\d+))?", re.I)
_OF_NAME = re.compile(r"(?:^|[^a-z0-9])(\d+)of(\d+)(?:[^0-9]|$)", re.I)
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]+://|::")
_EPOCH_MIN_NS = 10**18          # 2001-09-09: a time base this large is a Unix epoch


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


def is_url(source: str) -> bool:
    """True for an fsspec URL (s3://, gs://, memory://, file://, chained a::b)."""
    return bool(_URL.search(str(source)))


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


# ----- opening a source (path or fsspec URL) ----------------------------------------------------
@contextlib.contextmanager
def local_copy(source: str) -> Iterator[Path]:
    """A local path for a source: the path itself, or a temp copy of an fsspec URL."""
    if not is_url(source):
        yield Path(source)
        return
    if source.startswith("file://") and "::" not in source:
        yield Path(source[len("file://"):])
        return
    import fsspec
    name = os.path.basename(source.split("::")[-1].rstrip("/")) or "trace"
    folder = tempfile.mkdtemp(prefix="tracelint-rank-")
    path = Path(folder) / name
    try:
        with fsspec.open(source, "rb") as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst, 8 << 20)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ----- entry point for workers ------------------------------------------------------------------
def summarize_source(source: str, config=None, run_rules: bool = True) -> list[RankSummary]:
    """Load one trace and summarise each rank in it (one for Kineto; one per process for an nsys
    file that recorded several). Never raises: a failure becomes a summary with ok=False."""
    label = os.path.basename(str(source).rstrip("/"))
    t0 = time.perf_counter()
    try:
        from ..importers import load
        with local_copy(str(source)) as path:
            tl = load(path)
            tl.meta.source = str(source)
            tl.meta.extra["read_from"] = str(path)      # the secret scan reads the local copy
            t_load = time.perf_counter() - t0
            parts = split_processes(tl)
            comm_pass = tl.meta.format == "kineto-json"
            out = []
            for process, rank_hint, rank_source, part in parts:
                s = summarize_timeline(part, source=str(source), config=config,
                                       run_rules=run_rules, process=process,
                                       rank_hint=rank_hint, rank_source=rank_source)
                s.timing_s["load"] = t_load / len(parts)
                out.append(s)
            del tl, parts, part
            if comm_pass and out:
                t1 = time.perf_counter()
                kargs, rpc = read_comm_args(path)
                for s in out:
                    attach_sizes(s, kargs, rpc)
                out[0].timing_s["sizes"] = time.perf_counter() - t1
        for s in out:
            finish_collectives(s)
    except Exception as exc:   # noqa: BLE001 - a bad rank must not stop the job
        from ..errors import TracelintError
        msg = str(exc) if isinstance(exc, TracelintError) else f"{type(exc).__name__}: {exc}"
        rank, world = rank_from_name(label)
        out = [RankSummary(source=str(source), label=label, ok=False, error=" ".join(msg.split())[:500],
                           rank_hint=rank, rank_source="file name" if rank is not None else "",
                           world_size=world)]
    peak = peak_rss_bytes()
    for s in out:
        s.worker_peak_rss_bytes = int(peak)
        s.worker = f"{os.uname().nodename}:{os.getpid()}"
        s.timing_s["total"] = time.perf_counter() - t0
    return out


def peak_rss_bytes() -> int:
    """This process's peak resident memory: VmHWM (Linux; reset by exec, unlike ru_maxrss,
    which a fork+exec child inherits from its parent), else ru_maxrss."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r if os.uname().sysname == "Darwin" else r * 1024)


# ----- one file, several processes (nsys) -------------------------------------------------------
def split_processes(tl) -> list[tuple[int | None, int | None, str, Any]]:
    """[(pid or None, rank hint, rank source, Timeline)]: an nsys export that recorded several
    processes with GPU work (torchrun under nsys) is one rank per process."""
    from ..timeline.schema import GPU_ACTIVITY_TABLES
    meta = tl.meta
    hint, source = _rank_hint(tl)
    if meta.format != "nsys-sqlite":
        return [(None, hint, source, tl)]
    pids = sorted({int(p) for t in GPU_ACTIVITY_TABLES for p in tl.table(t)["pid"].unique() if p >= 0})
    if len(pids) < 2:
        if hint is None:
            devs = tl.devices_in_use()
            if len(devs) == 1:
                return [(None, devs[0], "nsys device id", tl)]
            if len(pids) == 1:
                return [(None, None, "", tl)]
        return [(None, hint, source, tl)]
    dev_of = {p: sorted({int(d) for t in GPU_ACTIVITY_TABLES
                         for d in tl.table(t)["device"][tl.table(t)["pid"] == p].unique()})
              for p in pids}
    one_each = all(len(v) == 1 for v in dev_of.values()) and \
        len({v[0] for v in dev_of.values()}) == len(pids)
    out = []
    for i, p in enumerate(pids):
        part = _filter_process(tl, p, dev_of[p])
        if one_each:
            r, src = dev_of[p][0], "nsys device id"
        else:
            r, src = i, "nsys process order"
        part.meta.rank = r
        part.meta.notes.append(f"process {p} of {len(pids)} in this nsys file analysed as rank {r} "
                               f"({src})")
        out.append((p, r, src, part))
    return out


def _filter_process(tl, pid: int, devices: list[int]):
    from ..timeline.model import Timeline
    from ..timeline.schema import TABLES
    kw = {}
    for t in TABLES:
        df = tl.table(t)
        if t == "metrics":
            sel = df["device"].isin(devices) | (df["device"] < 0)
        else:
            sel = df["pid"] == pid
        kw[t] = df[sel.to_numpy()].reset_index(drop=True)
    meta = dataclasses.replace(tl.meta, devices=[d for d in tl.meta.devices if d.id in devices] or
                               list(tl.meta.devices), notes=list(tl.meta.notes),
                               captured=set(tl.meta.captured), extra=dict(tl.meta.extra))
    return Timeline(**kw, meta=meta)


def _rank_hint(tl) -> tuple[int | None, str]:
    meta = tl.meta
    dist = meta.extra.get("distributed") if isinstance(meta.extra, dict) else None
    if isinstance(dist, dict) and meta.rank is not None:
        return meta.rank, "distributedInfo"
    if meta.rank is not None and any("MPI Rank" in n for n in meta.notes):
        return meta.rank, "nsys MPI rank"
    r, _ = rank_from_name(os.path.basename(meta.source or ""))
    if r is not None:
        return r, "file name"
    if meta.rank is not None:
        return meta.rank, "trace"
    return None, ""


# ----- one process -> summary -------------------------------------------------------------------
def summarize_timeline(tl, source: str = "", config=None, run_rules: bool = True,
                       process: int | None = None, rank_hint: int | None = None,
                       rank_source: str = "") -> RankSummary:
    """Reduce one rank's Timeline to a RankSummary (collective sizes are attached later)."""
    from ..engine.context import Context
    t0 = time.perf_counter()
    meta = tl.meta
    if rank_hint is None and not rank_source:
        rank_hint, rank_source = _rank_hint(tl)
    label = os.path.basename(str(source).rstrip("/")) + (f"#{process}" if process is not None else "")
    _, world_from_name = rank_from_name(os.path.basename(str(source)))
    dist = meta.extra.get("distributed", {}) if isinstance(meta.extra.get("distributed"), dict) else {}
    s = RankSummary(source=source, label=label, process=process, rank_hint=rank_hint,
                    rank_source=rank_source, world_size=meta.world_size or world_from_name,
                    format=meta.format, producer=meta.producer, backend=dist.get("backend"))
    s.notes = list(meta.notes)
    if rank_hint is not None:
        meta.rank = rank_hint
    s.devices = [{"id": d.id, "name": d.name, "vendor": d.vendor, "sm_count": d.sm_count}
                 for d in meta.devices if not tl.devices_in_use() or d.id in tl.devices_in_use()]
    s.start_ns, s.end_ns = (int(x) for x in tl.span)
    base = meta.extra.get("base_time_ns") or meta.extra.get("session_start_utc_ns")
    if isinstance(base, (int, float)) and base > _EPOCH_MIN_NS // 2:
        s.epoch_start_ns, s.epoch_end_ns = int(base) + s.start_ns, int(base) + s.end_ns
    elif s.start_ns > _EPOCH_MIN_NS:
        s.epoch_start_ns, s.epoch_end_ns = s.start_ns, s.end_ns
    s.counts = tl.counts()
    ctx = Context(tl)
    _tables(tl, ctx, s)
    s.timing_s["summary"] = time.perf_counter() - t0
    if run_rules:
        from ..api import lint
        t1 = time.perf_counter()
        report = lint(tl, config, match_cases=False)
        s.findings = []
        for f in report.sorted_findings():
            d = f.to_dict()
            d["key"] = f.key
            s.findings.append(d)
        s.skipped, s.suppressed = dict(report.skipped), report.suppressed
        s.timing_s["rules"] = time.perf_counter() - t1
    return s


def _steps(tl) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(step numbers, starts, ends) of the ProfilerStep-style iterations, sorted; pseudo=True
    when the trace has none and the whole trace is one iteration."""
    r = tl.ranges
    st = r[r["kind"] == "step"] if len(r) else r
    if len(st):
        g = pd.DataFrame({"step": st["step"].to_numpy(), "start": st["start"].to_numpy(),
                          "end": st["end"].to_numpy()}).groupby("step").agg(
            start=("start", "min"), end=("end", "max")).sort_values("start")
        return (g.index.to_numpy(np.int64), g["start"].to_numpy(np.int64),
                g["end"].to_numpy(np.int64), False)
    lo, hi = tl.span
    return np.array([0]), np.array([lo], np.int64), np.array([hi], np.int64), True


def _tables(tl, ctx, s: RankSummary) -> None:
    k = tl.kernels
    is_comm_k = np.asarray(tl.kernel_class, dtype=object) == "communication" if len(k) else \
        np.zeros(0, bool)
    steps, st_start, st_end, pseudo = _steps(tl)
    if pseudo:
        s.notes.append("no iteration markers (ProfilerStep#N / NVTX step ranges): the whole "
                       "trace is treated as one iteration")
    act = tl.gpu_activity
    a_start = act["start"].to_numpy()
    a_end = act["end"].to_numpy()
    a_dev = act["device"].to_numpy()
    a_table = act["table"].to_numpy()
    a_row = act["row"].to_numpy()
    a_comm = np.zeros(len(act), bool)
    sel_k = a_table == "kernels"
    a_comm[sel_k] = is_comm_k[a_row[sel_k]]
    a_compute = sel_k & ~a_comm
    # Attribute GPU work to the iteration whose host window launched it (else its own start).
    launch = ctx.activity_launch
    api_start = tl.api_calls["start"].to_numpy()
    att = np.where(launch >= 0, api_start[np.clip(launch, 0, None)] if len(api_start) else a_start,
                   a_start)
    idx = np.searchsorted(st_start, att, side="right") - 1
    ok = idx >= 0
    ok[ok] = att[ok] < st_end[idx[ok]]
    if pseudo:
        idx[:] = 0
        ok[:] = True
    a_step = np.where(ok, idx, -1)
    # Device-wide unions of compute: what overlaps communication, wherever launched.
    comp_union = {int(d): intervals.merge(a_start[a_compute & (a_dev == d)], a_end[a_compute & (a_dev == d)])
                  for d in np.unique(a_dev)}
    rows = []
    order = np.lexsort((a_dev, a_step))
    sk, dk = a_step[order], a_dev[order]
    bounds = np.flatnonzero(np.r_[True, (sk[1:] != sk[:-1]) | (dk[1:] != dk[:-1]), True])
    per = {i: dict(compute_ns=0, comm_ns=0, exposed_comm_ns=0, busy_ns=0, kernels=0)
           for i in range(len(steps))}
    for b0, b1 in zip(bounds[:-1], bounds[1:]) if len(sk) else ():
        i = int(sk[b0])
        if i < 0:
            continue
        sel = order[b0:b1]
        d = int(dk[b0])
        c = a_compute[sel]
        m = a_comm[sel]
        p = per[i]
        p["compute_ns"] += intervals.total(a_start[sel][c], a_end[sel][c])
        p["busy_ns"] += intervals.total(a_start[sel], a_end[sel])
        p["kernels"] += int((a_table[sel] == "kernels").sum())
        if m.any():
            ms, me = intervals.merge(a_start[sel][m], a_end[sel][m])
            p["comm_ns"] += int((me - ms).sum())
            bs, be = comp_union[d]
            p["exposed_comm_ns"] += int((me - ms).sum() - intervals.overlap_each(ms, me, bs, be).sum())
    for i, st in enumerate(steps):
        rows.append(dict(step=int(st), start=int(st_start[i]), end=int(st_end[i]),
                         dur_ns=int(st_end[i] - st_start[i]), **per[i]))
    s.iterations = pd.DataFrame(rows, columns=list(ITER_COLUMNS)).astype(
        {c: "int64" for c in ITER_COLUMNS})
    # Rank totals (device unions, each ns once).
    tot = dict(compute_ns=0, comm_ns=0, exposed_comm_ns=0, busy_ns=0)
    for d in np.unique(a_dev):
        on = a_dev == d
        bs, be = comp_union[int(d)]
        tot["compute_ns"] += int((be - bs).sum())
        tot["busy_ns"] += intervals.total(a_start[on], a_end[on])
        cm = on & a_comm
        if cm.any():
            ms, me = intervals.merge(a_start[cm], a_end[cm])
            tot["comm_ns"] += int((me - ms).sum())
            tot["exposed_comm_ns"] += int((me - ms).sum() - intervals.overlap_each(ms, me, bs, be).sum())
    tot["iterations_ns"] = int(s.iterations["dur_ns"].sum()) if not pseudo else int(tl.span_ns)
    tot["span_ns"] = int(tl.span_ns)
    s.totals = tot
    s.pseudo_iterations = bool(pseudo)
    # Top compute kernels by time (explains imbalance between ranks).
    if len(k):
        kd = (k["end"] - k["start"]).to_numpy()
        g = pd.DataFrame({"name": k["name"].astype(str).to_numpy()[~is_comm_k],
                          "d": kd[~is_comm_k]}).groupby("name")["d"].agg(["sum", "size"])
        g = g.sort_values("sum", ascending=False).head(40)
        s.top_kernels = [(str(n)[:200], int(r["sum"]), int(r["size"])) for n, r in g.iterrows()]
    _collectives(tl, ctx, s, is_comm_k, comp_union, steps, st_start, st_end, pseudo)


def _collectives(tl, ctx, s, is_comm_k, comp_union, steps, st_start, st_end, pseudo) -> None:
    k = tl.kernels
    crow = np.flatnonzero(is_comm_k)
    cs = k["start"].to_numpy()[crow]
    ce = k["end"].to_numpy()[crow]
    dev = k["device"].to_numpy()[crow]
    names = k["name"].astype(str).to_numpy()[crow]
    launch = ctx.launch_index("kernels")[crow] if len(crow) else np.zeros(0, np.int64)
    api = tl.api_calls
    att = cs.copy()
    has = launch >= 0
    if has.any():
        att[has] = api["start"].to_numpy()[launch[has]]
    if pseudo:
        step_idx = np.zeros(len(crow), np.int64)
    else:
        step_idx = np.searchsorted(st_start, att, side="right") - 1
        inside = step_idx >= 0
        inside[inside] = att[inside] < st_end[step_idx[inside]]
        step_idx = np.where(inside, step_idx, -1)
    # Enclosing record_param_comms op of each launch (same thread): its External id keys the args.
    rpc_ext = np.full(len(crow), -1, np.int64)
    r = tl.ranges
    op_coll = issuing_collective(tl, launch, att, canonical_collective)
    if has.any() and len(r):
        rp = r[(r["name"] == "record_param_comms").to_numpy()]
        if len(rp):
            a_pid, a_tid = api["pid"].to_numpy(), api["tid"].to_numpy()
            rp_key = rp["pid"].to_numpy() * 1_000_003 + rp["tid"].to_numpy()
            for i in np.flatnonzero(has):
                a = launch[i]
                key = a_pid[a] * 1_000_003 + a_tid[a]
                t = att[i]
                hit = np.flatnonzero((rp_key == key) & (rp["start"].to_numpy() <= t) &
                                     (rp["end"].to_numpy() >= t))
                if len(hit):
                    rpc_ext[i] = int(rp["external_id"].to_numpy()[hit[-1]])
    overlap = np.zeros(len(crow), np.int64)
    pieces = []
    for i in range(len(crow)):
        bs, be = comp_union.get(int(dev[i]), (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        j0 = np.searchsorted(be, cs[i], side="right")
        j1 = np.searchsorted(bs, ce[i], side="left")
        if j1 > j0:
            ps = np.maximum(bs[j0:j1], cs[i])
            pe = np.minimum(be[j0:j1], ce[i])
            keep = pe > ps
            overlap[i] = int((pe[keep] - ps[keep]).sum())
            for a, b in zip(ps[keep], pe[keep]):
                pieces.append((i, int(a), int(b)))
    # The collective op that issued a kernel names it (all_to_all carried by SendRecv kernels
    # is a collective); the kernel name decides only when no enclosing op says.
    coll = [oc or canonical_collective(n) or "Generic" for n, oc in zip(names, op_coll)]
    s.collectives = pd.DataFrame({
        "device": dev.astype(np.int64), "stream": k["stream"].to_numpy()[crow].astype(np.int64),
        "start": cs.astype(np.int64), "end": ce.astype(np.int64),
        "dur_ns": (ce - cs).astype(np.int64),
        "kernel": pd.Categorical([n[:160] for n in names]),
        "coll": coll, "kind": "", "pg": "",
        "step": np.where(step_idx >= 0, steps[np.clip(step_idx, 0, None)] if len(steps) else -1,
                         -1).astype(np.int64),
        "occurrence": -1, "k_in_step": -1,
        "exposed_ns": (ce - cs - overlap).astype(np.int64), "overlap_ns": overlap,
        "in_nelems": -1, "out_nelems": -1, "dtype": "", "bytes": -1, "group_size": -1,
        "size_source": "",
        "correlation": k["correlation"].to_numpy()[crow].astype(np.int64), "rpc_ext": rpc_ext,
        "cid": np.arange(len(crow), dtype=np.int64),
    })
    s.overlap = pd.DataFrame(pieces, columns=["cid", "start", "end"]).astype("int64")


# ----- collective sizes (Kineto args) -----------------------------------------------------------
class _CArgs(msgspec.Struct, gc=False):
    correlation: Any = -1
    external_id: Any = msgspec.field(default=-1, name="External id")
    coll: Any = msgspec.field(default=None, name="Collective name")
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    dtype: Any = None
    group_size: Any = msgspec.field(default=None, name="Group size")
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")
    pg_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")


class _CEvent(msgspec.Struct, gc=False):
    cat: Any = ""
    name: Any = ""
    args: _CArgs | None = None


class _CTop(msgspec.Struct):
    traceEvents: list[msgspec.Raw] | None = None


def _int(v) -> int:
    if isinstance(v, bool) or v is None:
        return -1
    try:
        return int(v)
    except (TypeError, ValueError):
        return -1


def _args_dict(a: _CArgs) -> dict[str, Any]:
    return {"coll": a.coll if isinstance(a.coll, str) else None,
            "in_nelems": _int(a.in_nelems), "out_nelems": _int(a.out_nelems),
            "dtype": a.dtype if isinstance(a.dtype, str) else "",
            "group_size": _int(a.group_size),
            "pg": str(a.pg_ranks) if a.pg_ranks is not None else
            (f"pg:{a.pg_name}" if a.pg_name is not None else "")}


def read_comm_args(path: Path) -> tuple[dict[int, dict], dict[int, dict]]:
    """(kernel correlation -> args, record_param_comms External id -> args) from a Kineto JSON.

    A narrow second pass: skipped (no decode at all) when the file never mentions the keys."""
    try:
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error):
        return {}, {}
    if b"nelems" not in data and b"Collective name" not in data:
        return {}, {}
    try:
        start = len(data) - len(data.lstrip())
        if data[start:start + 1] == b"[":
            raws = msgspec.json.decode(data, type=list[msgspec.Raw])
        else:
            raws = msgspec.json.decode(data, type=_CTop).traceEvents or []
    except (msgspec.DecodeError, msgspec.ValidationError):
        return {}, {}
    dec = msgspec.json.Decoder(_CEvent).decode
    kargs: dict[int, dict] = {}
    rpc: dict[int, dict] = {}
    for lo in range(0, len(raws), 65536):
        for raw in raws[lo:lo + 65536]:
            try:
                e = dec(raw)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            a = e.args
            if a is None:
                continue
            if e.name == "record_param_comms":
                x = _int(a.external_id)
                if x >= 0:
                    rpc[x] = _args_dict(a)
            elif a.in_nelems is not None or a.coll is not None:
                c = _int(a.correlation)
                if c >= 0 and e.cat in ("kernel", "Kernel"):
                    kargs[c] = _args_dict(a)
    return kargs, rpc


def attach_sizes(s: RankSummary, kargs: dict[int, dict], rpc: dict[int, dict]) -> None:
    c = s.collectives
    if not len(c) or not (kargs or rpc):
        return
    n = len(c)
    coll = c["coll"].to_numpy(dtype=object).copy()
    cols = {k: c[k].to_numpy().copy() for k in ("in_nelems", "out_nelems", "bytes", "group_size")}
    dtype = c["dtype"].to_numpy(dtype=object).copy()
    pg = c["pg"].to_numpy(dtype=object).copy()
    src = c["size_source"].to_numpy(dtype=object).copy()
    corr, ext = c["correlation"].to_numpy(), c["rpc_ext"].to_numpy()
    for i in range(n):
        a, how = kargs.get(int(corr[i])), "kernel args"
        if a is None:
            a, how = rpc.get(int(ext[i])), "record_param_comms"
        if a is None:
            continue
        canon = canonical_collective(a["coll"])
        if canon:               # the issuing op's own name for it beats the kernel's
            coll[i] = canon
        cols["in_nelems"][i], cols["out_nelems"][i] = a["in_nelems"], a["out_nelems"]
        cols["group_size"][i] = a["group_size"]
        dtype[i], pg[i] = a["dtype"], a["pg"]
        eb = dtype_bytes(a["dtype"])
        ne = max(a["in_nelems"], a["out_nelems"])
        if eb > 0 and ne >= 0:
            cols["bytes"][i] = ne * eb
            src[i] = how
    s.collectives = c.assign(coll=coll, dtype=dtype, pg=pg, size_source=src, **cols)


def finish_collectives(s: RankSummary) -> None:
    """Kinds and occurrence indexes (k-th call of each collective per process group, overall
    and within its iteration): the keys the reduce step matches ranks on."""
    c = s.collectives
    if not isinstance(c, pd.DataFrame) or not len(c):
        s.collectives = pd.DataFrame({col: pd.Series([], dtype=object if col in (
            "kernel", "coll", "kind", "pg", "dtype", "size_source") else "int64") for col in COLL_COLUMNS})
        return
    c = c.sort_values(["start", "device", "stream"], kind="stable").reset_index(drop=True)
    c["kind"] = [collective_kind(x) for x in c["coll"]]
    grp = [c["pg"].to_numpy(dtype=object), c["coll"].to_numpy(dtype=object)]
    c["occurrence"] = c.groupby(grp, sort=False).cumcount().astype(np.int64)
    c["k_in_step"] = c.groupby(grp + [c["step"].to_numpy()], sort=False).cumcount().astype(np.int64)
    s.collectives = c


__all__ = ["RankSummary", "summarize_source", "summarize_timeline", "rank_from_name",
           "is_url", "local_copy"]

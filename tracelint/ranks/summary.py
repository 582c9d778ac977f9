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
and the `record_param_comms` CPU op that encloses each collective's launch (same keys):
collective_args.py. An nsys file with several processes is split by processes.py.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from ..meminfo import peak_rss_bytes
from ..secrets.sink import found_in
from ..timeline import intervals
from ..timeline.classify import in_labels, labels_at
from ..timeline.collectives import canonical_collective, issuing_collective
from .collective_args import attach_sizes, finish_collectives, read_comm_args
from .processes import _rank_hint, split_processes
from .inputs import is_url
from .rank_summary import ITER_COLUMNS, RankSummary, rank_from_name

_EPOCH_MIN_NS = 10**18          # 2001-09-09: a time base this large is a Unix epoch


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
    from ..io import copy_capped, url_errors
    try:
        with url_errors(source), fsspec.open(source, "rb") as src, open(path, "wb") as dst:
            copy_capped(src, dst, source)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ----- entry point for workers ------------------------------------------------------------------
def summarize_source(source: str, config=None, run_rules: bool = True,
                     graphs: bool = False) -> list[RankSummary]:
    """Load one trace and summarise each rank in it (one for Kineto; one per process for an nsys
    file that recorded several). Never raises: a failure becomes a summary with ok=False.
    graphs: also build each rank's what-if graph for the job replay (ranks/job_whatif.py), here
    in the worker, where the trace is loaded already."""
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
                if graphs:
                    from ..whatif.graph import build
                    s.graph = build(part)
                out.append(s)
            del tl, parts, part
            found = found_in(str(path))     # for the output sink, here in parallel
            for s in out:
                s.found_secrets = found
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
    is_comm_k = in_labels(tl.kernel_class, ("communication",)) if len(k) else \
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
        g = pd.DataFrame({"name": labels_at(k["name"], ~is_comm_k),
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
    names = labels_at(k["name"], crow)
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
            q = np.flatnonzero(has)
            a = launch[q]
            last = intervals.best_enclosing(     # the last enclosing one in row order
                api["pid"].to_numpy()[a] * 1_000_003 + api["tid"].to_numpy()[a], att[q],
                rp["pid"].to_numpy() * 1_000_003 + rp["tid"].to_numpy(),
                rp["start"].to_numpy(), rp["end"].to_numpy(), np.arange(len(rp)))
            rpc_ext[q[last >= 0]] = rp["external_id"].to_numpy()[last[last >= 0]]
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


__all__ = ["RankSummary", "summarize_source", "summarize_timeline", "rank_from_name",
           "local_copy"]

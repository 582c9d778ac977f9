"""Multi-rank jobs: find the traces, run the per-rank map (local process pool or Dask), group
them into one job, assign rank ids, and run the cross-rank rules on the summaries.

    report = lint_job(["traces/run42/"], config, jobs=4)                     # local pool
    report = lint_job(["s3://bucket/run42/"], config, dask_address="tcp://sched:8786")

Rank ids come from, in order: the trace's distributedInfo (Kineto), the NVTX "MPI Rank N"
thread name (nsys MPI tracing), the file name (rank3, rank_3, rank-3, rank3of8, _3of8), the
device id or process order of an nsys export that holds several processes, and last the
input order (noted). Files of other jobs in the same folder (a different world size, a
recording time that does not overlap, a rank id already taken) are listed as not part of the
job and left out of the cross-rank analysis.
"""
from __future__ import annotations

import functools
import glob as globmod
import gzip
import os
import re
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from ..engine.config import Config
from ..errors import TraceFormatError, TracelintError
from ..forking import frozen_heap, mp_context, usable_cpus
from ..heap import for_trace_after_trace
from .inputs import is_job_input, is_url
from .report import JobReport
from .summary import RankSummary, rank_from_name, summarize_source

#: Files taken from a folder when their content says they are traces.
TRACE_NAMES = (".json", ".json.gz", ".sqlite", ".nsys-rep", ".qdrep", ".gz")
#: Recording windows of ranks of one job overlap; this much apart still counts (clock skew).
TIME_SLACK_NS = 120 * 10**9
STRONG_SOURCES = ("distributedInfo", "nsys MPI rank")

Progress = Callable[[int, int, str], None]


# ----- discovery -------------------------------------------------------------------------------

def discover(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """(trace sources, notes): folders are listed (not recursively) and their files kept when
    their first bytes say trace; explicit files are always kept (a bad one fails as a rank)."""
    sources: list[str] = []
    notes: list[str] = []
    for p in paths:
        p = str(p)
        if is_url(p):
            found = _discover_url(p)
            if not found:
                raise TracelintError(f"{p}: no trace files found")
            sources += found
            continue
        if any(ch in p for ch in "*?["):
            matches = sorted(globmod.glob(p))
            if not matches:
                raise TracelintError(f"{p}: no file matches")
            sources += [m for m in matches if Path(m).is_file()]
            continue
        path = Path(p)
        if path.is_dir():
            kept = 0
            for f in sorted(path.iterdir()):
                if not f.is_file() or f.name.startswith("."):
                    continue
                why = _not_a_trace(f)
                if why is None:
                    sources.append(str(f))
                    kept += 1
                elif f.name.endswith(TRACE_NAMES):
                    notes.append(f"{f.name}: skipped ({why})")
            if not kept:
                raise TracelintError(f"{p}: no trace files in this folder")
        elif path.exists():
            sources.append(str(path))
        else:
            raise TraceFormatError(f"{p}: no such file or folder")
    sources, dup_notes = _dedupe(sources)
    return sources, notes + dup_notes


def _not_a_trace(f: Path) -> str | None:
    from ..importers import sniff
    try:
        fmt = sniff(f)
    except TraceFormatError as exc:
        return str(exc).split(": ", 1)[-1]
    if fmt != "kineto-json":
        return None
    try:
        with open(f, "rb") as fh:
            head = fh.read(2)
        opener = gzip.open if head == b"\x1f\x8b" else open
        with opener(f, "rb") as fh:
            block = fh.read(1 << 16)
    except (OSError, EOFError):
        return None            # unreadable: let the rank fail and say why
    if b'"traceEvents"' in block or b'"ph"' in block:
        return None
    return "JSON without trace events"


def _discover_url(url: str) -> list[str]:
    from ..io import url_errors
    with url_errors(url):
        return _list_url(url)


def _list_url(url: str) -> list[str]:
    import fsspec
    fs, root = fsspec.core.url_to_fs(url)
    if any(ch in root for ch in "*?["):
        files = sorted(fs.glob(root))
    elif fs.isdir(root):
        files = sorted(f for f in fs.ls(root, detail=False) if fs.isfile(f))
        files = [f for f in files if f.endswith(TRACE_NAMES)]
    else:
        files = [root]
    return [fs.unstrip_protocol(f) for f in files]


def _dedupe(sources: list[str]) -> tuple[list[str], list[str]]:
    """Drop a .nsys-rep / .qdrep whose SQLite export sits beside it; drop exact duplicates."""
    seen, out, notes = set(), [], []
    stems = {os.path.splitext(s)[0] for s in sources if s.endswith(".sqlite")}
    for s in sources:
        if s in seen:
            continue
        seen.add(s)
        if s.endswith((".nsys-rep", ".qdrep")) and os.path.splitext(s)[0] in stems:
            notes.append(f"{os.path.basename(s)}: skipped (its .sqlite export is analysed)")
            continue
        out.append(s)
    return out, notes


# ----- configuration ----------------------------------------------------------------------------
def check_config(config: Config | None) -> Config:
    """The job's config, validated against every rule of both scopes: one config serves the
    per-rank step (trace-scope rules) and the cross-rank step (job-scope rules)."""
    from ..api import available_rules
    config = config or Config()
    rules = available_rules(config)
    config.validate(rules)
    for rule in rules:                      # option names and types, before any rank is read
        if rule.id in config.options or rule.slug in config.options:
            config.options_for(rule)
    return config


# ----- execution: the map step ------------------------------------------------------------------
def run_map(sources: Sequence[str], config: Config | None, jobs: int | None = None,
            dask_address: Any = None, progress: Progress | None = None,
            graphs: bool = False) -> tuple[list[RankSummary], dict]:
    """Summaries of every source in the sources' order (whichever finished first), from a
    local process pool or a Dask cluster; graphs: with each rank's what-if graph
    (summarize_source)."""
    sources = list(sources)
    task = functools.partial(summarize_source, config=config, graphs=graphs)
    if dask_address is not None:
        out, execution = _map_dask(sources, task, dask_address, progress)
    else:
        n = jobs if jobs is not None else min(usable_cpus(), max(len(sources), 1))
        if n <= 0:
            out, execution = _map_inline(sources, task, progress)
        else:
            out, execution = _map_local(_largest_first(sources), task,
                                        max(1, min(n, len(sources) or 1)), progress)
    at = {s: i for i, s in enumerate(sources)}
    out.sort(key=lambda s: at.get(s.source, len(at)))     # stable: a file's processes in order
    return out, execution


def _largest_first(sources: list[str]) -> list[str]:
    """Local files by size, largest first, then what has no size here (URLs) in its order: the
    pool then ends on small ranks, not with one worker alone on a large one."""
    def size(source: str) -> int:
        try:
            return os.path.getsize(source)
        except OSError:
            return -1
    return sorted(sources, key=size, reverse=True)       # stable for equal sizes


def _failed(source: str, error: str) -> RankSummary:
    label = os.path.basename(source.rstrip("/"))
    r, w = rank_from_name(label)
    return RankSummary(source=source, label=label, ok=False, error=error, rank_hint=r,
                       rank_source="file name" if r is not None else "", world_size=w)


def _map_inline(sources, task, progress):
    out = []
    for i, s in enumerate(sources):
        out += task(s)
        if progress:
            progress(i + 1, len(sources), os.path.basename(s))
    return out, {"mode": "inline", "workers": 1}


def _map_local(sources, task, workers, progress):
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool
    out: list[RankSummary] = []
    # the pool forks all its workers at the first submit, before the progress bar's thread
    with frozen_heap(), ProcessPoolExecutor(max_workers=workers, mp_context=mp_context(),
                                            initializer=for_trace_after_trace) as ex:
        futs = {ex.submit(task, s): s for s in sources}
        if progress:
            progress(0, len(sources), "")
        for done, fut in enumerate(as_completed(futs), 1):
            src = futs[fut]
            try:
                out += fut.result()
            except BrokenProcessPool:
                out.append(_failed(src, "the worker process died (out of memory?) while reading it"))
            except Exception as exc:  # noqa: BLE001
                out.append(_failed(src, f"{type(exc).__name__}: {exc}"))
            if progress:
                progress(done, len(sources), os.path.basename(src))
    return out, {"mode": "local process pool", "workers": workers}


def _map_dask(sources, task, address, progress):
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise TracelintError("--dask needs the dask extra: pip install 'tracelint[dask]'") from None
    own = not isinstance(address, Client)
    try:
        client = Client(address, timeout="30s") if own else address
    except (OSError, TimeoutError) as exc:
        raise TracelintError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    try:
        futs = client.map(task, sources, pure=False,
                          key=[f"tracelint-rank-{i}-" + re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.basename(s))[:40]
                               for i, s in enumerate(sources)])
        src_of = {f.key: s for f, s in zip(futs, sources)}
        out: list[RankSummary] = []
        workers = len(client.scheduler_info().get("workers", {}))
        for done, fut in enumerate(as_completed(futs), 1):
            src = src_of[fut.key]
            try:
                out += fut.result()
            except Exception as exc:  # noqa: BLE001 - a lost worker fails that rank only
                out.append(_failed(src, f"{type(exc).__name__} on the Dask worker: {exc}"))
            fut.release()
            if progress:
                progress(done, len(sources), os.path.basename(src))
        return out, {"mode": "dask", "workers": workers, "address": str(client.scheduler.address)}
    finally:
        if own:
            client.close()


# ----- reduce: one job, rank ids -----------------------------------------------------------------
def _compatible(s: RankSummary, members: list[RankSummary]) -> str | None:
    """None when s fits the cluster, else why not."""
    worlds = {m.world_size for m in members if m.world_size}
    if s.world_size and worlds and s.world_size not in worlds:
        return f"world size {s.world_size}, this job's is {sorted(worlds)[0]}"
    starts = [m.epoch_start_ns for m in members if m.epoch_start_ns is not None]
    ends = [m.epoch_end_ns for m in members if m.epoch_end_ns is not None]
    if s.epoch_start_ns is not None and starts:
        lo, hi = min(starts), max(ends)
        if s.epoch_start_ns > hi + TIME_SLACK_NS or s.epoch_end_ns < lo - TIME_SLACK_NS:
            return ("recorded at a different time (" + time.strftime("%Y-%m-%d %H:%M", time.gmtime(s.epoch_start_ns / 1e9))
                    + " UTC; this job: " + time.strftime("%Y-%m-%d %H:%M", time.gmtime(lo / 1e9)) + " UTC)")
    if s.rank_source in STRONG_SOURCES and s.rank_hint is not None and any(
            m.rank_hint == s.rank_hint and m.rank_source in STRONG_SOURCES for m in members):
        return f"rank {s.rank_hint} is already taken by another trace of this job"
    return None


def group_job(summaries: list[RankSummary]) -> tuple[list[RankSummary], list[dict], list[str]]:
    """(members of the analysed job with final rank ids, excluded files with reasons, notes)."""
    ok = [s for s in summaries if s.ok]
    ok.sort(key=lambda s: (s.epoch_start_ns or 0, s.source, s.process or 0))
    clusters: list[list[RankSummary]] = []
    for s in ok:
        for c in clusters:
            if _compatible(s, c) is None:
                c.append(s)
                break
        else:
            clusters.append([s])
    notes: list[str] = []
    if not clusters:
        return [], [], notes
    clusters.sort(key=lambda c: -len(c))
    job = clusters[0]
    excluded = []
    for c in clusters[1:]:
        for s in c:
            excluded.append({"source": s.source, "label": s.label, "rank": s.rank_hint,
                             "reason": _compatible(s, job) or "belongs to another job",
                             "findings_by_severity": s.findings_by_severity()})
    if len(clusters) > 1:
        notes.append(f"{sum(len(c) for c in clusters[1:])} trace(s) belong to other jobs and were left "
                     "out of the cross-rank analysis; lint them separately")
    # final rank ids: hints first (strong sources win a tie), then free ids in input order
    order = sorted(job, key=lambda s: (s.rank_hint is None, s.rank_source not in STRONG_SOURCES,
                                       s.rank_hint if s.rank_hint is not None else 0, s.source,
                                       s.process or 0))
    used: set[int] = set()
    pending = []
    for s in order:
        if s.rank_hint is not None and s.rank_hint not in used:
            s.rank = s.rank_hint
            used.add(s.rank)
        else:
            pending.append(s)
    nxt = 0
    for s in pending:
        while nxt in used:
            nxt += 1
        s.rank = nxt
        used.add(nxt)
        why = "duplicated" if s.rank_hint is not None else "missing"
        notes.append(f"{s.label}: rank {nxt} assigned by input order (its rank id was {why})")
        s.rank_source = "input order"
    for s in job:
        if s.rank_source == "file name":
            s.notes.append(f"rank {s.rank} taken from the file name (no distributedInfo)")
        for f in s.findings:
            if f.get("where", {}).get("rank") != s.rank:
                f.setdefault("where", {})["rank"] = s.rank
    job.sort(key=lambda s: s.rank)
    return job, excluded, notes


def lint_job(paths: Sequence[str], config: Config | None = None, jobs: int | None = None,
             dask_address: Any = None, progress: bool | Progress = False,
             replay: bool = True) -> JobReport:
    """Lint the traces of one distributed job: per-rank findings plus cross-rank findings.

    paths: files, folders, globs or fsspec URLs. jobs: local worker processes (default
    min(cpus, ranks); 0 runs in this process). dask_address: a scheduler address or a
    distributed.Client; the workers read the traces themselves, so paths must be visible to
    them (a shared file system or any fsspec URL). progress: True for a bar on stderr (TTY
    only), or a callback(done, total, label). replay: project the cross-rank findings' savings
    by replaying the ranks together (job_whatif.py; the map step's workers build each rank's
    graph for it).
    """
    t0 = time.perf_counter()
    from ..api import lint_job_rules
    from .job_whatif import MAX_RANKS
    config = check_config(config)
    sources, notes = discover(paths)
    with _progress_bar(progress, len(sources)) as cb:
        summaries, execution = run_map(sources, config, jobs, dask_address, cb,
                                       graphs=replay and len(sources) <= MAX_RANKS)
    t_map = time.perf_counter() - t0
    failed = [s for s in summaries if not s.ok]
    members, excluded, group_notes = group_job(summaries)
    t1 = time.perf_counter()
    findings, infos, skipped, suppressed, ctx = lint_job_rules(members, config)
    whatif = {}
    if replay:
        from .job_whatif import project_job_savings
        t2 = time.perf_counter()
        whatif = project_job_savings(members, findings, ctx) or {}
        if whatif:
            whatif["elapsed_s"] = round(time.perf_counter() - t2, 3)
    scanned = {s.source: s.found_secrets for s in summaries if s.found_secrets is not None}
    for s in summaries:        # the replay is made: the report keeps the summaries only
        s.graph = s.found_secrets = None
    world = max([s.world_size or 0 for s in members] + [0]) or None
    if world and members and len(members) < world:
        group_notes.append(f"{len(members)} of {world} ranks present: cross-rank figures describe these "
                           "ranks only")
    t_end = time.perf_counter()
    return JobReport(sources=list(sources), ranks=members, findings=findings, rules=infos,
                     failed=failed, excluded=excluded, skipped=skipped, suppressed=suppressed,
                     world_size=world, notes=notes + group_notes, execution=execution,
                     elapsed_s={"map": t_map, "reduce": t_end - t1, "total": t_end - t0},
                     context=ctx, whatif=whatif, scanned=scanned)


class _progress_bar:
    """A rich progress bar across ranks on stderr, only when stderr is a terminal."""

    def __init__(self, progress, total: int):
        self.progress, self.total, self.bar = progress, total, None

    def __enter__(self) -> Progress | None:
        if callable(self.progress):
            return self.progress
        if not self.progress:
            return None
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as Bar
        console = Console(stderr=True)
        if not console.is_terminal:
            return None
        self.bar = Bar(TextColumn("[dim]ranks"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("[dim]{task.description}"), TimeElapsedColumn(),
                       console=console, transient=True)
        task = self.bar.add_task("", total=self.total)
        started = []

        def cb(done: int, total: int, label: str) -> None:
            if not started:          # the bar's refresh thread starts only after the workers
                self.bar.start()
                started.append(True)
            self.bar.update(task, completed=done, description=label[:40])
        return cb

    def __exit__(self, *exc) -> None:
        if self.bar is not None and self.bar.live.is_started:
            self.bar.stop()


__all__ = ["lint_job", "is_job_input", "discover", "run_map", "group_job", "check_config"]

"""Cut a trace down to a time window plus context, in its own format, never touching the input.

Kineto JSON (plain or gzip) -> a gzipped Kineto JSON that keeps, byte for byte:
  * every metadata event (ph M) and every top-level key (deviceProperties, distributedInfo,
    baseTimeNanoseconds, ...), plus a `tracelintExcerpt` key saying where it was cut;
  * complete (X) events that overlap the window, instants and counters inside it;
  * the launch calls (cuda_runtime / cuda_driver) of every kept GPU event, even when the call
    lies before the window (the host runs ahead), the CPU ops / annotations / Python frames on
    that thread that enclose such a call, and the ac2g flow pairs of the kept GPU events;
  * the profiler-span event ("Trace" category) with its bounds clipped to the window.
Nsight Systems SQLite -> a SQLite file with the SAME schema: the input is copied read-only
with the sqlite3 backup API, then rows outside the window are deleted from every timed table
(a `start` or `timestamp` column), keeping the launch calls (CUPTI runtime rows) of the kept
GPU rows and the NVTX ranges that enclose them, NVTX registration rows, and every untimed
table whole (StringIds, TARGET_INFO_*, ENUM_*, META_DATA_*, PROCESSES, ...); call-chain rows no
kept event refers to are dropped; then VACUUM with 1 KiB pages.

Size: excerpts are measured in stored bytes, the size git keeps (zlib-compressed): the file
size of a .json.gz, the zlib size of a .sqlite. SIZE_LIMIT_BYTES (256 KiB) is the limit.
"""
from __future__ import annotations

import gzip
import io
import os
import sqlite3
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from ..io import copy_sqlite, decompressed
from ..reporters.fmt import fmt_ns
from .kineto_excerpt import KinetoEvents
from .model import CaseError
from .rocprof_excerpt import rocprof_excerpt

#: Stored (compressed) bytes one excerpt may take; see docs/cases.md for the reasoning.
SIZE_LIMIT_BYTES = 256 * 1024
#: the formats an excerpt is cut from, and its file name. jax.profiler traces are Chrome-trace
#: JSON like Kineto's, with their lanes named by metadata events, and cut the same way.
EXCERPT_NAMES = {"kineto-json": "excerpt.json.gz", "nsys-sqlite": "excerpt.sqlite",
                 "jax-json": "excerpt.trace.json.gz", "rocprofv3-json": "excerpt.rocprof.json.gz"}


@dataclass
class ExcerptInfo:
    path: Path
    format: str
    window_ns: tuple[int, int]        # the window asked for
    context_ns: int
    bytes: int                        # file size
    stored_bytes: int                 # compressed size (what the limit applies to)
    kept: dict[str, int] = field(default_factory=dict)   # rows / events kept per table or kind

    @property
    def cut_window(self) -> tuple[int, int]:
        return (self.window_ns[0] - self.context_ns, self.window_ns[1] + self.context_ns)


def stored_size(path: str | Path) -> int:
    """Bytes the file takes compressed: itself when gzipped, else its zlib (level 6) size."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        return len(data)
    return len(zlib.compress(data, 6))


def trace_format(path: str | Path) -> str:
    """The trace's format, one an excerpt can be cut from (EXCERPT_NAMES); CaseError else."""
    from ..importers import sniff
    fmt = sniff(Path(path))
    if fmt == "nsys-rep":
        raise CaseError(f"{path}: an .nsys-rep report; export it first "
                        "(`nsys export --type sqlite`) and cut the .sqlite")
    if fmt not in EXCERPT_NAMES:
        raise CaseError(f"{path}: a {fmt} trace; case excerpts are cut from Nsight Systems "
                        "SQLite exports, torch.profiler (Kineto), jax.profiler and rocprofv3 JSON "
                        "traces only. `tracelint case match` compares this trace's findings with "
                        "the library's cases")
    return fmt


def cut(src: str | Path, out: str | Path, window: tuple[int, int], context_ns: int = 0) -> ExcerptInfo:
    """Write the excerpt of `src` around `window` (ns, the trace's own time base) +- context."""
    return _cut(src, out, window, context_ns)


def _cut(src: str | Path, out: str | Path, window: tuple[int, int], context_ns: int = 0,
         budget: int | None = None) -> ExcerptInfo:
    """cut(); budget: a Kineto excerpt stored in more bytes raises _OverBudget, unwritten."""
    src, out = Path(src), Path(out)
    a, b = int(window[0]), int(window[1])
    if b < a:
        raise CaseError(f"window {a}:{b}: end before start")
    if context_ns < 0:
        raise CaseError("context must be >= 0 ns")
    if src.resolve() == out.resolve():
        raise CaseError(f"{out}: the excerpt would overwrite its source")
    fmt = trace_format(src)
    lo, hi = a - context_ns, b + context_ns
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt in ("kineto-json", "jax-json"):
        kept = _cut_kineto(src, out, lo, hi, (a, b), context_ns, budget)
    elif fmt == "rocprofv3-json":
        kept = _cut_rocprof(src, out, lo, hi, (a, b), context_ns, budget)
    else:
        kept = _cut_sqlite(src, out, lo, hi)
    return ExcerptInfo(out, fmt, (a, b), int(context_ns), out.stat().st_size, stored_size(out), kept)


def cut_to_fit(src: str | Path, out: str | Path, window: tuple[int, int], context_ns: int,
               limit: int = SIZE_LIMIT_BYTES) -> ExcerptInfo:
    """cut() with the largest context of the halving sequence (context_ns, half of it, ...
    down to 0) whose excerpt fits `limit`; CaseError when even the bare window is too big.

    An excerpt only grows with its context (it keeps a superset of the events), so the bare
    window is cut first: when it is too big no context fits, an answer that took a cut per
    halving, about 20 per attempt (92 cuts, 23.5 s of a failed `case add` on the reference
    trace). Then the contexts largest first, as before: a cut that passes the limit is given
    up as its gzip does."""
    contexts = [max(int(context_ns), 0)]
    while contexts[-1]:
        contexts.append(contexts[-1] // 2 if contexts[-1] > 1000 else 0)
    bare = _cut(src, out, window, 0)         # made whole, for the size the error gives
    if bare.stored_bytes > limit:
        Path(out).unlink(missing_ok=True)
        a, b = window
        raise CaseError(
            f"the excerpt of window {a}:{b} is {bare.stored_bytes / 1024:.0f} KiB stored even "
            f"with no context, over the {limit // 1024} KiB limit for a case excerpt; pick a "
            f"narrower --window (the excerpt only grows with its context of up to "
            f"{fmt_ns(contexts[0])})")
    overwritten = False
    for ctx in contexts[:-1]:
        try:
            info = _cut(src, out, window, ctx, budget=limit)
        except _OverBudget:                  # nothing written
            continue
        if info.stored_bytes <= limit:
            return info
        overwritten = True
    return _cut(src, out, window, 0) if overwritten else bare


# ----- Kineto (which events: kineto_excerpt) ------------------------------------------------
def _read_json_bytes(path: Path) -> bytes:
    return decompressed(path.read_bytes(), path)


def _cut_kineto(src: Path, out: Path, lo: int, hi: int, window: tuple[int, int],
                context_ns: int, budget: int | None = None) -> dict[str, int]:
    """Write the excerpt; with a budget, _OverBudget as soon as its gzip passes that many
    bytes (nothing is written: the rest of a large excerpt is never made or compressed)."""
    events = KinetoEvents.of(src, _read_json_bytes)
    counts: dict[str, int] = {}
    pieces = events.payload(events.keep(lo, hi), lo, hi, {
        "source": src.name, "window_ns": [window[0], window[1]], "context_ns": int(context_ns)},
        counts)
    _write_gz(out, pieces, budget)
    return counts


def _cut_rocprof(src: Path, out: Path, lo: int, hi: int, window: tuple[int, int],
                 context_ns: int, budget: int | None = None) -> dict[str, int]:
    """Write a rocprofv3 JSON excerpt (rocprof_excerpt); _OverBudget as _cut_kineto."""
    counts: dict[str, int] = {}
    info = {"source": src.name, "window_ns": [window[0], window[1]], "context_ns": int(context_ns)}
    try:
        _write_gz(out, rocprof_excerpt(_read_json_bytes(src), lo, hi, info, counts), budget)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CaseError(f"{src}: not rocprofv3 JSON that can be cut: {exc}") from None
    return counts


class _OverBudget(Exception):
    """An excerpt's gzip passed its budget while it was being made."""


class _Budgeted(io.BytesIO):
    def __init__(self, budget: int | None):
        super().__init__()
        self.budget, self.over = budget, False

    def write(self, b) -> int:
        if self.over:
            return len(b)
        n = super().write(b)
        if self.budget is not None and self.tell() > self.budget:
            self.over = True                       # later writes (gzip's close) are dropped
            raise _OverBudget
        return n


def _write_gz(path: Path, pieces, budget: int | None = None) -> None:
    """Deterministic gzip (mtime 0, no file name) of the pieces, written atomically;
    _OverBudget when it passes `budget` bytes."""
    buf = _Budgeted(budget)
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        for piece in pieces:
            gz.write(piece)
    _atomic_bytes(path, buf.getvalue())


def _atomic_bytes(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ----- Nsight Systems SQLite -----------------------------------------------------------------
#: call-chain table -> (table, column) rows that refer to it by id
_CALLCHAIN_REFS = {
    "OSRT_CALLCHAINS": [("OSRT_API", "callchainId")],
    "CUDA_CALLCHAINS": [("CUPTI_ACTIVITY_KIND_RUNTIME", "callchainId")],
    "SAMPLING_CALLCHAINS": [("COMPOSITE_EVENTS", "id")],
}
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
#: NVTX event types that register names (category 33, domain create 75): kept whatever their time
NVTX_REGISTRATIONS = (33, 75)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _cut_sqlite(src: Path, out: Path, lo: int, hi: int) -> dict[str, int]:
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    try:
        d = copy_sqlite(src, tmp)
        d.execute("PRAGMA synchronous = OFF")     # a scratch file until the rename
        try:
            counts = _prune(d, lo, hi)
            d.commit()
            d.execute("PRAGMA journal_mode = DELETE")
            d.execute("PRAGMA page_size = 1024")
            d.execute("VACUUM")
        finally:
            d.close()
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return counts


def _prune(d: sqlite3.Connection, lo: int, hi: int) -> dict[str, int]:
    tables = [r[0] for r in d.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")]
    cols = {t: [r[1] for r in d.execute(f"PRAGMA table_info({_q(t)})")] for t in tables}

    def outside(t: str, alias: str = "") -> str | None:
        c = cols[t]
        p = f"{alias}." if alias else ""
        if "start" in c and "end" in c:
            return f"NOT ({p}start <= {hi} AND COALESCE({p}\"end\", {p}start) >= {lo})"
        if "start" in c:
            return f"NOT ({p}start BETWEEN {lo} AND {hi})"
        if "timestamp" in c:
            return f"NOT ({p}timestamp BETWEEN {lo} AND {hi})"
        return None

    timed = [t for t in tables if outside(t) is not None]
    # 1. GPU-side and other timed tables (launch calls and NVTX after them)
    for t in timed:
        if t in (RUNTIME, NVTX):
            continue
        d.execute(f"DELETE FROM {_q(t)} WHERE {outside(t)}")
    # 2. launch calls: in the window, or the call of a kept GPU row (same process)
    if RUNTIME in cols and "correlationId" in cols[RUNTIME]:
        gpu = [t for t in timed if t != RUNTIME and "correlationId" in cols[t]]
        parts = [f"SELECT correlationId AS c, "
                 f"{'globalPid >> 24' if 'globalPid' in cols[t] else 'NULL'} AS p FROM {_q(t)}"
                 for t in gpu]
        d.execute("DROP TABLE IF EXISTS temp.keep_corr")
        d.execute("CREATE TEMP TABLE keep_corr (c INTEGER, p INTEGER)")
        if parts:
            d.execute("INSERT INTO temp.keep_corr " + " UNION ".join(parts))
        d.execute("CREATE INDEX temp.keep_corr_c ON keep_corr (c)")
        pid_match = "(k.p IS NULL OR k.p = r.globalTid >> 24)" if "globalTid" in cols[RUNTIME] else "1"
        d.execute(f"DELETE FROM {_q(RUNTIME)} AS r WHERE {outside(RUNTIME, 'r')} AND NOT EXISTS "
                  f"(SELECT 1 FROM temp.keep_corr k WHERE k.c = r.correlationId AND {pid_match})")
        d.execute("DROP TABLE temp.keep_corr")
    elif RUNTIME in cols and outside(RUNTIME):
        d.execute(f"DELETE FROM {_q(RUNTIME)} WHERE {outside(RUNTIME)}")
    # 3. NVTX: ranges in the window, ranges enclosing a kept launch call, name registrations
    if NVTX in cols and outside(NVTX):
        c = cols[NVTX]
        keep = []
        if "eventType" in c:
            keep.append(f"n.eventType IN {NVTX_REGISTRATIONS}")
        if RUNTIME in cols and {"start", "globalTid"} <= set(cols[RUNTIME]) and "globalTid" in c:
            keep.append(f"EXISTS (SELECT 1 FROM {_q(RUNTIME)} r WHERE r.globalTid = n.globalTid "
                        f"AND r.start >= n.start AND r.start <= COALESCE(n.\"end\", n.start))")
        cond = outside(NVTX, "n") + "".join(f" AND NOT ({k})" for k in keep)
        d.execute(f"DELETE FROM {_q(NVTX)} AS n WHERE {cond}")
    # 4. call chains nothing refers to any more
    for chain, refs in _CALLCHAIN_REFS.items():
        if chain not in cols or "id" not in cols[chain]:
            continue
        if not all(t in cols and c in cols[t] for t, c in refs):
            continue
        ref_sql = " UNION ".join(f"SELECT {_q(c)} FROM {_q(t)} WHERE {_q(c)} IS NOT NULL" for t, c in refs)
        d.execute(f"DELETE FROM {_q(chain)} WHERE id NOT IN ({ref_sql})")
    return {t: d.execute(f"SELECT COUNT(*) FROM {_q(t)}").fetchone()[0] for t in timed}

"""Nsight Systems SQLite export -> Timeline, for exporters 2020.5 .. 2026.x.

Why it is built this way (schema notes: shared/docs/nsys-sqlite-schema.md):
- The file is opened read-only and immutable, so loading never writes to a trace.
- Tables are looked up by name and columns by PRAGMA table_info; an absent table is an empty
  one, so older and newer schemas degrade instead of crashing.
- Rows are pulled with one ``group_concat`` per column and parsed by numpy: SQLite's C loop
  does the work and no Python object is made per value. Big tables are cut into rowid ranges
  read on several connections at once (SQLite and numpy release the GIL); the CUDA API
  table loads on a side thread while kernels are built.
- Names stay integer ids until the end; only the distinct ids are looked up in StringIds
  (never read whole: it can hold huge environment blocks) and become categoricals.
"""
from __future__ import annotations

import os
import re
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import TraceFormatError
from ..io import readonly_sqlite_uri
from ..timeline import classify
from ..timeline.model import Device, Meta, Timeline
from ..timeline.nesting import nest
from ..timeline.schema import make_table
from .nsys_callchains import callchain_frames

KERNEL, MEMCPY, MEMSET = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                          "CUPTI_ACTIVITY_KIND_MEMSET")
RUNTIME, SYNC, NVTX = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                       "NVTX_EVENTS")
CHUNK_ROWS = 400_000        # rows per group_concat: bounds string size and feeds the threads
WORKERS = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
              else os.cpu_count() or 1)
LOW24 = 0xFFFFFF

#: copyKind (ENUM_CUDA_MEMCPY_OPER numbering) -> label used in copy names.
MEMCPY_LABELS = {0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA",
                 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM HtoD",
                 12: "UVM DtoH", 13: "UVM DtoD"}
COPY_KINDS = {"HtoD": "H2D", "HtoA": "H2D", "DtoH": "D2H", "AtoH": "D2H", "DtoD": "D2D",
              "AtoA": "D2D", "AtoD": "D2D", "DtoA": "D2D", "PtoP": "P2P", "HtoH": "H2H"}
#: nsys's own memory-kind numbering (not CUPTI's), as in ENUM_CUDA_MEM_KIND.
MEM_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed",
             5: "Device Static", 6: "Managed Static", 7: "Unknown"}
#: syncType meaning from exporter 2025 on (earlier exporters stored other numbers).
SYNC_TYPES_2025 = {1: "event", 2: "stream_wait_event", 3: "stream", 4: "device"}
NVTX_PUSHPOP, NVTX_STARTEND, NVTX_THREAD_NAME = 59, 60, 39
STEP_RX = re.compile(r"^(?:ProfilerStep#(\d+)|(?:iteration|iter|step)[ _#]?(\d+))$", re.I)
GPU_METRIC_KEY_RX = (r"(?i)SMs? Active|SM Issue|Tensor|DRAM|Warps|PCIe|GR Active|NVLink|"
                     r"Throughput|Bandwidth|Clock|Frequency")
CAPTURE_SOURCES = {"cuda": "cuda", "nvtxevents": "nvtx", "nvtx": "nvtx", "osruntime": "osrt"}
#: Device field -> candidate columns (TARGET_INFO_GPU, or the 2020.5 TARGET_INFO_CUDA_GPU).
DEVICE_COLUMNS = {"id": ("id", "deviceId"), "name": ("name",),
                  "sm_count": ("smCount", "numMultiprocessors"),
                  "memory_bytes": ("totalMemory", "totalGlobalMemory", "globalMemorySize"),
                  "memory_bandwidth_bps": ("memoryBandwidth", "globalMemoryBandwidth"),
                  "clock_hz": ("clockRate", "coreClockRate"),
                  "major": ("computeMajor", "computeCapabilityMajor"),
                  "minor": ("computeMinor", "computeCapabilityMinor"),
                  "registers": ("maxRegistersPerSm",), "warps": ("maxWarpsPerSm",),
                  "blocks": ("maxBlocksPerSm",), "shared_memory": ("maxShmemPerSm",)}


def load_nsys_sqlite(path, progress=None) -> Timeline:
    """Load an nsys SQLite export. Raises TraceFormatError (one line) on any bad input."""
    path = Path(path)
    report = progress or (lambda stage, fraction: None)
    db = _Db(path)
    try:
        if not db.is_nsys_export():
            raise TraceFormatError(f"{path}: SQLite file but not an Nsight Systems export "
                                   "(no StringIds, CUPTI_*, NVTX_EVENTS or TARGET_INFO_* table)")
        tl = Timeline(meta=_meta(db))
        report("kernels", 0.05)
        with ThreadPoolExecutor(1) as side:          # API rows load while kernels are built
            api_calls = side.submit(_api_calls, db)
            tl.kernels = _kernels(db)
            report("copies", 0.35)
            tl.copies, tl.memsets = _copies(db), _memsets(db)
            report("api_calls", 0.4)
            tl.api_calls = api_calls.result()
        report("ranges", 0.75)
        tl.ranges = _ranges(db, tl.meta)
        report("syncs", 0.85)
        tl.syncs = _syncs(db, tl.api_calls, tl.meta)
        tl.metrics = _metrics(db, tl.meta)
        frames = callchain_frames(db.con(), db.tables)       # --cudabacktrace stacks
        if frames is not None:
            tl.python_frames = frames
            tl.meta.extra["python_frame_lines"] = "native"
            tl.meta.captured.add("cuda_backtraces")
        _finish_meta(db, tl)
        report("done", 1.0)
        return tl
    except sqlite3.Error as exc:
        raise TraceFormatError(f"{path}: unreadable SQLite database ({_one_line(exc)})") from None
    finally:
        db.close()


# ----- database access --------------------------------------------------------------------
class _Db:
    """Read-only access: schema probing, parallel columnar scans, string lookup."""

    def __init__(self, path: Path):
        _check_header(path)
        self.path = path
        self._uri = readonly_sqlite_uri(path)
        self._local, self._cons = threading.local(), []
        self._pool = ThreadPoolExecutor(WORKERS)     # chunk scans of every table
        self._columns: dict[str, set[str]] = {}
        self._notnull: dict[str, set[str]] = {}
        try:
            # tables only: a view (possibly an endless recursive one) is never read
            rows = self.query("SELECT name FROM sqlite_master WHERE type = 'table'")
        except sqlite3.Error as exc:
            self.close()
            raise TraceFormatError(f"{path}: not a readable SQLite database "
                                   f"({_one_line(exc)})") from None
        self.tables = {r[0] for r in rows}

    def con(self) -> sqlite3.Connection:
        """One connection per thread: SQLite serialises the calls of a connection."""
        con = getattr(self._local, "con", None)
        if con is None:
            con = self._local.con = sqlite3.connect(self._uri, uri=True, check_same_thread=False)
            con.text_factory = _text                  # invalid UTF-8 (names, sqlite_master): replaced
            self._cons.append(con)
        return con

    def close(self) -> None:
        self._pool.shutdown()
        for con in self._cons:
            con.close()
        self._cons.clear()

    def query(self, sql: str, params=()) -> list[tuple]:
        try:
            return self.con().execute(sql, params).fetchall()
        except UnicodeDecodeError:       # SQLite's own message quoting a non-UTF-8 schema name
            raise TraceFormatError(f"{self.path}: the database schema holds names that are "
                                   "not UTF-8 (not an nsys export, or a damaged one)") from None

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            info = self.query(f'PRAGMA table_info("{table}")') if table in self.tables else []
            self._notnull[table] = {r[1] for r in info if r[3]}   # set first: two threads
            self._columns[table] = {r[1] for r in info}            # may probe at once
        return self._columns[table]

    def is_nsys_export(self) -> bool:
        return "StringIds" in self.tables or any(
            t.startswith(("CUPTI_", "TARGET_INFO_")) or t == NVTX for t in self.tables)

    def count(self, table: str) -> int:
        return self.query(f'SELECT COUNT(*) FROM "{table}"')[0][0]

    def scan(self, table: str, exprs: dict[str, str], where: str = "",
             floats: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
        """SQL expressions over `table` as numpy arrays in rowid order; NULL -> -1 (NaN)."""
        empty = {k: np.empty(0, np.float64 if k in floats else np.int64) for k in exprs}
        if table not in self.tables:
            return empty
        self.columns(table)
        aggs = ", ".join(f"group_concat({e})" if e.strip('"') in self._notnull[table] else
                         f"group_concat(ifnull({e}, {repr('nan') if k in floats else -1}))"
                         for k, e in exprs.items())
        sql = f'SELECT {aggs} FROM "{table}" WHERE {where or 1}'
        try:
            lo, hi = self.query(f'SELECT (SELECT MIN(rowid) FROM "{table}"), '   # two index
                                f'(SELECT MAX(rowid) FROM "{table}")')[0]          # lookups
            jobs = [(sql + " AND rowid BETWEEN ? AND ?", b) for b in _chunks(lo, hi, WORKERS)
                    ] if lo is not None else []
        except sqlite3.OperationalError:             # a WITHOUT ROWID table: one scan
            jobs = [(sql, ())]

        def chunk(job: tuple[str, tuple]) -> list[np.ndarray]:
            row = self.con().execute(*job).fetchone()
            return [_parse(v, k in floats, f"{self.path}: {table}.{k}")
                    for k, v in zip(exprs, row)]

        if not jobs:
            return empty
        parts = list(self._pool.map(chunk, jobs))
        out = {k: np.concatenate([p[i] for p in parts]) for i, k in enumerate(exprs)}
        if len({len(v) for v in out.values()}) > 1:
            raise TraceFormatError(f"{self.path}: inconsistent row data in {table}")
        return out

    def strings(self, ids: np.ndarray) -> dict[int, str]:
        """StringIds values of the given ids only."""
        ids = [int(i) for i in pd.unique(ids) if i >= 0]              # hashing, no sort
        out: dict[int, str] = {}
        if "StringIds" in self.tables:
            for i in range(0, len(ids), 500):
                part = ids[i:i + 500]
                rows = self.query(f"SELECT id, value FROM StringIds WHERE id IN "
                                  f"({','.join('?' * len(part))})", part)
                out.update((i, v if isinstance(v, str) else _text(v)) for i, v in rows)
        return out


def _text(v) -> str:
    """A StringIds value or name as text whatever its storage (BLOB, NULL, number, bad UTF-8)."""
    if isinstance(v, str):
        return v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "replace")
    return "" if v is None else str(v)


def _check_header(path: Path) -> None:
    """Reject non-SQLite and truncated files up front, with a clear message."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(100)
        size = path.stat().st_size
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(head) < 100 or not head.startswith(b"SQLite format 3\x00"):
        raise TraceFormatError(f"{path}: not a SQLite database")
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):
        raise TraceFormatError(f"{path}: corrupt SQLite header (page size {page})")
    pages = int.from_bytes(head[28:32], "big")
    if head[24:28] == head[92:96] and size < pages * page:   # in-header page count is valid
        raise TraceFormatError(f"{path}: truncated SQLite file ({size} of {pages * page} bytes)")


def _chunks(lo: int, hi: int, workers: int) -> list[tuple[int, int]]:
    """Rowid ranges of at most CHUNK_ROWS, as a multiple of `workers` for an even load."""
    rows = hi - lo + 1
    n = workers * -(-rows // (workers * CHUNK_ROWS))
    size = -(-rows // n)
    return [(a, min(a + size - 1, hi)) for a in range(lo, hi + 1, size)]


def _parse(text, as_float: bool, what: str) -> np.ndarray:
    """One group_concat result as an array; integers stored as REAL are accepted."""
    if text is None:
        return np.empty(0, np.float64 if as_float else np.int64)
    try:
        return np.fromstring(text, dtype=np.float64 if as_float else np.int64, sep=",")
    except ValueError:
        try:
            f = np.fromstring(text, dtype=np.float64, sep=",")
        except ValueError:
            raise TraceFormatError(f"{what}: non-numeric values") from None
        if not np.isfinite(f).all() or (np.abs(f) >= 2.0**63).any():
            raise TraceFormatError(f"{what}: non-finite or out-of-range values")
        return f.astype(np.int64)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _pick(cols: set[str], *names: str, default: str = "-1") -> str:
    """SQL for the first of `names` present in `cols`, else the default literal."""
    return next((f'"{n}"' for n in names if n in cols), default)


def _categorical(keys: np.ndarray, label) -> pd.Categorical:
    """Categorical from integer keys, calling label(key) once per distinct key."""
    inverse, uniq = pd.factorize(np.asarray(keys, dtype=np.int64))   # hashing, no sort
    code, labels = pd.factorize(np.array([label(int(k)) for k in uniq], dtype=object))
    return pd.Categorical.from_codes(code[inverse] if len(uniq) else inverse,
                                     categories=pd.Index(list(labels)))


def _names(db: _Db, ids: np.ndarray) -> pd.Categorical:
    strings = db.strings(ids)
    return _categorical(ids, lambda i: strings.get(i, "unknown"))


def _pid_tid(gtid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """globalTid / globalPid -> (pid, tid): bits 24-47 and 0-23."""
    pid, tid, null = (gtid >> 24) & LOW24, gtid & LOW24, gtid < 0
    pid[null] = tid[null] = -1
    return pid, tid


# ----- GPU activity -----------------------------------------------------------------------
def _activity_exprs(cols: set[str], **extra: str) -> dict[str, str]:
    """Columns shared by kernel, memcpy, memset and sync records, plus `extra` columns."""
    return {"start": _pick(cols, "start"), "end": _pick(cols, "end"),
            "device": _pick(cols, "deviceId"),
            "stream": _pick(cols, "streamId"), "correlation": _pick(cols, "correlationId"),
            "gpid": _pick(cols, "globalPid"), **{k: _pick(cols, c) for k, c in extra.items()}}


def _kernels(db: _Db) -> pd.DataFrame:
    cols = db.columns(KERNEL)
    exprs = _activity_exprs(
        cols, grid_x="gridX", grid_y="gridY", grid_z="gridZ", block_x="blockX",
        block_y="blockY", block_z="blockZ", registers_per_thread="registersPerThread",
        static_smem="staticSharedMemory", dynamic_smem="dynamicSharedMemory",
        local_mem_per_thread="localMemoryPerThread")
    exprs["name"] = ("ifnull(demangledName, shortName)" if {"demangledName", "shortName"} <= cols
                     else _pick(cols, "demangledName", "shortName"))
    exprs["graph"] = "ifnull(graphNodeId, 0) != 0" if "graphNodeId" in cols else "0"
    d = db.scan(KERNEL, exprs)
    d["pid"] = _pid_tid(d.pop("gpid"))[0]
    d["name"] = _names(db, d["name"])
    d["graph_launched"] = d.pop("graph") == 1
    return make_table("kernels", d)


def _enum(db: _Db, table: str, column: str) -> dict[int, str]:
    """An ENUM_* table (2022.4+) as {id: column}; empty when absent."""
    if {"id", column} <= db.columns(table):
        return {int(i): str(v) for i, v in db.query(f'SELECT id, "{column}" FROM "{table}"')}
    return {}


def _memory_labels(db: _Db) -> tuple[dict[int, str], dict[int, str]]:
    """(copyKind -> 'HtoD'-style label, memory kind -> 'Pageable'-style label)."""
    copies = dict(MEMCPY_LABELS)
    for i, sym in _enum(db, "ENUM_CUDA_MEMCPY_OPER", "name").items():
        m = re.search(r"KIND_(UVM_)?([A-Z])TO([A-Z])$", sym)
        copies[i] = (("UVM " if m.group(1) else "") + f"{m.group(2)}to{m.group(3)}" if m
                     else "Unknown")
    return copies, {**MEM_KINDS, **_enum(db, "ENUM_CUDA_MEM_KIND", "label")}


def _mem_kind(label: str) -> str:
    """'Device Static' -> 'device'; anything unexpected -> 'unknown'."""
    first = label.split()[0].lower() if label else "unknown"
    return first if first in {"pageable", "pinned", "device", "array", "managed"} else "unknown"


def _copies(db: _Db) -> pd.DataFrame:
    d = db.scan(MEMCPY, _activity_exprs(db.columns(MEMCPY), bytes="bytes", ck="copyKind",
                                        src="srcKind", dst="dstKind"))
    copy_label, mem_label = _memory_labels(db)
    cl = lambda k: copy_label.get(k, "Unknown")       # noqa: E731
    ml = lambda k: mem_label.get(k, "Unknown")        # noqa: E731
    ck, src, dst = d.pop("ck"), d.pop("src"), d.pop("dst")
    d["pid"] = _pid_tid(d.pop("gpid"))[0]
    d["kind"] = _categorical(ck, lambda k: COPY_KINDS.get(cl(k).replace("UVM ", ""), "other"))
    d["src_kind"] = _categorical(src, lambda k: _mem_kind(ml(k)))
    d["dst_kind"] = _categorical(dst, lambda k: _mem_kind(ml(k)))
    key = (ck & 0xFFFF) << 32 | (src & 0xFFFF) << 16 | (dst & 0xFFFF)
    d["name"] = _categorical(key, lambda k: f"Memcpy {cl(k >> 32)} "
                                            f"({ml((k >> 16) & 0xFFFF)} -> {ml(k & 0xFFFF)})")
    return make_table("copies", d)


def _memsets(db: _Db) -> pd.DataFrame:
    d = db.scan(MEMSET, _activity_exprs(db.columns(MEMSET), bytes="bytes", mk="memKind"))
    mem_label = _memory_labels(db)[1]
    mk = d.pop("mk")
    d["pid"] = _pid_tid(d.pop("gpid"))[0]
    d["mem_kind"] = _categorical(mk, lambda k: _mem_kind(mem_label.get(k, "Unknown")))
    d["name"] = _categorical(mk, lambda k: f"Memset ({mem_label.get(k, 'Unknown')})")
    return make_table("memsets", d)


# ----- host side --------------------------------------------------------------------------
def _api_calls(db: _Db) -> pd.DataFrame:
    """CUDA runtime (eventClass 0) and driver (1) calls; backtrace rows (67-69) are dropped."""
    cols = db.columns(RUNTIME)
    has_class = "eventClass" in cols
    key = f"({_pick(cols, 'nameId')} << 1) | " + ("(eventClass = 1)" if has_class else "0")
    d = db.scan(RUNTIME, {"start": _pick(cols, "start"), "end": _pick(cols, "end"),
                          "gtid": _pick(cols, "globalTid"),
                          "correlation": _pick(cols, "correlationId"), "key": key},
                where="eventClass IN (0, 1)" if has_class else "")
    key = d.pop("key")                               # nameId * 2 + is_driver
    strings = db.strings(key >> 1)
    name = lambda k: classify.strip_api_version(strings.get(k >> 1, "unknown"))  # noqa: E731
    d["name"] = _categorical(key, name)
    d["api"] = _categorical(key, lambda k: "driver" if k & 1 else "runtime") if has_class else \
        _categorical(key, lambda k: "runtime" if name(k).startswith("cuda") else "driver")
    d["pid"], d["tid"] = _pid_tid(d.pop("gtid"))
    return make_table("api_calls", d)


def _ranges(db: _Db, meta: Meta) -> pd.DataFrame:
    """Push/pop (59) and start/end (60) NVTX ranges; marks, domains and categories skipped."""
    cols = db.columns(NVTX)
    where = ((f"eventType IN ({NVTX_PUSHPOP}, {NVTX_STARTEND}) AND " if "eventType" in cols
              else "") + '"end" IS NOT NULL')
    d = db.scan(NVTX, {"rowid": "rowid", "start": _pick(cols, "start"), "end": _pick(cols, "end"),
                       "gtid": _pick(cols, "globalTid"), "type": _pick(cols, "eventType"),
                       "text_id": _pick(cols, "textId")}, where=where)
    rowid, etype = d.pop("rowid"), d.pop("type")
    d["pid"], d["tid"] = _pid_tid(d.pop("gtid"))
    d["name"] = name = pd.Categorical(_nvtx_labels(db, where, rowid, d.pop("text_id")))
    step_of = np.array([_step_number(str(c)) for c in name.categories] + [-1], dtype=np.int64)
    d["step"] = step = step_of[name.codes]
    d["kind"] = pd.Categorical(np.where(step >= 0, "step", "nvtx"), categories=["nvtx", "step"])
    # Start/end ranges may cross push/pop ranges (and threads): they nest only among themselves.
    group = (d["pid"] << 25) | (d["tid"] << 1) | (etype == NVTX_STARTEND)
    try:
        d["depth"], d["parent"] = nest(group, d["start"], d["end"])
    except ValueError as exc:                        # absurd timestamps: keep flat ranges
        meta.notes.append(f"NVTX nesting not rebuilt ({exc})")
    return make_table("ranges", d)


def _nvtx_labels(db: _Db, where: str, rowid: np.ndarray, text_id: np.ndarray) -> np.ndarray:
    """COALESCE(text, StringIds[textId]) per row; inline text is read only where present."""
    strings = db.strings(text_id)
    inverse, uniq = pd.factorize(text_id)
    labels = np.array([strings.get(int(i), "(unnamed)") for i in uniq], dtype=object)[inverse]
    if "text" in db.columns(NVTX) and len(rowid):
        rows = db.query(f'SELECT rowid, text FROM "{NVTX}" WHERE {where} AND text IS NOT NULL')
        if rows:
            at = np.searchsorted(rowid, np.fromiter((r[0] for r in rows), np.int64, len(rows)))
            labels[at] = [str(r[1]) for r in rows]
    return labels


def _step_number(label: str) -> int:
    m = STEP_RX.match(label.strip())
    return int(m.group(1) or m.group(2)) if m else -1


def _syncs(db: _Db, api: pd.DataFrame, meta: Meta) -> pd.DataFrame:
    """GPU sync records, typed by the API call reached via (pid, correlationId)."""
    d = db.scan(SYNC, _activity_exprs(db.columns(SYNC), raw="syncType"))
    d["pid"] = _pid_tid(d.pop("gpid"))[0]
    row = _link(api, d["pid"], d["correlation"])
    hit = row >= 0
    cats = list(api["name"].cat.categories)
    codes = api["name"].cat.codes.to_numpy().astype(np.int64)    # int8 would overflow below
    name_code = np.where(hit, codes[row] if len(api) else -1, -1)
    d["tid"] = np.where(hit, api["tid"].to_numpy()[row] if len(api) else -1, -1)
    use_type = (_exporter_year(meta) or 0) >= 2025   # syncType numbering is reliable from 2025

    def sync_type(key: int) -> str:
        code, raw = (key >> 8) - 1, key & 0xFF
        by_name = classify.sync_kind(cats[code]) if code >= 0 else "other"
        if by_name in SYNC_TYPES_2025.values():
            return by_name
        return SYNC_TYPES_2025.get(raw, "unknown") if use_type else "unknown"

    d["sync_type"] = _categorical(((name_code + 1) << 8) | (d.pop("raw") & 0xFF), sync_type)
    d["name"] = _categorical(name_code, lambda c: cats[c] if c >= 0 else "unknown")
    if not hit.all():
        how = "by syncType (exporter >= 2025)" if use_type else "as unknown"
        meta.notes.append(f"{int((~hit).sum())} sync records have no API call; typed {how}")
    return make_table("syncs", d)


def _link(api: pd.DataFrame, pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """Row of api_calls with the same (pid, correlationId), or -1: ids are per process."""
    if len(api) == 0:
        return np.full(len(pid), -1, np.int64)
    api_key = (api["pid"].to_numpy() << 32) | (api["correlation"].to_numpy() & 0xFFFFFFFF)
    order = np.argsort(api_key, kind="stable")
    sorted_key = api_key[order]
    key = (pid << 32) | (corr & 0xFFFFFFFF)
    pos = np.minimum(np.searchsorted(sorted_key, key), len(order) - 1)
    return np.where(sorted_key[pos] == key, order[pos], -1)


def _exporter_year(meta: Meta) -> int | None:
    m = re.match(r"(\d{4})\.", meta.format_version)
    return int(m.group(1)) if m else None


# ----- GPU metrics ------------------------------------------------------------------------
def _metrics(db: _Db, meta: Meta) -> pd.DataFrame:
    if "GPU_METRICS" in db.tables:
        return _gpu_metrics_table(db, meta)
    if {"data", "typeId"} <= db.columns("GENERIC_EVENTS"):
        return _generic_event_metrics(db, meta)
    return make_table("metrics", {}, 0)


def _gpu_metrics_table(db: _Db, meta: Meta) -> pd.DataFrame:
    """GPU_METRICS samples named via TARGET_INFO_GPU_METRICS on (typeId, metricId)."""
    cols = db.columns("GPU_METRICS")
    ts = _pick(cols, "timestamp", "rawTimestamp")
    if ts == '"rawTimestamp"':
        meta.notes.append("GPU_METRICS has only rawTimestamp: metric times are not converted")
    d = db.scan("GPU_METRICS", {"ts": ts, "type": _pick(cols, "typeId"),
                                "metric_id": _pick(cols, "metricId"), "value": '"value"'},
                floats=("value",))
    names = _metric_names(db)
    type_code, types = pd.factorize(d.pop("type"))
    key = (type_code.astype(np.int64) << 32) | (d.pop("metric_id") & 0xFFFFFFFF)

    def label(k: int) -> str:
        t, m = int(types[k >> 32]), k & 0xFFFFFFFF
        return names.get((t, m)) or names.get((None, m)) or f"metric {m}"

    d["metric"] = _categorical(key, label)
    d["device"] = _metric_devices(db, meta, types)[type_code]
    return make_table("metrics", d)


def _metric_names(db: _Db) -> dict[tuple, str]:
    """{(typeId, metricId): name}, plus {(None, metricId): name} for files without typeId."""
    info = db.columns("TARGET_INFO_GPU_METRICS")
    mid = _pick(info, "metricId", "id", default="")
    name = _pick(info, "metricName", "name", default="")
    out: dict[tuple, str] = {}
    if mid and name:
        for t, m, n in db.query(f"SELECT DISTINCT {_pick(info, 'typeId')}, {mid}, {name} "
                                "FROM TARGET_INFO_GPU_METRICS"):
            out[(int(t), int(m))] = str(n)
            out.setdefault((None, int(m)), str(n))
    return out


def _metric_devices(db: _Db, meta: Meta, type_ids) -> np.ndarray:
    """Device per typeId: its low byte is the Perfworks GPU id, TARGET_INFO_GPU.pwGpuId."""
    pw = dict(db.query("SELECT pwGpuId, id FROM TARGET_INFO_GPU")) if {
        "pwGpuId", "id"} <= db.columns("TARGET_INFO_GPU") else {}
    dev = np.array([pw.get(int(t) & 0xFF, -1) for t in type_ids], dtype=np.int64)
    if (dev < 0).any():
        meta.notes.append("some GPU metric samples are not mapped to a device (-1)")
    return dev


def _generic_event_metrics(db: _Db, meta: Meta) -> pd.DataFrame:
    """2022-era form: GENERIC_EVENTS rows whose JSON `data` maps metric names to numbers."""
    ts = _pick(db.columns("GENERIC_EVENTS"), "timestamp", "rawTimestamp")
    try:
        rows = db.query(f"SELECT g.{ts}, g.typeId, j.key, j.value FROM GENERIC_EVENTS g, "
                        "json_each(g.data) j WHERE json_valid(g.data) "
                        "AND json_type(g.data) = 'object'")
    except sqlite3.OperationalError as exc:       # SQLite built without JSON1
        meta.notes.append(f"GENERIC_EVENTS GPU metrics skipped ({_one_line(exc)})")
        return make_table("metrics", {}, 0)
    df = pd.DataFrame(rows, columns=["ts", "type", "metric", "value"])
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    df = df[df["value"].notna() & df["ts"].notna()]
    # Keep event types that carry at least one GPU-metric-like key (others are ETW, ftrace...).
    metric_types = set(df.loc[df["metric"].astype(str).str.contains(GPU_METRIC_KEY_RX), "type"])
    df = df[df["type"].isin(metric_types)]
    if len(df):
        meta.notes.append("GPU metrics read from GENERIC_EVENTS JSON; device unknown (-1)")
    return make_table("metrics", {"ts": df["ts"].to_numpy(np.int64),
                                  "metric": pd.Categorical(df["metric"].astype(str)),
                                  "value": df["value"].to_numpy(np.float64)}, len(df))


# ----- metadata ---------------------------------------------------------------------------
def _kv(db: _Db, table: str) -> list[tuple]:
    if {"name", "value"} <= db.columns(table):
        return db.query(f'SELECT name, value FROM "{table}"')
    return []


def _meta(db: _Db) -> Meta:
    """Exporter version and session start; the rest is filled once tables are loaded."""
    meta = Meta(format="nsys-sqlite")
    export = dict(_kv(db, "META_DATA_EXPORT") or _kv(db, "EXPORT_META_DATA"))
    version = export.get("EXPORT_PRODUCT_VERSION")
    if version:
        meta.format_version = str(version)
        meta.producer = "Nsight Systems " + ".".join(str(version).split(".")[:3])
        if export.get("EXPORT_SCHEMA_VERSION"):
            meta.extra["export_schema_version"] = str(export["EXPORT_SCHEMA_VERSION"])
    else:
        meta.format_version = "unknown (pre-2022 export)"
        meta.producer = "Nsight Systems (version unknown)"
        meta.notes.append("no export metadata table: exporter version unknown (pre-2022 export)")
    if "utcEpochNs" in db.columns("TARGET_INFO_SESSION_START_TIME"):
        row = db.query("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1")
        v = row[0][0] if row else None
        if isinstance(v, float) and v.is_integer() and abs(v) < 2.0**63:
            v = int(v)
        if isinstance(v, int) and not isinstance(v, bool):
            meta.extra["session_start_utc_ns"] = v
        elif v is not None:
            meta.notes.append("TARGET_INFO_SESSION_START_TIME.utcEpochNs is not an integer: "
                              "session start time unknown")
    return meta


def _finish_meta(db: _Db, tl: Timeline) -> None:
    meta = tl.meta
    meta.devices = _devices(db, tl, meta)
    meta.captured = _captured(db, tl, meta)
    meta.rank = _rank(db, meta)
    # Tables read whole count as loaded; filtered ones (backtrace rows, NVTX marks) by SQL.
    whole = {"kernels": KERNEL, "copies": MEMCPY, "memsets": MEMSET, "syncs": SYNC}
    counted = {"api_calls": RUNTIME, "ranges": NVTX, "metrics": "GPU_METRICS",
               "osrt": "OSRT_API"}
    meta.raw_event_counts = {k: len(tl.table(k)) for k, t in whole.items() if t in db.tables}
    meta.raw_event_counts.update({k: db.count(t) for k, t in counted.items() if t in db.tables})
    frac = tl.correlation_resolved_fraction()
    if frac is not None and RUNTIME in db.tables and frac < 0.95:
        meta.notes.append(f"only {frac:.1%} of kernels link to a CUDA API call "
                          "(trace window cut?); their GPU activity is kept")


def _devices(db: _Db, tl: Timeline, meta: Meta) -> list[Device]:
    """GPUs from TARGET_INFO_GPU (+ TARGET_INFO_CUDA_GPU, 2020.5), else from activity ids."""
    found: dict[int, dict] = {}
    for table in ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU"):
        cols = db.columns(table)
        picks = {f: next((c for c in cands if c in cols), None)
                 for f, cands in DEVICE_COLUMNS.items()}
        if picks["id"] is None:
            continue
        sel = ", ".join(f'"{c}"' if c else "NULL" for c in picks.values())
        for row in db.query(f'SELECT {sel} FROM "{table}" WHERE "{picks["id"]}" IS NOT NULL'):
            gid = _num(row[0], int)
            if gid is None:                 # a text / non-finite GPU id: not a device row
                meta.notes.append(f"{table}: a GPU id that is not a number was skipped")
                continue
            rec = found.setdefault(gid, {})
            rec.update({k: v for k, v in zip(picks, row) if v is not None and rec.get(k) is None})
    if not found:
        ids = [i for i in tl.devices_in_use() if i >= 0]
        if ids:
            meta.notes.append("no TARGET_INFO_GPU table: devices inferred from activity "
                              "deviceIds, model unknown")
        return [Device(id=i, vendor="nvidia") for i in ids]
    return [Device(id=i, name=_text(r["name"]) if r.get("name") is not None else None, vendor="nvidia",
                   sm_count=_num(r.get("sm_count"), int),
                   memory_bytes=_num(r.get("memory_bytes"), int),
                   memory_bandwidth_bps=_num(r.get("memory_bandwidth_bps"), float),
                   clock_hz=_num(r.get("clock_hz"), float),
                   compute_capability=(f"{r['major']}.{r.get('minor', 0)}"
                                       if r.get("major") else None),
                   sm_limits={k: int(r[k]) for k in ("registers", "warps", "blocks", "shared_memory")
                              if _num(r.get(k), int)} or None)
            for i, r in sorted(found.items())]


def _num(value, kind):
    try:
        return kind(value) if value not in (None, "") else None
    except (TypeError, ValueError, OverflowError):
        return None


def _captured(db: _Db, tl: Timeline, meta: Meta) -> set[str]:
    """Sources recorded: META_DATA_CAPTURE when present, else inferred from the tables."""
    declared = [str(v) for k, v in _kv(db, "META_DATA_CAPTURE") if k == "CAPTURE_EVENT_TYPE"]
    has_rows = {"cuda": tl.has_gpu_activity or len(tl.api_calls) > 0,
                "nvtx": len(tl.ranges) > 0, "gpu_metrics": len(tl.metrics) > 0}
    if not declared:
        meta.notes.append("captured sources inferred from the tables present")
        return {s for s, present in (
            ("cuda", any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in db.tables)),
            ("nvtx", NVTX in db.tables), ("osrt", "OSRT_API" in db.tables),
            ("gpu_metrics", "GPU_METRICS" in db.tables or has_rows["gpu_metrics"])) if present}
    out = {s for s, ok in has_rows.items() if ok}    # rows prove capture
    for v in declared:
        key = v.replace(" ", "").lower()
        out.add("gpu_metrics" if "metric" in key else CAPTURE_SOURCES.get(key, key))
    return out


def _rank(db: _Db, meta: Meta) -> int | None:
    """MPI rank only when NVTX names a thread 'MPI Rank N' (nsys MPI tracing); no guessing."""
    cols = db.columns(NVTX)
    if not {"eventType", "text"} <= cols:
        return None
    text_id = ("(SELECT value FROM StringIds s WHERE s.id = n.textId)"
               if "textId" in cols and "StringIds" in db.tables else "NULL")
    rows = db.query(f"SELECT DISTINCT COALESCE(n.text, {text_id}) FROM {NVTX} n "
                    f"WHERE n.eventType = {NVTX_THREAD_NAME}")
    ranks = {int(m.group(1)) for (t,) in rows if t and (m := re.match(r"MPI Rank (\d+)$", t))}
    if len(ranks) == 1:
        meta.notes.append("rank from the NVTX thread name 'MPI Rank N'")
        return ranks.pop()
    return None

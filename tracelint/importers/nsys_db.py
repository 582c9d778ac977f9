"""Read-only access to an Nsight Systems SQLite export: header check, schema probing, parallel
columnar scans (one group_concat per column, parsed by numpy; or, for plain integer columns of a
big file, the table's pages read by sqlite_pages) and StringIds lookup, plus the small SQL and
column helpers every table reader shares.

The file is opened read-only and immutable, so loading never writes to a trace. Tables are
looked up by name and columns by PRAGMA table_info; an absent table is an empty one.
"""
from __future__ import annotations

import os
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import TraceFormatError
from ..io import readonly_sqlite_uri
from ..forking import usable_cpus
from ..timeline.schema import shared_if_constant
from . import sqlite_pages

KERNEL, MEMCPY, MEMSET = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                          "CUPTI_ACTIVITY_KIND_MEMSET")
RUNTIME, SYNC, NVTX = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                       "NVTX_EVENTS")
CHUNK_ROWS = 400_000        # rows per group_concat: bounds string size and feeds the threads
#: Files from which the big tables are read from their pages (Db.raw_scan), when numba is
#: installed: below, SQL costs less than loading the compiled reader.
RAW_FROM_BYTES = 64 << 20
WORKERS = min(4, usable_cpus())
LOW24 = 0xFFFFFF


class Db:
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
                                   f"({one_line(exc)})") from None
        self.tables = {r[0] for r in rows}

    def con(self) -> sqlite3.Connection:
        """One connection per thread: SQLite serialises the calls of a connection."""
        con = getattr(self._local, "con", None)
        if con is None:
            con = self._local.con = sqlite3.connect(self._uri, uri=True, check_same_thread=False)
            con.text_factory = as_text             # invalid UTF-8 (names, sqlite_master): replaced
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

    def text_query(self, sql: str, params=()) -> list[tuple]:
        """query, with text decoded by SQLite's own UTF-8 reader instead of a Python call per
        value (0.24 s instead of 0.5 s of CPU for the 335,000 inline range names of a minute
        of emit_nvtx); read again through as_text when a value is not UTF-8."""
        con = self.con()
        con.text_factory = str
        try:
            return self.query(sql, params)
        except sqlite3.OperationalError as exc:
            if "decode" not in str(exc):
                raise
        finally:
            con.text_factory = as_text
        return self.query(sql, params)

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
        out = {}
        for i, k in enumerate(exprs):      # drop each column's chunks once joined: the peak
            out[k] = np.concatenate([p[i] for p in parts])  # is the chunks + one column,
            for p in parts:                                  # not twice the table
                p[i] = None
        if len({len(v) for v in out.values()}) > 1:
            raise TraceFormatError(f"{self.path}: inconsistent row data in {table}")
        return out

    def raw_scan(self, table: str, exprs: dict[str, str]
                 ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | None:
        """(values, NULL masks) of `exprs` read from the table's pages (sqlite_pages), when each
        is a plain column or an integer literal (pick's forms) and the file is big enough to
        repay the compiled reader; NULL -> -1 as in scan(). None: use scan(). A column or mask
        of one value throughout is a read-only stride-0 view (copy it before writing)."""
        if table not in self.tables or (self.path.stat().st_size < RAW_FROM_BYTES
                                        and os.environ.get("TRACELINT_JIT") != "1"):
            return None
        columns: dict[str, str] = {}
        literals: dict[str, int] = {}
        for k, e in exprs.items():
            if len(e) > 2 and e[0] == e[-1] == '"':
                columns[k] = e[1:-1]
            elif e.lstrip("-").isdigit():
                literals[k] = int(e)
            else:
                return None
        info = self.query(f'PRAGMA table_info("{table}")')
        pk = [r for r in info if r[5]]
        alias = pk[0][1] if len(pk) == 1 and str(pk[0][2]).upper() == "INTEGER" else None
        master = self.query("SELECT rootpage, sql FROM sqlite_master WHERE type = 'table' AND "
                            "name = ?", (table,))
        if len(master) != 1 or not isinstance(master[0][0], int) or \
                "WITHOUT ROWID" in str(master[0][1]).upper():
            return None
        got = sqlite_pages.read_columns(self.path, master[0][0], sorted(set(columns.values())),
                                        [r[1] for r in info], alias)
        if got is None:
            return None
        n = len(next(iter(got.values()))[0]) if got else self.count(table)
        values = {k: got[c][0] for k, c in columns.items()}
        nulls = {k: got[c][1] for k, c in columns.items()}
        for k, v in literals.items():
            values[k] = np.broadcast_to(np.array(v, np.int64), (n,))   # stride 0, read-only
            nulls[k] = np.broadcast_to(np.array(False), (n,))
        return {k: values[k] for k in exprs}, nulls

    def strings(self, ids: np.ndarray) -> dict[int, str]:
        """StringIds values of the given ids only."""
        ids = [int(i) for i in pd.unique(ids) if i >= 0]              # hashing, no sort
        out: dict[int, str] = {}
        if "StringIds" in self.tables:
            for i in range(0, len(ids), 500):
                part = ids[i:i + 500]
                rows = self.text_query(f"SELECT id, value FROM StringIds WHERE id IN "
                                       f"({','.join('?' * len(part))})", part)
                out.update((i, v if isinstance(v, str) else as_text(v)) for i, v in rows)
        return out


def as_text(v) -> str:
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


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def pick(cols: set[str], *names: str, default: str = "-1") -> str:
    """SQL for the first of `names` present in `cols`, else the default literal."""
    return next((f'"{n}"' for n in names if n in cols), default)


def categorical(keys: np.ndarray, label) -> pd.Categorical:
    """Categorical from integer keys, calling label(key) once per distinct key."""
    inverse, uniq = pd.factorize(np.asarray(keys, dtype=np.int64))   # hashing, no sort
    code, labels = pd.factorize(np.array([label(int(k)) for k in uniq], dtype=object))
    return pd.Categorical.from_codes(code[inverse] if len(uniq) else inverse,
                                     categories=pd.Index(list(labels)))


def pid_tid(gtid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """globalTid / globalPid -> (pid, tid): bits 24-47 and 0-23. Either is a read-only
    stride-0 view when it holds one value (one process: its pid on 23 M calls is 184 MB)."""
    if gtid.strides == (0,) and len(gtid) > 1:
        one_pid, one_tid = pid_tid(gtid[:1].copy())
        return np.broadcast_to(one_pid, gtid.shape), np.broadcast_to(one_tid, gtid.shape)
    pid = gtid >> 24                     # in place below: no temporary the size of the table
    pid &= LOW24
    tid = gtid & LOW24
    null = gtid < 0
    if null.any():
        pid[null] = tid[null] = -1
    return shared_if_constant(pid), shared_if_constant(tid)


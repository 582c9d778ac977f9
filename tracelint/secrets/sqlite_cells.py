"""SQLite cells for the secret scan and redaction: every TEXT value of every table's
text-capable column, read as bytes (``CAST(col AS BLOB)``, so NUL separated environment blocks
stay whole), with its row; key/value tables keep the row's ``name``."""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..io import readonly_sqlite_uri
from .locations import safe_label


@dataclass
class TextCell:
    table: str
    column: str
    rowid: int | None        # None for WITHOUT ROWID tables (updated by value)
    row_label: str           # id=17 | rowid=5 | row 3
    key: str | None          # the row's `name` for the `value` column of a key/value table
    text: str                # decoded with surrogateescape: bytes round-trip exactly

    @property
    def location(self) -> str:
        key = f" name={safe_label(self.key, 40)}" if self.key else ""
        return f"{self.table}.{self.column}[{self.row_label}{key}]"

    @property
    def container(self) -> str:
        return f"{self.table}.{self.column}"


def _decode(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def encode_text(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def sqlite_tables(con: sqlite3.Connection) -> list[str]:
    rows = con.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                       "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name").fetchall()
    return [r[0] for r in rows]


def quote_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _may_hold_text(decl: str | None) -> bool:
    """SQLite type affinity of a declared column type: INTEGER and REAL columns are skipped
    (SQLite would turn a numeric-looking value into a number there, and exporters never put
    text in them); TEXT, BLOB / untyped and NUMERIC ("JSON", ...) columns are scanned."""
    d = (decl or "").upper()
    if "INT" in d:
        return False
    if any(t in d for t in ("CHAR", "CLOB", "TEXT")) or "BLOB" in d or not d:
        return True
    return not any(t in d for t in ("REAL", "FLOA", "DOUB"))


#: Rows read from SQLite at a time by iter_sqlite_text.
BATCH_ROWS = 4096


def iter_sqlite_text(con: sqlite3.Connection,
                     keep: Callable[[list[str]], Iterable[int]] | None = None
                     ) -> Iterator[TextCell]:
    """Every TEXT value of every table's text-capable columns, with its row, in table and row
    order. keep: a filter of many texts at once (the indexes of those to yield, in any order)
    for every cell but a key/value row's value, which is always yielded: the scans pass the
    needle gate (text_scan.suspects), so the 340,000 range names of an emit_nvtx export are not
    each made a TextCell to be searched one call at a time."""
    for table in sqlite_tables(con):
        info = con.execute(f"PRAGMA table_info({quote_name(table)})").fetchall()
        cols = [r[1] for r in info if _may_hold_text(r[2])]
        if not cols:
            continue
        all_cols = [r[1] for r in info]
        pk = [r[1] for r in info if r[5]]
        int_pk = pk[0] if len(pk) == 1 and "INT" in (info[all_cols.index(pk[0])][2] or "").upper() else None
        lower = {c.lower(): c for c in cols}
        kv_name = lower.get("name") if "value" in lower and "name" in lower else None
        kv_value = lower.get("value") if kv_name else None
        try:
            con.execute(f"SELECT rowid FROM {quote_name(table)} LIMIT 0")
            has_rowid = True
        except sqlite3.OperationalError:
            has_rowid = False
        sel = ", ".join(f"CASE WHEN typeof({quote_name(c)}) = 'text' "
                        f"THEN CAST({quote_name(c)} AS BLOB) END" for c in cols)
        where = " OR ".join(f"typeof({quote_name(c)}) = 'text'" for c in cols)
        head = "rowid, " if has_rowid else ""
        cur = con.execute(f"SELECT {head}{sel} FROM {quote_name(table)} WHERE {where}")
        skip = 1 if has_rowid else 0
        kv_at = cols.index(kv_value) if kv_value else -1
        n = 0
        while rows := cur.fetchmany(BATCH_ROWS):
            # (row in the batch, column) of the values to yield, then yielded in row order
            at: list[tuple[int, int]] = []
            for c in range(len(cols)):
                k = skip + c
                have = [r for r, row in enumerate(rows) if row[k] is not None]
                if keep is not None and c != kv_at:
                    have = [have[j] for j in sorted(keep([_decode(rows[r][k]) for r in have]))]
                at += [(r, c) for r in have]
            if len(cols) > 1:
                at.sort()
            for r, c in at:
                row = rows[r]
                rowid = row[0] if has_rowid else None
                label = (f"{int_pk}={rowid}" if int_pk else f"rowid={rowid}") if has_rowid \
                    else f"row {n + r}"
                key = None
                if c == kv_at:
                    kb = row[skip + cols.index(kv_name)]
                    key = _decode(kb) if kb is not None else None
                yield TextCell(table, cols[c], rowid, label, key, _decode(row[skip + c]))
            n += len(rows)


def open_readonly(path: str | Path) -> sqlite3.Connection:
    con = sqlite3.connect(readonly_sqlite_uri(path), uri=True)
    con.execute("SELECT count(*) FROM sqlite_master").fetchone()   # fails early on non-SQLite
    return con

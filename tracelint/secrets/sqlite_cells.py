"""SQLite cells for the secret scan and redaction: every TEXT value of every table's
text-capable column, read as bytes (``CAST(col AS BLOB)``, so NUL separated environment blocks
stay whole), with its row; key/value tables keep the row's ``name``."""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

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


def iter_sqlite_text(con: sqlite3.Connection) -> Iterator[TextCell]:
    """Every TEXT value of every table's text-capable columns, with its row."""
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
        for n, row in enumerate(cur):
            rowid = row[0] if has_rowid else None
            vals = row[1:] if has_rowid else row
            label = (f"{int_pk}={rowid}" if int_pk else f"rowid={rowid}") if has_rowid else f"row {n}"
            key = None
            if kv_name is not None:
                kb = vals[cols.index(kv_name)]
                key = _decode(kb) if kb is not None else None
            for c, v in zip(cols, vals):
                if v is None:
                    continue
                yield TextCell(table, c, rowid, label, key if c == kv_value else None, _decode(v))


def open_readonly(path: str | Path) -> sqlite3.Connection:
    con = sqlite3.connect(readonly_sqlite_uri(path), uri=True)
    con.execute("SELECT count(*) FROM sqlite_master").fetchone()   # fails early on non-SQLite
    return con

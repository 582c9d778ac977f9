"""Secrets where `redact` does not rewrite: BLOB cells, text stored in INTEGER / REAL columns,
and the schema SQL in sqlite_master. The TEXT scan (scan.py) skips these for speed on every
lint; `redact` and `redact --check` look here too, and refuse a file with a hit rather than
calling it clean (rewriting a BLOB or the schema safely is not something a trace needs)."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from ..errors import TracelintError
from . import patterns as P
from .scan import detect_format
from .sqlite_cells import open_readonly, quote_name, sqlite_tables

LIMIT = 20


def _secret(text: str) -> bool:
    return any(m.category == P.SECRET for m in P.find_matches(text, personal=False))


def odd_cell_hits(path: str | Path) -> list[str]:
    """Locations (TABLE.COLUMN rowid=N, sqlite_master.sql of T) of secrets in odd storage."""
    if not detect_format(path).endswith("-sqlite"):      # nsys and rocpd databases
        return []
    out: list[str] = []
    con = open_readonly(path)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        for name, sql in con.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL"):
            if isinstance(sql, str) and _secret(sql):
                out.append(f"sqlite_master.sql of {name}")
        for table in sqlite_tables(con):
            info = con.execute(f"PRAGMA table_info({quote_name(table)})").fetchall()
            cols = [r[1] for r in info]
            if not cols:
                continue
            odd = " OR ".join(f"typeof({quote_name(c)}) = 'blob'" + (
                f" OR typeof({quote_name(c)}) = 'text'" if "INT" in (r[2] or "").upper()
                or any(t in (r[2] or "").upper() for t in ("REAL", "FLOA", "DOUB")) else "")
                for c, r in zip(cols, info))
            sel = ", ".join(f"CAST({quote_name(c)} AS BLOB)" for c in cols)
            for row in con.execute(f"SELECT rowid, {sel} FROM {quote_name(table)} WHERE {odd}"):
                for c, v in zip(cols, row[1:]):
                    if isinstance(v, bytes) and _secret(v.decode("utf-8", "replace")):
                        out.append(f"{table}.{c} rowid={row[0]}")
                if len(out) >= LIMIT:
                    return out
    except sqlite3.Error as exc:
        raise TracelintError(f"{path}: cannot scan the SQLite file: {' '.join(str(exc).split())[:200]}") from None
    finally:
        con.close()
    return out

"""Grow a real Nsight Systems SQLite export to N kernels, for load benchmarks.

    python bench/replicate_nsys.py SRC OUT --kernels 1000000

SRC is copied to OUT (SRC is only ever read). The kernel rows and every CUDA API row are then
replicated with SQL ``INSERT ... SELECT`` over a numbered copy index: copy i is shifted in
time by i * span and its correlationIds by i * (max correlationId + 1), so each replicated
kernel still links to exactly one API call of its own copy. Other tables (memcpy, sync, ...)
are left as they are. The last copy is cut so the kernel table holds exactly N rows.
"""
from __future__ import annotations

import argparse
import math
import shutil
import sqlite3
import sys
from pathlib import Path

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def _replicate(con: sqlite3.Connection, table: str, copies: int, limit: int,
               span: int, corr_step: int) -> None:
    """Append `copies` shifted copies of the table's current rows, at most `limit` rows."""
    cols = _columns(con, table)
    shifted = {"start": f"t.start + n.i * {span}", "end": f"t.\"end\" + n.i * {span}",
               "correlationId": f"t.correlationId + n.i * {corr_step}"}
    select = ", ".join(shifted.get(c, f't."{c}"') for c in cols)
    names = ", ".join(f'"{c}"' for c in cols)
    (max_rowid,) = con.execute(f'SELECT MAX(rowid) FROM "{table}"').fetchone()
    con.execute(
        f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {copies}) "
        f'INSERT INTO "{table}" ({names}) SELECT {select} FROM n, "{table}" AS t '
        f"WHERE t.rowid <= {max_rowid} ORDER BY n.i, t.rowid LIMIT {limit}")


def replicate(src: Path, out: Path, kernels: int) -> int:
    """Write OUT with exactly `kernels` kernel rows; return the number of API rows."""
    if src.resolve() == out.resolve():
        raise SystemExit("OUT must differ from SRC (SRC is never modified)")
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, out)            # copyfile: content only, OUT is writable
    con = sqlite3.connect(out)
    try:
        (k0,) = con.execute(f"SELECT COUNT(*) FROM {KERNEL}").fetchone()
        if k0 == 0:
            raise SystemExit(f"{src}: no kernels to replicate")
        lo, hi, corr = con.execute(
            f"SELECT MIN(s), MAX(e), MAX(c) FROM (SELECT start s, \"end\" e, correlationId c "
            f"FROM {KERNEL} UNION ALL SELECT start, \"end\", correlationId FROM {RUNTIME})"
        ).fetchone()
        extra = max(kernels - k0, 0)
        copies = math.ceil(extra / k0)
        if copies:
            span, step = hi - lo + 1_000, corr + 1
            _replicate(con, KERNEL, copies, extra, span, step)
            (r0,) = con.execute(f"SELECT COUNT(*) FROM {RUNTIME}").fetchone()
            _replicate(con, RUNTIME, copies, r0 * copies, span, step)
        elif kernels < k0:
            con.execute(f"DELETE FROM {KERNEL} WHERE rowid NOT IN "
                        f"(SELECT rowid FROM {KERNEL} ORDER BY rowid LIMIT {kernels})")
        con.commit()
        (n_api,) = con.execute(f"SELECT COUNT(*) FROM {RUNTIME}").fetchone()
    finally:
        con.close()
    return n_api


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--kernels", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    n_api = replicate(args.src, args.out, args.kernels)
    print(f"{args.out}: {args.kernels} kernels, {n_api} API rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())

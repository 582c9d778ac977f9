"""Grow a real nsys export's NVTX ranges N times, each copy with op ids of its own, for the
lint's cost per distinct range name.

    python bench/replicate_nvtx_names.py SRC OUT --copies 20

emit_nvtx and FSDP's record_function name every op's range with its own id ("aten::to,
op_id = 317151"), so a longer capture means more distinct names, not more of the same. SRC
(default: the shared 2-GPU H100 slice, 16,782 ranges, 16,582 names) is copied to OUT (SRC is
only read) and its NVTX_EVENTS rows are appended COPIES - 1 more times at the same times, with
each `op_id = N` rewritten to `op_id = <copy>0N`: 332,000 distinct names at 20 copies. Used for
the emit_nvtx figures in docs/performance.md (twenty-third pass).
"""
from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SRC = HERE.parents[1] / "shared" / "traces" / "nsys" / \
    "nsys2026.2_nsys-ai-pytorch-2gpu-1s-slice_h100.sqlite"
COLUMNS = ("start", "end", "eventType", "rangeId", "category", "color", "text", "globalTid",
           "endGlobalTid", "textId", "domainId")


def replicate(src: Path, out: Path, copies: int) -> int:
    """OUT with the NVTX ranges of SRC `copies` times over; the number of distinct names."""
    shutil.copyfile(src, out)
    con = sqlite3.connect(out)
    try:
        (last,) = con.execute("SELECT MAX(rowid) FROM NVTX_EVENTS").fetchone()
        names = ", ".join(f'"{c}"' for c in COLUMNS)
        select = ", ".join("replace(t.text, 'op_id = ', 'op_id = ' || n.i || '0')" if c == "text"
                           else f't."{c}"' for c in COLUMNS)
        con.execute(
            f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {copies - 1}) "
            f"INSERT INTO NVTX_EVENTS ({names}) SELECT {select} FROM n, NVTX_EVENTS AS t "
            f"WHERE t.rowid <= {last}")
        con.commit()
        return con.execute("SELECT COUNT(DISTINCT text) FROM NVTX_EVENTS").fetchone()[0]
    finally:
        con.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path, nargs="?", default=DEFAULT_SRC)
    ap.add_argument("out", type=Path)
    ap.add_argument("--copies", type=int, default=20)
    args = ap.parse_args(argv)
    if args.copies < 1:
        ap.error("--copies must be at least 1")
    print(f"{args.out}: {replicate(args.src, args.out, args.copies):,} distinct range names",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Native call stacks of CUDA API calls from an nsys export (`nsys profile --cudabacktrace`).

nsys stores each backtrace as rows of CUDA_CALLCHAINS (id, stackDepth 0 = innermost, symbol
and module as StringIds), referenced by `callchainId` of a CUPTI_ACTIVITY_KIND_RUNTIME row
(eventClass 67-69, carrying the API call's correlationId). The frames become rows of the
python_frames table spanning the API call, function = symbol and file = the module (binary or
shared library), line -1: native frames name a function, not a source line. The importer marks
the trace with meta.extra["python_frame_lines"] = "native" so reports say so.
"""
from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd

from ..timeline.schema import make_table

CHAINS = "CUDA_CALLCHAINS"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
LOW24 = (1 << 24) - 1


def callchain_frames(con: sqlite3.Connection, tables: set[str]) -> pd.DataFrame | None:
    """python_frames rows for every CUDA API call with a backtrace; None when there are none."""
    if CHAINS not in tables or RUNTIME not in tables:
        return None
    cols = {r[1] for r in con.execute(f'PRAGMA table_info("{RUNTIME}")')}
    if "callchainId" not in cols:
        return None
    if "eventClass" in cols and "correlationId" in cols:    # times of the call itself
        calls = con.execute(
            f'SELECT b.callchainId, a.start, a."end", a.globalTid, n.value FROM "{RUNTIME}" b '
            f'JOIN "{RUNTIME}" a ON a.correlationId = b.correlationId AND a.eventClass IN (0, 1) '
            f'AND a.globalTid = b.globalTid LEFT JOIN StringIds n ON n.id = a.nameId '
            f'WHERE b.callchainId IS NOT NULL').fetchall()
    else:
        calls = con.execute(f'SELECT r.callchainId, r.start, r."end", r.globalTid, n.value '
                            f'FROM "{RUNTIME}" r LEFT JOIN StringIds n ON n.id = r.nameId '
                            'WHERE r.callchainId IS NOT NULL').fetchall()
    if not calls:
        return None
    chains: dict[int, list[tuple[str, str]]] = {}
    for cid, _depth, sym, mod in con.execute(
            f'SELECT c.id, c.stackDepth, s.value, m.value FROM "{CHAINS}" c '
            'LEFT JOIN StringIds s ON s.id = c.symbol LEFT JOIN StringIds m ON m.id = c.module '
            'ORDER BY c.id, c.stackDepth DESC'):               # outermost first
        chains.setdefault(int(cid), []).append((str(sym or "?"), str(mod or "?")))
    shift = _id_shift(calls, chains)
    rows = [(start, end, gtid, sym, mod, depth) for cid, start, end, gtid, _ in calls
            for depth, (sym, mod) in enumerate(chains.get(int(cid) + shift, []))]
    if not rows:
        return None
    gtid = np.array([r[2] if r[2] is not None else -1 for r in rows], np.int64)
    data = {"start": np.array([r[0] for r in rows], np.int64),
            "end": np.array([r[1] for r in rows], np.int64),
            "pid": np.where(gtid < 0, -1, (gtid >> 24) & LOW24),
            "tid": np.where(gtid < 0, -1, gtid & LOW24),
            "file": pd.Categorical([r[4] for r in rows]), "function": pd.Categorical([r[3] for r in rows]),
            "line": np.full(len(rows), -1, np.int64),
            "depth": np.array([r[5] for r in rows], np.int64),
            "parent": np.full(len(rows), -1, np.int64)}
    return make_table("python_frames", data, len(rows)).sort_values("start", kind="stable") \
        .reset_index(drop=True)


def _id_shift(calls: list[tuple], chains: dict[int, list[tuple[str, str]]]) -> int:
    """0 or 1: exports disagree on whether callchainId counts from 0 while CUDA_CALLCHAINS.id
    counts from 1 (2022.2 does). The shift under which most calls find their own API function
    among their chain's symbols wins; a tie keeps the documented 0."""
    def hits(shift: int) -> int:
        n = 0
        for cid, *_rest, name in calls[:500]:
            api = str(name or "").split("_v")[0]
            syms = chains.get(int(cid) + shift, [])
            n += bool(api) and any(sym == api or sym.startswith(api + "_v") for sym, _ in syms)
        return n
    return 1 if hits(1) > hits(0) else 0

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

Modules: nsys_db (database access, scans, shared SQL helpers), nsys_activity (kernels, copies,
memsets), nsys_host (API calls, NVTX ranges, syncs), nsys_metrics (GPU metrics), nsys_meta
(exporter, devices, captured sources, rank); this one orders the loading.
"""
from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import TraceFormatError
from ..timeline.model import Timeline
from ..heap import trim
from .nsys_activity import read_copies, read_kernels, read_memsets
from .nsys_callchains import callchain_frames
from .nsys_db import Db, one_line
from .nsys_host import read_api_calls, read_ranges, read_syncs
from .nsys_memory import memory_table
from .nsys_meta import finish_meta, start_meta
from .nsys_metrics import read_metrics


def load_nsys_sqlite(path, progress=None) -> Timeline:
    """Load an nsys SQLite export. Raises TraceFormatError (one line) on any bad input."""
    path = Path(path)
    report = progress or (lambda stage, fraction: None)
    db = Db(path)
    try:
        if not db.is_nsys_export():
            if {"rocpd_op", "rocpd_api"} <= db.tables:
                raise TraceFormatError(
                    f"{path}: a rocmProfileData (RPD) database (rocpd_op, rocpd_api), which "
                    "tracelint does not read; record with rocprofv3 (--output-format rocpd or "
                    "json) or torch.profiler instead")
            raise TraceFormatError(f"{path}: SQLite file but not an Nsight Systems export "
                                   "(no StringIds, CUPTI_*, NVTX_EVENTS or TARGET_INFO_* table)")
        tl = Timeline(meta=start_meta(db))
        report("kernels", 0.05)
        with ThreadPoolExecutor(1) as side:          # API rows load while kernels are built
            api_calls = side.submit(read_api_calls, db)
            tl.kernels = read_kernels(db)
            report("copies", 0.35)
            tl.copies, tl.memsets = read_copies(db), read_memsets(db)
            report("api_calls", 0.4)
            tl.api_calls = api_calls.result()
        trim()       # the side thread's freed scan buffers sit in its own arena: give them back
        report("ranges", 0.75)
        tl.ranges = read_ranges(db, tl.meta)
        report("syncs", 0.85)
        tl.syncs = read_syncs(db, tl.api_calls, tl.meta)
        tl.metrics = read_metrics(db, tl.meta)
        frames = callchain_frames(db.con(), db.tables)       # --cudabacktrace stacks
        if frames is not None:
            tl.python_frames = frames
            tl.meta.extra["python_frame_lines"] = "native"
            tl.meta.captured.add("cuda_backtraces")
        finish_meta(db, tl)
        memory = memory_table(db, tl)        # CUDA_GPU_MEMORY_USAGE_EVENTS, after meta (counts)
        if memory is not None:
            tl.memory = memory
        trim()
        report("done", 1.0)
        return tl
    except sqlite3.Error as exc:
        raise TraceFormatError(f"{path}: unreadable SQLite database ({one_line(exc)})") from None
    finally:
        db.close()

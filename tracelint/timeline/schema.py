"""The columns of every Timeline table: the one contract between importers and rules.

All times are integer nanoseconds on the trace's own time base (Kineto: epoch; nsys: session
timeline). Integer columns use -1 for "not in the source". String columns with few distinct
values (names, kinds) are pandas categoricals, so a million kernels cost a few MB of names.
"""
from __future__ import annotations

import functools
from typing import Mapping

import numpy as np
import pandas as pd

from .categories import str_categorical

I64 = "int64"
F64 = "float64"
CAT = "category"
STR = "object"
BOOL = "bool"

#: table name -> {column: dtype}. Importers fill these columns and no others; extra
#: importer-specific data goes into Timeline.meta.
TABLES: Mapping[str, Mapping[str, str]] = {
    # GPU kernels, one row per launch executed on a device.
    "kernels": {
        "device": I64, "stream": I64, "start": I64, "end": I64, "name": CAT,
        "correlation": I64, "pid": I64,
        "grid_x": I64, "grid_y": I64, "grid_z": I64,
        "block_x": I64, "block_y": I64, "block_z": I64,
        "registers_per_thread": I64, "static_smem": I64, "dynamic_smem": I64,
        "local_mem_per_thread": I64,
        "graph_launched": BOOL,
    },
    # Memory copies. kind: H2D D2H D2D P2P H2H other.  src_kind/dst_kind: pageable pinned
    # device managed array unknown.
    "copies": {
        "device": I64, "stream": I64, "start": I64, "end": I64, "name": CAT,
        "correlation": I64, "pid": I64, "bytes": I64,
        "kind": CAT, "src_kind": CAT, "dst_kind": CAT,
    },
    "memsets": {
        "device": I64, "stream": I64, "start": I64, "end": I64, "name": CAT,
        "correlation": I64, "pid": I64, "bytes": I64, "mem_kind": CAT,
    },
    # Host-side CUDA / HIP runtime and driver calls. name has version suffixes stripped
    # (cudaLaunchKernel_v7000 -> cudaLaunchKernel). api: runtime | driver.
    "api_calls": {
        "pid": I64, "tid": I64, "start": I64, "end": I64, "name": CAT,
        "correlation": I64, "api": CAT, "external_id": I64,
    },
    # CPU-side ranges: framework ops, NVTX ranges, user annotations, iterations, GPU-side
    # annotation ranges. kind: op | nvtx | annotation | step | gpu_annotation.
    # depth/parent: nesting per (pid, tid), rebuilt from time containment; parent is the row
    # position of the enclosing range or -1. step: iteration number for kind == step, else -1.
    "ranges": {
        "pid": I64, "tid": I64, "start": I64, "end": I64, "name": CAT, "kind": CAT,
        "depth": I64, "parent": I64, "external_id": I64, "step": I64,
        "device": I64, "stream": I64,
    },
    # GPU-side synchronisation records (nsys CUPTI SYNCHRONIZATION, Kineto cuda_sync).
    # sync_type: device | stream | event | stream_wait_event | unknown. Host-side sync calls
    # are api_calls rows; rules classify them by name (see classify.py).
    "syncs": {
        "device": I64, "stream": I64, "start": I64, "end": I64, "pid": I64, "tid": I64,
        "correlation": I64, "sync_type": CAT, "name": CAT,
    },
    # Hardware-metric samples (nsys GPU_METRICS, Kineto counters). value in the metric's unit.
    "metrics": {"device": I64, "ts": I64, "metric": CAT, "value": F64},
    # Python frames from stacks (Kineto python_function events): file:line and function.
    "python_frames": {
        "pid": I64, "tid": I64, "start": I64, "end": I64, "file": CAT, "line": I64,
        "function": CAT, "depth": I64, "parent": I64,
    },
    # Memory events, one row per allocation (bytes > 0) or free (bytes < 0), by ts.
    # source: allocator (torch.profiler profile_memory: the framework allocator, with its
    # running totals) | driver (nsys CUDA_GPU_MEMORY_USAGE_EVENTS: cudaMalloc/cudaFree-level).
    # device_type: cpu | cuda | other; device -1 for host memory. total_allocated /
    # total_reserved: the totals after the event (-1: not in the source). op: the innermost
    # CPU op or range enclosing the event on its thread ("" when none); correlation: the API
    # call behind a driver-level event (-1: none). See timeline/memory.py.
    "memory": {
        "device": I64, "device_type": CAT, "ts": I64, "bytes": I64,
        "total_allocated": I64, "total_reserved": I64, "addr": I64,
        "pid": I64, "tid": I64, "op": CAT, "correlation": I64, "source": CAT,
    },
}

#: Tables whose rows are instants (a ts column) rather than intervals (start, end).
INSTANT_TABLES = ("metrics", "memory")

#: Tables of device activity: busy time on a device is the union of these.
GPU_ACTIVITY_TABLES = ("kernels", "copies", "memsets")


def empty_table(table: str) -> pd.DataFrame:
    """An empty frame with the table's columns and dtypes: a copy of one made once (making
    the nine of a Timeline took 12-15 ms of every load; copying them, 0.2 ms)."""
    return _empty_table(table).copy()


@functools.cache
def _empty_table(table: str) -> pd.DataFrame:
    """From numpy arrays (make_table): the nine in 5 ms, against 15-19 ms from empty Series."""
    return make_table(table, {}, 0)


def make_table(table: str, columns: Mapping[str, object], n: int | None = None) -> pd.DataFrame:
    """Build a table from column arrays; missing columns get their "unknown" value.

    Raises KeyError for a column not in the schema, so importer typos fail loudly.
    """
    spec = TABLES[table]
    unknown = set(columns) - set(spec)
    if unknown:
        raise KeyError(f"{table}: columns not in schema: {sorted(unknown)}")
    if n is None:
        n = len(next(iter(columns.values()))) if columns else 0
    data = {}
    for col, dtype in spec.items():
        if col in columns:
            values = columns[col]
            if dtype == CAT:
                data[col] = values if isinstance(values, pd.Categorical) \
                    else str_categorical(values)
            elif dtype == STR:
                data[col] = pd.Series(values, dtype=object)
            else:
                data[col] = np.asarray(values).astype(dtype, copy=False)
        elif dtype == I64:
            data[col] = np.full(n, -1, dtype=np.int64)
        elif dtype == F64:
            data[col] = np.full(n, np.nan)
        elif dtype == BOOL:
            data[col] = np.zeros(n, dtype=bool)
        elif dtype == CAT:
            data[col] = pd.Categorical(["unknown"] * n) if n else pd.Categorical([])
        else:
            data[col] = pd.Series([None] * n, dtype=object)
    return pd.DataFrame(data, copy=False)


def shared_if_constant(v: np.ndarray) -> np.ndarray:
    """`v`, or a read-only view of its one value (stride 0) when its 2+ elements are equal."""
    if len(v) < 2 or v.strides == (0,) or v[0] != v[-1] or not (v == v[0]).all():
        return v
    return np.broadcast_to(np.array(v[0], dtype=v.dtype), v.shape)


def rows_where(mask: np.ndarray):
    """The rows where mask holds, as an index; every row as a slice, so that columns taken
    with it are views, not copies (one device's activity when only one is in use: 80 MB a
    column at 10 M kernels, and a stride-0 column stays stored once)."""
    return slice(None) if mask.all() else np.flatnonzero(mask)


def take_rows(v: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """v[rows] for an index array; a column stored once (stride 0) stays one value stored
    once, where a copy would cost a full column per selection (the pid and tid of millions of
    sync calls of one thread)."""
    if v.strides == (0,) and len(v):
        return np.broadcast_to(v[0], (len(rows),))
    return v[rows]


def share_constant_tables(tl) -> None:
    """share_constant_columns on every table of the Timeline tl; a second pass only checks
    (5 ms on the 287 MB reference, against 12-18 ms for the first)."""
    for table in TABLES:
        setattr(tl, table, share_constant_columns(tl.table(table)))


def share_constant_columns(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with each numeric column that holds one value throughout replaced by a read-only
    view of that one value (stride 0), so it costs no memory per row.

    Why: a trace from one process on one GPU repeats its pid, thread, device, stream and most
    launch dimensions on every row; at 10 M kernels those columns alone are 1.5 GB of the
    loaded tables. Readers see the same values and dtype; nothing writes into Timeline tables.
    """
    shared = {}
    for col in df.columns:
        if df[col].dtype.kind in "iub":
            v = df[col].to_numpy()
            one = shared_if_constant(v)
            if one is not v:
                shared[col] = one
    if not shared:
        return df
    return pd.DataFrame({c: shared.get(c, df[c]) for c in df.columns}, index=df.index,
                        copy=False)

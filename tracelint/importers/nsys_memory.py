"""nsys CUDA memory usage events (`nsys profile --cuda-memory-usage=true`) -> the Timeline's
memory table.

Schema (CUDA_GPU_MEMORY_USAGE_EVENTS, as in the 2022.2 export in shared/traces/nsys and
Nsight Systems' SQLite schema reference): start (ns), globalPid, deviceId, contextId, address,
pc, bytes, memKind (ENUM_CUDA_MEM_KIND: 2 Device, 4 Managed, ...), memoryOperationType
(ENUM_CUDA_DEV_MEM_EVENT_OPER: 0 allocation, 1 deallocation), name, correlationId.
Of the shared real exports only the 2022.2 one has the table, and it is empty (the capture
did not enable memory usage tracking); the importer follows the documented schema, and the
synthetic writer (tracelint/synth/memory.py) writes that DDL verbatim.

These are driver-level events (cudaMalloc / cudaFree and friends): for a PyTorch process they
are the caching allocator's segments, i.e. its *reserved* memory. nsys does not see the
caching allocator's blocks, so total_allocated stays -1 (not in the source). total_reserved is
the running sum per device from the capture start: memory allocated before the capture is not
in it (a note says so; frees of such memory are clipped at zero).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..timeline.memory import enclosing_ops
from ..timeline.schema import make_table

TABLE = "CUDA_GPU_MEMORY_USAGE_EVENTS"
#: memKind values counted as device memory (nsys's numbering, ENUM_CUDA_MEM_KIND).
DEVICE_KINDS = (2, 4, 5, 6)         # Device, Managed, Device Static, Managed Static
DEALLOCATION = 1
_LOW24 = 0xFFFFFF


def memory_table(db, tl) -> pd.DataFrame | None:
    """The memory table from db (nsys_sqlite's reader: .tables, .columns(), .scan()), or None
    when the export has no memory usage table. Needs tl.api_calls and tl.ranges loaded."""
    if TABLE not in db.tables:
        return None
    cols = db.columns(TABLE)
    need = {"start", "globalPid", "deviceId", "bytes", "memoryOperationType"}
    if not need <= cols:
        tl.meta.notes.append(f"{TABLE} lacks columns {sorted(need - cols)}: memory events not read")
        return None
    exprs = {"ts": "start", "gpid": "globalPid", "device": "deviceId", "bytes": "bytes",
             "op": "memoryOperationType",
             "kind": "memKind" if "memKind" in cols else "-1",
             "addr": "address" if "address" in cols else "-1",
             "corr": "correlationId" if "correlationId" in cols else "-1"}
    c = db.scan(TABLE, exprs)
    return build(c, tl)


def build(c: dict, tl) -> pd.DataFrame:
    """Columns (ts, gpid, device, bytes, op, kind, addr, corr) -> the memory table."""
    order = np.argsort(c["ts"], kind="stable")
    c = {k: np.asarray(v, np.int64)[order] for k, v in c.items()}
    keep = np.isin(c["kind"], DEVICE_KINDS) | (c["kind"] < 0)
    c = {k: v[keep] for k, v in c.items()}
    n = len(c["ts"])
    gpid = c["gpid"]
    pid = np.where(gpid >= 0, (gpid >> 24) & _LOW24, -1)
    signed = np.where(c["op"] == DEALLOCATION, -np.abs(c["bytes"]), np.abs(c["bytes"]))
    reserved = np.zeros(n, np.int64)
    clipped = 0
    for dev in np.unique(c["device"]):       # running sum per device, never below zero
        on = np.flatnonzero(c["device"] == dev)
        run, lo = np.cumsum(signed[on]), 0
        if len(run) and run.min() < 0:
            clipped += 1
            lo = -int(run.min())
        reserved[on] = run + lo
    if clipped:
        tl.meta.notes.append(f"{TABLE}: frees of memory allocated before the capture on "
                             f"{clipped} device(s); reserved totals are shifted to start at the "
                             "smallest value that keeps them non-negative (a lower bound)")
    tid, op = _host_side(tl, pid, c["corr"], c["ts"])
    frame = make_table("memory", {
        "device": c["device"], "device_type": pd.Categorical(["cuda"] * n), "ts": c["ts"],
        "bytes": signed, "total_allocated": np.full(n, -1, np.int64), "total_reserved": reserved,
        "addr": c["addr"], "pid": pid, "tid": tid, "op": pd.Categorical(op),
        "correlation": c["corr"], "source": pd.Categorical(["driver"] * n)}, n)
    tl.meta.captured.add("memory")
    tl.meta.raw_event_counts["memory"] = n
    return frame


def _host_side(tl, pid: np.ndarray, corr: np.ndarray, ts: np.ndarray):
    """tid and enclosing op / NVTX range of the API call behind each event (by pid and
    correlationId); -1 and "" when the call is not in the trace."""
    api = tl.api_calls
    n = len(pid)
    tid, op = np.full(n, -1, np.int64), np.full(n, "", dtype=object)
    if len(api) == 0 or n == 0:
        return tid, op
    key = (api["pid"].to_numpy() << 32) | (api["correlation"].to_numpy() & 0xFFFFFFFF)
    order = np.argsort(key, kind="stable")
    sk = key[order]
    q = (pid << 32) | (corr & 0xFFFFFFFF)
    pos = np.minimum(np.searchsorted(sk, q), len(sk) - 1)
    hit = (sk[pos] == q) & (corr >= 0)
    row = order[pos]
    tid = np.where(hit, api["tid"].to_numpy()[row], -1)
    start = np.where(hit, api["start"].to_numpy()[row], ts)
    if hit.any():
        op[hit] = enclosing_ops(tl.ranges, pid[hit], tid[hit], start[hit])
    return tid, op

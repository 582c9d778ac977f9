"""rocprofv3 `--output-format rocpd` (ROCm 7.0+): the rocpd SQLite database -> Timeline.

Schema (rocprofiler-sdk source/share/rocprofiler-sdk-rocpd/rocpd_tables.sql, schema_version
3): tables carry a per-session uuid suffix and plain-named views (`rocpd_kernel_dispatch`,
...) select from them; both are accepted. Two layouts share that version: rows with their own
pid/tid/agent/queue/stream and start/end columns, and the newer one where rows point at a
`rocpd_track` (the lane) and at `rocpd_timestamp` rows (start_id/end_id); both are read. `rocpd_region` holds host API calls and roctx
ranges, `rocpd_kernel_dispatch` and `rocpd_memory_copy` the device work; each row's
`event_id` points at `rocpd_event`, whose `category_id` names the domain (HIP_RUNTIME_API,
MARKER_CORE_API, ...) in `rocpd_string` and whose `correlation_id` links a HIP call to the
dispatch or copy it enqueued. `pid`/`tid`/`agent_id` are row ids of the rocpd_info_* tables.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from ..errors import TraceFormatError
from ..io import readonly_sqlite_uri
from ..timeline.model import Device, Meta, Timeline
from .records import Rows, build_timeline, copy_kind_of, finish_meta

BASES = ("rocpd_metadata", "rocpd_string", "rocpd_event", "rocpd_region", "rocpd_kernel_dispatch",
         "rocpd_memory_copy", "rocpd_info_agent", "rocpd_info_kernel_symbol", "rocpd_info_process",
         "rocpd_info_thread", "rocpd_track", "rocpd_timestamp")


def is_rocpd(con: sqlite3.Connection) -> bool:
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')")]
    return any(n.startswith("rocpd_kernel_dispatch") or n.startswith("rocpd_region") for n in names)


def load_rocpd(path) -> Timeline:
    path = Path(path)
    try:
        con = sqlite3.connect(readonly_sqlite_uri(path), uri=True)
        try:
            return _load(con, path)
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise TraceFormatError(f"{path}: cannot read the rocpd database (truncated or corrupt?): {exc}") from None


def _load(con: sqlite3.Connection, path: Path) -> Timeline:
    t = _tables(con)
    if "rocpd_kernel_dispatch" not in t and "rocpd_region" not in t:
        raise TraceFormatError(f"{path}: SQLite file without rocpd tables: not a rocprofv3 rocpd database")
    cols = _columns(con, t.get("rocpd_kernel_dispatch") or t.get("rocpd_region"))
    tracked = "start_id" in cols            # newer layout: times in rocpd_timestamp, lanes in rocpd_track
    if tracked and not {"rocpd_track", "rocpd_timestamp"} <= set(t):
        raise TraceFormatError(f"{path}: rocpd rows point at rocpd_track/rocpd_timestamp tables "
                               "that the file does not have")
    md = dict(con.execute(f"SELECT tag, value FROM {t['rocpd_metadata']}")) if "rocpd_metadata" in t else {}
    meta = Meta(format="rocpd-sqlite", format_version=str(md.get("schema_version", "")),
                producer="rocprofv3 (rocpd database)")
    if md.get("rocprofiler_sdk_version") or md.get("version"):
        meta.producer = f"rocprofv3 (rocprofiler-sdk {md.get('rocprofiler_sdk_version') or md.get('version')})"
    q = _Query(con, t, tracked)
    gpus = _agents(q, meta)
    rows = {n: Rows(n) for n in ("kernels", "copies", "api_calls", "ranges")}
    for pid, tid, start, end, name, cat, corr in q.regions():
        cat = str(cat or "")
        if cat.startswith("HIP_") and "COMPILER" not in cat:
            rows["api_calls"].add(pid=pid, tid=tid, start=start, end=end, name=name, api="runtime",
                                  correlation=corr if corr is not None else -1)
        elif cat.startswith("MARKER_") and end > start:
            rows["ranges"].add(pid=pid, tid=tid, start=start, end=end, name=name, kind="nvtx")
    for (pid, agent, queue, stream, start, end, name, corr, wx, wy, wz, gx, gy, gz,
         lds, scratch, static_lds) in q.dispatches():
        rows["kernels"].add(
            device=gpus.get(agent, -1), stream=stream if stream is not None else (queue or -1),
            start=start, end=end, pid=pid, name=name or "unknown",
            correlation=corr if corr is not None else -1,
            grid_x=gx // max(1, wx), grid_y=gy // max(1, wy), grid_z=gz // max(1, wz),
            block_x=wx, block_y=wy, block_z=wz,
            static_smem=static_lds if static_lds is not None else -1,
            dynamic_smem=max(0, (lds or 0) - (static_lds or 0)),
            local_mem_per_thread=scratch if scratch is not None else -1)
    for pid, start, end, name, src, dst, size, stream, corr in q.copies():
        kind = copy_kind_of(src in gpus, dst in gpus, src == dst) if gpus else "other"
        rows["copies"].add(device=gpus.get(dst if kind == "H2D" else src, gpus.get(dst, -1)),
                           stream=stream if stream is not None else -1, start=start, end=end,
                           pid=pid, name=name, bytes=size,
                           correlation=corr if corr is not None else -1, kind=kind,
                           src_kind="device" if src in gpus else "unknown",
                           dst_kind="device" if dst in gpus else "unknown")
    tl = build_timeline(rows.values(), meta)
    finish_meta(tl, {"hip": len(tl.api_calls), "cuda": tl.has_gpu_activity, "nvtx": len(tl.ranges)})
    return tl


def _tables(con: sqlite3.Connection) -> dict[str, str]:
    """Base name -> the view of that name, else the uuid-suffixed table."""
    names = sorted(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')"))
    out = {}
    for base in BASES:
        if base in names:
            out[base] = base
        else:
            cand = [n for n in names if n.startswith(base) and not n[len(base):len(base) + 1].isalpha()
                    and not n[len(base):].startswith("_info")]
            if cand:
                out[base] = cand[0]
    return {k: f'"{v}"' for k, v in out.items()}


def _columns(con, table: str | None) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")} if table else set()


class _Query:
    """The SELECTs, joined to the process/thread/string/event tables where present."""

    def __init__(self, con, t, tracked: bool):
        self.con, self.t, self.tracked = con, t, tracked

    def _lane(self, alias: str, col: str) -> str:
        """A row's pid/tid/agent/queue/stream: its own column, or its track's (newer layout)."""
        return (f"(SELECT TR.{col} FROM {self.t['rocpd_track']} TR WHERE TR.id = {alias}.track_id)"
                if self.tracked else f"{alias}.{col}")

    def _time(self, alias: str, which: str) -> str:
        return (f"(SELECT TS.value FROM {self.t['rocpd_timestamp']} TS WHERE TS.id = {alias}.{which}_id)"
                if self.tracked else f"{alias}.{which}")

    def _pid(self, alias: str) -> str:
        row = self._lane(alias, "pid")
        return (f"COALESCE((SELECT P.pid FROM {self.t['rocpd_info_process']} P WHERE P.id = {row}), {row})"
                if "rocpd_info_process" in self.t else row)

    def _tid(self, alias: str) -> str:
        row = self._lane(alias, "tid")
        return (f"COALESCE((SELECT T.tid FROM {self.t['rocpd_info_thread']} T WHERE T.id = {row}), {row})"
                if "rocpd_info_thread" in self.t else row)

    def _str(self, col: str) -> str:
        return f"(SELECT S.string FROM {self.t['rocpd_string']} S WHERE S.id = {col})"

    def _event(self, alias: str, col: str) -> str:
        return f"(SELECT E.{col} FROM {self.t['rocpd_event']} E WHERE E.id = {alias}.event_id)"

    def regions(self):
        if "rocpd_region" not in self.t:
            return []
        cat = self._str(self._event("R", "category_id"))
        return self.con.execute(
            f"SELECT {self._pid('R')}, {self._tid('R')}, {self._time('R', 'start')}, {self._time('R', 'end')}, "
            f"{self._str('R.name_id')}, "
            f"{cat}, {self._event('R', 'correlation_id')} FROM {self.t['rocpd_region']} R")

    def dispatches(self):
        if "rocpd_kernel_dispatch" not in self.t:
            return []
        sym = self.t.get("rocpd_info_kernel_symbol")
        name = (f"(SELECT COALESCE(NULLIF(KS.display_name, ''), KS.kernel_name) FROM {sym} KS WHERE KS.id = K.kernel_id)"
                if sym else "NULL")
        static = f"(SELECT KS.group_segment_size FROM {sym} KS WHERE KS.id = K.kernel_id)" if sym else "NULL"
        return self.con.execute(
            f"SELECT {self._pid('K')}, {self._lane('K', 'agent_id')}, {self._lane('K', 'queue_id')}, "
            f"{self._lane('K', 'stream_id')}, {self._time('K', 'start')}, {self._time('K', 'end')}, {name}, "
            f"{self._event('K', 'correlation_id')}, K.workgroup_size_x, K.workgroup_size_y, "
            f"K.workgroup_size_z, K.grid_size_x, K.grid_size_y, K.grid_size_z, "
            f"K.group_segment_size, K.private_segment_size, {static} FROM {self.t['rocpd_kernel_dispatch']} K")

    def copies(self):
        if "rocpd_memory_copy" not in self.t:
            return []
        return self.con.execute(
            f"SELECT {self._pid('M')}, {self._time('M', 'start')}, {self._time('M', 'end')}, "
            f"{self._str('M.name_id')}, M.src_agent_id, M.dst_agent_id, M.size, "
            f"{self._lane('M', 'stream_id')}, {self._event('M', 'correlation_id')} "
            f"FROM {self.t['rocpd_memory_copy']} M")

    def agents(self):
        if "rocpd_info_agent" not in self.t:
            return []
        return self.con.execute(
            f"SELECT id, type, type_index, logical_index, product_name, model_name, name "
            f"FROM {self.t['rocpd_info_agent']}")


def _agents(q: _Query, meta: Meta) -> dict[int, int]:
    out = {}
    for i, (aid, typ, type_index, logical, product, model, name) in enumerate(q.agents()):
        if str(typ).upper() != "GPU":
            continue
        idx = int(type_index if type_index is not None else logical if logical is not None else i)
        out[int(aid)] = idx
        if meta.device(idx) is None:
            meta.devices.append(Device(id=idx, vendor="amd", name=product or model or name))
    return out

"""nsys export metadata: exporter version and session start, devices (TARGET_INFO_GPU or the
ids seen), captured sources, MPI rank and raw event counts."""
from __future__ import annotations

import re

from ..timeline.model import Device, Meta, Timeline
from .nsys_db import KERNEL, MEMCPY, MEMSET, NVTX, RUNTIME, SYNC, Db, as_text

NVTX_THREAD_NAME = 39
CAPTURE_SOURCES = {"cuda": "cuda", "nvtxevents": "nvtx", "nvtx": "nvtx", "osruntime": "osrt"}
#: Device field -> candidate columns (TARGET_INFO_GPU, or the 2020.5 TARGET_INFO_CUDA_GPU).
DEVICE_COLUMNS = {"id": ("id", "deviceId"), "name": ("name",),
                  "sm_count": ("smCount", "numMultiprocessors"),
                  "memory_bytes": ("totalMemory", "totalGlobalMemory", "globalMemorySize"),
                  "memory_bandwidth_bps": ("memoryBandwidth", "globalMemoryBandwidth"),
                  "clock_hz": ("clockRate", "coreClockRate"),
                  "major": ("computeMajor", "computeCapabilityMajor"),
                  "minor": ("computeMinor", "computeCapabilityMinor"),
                  "registers": ("maxRegistersPerSm",), "warps": ("maxWarpsPerSm",),
                  "blocks": ("maxBlocksPerSm",), "shared_memory": ("maxShmemPerSm",)}



def _kv(db: Db, table: str) -> list[tuple]:
    if {"name", "value"} <= db.columns(table):
        return db.query(f'SELECT name, value FROM "{table}"')
    return []


def start_meta(db: Db) -> Meta:
    """Exporter version and session start; the rest is filled once tables are loaded."""
    meta = Meta(format="nsys-sqlite")
    export = dict(_kv(db, "META_DATA_EXPORT") or _kv(db, "EXPORT_META_DATA"))
    version = export.get("EXPORT_PRODUCT_VERSION")
    if version:
        meta.format_version = str(version)
        meta.producer = "Nsight Systems " + ".".join(str(version).split(".")[:3])
        if export.get("EXPORT_SCHEMA_VERSION"):
            meta.extra["export_schema_version"] = str(export["EXPORT_SCHEMA_VERSION"])
    else:
        meta.format_version = "unknown (pre-2022 export)"
        meta.producer = "Nsight Systems (version unknown)"
        meta.notes.append("no export metadata table: exporter version unknown (pre-2022 export)")
    if "utcEpochNs" in db.columns("TARGET_INFO_SESSION_START_TIME"):
        row = db.query("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1")
        v = row[0][0] if row else None
        if isinstance(v, float) and v.is_integer() and abs(v) < 2.0**63:
            v = int(v)
        if isinstance(v, int) and not isinstance(v, bool):
            meta.extra["session_start_utc_ns"] = v
        elif v is not None:
            meta.notes.append("TARGET_INFO_SESSION_START_TIME.utcEpochNs is not an integer: "
                              "session start time unknown")
    return meta


def finish_meta(db: Db, tl: Timeline) -> None:
    meta = tl.meta
    meta.devices = _devices(db, tl, meta)
    meta.captured = _captured(db, tl, meta)
    meta.rank = _rank(db, meta)
    # Tables read whole count as loaded; filtered ones (backtrace rows, NVTX marks) by SQL.
    whole = {"kernels": KERNEL, "copies": MEMCPY, "memsets": MEMSET, "syncs": SYNC}
    counted = {"api_calls": RUNTIME, "ranges": NVTX, "metrics": "GPU_METRICS",
               "osrt": "OSRT_API"}
    meta.raw_event_counts = {k: len(tl.table(k)) for k, t in whole.items() if t in db.tables}
    meta.raw_event_counts.update({k: db.count(t) for k, t in counted.items() if t in db.tables})
    frac = tl.correlation_resolved_fraction()
    if frac is not None and RUNTIME in db.tables and frac < 0.95:
        meta.notes.append(f"only {frac:.1%} of kernels link to a CUDA API call "
                          "(trace window cut?); their GPU activity is kept")


def _devices(db: Db, tl: Timeline, meta: Meta) -> list[Device]:
    """GPUs from TARGET_INFO_GPU (+ TARGET_INFO_CUDA_GPU, 2020.5), else from activity ids."""
    found: dict[int, dict] = {}
    for table in ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU"):
        cols = db.columns(table)
        picks = {f: next((c for c in cands if c in cols), None)
                 for f, cands in DEVICE_COLUMNS.items()}
        if picks["id"] is None:
            continue
        sel = ", ".join(f'"{c}"' if c else "NULL" for c in picks.values())
        for row in db.query(f'SELECT {sel} FROM "{table}" WHERE "{picks["id"]}" IS NOT NULL'):
            gid = _num(row[0], int)
            if gid is None:                 # a text / non-finite GPU id: not a device row
                meta.notes.append(f"{table}: a GPU id that is not a number was skipped")
                continue
            rec = found.setdefault(gid, {})
            rec.update({k: v for k, v in zip(picks, row) if v is not None and rec.get(k) is None})
    if not found:
        ids = [i for i in tl.devices_in_use() if i >= 0]
        if ids:
            meta.notes.append("no TARGET_INFO_GPU table: devices inferred from activity "
                              "deviceIds, model unknown")
        return [Device(id=i, vendor="nvidia") for i in ids]
    return [Device(id=i, name=as_text(r["name"]) if r.get("name") is not None else None,
                   vendor="nvidia",
                   sm_count=_num(r.get("sm_count"), int),
                   memory_bytes=_num(r.get("memory_bytes"), int),
                   memory_bandwidth_bps=_num(r.get("memory_bandwidth_bps"), float),
                   clock_hz=_num(r.get("clock_hz"), float),
                   compute_capability=(f"{r['major']}.{r.get('minor', 0)}"
                                       if r.get("major") else None),
                   sm_limits={k: int(r[k]) for k in ("registers", "warps", "blocks", "shared_memory")
                              if _num(r.get(k), int)} or None)
            for i, r in sorted(found.items())]


def _num(value, kind):
    try:
        return kind(value) if value not in (None, "") else None
    except (TypeError, ValueError, OverflowError):
        return None


def _captured(db: Db, tl: Timeline, meta: Meta) -> set[str]:
    """Sources recorded: META_DATA_CAPTURE when present, else inferred from the tables."""
    declared = [str(v) for k, v in _kv(db, "META_DATA_CAPTURE") if k == "CAPTURE_EVENT_TYPE"]
    has_rows = {"cuda": tl.has_gpu_activity or len(tl.api_calls) > 0,
                "nvtx": len(tl.ranges) > 0, "gpu_metrics": len(tl.metrics) > 0}
    if not declared:
        meta.notes.append("captured sources inferred from the tables present")
        return {s for s, present in (
            ("cuda", any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in db.tables)),
            ("nvtx", NVTX in db.tables), ("osrt", "OSRT_API" in db.tables),
            ("gpu_metrics", "GPU_METRICS" in db.tables or has_rows["gpu_metrics"])) if present}
    out = {s for s, ok in has_rows.items() if ok}    # rows prove capture
    for v in declared:
        key = v.replace(" ", "").lower()
        out.add("gpu_metrics" if "metric" in key else CAPTURE_SOURCES.get(key, key))
    return out


def _rank(db: Db, meta: Meta) -> int | None:
    """MPI rank only when NVTX names a thread 'MPI Rank N' (nsys MPI tracing); no guessing."""
    cols = db.columns(NVTX)
    if not {"eventType", "text"} <= cols:
        return None
    text_id = ("(SELECT value FROM StringIds s WHERE s.id = n.textId)"
               if "textId" in cols and "StringIds" in db.tables else "NULL")
    rows = db.query(f"SELECT DISTINCT COALESCE(n.text, {text_id}) FROM {NVTX} n "
                    f"WHERE n.eventType = {NVTX_THREAD_NAME}")
    ranks = {int(m.group(1)) for (t,) in rows if t and (m := re.match(r"MPI Rank (\d+)$", t))}
    if len(ranks) == 1:
        meta.notes.append("rank from the NVTX thread name 'MPI Rank N'")
        return ranks.pop()
    return None

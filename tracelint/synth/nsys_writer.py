"""Writing a TraceBuilder as an Nsight Systems 2024.5-shaped SQLite export (schema data in
nsys_2024_5_schema.json). The format mapping is documented in builder.py."""
from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from . import nsys_ddl
from .vocab import (INVALID_ID, _COPY_KINDS, _MEM_KINDS, _SMEM_CARVEOUTS, _SYNC_TYPES,
                    _is_driver, _mangled_name, nsys_api_name)


def write_nsys_sqlite(b, path: str | os.PathLike, *, nvtx_ops: bool = False,
                      lazy: bool = True) -> Path:
    """Write an nsys-2024.5-shaped SQLite export. ``lazy`` (default, like nsys) creates
    event tables only when they have rows; ``lazy=False`` creates all of them.
    ``nvtx_ops`` adds CPU ops as NVTX ranges (``"aten::mul, op_id = N"``, like
    ``torch.autograd.profiler.emit_nvtx``)."""
    b._check_closed()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.unlink(tmp)
    try:
        con = sqlite3.connect(tmp)
        try:  # a scratch file until renamed: no fsync, one transaction
            con.execute("PRAGMA synchronous = OFF")
            con.execute("PRAGMA journal_mode = MEMORY")
            with con:
                _fill_nsys(b, con, path, nvtx_ops=nvtx_ops, lazy=lazy)
        finally:
            con.close()
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path

def _fill_nsys(b, con: sqlite3.Connection, path: Path, *, nvtx_ops: bool,
               lazy: bool) -> None:
    p = b.props
    gpid = (1 << 48) | (b.pid << 24)
    gtid = gpid | b.tid
    strings: dict[str, int] = {}

    def sid(s: str) -> int:
        if s not in strings:
            strings[s] = len(strings)
        return strings[s]

    rows: dict[str, list[tuple]] = {t: [] for t in nsys_ddl.DDL}

    # runtime calls
    for e in sorted((e for e in b.host_events if e.kind == "runtime"),
                    key=lambda e: (e.start, e.seq)):
        rows["CUPTI_ACTIVITY_KIND_RUNTIME"].append(
            (e.start, e.end, 1 if _is_driver(e.name) else 0, gtid, e.correlation,
             sid(nsys_api_name(e.name)), 0, None))

    # device activities
    sync_map = _SYNC_TYPES[b.sync_types]
    grid_id = 0
    for a in sorted(b.activities, key=lambda a: (a.start, a.seq)):
        if a.kind == "kernel":
            grid_id += 1
            smem = a.static_smem + a.dynamic_smem
            executed = next((c for c in _SMEM_CARVEOUTS if c >= smem),
                            p["sharedMemPerMultiprocessor"])
            local_total = max(p["localMemoryReserved"],
                              a.local_mem * p["maxThreadsPerMultiprocessor"] * p["numSms"])
            rows["CUPTI_ACTIVITY_KIND_KERNEL"].append((
                a.start, a.end, a.device, 1, None, a.stream, a.correlation, gpid,
                sid(a.name), sid(a.short_name), sid(_mangled_name(a.name, a.short_name)),
                1, 1, a.registers, *a.grid, *a.block, a.static_smem, a.dynamic_smem,
                a.local_mem, local_total, grid_id, executed, None, 0))
        elif a.kind == "memcpy":
            # src/dst device and context ids stay NULL, as in the real 2024.5 export
            rows["CUPTI_ACTIVITY_KIND_MEMCPY"].append((
                a.start, a.end, a.device, 1, None, a.stream, a.correlation, gpid,
                a.bytes, _COPY_KINDS[a.copy_kind][1], None, _MEM_KINDS[a.src_kind][1],
                _MEM_KINDS[a.dst_kind][1], None, None, None, None, None, None, None))
        elif a.kind == "memset":
            rows["CUPTI_ACTIVITY_KIND_MEMSET"].append((
                a.start, a.end, a.device, 1, None, a.stream, a.correlation, gpid,
                a.value, a.bytes, None, _MEM_KINDS[a.dst_kind][1]))
        else:
            stream = a.stream if a.stream >= 0 else INVALID_ID
            event = a.event_id if a.event_id is not None else INVALID_ID
            rows["CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"].append((
                a.start, a.end, a.device, 1, None, stream, a.correlation, gpid,
                sync_map[a.sync_kind], event))

    # NVTX push/pop ranges
    for e in sorted(b.host_events, key=lambda e: (e.start, e.seq)):
        if e.kind in ("step", "range"):
            text = e.name
        elif e.kind == "op" and nvtx_ops:
            text = f"{e.name}, op_id = {e.external_id}"
            if isinstance(e.args.get("Input Dims"), list):   # emit_nvtx(record_shapes=True)
                text += ", sizes = [" + ", ".join(
                    "[" + ", ".join(str(int(x)) for x in d) + "]" for d in e.args["Input Dims"]) + "]"
        else:
            continue
        rows["NVTX_EVENTS"].append((e.start, e.end, 59, None, None, None, text, gtid,
                                    None, None, 0) + (None,) * 8)

    # GPU metrics
    metric_ids: dict[str, int] = {}
    type_id = 1 + b.device_id
    for name, value, ts in sorted(b.metrics, key=lambda m: (m[2], m[0])):
        mid = metric_ids.setdefault(name, len(metric_ids))
        rows["GPU_METRICS"].append((ts, ts, type_id, mid, int(round(value))))
    for name, mid in metric_ids.items():
        rows["TARGET_INFO_GPU_METRICS"].append(
            (type_id, b.device_id, f"GPU {b.device_id} ({p['chipName'] or 'GPU'})",
             mid, name))

    # targets, processes, metadata, enums
    rows["TARGET_INFO_GPU"].append(_target_info_gpu_row(b))
    utc = datetime.fromtimestamp(b.epoch_ns // 10**9, tz=timezone.utc)
    stamp = utc.strftime("%Y-%m-%dT%H:%M:%S")
    rows["TARGET_INFO_SESSION_START_TIME"].append((b.epoch_ns, stamp, stamp))
    rows["PROCESSES"].append((gpid, b.pid, b.process_name))
    rows["ThreadNames"].append((sid(b.process_name), 20, gtid))
    rows["META_DATA_EXPORT"].extend(_export_meta(b, path, stamp))
    rows["META_DATA_CAPTURE"].extend(_capture_meta(b))
    for table, enum_rows in nsys_ddl.ENUM_ROWS.items():
        rows[table].extend(enum_rows)
    rows["StringIds"].extend((i, s) for s, i in strings.items())

    for table, ddl in nsys_ddl.DDL.items():
        if lazy and not rows[table] and table not in nsys_ddl.ALWAYS_CREATED:
            continue
        con.execute(ddl)
        if rows[table]:
            marks = ",".join("?" * len(nsys_ddl.columns(table)))
            con.executemany(f"INSERT INTO {table} VALUES ({marks})", rows[table])
    from .memory import write_nsys        # CUDA_GPU_MEMORY_USAGE_EVENTS (synth/memory.py), if any
    write_nsys(b, con, gpid)

def _target_info_gpu_row(b) -> tuple:
    p = b.props
    uuid = hashlib.md5(f"{b.device_name}:{b.device_id}".encode()).hexdigest()
    uuid = f"{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:32]}"
    values = dict(
        vmId=1 << 48, id=b.device_id, name=b.device_name,
        busLocation=p["busLocation"], isDiscrete=1, l2CacheSize=p["l2CacheSize"],
        totalMemory=p["totalGlobalMem"], memoryBandwidth=p["memoryBandwidth"],
        clockRate=p["clockRate"], smCount=p["numSms"], pwGpuId=0, uuid=uuid, luid=0,
        chipName=p["chipName"], cuDevice=b.device_id, ctxswDevPath="", ctrlDevPath="",
        revision=0, nodeMask=0, constantMemory=65536, maxIPC=4,
        maxRegistersPerBlock=p["regsPerBlock"], maxShmemPerBlock=p["sharedMemPerBlock"],
        maxShmemPerBlockOptin=p["sharedMemPerBlockOptin"],
        maxShmemPerSm=p["sharedMemPerMultiprocessor"],
        maxRegistersPerSm=p["regsPerMultiprocessor"], threadsPerWarp=p["warpSize"],
        asyncEngines=p["asyncEngines"],
        maxWarpsPerSm=p["maxThreadsPerMultiprocessor"] // p["warpSize"],
        maxBlocksPerSm=p["maxBlocksPerSm"], maxThreadsPerBlock=p["maxThreadsPerBlock"],
        maxBlockDimX=1024, maxBlockDimY=1024, maxBlockDimZ=64, maxGridDimX=2147483647,
        maxGridDimY=65535, maxGridDimZ=65535, computeMajor=p["computeMajor"],
        computeMinor=p["computeMinor"], smMajor=p["computeMajor"],
        smMinor=p["computeMinor"])
    values.update({k: v for k, v in p.items() if k in values})
    return tuple(values[c] for c in nsys_ddl.columns("TARGET_INFO_GPU"))

def _export_meta(b, path: Path, stamp: str) -> list[tuple[str, str]]:
    major, minor, micro = nsys_ddl.EXPORT_SCHEMA_VERSION.split(".")
    rep = path.with_suffix(".nsys-rep").name
    return [
        ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
        ("EXPORT_PRODUCT_VERSION", nsys_ddl.EXPORT_PRODUCT_VERSION),
        ("EXPORT_PRODUCT_DATE", nsys_ddl.EXPORT_PRODUCT_VERSION.rsplit(".", 2)[0]),
        ("EXPORT_SCHEMA_VERSION", nsys_ddl.EXPORT_SCHEMA_VERSION),
        ("EXPORT_SCHEMA_VERSION_MAJOR", major),
        ("EXPORT_SCHEMA_VERSION_MINOR", minor),
        ("EXPORT_SCHEMA_VERSION_MICRO", micro),
        ("EXPORT_PLATFORM", "linux-desktop"),
        ("EXPORT_ARCH", "x64"),
        ("EXPORT_TIME_UTC", stamp),
        ("EXPORT_HOST", "tracelint-synth"),
        ("EXPORT_USER", "synth"),
        ("EXPORT_PARAM_INPUT_FILE", rep),
        ("EXPORT_PARAM_OUTPUT_FILE", path.name),
        ("EXPORT_PARAM_LAZY", "true"),
        ("EXPORT_PARAM_TIME_NORMALIZE", "false"),
        ("EXPORT_PARAM_TIME_SHIFT", "0"),
    ]

def _capture_meta(b) -> list[tuple[str, str]]:
    rows = [("CAPTURE_EVENT_TYPE", "NvtxEvents"), ("CAPTURE_EVENT_TYPE", "Cuda"),
            ("START_TRIGGER", "Immediate"), ("STOP_TRIGGER", "AppExit"),
            ("PROCESS_0:COMMAND", b.process_name), ("PROCESS_0:ARGUMENT_0", "train.py"),
            ("PROCESS_0:COLLECT_NVTX_TRACE", "true"),
            ("PROCESS_0:COLLECT_CUDA_TRACE", "true")]
    if b.distributed is not None:
        d = b.distributed
        rows += [("PROCESS_0:ENVIRONMENT_VARIABLE", f'RANK="{d["rank"]}"'),
                 ("PROCESS_0:ENVIRONMENT_VARIABLE", f'WORLD_SIZE="{d["world_size"]}"'),
                 ("PROCESS_0:ENVIRONMENT_VARIABLE", f'LOCAL_RANK="{d["rank"]}"')]
    return rows

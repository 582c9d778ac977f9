"""Write a TraceBuilder workload as rocprofv3 output: `--output-format json` and the rocpd
SQLite database, following rocprofiler-sdk's documented layout (see importers/rocprof_json.py
and importers/rocprof_rocpd.py for the field-by-field sources).

Mapping: CUDA runtime names become their HIP twins (cudaLaunchKernel -> hipLaunchKernel,
driver cuLaunchKernel -> hipModuleLaunchKernel); steps and ranges become roctx ranges; CPU ops
and Python frames are dropped (rocprofv3 does not see them); kernels become dispatches on a
queue per stream; copies become memory_copy records between a CPU agent and the GPU agent.
rocprofv3 records neither memsets nor synchronisation activity, so those are not written.
Our files list only the operation names they use (a real file lists every HIP API in enum
order); the importers read names through the listed indices, so both read the same.
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ..io import write_atomic

#: rocprofiler_buffer_tracing_kind_t values (rocprofiler-sdk buffer_tracing.h).
KIND_HIP, KIND_MARKER, KIND_COPY, KIND_DISPATCH = 5, 7, 10, 11
KIND_NAMES = {KIND_HIP: "HIP_RUNTIME_API", KIND_MARKER: "MARKER_CORE_API",
              KIND_COPY: "MEMORY_COPY", KIND_DISPATCH: "KERNEL_DISPATCH"}
COPY_OPS = {"H2D": "MEMORY_COPY_HOST_TO_DEVICE", "D2H": "MEMORY_COPY_DEVICE_TO_HOST",
            "D2D": "MEMORY_COPY_DEVICE_TO_DEVICE", "H2H": "MEMORY_COPY_HOST_TO_HOST",
            "P2P": "MEMORY_COPY_DEVICE_TO_DEVICE"}
CPU_AGENT = 1


def hip_name(api: str) -> str:
    if api.startswith("cuda"):
        return "hip" + api[4:]
    return {"cuLaunchKernel": "hipModuleLaunchKernel"}.get(api, "hip" + api[2:] if api.startswith("cu") else api)


def gpu_agent(b) -> int:
    return 100 + b.device_id


class _Ops:
    """Operation-name tables per kind, numbered in order of first use."""

    def __init__(self):
        self.ops: dict[int, list[str]] = {k: [] for k in KIND_NAMES}

    def __call__(self, kind: int, name: str) -> int:
        ops = self.ops[kind]
        if name not in ops:
            ops.append(name)
        return ops.index(name)

    def strings(self) -> list[dict]:
        top = max(KIND_NAMES)
        return [{"kind": KIND_NAMES.get(k, f"KIND_{k}"), "operations": self.ops.get(k, [])}
                for k in range(top + 1)]


def records(b) -> dict:
    """The workload as rocprofv3 records (shared by both writers): api, dispatch, copy, marker."""
    b._check_closed()
    ops = _Ops()
    out = {"hip_api": [], "kernel_dispatch": [], "memory_copy": [], "marker_api": [],
           "messages": {}, "symbols": {}}
    next_corr = max([e.correlation or 0 for e in b.host_events] +
                    [a.correlation for a in b.activities] + [0]) + 1
    for e in b.host_events:
        if e.kind == "runtime":
            name = hip_name(e.name)
            out["hip_api"].append({
                "size": 64, "kind": KIND_HIP, "operation": ops(KIND_HIP, name),
                "correlation_id": {"internal": e.correlation, "external": e.external_id or 0},
                "start_timestamp": e.start, "end_timestamp": e.end, "thread_id": b.tid})
        elif e.kind in ("step", "range"):
            corr, next_corr = next_corr, next_corr + 1
            out["messages"][corr] = e.name
            out["marker_api"].append({
                "size": 64, "kind": KIND_MARKER, "operation": ops(KIND_MARKER, "roctxRangePushA"),
                "correlation_id": {"internal": corr, "external": 0},
                "start_timestamp": e.start, "end_timestamp": e.end, "thread_id": b.tid})
    for a in b.activities:
        if a.kind == "kernel":
            kid = out["symbols"].setdefault(a.name, (len(out["symbols"]) + 1, a))[0]
            out["kernel_dispatch"].append({
                "size": 96, "kind": KIND_DISPATCH, "operation": ops(KIND_DISPATCH, "KERNEL_DISPATCH_COMPLETE"),
                "thread_id": b.tid, "correlation_id": {"internal": a.correlation, "external": a.external_id or 0},
                "start_timestamp": a.start, "end_timestamp": a.end,
                "dispatch_info": {
                    "size": 64, "agent_id": {"handle": gpu_agent(b)}, "queue_id": {"handle": a.stream},
                    "kernel_id": kid, "dispatch_id": len(out["kernel_dispatch"]) + 1,
                    "private_segment_size": a.local_mem, "group_segment_size": a.static_smem + a.dynamic_smem,
                    "workgroup_size": dict(zip("xyz", a.block)),
                    "grid_size": {ax: g * w for ax, g, w in zip("xyz", a.grid, a.block)}}})
        elif a.kind == "memcpy":
            src = gpu_agent(b) if a.copy_kind in ("D2H", "D2D", "P2P") else CPU_AGENT
            dst = gpu_agent(b) if a.copy_kind in ("H2D", "D2D", "P2P") else CPU_AGENT
            out["memory_copy"].append({
                "size": 64, "kind": KIND_COPY, "operation": ops(KIND_COPY, COPY_OPS[a.copy_kind]),
                "thread_id": b.tid, "correlation_id": {"internal": a.correlation, "external": a.external_id or 0},
                "start_timestamp": a.start, "end_timestamp": a.end,
                "dst_agent_id": {"handle": dst}, "src_agent_id": {"handle": src}, "bytes": a.bytes})
    out["ops"] = ops
    return out


def _agents(b) -> list[dict]:
    return [{"size": 512, "id": {"handle": CPU_AGENT}, "type": 1, "name": "AMD EPYC 9654",
             "product_name": "AMD EPYC 9654", "logical_node_id": 0, "logical_node_type_id": 0},
            {"size": 512, "id": {"handle": gpu_agent(b)}, "type": 2, "name": "gfx942",
             "product_name": b.device_name, "cu_count": int(b.props.get("numSms") or 0),
             "logical_node_id": 1 + b.device_id, "logical_node_type_id": b.device_id}]


def write_rocprof_json(b, path, *, version: str = "0.6.0") -> Path:
    """`rocprofv3 --output-format json` results.json for the builder's workload."""
    r = records(b)
    lo, hi = b._span()
    proc = {
        "metadata": {"pid": b.pid, "init_time": lo, "fini_time": hi, "version": version,
                     "config": {"kernel_trace": True, "hip_runtime_trace": True,
                                "marker_trace": True, "memory_copy_trace": True},
                     "command": [b.process_name]},
        "agents": _agents(b), "counters": [],
        "strings": {"callback_records": [], "buffer_records": r["ops"].strings(),
                    "marker_api": [{"key": k, "value": v} for k, v in r["messages"].items()],
                    "correlation_id": {"external": []}, "counters": {"dimension_ids": []}},
        "code_objects": [{"size": 64, "code_object_id": 1, "agent_id": {"handle": gpu_agent(b)},
                          "uri": "file:///tmp/app#offset=0&size=0"}],
        "kernel_symbols": [{"size": 96, "kernel_id": kid, "code_object_id": 1,
                            "kernel_name": a.name, "formatted_kernel_name": a.name,
                            "demangled_kernel_name": a.name, "truncated_kernel_name": a.short_name,
                            "group_segment_size": a.static_smem, "private_segment_size": a.local_mem,
                            "sgpr_count": 32, "arch_vgpr_count": a.registers, "accum_vgpr_count": 0}
                           for kid, a in r["symbols"].values()],
        "host_functions": [], "summary": [], "callback_records": {"counter_collection": []},
        "buffer_records": {k: r[k] for k in ("kernel_dispatch", "hip_api", "marker_api", "memory_copy")}
        | {"hsa_api": [], "rccl_api": [], "memory_allocation": [], "scratch_memory": []},
    }
    path = Path(path)
    write_atomic(path, json.dumps({"rocprofiler-sdk-tool": [proc]}, indent=1))
    return path


#: rocpd tables (rocpd_tables.sql, schema 3, per-table start/end columns), the columns we fill.
_UUID = "_00000000_0000_0000_0000_000000000001"
_DDL = {
    "rocpd_metadata": "id INTEGER PRIMARY KEY, tag TEXT NOT NULL, value TEXT NOT NULL",
    "rocpd_string": "id INTEGER PRIMARY KEY, guid TEXT, string TEXT NOT NULL UNIQUE",
    "rocpd_info_process": "id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, ppid INTEGER, pid INTEGER NOT NULL, command TEXT",
    "rocpd_info_thread": "id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, ppid INTEGER, pid INTEGER, tid INTEGER NOT NULL, name TEXT",
    "rocpd_info_agent": ("id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, type TEXT, absolute_index INTEGER, "
                         "logical_index INTEGER, type_index INTEGER, name TEXT, model_name TEXT, product_name TEXT"),
    "rocpd_info_kernel_symbol": ("id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, code_object_id INTEGER, "
                                 "kernel_name TEXT, display_name TEXT, group_segment_size INTEGER, "
                                 "private_segment_size INTEGER, arch_vgpr_count INTEGER"),
    "rocpd_event": "id INTEGER PRIMARY KEY, guid TEXT, category_id INTEGER, correlation_id INTEGER",
    "rocpd_region": ("id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, tid INTEGER, start BIGINT, "
                     "end BIGINT, name_id INTEGER, event_id INTEGER"),
    "rocpd_kernel_dispatch": ("id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, tid INTEGER, agent_id INTEGER, "
                              "kernel_id INTEGER, dispatch_id INTEGER, queue_id INTEGER, stream_id INTEGER, start BIGINT, "
                              "end BIGINT, private_segment_size INTEGER, group_segment_size INTEGER, "
                              "workgroup_size_x INTEGER, workgroup_size_y INTEGER, workgroup_size_z INTEGER, "
                              "grid_size_x INTEGER, grid_size_y INTEGER, grid_size_z INTEGER, event_id INTEGER"),
    "rocpd_memory_copy": ("id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, tid INTEGER, start BIGINT, "
                          "end BIGINT, name_id INTEGER, dst_agent_id INTEGER, src_agent_id INTEGER, size INTEGER, "
                          "queue_id INTEGER, stream_id INTEGER, event_id INTEGER"),
}


def write_rocpd(b, path) -> Path:
    """`rocprofv3 --output-format rocpd` database for the builder's workload."""
    r = records(b)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    try:
        for name, cols in _DDL.items():
            con.execute(f'CREATE TABLE "{name}{_UUID}" ({cols})')
            con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM "{name}{_UUID}"')
        _fill_rocpd(con, b, r)
        con.commit()
    finally:
        con.close()
    tmp.replace(path)
    return path


def _fill_rocpd(con, b, r) -> None:
    strings: dict[str, int] = {}

    def sid(s: str) -> int:
        if s not in strings:
            strings[s] = len(strings) + 1
            con.execute(f'INSERT INTO "rocpd_string{_UUID}" VALUES (?, ?, ?)', (strings[s], "g", s))
        return strings[s]

    ins = lambda t, *v: con.execute(f'INSERT INTO "{t}{_UUID}" VALUES ({",".join("?" * len(v))})', v)  # noqa: E731
    ins("rocpd_metadata", 1, "schema_version", "3")
    ins("rocpd_metadata", 2, "uuid", _UUID[1:])
    ins("rocpd_info_process", 1, "g", 1, 0, b.pid, b.process_name)
    ins("rocpd_info_thread", 1, "g", 1, 0, 1, b.tid, b.process_name)
    ins("rocpd_info_agent", 1, "g", 1, 1, "CPU", 0, 0, 0, "cpu", "AMD EPYC 9654", "AMD EPYC 9654")
    ins("rocpd_info_agent", 2, "g", 1, 1, "GPU", 1, 1, b.device_id, "gfx942", b.device_name, b.device_name)
    agent = {CPU_AGENT: 1, gpu_agent(b): 2}
    for kid, a in r["symbols"].values():
        ins("rocpd_info_kernel_symbol", kid, "g", 1, 1, 1, a.name, a.name, a.static_smem, a.local_mem, a.registers)
    ops = r["ops"].ops
    ev = 0

    def event(category: str, corr: int) -> int:
        nonlocal ev
        ev += 1
        ins("rocpd_event", ev, "g", sid(category), corr)
        return ev

    for i, x in enumerate(r["hip_api"] + r["marker_api"], 1):
        kind = x["kind"]
        name = (r["messages"].get(x["correlation_id"]["internal"]) if kind == KIND_MARKER
                else ops[kind][x["operation"]])
        e = event(KIND_NAMES[kind], x["correlation_id"]["internal"])
        ins("rocpd_region", i, "g", 1, 1, 1, x["start_timestamp"], x["end_timestamp"], sid(name), e)
    for i, x in enumerate(r["kernel_dispatch"], 1):
        d = x["dispatch_info"]
        e = event("KERNEL_DISPATCH", x["correlation_id"]["internal"])
        ins("rocpd_kernel_dispatch", i, "g", 1, 1, 1, agent[d["agent_id"]["handle"]], d["kernel_id"],
            d["dispatch_id"], d["queue_id"]["handle"], d["queue_id"]["handle"], x["start_timestamp"],
            x["end_timestamp"], d["private_segment_size"], d["group_segment_size"],
            *d["workgroup_size"].values(), *d["grid_size"].values(), e)
    for i, x in enumerate(r["memory_copy"], 1):
        e = event("MEMORY_COPY", x["correlation_id"]["internal"])
        ins("rocpd_memory_copy", i, "g", 1, 1, 1, x["start_timestamp"], x["end_timestamp"],
            sid(ops[KIND_COPY][x["operation"]]), agent[x["dst_agent_id"]["handle"]],
            agent[x["src_agent_id"]["handle"]], x["bytes"], None, None, e)

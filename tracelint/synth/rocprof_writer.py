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


#: rocpd tables (rocpd_tables.sql, schema 3), the columns we fill. "columns": each row has its
#: own lane (pid, tid, agent, queue, stream) and start/end; "tracks": the newer layout where a
#: row points at a rocpd_track lane and at rocpd_timestamp rows.
_UUID = "_00000000_0000_0000_0000_000000000001"
_COMMON = {
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
}
_DISPATCH = ("kernel_id INTEGER, dispatch_id INTEGER, private_segment_size INTEGER, group_segment_size INTEGER, "
             "workgroup_size_x INTEGER, workgroup_size_y INTEGER, workgroup_size_z INTEGER, "
             "grid_size_x INTEGER, grid_size_y INTEGER, grid_size_z INTEGER, event_id INTEGER")
_COPY = "name_id INTEGER, dst_agent_id INTEGER, src_agent_id INTEGER, size INTEGER, event_id INTEGER"
_LANE = "nid INTEGER, pid INTEGER, tid INTEGER, agent_id INTEGER, queue_id INTEGER, stream_id INTEGER, start BIGINT, end BIGINT"
_TRACKED = "track_id INTEGER, start_id INTEGER, end_id INTEGER"
_LAYOUTS = {
    "columns": {"rocpd_region": f"id INTEGER PRIMARY KEY, guid TEXT, {_LANE}, name_id INTEGER, event_id INTEGER",
                "rocpd_kernel_dispatch": f"id INTEGER PRIMARY KEY, guid TEXT, {_LANE}, {_DISPATCH}",
                "rocpd_memory_copy": f"id INTEGER PRIMARY KEY, guid TEXT, {_LANE}, {_COPY}"},
    "tracks": {"rocpd_region": f"id INTEGER PRIMARY KEY, guid TEXT, {_TRACKED}, name_id INTEGER, event_id INTEGER",
               "rocpd_kernel_dispatch": f"id INTEGER PRIMARY KEY, guid TEXT, {_TRACKED}, {_DISPATCH}",
               "rocpd_memory_copy": f"id INTEGER PRIMARY KEY, guid TEXT, {_TRACKED}, {_COPY}",
               "rocpd_track": ("id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, ppid INTEGER, pid INTEGER, tid INTEGER, "
                               "agent_id INTEGER, queue_id INTEGER, stream_id INTEGER, name_id INTEGER"),
               "rocpd_timestamp": "id INTEGER PRIMARY KEY, guid TEXT, value BIGINT NOT NULL, phase INTEGER, track_id INTEGER"},
}


def write_rocpd(b, path, *, layout: str = "columns") -> Path:
    """`rocprofv3 --output-format rocpd` database for the builder's workload."""
    r = records(b)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    try:
        for name, cols in {**_COMMON, **_LAYOUTS[layout]}.items():
            con.execute(f'CREATE TABLE "{name}{_UUID}" ({cols})')
            con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM "{name}{_UUID}"')
        _Rocpd(con, layout).fill(b, r)
        con.commit()
    finally:
        con.close()
    tmp.replace(path)
    return path


class _Rocpd:
    """Inserts by column name; put() stores a row's lane and times the layout's way."""

    def __init__(self, con, layout: str):
        self.con, self.tracked = con, layout == "tracks"
        self.strings: dict[str, int] = {}
        self.ids: dict[str, int] = {}

    def ins(self, table: str, **cols) -> int:
        rid = self.ids[table] = self.ids.get(table, 0) + 1
        cols = {"id": rid, **cols}
        self.con.execute(f'INSERT INTO "{table}{_UUID}" ({", ".join(cols)}) VALUES ({", ".join("?" * len(cols))})',
                         tuple(cols.values()))
        return rid

    def sid(self, s: str) -> int:
        if s not in self.strings:
            self.strings[s] = self.ins("rocpd_string", guid="g", string=s)
        return self.strings[s]

    def event(self, category: str, corr: int) -> int:
        return self.ins("rocpd_event", guid="g", category_id=self.sid(category), correlation_id=corr)

    def put(self, table: str, lane: dict, start: int, end: int, **cols) -> None:
        if self.tracked:
            track = self.ins("rocpd_track", guid="g", nid=1, **lane)
            s = self.ins("rocpd_timestamp", guid="g", value=start, phase=1, track_id=track)
            e = self.ins("rocpd_timestamp", guid="g", value=end, phase=2, track_id=track)
            self.ins(table, guid="g", track_id=track, start_id=s, end_id=e, **cols)
        else:
            self.ins(table, guid="g", nid=1, start=start, end=end, **lane, **cols)

    def fill(self, b, r) -> None:
        self.ins("rocpd_metadata", tag="schema_version", value="3")
        self.ins("rocpd_metadata", tag="uuid", value=_UUID[1:])
        self.ins("rocpd_info_process", guid="g", nid=1, ppid=0, pid=b.pid, command=b.process_name)
        self.ins("rocpd_info_thread", guid="g", nid=1, ppid=0, pid=1, tid=b.tid, name=b.process_name)
        self.ins("rocpd_info_agent", guid="g", nid=1, pid=1, type="CPU", absolute_index=0, logical_index=0,
                 type_index=0, name="cpu", model_name="AMD EPYC 9654", product_name="AMD EPYC 9654")
        self.ins("rocpd_info_agent", guid="g", nid=1, pid=1, type="GPU", absolute_index=1, logical_index=1,
                 type_index=b.device_id, name="gfx942", model_name=b.device_name, product_name=b.device_name)
        agent = {CPU_AGENT: 1, gpu_agent(b): 2}
        for kid, a in r["symbols"].values():
            self.ins("rocpd_info_kernel_symbol", guid="g", nid=1, pid=1, code_object_id=1, kernel_name=a.name,
                     display_name=a.name, group_segment_size=a.static_smem, private_segment_size=a.local_mem,
                     arch_vgpr_count=a.registers)
        ops, host = r["ops"].ops, {"pid": 1, "tid": 1}
        for x in r["hip_api"] + r["marker_api"]:
            kind, corr = x["kind"], x["correlation_id"]["internal"]
            name = r["messages"].get(corr) if kind == KIND_MARKER else ops[kind][x["operation"]]
            self.put("rocpd_region", host, x["start_timestamp"], x["end_timestamp"], name_id=self.sid(name),
                     event_id=self.event(KIND_NAMES[kind], corr))
        for x in r["kernel_dispatch"]:
            d = x["dispatch_info"]
            lane = dict(host, agent_id=agent[d["agent_id"]["handle"]], queue_id=d["queue_id"]["handle"],
                        stream_id=d["queue_id"]["handle"])
            self.put("rocpd_kernel_dispatch", lane, x["start_timestamp"], x["end_timestamp"],
                     kernel_id=d["kernel_id"], dispatch_id=d["dispatch_id"],
                     private_segment_size=d["private_segment_size"], group_segment_size=d["group_segment_size"],
                     **{f"workgroup_size_{a}": v for a, v in d["workgroup_size"].items()},
                     **{f"grid_size_{a}": v for a, v in d["grid_size"].items()},
                     event_id=self.event("KERNEL_DISPATCH", x["correlation_id"]["internal"]))
        for x in r["memory_copy"]:
            self.put("rocpd_memory_copy", host, x["start_timestamp"], x["end_timestamp"],
                     name_id=self.sid(ops[KIND_COPY][x["operation"]]),
                     dst_agent_id=agent[x["dst_agent_id"]["handle"]], src_agent_id=agent[x["src_agent_id"]["handle"]],
                     size=x["bytes"], event_id=self.event("MEMORY_COPY", x["correlation_id"]["internal"]))

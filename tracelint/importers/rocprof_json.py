"""rocprofv3 `--output-format json` (ROCm 6.2+, rocprofiler-sdk) -> Timeline.

Layout (rocprofiler-sdk source/lib/output/generateJSON.cpp and cxx/serialization.hpp): a top
object {"rocprofiler-sdk-tool": [one entry per process]}; each entry has `metadata` (pid,
init_time, fini_time, config, command), `agents` (id.handle, type 1 CPU / 2 GPU, names, node
ids), `kernel_symbols` (kernel_id -> names, LDS/scratch sizes), `strings.buffer_records` (per
kind enum value: {"kind": NAME, "operations": [names by operation enum]}), `strings.marker_api`
(roctx messages by correlation id) and `buffer_records` with `hip_api`, `kernel_dispatch`,
`memory_copy`, `marker_api` records. Timestamps are ns; every record has
`correlation_id.internal`, shared by a HIP call and the dispatch or copy it enqueued (the
API <-> dispatch link) and `.external` (the user's external correlation id).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from ..errors import TraceFormatError
from ..timeline.model import Device, Meta, Timeline
from .records import Rows, build_timeline, copy_kind_of, finish_meta

TOOL_KEY = "rocprofiler-sdk-tool"
GPU_TYPE = 2          # ROCPROFILER_AGENT_TYPE_GPU


# The records as typed structs, only the fields read (a dict per record and per nested object
# held 4x the file: 379 MiB for 95 MB). A field the reading below takes as `r["x"]` is
# required here, one it takes with a default has that default: a record without a required
# field fails to decode, and the trace with it (one line, as a missing key did).
class _Corr(msgspec.Struct, gc=False):
    internal: Any
    external: Any = 0


class _Handle(msgspec.Struct, gc=False):
    handle: Any


class _Lane(msgspec.Struct, gc=False):
    """stream_id / queue_id: an absent handle reads as an absent lane."""
    handle: Any = msgspec.UNSET


class _Dim(msgspec.Struct, gc=False):
    x: Any = 1
    y: Any = 1
    z: Any = 1


_NO_DIM = _Dim()


class _Record(msgspec.Struct, gc=False, kw_only=True):
    correlation_id: _Corr
    start_timestamp: Any
    end_timestamp: Any
    kind: Any = -1
    operation: Any = -1


class _Api(_Record, gc=False, kw_only=True):
    thread_id: Any = msgspec.UNSET    # required by hip_api and by markers that are read


class _Dispatch(msgspec.Struct, gc=False):
    agent_id: _Handle
    kernel_id: Any
    queue_id: _Lane | None = None
    workgroup_size: _Dim | None = None
    grid_size: _Dim | None = None
    group_segment_size: Any = 0
    private_segment_size: Any = -1


class _Kernel(_Record, gc=False, kw_only=True):
    dispatch_info: _Dispatch
    stream_id: _Lane | None = None


class _Copy(_Record, gc=False, kw_only=True):
    src_agent_id: _Handle
    dst_agent_id: _Handle
    stream_id: _Lane | None = None
    bytes: Any = -1


class _Buffers(msgspec.Struct, gc=False):
    hip_api: list[_Api] | None = None
    kernel_dispatch: list[_Kernel] | None = None
    memory_copy: list[_Copy] | None = None
    marker_api: list[_Api] | None = None


class _Process(msgspec.Struct, gc=False):
    metadata: Any = None              # small: read as plain JSON, as before
    agents: Any = None
    kernel_symbols: Any = None
    strings: Any = None
    buffer_records: _Buffers | None = None


_Top = msgspec.defstruct("_Top", [("processes", list[_Process] | None, None)],
                         rename={"processes": TOOL_KEY})
_DECODE = msgspec.json.Decoder(_Top).decode


def load_rocprof_json(path) -> Timeline:
    path = Path(path)
    try:
        procs = _DECODE(_read(path)).processes
    except msgspec.ValidationError as exc:
        raise TraceFormatError(f"{path}: malformed rocprofv3 record: {exc}") from None
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"{path}: not valid rocprofv3 JSON (truncated?): {exc}") from None
    if procs is None:
        raise TraceFormatError(f"{path}: JSON without a '{TOOL_KEY}' process list: not rocprofv3 output")
    meta = Meta(format="rocprofv3-json", producer="rocprofv3 (rocprofiler-sdk)")
    tables = {t: Rows(t) for t in ("kernels", "copies", "api_calls", "ranges")}
    try:
        for proc in procs:
            _process(proc, tables, meta)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TraceFormatError(f"{path}: malformed rocprofv3 record: {type(exc).__name__}: {exc}") from None
    tl = build_timeline(tables.values(), meta)
    finish_meta(tl, {"hip": len(tl.api_calls), "cuda": tl.has_gpu_activity, "nvtx": len(tl.ranges)})
    return tl


def _read(path: Path) -> bytes:
    """The file's JSON text; gzip within the limits every gzip read has (io.decompressed)."""
    from ..io import decompressed
    try:
        return decompressed(path.read_bytes(), path)
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None


def _process(proc: _Process, t: dict[str, Rows], meta: Meta) -> None:
    md = proc.metadata or {}
    pid = int(md.get("pid", -1))
    version = md.get("version") or md.get("rocprofiler_sdk_version")
    if version and not meta.format_version:
        meta.format_version = str(version)
        meta.producer = f"rocprofv3 (rocprofiler-sdk {version})"
    gpu_index = _agents(proc.agents or [], meta)
    strings = proc.strings or {}
    kinds = strings.get("buffer_records") or []
    symbols = _symbols(proc.kernel_symbols or [])
    messages = _messages(strings.get("marker_api"))
    rec = proc.buffer_records or _Buffers()

    def op_name(r: _Record) -> str:
        k, o = int(r.kind), int(r.operation)
        ops = kinds[k].get("operations", []) if 0 <= k < len(kinds) else []
        return str(ops[o]) if 0 <= o < len(ops) else f"op{o}"

    api = rec.hip_api or []
    if api:
        t["api_calls"].extend(
            len(api), pid=[pid] * len(api), tid=[int(_required(r.thread_id, "thread_id")) for r in api],
            start=[int(r.start_timestamp) for r in api], end=[int(r.end_timestamp) for r in api],
            name=[op_name(r) for r in api], api=["runtime"] * len(api),
            correlation=[int(r.correlation_id.internal) for r in api],
            external_id=[int(r.correlation_id.external) or -1 for r in api])
    kernels = rec.kernel_dispatch or []
    if kernels:
        t["kernels"].extend(len(kernels), **_kernel_columns(kernels, pid, gpu_index, symbols))
    for r in rec.memory_copy or []:
        src, dst = int(r.src_agent_id.handle), int(r.dst_agent_id.handle)
        kind = copy_kind_of(src in gpu_index if gpu_index else None,
                            dst in gpu_index if gpu_index else None, src == dst)
        dev = gpu_index.get(dst if kind == "H2D" else src, gpu_index.get(dst, -1))
        t["copies"].add(device=dev, stream=int(_lane(r.stream_id)), start=int(r.start_timestamp),
                        end=int(r.end_timestamp), name=op_name(r), pid=pid,
                        correlation=int(r.correlation_id.internal), bytes=int(r.bytes),
                        kind=kind, src_kind="device" if src in gpu_index else "unknown",
                        dst_kind="device" if dst in gpu_index else "unknown")
    for r in rec.marker_api or []:
        start, end = int(r.start_timestamp), int(r.end_timestamp)
        corr = int(r.correlation_id.internal)
        name = messages.get(corr) or op_name(r)
        if end > start and not name.startswith("roctxMark"):
            t["ranges"].add(pid=pid, tid=int(_required(r.thread_id, "thread_id")), start=start,
                            end=end, name=name, kind="nvtx")


def _kernel_columns(kernels: list[_Kernel], pid: int, gpu_index: dict, symbols: dict) -> dict:
    ds = [r.dispatch_info for r in kernels]
    syms = [symbols.get(int(d.kernel_id), {}) for d in ds]
    wgs = [d.workgroup_size or _NO_DIM for d in ds]
    grids = [d.grid_size or _NO_DIM for d in ds]
    return dict(
        device=[gpu_index.get(int(d.agent_id.handle), -1) for d in ds],
        stream=[int(_lane(r.stream_id, d.queue_id)) for r, d in zip(kernels, ds)],
        start=[int(r.start_timestamp) for r in kernels], end=[int(r.end_timestamp) for r in kernels],
        pid=[pid] * len(kernels),
        name=[sym.get("name") or f"kernel_{d.kernel_id}" for sym, d in zip(syms, ds)],
        correlation=[int(r.correlation_id.internal) for r in kernels],
        # grid_size counts work-items (HSA); the Timeline's grid counts blocks
        **{f"grid_{a}": [int(getattr(g, a)) // max(1, int(getattr(w, a))) for g, w in zip(grids, wgs)]
           for a in "xyz"},
        **{f"block_{a}": [int(getattr(w, a)) for w in wgs] for a in "xyz"},
        static_smem=[int(sym.get("group_segment_size", -1)) for sym in syms],
        dynamic_smem=[max(-1, int(d.group_segment_size) - max(0, int(sym.get("group_segment_size", 0))))
                      for d, sym in zip(ds, syms)],
        local_mem_per_thread=[int(d.private_segment_size) for d in ds])


def _lane(*lanes: _Lane | None) -> Any:
    """The handle of the first lane given with one (stream_id, then queue_id), else -1."""
    return next((lane.handle for lane in lanes if lane is not None and lane.handle is not msgspec.UNSET), -1)


def _required(value, name: str):
    if value is msgspec.UNSET:
        raise KeyError(name)
    return value


def _agents(agents: list, meta: Meta) -> dict[int, int]:
    """GPU agent handle -> device index (logical_node_type_id: the GPU's index among GPUs)."""
    out: dict[int, int] = {}
    gpus = [a for a in agents if isinstance(a, dict) and a.get("type") in (GPU_TYPE, "GPU")]
    for i, a in enumerate(gpus):
        idx = int(a.get("logical_node_type_id", i))
        out[int(a["id"]["handle"])] = idx
        if meta.device(idx) is None:
            meta.devices.append(Device(
                id=idx, vendor="amd", name=a.get("product_name") or a.get("model_name") or a.get("name"),
                sm_count=int(a["cu_count"]) if a.get("cu_count") else None))
    return out


def _symbols(symbols) -> dict[int, dict]:
    items = symbols.values() if isinstance(symbols, dict) else symbols
    out = {}
    for s in items:
        if isinstance(s, dict) and "kernel_id" in s:
            name = (s.get("formatted_kernel_name") or s.get("demangled_kernel_name")
                    or s.get("kernel_name") or "")
            out[int(s["kernel_id"])] = dict(s, name=str(name))
    return out


def _messages(raw) -> dict[int, str]:
    """roctx messages by correlation id: a JSON object, or cereal's [{"key", "value"}] list."""
    if isinstance(raw, dict):
        return {int(k): str(v) for k, v in raw.items()}
    if isinstance(raw, list):
        return {int(e["key"]): str(e["value"]) for e in raw if isinstance(e, dict) and "key" in e}
    return {}

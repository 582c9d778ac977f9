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

import msgspec

from ..errors import TraceFormatError
from ..timeline.model import Device, Meta, Timeline
from .records import Rows, build_timeline, copy_kind_of, finish_meta

TOOL_KEY = "rocprofiler-sdk-tool"
GPU_TYPE = 2          # ROCPROFILER_AGENT_TYPE_GPU


def load_rocprof_json(path) -> Timeline:
    path = Path(path)
    try:
        data = msgspec.json.decode(_read(path))
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"{path}: not valid rocprofv3 JSON (truncated?): {exc}") from None
    procs = data.get(TOOL_KEY) if isinstance(data, dict) else None
    if not isinstance(procs, list) or not all(isinstance(p, dict) for p in procs):
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
    """The file's JSON text; gzip within the limits every gzip read has (io.gunzip_capped)."""
    from ..io import gunzip_capped
    try:
        raw = path.read_bytes()
        return gunzip_capped(raw, path) if raw[:2] == b"\x1f\x8b" else raw
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None


def _process(proc: dict, t: dict[str, Rows], meta: Meta) -> None:
    md = proc.get("metadata") or {}
    pid = int(md.get("pid", -1))
    version = md.get("version") or md.get("rocprofiler_sdk_version")
    if version and not meta.format_version:
        meta.format_version = str(version)
        meta.producer = f"rocprofv3 (rocprofiler-sdk {version})"
    gpu_index = _agents(proc.get("agents") or [], meta)
    kinds = (proc.get("strings") or {}).get("buffer_records") or []
    symbols = _symbols(proc.get("kernel_symbols") or [])
    messages = _messages((proc.get("strings") or {}).get("marker_api"))
    rec = proc.get("buffer_records") or {}

    def op_name(r: dict) -> str:
        k, o = int(r.get("kind", -1)), int(r.get("operation", -1))
        ops = kinds[k].get("operations", []) if 0 <= k < len(kinds) else []
        return str(ops[o]) if 0 <= o < len(ops) else f"op{o}"

    for r in rec.get("hip_api") or []:
        c = r["correlation_id"]
        t["api_calls"].add(pid=pid, tid=int(r["thread_id"]), start=int(r["start_timestamp"]),
                           end=int(r["end_timestamp"]), name=op_name(r), api="runtime",
                           correlation=int(c["internal"]), external_id=int(c.get("external", 0)) or -1)
    for r in rec.get("kernel_dispatch") or []:
        d = r["dispatch_info"]
        sym = symbols.get(int(d["kernel_id"]), {})
        wg, grid = d.get("workgroup_size") or {}, d.get("grid_size") or {}
        stream = (r.get("stream_id") or d.get("queue_id") or {}).get("handle", -1)
        t["kernels"].add(
            device=gpu_index.get(int(d["agent_id"]["handle"]), -1), stream=int(stream),
            start=int(r["start_timestamp"]), end=int(r["end_timestamp"]), pid=pid,
            name=sym.get("name") or f"kernel_{d['kernel_id']}",
            correlation=int(r["correlation_id"]["internal"]),
            # grid_size counts work-items (HSA); the Timeline's grid counts blocks
            **{f"grid_{a}": int(grid.get(a, 1)) // max(1, int(wg.get(a, 1))) for a in "xyz"},
            **{f"block_{a}": int(wg.get(a, 1)) for a in "xyz"},
            static_smem=int(sym.get("group_segment_size", -1)),
            dynamic_smem=max(-1, int(d.get("group_segment_size", 0)) - max(0, int(sym.get("group_segment_size", 0)))),
            local_mem_per_thread=int(d.get("private_segment_size", -1)))
    for r in rec.get("memory_copy") or []:
        src, dst = int(r["src_agent_id"]["handle"]), int(r["dst_agent_id"]["handle"])
        kind = copy_kind_of(src in gpu_index if gpu_index else None,
                            dst in gpu_index if gpu_index else None, src == dst)
        dev = gpu_index.get(dst if kind == "H2D" else src, gpu_index.get(dst, -1))
        stream = (r.get("stream_id") or {}).get("handle", -1)
        t["copies"].add(device=dev, stream=int(stream), start=int(r["start_timestamp"]),
                        end=int(r["end_timestamp"]), name=op_name(r), pid=pid,
                        correlation=int(r["correlation_id"]["internal"]), bytes=int(r.get("bytes", -1)),
                        kind=kind, src_kind="device" if src in gpu_index else "unknown",
                        dst_kind="device" if dst in gpu_index else "unknown")
    for r in rec.get("marker_api") or []:
        start, end = int(r["start_timestamp"]), int(r["end_timestamp"])
        corr = int(r["correlation_id"]["internal"])
        name = messages.get(corr) or op_name(r)
        if end > start and not name.startswith("roctxMark"):
            t["ranges"].add(pid=pid, tid=int(r["thread_id"]), start=start, end=end, name=name,
                            kind="nvtx")


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

"""Kineto trace metadata: producer and versions, devices (deviceProperties or the ids seen),
rank and world size, what was captured, raw event counts, notes and extras."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from ..timeline.model import Device, Meta, Timeline
from .kineto_columns import Builder
from .kineto_events import COUNTER_CATS, FLAG_KEYS, FLOW_CATS, TABLE_OF_CAT, VERSION_KEYS, Top
from .kineto_values import opt_int, to_int


class TraceInfo:
    """Top-level facts kept once the file buffer is gone."""

    def __init__(self, top: Top, shapes: bool):
        self.top, self.shapes = top, shapes
        self.versions = {k: getattr(top, k) for k in VERSION_KEYS if getattr(top, k) is not None}
        self.torch = _torch_version(top.metadata)
        top.metadata = msgspec.Raw()          # the only view of the buffer left in top


def _torch_version(raw: msgspec.Raw) -> str | None:
    """metadata.system.torch_env_info.torch_version (TraceLens-style runs)."""
    try:
        v = msgspec.json.decode(raw)["system"]["torch_env_info"]["torch_version"] if raw else None
    except (msgspec.DecodeError, KeyError, TypeError):
        return None
    return v if isinstance(v, str) and v else None


def build_meta(path: Path, info: TraceInfo, tl: Timeline, build: Builder,
          specials: list[dict]) -> Meta:
    top, counts = info.top, tl.counts()
    meta = Meta(format="kineto-json",
                format_version="" if top.schemaVersion is None else str(top.schemaVersion))
    meta.producer = _producer(info)
    meta.devices = _devices(top.deviceProperties, tl, info.versions, meta.notes)
    _distributed(path, top.distributedInfo, meta)
    for source, present in (("cuda", tl.has_gpu_activity or counts["api_calls"]),
                            ("python_stacks", counts["python_frames"]), ("shapes", info.shapes),
                            ("gpu_metrics", counts["metrics"])):
        if present:
            meta.captured.add(source)
    meta.raw_event_counts = {t: sum(n for c, n in build.cat_counts.items()
                                    if TABLE_OF_CAT.get(c) == t) for t in counts}
    meta.raw_event_counts["metrics"] = sum(build.cat_counts[c] for c in COUNTER_CATS)
    meta.raw_event_counts["flows"] = sum(build.cat_counts[c] for c in FLOW_CATS)
    meta.raw_event_counts["total"] = sum(build.cat_counts.values())
    meta.extra = _extra(info, tl, build, specials)
    if build.call_stacks and not build.cat_counts["python_function"]:
        meta.extra["python_frame_lines"] = "call"     # legacy "Call stack": executing lines
    for n, text in ((build.bad_ts, "events without a numeric ts dropped"),
                    (build.non_x, "non-'X' events in activity categories ignored"),
                    (build.filled, "correlation ids taken from flow events (args had none)")):
        if n:
            meta.notes.append(f"{n} {text}")
    if not tl.has_gpu_activity:
        meta.notes.append("no GPU activity in this trace (CPU-only or counter-only capture)")
    frac = meta.extra["correlation_resolved_fraction"] = tl.correlation_resolved_fraction()
    if frac is not None and frac < 1.0:
        n = len(tl.kernels)
        meta.notes.append(f"{round((1 - frac) * n)} of {n} kernels ({1 - frac:.1%}) have no "
                          "launching API call in the trace (launched before the profiler "
                          "window?); kept as GPU activity")
    return meta


def _producer(info: TraceInfo) -> str:
    """"PyTorch <version>" where recorded, else the profiler library versions."""
    if info.torch:
        return f"PyTorch {info.torch}"
    versions = ", ".join(f"{k.removesuffix('_version')} {v}" for k, v in info.versions.items())
    return f"Kineto ({versions})" if versions else "Kineto"


def _devices(props: Any, tl: Timeline, versions: dict, notes: list[str]) -> list[Device]:
    """deviceProperties, else the device ids seen in GPU rows (noted)."""
    rocm = any(k.startswith(("hip", "roctracer")) for k in versions) or any(
        str(s).startswith("hip") for s in tl.api_calls["name"].cat.categories)
    guess = "amd" if rocm else "nvidia" if versions or len(tl.api_calls) else None
    devices, guessed = [], []
    listed = [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []
    for i, p in enumerate(listed):
        name, major = p.get("name") or None, p.get("computeMajor")
        name = name if isinstance(name, str) or name is None else str(name)[:200]   # untrusted
        vendor = _vendor(name, p.get("gcnArchName"))
        if vendor is None and guess:
            vendor = guess
            guessed.append(to_int(p.get("id", i)))
        devices.append(Device(
            id=to_int(p.get("id", i)), name=name, vendor=vendor,
            sm_count=opt_int(p.get("numSms")), memory_bytes=opt_int(p.get("totalGlobalMem")),
            compute_capability=f"{major}.{p.get('computeMinor')}" if major is not None else None,
            sm_limits=_sm_limits(p)))
    if guessed:
        notes.append(f"devices {guessed}: vendor {guess} inferred from the trace's "
                     f"{'HIP/ROCm' if rocm else 'CUDA'} records (deviceProperties has no name)")
    if not devices and tl.has_gpu_activity:
        ids = tl.devices_in_use()
        notes.append(f"no deviceProperties: devices {ids} inferred from GPU event ids")
        devices = [Device(id=i, vendor=guess) for i in ids]
    return devices


def _sm_limits(p: dict) -> dict[str, int] | None:
    """Per-SM occupancy limits deviceProperties records (see timeline.occupancy)."""
    warp = opt_int(p.get("warpSize")) or 32
    threads = opt_int(p.get("maxThreadsPerMultiprocessor"))
    out = {"registers": opt_int(p.get("regsPerMultiprocessor")),
           "warps": threads // warp if threads else None,
           "shared_memory": opt_int(p.get("sharedMemPerMultiprocessor"))}
    out = {k: v for k, v in out.items() if v}
    return out or None


def _vendor(name: str | None, gcn_arch: Any) -> str | None:
    n = (name or "").lower()
    if gcn_arch or any(s in n for s in ("amd", "radeon", "instinct")):
        return "amd"
    if any(s in n for s in ("nvidia", "tesla", "geforce", "quadro", "titan", "rtx")):
        return "nvidia"
    return None


def _distributed(path: Path, info: Any, meta: Meta) -> None:
    """rank/world_size from distributedInfo; else a "rank<N>" in the file name (noted)."""
    if isinstance(info, dict):
        meta.rank, meta.world_size = opt_int(info.get("rank")), opt_int(info.get("world_size"))
        return
    m = re.search(r"(?:^|[^a-z])rank[-_]?(\d+)", path.name.lower())
    if m:
        meta.rank = int(m.group(1))
        meta.notes.append(f"rank {meta.rank} inferred from the file name (no distributedInfo)")


def _extra(info: TraceInfo, tl: Timeline, build: Builder, specials: list[dict]) -> dict:
    top = info.top
    extra: dict[str, Any] = {
        "trace_start_ns": tl.span[0] if any(tl.counts().values()) else None,
        "profiler_window_ns": build.window,
        "category_counts": dict(build.cat_counts),
        "versions": dict(info.versions, **({"torch": info.torch} if info.torch else {})),
        "profiler_flags": [k for k in FLAG_KEYS if getattr(top, k)],
        "thread_names": {}, "process_names": {},
    }
    if build.op_inputs:
        extra["op_inputs"] = build.op_inputs
    for key, value in (("trace_name", top.traceName), ("base_time_ns", top.baseTimeNanoseconds),
                       ("display_time_unit", top.displayTimeUnit), ("trace_id", top.trace_id)):
        if value is not None:
            extra[key] = value
    if isinstance(top.distributedInfo, dict):     # not pg_config: one rank list per group
        extra["distributed"] = {k: v for k, v in top.distributedInfo.items()
                                if k in ("backend", "rank", "world_size", "nccl_version")}
    for e in specials:
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        if e.get("ph") == "M" and "name" in args and e.get("name") == "thread_name":
            extra["thread_names"][f"{e.get('pid')}:{e.get('tid')}"] = str(args["name"])
        elif e.get("ph") == "M" and "name" in args and e.get("name") == "process_name":
            extra["process_names"][str(e.get("pid"))] = str(args["name"])
    return extra

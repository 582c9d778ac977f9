"""jax.profiler traces (the TensorBoard profile plugin / XProf `*.trace.json.gz`) -> Timeline.

Layout (XProf's trace-viewer JSON; xprof/tsl sources): Chrome-trace events, ts/dur in µs with
up to picosecond decimals. Lanes are named by metadata: `process_name` gives each pid its
XPlane (`/device:GPU:0`, `/device:TPU:0`, `/host:CPU`), `thread_name` each line. On a GPU
plane the CUPTI lines `Stream #N(...)` hold kernels and `MemcpyH2D`/`MemcpyD2H`/... copies
(args: `correlation_id`, `kernel_details` "regs:.. static_shared:.. grid:x,y,z block:x,y,z",
`memcpy_details` "... size:N ..."), while the derived lines `XLA Modules` / `XLA Ops` / `Steps`
group the same time by jitted module and HLO op: they become GPU-annotation ranges, never a
second copy of the kernels. On a TPU plane (no stream lines) the `XLA Ops` line is the device
work. Host lines hold the CUDA driver calls XLA makes (`cuLaunchKernel`, `cuMemcpy*`,
`cuStreamSynchronize`, with `correlation_id`), which link to the device rows, and the host
annotations (`PjitFunction(f)`, TraceAnnotation names; StepTraceAnnotation carries
`step_num`). XLA runs a jitted step as a CUDA graph where it can (command buffers; seen with
JAX 0.11 on an H200): the host then records `cuGraphLaunch (CudaGraph:N)` and each kernel of
the graph carries `cuda_graph_id`. Such a kernel is marked graph-launched, and the call is
read as `cuGraphLaunch`, so the kernels link to it by correlation_id. Without command buffers
(op-by-op dispatch) the host record of each launch is named after what it launched (the
kernel's name, `MemcpyH2D`) and carries the device's `correlation_id`: it becomes the driver
call XLA makes for it (`cuLaunchKernel`, `cuMemcpyHtoDAsync`, ...), so those kernels link too.
Host records of JAX's dispatch and XLA's runtime (`PjitFunction(f)`, `Class::Method`, `PJRT_*`,
`jit_f:XLA GPU module`, a thunk named after its kernel or HLO op, ...) become ranges of kind
"op", as a framework's ops are in PyTorch traces; the rest, the program's own TraceAnnotations
among them, stay "annotation" (what TL008 judges by name).
"""
from __future__ import annotations

import re
from functools import lru_cache
from itertools import compress
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from ..errors import TraceFormatError
from ..io import gunzip_capped
from ..timeline.model import Device, Meta, Timeline
from .kineto_values import us_to_ns
from .records import Rows, build_timeline, finish_meta

DEVICE_PLANE = re.compile(r"^/device:(GPU|TPU):(\d+)")
API_NAME = re.compile(r"^(cu[A-Z]\w*|cuda[A-Z]\w*|hip[A-Z]\w*)(?: \(.*\))?$")   # "(CudaGraph:2)"
COPY_NAME = re.compile(r"^Memcpy(H2D|D2H|D2D|P2P|HtoD|DtoH|DtoD|PtoP)", re.I)
_COPY_KIND = {"HTOD": "H2D", "DTOH": "D2H", "DTOD": "D2D", "PTOP": "P2P"}
_COPY_CALL = {"H2D": "cuMemcpyHtoD", "D2H": "cuMemcpyDtoH", "D2D": "cuMemcpyDtoD", "P2P": "cuMemcpyPeer"}
DERIVED_LINES = ("XLA Modules", "XLA Ops", "Steps")
#: Host records of JAX's dispatch and XLA's runtime, as JAX 0.11 (XLA GPU, PjRt) names them.
RUNTIME_NAME = re.compile(
    r"::|^PjitFunction\(|^PJRT_|^jit_[\w.-]*:XLA \w+ module$|^command_buffer|^\[\d+\] |"
    r"^(ParseArguments|Wait for \w+ holds|Handle inputs|Handle input event recording|DevicePut|"
    r"Resolve constant globals|Build buffer allocations|AllocateOutputBuffersWithInputReuse|"
    r"ComputeSemaphoreAcquire.*|GetEventForComputeStreamSyncPoint|[HD]2[HD] Dispatch|"
    r"BUFFER_FLUSH|<UNKNOWN>)$")
_KV = re.compile(r"(\w+):([\w,.\-]+)")


class _Args(msgspec.Struct, gc=False):
    """The args read here; the decoder skips all others (XProf writes dozens per event)."""

    name: Any = None                  # metadata events: the process's or the lane's name
    correlation_id: Any = None
    device_id: Any = None
    hlo_op: Any = None
    kernel_details: Any = None
    memcpy_details: Any = None
    cuda_graph_id: Any = None
    step_num: Any = None


_NO_ARGS = _Args()


class _Event(msgspec.Struct, gc=False):
    ph: Any = None
    name: Any = ""
    pid: Any = None
    tid: Any = None
    ts: Any = None                    # µs: int, or decimal text (float_hook) kept exact
    dur: Any = 0
    args: _Args | None = None


_Top = msgspec.defstruct("_Top", [("traceEvents", list[_Event] | None, None)])
_DECODE_TOP = msgspec.json.Decoder(_Top, float_hook=str).decode   # exact µs text


def load_jax(path) -> Timeline:
    path = Path(path)
    try:
        raw = path.read_bytes()
        text = gunzip_capped(raw, path) if raw[:2] == b"\x1f\x8b" else raw   # the gzip limits
        del raw
        events = _decode_events(text)
        del text                          # the events hold what is read: not the file's bytes
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"{path}: not valid JSON (truncated?): {exc}") from None
    if not isinstance(events, list):
        raise TraceFormatError(f"{path}: no traceEvents list: not a jax.profiler trace")
    try:
        return _timeline(events)
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise TraceFormatError(f"{path}: malformed trace event: {type(exc).__name__}: {exc}") from None


def _decode_events(text: bytes):
    """traceEvents as _Event structs with only the fields read (on a 178 MB trace: 1.2 GB of
    dicts with every arg before). A document that does not fit them (an event that is not an
    object, args that are not one) is decoded as plain JSON and its events converted one by
    one: what is not an event is dropped and odd args read as none, as before."""
    try:
        return _DECODE_TOP(text).traceEvents
    except msgspec.ValidationError:
        pass
    data = msgspec.json.Decoder(float_hook=str).decode(text)
    events = data.get("traceEvents") if isinstance(data, dict) else None
    return [_event(e) for e in events if isinstance(e, dict)] if isinstance(events, list) else events


def _event(e: dict) -> _Event:
    args = e.get("args")
    try:
        args = msgspec.convert(args, _Args) if isinstance(args, dict) else _NO_ARGS
    except msgspec.ValidationError:
        args = _NO_ARGS
    return _Event(ph=e.get("ph"), name=e.get("name", ""), pid=e.get("pid"), tid=e.get("tid"),
                  ts=e.get("ts"), dur=e.get("dur", 0), args=args)


def _timeline(events: list) -> Timeline:
    procs, threads = {}, {}
    for e in events:
        a = e.args
        if e.ph == "M" and a is not None:
            if e.name == "process_name":
                procs[e.pid] = str(a.name if a.name is not None else "")
            elif e.name == "thread_name":
                threads[(e.pid, e.tid)] = str(a.name if a.name is not None else "")
    devices = {pid: (m.group(1), int(m.group(2))) for pid, name in procs.items()
               if (m := DEVICE_PLANE.match(name))}
    has_streams = {pid for (pid, _), name in threads.items() if pid in devices and name.startswith("Stream")}
    meta = Meta(format="jax-json", producer="jax.profiler / XProf trace viewer (version not recorded)")
    meta.extra["framework"] = "jax"
    meta.devices = [Device(id=i, name=None, vendor="google" if kind == "TPU" else None)   # model not recorded
                    for kind, i in sorted(set(devices.values()), key=lambda d: d[1])]
    rows = {t: Rows(t) for t in ("kernels", "copies", "memsets", "api_calls", "ranges")}
    device_ops: set[str] = set()       # names and HLO ops of device work: a host thunk's name
    # (pid, tid) -> (lane name, stream, the pid's device or None, pid and tid as ints, what
    # a device lane holds: _device_lane)
    lines: dict = {}
    xs = [e for e in events if e.ph == "X"]
    start, ok = us_to_ns([e.ts for e in xs])     # exact ns, a column at a time
    dur, ok_dur = us_to_ns([e.dur for e in xs])
    ok &= ok_dur
    end = start + np.maximum(dur, 0)
    kernels: list[tuple] = []          # the two large tables, a tuple per row (Rows.extend)
    ranges: list[tuple] = []
    for e, start, end in zip(compress(xs, ok), start[ok].tolist(), end[ok].tolist()):
        pid, tid, name = e.pid, e.tid, str(e.name)
        args = e.args or _NO_ARGS
        lane = lines.get((pid, tid))
        if lane is None:
            line = threads.get((pid, tid), "")
            dev = devices.get(pid)
            lane = lines[(pid, tid)] = (line, _stream_of(line), dev, _int(pid), _int(tid),
                                        dev is not None and _device_lane(line, pid in has_streams))
        if lane[2] is not None:
            device_ops.update((name, str(args.hlo_op)) if args.hlo_op is not None else (name,))
            device = lane[2][1]
            if lane[5] == "ops":
                m = COPY_NAME.match(name)
                if m:
                    _copy(rows["copies"], device, lane[1], name, m, args, start, end)
                elif name.lower().startswith("memset"):
                    rows["memsets"].add(device=device, stream=lane[1], start=start, end=end,
                                        name=name, pid=-1, correlation=_int(args.correlation_id))
                else:           # the launching process is unknown until linked: pid -1
                    kernels.append((start, end, name, device, lane[1], _int(args.correlation_id),
                                    bool(args.cuda_graph_id), _text(args.kernel_details)))
            elif lane[5] == "derived":
                ranges.append((start, end, name, lane[3], lane[4], "gpu_annotation", -1, device))
            continue
        common = dict(start=start, end=end, name=name, pid=lane[3], tid=lane[4])
        if m := API_NAME.match(name):
            rows["api_calls"].add(**{**common, "name": m.group(1)},
                                  api="driver" if name.startswith("cu") and not name.startswith("cuda")
                                  else "runtime", correlation=_int(args.correlation_id))
        elif args.correlation_id is not None and args.device_id is not None:   # a launch, named by what it launched
            rows["api_calls"].add(**{**common, "name": _launch_call(name, args)}, api="driver",
                                  correlation=_int(args.correlation_id))
        elif not name.startswith("$"):               # "$file:line fn": Python tracer frames
            step = _int(args.step_num)                 # StepTraceAnnotation: an iteration
            ranges.append((start, end, name, lane[3], lane[4],
                           "step" if step >= 0 else "annotation", step, -1))
    _add_kernels(rows["kernels"], kernels)
    del kernels
    if ranges:
        cols = dict(zip(("start", "end", "name", "pid", "tid", "kind", "step", "device"),
                        map(list, zip(*ranges))))
        rows["ranges"].extend(len(ranges), stream=[-1] * len(ranges), **cols)
    del ranges
    _mark_runtime_ranges(rows["ranges"], device_ops)
    tl = build_timeline(rows.values(), meta)
    finish_meta(tl, {"cuda": tl.has_gpu_activity, "nvtx": len(tl.ranges)})
    return tl


def _device_lane(line: str, has_streams: bool) -> str | None:
    """What a device plane's line holds: "ops" (kernels, copies, memsets: its stream lines,
    or a TPU's XLA Ops line), "derived" (the XLA Modules / Ops / Steps groupings of that work:
    GPU-annotation ranges) or None (other derived lines: nothing)."""
    if has_streams and line.startswith("Stream") or not has_streams and line == "XLA Ops":
        return "ops"
    return "derived" if line in DERIVED_LINES else None


def _copy(rows: Rows, device: int, stream: int, name: str, m, args: _Args, start: int,
          end: int) -> None:
    details = _details(args.memcpy_details)
    rows.add(kind=_COPY_KIND.get(m.group(1).upper(), m.group(1).upper()),
             bytes=_int(details.get("size", details.get("num_bytes"))),
             src_kind=_mem_kind(details.get("kind_src")), dst_kind=_mem_kind(details.get("kind_dst")),
             device=device, stream=stream, correlation=_int(args.correlation_id), start=start,
             end=end, name=name, pid=-1)


def _add_kernels(rows: Rows, kernels: list[tuple]) -> None:
    """The kernel rows gathered as tuples, a column at a time; the facts of kernel_details
    once per distinct text."""
    if not kernels:
        return
    cols = dict(zip(("start", "end", "name", "device", "stream", "correlation", "graph_launched",
                     "details"), map(list, zip(*kernels))))
    texts = cols.pop("details")
    facts = {t: _kernel_facts(t) for t in dict.fromkeys(texts)}
    for key in next(iter(facts.values())):
        cols[key] = list(map({t: f[key] for t, f in facts.items()}.__getitem__, texts))
    rows.extend(len(kernels), pid=[-1] * len(kernels), **cols)


def _mark_runtime_ranges(ranges: Rows, device_ops: set) -> None:
    """Host annotations that are JAX's or XLA's own records (a thunk bears the name or HLO op
    of its device work) become kind "op"."""
    kinds = ranges.cols["kind"]
    for i, (kind, name) in enumerate(zip(kinds, ranges.cols["name"])):
        if kind == "annotation" and (name in device_ops or RUNTIME_NAME.search(name)):
            kinds[i] = "op"


def _launch_call(name: str, args: _Args) -> str:
    """The driver call behind a host launch record that XProf names after the device work."""
    m = COPY_NAME.match(name)
    if m:
        kind = _COPY_KIND.get(m.group(1).upper(), m.group(1).upper())
        sync = _details(args.memcpy_details).get("async") == "0"
        return _COPY_CALL.get(kind, "cuMemcpy") + ("" if sync else "Async")
    return "cuMemsetD8Async" if name.lower().startswith("memset") else "cuLaunchKernel"


def _mem_kind(text) -> str:
    """CUPTI memory kind names in memcpy_details -> the Timeline's src_kind/dst_kind words."""
    t = str(text or "").lower()
    return next((k for k in ("pageable", "pinned", "device", "managed", "array") if k in t), "unknown")


def _text(value) -> str:
    """A details value as the text it is read as (absent: none)."""
    return value if type(value) is str else "" if value is None else str(value)


def _details(value) -> dict:
    """`key:value ...` of memcpy_details / kernel_details (absent: none; read only: cached)."""
    return _parsed_details(_text(value))


@lru_cache(maxsize=1 << 16)
def _parsed_details(text: str) -> dict:
    """Cached: a trace repeats the same few texts for every launch of a kernel."""
    return dict(_KV.findall(text))


def _kernel_facts(text: str) -> dict:
    """The Kernels columns a kernel_details text gives."""
    k = _parsed_details(text)
    grid, block = _dim3(k.get("grid")), _dim3(k.get("block"))
    return {"registers_per_thread": _int(k.get("regs")), "static_smem": _int(k.get("static_shared")),
            "dynamic_smem": _int(k.get("dynamic_shared")),
            **{f"grid_{a}": v for a, v in zip("xyz", grid)},
            **{f"block_{a}": v for a, v in zip("xyz", block)}}


def _stream_of(line: str) -> int:
    m = re.match(r"Stream #(\d+)", line)
    return int(m.group(1)) if m else -1


def _int(v) -> int:
    if type(v) is int:
        return v
    try:
        return int(str(v)) if v is not None and not isinstance(v, bool) else -1
    except ValueError:
        return -1


def _dim3(text) -> tuple[int, int, int]:
    parts = [_int(x) for x in str(text or "").split(",")]
    return tuple(parts) if len(parts) == 3 else (-1, -1, -1)

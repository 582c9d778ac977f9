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

Reading: a plain file of 1 MiB or more is decoded one byte range at a time (kineto_ranges cuts
it between events), a large gzip one from a plain copy (gzip_staging); each range's events go
to jax_tables.JaxColumns, which keeps a few integer columns of them. Smaller files, and any file
the ranges do not fit, are decoded whole.
"""
from __future__ import annotations

from pathlib import Path

import msgspec

from ..errors import TraceFormatError
from ..io import decompressed
from ..timeline.model import Timeline
from . import kineto_ranges as kr
from .jax_tables import NO_ARGS, Args, Event, JaxColumns

_Top = msgspec.defstruct("_Top", [("traceEvents", list[Event] | None, None)])
_DECODE_TOP = msgspec.json.Decoder(_Top, float_hook=str).decode   # exact µs text
_DECODE_RANGE = msgspec.json.Decoder(list[Event], float_hook=str).decode


def load_jax(path) -> Timeline:
    path = Path(path)
    try:
        got = _in_ranges(path)
        if got is None:
            from .gzip_staging import staged
            with staged(path) as plain:          # large gzip: the same, from a plain copy
                got = _in_ranges(plain) if plain is not None else None
        if got is None:
            got = JaxColumns()
            got.add(_whole(path))
        return got.timeline()
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"{path}: not valid JSON (truncated?): {exc}") from None
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
        raise TraceFormatError(f"{path}: malformed trace event: {type(exc).__name__}: {exc}") from None


def _in_ranges(path: Path) -> JaxColumns | None:
    """The events of a large plain file, a byte range at a time; None leaves the file to
    _whole (small, gzip, not cut between events, or an event the structs do not fit)."""
    try:
        size = path.stat().st_size
        if size < kr.STREAM_MIN:
            return None
        _, ranges = kr.plan(path, size)
        got = JaxColumns()
        for start, end in ranges:
            got.add(_DECODE_RANGE(kr.read_range(path, start, end)))
    except (kr.NotSplittable, msgspec.DecodeError, OSError):    # _whole words the error
        return None
    return got


def _whole(path: Path) -> list[Event]:
    events = _decode_events(decompressed(path.read_bytes(), path))   # the gzip limits
    if not isinstance(events, list):
        raise TraceFormatError(f"{path}: no traceEvents list: not a jax.profiler trace")
    return events


def _decode_events(text: bytes):
    """traceEvents as Event structs with only the fields read (on a 178 MB trace: 1.2 GB of
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


def _event(e: dict) -> Event:
    args = e.get("args")
    try:
        args = msgspec.convert(args, Args) if isinstance(args, dict) else NO_ARGS
    except msgspec.ValidationError:
        args = NO_ARGS
    return Event(ph=e.get("ph"), name=e.get("name", ""), pid=e.get("pid"), tid=e.get("tid"),
                 ts=e.get("ts"), dur=e.get("dur", 0), args=args)

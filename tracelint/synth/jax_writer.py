"""Write a TraceBuilder workload as a jax.profiler trace-viewer JSON (`*.trace.json.gz`), the
layout documented in importers/jax_trace.py: a `/host:CPU` plane with the CUDA driver calls
XLA makes and the host annotations, a `/device:GPU:N` plane with `Stream #N(Compute)` lines
(kernels with `kernel_details`, copies `MemcpyH2D`... with `memcpy_details`) and the derived
`XLA Ops` line, which repeats each kernel's time under its HLO op name as XProf does.

Mapping: runtime calls become driver calls (cudaLaunchKernel -> cuLaunchKernel,
cudaDeviceSynchronize -> cuCtxSynchronize, ...); steps become StepTraceAnnotation events
("train" with `step_num`); ranges become host annotations; PyTorch CPU ops, Python frames,
memsets' host kinds and sync activity records are not written (XProf keeps none of them).
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from ..io import write_atomic

HOST_PID, DEVICE_PID_BASE = 1, 1000
_DRIVER = {"cudaDeviceSynchronize": "cuCtxSynchronize", "cudaMalloc": "cuMemAlloc",
           "cudaFree": "cuMemFree", "cudaLaunchKernel": "cuLaunchKernel"}


def driver_name(api: str) -> str:
    if api in _DRIVER:
        return _DRIVER[api]
    return "cu" + api[4:] if api.startswith("cuda") else api


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def jax_events(b) -> list[dict]:
    b._check_closed()
    dev_pid = DEVICE_PID_BASE + b.device_id
    ev: list[dict] = [
        {"ph": "M", "pid": HOST_PID, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "M", "pid": HOST_PID, "tid": b.tid, "name": "thread_name", "args": {"name": b.process_name}},
        {"ph": "M", "pid": dev_pid, "name": "process_name", "args": {"name": f"/device:GPU:{b.device_id}"}},
        {"ph": "M", "pid": dev_pid, "tid": 1, "name": "thread_name", "args": {"name": "XLA Ops"}}]
    streams = sorted({a.stream for a in b.activities if a.kind in ("kernel", "memcpy")})
    ev += [{"ph": "M", "pid": dev_pid, "tid": 100 + s, "name": "thread_name",
            "args": {"name": f"Stream #{s}(Compute)"}} for s in streams]
    x = lambda pid, tid, name, s, e, args: {  # noqa: E731
        "ph": "X", "pid": pid, "tid": tid, "name": name, "ts": _us(s), "dur": _us(e - s), "args": args}
    step_no = 0
    for e in b.host_events:
        if e.kind == "runtime":
            ev.append(x(HOST_PID, b.tid, driver_name(e.name), e.start, e.end,
                        {"correlation_id": str(e.correlation)}))
        elif e.kind == "step":
            ev.append(x(HOST_PID, b.tid, "train", e.start, e.end, {"step_num": str(step_no)}))
            step_no += 1
        elif e.kind == "range":          # CPU ops are PyTorch's (aten::...): JAX has none
            ev.append(x(HOST_PID, b.tid, e.name, e.start, e.end, {}))
    for a in b.activities:
        if a.kind == "kernel":
            details = (f"regs:{a.registers} static_shared:{a.static_smem} dynamic_shared:{a.dynamic_smem} "
                       f"grid:{','.join(map(str, a.grid))} block:{','.join(map(str, a.block))}")
            ev.append(x(dev_pid, 100 + a.stream, a.name, a.start, a.end,
                        {"correlation_id": str(a.correlation), "kernel_details": details}))
            ev.append(x(dev_pid, 1, f"fusion.{a.seq}", a.start, a.end, {"long_name": a.name}))
        elif a.kind == "memcpy":
            label = {"H2D": "MemcpyH2D", "D2H": "MemcpyD2H", "D2D": "MemcpyD2D", "P2P": "MemcpyP2P"}.get(a.copy_kind)
            if label:
                ev.append(x(dev_pid, 100 + a.stream, label, a.start, a.end,
                            {"correlation_id": str(a.correlation),
                             "memcpy_details": f"kind_src:{a.src_kind} kind_dst:{a.dst_kind} size:{a.bytes} dest:0 async:1"}))
    return ev


def write_jax_trace(b, path) -> Path:
    """The workload as `<host>.trace.json.gz` (gzip by suffix)."""
    path = Path(path)
    text = json.dumps({"displayTimeUnit": "ns", "metadata": {"highres-ticks": True},
                       "traceEvents": jax_events(b)})
    data = gzip.compress(text.encode(), mtime=0) if path.suffix == ".gz" else text.encode()
    write_atomic(path, data)
    return path

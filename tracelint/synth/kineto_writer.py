"""Writing a TraceBuilder as a PyTorch-2.x-style Kineto Chrome trace (plain or gzip JSON).
The format mapping is documented in builder.py."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .vocab import (_CBID, _KINETO_PROP_KEYS, _T, _atomic_write, _dumps_event, _is_driver,
                    _meta)


def write_kineto(b, path: str | os.PathLike, *, gpu_annotations: bool = True,
                 nonstandard_args: bool = False) -> Path:
    """Write a PyTorch-2.x-style Chrome trace (``.json`` or ``.json.gz``, by suffix).

    ``gpu_annotations`` adds ``gpu_user_annotation`` events per stream over the GPU
    work launched inside each step/range, as Kineto does. ``nonstandard_args`` adds
    ``"local memory per thread"`` to kernel args (real Kineto has no such field)."""
    b._check_closed()
    path = Path(path)
    pid, tid, dev = b.pid, b.tid, b.device_id
    events: list[tuple[tuple, dict]] = []  # (sort key, event)

    def add(key, ev):
        events.append((key, ev))

    for e in b.host_events:
        if e.kind == "python":
            ev = {"ph": "X", "cat": "python_function", "name": e.name, "pid": pid,
                  "tid": tid, "ts": _T(e.start), "dur": _T(e.dur),
                  "args": {"Python parent id": e.python_parent, "Python id": e.python_id}}
        elif e.kind == "runtime":
            args = {}
            if e.external_id is not None:
                args["External id"] = e.external_id
            base = e.name
            if base in _CBID:
                args["cbid"] = _CBID[base]
            args["correlation"] = e.correlation
            cat = "cuda_driver" if _is_driver(base) else "cuda_runtime"
            ev = {"ph": "X", "cat": cat, "name": base, "pid": pid, "tid": tid,
                  "ts": _T(e.start), "dur": _T(e.dur), "args": args}
        else:
            cat = "cpu_op" if e.kind == "op" else "user_annotation"
            ev = {"ph": "X", "cat": cat, "name": e.name, "pid": pid, "tid": tid,
                  "ts": _T(e.start), "dur": _T(e.dur),
                  "args": {"External id": e.external_id, "Record function id": 0,
                           **e.args}}
        add((0, e.start, -e.dur, e.seq), ev)

    linked = {e.correlation for e in b.host_events if e.kind == "runtime"}
    for a in b.activities:
        adev = a.device      # a builder may issue work on several GPUs (device_id switched)
        args: dict = {}
        if a.external_id is not None:
            args["External id"] = a.external_id
        if a.kind == "kernel":
            bps, wps, occ = b._occupancy(a)
            args.update({"queued": 0, "device": adev, "context": 1, "stream": a.stream,
                         "correlation": a.correlation,
                         "registers per thread": a.registers,
                         "shared memory": a.static_smem + a.dynamic_smem,
                         "blocks per SM": bps, "warps per SM": wps,
                         "grid": list(a.grid), "block": list(a.block),
                         "est. achieved occupancy %": occ})
            if nonstandard_args:
                args["local memory per thread"] = a.local_mem
            cat, ev_tid = "kernel", a.stream
        elif a.kind in ("memcpy", "memset"):
            args.update({"device": adev, "context": 1, "stream": a.stream,
                         "correlation": a.correlation, "bytes": a.bytes,
                         "memory bandwidth (GB/s)": (a.bytes / a.dur) if a.dur else 0.0})
            cat, ev_tid = ("gpu_memcpy" if a.kind == "memcpy" else "gpu_memset"), a.stream
        else:
            args["cuda_sync_kind"] = a.name
            if a.sync_kind in ("event", "wait_event"):
                args.update({"wait_on_stream": a.wait_stream,
                             "wait_on_cuda_event_record_corr_id": a.event_record_correlation,
                             "wait_on_cuda_event_id": a.event_id})
            args.update({"stream": a.stream, "correlation": a.correlation,
                         "device": adev, "context": 1})
            cat, ev_tid = "cuda_sync", a.stream
        add((1, a.start, -a.dur, a.seq),
            {"ph": "X", "cat": cat, "name": a.name, "pid": adev, "tid": ev_tid,
             "ts": _T(a.start), "dur": _T(a.dur), "args": args})
        if a.correlation in linked and a.api_start is not None:
            add((2, a.api_start, 0, a.seq),
                {"ph": "s", "id": a.correlation, "pid": pid, "tid": tid,
                 "ts": _T(a.api_start), "cat": "ac2g", "name": "ac2g"})
            add((2, a.start, 1, a.seq),
                {"ph": "f", "id": a.correlation, "pid": adev, "tid": ev_tid,
                 "ts": _T(a.start), "cat": "ac2g", "name": "ac2g", "bp": "e"})

    if gpu_annotations:
        rt_by_corr = {e.correlation: e for e in b.host_events if e.kind == "runtime"}
        for e in b.host_events:
            if e.kind not in ("step", "range"):
                continue
            per_stream: dict[int, list[int]] = {}
            for a in b.activities:
                rt = rt_by_corr.get(a.correlation)
                if a.kind == "sync" or rt is None or not e.start <= rt.start <= e.end:
                    continue
                s = per_stream.setdefault(a.stream, [a.start, a.end])
                s[0], s[1] = min(s[0], a.start), max(s[1], a.end)
            for stream, (s0, s1) in sorted(per_stream.items()):
                add((1, s0, -(s1 - s0), e.seq),
                    {"ph": "X", "cat": "gpu_user_annotation", "name": e.name, "pid": dev,
                     "tid": stream, "ts": _T(s0), "dur": _T(s1 - s0),
                     "args": {"External id": e.external_id}})

    from .memory import kineto_events      # [memory] events (synth/memory.py), if any
    memory_events = kineto_events(b)
    for key, ev in memory_events:
        add(key, ev)

    for name, value, ts in b.metrics:
        add((3, ts, 0, 0), {"ph": "C", "cat": "gpu_metric", "name": name, "pid": dev,
                            "tid": 0, "ts": _T(ts), "args": {name: value}})

    t_min, t_max = b._span()
    meta = [
        _meta("process_name", t_min, pid, 0, {"name": b.process_name}),
        _meta("process_labels", t_min, pid, 0, {"labels": "CPU"}),
        _meta("process_sort_index", t_min, pid, 0, {"sort_index": pid}),
        _meta("thread_name", t_min, pid, tid, {"name": f"thread {tid} ({b.process_name})"}),
        _meta("thread_sort_index", t_min, pid, tid, {"sort_index": tid}),
        _meta("process_name", t_min, dev, 0, {"name": b.process_name}),
        _meta("process_labels", t_min, dev, 0, {"labels": f"GPU {dev}"}),
        _meta("process_sort_index", t_min, dev, 0, {"sort_index": 5000000 + dev}),
    ]
    for s in sorted({a.stream for a in b.activities if a.stream >= 0}):
        meta.append(_meta("thread_name", t_min, dev, s, {"name": f"stream {s} "}))
        meta.append(_meta("thread_sort_index", t_min, dev, s, {"sort_index": s}))
    trailer = [
        {"ph": "X", "cat": "Trace", "ts": _T(t_min), "dur": _T(t_max - t_min),
         "pid": "Spans", "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)",
         "args": {"Op count": 0}},
        {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g",
         "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": _T(t_min)},
        {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "",
         "ts": _T(t_max)},
    ]
    ordered = [ev for _, ev in sorted(events, key=lambda kv: kv[0])] + meta + trailer

    head = {
        "schemaVersion": 1,
        "deviceProperties": [_kineto_device_props(b)],
    }
    if b.distributed is not None:
        head["distributedInfo"] = dict(b.distributed)
    head.update({
        "cuda_runtime_version": 12040, "cuda_driver_version": 12040, "cupti_version": 22,
        "with_stack": int(any(e.kind == "python" for e in b.host_events)),
        "record_shapes": 0, "profile_memory": int(bool(memory_events)), "with_flops": 0, "with_modules": 0,
        "trace_id": hashlib.md5(f"{b.pid}:{t_min}:{t_max}".encode()).hexdigest().upper(),
    })
    tail = {"traceName": path.name, "displayTimeUnit": "ms",
            "baseTimeNanoseconds": b.epoch_ns}
    parts = ["{"]
    for k, v in head.items():
        parts.append(f"  {json.dumps(k)}: {json.dumps(v)},")
    parts.append('  "traceEvents": [')
    parts.append(",\n".join("  " + _dumps_event(ev) for ev in ordered))
    parts.append("  ],")
    parts.append(",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in tail.items()))
    parts.append("}")
    text = "\n".join(parts) + "\n"
    _atomic_write(path, text.encode(), gz=path.name.endswith(".gz"))
    return path

def _kineto_device_props(b) -> dict:
    d = {"id": b.device_id, "name": b.device_name}
    d.update({k: b.props[k] for k in _KINETO_PROP_KEYS})
    return d

"""TraceBuilder: one description of a workload, written as a Kineto JSON trace and as an
Nsight Systems SQLite export, with exact integer-nanosecond times in both.

The builder keeps two clocks:

* a **host cursor** (``b.cursor``) for the single CPU thread ``(pid, tid)``; every host-side
  call (runtime API, CPU op, busy time) starts at the cursor and moves it forward;
* a **per-stream free time** (``b.gpu_free(stream)``): device work on a stream starts at
  ``max(api_start + launch_latency_ns, gpu_free(stream))`` and runs back to back.

Host/device rules (all times integer ns on one timeline; the same numbers are written to
both formats):

* ``launch``: the API call occupies ``[t, t + api_dur_ns]``; the kernel starts at
  ``max(t + launch_latency_ns, gpu_free(stream))``.
* ``copy`` / ``memset``: same placement as kernels. The host call *blocks until the copy
  ends* (API end = copy end + ``BLOCKING_RETURN_NS``) when the API is synchronous (no
  ``Async`` in its name) or the host side is pageable memory (pageable "async" copies are
  staged through a bounce buffer and return when done). Otherwise it lasts ``api_dur_ns``.
* ``sync``: the sync activity starts ``SYNC_ENTRY_NS`` after the call; the call returns
  ``SYNC_EXIT_NS`` after the work it waits on has drained (stream: that stream; device: all
  streams; event: the stream the event was recorded on), and lasts at least ``api_dur_ns``.
  ``cudaEventSynchronize`` and ``cudaStreamWaitEvent`` first emit the ``cudaEventRecord``
  they wait on. ``cudaStreamWaitEvent`` does not block the host; it makes ``stream`` wait for
  work queued so far on ``wait_stream``.

The format mapping (builder -> Kineto | nsys) is in vocab.py, beside the names it uses.

Kineto ``ts``/``dur`` are microseconds written with exactly three fractional digits, so
``Decimal(ts) * 1000`` is the exact integer ns. Kineto has no local-memory field; spills
(``local_mem``) appear only in nsys unless ``write_kineto(..., nonstandard_args=True)``.

Correlation ids are per process and increase from ``correlation_base``; a kernel added with
:meth:`TraceBuilder.kernel` has a correlation id but no launching call (a trace cut by the
profiler window).
"""
from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path
from typing import Iterator, Mapping

from .vocab import (BLOCKING_RETURN_NS, DEVICE_PRESETS, EVENT_RECORD_NS, GpuActivity, HostEvent,
                    SYNC_ENTRY_NS, SYNC_EXIT_NS, _COMMON_PROPS, _COPY_ALIASES, _COPY_KINDS,
                    _MEM_KINDS, _SYNC_APIS, _SYNC_TYPES, _dim3, _ns, short_kernel_name)

class TraceBuilder:
    """Build one synthetic GPU trace and write it as Kineto JSON and as nsys SQLite.

    Parameters
    ----------
    device_name, sm_count:
        GPU model; known names (:data:`DEVICE_PRESETS`) fill the other properties, unknown
        names get H100-like limits. ``sm_count`` overrides the preset's SM count.
    pid, tid:
        The host process and thread (``tid`` defaults to ``pid``, the main thread).
    device_id:
        The CUDA device all work runs on.
    start_ns:
        Initial host cursor (ns since session start; nsys-style session time).
    launch_latency_ns:
        Earliest gap between a launch call's start and its GPU work.
    correlation_base:
        First correlation id (set above 2**32 to exercise wide-id handling).
    epoch_ns:
        UTC epoch of session time 0: nsys ``utcEpochNs`` and Kineto ``baseTimeNanoseconds``.
    process_name:
        Process / main thread name (PROCESSES, ThreadNames, Kineto process_name).
    device_props:
        Overrides for any device property (Kineto or TARGET_INFO_GPU key).
    sync_types:
        nsys ``syncType`` numbering: ``"legacy"`` (pre-2025 exporters, default, matches the
        emulated 2024.5 export) or ``"cupti"`` (2025.x+).
    """

    def __init__(self, device_name: str = "NVIDIA H100 80GB HBM3", sm_count: int | None = None,
                 pid: int = 1000, tid: int | None = None, *, device_id: int = 0,
                 start_ns: int = 1_000_000_000, launch_latency_ns: int = 4_000,
                 correlation_base: int = 1, epoch_ns: int = 1_735_689_600_000_000_000,
                 process_name: str = "python3", device_props: Mapping | None = None,
                 sync_types: str = "legacy") -> None:
        if not 0 < pid < 1 << 24 or not 0 < (pid if tid is None else tid) < 1 << 24:
            raise ValueError("pid and tid must fit in 24 bits (nsys globalTid packing)")
        if sync_types not in _SYNC_TYPES:
            raise ValueError(f"sync_types must be one of {sorted(_SYNC_TYPES)}")
        self.device_name = device_name
        self.pid = pid
        self.tid = pid if tid is None else tid
        self.device_id = device_id
        self.launch_latency_ns = _ns(launch_latency_ns, "launch_latency_ns")
        self.epoch_ns = epoch_ns
        self.process_name = process_name
        self.sync_types = sync_types
        props = dict(_COMMON_PROPS)
        props.update(DEVICE_PRESETS.get(device_name, DEVICE_PRESETS["NVIDIA H100 80GB HBM3"]))
        if device_name not in DEVICE_PRESETS:
            props.update(chipName="", busLocation="0000:00:00.0")
        if sm_count is not None:
            props["numSms"] = int(sm_count)
        props.update(device_props or {})
        self.props = props
        self.distributed: dict | None = None

        self._cursor = _ns(start_ns, "start_ns")
        self._free: dict[int, int] = {}
        self._corr = int(correlation_base)
        self._ext = 1
        self._py = 1
        self._event_id = 1
        self._seq = 0
        self._stack: list[HostEvent] = []
        self.host_events: list[HostEvent] = []
        self.activities: list[GpuActivity] = []
        self.metrics: list[tuple[str, float, int]] = []

    # ---------------------------------------------------------------- clocks and ids

    @property
    def cursor(self) -> int:
        """The host thread's current time (ns)."""
        return self._cursor

    @cursor.setter
    def cursor(self, ns: int) -> None:
        self.set_cursor(ns)

    def set_cursor(self, ns: int) -> None:
        """Move the host cursor to ``ns`` (forward only: the thread's events stay ordered)."""
        ns = _ns(ns, "cursor")
        if ns < self._cursor:
            raise ValueError(f"cursor can only move forward ({ns} < {self._cursor})")
        self._cursor = ns

    def advance(self, ns: int) -> None:
        """Host time passing with no recorded event (Python work outside any op)."""
        self._cursor += _ns(ns, "advance")

    def gpu_free(self, stream: int = 7) -> int:
        """Time at which ``stream`` has finished all work queued so far (0 if never used)."""
        return self._free.get(stream, 0)

    def rank(self, rank: int, world_size: int, backend: str = "nccl") -> None:
        """Record the distributed rank (Kineto ``distributedInfo``; nsys: RANK / WORLD_SIZE /
        LOCAL_RANK environment rows in META_DATA_CAPTURE, as torchrun sets them)."""
        self.distributed = {"backend": backend, "rank": int(rank), "world_size": int(world_size)}

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _next_corr(self) -> int:
        c = self._corr
        self._corr += 1
        return c

    def _enclosing_external_id(self) -> int | None:
        for ev in reversed(self._stack):
            if ev.external_id is not None:
                return ev.external_id
        return None

    # ---------------------------------------------------------------- host ranges

    @contextlib.contextmanager
    def _open(self, ev: HostEvent) -> Iterator[HostEvent]:
        ev.seq = self._next_seq()
        self.host_events.append(ev)
        self._stack.append(ev)
        try:
            yield ev
        finally:
            popped = self._stack.pop()
            assert popped is ev, "host ranges must nest"
            ev.end = self._cursor

    def step(self, n: int):
        """Context manager: a ``ProfilerStep#n`` range around what is added inside."""
        return self.range(f"ProfilerStep#{int(n)}", _kind="step")

    def range(self, name: str, *, _kind: str = "range"):
        """Context manager: a user annotation (``record_function``) / NVTX push-pop range."""
        ev = HostEvent(_kind, str(name), self._cursor, external_id=self._ext)
        self._ext += 1
        return self._open(ev)

    def python(self, file: str, line: int, func: str):
        """Context manager: a Python frame ``file(line): func`` (Kineto only)."""
        parent = next((e.python_id for e in reversed(self._stack) if e.kind == "python"), None)
        ev = HostEvent("python", f"{file}({int(line)}): {func}", self._cursor,
                       python_id=self._py, python_parent=parent)
        self._py += 1
        return self._open(ev)

    def op(self, name: str, args: Mapping | None = None):
        """Context manager: a CPU op (``cpu_op``, e.g. ``aten::linear``) around the calls
        added inside; runtime calls inside carry its External id."""
        ev = HostEvent("op", str(name), self._cursor, external_id=self._ext,
                       args=dict(args or {}))
        self._ext += 1
        return self._open(ev)

    @contextlib.contextmanager
    def _maybe_op(self, op: str | None):
        if op is None:
            yield
        else:
            with self.op(op):
                yield

    def cpu(self, dur_ns: int, name: str | None = None, args: Mapping | None = None) -> None:
        """Host busy time of ``dur_ns``: a leaf ``cpu_op`` if ``name`` is given (nothing in
        nsys), otherwise just advances the cursor."""
        dur_ns = _ns(dur_ns, "dur_ns")
        if name is not None:
            with self.op(name, args):
                self._cursor += dur_ns
        else:
            self._cursor += dur_ns

    # ---------------------------------------------------------------- runtime calls

    def _runtime(self, api: str, start: int, end: int, corr: int) -> HostEvent:
        ev = HostEvent("runtime", api, start, end, external_id=self._enclosing_external_id(),
                       correlation=corr, seq=self._next_seq())
        self.host_events.append(ev)
        return ev

    def api(self, name: str, dur_ns: int, *, gap_after_ns: int = 0,
            op: str | None = None) -> HostEvent:
        """Any other CUDA runtime (``cuda*``) or driver (``cu*``) call without GPU work,
        e.g. ``cudaMalloc``, ``cudaFree``. Returns the host event."""
        dur_ns = _ns(dur_ns, "dur_ns")
        with self._maybe_op(op):
            t0 = self._cursor
            ev = self._runtime(name, t0, t0 + dur_ns, self._next_corr())
            self._cursor = t0 + dur_ns
        self._cursor += _ns(gap_after_ns, "gap_after_ns")
        return ev

    def _issue(self, api: str, stream: int, dur_ns: int, api_dur_ns: int, blocking: bool):
        """Host call at the cursor plus its device work on ``stream`` (copies, memsets): a
        blocking call returns after the work ends. Returns (t0, corr, start, end, runtime)."""
        t0 = self._cursor
        corr = self._next_corr()
        start = self._place(stream, t0, dur_ns)
        end = t0 + api_dur_ns
        if blocking:
            end = max(end, start + dur_ns + BLOCKING_RETURN_NS)
        return t0, corr, start, end, self._runtime(api, t0, end, corr)

    def _place(self, stream: int, t0: int, dur: int, start_ns: int | None = None) -> int:
        start = max(t0 + self.launch_latency_ns, self.gpu_free(stream))
        if start_ns is not None:
            start = max(start, _ns(start_ns, "start_ns"))
        self._free[stream] = start + dur
        return start

    def _add_activity(self, act: GpuActivity) -> GpuActivity:
        act.seq = self._next_seq()
        self.activities.append(act)
        return act

    def launch(self, name: str, dur_ns: int, *, api: str = "cudaLaunchKernel",
               api_dur_ns: int = 5_000, stream: int = 7, gap_after_ns: int = 0,
               grid=(1, 1, 1), block=(128, 1, 1), registers: int = 32, local_mem: int = 0,
               static_smem: int = 0, dynamic_smem: int = 0, short_name: str | None = None,
               op: str | None = None) -> GpuActivity:
        """Launch a kernel: the host call at the cursor (which moves to its end, then by
        ``gap_after_ns``) and the kernel at ``max(call start + launch latency,
        gpu_free(stream))``. ``local_mem`` is local memory per thread in bytes (spills);
        ``op`` wraps the call in a CPU op of that name. Returns the kernel."""
        dur_ns, api_dur_ns = _ns(dur_ns, "dur_ns"), _ns(api_dur_ns, "api_dur_ns")
        with self._maybe_op(op):
            t0 = self._cursor
            corr = self._next_corr()
            start = self._place(stream, t0, dur_ns)
            rt = self._runtime(api, t0, t0 + api_dur_ns, corr)
            act = self._add_activity(GpuActivity(
                "kernel", name, start, start + dur_ns, stream, self.device_id, corr,
                rt.external_id, api, t0, t0 + api_dur_ns,
                short_name=short_name or short_kernel_name(name), grid=_dim3(grid, "grid"),
                block=_dim3(block, "block"), registers=int(registers),
                static_smem=int(static_smem), dynamic_smem=int(dynamic_smem),
                local_mem=int(local_mem)))
            self._cursor = t0 + api_dur_ns
        self._cursor += _ns(gap_after_ns, "gap_after_ns")
        return act

    def kernel(self, name: str, dur_ns: int, *, stream: int = 7, start_ns: int | None = None,
               correlation: int | None = None, grid=(1, 1, 1), block=(128, 1, 1),
               registers: int = 32, local_mem: int = 0, static_smem: int = 0,
               dynamic_smem: int = 0, short_name: str | None = None) -> GpuActivity:
        """A kernel placed directly on the GPU timeline, with no launching call of its own.

        Without ``correlation``: a fresh id that no call carries, i.e. a kernel launched
        before the profiler window opened (cut trace). With ``correlation``: the id of an
        existing call, e.g. further kernels of one ``cudaGraphLaunch``; the kernel then
        shares that call's External id. Starts at ``start_ns`` (default
        ``gpu_free(stream)``); no flow events either way."""
        dur_ns = _ns(dur_ns, "dur_ns")
        start = self.gpu_free(stream) if start_ns is None else _ns(start_ns, "start_ns")
        self._free[stream] = max(self.gpu_free(stream), start + dur_ns)
        corr = self._next_corr() if correlation is None else int(correlation)
        ext = next((e.external_id for e in self.host_events
                    if e.kind == "runtime" and e.correlation == corr), None)
        return self._add_activity(GpuActivity(
            "kernel", name, start, start + dur_ns, stream, self.device_id, corr, ext,
            short_name=short_name or short_kernel_name(name), grid=_dim3(grid, "grid"),
            block=_dim3(block, "block"), registers=int(registers),
            static_smem=int(static_smem), dynamic_smem=int(dynamic_smem),
            local_mem=int(local_mem)))

    def copy(self, kind: str = "H2D", bytes: int = 1 << 20, dur_ns: int = 100_000, *,
             src_kind: str | None = None, dst_kind: str | None = None,
             api: str = "cudaMemcpyAsync", api_dur_ns: int = 4_000, stream: int = 7,
             blocking: bool | None = None, gap_after_ns: int = 0,
             op: str | None = None) -> GpuActivity:
        """A memory copy. ``kind``: H2D, D2H, D2D, H2H, P2P. ``src_kind``/``dst_kind``:
        pageable, pinned, device, array, managed (defaults: host side pageable, device side
        device). ``blocking`` defaults to True for synchronous APIs and pageable host
        memory (see module docstring). Returns the copy."""
        kind = _COPY_ALIASES.get(kind, kind)
        if kind not in _COPY_KINDS:
            raise ValueError(f"copy kind must be one of {sorted(_COPY_KINDS)}, got {kind!r}")
        _, _, dsrc, ddst = _COPY_KINDS[kind]
        src_kind, dst_kind = src_kind or dsrc, dst_kind or ddst
        for k in (src_kind, dst_kind):
            if k not in _MEM_KINDS:
                raise ValueError(f"memory kind must be one of {sorted(_MEM_KINDS)}, got {k!r}")
        if blocking is None:
            blocking = "Async" not in api or "pageable" in (src_kind, dst_kind)
        dur_ns, api_dur_ns = _ns(dur_ns, "dur_ns"), _ns(api_dur_ns, "api_dur_ns")
        with self._maybe_op(op):
            t0, corr, start, end, rt = self._issue(api, stream, dur_ns, api_dur_ns, blocking)
            label = _COPY_KINDS[kind][0]
            name = f"Memcpy {label} ({_MEM_KINDS[src_kind][0]} -> {_MEM_KINDS[dst_kind][0]})"
            act = self._add_activity(GpuActivity(
                "memcpy", name, start, start + dur_ns, stream, self.device_id, corr,
                rt.external_id, api, t0, end, bytes=_ns(bytes, "bytes"), copy_kind=kind,
                src_kind=src_kind, dst_kind=dst_kind))
            self._cursor = end
        self._cursor += _ns(gap_after_ns, "gap_after_ns")
        return act

    def memset(self, bytes: int, dur_ns: int, *, api: str = "cudaMemsetAsync",
               api_dur_ns: int = 3_000, stream: int = 7, value: int = 0,
               mem_kind: str = "device", blocking: bool | None = None, gap_after_ns: int = 0,
               op: str | None = None) -> GpuActivity:
        """A memset on ``stream`` (blocking by default only for the synchronous API)."""
        if mem_kind not in _MEM_KINDS:
            raise ValueError(f"memory kind must be one of {sorted(_MEM_KINDS)}")
        if blocking is None:
            blocking = "Async" not in api
        dur_ns, api_dur_ns = _ns(dur_ns, "dur_ns"), _ns(api_dur_ns, "api_dur_ns")
        with self._maybe_op(op):
            t0, corr, start, end, rt = self._issue(api, stream, dur_ns, api_dur_ns, blocking)
            act = self._add_activity(GpuActivity(
                "memset", f"Memset ({_MEM_KINDS[mem_kind][0]})", start, start + dur_ns,
                stream, self.device_id, corr, rt.external_id, api, t0, end,
                bytes=_ns(bytes, "bytes"), value=int(value), dst_kind=mem_kind))
            self._cursor = end
        self._cursor += _ns(gap_after_ns, "gap_after_ns")
        return act

    def sync(self, api: str = "cudaStreamSynchronize", *, stream: int = 7,
             wait_stream: int | None = None, api_dur_ns: int | None = None,
             gap_after_ns: int = 0, op: str | None = None) -> GpuActivity:
        """A synchronization call and its sync activity.

        * ``cudaStreamSynchronize``: waits for ``stream``;
        * ``cudaDeviceSynchronize``: waits for every stream;
        * ``cudaEventSynchronize``: records an event on ``stream`` (a ``cudaEventRecord``
          call), then waits for it;
        * ``cudaStreamWaitEvent``: records an event on ``wait_stream``, then makes ``stream``
          wait for it on the GPU; the host does not block.

        ``api_dur_ns`` is the minimum call duration (default 2 us; 3 us for stream wait).
        Returns the sync activity."""
        if api not in _SYNC_APIS:
            raise ValueError(f"sync api must be one of {sorted(_SYNC_APIS)}, got {api!r}")
        kind, kname = _SYNC_APIS[api]
        if kind == "wait_event" and wait_stream is None:
            raise ValueError("cudaStreamWaitEvent needs wait_stream (the stream to wait for)")
        min_dur = _ns(api_dur_ns if api_dur_ns is not None else
                      (3_000 if kind == "wait_event" else 2_000), "api_dur_ns")
        with self._maybe_op(op):
            event_id = record_corr = None
            if kind in ("event", "wait_event"):
                rec_stream = stream if kind == "event" else wait_stream
                record_corr = self._next_corr()
                t = self._cursor
                self._runtime("cudaEventRecord", t, t + EVENT_RECORD_NS, record_corr)
                self._cursor = t + EVENT_RECORD_NS
                event_id = self._event_id
                self._event_id += 1
                drain = self.gpu_free(rec_stream)
            elif kind == "stream":
                drain = self.gpu_free(stream)
            else:
                drain = max(self._free.values(), default=0)
            t0 = self._cursor
            corr = self._next_corr()
            act_start = t0 + SYNC_ENTRY_NS
            if kind == "wait_event":
                act_end = max(act_start, t0 + min_dur - SYNC_EXIT_NS)
                self._free[stream] = max(self.gpu_free(stream), drain)
            else:
                act_end = max(act_start, drain, t0 + min_dur - SYNC_EXIT_NS)
            end = act_end + SYNC_EXIT_NS
            rt = self._runtime(api, t0, end, corr)
            act_stream = stream if kind in ("stream", "wait_event") else -1
            act = self._add_activity(GpuActivity(
                "sync", kname, act_start, act_end, act_stream, self.device_id, corr,
                rt.external_id, api, t0, end, sync_kind=kind, event_id=event_id,
                wait_stream={"event": stream, "wait_event": wait_stream}.get(kind),
                event_record_correlation=record_corr))
            self._cursor = end
        self._cursor += _ns(gap_after_ns, "gap_after_ns")
        return act

    # ---------------------------------------------------------------- metrics

    def metric(self, name: str, value: float, ts: int) -> None:
        """One GPU metric sample (e.g. ``"SMs Active"``, percent) at ``ts`` ns."""
        self.metrics.append((str(name), float(value), _ns(ts, "ts")))

    def metrics_over(self, window: tuple[int, int], values: Mapping[str, float],
                     period_ns: int = 100_000) -> None:
        """Constant metric values sampled every ``period_ns`` (nsys default 10 kHz) over
        ``window = (start_ns, end_ns)``, end exclusive."""
        start, end = _ns(window[0], "window start"), _ns(window[1], "window end")
        period_ns = _ns(period_ns, "period_ns")
        if period_ns == 0:
            raise ValueError("period_ns must be > 0")
        for t in range(start, end, period_ns):
            for name, v in values.items():
                self.metric(name, v, t)

    # ---------------------------------------------------------------- summaries

    def _check_closed(self) -> None:
        if self._stack:
            raise RuntimeError(f"unclosed range(s): {[e.name for e in self._stack]}")

    def counts(self) -> dict[str, int]:
        """Number of records per kind (host event kinds and GPU activity kinds)."""
        out: dict[str, int] = {}
        for e in self.host_events:
            out[e.kind] = out.get(e.kind, 0) + 1
        for a in self.activities:
            out[a.kind] = out.get(a.kind, 0) + 1
        if self.metrics:
            out["metric"] = len(self.metrics)
        return out

    def _span(self) -> tuple[int, int]:
        starts = [e.start for e in self.host_events] + [a.start for a in self.activities]
        ends = [e.end for e in self.host_events] + [a.end for a in self.activities]
        starts += [m[2] for m in self.metrics]
        ends += [m[2] for m in self.metrics]
        if not starts:
            return self._cursor, self._cursor
        return min(starts), max(ends)

    def _occupancy(self, a: GpuActivity) -> tuple[float, float, int]:
        """(blocks per SM, warps per SM, est. achieved occupancy %) like Kineto reports."""
        p = self.props
        blocks = a.grid[0] * a.grid[1] * a.grid[2]
        threads = a.block[0] * a.block[1] * a.block[2]
        warps = math.ceil(threads / p["warpSize"])
        sms = max(1, p["numSms"])
        max_warps = p["maxThreadsPerMultiprocessor"] // p["warpSize"]
        limits = [p["maxBlocksPerSm"], max_warps // max(1, warps)]
        if a.registers:
            limits.append(p["regsPerMultiprocessor"] // max(1, a.registers * warps * 32))
        smem = a.static_smem + a.dynamic_smem
        if smem:
            limits.append(p["sharedMemPerMultiprocessor"] // smem)
        active_blocks = max(0, min(limits))
        theoretical = active_blocks * warps / max_warps
        achieved = min(theoretical, blocks * warps / sms / max_warps)
        return round(blocks / sms, 6), round(blocks * warps / sms, 6), int(100 * achieved)

    # ---------------------------------------------------------------- writers

    def write_kineto(self, path: str | os.PathLike, *, gpu_annotations: bool = True,
                     nonstandard_args: bool = False) -> Path:
        """Write a PyTorch-2.x-style Chrome trace (``.json`` or ``.json.gz``, by suffix);
        see kineto_writer.write_kineto."""
        from .kineto_writer import write_kineto
        return write_kineto(self, path, gpu_annotations=gpu_annotations,
                            nonstandard_args=nonstandard_args)

    def write_nsys_sqlite(self, path: str | os.PathLike, *, nvtx_ops: bool = False,
                          lazy: bool = True) -> Path:
        """Write an nsys-2024.5-shaped SQLite export; see nsys_writer.write_nsys_sqlite."""
        from .nsys_writer import write_nsys_sqlite
        return write_nsys_sqlite(self, path, nvtx_ops=nvtx_ops, lazy=lazy)

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

Format mapping (builder -> Kineto, PyTorch 2.x Chrome trace | nsys SQLite, 2024.5 schema):

* step / range -> ``user_annotation`` X event, plus per-stream ``gpu_user_annotation`` over
  the GPU work launched inside | ``NVTX_EVENTS`` push/pop range (eventType 59, inline
  ``text``, domainId 0).
* python -> ``python_function`` ("file(line): func") | nothing (nsys has no Python frames).
* op / cpu(name) -> ``cpu_op`` | nothing; with ``nvtx_ops=True`` an NVTX range
  "name, op_id = N" as ``torch.autograd.profiler.emit_nvtx`` writes.
* runtime call -> ``cuda_runtime`` (``cuda_driver`` for ``cu*``), with an ac2g flow ``s``
  when it has GPU work | ``CUPTI_ACTIVITY_KIND_RUNTIME`` (eventClass 0, driver 1; runtime
  names with version suffix, e.g. ``cudaLaunchKernel_v7000``).
* kernel / copy / memset -> ``kernel`` / ``gpu_memcpy`` / ``gpu_memset`` with ac2g ``f`` |
  ``CUPTI_ACTIVITY_KIND_KERNEL`` / ``_MEMCPY`` / ``_MEMSET``.
* sync -> ``cuda_sync`` ("Stream Sync", "Context Sync", "Event Sync", "Stream Wait Event") |
  ``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION``.
* metric -> counter event ``{"ph": "C", "cat": "gpu_metric", "pid": device, "tid": 0,
  "args": {name: value}}`` (Kineto has no GPU-metric sampling: our own documented choice) |
  ``GPU_METRICS`` + ``TARGET_INFO_GPU_METRICS`` (value stored as INTEGER, rounded).

Kineto ``ts``/``dur`` are microseconds written with exactly three fractional digits, so
``Decimal(ts) * 1000`` is the exact integer ns. Kineto has no local-memory field; spills
(``local_mem``) appear only in nsys unless ``write_kineto(..., nonstandard_args=True)``.

Correlation ids are per process and increase from ``correlation_base``; a kernel added with
:meth:`TraceBuilder.kernel` has a correlation id but no launching call (a trace cut by the
profiler window).
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import math
import os
import re
import sqlite3
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Mapping

from . import nsys_ddl

__all__ = ["TraceBuilder", "GpuActivity", "HostEvent", "DEVICE_PRESETS", "nsys_api_name"]

#: Sync activity starts this long after the sync API call begins.
SYNC_ENTRY_NS = 500
#: A blocking sync call returns this long after the awaited GPU work drains.
SYNC_EXIT_NS = 500
#: A blocking copy/memset call returns this long after the device operation ends.
BLOCKING_RETURN_NS = 1_000
#: Duration of the cudaEventRecord emitted before event syncs / stream waits.
EVENT_RECORD_NS = 2_000

INVALID_ID = 4294967295  # CUPTI's "invalid" stream/event id, as stored by nsys

# --------------------------------------------------------------------------------------
# API names

# Version suffixes of CUDA runtime entry points as nsys stores them in StringIds.
_RUNTIME_SUFFIX = {
    "cudaLaunchKernel": "_v7000",
    "cudaLaunchKernelExC": "_v11060",
    "cudaLaunchCooperativeKernel": "_v9000",
    "cudaGraphLaunch": "_v10000",
    "cudaStreamIsCapturing": "_v10000",
    "cudaEventRecordWithFlags": "_v11010",
    "cudaMallocAsync": "_v11020",
    "cudaFreeAsync": "_v11020",
}
# CUPTI callback ids seen in real Kineto traces (args.cbid); unknown names get no cbid.
_CBID = {
    "cudaMalloc": 20, "cudaFree": 22, "cudaHostAlloc": 27, "cudaMemcpy": 31,
    "cudaMemcpyAsync": 41, "cudaMemsetAsync": 51, "cudaStreamSynchronize": 131,
    "cudaEventRecord": 135, "cudaEventSynchronize": 137, "cudaStreamWaitEvent": 147,
    "cudaDeviceSynchronize": 165, "cudaLaunchKernel": 211, "cudaStreamIsCapturing": 317,
    "cuLaunchKernel": 307,
}


def _is_driver(api: str) -> bool:
    return api.startswith("cu") and not api.startswith("cuda")


def nsys_api_name(api: str) -> str:
    """The StringIds spelling of an API: runtime calls get a version suffix
    (``cudaLaunchKernel`` -> ``cudaLaunchKernel_v7000``, default ``_v3020``); driver calls
    (``cu*``) and names that already end in ``_v<digits>`` are kept as given."""
    if _is_driver(api) or re.search(r"_v\d+$", api):
        return api
    return api + _RUNTIME_SUFFIX.get(api, "_v3020")


# --------------------------------------------------------------------------------------
# Devices

#: Properties per GPU model: Kineto ``deviceProperties`` keys plus nsys TARGET_INFO_GPU ones.
#: Values are from real traces (H100: tracelens Kineto trace; A100: nsys 2024.5 export).
DEVICE_PRESETS: dict[str, dict] = {
    "NVIDIA H100 80GB HBM3": dict(
        totalGlobalMem=85018279936, computeMajor=9, computeMinor=0, numSms=132,
        sharedMemPerBlockOptin=232448, sharedMemPerMultiprocessor=233472,
        l2CacheSize=52428800, memoryBandwidth=3352320000000, clockRate=1980000000,
        chipName="GH100", asyncEngines=3, localMemoryReserved=250871808,
        busLocation="0000:18:00.0"),
    "NVIDIA A100-SXM4-80GB": dict(
        totalGlobalMem=84990623744, computeMajor=8, computeMinor=0, numSms=108,
        sharedMemPerBlockOptin=166912, sharedMemPerMultiprocessor=167936,
        l2CacheSize=41943040, memoryBandwidth=2039040000000, clockRate=1410000000,
        chipName="GA100", asyncEngines=5, localMemoryReserved=127401984,
        busLocation="0000:c1:00.0"),
}
_COMMON_PROPS = dict(maxThreadsPerBlock=1024, maxThreadsPerMultiprocessor=2048,
                     regsPerBlock=65536, regsPerMultiprocessor=65536, warpSize=32,
                     sharedMemPerBlock=49152, maxBlocksPerSm=32)
_KINETO_PROP_KEYS = ("totalGlobalMem", "computeMajor", "computeMinor", "maxThreadsPerBlock",
                     "maxThreadsPerMultiprocessor", "regsPerBlock", "warpSize",
                     "sharedMemPerBlock", "numSms", "regsPerMultiprocessor",
                     "sharedMemPerBlockOptin", "sharedMemPerMultiprocessor")
_SMEM_CARVEOUTS = (32768, 65536, 102400, 135168, 167936, 200704, 233472)

# --------------------------------------------------------------------------------------
# Copies

_COPY_KINDS = {  # builder kind -> (Kineto label, nsys ENUM_CUDA_MEMCPY_OPER id, default src, dst)
    "H2D": ("HtoD", 1, "pageable", "device"),
    "D2H": ("DtoH", 2, "device", "pageable"),
    "D2D": ("DtoD", 8, "device", "device"),
    "H2H": ("HtoH", 9, "pageable", "pageable"),
    "P2P": ("PtoP", 10, "device", "device"),
}
_COPY_ALIASES = {"HtoD": "H2D", "DtoH": "D2H", "DtoD": "D2D", "HtoH": "H2H", "PtoP": "P2P"}
_MEM_KINDS = {  # builder name -> (Kineto label, nsys ENUM_CUDA_MEM_KIND id)
    "pageable": ("Pageable", 0), "pinned": ("Pinned", 1), "device": ("Device", 2),
    "array": ("Array", 3), "managed": ("Managed", 4), "unknown": ("Unknown", 7),
}

# --------------------------------------------------------------------------------------
# Syncs

_SYNC_APIS = {  # API -> (kind, Kineto name)
    "cudaStreamSynchronize": ("stream", "Stream Sync"),
    "cudaDeviceSynchronize": ("context", "Context Sync"),
    "cudaEventSynchronize": ("event", "Event Sync"),
    "cudaStreamWaitEvent": ("wait_event", "Stream Wait Event"),
}
#: nsys syncType per kind. "legacy": what exporters before 2025 stored (context 1, event 2,
#: stream 3 observed in real files; 4 for stream-wait-event is unobserved, a guess).
#: "cupti": the ENUM_CUPTI_SYNC_TYPE labels, as 2025.x+ exporters store them.
_SYNC_TYPES = {
    "legacy": {"context": 1, "event": 2, "stream": 3, "wait_event": 4},
    "cupti": {"event": 1, "wait_event": 2, "stream": 3, "context": 4},
}


# --------------------------------------------------------------------------------------
# Records


@dataclass
class HostEvent:
    """A CPU-side interval on the builder's thread. ``kind`` is one of ``step``, ``range``,
    ``python``, ``op``, ``runtime``. ``end`` is None while a context is still open."""

    kind: str
    name: str
    start: int
    end: int | None = None
    external_id: int | None = None
    correlation: int | None = None  # runtime calls only
    python_id: int | None = None
    python_parent: int | None = None
    args: dict = field(default_factory=dict)
    seq: int = 0

    @property
    def dur(self) -> int:
        return (self.end if self.end is not None else self.start) - self.start


@dataclass
class GpuActivity:
    """Device-side work (``kind``: ``kernel``, ``memcpy``, ``memset``, ``sync``) with the
    exact ns times written to both formats. ``api_start``/``api_end`` are the launching
    call's times, None for a kernel without a launching call."""

    kind: str
    name: str
    start: int
    end: int
    stream: int
    device: int
    correlation: int
    external_id: int | None = None
    api: str | None = None
    api_start: int | None = None
    api_end: int | None = None
    # kernel
    short_name: str | None = None
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    registers: int = 0
    static_smem: int = 0
    dynamic_smem: int = 0
    local_mem: int = 0
    # memcpy / memset
    bytes: int = 0
    copy_kind: str | None = None
    src_kind: str | None = None
    dst_kind: str | None = None
    value: int = 0
    # sync
    sync_kind: str | None = None
    event_id: int | None = None
    wait_stream: int | None = None
    event_record_correlation: int | None = None
    seq: int = 0

    @property
    def dur(self) -> int:
        return self.end - self.start


def _ns(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int number of nanoseconds, got {value!r}")
    if value < 0:
        raise ValueError(f"{what} must be >= 0, got {value}")
    return value


def _dim3(v, what: str) -> tuple[int, int, int]:
    t = tuple(int(x) for x in (v if isinstance(v, (tuple, list)) else (v,)))
    if not 1 <= len(t) <= 3 or any(x < 1 for x in t):
        raise ValueError(f"{what} must be 1-3 positive ints, got {v!r}")
    return t + (1,) * (3 - len(t))


def short_kernel_name(name: str) -> str:
    """Base function name of a demangled kernel name, like nsys's ``shortName``:
    ``void at::native::(anonymous namespace)::foo<4, bar>(int, ...)`` -> ``foo``."""
    s = name.strip().replace("(anonymous namespace)", "{anonymous}")
    depth, cut = 0, len(s)
    for i, ch in enumerate(s):  # cut the parameter list: first '(' outside <> and {}
        if ch in "<{":
            depth += 1
        elif ch in ">}":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    s = s[:cut]
    while s.endswith(">"):  # drop trailing template arguments
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += {">": 1, "<": -1}.get(s[i], 0)
            if depth == 0:
                s = s[:i]
                break
        else:
            break
    parts = s.split()
    s = parts[-1] if parts else ""  # drop the return type ("void ")
    return s.rsplit("::", 1)[-1] or name


def _mangled_name(name: str, short: str) -> str:
    """An Itanium-style mangled name. Plain identifiers (extern "C" kernels) are their own
    mangled name, as in real exports; otherwise an approximation ``_Z<len><short>v`` (real
    mangling of templates is not reproduced)."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return name
    return f"_Z{len(short)}{short}v"


# --------------------------------------------------------------------------------------
# The builder


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

    # ---------------------------------------------------------------- Kineto writer

    def write_kineto(self, path: str | os.PathLike, *, gpu_annotations: bool = True,
                     nonstandard_args: bool = False) -> Path:
        """Write a PyTorch-2.x-style Chrome trace (``.json`` or ``.json.gz``, by suffix).

        ``gpu_annotations`` adds ``gpu_user_annotation`` events per stream over the GPU
        work launched inside each step/range, as Kineto does. ``nonstandard_args`` adds
        ``"local memory per thread"`` to kernel args (real Kineto has no such field)."""
        self._check_closed()
        path = Path(path)
        pid, tid, dev = self.pid, self.tid, self.device_id
        events: list[tuple[tuple, dict]] = []  # (sort key, event)

        def add(key, ev):
            events.append((key, ev))

        for e in self.host_events:
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

        linked = {e.correlation for e in self.host_events if e.kind == "runtime"}
        for a in self.activities:
            args: dict = {}
            if a.external_id is not None:
                args["External id"] = a.external_id
            if a.kind == "kernel":
                bps, wps, occ = self._occupancy(a)
                args.update({"queued": 0, "device": dev, "context": 1, "stream": a.stream,
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
                args.update({"device": dev, "context": 1, "stream": a.stream,
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
                             "device": dev, "context": 1})
                cat, ev_tid = "cuda_sync", a.stream
            add((1, a.start, -a.dur, a.seq),
                {"ph": "X", "cat": cat, "name": a.name, "pid": dev, "tid": ev_tid,
                 "ts": _T(a.start), "dur": _T(a.dur), "args": args})
            if a.correlation in linked and a.api_start is not None:
                add((2, a.api_start, 0, a.seq),
                    {"ph": "s", "id": a.correlation, "pid": pid, "tid": tid,
                     "ts": _T(a.api_start), "cat": "ac2g", "name": "ac2g"})
                add((2, a.start, 1, a.seq),
                    {"ph": "f", "id": a.correlation, "pid": dev, "tid": ev_tid,
                     "ts": _T(a.start), "cat": "ac2g", "name": "ac2g", "bp": "e"})

        if gpu_annotations:
            rt_by_corr = {e.correlation: e for e in self.host_events if e.kind == "runtime"}
            for e in self.host_events:
                if e.kind not in ("step", "range"):
                    continue
                per_stream: dict[int, list[int]] = {}
                for a in self.activities:
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

        for name, value, ts in self.metrics:
            add((3, ts, 0, 0), {"ph": "C", "cat": "gpu_metric", "name": name, "pid": dev,
                                "tid": 0, "ts": _T(ts), "args": {name: value}})

        t_min, t_max = self._span()
        meta = [
            _meta("process_name", t_min, pid, 0, {"name": self.process_name}),
            _meta("process_labels", t_min, pid, 0, {"labels": "CPU"}),
            _meta("process_sort_index", t_min, pid, 0, {"sort_index": pid}),
            _meta("thread_name", t_min, pid, tid, {"name": f"thread {tid} ({self.process_name})"}),
            _meta("thread_sort_index", t_min, pid, tid, {"sort_index": tid}),
            _meta("process_name", t_min, dev, 0, {"name": self.process_name}),
            _meta("process_labels", t_min, dev, 0, {"labels": f"GPU {dev}"}),
            _meta("process_sort_index", t_min, dev, 0, {"sort_index": 5000000 + dev}),
        ]
        for s in sorted({a.stream for a in self.activities if a.stream >= 0}):
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
            "deviceProperties": [self._kineto_device_props()],
        }
        if self.distributed is not None:
            head["distributedInfo"] = dict(self.distributed)
        head.update({
            "cuda_runtime_version": 12040, "cuda_driver_version": 12040, "cupti_version": 22,
            "with_stack": int(any(e.kind == "python" for e in self.host_events)),
            "record_shapes": 0, "profile_memory": 0, "with_flops": 0, "with_modules": 0,
            "trace_id": hashlib.md5(f"{self.pid}:{t_min}:{t_max}".encode()).hexdigest().upper(),
        })
        tail = {"traceName": path.name, "displayTimeUnit": "ms",
                "baseTimeNanoseconds": self.epoch_ns}
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

    def _kineto_device_props(self) -> dict:
        d = {"id": self.device_id, "name": self.device_name}
        d.update({k: self.props[k] for k in _KINETO_PROP_KEYS})
        return d

    # ---------------------------------------------------------------- nsys writer

    def write_nsys_sqlite(self, path: str | os.PathLike, *, nvtx_ops: bool = False,
                          lazy: bool = True) -> Path:
        """Write an nsys-2024.5-shaped SQLite export. ``lazy`` (default, like nsys) creates
        event tables only when they have rows; ``lazy=False`` creates all of them.
        ``nvtx_ops`` adds CPU ops as NVTX ranges (``"aten::mul, op_id = N"``, like
        ``torch.autograd.profiler.emit_nvtx``)."""
        self._check_closed()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        os.close(fd)
        os.unlink(tmp)
        try:
            con = sqlite3.connect(tmp)
            try:  # a scratch file until renamed: no fsync, one transaction
                con.execute("PRAGMA synchronous = OFF")
                con.execute("PRAGMA journal_mode = MEMORY")
                with con:
                    self._fill_nsys(con, path, nvtx_ops=nvtx_ops, lazy=lazy)
            finally:
                con.close()
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return path

    def _fill_nsys(self, con: sqlite3.Connection, path: Path, *, nvtx_ops: bool,
                   lazy: bool) -> None:
        p = self.props
        gpid = (1 << 48) | (self.pid << 24)
        gtid = gpid | self.tid
        strings: dict[str, int] = {}

        def sid(s: str) -> int:
            if s not in strings:
                strings[s] = len(strings)
            return strings[s]

        rows: dict[str, list[tuple]] = {t: [] for t in nsys_ddl.DDL}

        # runtime calls
        for e in sorted((e for e in self.host_events if e.kind == "runtime"),
                        key=lambda e: (e.start, e.seq)):
            rows["CUPTI_ACTIVITY_KIND_RUNTIME"].append(
                (e.start, e.end, 1 if _is_driver(e.name) else 0, gtid, e.correlation,
                 sid(nsys_api_name(e.name)), 0, None))

        # device activities
        sync_map = _SYNC_TYPES[self.sync_types]
        grid_id = 0
        for a in sorted(self.activities, key=lambda a: (a.start, a.seq)):
            if a.kind == "kernel":
                grid_id += 1
                smem = a.static_smem + a.dynamic_smem
                executed = next((c for c in _SMEM_CARVEOUTS if c >= smem),
                                p["sharedMemPerMultiprocessor"])
                local_total = max(p["localMemoryReserved"],
                                  a.local_mem * p["maxThreadsPerMultiprocessor"] * p["numSms"])
                rows["CUPTI_ACTIVITY_KIND_KERNEL"].append((
                    a.start, a.end, a.device, 1, None, a.stream, a.correlation, gpid,
                    sid(a.name), sid(a.short_name), sid(_mangled_name(a.name, a.short_name)),
                    1, 1, a.registers, *a.grid, *a.block, a.static_smem, a.dynamic_smem,
                    a.local_mem, local_total, grid_id, executed, None, 0))
            elif a.kind == "memcpy":
                # src/dst device and context ids stay NULL, as in the real 2024.5 export
                rows["CUPTI_ACTIVITY_KIND_MEMCPY"].append((
                    a.start, a.end, a.device, 1, None, a.stream, a.correlation, gpid,
                    a.bytes, _COPY_KINDS[a.copy_kind][1], None, _MEM_KINDS[a.src_kind][1],
                    _MEM_KINDS[a.dst_kind][1], None, None, None, None, None, None, None))
            elif a.kind == "memset":
                rows["CUPTI_ACTIVITY_KIND_MEMSET"].append((
                    a.start, a.end, a.device, 1, None, a.stream, a.correlation, gpid,
                    a.value, a.bytes, None, _MEM_KINDS[a.dst_kind][1]))
            else:
                stream = a.stream if a.stream >= 0 else INVALID_ID
                event = a.event_id if a.event_id is not None else INVALID_ID
                rows["CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"].append((
                    a.start, a.end, a.device, 1, None, stream, a.correlation, gpid,
                    sync_map[a.sync_kind], event))

        # NVTX push/pop ranges
        for e in sorted(self.host_events, key=lambda e: (e.start, e.seq)):
            if e.kind in ("step", "range"):
                text = e.name
            elif e.kind == "op" and nvtx_ops:
                text = f"{e.name}, op_id = {e.external_id}"
            else:
                continue
            rows["NVTX_EVENTS"].append((e.start, e.end, 59, None, None, None, text, gtid,
                                        None, None, 0) + (None,) * 8)

        # GPU metrics
        metric_ids: dict[str, int] = {}
        type_id = 1 + self.device_id
        for name, value, ts in sorted(self.metrics, key=lambda m: (m[2], m[0])):
            mid = metric_ids.setdefault(name, len(metric_ids))
            rows["GPU_METRICS"].append((ts, ts, type_id, mid, int(round(value))))
        for name, mid in metric_ids.items():
            rows["TARGET_INFO_GPU_METRICS"].append(
                (type_id, self.device_id, f"GPU {self.device_id} ({p['chipName'] or 'GPU'})",
                 mid, name))

        # targets, processes, metadata, enums
        rows["TARGET_INFO_GPU"].append(self._target_info_gpu_row())
        utc = datetime.fromtimestamp(self.epoch_ns // 10**9, tz=timezone.utc)
        stamp = utc.strftime("%Y-%m-%dT%H:%M:%S")
        rows["TARGET_INFO_SESSION_START_TIME"].append((self.epoch_ns, stamp, stamp))
        rows["PROCESSES"].append((gpid, self.pid, self.process_name))
        rows["ThreadNames"].append((sid(self.process_name), 20, gtid))
        rows["META_DATA_EXPORT"].extend(self._export_meta(path, stamp))
        rows["META_DATA_CAPTURE"].extend(self._capture_meta())
        for table, enum_rows in nsys_ddl.ENUM_ROWS.items():
            rows[table].extend(enum_rows)
        rows["StringIds"].extend((i, s) for s, i in strings.items())

        for table, ddl in nsys_ddl.DDL.items():
            if lazy and not rows[table] and table not in nsys_ddl.ALWAYS_CREATED:
                continue
            con.execute(ddl)
            if rows[table]:
                marks = ",".join("?" * len(nsys_ddl.columns(table)))
                con.executemany(f"INSERT INTO {table} VALUES ({marks})", rows[table])

    def _target_info_gpu_row(self) -> tuple:
        p = self.props
        uuid = hashlib.md5(f"{self.device_name}:{self.device_id}".encode()).hexdigest()
        uuid = f"{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:32]}"
        values = dict(
            vmId=1 << 48, id=self.device_id, name=self.device_name,
            busLocation=p["busLocation"], isDiscrete=1, l2CacheSize=p["l2CacheSize"],
            totalMemory=p["totalGlobalMem"], memoryBandwidth=p["memoryBandwidth"],
            clockRate=p["clockRate"], smCount=p["numSms"], pwGpuId=0, uuid=uuid, luid=0,
            chipName=p["chipName"], cuDevice=self.device_id, ctxswDevPath="", ctrlDevPath="",
            revision=0, nodeMask=0, constantMemory=65536, maxIPC=4,
            maxRegistersPerBlock=p["regsPerBlock"], maxShmemPerBlock=p["sharedMemPerBlock"],
            maxShmemPerBlockOptin=p["sharedMemPerBlockOptin"],
            maxShmemPerSm=p["sharedMemPerMultiprocessor"],
            maxRegistersPerSm=p["regsPerMultiprocessor"], threadsPerWarp=p["warpSize"],
            asyncEngines=p["asyncEngines"],
            maxWarpsPerSm=p["maxThreadsPerMultiprocessor"] // p["warpSize"],
            maxBlocksPerSm=p["maxBlocksPerSm"], maxThreadsPerBlock=p["maxThreadsPerBlock"],
            maxBlockDimX=1024, maxBlockDimY=1024, maxBlockDimZ=64, maxGridDimX=2147483647,
            maxGridDimY=65535, maxGridDimZ=65535, computeMajor=p["computeMajor"],
            computeMinor=p["computeMinor"], smMajor=p["computeMajor"],
            smMinor=p["computeMinor"])
        values.update({k: v for k, v in p.items() if k in values})
        return tuple(values[c] for c in nsys_ddl.columns("TARGET_INFO_GPU"))

    def _export_meta(self, path: Path, stamp: str) -> list[tuple[str, str]]:
        major, minor, micro = nsys_ddl.EXPORT_SCHEMA_VERSION.split(".")
        rep = path.with_suffix(".nsys-rep").name
        return [
            ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
            ("EXPORT_PRODUCT_VERSION", nsys_ddl.EXPORT_PRODUCT_VERSION),
            ("EXPORT_PRODUCT_DATE", nsys_ddl.EXPORT_PRODUCT_VERSION.rsplit(".", 2)[0]),
            ("EXPORT_SCHEMA_VERSION", nsys_ddl.EXPORT_SCHEMA_VERSION),
            ("EXPORT_SCHEMA_VERSION_MAJOR", major),
            ("EXPORT_SCHEMA_VERSION_MINOR", minor),
            ("EXPORT_SCHEMA_VERSION_MICRO", micro),
            ("EXPORT_PLATFORM", "linux-desktop"),
            ("EXPORT_ARCH", "x64"),
            ("EXPORT_TIME_UTC", stamp),
            ("EXPORT_HOST", "tracelint-synth"),
            ("EXPORT_USER", "synth"),
            ("EXPORT_PARAM_INPUT_FILE", rep),
            ("EXPORT_PARAM_OUTPUT_FILE", path.name),
            ("EXPORT_PARAM_LAZY", "true"),
            ("EXPORT_PARAM_TIME_NORMALIZE", "false"),
            ("EXPORT_PARAM_TIME_SHIFT", "0"),
        ]

    def _capture_meta(self) -> list[tuple[str, str]]:
        rows = [("CAPTURE_EVENT_TYPE", "NvtxEvents"), ("CAPTURE_EVENT_TYPE", "Cuda"),
                ("START_TRIGGER", "Immediate"), ("STOP_TRIGGER", "AppExit"),
                ("PROCESS_0:COMMAND", self.process_name), ("PROCESS_0:ARGUMENT_0", "train.py"),
                ("PROCESS_0:COLLECT_NVTX_TRACE", "true"),
                ("PROCESS_0:COLLECT_CUDA_TRACE", "true")]
        if self.distributed is not None:
            d = self.distributed
            rows += [("PROCESS_0:ENVIRONMENT_VARIABLE", f'RANK="{d["rank"]}"'),
                     ("PROCESS_0:ENVIRONMENT_VARIABLE", f'WORLD_SIZE="{d["world_size"]}"'),
                     ("PROCESS_0:ENVIRONMENT_VARIABLE", f'LOCAL_RANK="{d["rank"]}"')]
        return rows


# --------------------------------------------------------------------------------------
# JSON helpers

_T_MARK = "\x01ns:"
_T_RE = re.compile(r'"\\u0001ns:(\d+)"')


def _T(ns: int) -> str:
    """Placeholder for a time in ns; serialised as microseconds with 3 decimals."""
    return f"{_T_MARK}{int(ns)}"


def _us(match: re.Match) -> str:
    ns = int(match.group(1))
    return f"{ns // 1000}.{ns % 1000:03d}"


def _dumps_event(ev: dict) -> str:
    return _T_RE.sub(_us, json.dumps(ev, separators=(", ", ": ")))


def _meta(name: str, ts: int, pid, tid, args: dict) -> dict:
    return {"name": name, "ph": "M", "ts": _T(ts), "pid": pid, "tid": tid, "args": args}


def _atomic_write(path: Path, data: bytes, *, gz: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            if gz:  # mtime=0 and no file name: byte-identical output for identical input
                with gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gzf:
                    gzf.write(data)
            else:
                fh.write(data)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; use the usual file mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask

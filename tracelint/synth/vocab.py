"""The synthetic trace builder's shared vocabulary: timing constants, runtime API names and
callback ids, device presets, the host event and GPU activity records, and the helpers that
write exact microsecond times into JSON. builder.py (the workload model), kineto_writer.py and
nsys_writer.py all read it; it reads none of them.

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
"""
from __future__ import annotations

import gzip
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path


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

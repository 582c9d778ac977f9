"""jax.profiler events -> the Timeline's tables, gathered a byte range of the file at a time.

Why columns per range: the events decoded all at once (a struct per event, with its strings)
held 3.8x the file at the lint's peak. Here each range's complete ("X") events are reduced to
a few integer columns (exact times, their lane, interned texts) and its structs die before the
next range is read. Which table an event goes to depends on its lane's metadata
(`process_name`, `thread_name`), which the file may give anywhere: that is decided once every
range is in, a column at a time (what each lane and text means is worked out once per lane and
once per distinct text). The format itself is described in jax_trace.
"""
from __future__ import annotations

import re
from functools import lru_cache
from itertools import compress
from typing import Any

import msgspec
import numpy as np

from ..timeline.model import Device, Meta, Timeline
from .kineto_values import us_to_ns
from .records import finish_meta, timeline_from_columns

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
_OPS, _DERIVED = 1, 2                 # what a device lane holds (_device_lane); 0: nothing read


class Args(msgspec.Struct, gc=False):
    """The args read here; the decoder skips all others (XProf writes dozens per event)."""

    name: Any = None                  # metadata events: the process's or the lane's name
    correlation_id: Any = None
    device_id: Any = None
    hlo_op: Any = None
    kernel_details: Any = None
    memcpy_details: Any = None
    cuda_graph_id: Any = None
    step_num: Any = None


NO_ARGS = Args()


class Event(msgspec.Struct, gc=False):
    ph: Any = None
    name: Any = ""
    pid: Any = None
    tid: Any = None
    ts: Any = None                    # µs: int, or decimal text (float_hook) kept exact
    dur: Any = 0
    args: Args | None = None


class JaxColumns:
    """The events of a trace, fed in file order (add), and the Timeline they make (timeline)."""

    def __init__(self) -> None:
        self.procs: dict = {}         # pid -> process_name
        self.threads: dict = {}       # (pid, tid) -> thread_name
        self.lanes: dict = {}         # (pid, tid) as written -> lane code, in order of first use
        self.texts: dict[str, int] = {}   # names, HLO ops and details texts -> code
        self.parts: list[dict[str, np.ndarray]] = []

    def add(self, events: list[Event]) -> None:
        """One range's events: metadata kept, complete events reduced to columns."""
        xs = []
        for e in events:
            if e.ph == "X":
                xs.append(e)
            elif e.ph == "M" and (a := e.args) is not None:
                if e.name == "process_name":
                    self.procs[e.pid] = str(a.name if a.name is not None else "")
                elif e.name == "thread_name":
                    self.threads[(e.pid, e.tid)] = str(a.name if a.name is not None else "")
        if not xs:
            return
        start, ok = us_to_ns([e.ts for e in xs])       # exact ns, a column at a time
        dur, ok_dur = us_to_ns([e.dur for e in xs])
        ok &= ok_dur
        if not ok.all():                                # times that do not parse: dropped
            xs, start, dur = list(compress(xs, ok.tolist())), start[ok], dur[ok]
        n, lanes, texts = len(xs), self.lanes, self.texts
        lane, code = lanes.setdefault, texts.setdefault
        args = [e.args or NO_ARGS for e in xs]
        corr = [a.correlation_id for a in args]

        def column(values, dtype) -> np.ndarray:
            return np.fromiter(values, dtype, n)
        self.parts.append({
            "start": start, "end": start + np.maximum(dur, 0),
            "lane": column((lane((e.pid, e.tid), len(lanes)) for e in xs), np.int32),
            "name": column((code(str(e.name), len(texts)) for e in xs), np.int32),
            "corr": column(map(_int, corr), np.int64),
            "has_corr": column((c is not None for c in corr), bool),
            "has_device": column((a.device_id is not None for a in args), bool),
            "hlo": column((-1 if a.hlo_op is None else code(str(a.hlo_op), len(texts))
                           for a in args), np.int32),
            "kernel_details": column((code(_text(a.kernel_details), len(texts)) for a in args),
                                     np.int32),
            "memcpy_details": column((code(_text(a.memcpy_details), len(texts)) for a in args),
                                     np.int32),
            "graph": column((bool(a.cuda_graph_id) for a in args), bool),
            "step": column((_int(a.step_num) for a in args), np.int64),
        })

    def timeline(self) -> Timeline:
        """The tables, once every event is in."""
        devices = {pid: (m.group(1), int(m.group(2))) for pid, name in self.procs.items()
                   if (m := DEVICE_PLANE.match(name))}
        meta = Meta(format="jax-json", producer="jax.profiler / XProf trace viewer (version not recorded)")
        meta.extra["framework"] = "jax"
        meta.devices = [Device(id=i, name=None, vendor="google" if kind == "TPU" else None)  # model not recorded
                        for kind, i in sorted(set(devices.values()), key=lambda d: d[1])]
        tables = _Tables(self, devices).tables() if self.parts else {}
        tl = timeline_from_columns(tables, meta)
        finish_meta(tl, {"cuda": tl.has_gpu_activity, "nvtx": len(tl.ranges)})
        return tl


class _Tables:
    """The tables from JaxColumns' columns: each row routed by its lane and its name."""

    def __init__(self, got: JaxColumns, devices: dict) -> None:
        c = {k: np.concatenate([p[k] for p in got.parts]) for k in got.parts[0]}
        got.parts.clear()
        self.c, self.texts = c, np.array(list(got.texts), dtype=object)   # code -> text
        has_streams = {pid for (pid, _), name in got.threads.items()
                       if pid in devices and name.startswith("Stream")}
        lane_facts = []                   # per lane: device or -1, stream, what it holds, pid, tid
        for pid, tid in got.lanes:
            line, dev = got.threads.get((pid, tid), ""), devices.get(pid)
            holds = 0 if dev is None else _device_lane(line, pid in has_streams)
            lane_facts.append((-1 if dev is None else dev[1], _stream_of(line), holds,
                               _int(pid), _int(tid)))
        facts = np.array(lane_facts, np.int64).reshape(-1, 5)[c["lane"]].T
        self.device, self.stream, holds, self.pid, self.tid = facts
        self.on_device = self.device >= 0
        name = c["name"]
        is_copy = self._per_text(lambda t: COPY_NAME.match(t) is not None, bool)[name]
        is_memset = self._per_text(lambda t: t.lower().startswith("memset"), bool)[name]
        ops = holds == _OPS
        self.kernel = ops & ~is_copy & ~is_memset
        self.copy, self.memset = ops & is_copy, ops & ~is_copy & is_memset
        self.derived = holds == _DERIVED
        host = ~self.on_device
        self.api = host & self._per_text(lambda t: API_NAME.match(t) is not None, bool)[name]
        self.launch = host & ~self.api & c["has_corr"] & c["has_device"]  # named by what it launched
        self.host_range = host & ~self.api & ~self.launch & \
            ~self._per_text(lambda t: t.startswith("$"), bool)[name]   # "$file:line fn": tracer frames

    def _per_text(self, f, dtype) -> np.ndarray:
        """f of every distinct text, indexed by its code."""
        return np.fromiter(map(f, self.texts), dtype, len(self.texts))

    def _rows(self, mask: np.ndarray) -> dict:
        """The columns every table takes from its rows."""
        i = np.flatnonzero(mask)
        return {"start": self.c["start"][i], "end": self.c["end"][i],
                "name": self.texts[self.c["name"][i]], "_i": i}

    def tables(self) -> dict[str, dict]:
        out = {"kernels": self._kernels(), "copies": self._copies(), "memsets": self._memsets(),
               "api_calls": self._api_calls(), "ranges": self._ranges()}
        for cols in out.values():
            cols.pop("_i")
        return {t: cols for t, cols in out.items() if len(cols["start"])}

    def _on_stream(self, mask: np.ndarray) -> dict:
        rows = self._rows(mask)
        i = rows["_i"]       # the launching process is unknown until linked: pid -1
        return {**rows, "device": self.device[i], "stream": self.stream[i],
                "correlation": self.c["corr"][i], "pid": np.full(len(i), -1, np.int64)}

    def _kernels(self) -> dict:
        rows = self._on_stream(self.kernel)
        rows["graph_launched"] = self.c["graph"][rows["_i"]]
        details = self.c["kernel_details"][rows["_i"]]
        distinct = np.unique(details)
        facts = [_kernel_facts(self.texts[d]) for d in distinct]
        at = np.searchsorted(distinct, details)
        for key in (facts[0] if facts else ()):
            rows[key] = np.array([f[key] for f in facts], np.int64)[at]
        return rows

    def _copies(self) -> dict:
        rows = self._on_stream(self.copy)
        pairs = zip(self.c["name"][rows["_i"]].tolist(), self.c["memcpy_details"][rows["_i"]].tolist())
        facts = [_copy_facts(self.texts[n], self.texts[d]) for n, d in pairs]
        for k, key in enumerate(("kind", "bytes", "src_kind", "dst_kind")):
            rows[key] = [f[k] for f in facts]
        return rows

    def _memsets(self) -> dict:
        return self._on_stream(self.memset)

    def _api_calls(self) -> dict:
        rows = self._rows(self.api | self.launch)
        i = rows["_i"]
        called = [_api_call(n, d, launch) for n, d, launch in zip(
            rows["name"].tolist(), self.texts[self.c["memcpy_details"][i]].tolist(),
            self.launch[i].tolist())]
        return {**rows, "name": [c[0] for c in called], "api": [c[1] for c in called],
                "pid": self.pid[i], "tid": self.tid[i], "correlation": self.c["corr"][i]}

    def _ranges(self) -> dict:
        rows = self._rows(self.derived | self.host_range)
        i, derived = rows["_i"], self.derived[rows["_i"]]
        step = np.where(derived, -1, self.c["step"][i])
        device_ops = self._device_ops()
        runtime = self._per_text(lambda t: t in device_ops or RUNTIME_NAME.search(t) is not None,
                                 bool)[self.c["name"][i]]     # JAX's or XLA's own records
        kind = np.where(derived, "gpu_annotation",
                        np.where(step >= 0, "step", np.where(runtime, "op", "annotation")))
        return {**rows, "pid": self.pid[i], "tid": self.tid[i], "kind": kind.astype(object),
                "step": step, "device": np.where(derived, self.device[i], -1),
                "stream": np.full(len(i), -1, np.int64)}

    def _device_ops(self) -> set[str]:
        """Names and HLO ops of device work: a host thunk bearing one is XLA's own record."""
        on = self.on_device
        hlo = self.c["hlo"][on]
        codes = np.union1d(self.c["name"][on], hlo[hlo >= 0])
        return set(self.texts[codes].tolist())


@lru_cache(maxsize=1 << 12)
def _api_call(name: str, memcpy_details: str, launch: bool) -> tuple[str, str]:
    """(the driver or runtime call, its API) of a host record: a call named as such, or a
    launch record that XProf names after the device work it launched."""
    if not launch:
        call = API_NAME.match(name).group(1)
        return call, "driver" if name.startswith("cu") and not name.startswith("cuda") else "runtime"
    m = COPY_NAME.match(name)
    if m:
        kind = _COPY_KIND.get(m.group(1).upper(), m.group(1).upper())
        sync = _parsed_details(memcpy_details).get("async") == "0"
        return _COPY_CALL.get(kind, "cuMemcpy") + ("" if sync else "Async"), "driver"
    return ("cuMemsetD8Async" if name.lower().startswith("memset") else "cuLaunchKernel"), "driver"


@lru_cache(maxsize=1 << 12)
def _copy_facts(name: str, memcpy_details: str) -> tuple[str, int, str, str]:
    """(kind, bytes, source and destination memory kinds) of a copy."""
    m = COPY_NAME.match(name)
    details = _parsed_details(memcpy_details)
    return (_COPY_KIND.get(m.group(1).upper(), m.group(1).upper()),
            _int(details.get("size", details.get("num_bytes"))),
            _mem_kind(details.get("kind_src")), _mem_kind(details.get("kind_dst")))


def _device_lane(line: str, has_streams: bool) -> int:
    """What a device plane's line holds: _OPS (kernels, copies, memsets: its stream lines, or
    a TPU's XLA Ops line), _DERIVED (the XLA Modules / Ops / Steps groupings of that work:
    GPU-annotation ranges) or 0 (other derived lines: nothing)."""
    if has_streams and line.startswith("Stream") or not has_streams and line == "XLA Ops":
        return _OPS
    return _DERIVED if line in DERIVED_LINES else 0


def _mem_kind(text) -> str:
    """CUPTI memory kind names in memcpy_details -> the Timeline's src_kind/dst_kind words."""
    t = str(text or "").lower()
    return next((k for k in ("pageable", "pinned", "device", "managed", "array") if k in t), "unknown")


def _text(value) -> str:
    """A details value as the text it is read as (absent: none)."""
    return value if type(value) is str else "" if value is None else str(value)


@lru_cache(maxsize=1 << 16)
def _parsed_details(text: str) -> dict:
    """`key:value ...` of memcpy_details / kernel_details (read only: cached, as a trace
    repeats the same few texts for every launch of a kernel)."""
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
    """v as an int64 (a JSON int or its text); -1, unknown, for anything else, a value past
    int64 among them (the tables are int64)."""
    if type(v) is not int:
        try:
            v = int(str(v)) if v is not None and not isinstance(v, bool) else -1
        except ValueError:
            return -1
    return v if -(1 << 63) <= v < 1 << 63 else -1


def _dim3(text) -> tuple[int, int, int]:
    parts = [_int(x) for x in str(text or "").split(",")]
    return tuple(parts) if len(parts) == 3 else (-1, -1, -1)

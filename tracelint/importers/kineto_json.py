"""Import torch.profiler / Kineto Chrome-trace JSON (plain or gzip) into a Timeline.

Why it is built this way:
- msgspec first splits the event array into raw slices, then decodes events a chunk at a time
  into slim Structs that declare only the fields used here (the rest is skipped unparsed). Each
  chunk becomes numpy columns at once and its Structs are dropped, so peak memory stays near
  the file size instead of json.load's per-event dicts.
- Kineto writes ts/dur in microseconds with up to 3 decimals. Float literals arrive as text
  (float_hook) and a vectorised digit parser turns them into exact integer ns: float64 cannot
  hold 1669783687389292.123, and rounding invents gaps between back-to-back kernels.
- 2021 categories (Kernel, Runtime, Operator, ...) and ROCm traces (HIP calls under
  cuda_runtime) map to the same tables as current CUDA traces.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from operator import attrgetter
from pathlib import Path
from typing import Any, Callable

import msgspec
import numpy as np
import pandas as pd

from ..errors import TraceFormatError
from ..timeline import classify
from ..timeline.model import Device, Meta, Timeline
from ..timeline.nesting import nest
from ..timeline.schema import TABLES, make_table
from .kineto_cupti import add_range_kernels

CHUNK = 65536                       # events decoded per batch: bounds the transient Structs
_MAX_US = (2**63 - 1) // 1000 - 1   # largest |µs| whose ns value fits int64

#: Kineto category (current and 2021 names) -> Timeline table.
TABLE_OF_CAT = {
    "kernel": "kernels", "Kernel": "kernels",
    "gpu_memcpy": "copies", "Memcpy": "copies",
    "gpu_memset": "memsets", "Memset": "memsets",
    "cuda_runtime": "api_calls", "cuda_driver": "api_calls", "Runtime": "api_calls",
    "cpu_op": "ranges", "Operator": "ranges", "user_annotation": "ranges",
    "gpu_user_annotation": "ranges",
    "cuda_sync": "syncs",
    "python_function": "python_frames",
}
RANGE_KINDS = ["op", "annotation", "gpu_annotation", "step"]
_RANGE_KIND = {"cpu_op": 0, "Operator": 0, "user_annotation": 1, "gpu_user_annotation": 2}
FLOW_CATS = {"ac2g", "async_cpu_to_gpu", "async"}     # CPU launch -> GPU activity flows
COUNTER_CATS = {"cuda_profiler_range"}                # CUPTI range-profiler metrics per kernel
GPU_TABLES = ("kernels", "copies", "memsets")

_STEP = re.compile(r"^ProfilerStep#(\d{1,15})$")     # longer numbers cannot be an int64 step
_FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$")
_MEMCPY = re.compile(r"Memcpy (\w+)(?: \((\w+) -> (\w+)\))?")
_PAREN = re.compile(r"\((\w+)\)")
_INT_TEXT = re.compile(r"^\s*(-?\d+)\s*$|^\s*0[xX]([0-9a-fA-F]+)\s*$|^[A-Za-z_ ]+ (\d+)$")
_COPY_KIND = {"HtoD": "H2D", "DtoH": "D2H", "DtoD": "D2D", "PtoP": "P2P", "HtoH": "H2H"}
_MEM_KIND = {k: k for k in ("pageable", "pinned", "device", "managed", "array")}
_VERSION_KEYS = ("cupti_version", "cuda_runtime_version", "cuda_driver_version",
                 "hip_runtime_version", "hip_driver_version", "roctracer_version")
_FLAG_KEYS = ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")


class _Args(msgspec.Struct, gc=False):
    """The args read here; the decoder skips all others. Any: producers disagree on types
    (ROCm runtime rows say "stream": "0x0", "bytes": "9216")."""

    correlation: Any = -1
    external_id: Any = msgspec.field(default=-1, name="External id")
    external_id_2021: Any = msgspec.field(default=-1, name="external id")
    device: Any = -1
    stream: Any = -1
    grid: Any = None
    block: Any = None
    registers: Any = msgspec.field(default=-1, name="registers per thread")
    smem: Any = msgspec.field(default=-1, name="shared memory")
    nbytes: Any = msgspec.field(default=-1, name="bytes")
    # record_shapes=True: op inputs, kept per External id for the efficiency work models.
    # Raw: left undecoded (a byte copy is kept), decoded only when an efficiency model asks.
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    concrete: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Concrete Inputs")
    call_stack: Any = msgspec.field(default=None, name="Call stack")   # legacy with_stack


_NO_ARGS = _Args()


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: Any = -1          # int, or a label such as "Spans" / "Traces"
    tid: Any = -1          # int, "stream 7" (2021 GPU rows) or "25738" (2021 CPU rows)
    ts: Any = None         # int, or decimal text (bytes) via float_hook
    dur: Any = 0
    id: Any = -1           # flow id
    args: _Args | None = None


#: Top-level keys read; metadata (TraceLens runs) may hold environment secrets: only the
#: torch version is taken from it.
_Top = msgspec.defstruct("_Top", [
    ("traceEvents", list[msgspec.Raw] | None, None), ("metadata", msgspec.Raw, msgspec.Raw()),
    *[(k, Any, None) for k in ("deviceProperties", "distributedInfo", "schemaVersion",
                               "traceName", "displayTimeUnit", "baseTimeNanoseconds", "trace_id",
                               *_VERSION_KEYS, *_FLAG_KEYS)]])


# ----- entry point -----------------------------------------------------------------------------
def load_kineto(path, progress: Callable[[str, float], None] | None = None) -> Timeline:
    """Load a Kineto trace. Raises TraceFormatError (one line) for input that is not one."""
    path = Path(path)
    report = progress or (lambda stage, fraction: None)
    report("read", 0.0)
    tl = _load_in_ranges(path, report)       # large plain JSON: one byte range at a time
    if tl is not None:
        return tl
    data = _read(path)
    report("read", 1.0)
    top, raws = _decode_top(path, data)
    build = _Builder()
    dec = _event_decoder()
    _decode_events(path, raws, dec, build, report)
    cols = build.columns()
    build.fill_correlation_from_flows(cols, lambda: (
        [e for e in map(dec, raws[lo:lo + CHUNK]) if e.cat in FLOW_CATS]
        for lo in sorted(set(build.flow_chunks))))
    specials = build.decode_specials()
    info = _TraceInfo(top, shapes=bool(top.record_shapes) or data.find(b'"Input Dims"') >= 0)
    del raws, data, top, build.specials    # drop every view of the file buffer before the frames
    return _finish(path, cols, specials, build, info, report)


def _finish(path: Path, cols: dict, specials: list[dict], build: _Builder, info: _TraceInfo,
            report) -> Timeline:
    report("build", 0.0)
    tl = _timeline(cols, specials, build)
    tl.meta = _meta(path, info, tl, build, specials)
    add_range_kernels(tl, specials, us_to_ns)     # CUPTI counters: kernels with synthetic times
    report("build", 1.0)
    return tl


def _event_decoder():
    return msgspec.json.Decoder(_Event, float_hook=str.encode).decode   # floats as exact text


def _load_in_ranges(path: Path, report) -> Timeline | None:
    """kineto_ranges' path for a large plain-JSON file; None leaves it to the whole buffer."""
    from . import kineto_ranges as kr
    build = _Builder()
    try:
        if path.stat().st_size < kr.STREAM_MIN:
            return None
        top_bytes, ranges = kr.plan(path, path.stat().st_size)
        report("read", 1.0)
        specials, firsts, shapes = kr.decode_in_ranges(path, ranges, build, _event_decoder(),
                                                       CHUNK, report)
        top = msgspec.json.decode(top_bytes, type=_Top)
    except (kr.NotSplittable, OSError, msgspec.DecodeError, TraceFormatError):
        return None
    cols = build.columns()
    build.fill_correlation_from_flows(cols, lambda: kr.flow_events(
        path, ranges, firsts, build.flow_chunks, _event_decoder(), CHUNK, FLOW_CATS))
    info = _TraceInfo(top, shapes=bool(top.record_shapes) or shapes
                      or top_bytes.find(b'"Input Dims"') >= 0)
    return _finish(path, cols, specials, build, info, report)


def _decode_events(path: Path, raws: list, dec, build: _Builder, report) -> None:
    """Decode CHUNK events at a time and turn them into columns; the Structs die per chunk."""
    for lo in range(0, len(raws), CHUNK):
        part = raws[lo:lo + CHUNK]
        try:
            events = list(map(dec, part))
        except msgspec.DecodeError:        # also ValidationError: an element is not an event
            raise _bad_event(path, part, lo, dec) from None
        build.add_chunk(lo, events, part)
        report("decode", min(1.0, (lo + CHUNK) / len(raws)))


# ----- reading and top-level decoding ----------------------------------------------------------
def _fail(path: Path, reason: str) -> TraceFormatError:
    return TraceFormatError(f"{path}: {' '.join(str(reason).split())[:300]}")


def _read(path: Path) -> bytes:
    """The file's bytes, gunzipped when they start with the gzip magic (not by extension)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _fail(path, f"cannot read: {exc.strerror or exc}") from None
    if data[:2] == b"\x1f\x8b":
        from ..io import gunzip_capped
        data = gunzip_capped(data, path)          # bounded: ratio and absolute caps
    return data


def _decode_top(path: Path, data: bytes) -> tuple[_Top, list[msgspec.Raw]]:
    """Split the event array into raw slices; a bare JSON array is taken as traceEvents."""
    start = re.compile(rb"\s*").match(data).end()
    buf: Any = data
    if data[start:start + 3] == b"\xef\xbb\xbf":       # UTF-8 BOM: skip without copying
        buf, start = memoryview(data)[start + 3:], 0
    first = bytes(buf[start:start + 1])
    try:
        if first == b"{":
            top = msgspec.json.decode(buf, type=_Top)
            raws, top.traceEvents = top.traceEvents, None
            if raws is None:
                raise _fail(path, "not a Kineto trace: JSON object without a traceEvents array")
            return top, raws
        if first == b"[":
            return _Top(), msgspec.json.decode(buf, type=list[msgspec.Raw])
    except msgspec.ValidationError as exc:
        raise _fail(path, f"not a Kineto trace ({exc})") from None
    except msgspec.DecodeError as exc:
        raise _fail(path, f"{'truncated' if 'truncated' in str(exc) else 'malformed'} JSON "
                          f"({exc})") from None
    if not first:
        raise _fail(path, "empty file")
    raise _fail(path, "not a Kineto trace: expected a JSON object or array")


def _bad_event(path: Path, part: list, lo: int, dec) -> TraceFormatError:
    for i, raw in enumerate(part):
        try:
            dec(raw)
        except msgspec.DecodeError as exc:
            return _fail(path, f"not a Kineto trace: event {lo + i} is not a trace event ({exc})")
    return _fail(path, "not a Kineto trace")


# ----- value conversion ------------------------------------------------------------------------
def us_to_ns(values: list) -> tuple[np.ndarray, np.ndarray]:
    """Exact int64 ns from Kineto µs values (JSON ints, decimal text as bytes or str) and a
    parsed-ok mask.

    Up to 3 fractional digits are exact; further digits round half up (none in real traces).
    """
    try:
        us = np.fromiter(values, np.int64, len(values))
    except (TypeError, ValueError, OverflowError):
        return _text_to_ns(values)
    ok = np.abs(us) <= _MAX_US
    return np.where(ok, us, 0) * 1000, ok


def _text_to_ns(values: list) -> tuple[np.ndarray, np.ndarray]:
    """Parse decimal text as a byte matrix (row: value, column: character), digit by digit."""
    try:
        text = np.array(values, dtype="S")
    except (UnicodeError, TypeError, ValueError):
        text = np.array([str(v).encode("ascii", "replace") for v in values], dtype="S")
    n, w = len(text), max(text.dtype.itemsize, 1)
    b = text.view(np.uint8).reshape(n, w) if text.dtype.itemsize else np.zeros((n, 1), np.uint8)
    col = np.arange(w)
    digit, dot, neg = (b >= 48) & (b <= 57), b == 46, b[:, 0] == 45
    dotpos = np.where(dot.any(1), dot.argmax(1), (b != 0).sum(1))
    int_digits = (digit & (col < dotpos[:, None])).sum(1)
    lead = b[np.arange(n), neg.astype(np.intp)]
    ok = ((digit | dot | (b == 0) | ((b == 45) & (col == 0))).all(1) & (dot.sum(1) <= 1)
          & digit.any(1) & ((int_digits < 16) | ((int_digits == 16) & (lead <= ord("8")))))
    val, nfrac, up = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, bool)
    for j in range(w):                 # Horner over columns, keeping 3 fractional digits
        d = b[:, j].astype(np.int64) - 48
        rel = j - dotpos
        take = digit[:, j] & (rel <= 3)
        val = np.where(take, val * 10 + d, val)
        nfrac += take & (rel > 0)
        up |= digit[:, j] & (rel == 4) & (d >= 5)
    val = np.where(neg, -1, 1) * (val * 10 ** (3 - nfrac) + up)
    for i in np.flatnonzero(~ok):      # exponents, huge or odd values: exact slow path
        ns = _one_to_ns(values[i])
        if ns is not None:
            val[i], ok[i] = ns, True
    return np.where(ok, val, 0), ok


def _one_to_ns(v) -> int | None:
    if isinstance(v, bytes):
        v = v.decode("ascii", "replace")
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        return None
    try:
        d = Decimal(v)
        ns = int((d * 1000).to_integral_value(ROUND_HALF_UP)) if d.is_finite() else None
    except (InvalidOperation, ValueError):
        return None
    return ns if ns is not None and abs(ns) < 2**63 - 1 else None


def _ints(values: list) -> np.ndarray:
    """Integer column from JSON values; -1 where absent or not an integer."""
    try:
        return np.fromiter(values, np.int64, len(values))
    except (TypeError, ValueError, OverflowError):
        return np.fromiter((_to_int(v) for v in values), np.int64, len(values))


def _int_col(objs: list, field: str) -> np.ndarray:
    """_ints of one attribute of every object, read in a C-level loop when all are ints."""
    get = attrgetter(field)
    try:
        return np.fromiter(map(get, objs), np.int64, len(objs))
    except (TypeError, ValueError, OverflowError):
        return _ints(list(map(get, objs)))


def _to_int(v) -> int:
    """int; numeric text; hex text ("0x0" ROCm streams); "stream 7" -> 7; else -1."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v if -2**63 <= v < 2**63 else -1
    m = _INT_TEXT.match(v) if isinstance(v, str) else None
    if not m:
        return -1
    dec, hexa, tail = m.groups()
    x = int(dec) if dec else int(hexa, 16) if hexa else int(tail)
    return x if x < 2**63 else -1


def _dim3(values: list) -> np.ndarray:
    """(n, 3) ints from [x, y, z] lists; -1 where absent."""
    try:
        out = np.array(values, dtype=np.int64)
        if out.shape == (len(values), 3):
            return out
    except (TypeError, ValueError, OverflowError):
        pass
    rows = [[_to_int(x) for x in v] if isinstance(v, list) and len(v) == 3 else [-1] * 3
            for v in values]
    return np.array(rows, dtype=np.int64).reshape(len(values), 3)


# ----- chunk -> columns ------------------------------------------------------------------------
class _Builder:
    """Turns decoded event chunks into per-table column arrays; names become integer codes."""

    def __init__(self):
        self.parts: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
        self.vocab: dict[str, dict[str, int]] = {}
        self.cat_counts: Counter = Counter()
        self.specials: list[msgspec.Raw] = []    # M, C and range-profiler events: need all args
        self.flow_chunks: list[int] = []
        self.bad_ts = self.non_x = self.filled = 0
        self.window: tuple[int, int] | None = None
        self.op_inputs: dict[int, tuple] = {}     # External id -> (name, dims, types, concrete) JSON
        self.call_stacks: list[tuple] = []       # (start, end, pid, tid, text) of legacy stacks

    def add_chunk(self, lo: int, events: list[_Event], raws: list) -> None:
        buckets: dict[str, list[_Event]] = defaultdict(list)
        for e in events:
            buckets[e.cat].append(e)
        for cat, evs in buckets.items():
            self.cat_counts[cat] += len(evs)
            if cat in FLOW_CATS:
                self.flow_chunks.append(lo)
                continue
            xs = [e for e in evs if e.ph == "X"]
            if cat in TABLE_OF_CAT:
                self.non_x += len(evs) - len(xs)
                if xs:
                    self._add(TABLE_OF_CAT[cat], cat, xs)
            elif cat == "Trace" and xs:
                self._window(xs)
            if cat in COUNTER_CATS or (len(xs) < len(evs) and any(e.ph in ("M", "C") for e in evs)):
                self.specials += [r for r, e in zip(raws, events) if e.cat == cat and (
                    cat in COUNTER_CATS or e.ph in ("M", "C"))]

    def _codes(self, table: str, names: list[str]) -> np.ndarray:
        """Name -> code, numbering new names in order of appearance, in a C-level loop."""
        if table not in self.vocab:
            self.vocab[table] = vocab = defaultdict()
            vocab.default_factory = vocab.__len__
        return np.fromiter(map(self.vocab[table].__getitem__, names), np.int64, len(names))

    def _window(self, xs: list[_Event]) -> None:
        """The profiler's own window (cat "Trace"), kept in meta.extra."""
        start, ok = us_to_ns([e.ts for e in xs])
        end = start + us_to_ns([e.dur for e in xs])[0]
        if ok.any():
            lo, hi = int(start[ok].min()), int(end[ok].max())
            self.window = (min(lo, self.window[0]), max(hi, self.window[1])) if self.window \
                else (lo, hi)

    def _add(self, table: str, cat: str, xs: list[_Event]) -> None:
        start, ok = us_to_ns([e.ts for e in xs])
        c = {"start": start, "end": start + us_to_ns([e.dur for e in xs])[0],
             "pid": _int_col(xs, "pid"), "tid": _int_col(xs, "tid"),
             "name": self._codes(table, [e.name for e in xs])}
        args = [e.args or _NO_ARGS for e in xs]
        if table in GPU_TABLES or table == "syncs":
            _device_stream(c, args)
            c["correlation"] = _int_col(args, "correlation")
        if table in ("copies", "memsets"):
            c["bytes"] = _int_col(args, "nbytes")
        elif table == "kernels":
            for axis, dims in (("grid", _dim3([a.grid for a in args])),
                               ("block", _dim3([a.block for a in args]))):
                for i, xyz in enumerate("xyz"):
                    c[f"{axis}_{xyz}"] = dims[:, i]
            c["registers_per_thread"] = _int_col(args, "registers")
            # Kineto records static + dynamic shared memory as one total: kept as static.
            c["static_smem"] = _int_col(args, "smem")
        elif table == "api_calls":
            c["correlation"] = _int_col(args, "correlation")
            c["external_id"] = _external_ids(args)
            c["api"] = np.full(len(xs), 1 if cat.endswith("driver") else 0, np.int8)
        elif table == "ranges":
            c["external_id"] = _external_ids(args)
            c["kind"] = np.full(len(xs), _RANGE_KIND[cat], np.int8)
            for e, ext in zip(xs, c["external_id"]):
                if e.args is not None and e.args.input_dims and ext >= 0:
                    a = e.args
                    self.op_inputs[int(ext)] = (e.name, bytes(a.input_dims), bytes(a.input_type),
                                                bytes(a.concrete))
            if cat == "gpu_user_annotation":
                _device_stream(c, args)
            else:     # CPU ops may carry a stream (Triton launches): not device work
                c["device"], c["stream"] = np.full((2, len(xs)), -1, np.int64)
            self.call_stacks += [(s, e, p, t, a.call_stack) for s, e, p, t, a, good in zip(
                c["start"], c["end"], c["pid"], c["tid"], args, ok)
                if good and isinstance(a.call_stack, str) and a.call_stack]
        if not ok.all():
            self.bad_ts += int((~ok).sum())
            c = {k: v[ok] for k, v in c.items()}
        for k, v in c.items():
            self.parts[table][k].append(v)

    def columns(self) -> dict[str, dict[str, np.ndarray]]:
        """Each column concatenated once; its chunk parts are dropped as it is made."""
        out = {}
        for t in list(self.parts):
            c = self.parts.pop(t)
            out[t] = {k: np.concatenate(c.pop(k)) for k in list(c)}
        return out

    def decode_specials(self) -> list[dict]:
        dec = msgspec.json.Decoder(float_hook=str.encode)   # exact ts; values converted later
        return [e for e in map(dec.decode, self.specials) if isinstance(e, dict)]

    def fill_correlation_from_flows(self, cols: dict, flow_batches: Callable) -> None:
        """Where GPU rows or API calls lack args.correlation, take the id of the ac2g-style flow
        that starts ("s") at the API call or ends ("f") at the GPU row. Rare: flow_batches()
        decodes the flow events (in lists) on demand."""
        missing = [t for t in GPU_TABLES + ("api_calls",)
                   if t in cols and (cols[t]["correlation"] < 0).any()]
        if not missing:
            return
        lookup: dict[tuple, int] = {}
        for flows in flow_batches():
            ts, ok = us_to_ns([e.ts for e in flows])
            for e, pid, tid, t, i, good in zip(flows, _ints([e.pid for e in flows]),
                                               _ints([e.tid for e in flows]), ts,
                                               _ints([e.id for e in flows]), ok):
                if good and i >= 0:
                    lookup[(e.ph == "s", pid, tid, t)] = i
        for t in missing:
            c, is_api = cols[t], t == "api_calls"
            for row in np.flatnonzero(c["correlation"] < 0):
                i = lookup.get((is_api, c["pid"][row], c["tid"][row], c["start"][row]), -1)
                if i >= 0:
                    c["correlation"][row] = i
                    self.filled += 1


def _device_stream(c: dict, args: list[_Args]) -> None:
    """device: args.device else the GPU pid; stream: args.stream else an integer tid."""
    dev, stream = _int_col(args, "device"), _int_col(args, "stream")
    c["device"] = np.where(dev >= 0, dev, c["pid"])
    c["stream"] = np.where(stream >= 0, stream, c["tid"])


def _external_ids(args: list[_Args]) -> np.ndarray:
    ext = _int_col(args, "external_id")
    if (ext < 0).any():       # 2021 traces say "external id"
        ext = np.where(ext >= 0, ext, _int_col(args, "external_id_2021"))
    return ext


# ----- columns -> tables -----------------------------------------------------------------------
def _timeline(cols: dict, specials: list[dict], build: _Builder) -> Timeline:
    """Sort each table by start, add categoricals and derived columns, build the frames."""
    tl = Timeline()
    vocab = {t: list(build.vocab[t]) for t in cols}
    cols = {t: _sorted(c) for t, c in cols.items()}
    if "api_calls" in cols:
        c = cols["api_calls"]
        c["api"] = pd.Categorical.from_codes(c["api"], categories=["runtime", "driver"])
        tl.api_calls = _frame("api_calls", c, [classify.strip_api_version(s)
                                               for s in vocab["api_calls"]])
    link = _api_link(tl.api_calls)
    for t in GPU_TABLES:
        if t in cols:     # pid: the launching process (the GPU "pid" is the device)
            cols[t]["pid"], cols[t]["graph_launched"] = link(cols[t]["correlation"])
    if "kernels" in cols:
        tl.kernels = _frame("kernels", cols["kernels"], vocab["kernels"])
    if "copies" in cols:
        kinds = [_copy_kind(s) for s in vocab["copies"]]
        tl.copies = _frame("copies", cols["copies"], vocab["copies"], **{
            k: [x[i] for x in kinds] for i, k in enumerate(("kind", "src_kind", "dst_kind"))})
    if "memsets" in cols:
        tl.memsets = _frame("memsets", cols["memsets"], vocab["memsets"],
                            mem_kind=[_memset_kind(s) for s in vocab["memsets"]])
    if "syncs" in cols:
        tl.syncs = _frame("syncs", cols["syncs"], vocab["syncs"],
                          sync_type=[_sync_type(s) for s in vocab["syncs"]])
    if "ranges" in cols:
        tl.ranges = _ranges(cols["ranges"], vocab["ranges"])
    if "python_frames" in cols:
        tl.python_frames = _python_frames(cols["python_frames"], vocab["python_frames"])
    elif build.call_stacks:
        from .call_stacks import frames_from_call_stacks
        cs = build.call_stacks
        tl.python_frames = frames_from_call_stacks(
            *(np.array([c[k] for c in cs], np.int64) for k in range(4)), [c[4] for c in cs])
    tl.metrics = _metrics(specials)
    return tl


def _sorted(c: dict) -> dict:
    """Rows by start, in place: the unsorted arrays are dropped one by one (memory peak)."""
    order = np.argsort(c["start"], kind="stable")
    for k in list(c):
        c[k] = c[k][order]
    return c


def _cat(codes: np.ndarray, labels: list[str]) -> pd.Categorical:
    """Categorical of labels[code]; labels may repeat (e.g. after stripping API versions)."""
    uniq, inv = np.unique(np.asarray(labels, dtype=object), return_inverse=True)
    return pd.Categorical.from_codes(inv.reshape(-1)[codes], categories=uniq)


def _frame(table: str, c: dict, names: list[str], **by_name: list[str]) -> pd.DataFrame:
    """The table's columns from c; names and by_name give labels per distinct event name."""
    if "name" in TABLES[table]:
        by_name["name"] = names
    data = {k: v for k, v in c.items() if k in TABLES[table]}
    data.update({k: _cat(c["name"], labels) for k, labels in by_name.items()})
    return make_table(table, data, len(c["start"]))


def _api_link(api: pd.DataFrame) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """correlation -> (pid of the launching API call or -1, launched through a graph?)."""
    corr = api["correlation"].to_numpy()
    keep = corr >= 0
    index = pd.Index(corr[keep])
    first = ~index.duplicated()
    index = index[first]
    pid = api["pid"].to_numpy()[keep][first]
    names = api["name"].cat
    graph = np.array(["GraphLaunch" in str(s) for s in names.categories] + [False], bool)
    graph = graph[names.codes.to_numpy()][keep][first]

    def link(c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos = index.get_indexer(c) if len(index) else np.full(len(c), -1)
        hit = (pos >= 0) & (c >= 0)
        safe = np.where(hit, pos, 0)
        return (np.where(hit, pid[safe], -1) if len(pid) else np.full(len(c), -1),
                hit & graph[safe] if len(graph) else hit)
    return link


def _ranges(c: dict, names: list[str]) -> pd.DataFrame:
    """Ops, annotations, ProfilerStep#N steps and GPU annotations; nested per (pid, tid)."""
    step = np.array([int(m.group(1)) if (m := _STEP.match(s)) else -1 for s in names])[c["name"]]
    is_step = (step >= 0) & (c["kind"] <= 1)
    c["step"] = np.where(is_step, step, -1)
    c["depth"], c["parent"] = _nest(c)
    c["kind"] = pd.Categorical.from_codes(np.where(is_step, 3, c["kind"]), categories=RANGE_KINDS)
    return _frame("ranges", c, names)


def _python_frames(c: dict, names: list[str]) -> pd.DataFrame:
    """ "path/file.py(123): func" -> file, line, function; "<built-in ...>" keeps its name."""
    parsed = [(m.group(1), int(m.group(2)), m.group(3)) if (m := _FRAME.match(s)) else (s, -1, s)
              for s in names]
    c["line"] = np.array([p[1] for p in parsed], np.int64)[c["name"]]
    c["depth"], c["parent"] = _nest(c)
    return _frame("python_frames", c, names, file=[p[0] for p in parsed],
                  function=[p[2] for p in parsed])


def _nest(c: dict) -> tuple[np.ndarray, np.ndarray]:
    """depth/parent per (pid, tid)."""
    key = (c["pid"] << 32) | (c["tid"] & 0xFFFFFFFF)
    return nest(key, c["start"], c["end"])


def _copy_kind(name: str) -> tuple[str, str, str]:
    """ "Memcpy HtoD (Pageable -> Device)" -> ("H2D", "pageable", "device")."""
    m = _MEMCPY.search(name)
    if not m:
        return "other", "unknown", "unknown"
    src, dst = (m.group(2) or "").lower(), (m.group(3) or "").lower()
    return (_COPY_KIND.get(m.group(1), "other"), _MEM_KIND.get(src, "unknown"),
            _MEM_KIND.get(dst, "unknown"))


def _memset_kind(name: str) -> str:
    m = _PAREN.search(name)
    return _MEM_KIND.get(m.group(1).lower(), "unknown") if m else "unknown"


def _sync_type(name: str) -> str:
    """Kineto cuda_sync names: Stream Sync, Event Sync, Stream Wait Event, Context Sync."""
    n = name.lower()
    for prefix, kind in (("stream wait", "stream_wait_event"), ("stream", "stream"),
                         ("event", "event"), ("context", "device"), ("device", "device")):
        if n.startswith(prefix):
            return kind
    return "unknown"


def _metrics(specials: list[dict]) -> pd.DataFrame:
    """Counter samples: CUPTI range-profiler args (one row per metric) and "C" events."""
    rows = []
    for e in specials:
        args, pid, name = e.get("args"), e.get("pid"), e.get("name") or ""
        per_kernel = e.get("cat") in COUNTER_CATS   # per-kernel: tl.kernel_counters instead
        if not isinstance(args, dict) or per_kernel or e.get("ph") != "C":
            continue
        for key, v in args.items():
            try:
                value = float(v)
            except (TypeError, ValueError):
                continue
            rows.append((pid if per_kernel and isinstance(pid, int) else -1, e.get("ts"),
                         key if per_kernel or not name else f"{name}.{key}", value))
    dev, ts, metric, value = zip(*rows) if rows else ((), (), (), ())
    ns, ok = us_to_ns(list(ts))
    frame = make_table("metrics", {"device": np.array(dev, np.int64), "ts": ns,
                                   "metric": pd.Categorical(metric), "value": np.array(value)},
                       len(rows))
    return frame[ok].reset_index(drop=True)


# ----- metadata --------------------------------------------------------------------------------
class _TraceInfo:
    """Top-level facts kept once the file buffer is gone."""

    def __init__(self, top: _Top, shapes: bool):
        self.top, self.shapes = top, shapes
        self.versions = {k: getattr(top, k) for k in _VERSION_KEYS if getattr(top, k) is not None}
        self.torch = _torch_version(top.metadata)
        top.metadata = msgspec.Raw()          # the only view of the buffer left in top


def _torch_version(raw: msgspec.Raw) -> str | None:
    """metadata.system.torch_env_info.torch_version (TraceLens-style runs)."""
    try:
        v = msgspec.json.decode(raw)["system"]["torch_env_info"]["torch_version"] if raw else None
    except (msgspec.DecodeError, KeyError, TypeError):
        return None
    return v if isinstance(v, str) and v else None


def _meta(path: Path, info: _TraceInfo, tl: Timeline, build: _Builder,
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


def _producer(info: _TraceInfo) -> str:
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
            guessed.append(_to_int(p.get("id", i)))
        devices.append(Device(
            id=_to_int(p.get("id", i)), name=name, vendor=vendor,
            sm_count=_opt_int(p.get("numSms")), memory_bytes=_opt_int(p.get("totalGlobalMem")),
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
    warp = _opt_int(p.get("warpSize")) or 32
    threads = _opt_int(p.get("maxThreadsPerMultiprocessor"))
    out = {"registers": _opt_int(p.get("regsPerMultiprocessor")),
           "warps": threads // warp if threads else None,
           "shared_memory": _opt_int(p.get("sharedMemPerMultiprocessor"))}
    out = {k: v for k, v in out.items() if v}
    return out or None


def _vendor(name: str | None, gcn_arch: Any) -> str | None:
    n = (name or "").lower()
    if gcn_arch or any(s in n for s in ("amd", "radeon", "instinct")):
        return "amd"
    if any(s in n for s in ("nvidia", "tesla", "geforce", "quadro", "titan", "rtx")):
        return "nvidia"
    return None


def _opt_int(v) -> int | None:
    x = _to_int(v)
    return x if x >= 0 else None


def _distributed(path: Path, info: Any, meta: Meta) -> None:
    """rank/world_size from distributedInfo; else a "rank<N>" in the file name (noted)."""
    if isinstance(info, dict):
        meta.rank, meta.world_size = _opt_int(info.get("rank")), _opt_int(info.get("world_size"))
        return
    m = re.search(r"(?:^|[^a-z])rank[-_]?(\d+)", path.name.lower())
    if m:
        meta.rank = int(m.group(1))
        meta.notes.append(f"rank {meta.rank} inferred from the file name (no distributedInfo)")


def _extra(info: _TraceInfo, tl: Timeline, build: _Builder, specials: list[dict]) -> dict:
    top = info.top
    extra: dict[str, Any] = {
        "trace_start_ns": tl.span[0] if any(tl.counts().values()) else None,
        "profiler_window_ns": build.window,
        "category_counts": dict(build.cat_counts),
        "versions": dict(info.versions, **({"torch": info.torch} if info.torch else {})),
        "profiler_flags": [k for k in _FLAG_KEYS if getattr(top, k)],
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

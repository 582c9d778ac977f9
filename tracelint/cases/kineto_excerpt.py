"""The Kineto half of excerpt.py: which events of a Kineto trace an excerpt keeps, as arrays.

Why arrays, read once: `case add` cuts the same trace many times (each candidate window, its
context halved until the excerpt fits), and each cut decoded the whole file again and walked
its events in Python: on the 287 MB reference that was 389 s and 1.9 GB for one `case add`.
The events are now read once per file (KinetoEvents.of keeps the last one read) into a column
per field, and a cut is a few array operations plus the writing of what it keeps. What is kept
is exactly what the per-event reading kept (excerpt.py says what).
"""
from __future__ import annotations

import bisect
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from ..errors import TraceFormatError
from ..importers.kineto_events import TABLE_OF_CAT

GPU_CATS = {c for c, t in TABLE_OF_CAT.items() if t in ("kernels", "copies", "memsets", "syncs")}
LAUNCH_CATS = {c for c, t in TABLE_OF_CAT.items() if t == "api_calls"}
HOST_CATS = {"cpu_op", "Operator", "user_annotation", "python_function"}
FLOW_CATS = {"ac2g", "async_cpu_to_gpu", "async"}
SPAN_CAT = "Trace"


class _Args(msgspec.Struct, gc=False):
    correlation: Any = None


class _Ev(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: _Args | None = None


_DECODE = msgspec.json.Decoder(_Ev, float_hook=str).decode
_DECODE_ALL = msgspec.json.Decoder(list[_Ev], float_hook=str).decode


def us_ns(v: Any) -> int | None:
    """Kineto µs (int, or decimal text via float_hook) -> exact int ns."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v * 1000
    try:
        return int(Decimal(str(v)) * 1000)
    except (InvalidOperation, ValueError):
        return None


def us_text(ns: int) -> str:
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


class KinetoEvents:
    """A Kineto trace's top level (raw slices), its events (raw slices) and, per event, what a
    cut asks of it. Events that do not decode as one are never kept."""

    _last: tuple[tuple, "KinetoEvents"] | None = None

    @classmethod
    def of(cls, src: Path, data_of) -> "KinetoEvents":
        """The events of src, read by data_of(src) unless the last file read is this one,
        unchanged."""
        st = src.stat()
        key = (str(src.resolve()), st.st_size, st.st_mtime_ns)
        if cls._last is None or cls._last[0] != key:
            cls._last = None                       # the old one freed before the new is read
            cls._last = (key, cls(src, data_of(src)))
        return cls._last[1]

    @classmethod
    def forget(cls) -> None:
        """Free the last trace read (case add is done with it)."""
        cls._last = None

    def __init__(self, src: Path, data: bytes):
        try:
            self.top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
            raws = msgspec.json.decode(self.top["traceEvents"], type=list[msgspec.Raw]) \
                if "traceEvents" in self.top else None
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise TraceFormatError(f"{src}: not a Kineto trace: {exc}") from None
        if raws is None:
            raise TraceFormatError(f"{src}: not a Kineto trace: no traceEvents")
        self.raws = raws
        self.n = n = len(raws)
        evs = _decode_each(self.top["traceEvents"], raws)
        ok = np.fromiter((e is not None for e in evs), bool, n)
        ph = [e.ph if e is not None else "" for e in evs]
        cat = [e.cat if e is not None else "" for e in evs]
        self.kind = [c if c else p if e is not None else "?" for e, p, c in zip(evs, ph, cat)]
        ts = [us_ns(e.ts) if e is not None else None for e in evs]
        has_ts = np.fromiter((t is not None for t in ts), bool, n)
        self.ts = np.fromiter((t if t is not None else 0 for t in ts), np.int64, n)
        self.end = self.ts + np.fromiter((us_ns(e.dur) or 0 if e is not None else 0 for e in evs),
                                         np.int64, n)
        self.has_ts = has_ts

        ph, cat = _coded(ph), _coded(cat)       # each value coded once, tested as arrays

        def among(coded: tuple[np.ndarray, dict], wanted) -> np.ndarray:
            codes, index = coded
            return np.isin(codes, [index[w] for w in wanted if w in index])
        self.is_meta = ok & among(ph, ("M",))
        is_x = ok & among(ph, ("X",))
        self.is_span = is_x & among(cat, (SPAN_CAT,))
        self.is_flow = ok & among(ph, ("s", "f", "t")) & among(cat, FLOW_CATS)
        # how a cut's window decides an event: kept always, if it overlaps the window (timed
        # complete events), or if it starts within it (other timed events); flows and events
        # that do not decode are decided by the GPU events kept (keep)
        timed_x = is_x & has_ts
        self.always = self.is_meta | (ok & ~self.is_flow & ~has_ts & ~among(ph, ("X", "B", "E")))
        self.overlaps = ~self.is_meta & ~self.is_flow & timed_x
        self.starts_in = ok & ~self.is_meta & ~self.is_flow & has_ts & ~is_x
        # flows: id by (pid, tid, ts) of their end ("f", at the GPU event) and start ("s")
        f_at: dict[tuple, Any] = {}
        s_at: dict[tuple, Any] = {}
        for i, e in enumerate(evs):
            if e is not None and e.cat in FLOW_CATS and isinstance(e.id, int):
                (f_at if e.ph == "f" else s_at if e.ph == "s" else {})[(e.pid, e.tid, ts[i])] = e.id
        gpu = is_x & among(cat, GPU_CATS)
        launch = is_x & among(cat, LAUNCH_CATS)
        #: the correlation a GPU event or a launch call carries, and whether it carries one
        self.gpu_corr, self.gpu_has = _correlations(evs, ts, gpu, f_at)
        self.launch_corr, self.launch_has = _correlations(evs, ts, launch, s_at)
        self.is_gpu, self.is_launch = gpu, launch
        self.is_host = is_x & has_ts & among(cat, HOST_CATS)
        self.is_span_cat = ok & among(cat, (SPAN_CAT,))
        lanes: dict[tuple, int] = {}
        try:                        # the thread of a launch call or a host range
            self.lane = np.fromiter((lanes.setdefault((e.pid, e.tid), len(lanes))
                                     if launch[i] or self.is_host[i] else -1
                                     for i, e in enumerate(evs)), np.int64, n)
        except TypeError as exc:
            raise TraceFormatError(f"{src}: malformed event: {exc}") from None
        # a flow event's id when an int (bools count as 0 and 1, as `id in set` reads them)
        self.flow_int = self.is_flow & np.fromiter((isinstance(e.id, int) if e is not None else False
                                                    for e in evs), bool, n)
        self.flow_id = np.fromiter((int(e.id) if self.flow_int[i] else 0
                                    for i, e in enumerate(evs)), np.int64, n)

    def keep(self, lo: int, hi: int) -> np.ndarray:
        """Which events the excerpt of [lo, hi] keeps (excerpt.py's module docstring)."""
        keep = self.always.copy()
        keep |= self.overlaps & (self.ts <= hi) & (self.end >= lo)
        keep |= self.starts_in & (self.ts >= lo) & (self.ts <= hi)
        kept_corr = np.unique(self.gpu_corr[keep & self.is_gpu & self.gpu_has])
        calls = ~keep & self.is_launch & self.launch_has & np.isin(self.launch_corr, kept_corr)
        keep |= calls
        if calls.any():   # host ranges on the call's thread that enclose an out-of-window call
            idx = np.flatnonzero(calls)
            times: dict[int, list[int]] = {}
            for lane, t in zip(self.lane[idx].tolist(), self.ts[idx].tolist()):
                times.setdefault(lane, []).append(t)
            times = {lane: sorted(ts) for lane, ts in times.items()}
            host = np.flatnonzero(~keep & self.is_host & np.isin(self.lane, list(times)))
            for i, lane, t, e in zip(host.tolist(), self.lane[host].tolist(),
                                     self.ts[host].tolist(), self.end[host].tolist()):
                ts = times[lane]
                j = bisect.bisect_left(ts, t)
                if j < len(ts) and ts[j] <= e:
                    keep[i] = True
        keep |= self.flow_int & np.isin(self.flow_id, kept_corr)
        return keep

    def payload(self, keep: np.ndarray, lo: int, hi: int, meta: dict, counts: dict):
        """The excerpt's JSON text, a piece at a time: every top-level key, traceEvents the
        kept events (the profiler span clipped to what is kept), and `tracelintExcerpt`, as
        msgspec writes the object; counts gets the kept events per category."""
        idx = np.flatnonzero(keep)
        timed = keep & self.has_ts & ~self.is_meta
        kept_ts, kept_end = self.ts[timed], self.end[timed & ~self.is_span_cat]
        first = int(kept_ts.min()) if len(kept_ts) else lo
        last = int(kept_end.max()) if len(kept_end) else hi
        excerpt = msgspec.json.encode({**meta, "events": len(idx), "source_events": self.n})
        keys = list(self.top) + [k for k in ("traceEvents", "tracelintExcerpt") if k not in self.top]
        for n, key in enumerate(keys):
            yield (b"," if n else b"{") + msgspec.json.encode(key) + b":"
            if key == "tracelintExcerpt":
                yield excerpt
            elif key != "traceEvents":
                yield bytes(self.top[key])
            else:
                yield b"[\n"
                for lo_i in range(0, len(idx), 4096):
                    raws = []
                    for i in idx[lo_i:lo_i + 4096].tolist():
                        raw = self.raws[i]
                        if self.is_span[i] and self.has_ts[i]:
                            s0 = max(int(self.ts[i]), first)
                            s1 = min(int(self.end[i]), last)
                            raw = _retime(raw, s0, max(s1 - s0, 0))
                        raws.append(bytes(raw))
                        counts[self.kind[i]] = counts.get(self.kind[i], 0) + 1
                    yield (b",\n" if lo_i else b"") + b",\n".join(raws)
                yield b"\n]"
        yield b"}"


def _coded(values: list) -> tuple[np.ndarray, dict]:
    """(a code per value, value -> code)."""
    index: dict = {}
    return np.fromiter((index.setdefault(v, len(index)) for v in values), np.int64, len(values)), index


def _decode_each(array: msgspec.Raw, raws: list) -> list:
    """The events as _Ev, None where one does not decode as one (one msgspec call when all do)."""
    try:
        return _DECODE_ALL(array)
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    out = []
    for r in raws:
        try:
            out.append(_DECODE(r))
        except (msgspec.DecodeError, msgspec.ValidationError):
            out.append(None)
    return out


def _correlations(evs: list, ts: list, which: np.ndarray, flows: dict) -> tuple[np.ndarray, np.ndarray]:
    """The correlation of each event in `which` (args.correlation when a non-negative int,
    else the flow id at its pid, tid and ts) and whether it has one."""
    out, has = np.zeros(len(evs), np.int64), np.zeros(len(evs), bool)
    for i in np.flatnonzero(which).tolist():
        e = evs[i]
        c = e.args.correlation if e.args is not None else None
        if not (isinstance(c, int) and not isinstance(c, bool) and c >= 0):
            c = flows.get((e.pid, e.tid, ts[i]))
        if c is not None:
            out[i], has[i] = int(c), True
    return out, has


def _retime(raw: msgspec.Raw, ts_ns: int, dur_ns: int) -> msgspec.Raw:
    """The same event with ts/dur replaced (exact µs text with 3 decimals)."""
    d = msgspec.json.decode(raw, type=dict[str, msgspec.Raw])
    d["ts"] = msgspec.Raw(us_text(ts_ns).encode())
    d["dur"] = msgspec.Raw(us_text(dur_ns).encode())
    return msgspec.Raw(msgspec.json.encode(d))

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

Modules: kineto_events (categories and event Structs), kineto_values (µs -> exact ns, integer
columns), kineto_columns (event chunks -> columns), kineto_tables (columns -> Timeline tables),
kineto_meta (devices, versions, rank, notes, extras), kineto_ranges (large files by byte
range); this one reads the file, decodes the top level and orders the steps.
"""
from __future__ import annotations

import contextlib
import re
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import msgspec

from ..errors import TraceFormatError
from .kineto_columns import Builder
from .kineto_events import FLOW_CATS, Event, Top
from ..heap import trim
from .kineto_values import us_to_ns

if TYPE_CHECKING:
    from ..timeline.model import Timeline

__all__ = ["load_kineto", "us_to_ns"]

CHUNK = 65536                       # events decoded per batch: bounds the transient Structs


# ----- entry point -----------------------------------------------------------------------------
def load_kineto(path, progress: Callable[[str, float], None] | None = None) -> Timeline:
    """Load a Kineto trace. Raises TraceFormatError (one line) for input that is not one."""
    path = Path(path)
    report = progress or (lambda stage, fraction: None)
    report("read", 0.0)
    tl = _load_in_ranges(path, report)       # large plain JSON: one byte range at a time
    if tl is not None:
        return tl
    from .gzip_staging import staged
    with staged(path) as plain:              # large gzip: the same, from a plain copy
        tl = _load_in_ranges(plain, report, source=path) if plain is not None else None
    if tl is not None:
        return tl
    data = _read(path)
    report("read", 1.0)
    top, raws = _decode_top(path, data)
    build = Builder()
    dec = _event_decoder()
    _decode_events(path, raws, dec, build, report)
    cols = build.columns()
    build.fill_correlation_from_flows(cols, partial(_flow_batches, raws, dec, build.flow_chunks))
    specials = build.decode_specials()
    shapes = bool(top.record_shapes) or data.find(b'"Input Dims"') >= 0
    del raws, data, build.specials         # drop every view of the file buffer before the frames
    return _finish(path, cols, specials, build, top, shapes, report)


def _finish(path: Path, cols: dict, specials: list[dict], build: Builder, top, shapes: bool,
            report, beside: Callable[[int], object] | None = None) -> Timeline:
    """The Timeline from the decoded columns. Its modules (pandas) are imported here, after the
    decode: a parallel load forks its workers first (kineto_parallel). beside: answer(i) of
    kineto_tables.ranges_work (the ranges' nesting, then the [memory] events' owners),
    computed beside this process (_ranges_beside)."""
    from .kineto_cupti import add_range_kernels
    from .kineto_memory import attach as attach_memory
    from .kineto_meta import TraceInfo, build_meta
    from .kineto_tables import build_timeline
    from ..timeline.schema import share_constant_tables
    info = TraceInfo(top, shapes=shapes)
    report("build", 0.0)
    tl = build_timeline(cols, specials, build, beside and (lambda: beside(0)))
    tl.meta = build_meta(path, info, tl, build, specials)
    trim()                                        # the sort's freed copies, before the next peak
    if beside:          # while the worker finds the memory owners; importers._load then checks
        share_constant_tables(tl)
    attach_memory(tl, build.memory, bool(info.top.profile_memory),   # [memory] events
                  beside and (lambda: beside(1)))
    add_range_kernels(tl, specials, us_to_ns)     # CUPTI counters: kernels with synthetic times
    report("build", 1.0)
    return tl


def _event_decoder():
    return msgspec.json.Decoder(Event, float_hook=str.encode).decode   # floats as exact text


def _load_in_ranges(path: Path, report, source: Path | None = None) -> Timeline | None:
    """kineto_ranges' path for a large plain-JSON file; None leaves it to the whole buffer.
    source: the file the trace came from, when `path` is a plain copy of it (gzip_staging)."""
    from . import kineto_ranges as kr
    build = Builder()
    try:
        if path.stat().st_size < kr.STREAM_MIN:
            return None
        top_bytes, ranges = kr.plan(path, path.stat().st_size)
        report("read", 1.0)
        from ..forking import load_workers
        n = load_workers()
        if n < 2:
            specials, firsts, shapes = kr.decode_in_ranges(path, ranges, build, report)
        else:
            from .kineto_parallel import decode_parallel
            specials, firsts, shapes = decode_parallel(path, ranges, build, report, n)
        top = msgspec.json.decode(top_bytes, type=Top)
    except (kr.NotSplittable, OSError, msgspec.DecodeError, TraceFormatError):
        return None
    with _ranges_beside(build, n >= 2) as (sorted_ranges, beside):
        cols = build.columns()
        if sorted_ranges is not None:
            cols["ranges"] = sorted_ranges
        build.fill_correlation_from_flows(cols, lambda: kr.flow_events(
            path, ranges, firsts, build.flow_chunks, FLOW_CATS))
        shapes = bool(top.record_shapes) or shapes or top_bytes.find(b'"Input Dims"') >= 0
        return _finish(source or path, cols, specials, build, top, shapes, report, beside)


@contextlib.contextmanager
def _ranges_beside(build: Builder, parallel: bool):
    """After a parallel decode: a forked worker started on the ranges' nesting and then the
    [memory] events' owners (kineto_tables.ranges_work), the two largest steps of the serial
    tail, while this process builds every table and, once the nesting is in, the ranges and
    the metadata. Yields (sorted ranges columns, the worker's answer(i)) or (None, None) to
    build all in this process."""
    if not parallel or "ranges" not in build.parts:
        yield None, None
        return
    from ..forking import beside
    from .kineto_tables import ranges_work, sort_by_start
    made: list[dict] = []

    def sorted_ranges() -> dict:
        """Made once per process: the worker forks before this process concatenates and sorts
        them and makes its own from its copy of the parts (the same order; it starts 40 ms
        sooner); this process uses its own, and so does ranges_work here if the worker fails."""
        if not made:
            made.append(sort_by_start(build.columns(only=("ranges",))["ranges"]))
        return made[0]
    names = list(build.vocab["ranges"])
    with beside(partial(ranges_work, sorted_ranges, names, build.memory)) as answer:
        yield sorted_ranges(), answer


def _flow_batches(raws: list, dec, chunks: list[int]):
    """The flow events of each chunk that holds one, decoded again (a list per chunk)."""
    for lo in sorted(set(chunks)):
        yield [e for e in map(dec, raws[lo:lo + CHUNK]) if e.cat in FLOW_CATS]


def _decode_events(path: Path, raws: list, dec, build: Builder, report) -> None:
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
    from ..io import decompressed
    return decompressed(data, path)               # bounded: ratio and absolute caps


def _decode_top(path: Path, data: bytes) -> tuple[Top, list[msgspec.Raw]]:
    """Split the event array into raw slices; a bare JSON array is taken as traceEvents."""
    space = re.compile(rb"\s*")
    start = space.match(data).end()
    buf: Any = data
    if data[start:start + 3] == b"\xef\xbb\xbf":       # UTF-8 BOM: skip without copying
        buf = memoryview(data)[start + 3:]
        start = space.match(buf).end()                  # and the white space after it
    first = bytes(buf[start:start + 1])
    try:
        if first == b"{":
            top = msgspec.json.decode(buf, type=Top)
            raws, top.traceEvents = top.traceEvents, None
            if raws is None:
                raise _fail(path, "not a Kineto trace: JSON object without a traceEvents array")
            return top, raws
        if first == b"[":
            return Top(), msgspec.json.decode(buf, type=list[msgspec.Raw])
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

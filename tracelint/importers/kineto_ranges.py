"""Large plain-JSON Kineto traces, read and decoded one byte range at a time instead of from
one buffer holding the whole file.

Why: the whole-buffer path holds the file plus one msgspec.Raw per event while the columns are
built (about twice the file at the peak). A raw newline never occurs inside a JSON
string, so `},<newline>{` is always between two objects (a file written on one line is cut
before `{"ph"` and the like); cut there, each range `[` + bytes + `]`
is a JSON array of events that decodes on its own. A cut between two objects nested deeper
than the events leaves ranges with unbalanced brackets, which fail to decode: then (and for a
file with no cut at all, or any other surprise) kineto_json's whole-buffer path runs instead,
so results never depend on this path's guesses. Gzip input is read from a plain copy
(gzip_staging).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import msgspec

from .kineto_events import Event, TaggedEvent

RANGE_BYTES = 4 << 20             # bytes per range: bounds the transient buffer and Raw slices
#: The file's last TAIL_RANGES * RANGE_BYTES are cut in ranges a quarter that size: processes
#: that take ranges from one counter (kineto_parallel) then end within a small range of each
#: other, where one waited up to a whole 4 MB range (40-60 ms) for the other.
TAIL_RANGES = 2
#: Smaller files take the whole-buffer path. The byte ranges decode events straight into Structs
#: (no raw slice per event), and from two ranges on several processes decode them: on real
#: traces of 9-53 MB, 0.74-0.86x the wall time of the whole-buffer path at the same CPU, and
#: 0.94x on one of 1 MB (docs/performance.md, twenty-seventh pass). It was 64 MiB, set when
#: the ranges were there to bound memory, before they were decoded in parallel.
STREAM_MIN = 1 << 20
_HEAD_MAX = 4 << 20               # "traceEvents" must start within this many bytes
_CUT_WINDOW = 64 << 10            # bytes read at a time while looking for the next cut
_CUT = re.compile(rb"\}[ \t\r]*,[ \t\r]*\n[ \t\r\n]*(?=\{)")
#: A file with no such newline in its first few MB (events on one line: a trace loaded and dumped
#: again by a script) is cut before what starts an event as Kineto writes it; a cut that
#: lands inside a nested object or a string fails to decode, as above.
_CUT_ONE_LINE = re.compile(rb'\}[ \t\r\n]*,[ \t\r\n]*(?=\{"(?:ph|cat|name|pid|ts)")')
_KEY = re.compile(rb'(?<!\\)"traceEvents"\s*:\s*\[')


class NotSplittable(Exception):
    """This file is left to the whole-buffer path."""


def _pread(path: Path, start: int, length: int) -> bytes:
    with open(path, "rb") as fh:
        return os.pread(fh.fileno(), length, start)


def plan(path: Path, size: int) -> tuple[bytes, list[tuple[int, int]]]:
    """(the top-level object with an empty traceEvents array, byte ranges of the events)."""
    head = _pread(path, 0, min(size, _HEAD_MAX))
    body = head.lstrip()
    bom = len(head) - len(body) + 3 if body[:3] == b"\xef\xbb\xbf" else 0   # UTF-8 BOM
    if head[:2] == b"\x1f\x8b" or head[bom:].lstrip()[:1] != b"{":
        raise NotSplittable("gzip or not a JSON object")
    m = _KEY.search(head)
    if not m:
        raise NotSplittable("no traceEvents key near the start")
    first = m.end()
    cut = _CUT if _CUT.search(head, first) else _CUT_ONE_LINE
    cuts = []                          # (end of the previous range, start of the next)

    def after(at: int) -> int:        # where to look for the next cut
        return at + (RANGE_BYTES if size - at > TAIL_RANGES * RANGE_BYTES else RANGE_BYTES // 4)
    target = after(first)
    while target < size:
        window = _pread(path, target, _CUT_WINDOW)
        c = cut.search(window)
        if not c:
            target += _CUT_WINDOW
            continue
        cuts.append((target + c.start() + 1, target + c.end()))
        target = after(target + c.end())
    starts = [first] + [b for _, b in cuts]
    ends = [a for a, _ in cuts]
    close, top = _array_end(path, size, starts[-1], head[bom:m.end()])
    return top, list(zip(starts, ends + [close]))


def _array_end(path: Path, size: int, last_start: int, prefix: bytes) -> tuple[int, bytes]:
    """The closing `]` of traceEvents: the last one after which the rest of the file completes
    the top-level object and before which the last range decodes as an array."""
    tail = _pread(path, last_start, size - last_start)
    p = len(tail)
    for _ in range(16):
        p = tail.rfind(b"]", 0, p)
        if p < 0:
            break
        top = prefix + b"]" + tail[p + 1:]
        try:
            msgspec.json.decode(top)
            msgspec.json.decode(b"[" + tail[:p] + b"]", type=list[msgspec.Raw])
        except msgspec.DecodeError:
            continue
        return last_start + p, top
    raise NotSplittable("end of traceEvents not found")


def read_range(path: Path, start: int, end: int) -> bytearray:
    """`[` + the bytes of one range + `]`, read in place: no copy."""
    buf = bytearray(end - start + 2)
    buf[0], buf[-1] = ord("["), ord("]")
    with open(path, "rb") as fh:
        fh.seek(start)
        if fh.readinto(memoryview(buf)[1:-1]) != end - start:
            raise NotSplittable("file changed while reading")
    return buf


def _split(buf: bytearray) -> list[msgspec.Raw]:
    try:
        return msgspec.json.decode(buf, type=list[msgspec.Raw])
    except msgspec.DecodeError as exc:      # a cut inside a nested object: not event boundaries
        raise NotSplittable(str(exc)) from None


class LazyRaws:
    """The raw slices of one range's events (a sequence aligned with its decoded events),
    split from the range buffer on first use. Most ranges never need them: the events are
    decoded straight from the buffer, one msgspec call per range."""

    def __init__(self, buf: bytearray):
        self._buf, self._list = buf, None

    def _all(self) -> list[msgspec.Raw]:
        if self._list is None:
            self._list, self._buf = _split(self._buf), None
        return self._list

    def __len__(self) -> int:
        return len(self._all())

    def __iter__(self):
        return iter(self._all())

    def __getitem__(self, i):
        return self._all()[i]


def decode_in_ranges(path: Path, ranges: list[tuple[int, int]], build, report):
    """Decode each range straight into event Structs (one msgspec call, no Raw slice per
    event; flows as their category only, kineto_events.TaggedEvent) and feed them to build as
    one chunk (row order does not depend on the chunks: kineto_columns.Builder.add_chunk); the
    Structs of a range die before the next is read. Special events are decoded range by range.
    Returns (specials, first event index of each range, whether an op had "Input Dims")."""
    decode = msgspec.json.Decoder(list[TaggedEvent], float_hook=str.encode).decode  # exact ts
    lo, specials, firsts = 0, [], []
    for i, (start, end) in enumerate(ranges):
        buf = read_range(path, start, end)
        try:
            decoded = decode(buf)
        except msgspec.DecodeError as exc:   # the whole-buffer path words the error
            raise NotSplittable(str(exc)) from None
        firsts.append(lo)
        build.add_chunk(lo, decoded, LazyRaws(buf))   # flows: their category and phase only
        specials += build.decode_specials()
        build.specials = []
        lo += len(decoded)
        del decoded, buf
        report("decode", (i + 1) / len(ranges))
    return specials, firsts, build.saw_dims


def flow_events(path: Path, ranges: list[tuple[int, int]], firsts: list[int], chunks: list[int],
                flow_cats):
    """The flow events of each range that holds some (re-read only when a correlation is
    missing); chunks: the first event index of those ranges (Builder.flow_chunks)."""
    decode = msgspec.json.Decoder(list[Event], float_hook=str.encode).decode
    for lo in sorted(set(chunks)):
        start, end = ranges[firsts.index(lo)]
        yield [e for e in decode(read_range(path, start, end)) if e.cat in flow_cats]

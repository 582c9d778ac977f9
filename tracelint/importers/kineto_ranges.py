"""Large plain-JSON Kineto traces, read and decoded one byte range at a time instead of from
one buffer holding the whole file.

Why: the whole-buffer path holds the file plus one msgspec.Raw per event while the columns are
built (about twice the file at the peak). A raw newline never occurs inside a JSON
string, so `},<newline>{` is always between two objects; cut there, each range `[` + bytes + `]`
is a JSON array of events that decodes on its own. A cut between two objects nested deeper
than the events leaves ranges with unbalanced brackets, which fail to decode: then (and for a
file without such newlines, gzip input, or any other surprise) kineto_json's whole-buffer path
runs instead, so results never depend on this path's guesses.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import msgspec

RANGE_BYTES = 4 << 20             # bytes per range: bounds the transient buffer and Raw slices
STREAM_MIN = 64 << 20             # smaller files take the whole-buffer path
_HEAD_MAX = 4 << 20               # "traceEvents" must start within this many bytes
_CUT = re.compile(rb"\}[ \t\r]*,[ \t\r]*\n[ \t\r\n]*(?=\{)")
_KEY = re.compile(rb'(?<!\\)"traceEvents"\s*:\s*\[')


class NotSplittable(Exception):
    """This file is left to the whole-buffer path."""


def _pread(path: Path, start: int, length: int) -> bytes:
    with open(path, "rb") as fh:
        return os.pread(fh.fileno(), length, start)


def plan(path: Path, size: int) -> tuple[bytes, list[tuple[int, int]]]:
    """(the top-level object with an empty traceEvents array, byte ranges of the events)."""
    head = _pread(path, 0, min(size, _HEAD_MAX))
    if head[:2] == b"\x1f\x8b" or head.lstrip()[:1] != b"{":
        raise NotSplittable("gzip or not a JSON object")
    m = _KEY.search(head)
    if not m:
        raise NotSplittable("no traceEvents key near the start")
    first = m.end()
    cuts = []                          # (end of the previous range, start of the next)
    target = first + RANGE_BYTES
    while target < size:
        window = _pread(path, target, 1 << 20)
        c = _CUT.search(window)
        if not c:
            target += 1 << 20
            continue
        cuts.append((target + c.start() + 1, target + c.end()))
        target = target + c.end() + RANGE_BYTES
    starts = [first] + [b for _, b in cuts]
    ends = [a for a, _ in cuts]
    close, top = _array_end(path, size, starts[-1], head[:m.end()])
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


def _raws(path: Path, start: int, end: int) -> tuple[list[msgspec.Raw], bool]:
    """The events of one range as Raw slices, and whether it mentions "Input Dims"."""
    buf = bytearray(end - start + 2)         # `[` + the range + `]`, read in place: no copy
    buf[0], buf[-1] = ord("["), ord("]")
    with open(path, "rb") as fh:
        fh.seek(start)
        if fh.readinto(memoryview(buf)[1:-1]) != end - start:
            raise NotSplittable("file changed while reading")
    try:
        return msgspec.json.decode(buf, type=list[msgspec.Raw]), buf.find(b'"Input Dims"') >= 0
    except msgspec.DecodeError as exc:      # a cut inside a nested object: not event boundaries
        raise NotSplittable(str(exc)) from None


def decode_in_ranges(path: Path, ranges: list[tuple[int, int]], build, dec, chunk: int, report):
    """Feed every event to build in the same batches (of `chunk` events) as one pass over the whole
    file (a batch may span two ranges), so tables come out in the same row order. Special
    events are decoded batch by batch, so no Raw outlives its range's buffer for long.
    dec: raw event -> kineto_json's event Struct; chunk: its batch size.
    Returns (specials, first event index of each range, shapes seen)."""
    pending: list = []
    lo, specials, firsts, shapes = 0, [], [], False
    for i, (start, end) in enumerate(ranges):
        raws, dims = _raws(path, start, end)
        shapes |= dims
        firsts.append(lo + len(pending))
        pending += raws
        del raws
        last = i == len(ranges) - 1
        while len(pending) >= chunk or (last and pending):
            part, pending = pending[:chunk], pending[chunk:]
            try:
                events = list(map(dec, part))
            except msgspec.DecodeError as exc:   # the whole-buffer path words the error
                raise NotSplittable(str(exc)) from None
            build.add_chunk(lo, events, part)
            specials += build.decode_specials()
            build.specials = []
            lo += len(part)
        report("decode", (i + 1) / len(ranges))
    return specials, firsts, shapes



def flow_events(path: Path, ranges: list[tuple[int, int]], firsts: list[int], batches: list[int],
                dec, chunk: int, flow_cats):
    """The flow events of each batch that holds some (re-read only when a correlation is
    missing): batch lo covers events lo .. lo + chunk - 1, in one or two ranges."""
    for lo in sorted(set(batches)):
        events = []
        for i, (start, end) in enumerate(ranges):
            first, nxt = firsts[i], firsts[i + 1] if i + 1 < len(firsts) else None
            if (nxt is None or nxt > lo) and first < lo + chunk:
                raws = _raws(path, start, end)[0]
                events += raws[max(0, lo - first):lo + chunk - first]
        yield [e for e in map(dec, events) if e.cat in flow_cats]

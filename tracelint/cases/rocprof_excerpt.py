"""Excerpts of rocprofv3 JSON traces (`--output-format json`), for case excerpts.

Each process's records are cut to the window: GPU work (dispatches, copies) that overlaps it;
the HIP calls that overlap it or enqueued kept GPU work (by `correlation_id.internal`, the
link the importer follows), wherever they lie; the roctx ranges that overlap the window
widened to those calls (so the ranges around a kept call stay). Records without both
timestamps, and everything that is not a record (metadata, agents, kernel symbols, strings),
are kept whole. Records are sliced from the file's bytes (msgspec.Raw), never re-encoded, and
only their times and ids are decoded.
"""
from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from ..importers.rocprof_json import TOOL_KEY

#: host-side record lists: kept by time or by the GPU work they enqueued
API_KINDS = ("hip_api", "hsa_api")
MARKER_KINDS = ("marker_api",)


class _Corr(msgspec.Struct, gc=False):
    internal: Any = -1


class _When(msgspec.Struct, gc=False):
    start_timestamp: Any = None
    end_timestamp: Any = None
    correlation_id: _Corr | None = None


_RAW_OBJECT = msgspec.json.Decoder(dict[str, msgspec.Raw])
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_WHEN = msgspec.json.Decoder(list[_When])
_ENC = msgspec.json.Encoder()
#: kept records joined into pieces of about this many bytes: the pieces are compressed as they
#: come, so a cut over its size budget stops early (excerpt._write_gz)
PIECE_BYTES = 1 << 20


def rocprof_excerpt(data: bytes, lo: int, hi: int, info: dict, counts: dict[str, int]):
    """The excerpt's JSON text in pieces (bytes), counting kept records per kind in `counts`.
    Raises msgspec.DecodeError / ValidationError on text that is not rocprofv3 JSON."""
    top = _RAW_OBJECT.decode(data)
    yield b"{"
    for n, (key, raw) in enumerate(top.items()):
        yield (b"," if n else b"") + _ENC.encode(key) + b":"
        if key != TOOL_KEY:
            yield bytes(raw)
            continue
        yield b"["
        for p, proc in enumerate(_RAW_LIST.decode(raw)):
            if p:
                yield b","
            yield from _process(proc, lo, hi, counts)
        yield b"]"
    yield b',"tracelintExcerpt":' + _ENC.encode(info) + b"}"


def _process(raw: msgspec.Raw, lo: int, hi: int, counts: dict[str, int]):
    proc = _RAW_OBJECT.decode(raw)
    yield b"{"
    for n, (key, value) in enumerate(proc.items()):
        yield (b"," if n else b"") + _ENC.encode(key) + b":"
        if key == "buffer_records" and _first(value) == b"{":
            yield from _records(_RAW_OBJECT.decode(value), lo, hi, counts)
        else:
            yield bytes(value)
    yield b"}"


def _records(buffers: dict[str, msgspec.Raw], lo: int, hi: int, counts: dict[str, int]):
    lists = {k: (_RAW_LIST.decode(v), _when(v)) for k, v in buffers.items() if _first(v) == b"["}
    keep: dict[str, np.ndarray] = {}
    gpu_corr: list[np.ndarray] = []
    for kind, (items, when) in lists.items():          # GPU work (and anything else timed)
        if kind in API_KINDS or kind in MARKER_KINDS:
            continue
        start, end, corr, timed = _times(when)
        keep[kind] = ~timed | ((start <= hi) & (end >= lo))
        gpu_corr.append(corr[keep[kind] & timed])
    corr = np.unique(np.concatenate(gpu_corr)) if gpu_corr else np.zeros(0, np.int64)
    a, b = lo, hi
    for kind in API_KINDS:                              # the calls that enqueued kept work
        if kind in lists:
            start, end, c, timed = _times(lists[kind][1])
            keep[kind] = ~timed | ((start <= hi) & (end >= lo)) | (timed & np.isin(c, corr))
            calls = keep[kind] & timed
            if calls.any():
                a, b = min(a, int(start[calls].min())), max(b, int(end[calls].max()))
    for kind in MARKER_KINDS:                           # ranges around the kept calls
        if kind in lists:
            start, end, _, timed = _times(lists[kind][1])
            keep[kind] = ~timed | ((start <= b) & (end >= a))
    yield b"{"
    for n, (key, value) in enumerate(buffers.items()):
        yield (b"," if n else b"") + _ENC.encode(key) + b":"
        if key not in lists:
            yield bytes(value)
            continue
        items = lists[key][0]
        kept = np.flatnonzero(keep[key]).tolist()
        counts[key] = counts.get(key, 0) + len(kept)
        yield b"["
        piece: list[bytes] = []
        size = 0
        for n_kept, i in enumerate(kept):
            piece.append(bytes(items[i]))
            size += len(piece[-1])
            if size >= PIECE_BYTES or n_kept == len(kept) - 1:
                yield (b"," if n_kept >= len(piece) else b"") + b",".join(piece)
                piece, size = [], 0
        yield b"]"
    yield b"}"


def _first(raw: msgspec.Raw) -> bytes:
    return bytes(memoryview(raw)[:1])


def _when(raw: msgspec.Raw) -> list[_When]:
    """Each item's times and id; items that are not objects read as untimed."""
    try:
        return _WHEN.decode(raw)
    except msgspec.ValidationError:
        return [_When() for _ in _RAW_LIST.decode(raw)]


def _times(when: list[_When]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, correlation, timed) of records; an untimed one has -1s."""
    def num(v) -> int:
        try:
            return int(v)
        except (TypeError, ValueError):
            return -1
    start = np.fromiter((num(w.start_timestamp) for w in when), np.int64, len(when))
    end = np.fromiter((num(w.end_timestamp) for w in when), np.int64, len(when))
    corr = np.fromiter((num(w.correlation_id.internal) if w.correlation_id else -1 for w in when),
                       np.int64, len(when))
    timed = (start >= 0) & (end >= 0)
    return start, end, corr, timed

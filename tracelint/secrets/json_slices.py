"""Raw JSON traces as slices: the file's bytes (gunzipped under the caps), the top level split
into raw slices with msgspec, the traceEvents array, and the byte pre-filter that decides which
slices can hold a match and are decoded at all. Shared by the scan and by redaction."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

import msgspec

from ..errors import TraceFormatError
from . import patterns as P

#: A raw JSON slice that cannot contain a match is never decoded. The bytes are first
#: lower-cased and squeezed (digits, spaces and punctuation no needle uses are deleted, in one
#: C pass): the needle searches then read half the bytes. Squeezing can only add matches
#: (false candidates cost a decode), never hide one. Escapes force decoding.
BYTE_NEEDLES = tuple(n.encode() for n in (*P.SECRET_NEEDLES, *P.PERSONAL_NEEDLES,
                                          *P.JSON_KEY_NEEDLES)) + (b"\\u", b"\\/")
_KEEP = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-:/@=\"\\?")
_LOWER = bytes((c + 32) if 65 <= c <= 90 else c for c in range(256))
_DELETE = bytes(c for c in range(256) if c not in _KEEP)
assert all(set(n) <= _KEEP for n in BYTE_NEEDLES)


def squeeze(data) -> bytes:
    return bytes(data).translate(_LOWER, _DELETE)


#: P.BENIGN_JSON_KEYS as they read squeezed, with their quotes and colon: a needle cannot
#: reach into one from outside (needles hold no quote), so deleting them hides no match
_BENIGN = tuple(b'"' + squeeze(k.encode()) + b'":' for k in P.BENIGN_JSON_KEYS)


def _unbenign(squeezed: bytes) -> bytes:
    for key in _BENIGN:
        squeezed = squeezed.replace(key, b"")
    return squeezed


#: The top-level object as raw slices per key (also used for the metadata-only quick scan).
RAW_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])


def read_json_bytes(path: str | Path) -> tuple[bytes, bool]:
    """(decompressed bytes, was_gzip)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    from ..io import GZIP_MAGIC, decompressed
    return decompressed(data, path), data[:2] == GZIP_MAGIC


def split_json(path: str | Path, data: bytes) -> tuple[str, dict[str, msgspec.Raw] | list[msgspec.Raw]]:
    """('object', {key: raw}) or ('array', [raw, ...]); a clean one-line error otherwise."""
    body = data.lstrip()
    if body[:3] == b"\xef\xbb\xbf":
        body = body[3:].lstrip()
    try:
        if body[:1] == b"{":
            return "object", RAW_TOP.decode(body)
        if body[:1] == b"[":
            return "array", RAW_LIST.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        kind = "truncated JSON" if "truncated" in str(exc) else "malformed JSON"
        msg = " ".join(str(exc).split())[:200]
        raise TraceFormatError(f"{path}: {kind} ({msg})") from None
    raise TraceFormatError(f"{path}: not a JSON trace (expected an object or array)")


def events_of(kind: str, top) -> tuple[list, list[msgspec.Raw]]:
    """(path prefix, raw events) of the traceEvents array, when it is one."""
    if kind == "array":
        return [], top
    raw = top.get("traceEvents")
    if raw is None:
        return ["traceEvents"], []
    try:
        return ["traceEvents"], RAW_LIST.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return ["traceEvents"], []


#: A JSON trace with this much text or more is read a byte range of events at a time by a deep
#: scan and by redact (event_ranges), not whole: a 274 MB trace took `redact --check` to a
#: peak of 470 MiB and `redact` to 651 MiB, the file plus a raw slice per event.
STREAM_FROM = 64 << 20


@contextlib.contextmanager
def event_ranges(path: str | Path):
    """(the top-level object as raw slices, its traceEvents empty; the plain file; the byte
    ranges of its events, kineto_ranges.plan's) for a large trace that can be cut between
    events (gzip: from a plain copy, removed on leaving), else None: it is read whole."""
    from ..importers import kineto_ranges as kr
    from ..importers.gzip_staging import staged
    from ..io import json_size
    path = Path(path)
    if json_size(path) < STREAM_FROM:
        yield None
        return
    with staged(path) as plain:
        src = plain or path
        try:
            top, ranges = kr.plan(src, src.stat().st_size)
            top = RAW_TOP.decode(top)
        except (kr.NotSplittable, OSError, msgspec.DecodeError):
            yield None
            return
        yield top, src, ranges


def range_events(src: Path, ranges: list[tuple[int, int]]) -> Iterator[list[msgspec.Raw]]:
    """The raw events of each range in turn; kineto_ranges.NotSplittable when a range is not
    a list of values (a cut inside a nested object: the caller reads the file whole)."""
    from ..importers import kineto_ranges as kr
    for start, end in ranges:
        try:
            yield RAW_LIST.decode(kr.read_range(src, start, end))
        except msgspec.DecodeError as exc:
            raise kr.NotSplittable(str(exc)) from None


def suspicious_events(raws: list, needles: tuple[bytes, ...] = BYTE_NEEDLES) -> list[int]:
    """The indexes of the raw slices that could hold a match: those whose squeezed bytes hold
    a needle. The slices are joined with a byte no needle holds and squeezed at once, and each
    needle is searched once over all of them, not once per slice: on a 55 MB trace of 132 k
    events, 0.30 s against 1.2 s. Needles whose 3-byte pieces never occur in the joined
    bytes are not searched for (_trigrams). In batches of about BATCH_BYTES of slices, so the
    joined copy stays small beside the file."""
    import numpy as np
    if not len(raws):
        return []
    qs = sorted({squeeze(n) for n in needles} - {b""})
    ends = np.cumsum(np.fromiter(map(len, raws), np.int64, len(raws)))
    cuts = np.searchsorted(ends, np.arange(BATCH_BYTES, int(ends[-1]), BATCH_BYTES))
    out: list[int] = []
    for lo, hi in zip([0, *(cuts + 1)], [*(cuts + 1), len(raws)]):
        if lo < hi:
            out += [int(lo) + k for k in _suspicious_batch(raws[lo:hi], qs)]
    return out


def suspicious_items(raws: list, split_min: int, needles: tuple[bytes, ...] = BYTE_NEEDLES) -> list[int]:
    """suspicious_events of a value's items, in order, except that items of split_min bytes or
    more are always read: they are split in turn, and the pre-filter would copy each whole."""
    big = [i for i, raw in enumerate(raws) if len(raw) >= split_min]
    if not big:
        return suspicious_events(raws, needles)
    small = [i for i, raw in enumerate(raws) if len(raw) < split_min]
    return sorted(big + [small[k] for k in suspicious_events([raws[i] for i in small], needles)])


#: raw bytes of slices joined at a time by suspicious_events
BATCH_BYTES = 16 << 20


def _suspicious_batch(raws: list, qs: list[bytes]) -> list[int]:
    import numpy as np
    joined = _unbenign(_SEPARATOR.join(raws).translate(_LOWER, _DELETE_BUT_SEPARATOR))
    cuts = np.flatnonzero(np.frombuffer(joined, np.uint8) == _SEPARATOR[0])
    if len(cuts) != len(raws) - 1:     # a slice held the separator itself (not valid JSON)
        joined = _unbenign(_SEPARATOR.join([squeeze(r) for r in raws]))
        cuts = np.flatnonzero(np.frombuffer(joined, np.uint8) == _SEPARATOR[0])
    starts = np.concatenate([[0], cuts + 1, [len(joined) + 1]])    # slice k: [starts[k], ...)
    seen = _trigrams(joined)
    hit: set[int] = set()
    for q in qs:
        if not seen[_codes(q)].all():            # (a needle under 3 bytes has no codes)
            continue
        at = joined.find(q)
        while at >= 0:
            k = int(np.searchsorted(starts, at, side="right")) - 1
            hit.add(k)
            at = joined.find(q, int(starts[k + 1]))       # the next slice: one hit is enough
    return sorted(hit)


#: joins the slices: JSON text never holds it raw, squeezing deletes it from a slice, and no
#: needle holds it, so no needle is found across two slices
_SEPARATOR = b"\x01"
_DELETE_BUT_SEPARATOR = _DELETE.replace(_SEPARATOR, b"")
#: each byte a squeezed slice can hold as a 6-bit code (the others, the separator among them,
#: share code 63): three bytes make an 18-bit code
_CODE = bytes(sorted(_KEEP - set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")).index(c)
              if c in _KEEP and not 65 <= c <= 90 else 63 for c in range(256))
assert max(c for c in _CODE if c != 63) < 63


def _codes(q: bytes):
    """The 18-bit codes of every 3 bytes in q."""
    import numpy as np
    a = np.frombuffer(q.translate(_CODE), np.uint8).astype(np.uint32)
    return (a[:-2] << 12) | (a[1:-1] << 6) | a[2:]


def _trigrams(data: bytes):
    """Which 18-bit codes of 3 bytes in a row occur in data (a 256 KiB table); in bounded
    pieces of temporary memory."""
    import numpy as np
    seen = np.zeros(1 << 18, bool)
    step = 1 << 22
    for lo in range(0, max(len(data) - 2, 0), step):
        seen[_codes(data[lo:lo + step + 2])] = True
    return seen

"""Raw JSON traces as slices: the file's bytes (gunzipped under the caps), the top level split
into raw slices with msgspec, the traceEvents array, and the byte pre-filter that decides which
slices can hold a match and are decoded at all. Shared by the scan and by redaction."""
from __future__ import annotations

from pathlib import Path

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


#: The top-level object as raw slices per key (also used for the metadata-only quick scan).
RAW_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])


def read_json_bytes(path: str | Path) -> tuple[bytes, bool]:
    """(decompressed bytes, was_gzip)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if data[:2] == b"\x1f\x8b":
        from ..io import gunzip_capped
        return gunzip_capped(data, path), True
    return data, False


def split_json(path: str | Path, data: bytes) -> tuple[str, dict[str, msgspec.Raw] | list[msgspec.Raw]]:
    """('object', {key: raw}) or ('array', [raw, ...]); a clean one-line error otherwise."""
    body = data.lstrip()
    if body[:3] == b"\xef\xbb\xbf":
        body = body[3:].lstrip()
    try:
        if body[:1] == b"{":
            return "object", RAW_TOP.decode(body)
        if body[:1] == b"[":
            return "array", _RAW_LIST.decode(body)
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
        return ["traceEvents"], _RAW_LIST.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return ["traceEvents"], []


def needles_in(data: bytes, needles: tuple[bytes, ...] = BYTE_NEEDLES) -> tuple[bytes, ...]:
    """The needles present in `data`, squeezed (what suspicious() takes).

    Big buffers first get a table of the byte pairs they contain (one vectorised pass): a
    needle with a pair that never occurs cannot occur, and is not searched for.
    """
    small = squeeze(data)
    cands = [q for q in {squeeze(n) for n in needles} if q]
    if len(small) > (1 << 20) and cands:
        import numpy as np
        a = np.frombuffer(small, np.uint8)
        seen = np.zeros(65536, bool)
        for lo in range(0, len(a) - 1, 1 << 24):          # bounded temporary memory
            part = a[lo:lo + (1 << 24) + 1]
            seen[(part[:-1].astype(np.uint16) << 8) | part[1:]] = True
        cands = [q for q in cands if all(seen[(q[i] << 8) | q[i + 1]] for i in range(len(q) - 1))]
    return tuple(q for q in cands if q in small)


def suspicious(raw: msgspec.Raw | bytes, needles: tuple[bytes, ...]) -> bool:
    """Could this raw slice hold a match? `needles`: from needles_in()."""
    if not needles:
        return False
    small = squeeze(raw)
    return any(n in small for n in needles)

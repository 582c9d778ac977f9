"""Scan a trace file (Nsight Systems SQLite export, Kineto JSON / JSON.gz) for secrets and
personal data. Returns Hits: where (table/column/row or JSON path), what kind, a masked
preview — never the value itself in anything printable.

SQLite: every TEXT value of every table's text-capable column (not INTEGER / REAL ones) is
read as bytes (``CAST(col AS BLOB)``, so NUL separated environment blocks stay whole); tables with ``name`` and ``value`` columns
(META_DATA_*, EXPORT_META_DATA, TARGET_INFO_SYSTEM_ENV) are read as key/value rows.
JSON: the top level is split into raw slices with msgspec; only the slices whose bytes could
hold a match (a lower-case literal of ``patterns.*_NEEDLES``) are decoded and walked, keys
and values; a file whose bytes hold none of them is not walked at all.

Hit locations: locations.py; the SQLite cells: sqlite_cells.py; JSON slices and the byte
pre-filter: json_slices.py; hits -> TL100/TL101 findings: findings.py.
"""
from __future__ import annotations

import os
import re
import sqlite3
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import msgspec

from ..io import quick_scan_reads_ends

from ..errors import TraceFormatError
from . import patterns as P
from .json_slices import (RAW_LIST, RAW_TOP, event_ranges, events_of, range_events, read_json_bytes,
                          split_json, suspicious_events, suspicious_items)
from .locations import json_path, safe_label
from .sqlite_cells import iter_sqlite_text, open_readonly

SEVERITY = {P.SECRET: "error", P.PERSONAL: "info"}


@dataclass
class Hit:
    """One sensitive value in a trace. `raw` is kept for in-memory scrubbing and never shown."""

    location: str            # StringIds.value[id=17]  |  $.metadata.system.env.HF_TOKEN
    container: str           # the group it belongs to: StringIds.value | $.metadata.system.env
    kind: str                # patterns.KIND_LABELS key
    category: str            # secret | personal
    name: str | None         # variable / key name, if it was found under one
    preview: str             # masked: hf_a…(37 chars)
    raw: str = field(default="", repr=False, compare=False)

    @property
    def severity(self) -> str:
        return SEVERITY[self.category]

    @property
    def label(self) -> str:
        return P.KIND_LABELS.get(self.kind, self.kind)

    def describe(self) -> str:
        """`Hugging Face token (HF_TOKEN) at StringIds.value[id=17]: hf_a…(37 chars)`."""
        name = f" ({self.name})" if self.name else ""
        return f"{self.label}{name} at {self.location}: {self.preview}"

    def to_dict(self) -> dict[str, Any]:
        return {"location": self.location, "container": self.container, "kind": self.kind,
                "category": self.category, "severity": self.severity, "name": self.name,
                "preview": self.preview}


@dataclass
class ScanResult:
    path: str
    format: str                              # nsys-sqlite | kineto-json
    hits: list[Hit]                          # at most MAX_HITS_PER_GROUP per group
    counts: dict[tuple[str, str], int] = field(default_factory=dict)   # exact, per (kind, container)
    partial: bool = False                    # True: a large JSON trace's events were not scanned

    def count(self, kind: str, container: str) -> int:
        return self.counts.get((kind, container), 0)

    @property
    def secrets(self) -> list[Hit]:
        return [h for h in self.hits if h.category == P.SECRET]

    @property
    def personal(self) -> list[Hit]:
        return [h for h in self.hits if h.category == P.PERSONAL]

    def names(self) -> P.NameSet:
        """User and host names found (for replacing them everywhere with paths=True)."""
        kinds: dict[str, str] = {}
        for h in self.personal:
            if h.kind in ("user-name", "host-name", "home-path") and h.raw:
                kinds.setdefault(h.raw, "host-name" if h.kind == "host-name" else "user-name")
        return P.NameSet(kinds)


def scan_sqlite(path: str | Path, personal: bool = True) -> Collector:
    col = Collector()
    try:
        con = open_readonly(path)
    except sqlite3.Error as exc:
        raise TraceFormatError(f"{path}: cannot open as SQLite: {exc}") from None
    try:
        for cell in iter_sqlite_text(con, lambda texts: P.suspects(texts, personal)):
            ms = P.find_matches_cached(cell.text, cell.key, "", personal)
            for m in ms:
                col.add(cell.text, m, cell.container, lambda: cell.location)
    except sqlite3.DatabaseError as exc:
        raise TraceFormatError(f"{path}: corrupt SQLite file: {exc}") from None
    finally:
        con.close()
    return col


# ----------------------------------------------------------------------------------------
# JSON
# ----------------------------------------------------------------------------------------
_ANY = msgspec.json.Decoder()
_KEY_INTEREST: dict[str, bool] = {}


def _key_interesting(k: str) -> bool:
    v = _KEY_INTEREST.get(k)
    if v is None:
        v = P.credential_strength(k) > 0 or P.personal_key_kind(k, "uname") is not None
        if len(_KEY_INTEREST) < 100_000:
            _KEY_INTEREST[k] = v
    return v


def walk_json(obj: Any, parts: list, visit: Callable[[str, list, str | None, bool], str | None]) -> Any:
    """Visit every string (keys and values) under `obj`. visit(text, parts, key, is_key)
    returns a replacement or None. Returns the (possibly new) object; containers are edited
    in place, and a dict is rebuilt (same order) only when one of its keys changes."""
    if isinstance(obj, dict):
        new_keys: dict[str, str] | None = None
        for k, v in obj.items():
            if isinstance(k, str):
                nk = visit(k, parts, None, True)
                if nk is not None and nk != k:
                    new_keys = new_keys or {}
                    new_keys[k] = nk
            if isinstance(v, str):
                parts.append(k)
                nv = visit(v, parts, k, False)
                parts.pop()
                if nv is not None:
                    obj[k] = nv            # replacing a value during iteration is allowed
            elif isinstance(v, (dict, list)):
                parts.append(k)
                walk_json(v, parts, visit)
                parts.pop()
        if new_keys:
            items = list(obj.items())
            obj.clear()
            for k, v in items:
                k = new_keys.get(k, k)
                base, n = k, 2
                while k in obj:          # two keys scrubbed to the same text stay two keys
                    k, n = f"{base}#{n}", n + 1
                obj[k] = v
        return obj
    if isinstance(obj, list):
        for i, v in enumerate(obj):
            if isinstance(v, str):
                parts.append(i)
                nv = visit(v, parts, None, False)
                parts.pop()
                if nv is not None:
                    obj[i] = nv
            elif isinstance(v, (dict, list)):
                parts.append(i)
                walk_json(v, parts, visit)
                parts.pop()
        return obj
    return obj


def json_matches(text: str, parts: list, key: str | None, is_key: bool,
                 personal: bool) -> list[P.Match]:
    if is_key:
        return P.find_matches_cached(text, None, "", personal)
    use_key = key if key is not None and _key_interesting(key) else None
    hint = str(parts[-2]) if use_key is not None and len(parts) >= 2 else ""
    return P.find_matches_cached(text, use_key, hint, personal)


#: At most this many hits are kept per (kind, container) group; `counts` stays exact.
MAX_HITS_PER_GROUP = 200


class Collector:
    """Hits, capped per group, with exact counts per (kind, container)."""

    def __init__(self):
        self.hits: list[Hit] = []
        self.counts: dict[tuple[str, str], int] = {}
        self.partial = False

    def add(self, text: str, m: P.Match, container: str, location: Callable[[], str]) -> None:
        g = (m.kind, container)
        n = self.counts.get(g, 0) + 1
        self.counts[g] = n
        if n > MAX_HITS_PER_GROUP:
            return
        raw = text[m.start:m.end]
        self.hits.append(Hit(location=location(), container=container, kind=m.kind,
                             category=m.category, name=safe_label(m.name) if m.name else None,
                             preview=P.mask(raw, m.kind), raw=raw))

    def extend(self, other: "Collector") -> None:
        """other's hits after these, as if they had been added here (capped per group)."""
        taken: dict[tuple[str, str], int] = {}
        for h in other.hits:
            g = (h.kind, h.container)
            taken[g] = taken.get(g, 0) + 1
            if self.counts.get(g, 0) + taken[g] <= MAX_HITS_PER_GROUP:
                self.hits.append(h)
        for g, n in other.counts.items():
            self.counts[g] = self.counts.get(g, 0) + n


@lru_cache(maxsize=4096)
def _generic_path(parts: tuple) -> str:
    return json_path(list(parts), generic=True)


def json_hits(col: Collector, text: str, parts: list, key: str | None, is_key: bool,
              ms: list[P.Match]) -> None:
    gparts = tuple(p if isinstance(p, str) else 0 for p in parts)
    frozen = list(parts)
    for m in ms:
        if is_key:
            col.add(text, m, _generic_path(gparts) + " (keys)",
                    lambda: json_path(frozen) + " (key)")
        elif key is not None and m.name == key:
            col.add(text, m, _generic_path(gparts[:-1]), lambda: json_path(frozen))
        else:
            col.add(text, m, _generic_path(gparts), lambda: json_path(frozen))


def _head_and_tail(path: Path, window: int) -> tuple[bytes, bytes]:
    """The first and last `window` bytes of the JSON text. Gzip: as the load kept them when it
    decompressed the file (io.gzip_ends), else decompressed a block at a time, keeping only
    those (the gzip limits apply: io.gunzip_blocks)."""
    with open(path, "rb") as fh:
        head = fh.read(window)
        if head[:2] != b"\x1f\x8b":
            fh.seek(0, os.SEEK_END)
            fh.seek(max(fh.tell() - window, 0))
            return head, fh.read()
    from ..io import TextEnds, gunzip_blocks, gzip_ends
    kept = gzip_ends(path, window)
    if kept is not None:
        return kept
    ends = TextEnds(window)
    for block in gunzip_blocks(path.read_bytes(), path):
        ends.add(block)
    return ends.ends()


def _metadata_only(path: Path, window: int = 4 << 20) -> dict[str, msgspec.Raw] | None:
    """The top-level values of a large Kineto trace (plain or gzip) except traceEvents, read
    from its first and last few MB; None when the file does not have that shape."""
    head, tail = _head_and_tail(path, window)
    i = head.find(b'"traceEvents"')
    if i < 0 or head.lstrip()[:1] != b"{":
        return None
    ends = [m.start() for m in re.finditer(rb"\]", tail)][-64:]
    for k in reversed(ends):
        try:
            return RAW_TOP.decode(head[:i] + b'"traceEvents":[]' + tail[k + 1:])
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
    return None


def scan_json(path: str | Path, personal: bool = True, deep: bool = True) -> Collector:
    quick = not deep and quick_scan_reads_ends(Path(path))   # a large file, scanned in part
    if not quick:
        from ..importers.kineto_ranges import NotSplittable
        with event_ranges(path) as cut:
            if cut is not None:
                try:
                    return _scan_json(*cut, personal)
                except NotSplittable:
                    pass                          # read whole below
    top = _metadata_only(Path(path)) if quick else None
    if top is not None:
        return _scan_json(top, None, [], personal, quick=True, partial=True)   # no event is read
    data, _ = read_json_bytes(path)
    kind, top = split_json(path, data)            # rejects malformed input
    del data
    if kind == "array":
        return _scan_json({}, None, [], personal, events=top, quick=quick)
    return _scan_json(top, None, [], personal, quick=quick)


def _scan_json(top: dict, src: Path | None, ranges: list, personal: bool,
               events: list | None = None, quick: bool = False, partial: bool = False) -> Collector:
    """The hits of a top-level object (raw slices per key) and of its events: those of its
    traceEvents, those given (a top-level array), or those of the byte ranges of src, one
    range at a time. quick: arrays of records are not read (the scan is then partial)."""
    col = Collector()
    col.partial = partial

    def visit(text, parts, key, is_key):
        ms = json_matches(text, parts, key, is_key, personal)
        if ms:
            json_hits(col, text, parts, key, is_key, ms)
        return None

    if events is not None:
        prefix = []
    else:
        prefix, events = events_of("object", top)
    for k, raw in top.items():
        if k == "traceEvents" and (events or ranges):
            continue
        visit(k, [], None, True)
        col.partial |= _scan_raw(raw, [k], visit, quick)   # metadata lives here
    if quick:
        col.partial |= bool(events) or bool(ranges)
        return col
    chunks = range_events(src, ranges) if ranges else [events]
    base = 0
    for chunk in chunks:
        for i in suspicious_events(chunk):
            _scan_raw(chunk[i], [*prefix, base + i], visit)
        base += len(chunk)
    return col


#: A value this large is split into its items before it is decoded: of an array's items only
#: those whose bytes could hold a match are decoded (suspicious_events), as traceEvents' are.
#: rocprofv3's JSON keeps its records under a top-level key, not traceEvents: decoded and
#: walked whole, they took 2.4 s of a 4.4 s lint of 95 MB.
SPLIT_MIN = 1 << 20


def _scan_raw(raw, parts: list, visit, quick: bool = False) -> bool:
    """Decode one raw slice and visit every string in it that could match, in document order
    (the hits, their order and their counts are those of walking it whole). quick: the items
    under SPLIT_MIN of an array of SPLIT_MIN bytes or more (a tool's records) are not read, as
    the quick scan of a large trace reads no event; True when some were not."""
    if len(raw) >= SPLIT_MIN:
        first = memoryview(raw)[0]
        if first == 0x5B:                                          # [
            items = RAW_LIST.decode(raw)
            if quick:          # records are the small items; a large one is split in turn
                big = [i for i, item in enumerate(items) if len(item) >= SPLIT_MIN]
                skipped = len(big) < len(items)
                for i in big:
                    skipped |= _scan_raw(items[i], [*parts, i], visit, quick)
                return skipped
            for i in suspicious_items(items, SPLIT_MIN):
                _scan_raw(items[i], [*parts, i], visit)
            return False
        if first == 0x7B:                                          # {
            skipped = False
            for k, v in RAW_TOP.decode(raw).items():
                visit(k, parts, None, True)
                skipped |= _scan_raw(v, [*parts, k], visit, quick)
            return skipped
    obj = _ANY.decode(raw)
    if isinstance(obj, str):
        key = parts[-1] if parts and isinstance(parts[-1], str) else None
        visit(obj, list(parts), key, False)
    else:
        walk_json(obj, list(parts), visit)
    return False


# ----------------------------------------------------------------------------------------
# entry point, with a small cache (TL100, TL101 and scrub_report scan the same file)
# ----------------------------------------------------------------------------------------
_CACHE: "OrderedDict[tuple, ScanResult]" = OrderedDict()


def detect_format(path: str | Path) -> str:
    from ..importers import sniff
    fmt = sniff(Path(path))
    if fmt == "nsys-rep":
        raise TraceFormatError(
            f"{path}: an Nsight Systems report; export it to SQLite first "
            f"(nsys export --type sqlite {Path(path).name})")
    return fmt


def scan_file(path: str | Path, personal: bool = True, deep: bool = True) -> ScanResult:
    """Hits of a trace file (cached on path, size and mtime). Raises TraceFormatError.

    deep=False allows the quick scan of large JSON traces (metadata only; see
    io.QUICK_SCAN_LIMIT).
    """
    p = Path(path)
    fmt = detect_format(p)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns, personal)
    for k in ((*key, True), (*key, False)) if not deep else ((*key, True),):
        if k in _CACHE:
            _CACHE.move_to_end(k)
            return _CACHE[k]
    col = scan_sqlite(p, personal) if fmt.endswith("-sqlite") else scan_json(p, personal, deep)
    res = ScanResult(str(path), fmt, col.hits, col.counts, col.partial)
    key = (*key, not col.partial)
    _CACHE[key] = res
    while len(_CACHE) > 4:
        _CACHE.popitem(last=False)
    return res


def clear_cache() -> None:
    _CACHE.clear()


def is_file(path: str | os.PathLike | None) -> bool:
    try:
        return bool(path) and Path(path).is_file()
    except OSError:
        return False

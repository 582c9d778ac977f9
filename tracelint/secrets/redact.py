"""Scrub secrets (and, on request, personal data) from trace files.

- ``redact_file(src, dst, paths=False)``: a scrubbed copy of an Nsight Systems SQLite export,
  a rocpd database, or a Kineto, jax.profiler or rocprofv3 JSON / JSON.gz trace. The input is only ever opened read-only; ``dst`` must differ
  from ``src``. Only the sensitive span of a string is replaced (``HF_TOKEN=<redacted>``,
  ``/home/<user>/x.py``), so every timing, id and name the importers use is unchanged.
  SQLite: the file is copied with the backup API from a read-only connection, text cells are
  UPDATEd in the copy (bytes in, bytes out: NUL-separated environment blocks and invalid UTF-8
  survive), then ``VACUUM`` rewrites the file so the old values do not linger in free pages,
  and ``PRAGMA integrity_check`` must answer ok before the copy replaces ``dst`` atomically.
  JSON: only top-level values / events whose raw bytes could hold a match are decoded (floats
  as Decimal, so timestamps keep every digit), scrubbed (keys and values) and re-encoded; the
  rest is spliced back byte for byte; gzip in, gzip out. Nothing to scrub: a verbatim copy.
  A value of scan.SPLIT_MIN bytes or more (rocprofv3's records under one key) is split into
  its items the same way, and a changed one written out as pieces, not joined. A trace of
  64 MiB of text or more (json_slices.STREAM_FROM) is read a byte range of events at a time
  and its copy written as it is made: the same copy, in a bounded amount of memory.

Strings and reports (tracelint's own output) are scrubbed by report_scrub.py.
"""
from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec

from ..errors import TracelintError, TraceFormatError
from ..io import atomic_writer, copy_sqlite, write_atomic
from . import patterns as P
from .json_slices import (BYTE_NEEDLES, RAW_LIST, RAW_TOP, event_ranges, events_of, range_events,
                          read_json_bytes, split_json, suspicious_events,
                          suspicious_items)
from .scan import (SPLIT_MIN, Collector, Hit, ScanResult, detect_format, json_hits, json_matches,
                   scan_file, walk_json)
from .sqlite_cells import encode_text, iter_sqlite_text, quote_name

_EXACT_DEC = msgspec.json.Decoder(float_hook=Decimal)
_EXACT_ENC = msgspec.json.Encoder(decimal_format="number")


@dataclass
class RedactResult:
    source: str
    output: str | None
    format: str
    hits: list[Hit]                                   # what was (or would be) replaced
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    changed_cells: int = 0

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def secrets(self) -> int:
        return sum(n for (kind, _), n in self.counts.items() if _category(kind) == P.SECRET)

    @property
    def personal(self) -> int:
        return self.total - self.secrets


def _category(kind: str) -> str:
    return P.PERSONAL if kind in P.PERSONAL_MARKS else P.SECRET


# ----------------------------------------------------------------------------------------
# checks shared by the CLI and the API
# ----------------------------------------------------------------------------------------
def same_file(a: str | Path, b: str | Path) -> bool:
    a, b = Path(a), Path(b)
    try:
        if a.resolve() == b.resolve():
            return True
        return b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def refuse_odd_cells(src: str | Path) -> None:
    """One line naming where secrets sit that redact cannot rewrite (see odd_cells)."""
    from .odd_cells import odd_cell_hits
    hits = odd_cell_hits(src)
    if hits:
        raise TracelintError(f"{src}: secret(s) stored where redact does not rewrite "
                             f"({', '.join(hits[:3])}{', ...' if len(hits) > 3 else ''}); "
                             "remove them with sqlite3 first")


def check_file(src: str | Path, paths: bool = False) -> ScanResult:
    """What redact_file would replace: secrets, plus personal data with paths=True.
    Raises TracelintError for secrets in storage redact does not rewrite (BLOBs, ...)."""
    refuse_odd_cells(src)
    res = scan_file(src)
    if paths:
        return res
    keep = {g: n for g, n in res.counts.items() if _category(g[0]) == P.SECRET}
    return ScanResult(res.path, res.format, res.secrets, keep)


def redact_file(src: str | Path, dst: str | Path, paths: bool = False) -> RedactResult:
    """Write a scrubbed copy of trace `src` to `dst`. Raises TracelintError on bad input."""
    src, dst = Path(src), Path(dst)
    if not src.is_file():
        raise TraceFormatError(f"{src}: no such file" if not src.exists() else f"{src}: not a file")
    if same_file(src, dst):
        raise TracelintError(f"{dst}: the output must not be the input (redact never edits a trace in place)")
    if dst.is_dir():
        raise TracelintError(f"{dst}: is a directory; give the output file name")
    fmt = detect_format(src)
    refuse_odd_cells(src)
    names = scan_file(src).names() if paths else None
    if fmt.endswith("-sqlite"):              # nsys and rocpd: every table's text cells
        return _redact_sqlite(src, dst, paths, names, fmt)
    return _redact_json(src, dst, paths, names, fmt)


def _scrub_with(text: str, ms: list[P.Match], paths: bool, names: P.NameSet | None) -> str:
    new = P.apply(text, ms, paths) if ms else text
    if paths and names:
        new = names.sub(new)
    return new


def _may_change(texts: list[str], paths: bool, names: P.NameSet | None) -> set[int]:
    """The indexes of the texts _scrub_with could change: those with a match (the needle gate)
    and, with paths, those holding a user or host name."""
    out = set(P.suspects(texts, paths))
    if paths and names:
        out.update(P.matching(names.regex, texts))
    return out


# ----------------------------------------------------------------------------------------
# SQLite
# ----------------------------------------------------------------------------------------
def _redact_sqlite(src: Path, dst: Path, paths: bool, names: P.NameSet | None,
                   fmt: str) -> RedactResult:
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    col = Collector()
    updates: list[tuple[str, str, int | None, str, str]] = []
    try:
        out = copy_sqlite(src, tmp)
        try:
            out.execute("PRAGMA secure_delete = ON")
            try:
                for cell in iter_sqlite_text(out, lambda texts: _may_change(texts, paths, names)):
                    ms = P.find_matches_cached(cell.text, cell.key, "", paths)
                    new = _scrub_with(cell.text, ms, paths, names)
                    if new == cell.text:
                        continue
                    for m in ms:
                        if m.category == P.SECRET or paths:
                            col.add(cell.text, m, cell.container, lambda c=cell: c.location)
                    updates.append((cell.table, cell.column, cell.rowid, cell.text, new))
            except sqlite3.DatabaseError as exc:
                raise TraceFormatError(f"{src}: corrupt SQLite file: {exc}") from None
            with out:
                for table, column, rowid, old, new in updates:
                    if rowid is not None:
                        out.execute(f"UPDATE {quote_name(table)} SET {quote_name(column)} = "
                                    "CAST(? AS TEXT) WHERE rowid = ?", (encode_text(new), rowid))
                    else:
                        out.execute(f"UPDATE {quote_name(table)} SET {quote_name(column)} = "
                                    f"CAST(? AS TEXT) WHERE {quote_name(column)} = CAST(? AS TEXT)",
                                    (encode_text(new), encode_text(old)))
            out.execute("VACUUM")
            check = out.execute("PRAGMA integrity_check").fetchall()
            if check != [("ok",)]:
                raise TracelintError(f"{src}: the scrubbed copy fails PRAGMA integrity_check: "
                                     f"{check[0][0] if check else 'no answer'}")
        except sqlite3.IntegrityError as exc:
            raise TracelintError(f"{src}: cannot scrub: {exc}") from None
        finally:
            out.close()
        os.replace(tmp, dst)
    finally:
        for leftover in (tmp, Path(str(tmp) + "-journal")):
            try:
                leftover.unlink()
            except FileNotFoundError:
                pass
    return RedactResult(str(src), str(dst), fmt, col.hits, col.counts, len(updates))


# ----------------------------------------------------------------------------------------
# JSON
# ----------------------------------------------------------------------------------------
def _redact_json(src: Path, dst: Path, paths: bool, names: P.NameSet | None,
                 fmt: str) -> RedactResult:
    from ..importers.kineto_ranges import NotSplittable
    needles = _JsonScrubber(paths, names).needles
    with event_ranges(src) as cut:
        if cut is not None and (dst.is_file() or not dst.exists()):   # a copy it can rewind
            try:
                return _redact_json_ranges(src, dst, paths, names, fmt, needles, *cut)
            except NotSplittable:
                pass                              # read whole below
    data, was_gzip = read_json_bytes(src)
    kind, top = split_json(src, data)
    del data
    scrub = _JsonScrubber(paths, names)
    prefix, events = events_of(kind, top)
    events_changed = False
    for i in suspicious_events(events, needles):
        new = scrub.raw(events[i], [*prefix, i])
        if new is not events[i]:
            events[i] = new
            events_changed = True
    if kind == "object":
        read_apart = None if not events else (
            _Pieces.array(events) if events_changed else top["traceEvents"])
        edited = list(scrub.top(top, read_apart))
    if scrub.changed == 0:
        write_atomic(dst, src.read_bytes())           # nothing to scrub: a verbatim copy
    else:
        with atomic_writer(dst) as fh:
            if kind == "object":
                _write_json(fh, was_gzip, top, edited)
            else:
                _write_json(fh, was_gzip, None, _Pieces.array(events))
    return RedactResult(str(src), str(dst), fmt, scrub.col.hits, scrub.col.counts, scrub.changed)


def _redact_json_ranges(src: Path, dst: Path, paths: bool, names: P.NameSet | None, fmt: str,
                        needles: tuple, top: dict, plain: Path, ranges: list) -> RedactResult:
    """_redact_json for a large trace, its events read a byte range at a time (event_ranges)
    and written out as they are scrubbed, so neither the file nor its events are held whole.
    The copy is the one the whole read makes: its events joined compactly once one changed,
    else the array as written; nothing to scrub, the file verbatim."""
    head = _JsonScrubber(paths, names)       # the top-level values go first in the copy
    edited = list(head.top(top, msgspec.Raw(b"[]")))
    scrub = _JsonScrubber(paths, names)
    gz = _is_gzip(src)
    with atomic_writer(dst) as fh:
        events_changed = _write_json(fh, gz, top, edited, lambda out: _scrub_events(
            scrub, plain, ranges, needles, out))
        if not events_changed:                # the events as written, or the whole file
            fh.seek(0)
            fh.truncate()
            if head.changed:
                _write_json(fh, gz, top, edited, lambda out: _copy_bytes(
                    plain, ranges[0][0] - 1, ranges[-1][1] + 1, out))
            else:
                with open(src, "rb") as fin:
                    shutil.copyfileobj(fin, fh, 1 << 20)
    scrub.col.extend(head.col)               # the hits in the order a whole read finds them
    return RedactResult(str(src), str(dst), fmt, scrub.col.hits, scrub.col.counts,
                        scrub.changed + head.changed)


def _write_json(fh, gz: bool, top: dict | None, edited, events=None) -> Any:
    """The top-level object as _EXACT_ENC writes it, from its source keys (top) and their
    scrubbed (key, value) pairs (edited); its traceEvents written by events(out) when given;
    returns what events returned. top None: edited is the whole value (a top-level array)."""
    out = gzip.GzipFile(filename="", fileobj=fh, mode="wb", compresslevel=6, mtime=0) if gz else fh
    got = None
    if top is None:
        _write_value(out, edited)
    else:
        out.write(b"{")
        for n, (source_key, (key, value)) in enumerate(zip(top, edited)):
            out.write((b"," if n else b"") + _EXACT_ENC.encode(key) + b":")
            if source_key == "traceEvents" and events is not None:
                got = events(out)
            else:
                _write_value(out, value)
        out.write(b"}")
    if gz:
        out.close()
    return got


class _Pieces(list):
    """A value rewritten as the pieces it is made of, written one after another: the items it
    kept (raw slices of the input) and the ones it changed. Joined, each level of rocprofv3's
    records under one key was another copy of the file."""

    @classmethod
    def array(cls, items) -> "_Pieces":
        return cls([b"[", *cls.joined(items), b"]"])

    @classmethod
    def joined(cls, items) -> "_Pieces":
        """The items with commas between them."""
        out = cls()
        for n, item in enumerate(items):
            if n:
                out.append(b",")
            out.extend(item) if isinstance(item, _Pieces) else out.append(item)
        return out

    @classmethod
    def object(cls, pairs) -> "_Pieces":
        out = cls([b"{"])
        for n, (key, value) in enumerate(pairs):
            out.append((b"," if n else b"") + _EXACT_ENC.encode(key) + b":")
            out.extend(value) if isinstance(value, _Pieces) else out.append(value)
        out.append(b"}")
        return out


def _write_value(out, value, block: int = 1 << 20) -> None:
    """A raw value or _Pieces, in writes of about `block` bytes (not one per piece)."""
    if not isinstance(value, _Pieces):
        out.write(value)
        return
    buf = bytearray()
    for piece in value:
        buf += piece
        if len(buf) >= block:
            out.write(buf)
            buf.clear()
    out.write(buf)


def _scrub_events(scrub: "_JsonScrubber", plain: Path, ranges: list, needles: tuple, out) -> bool:
    """Scrub the events of the byte ranges and write them to out as a JSON array (as
    _EXACT_ENC writes a list of raw events); whether any changed."""
    changed, base = False, 0
    for chunk in range_events(plain, ranges):
        for i in suspicious_events(chunk, needles):
            new = scrub.raw(chunk[i], ["traceEvents", base + i])
            if new is not chunk[i]:
                chunk[i], changed = new, True
        if chunk:
            out.write(b"[" if base == 0 else b",")
            _write_value(out, _Pieces.joined(chunk))
        base += len(chunk)
    out.write(b"]" if base else b"[]")
    return changed


def _copy_bytes(path: Path, start: int, end: int, out) -> None:
    with open(path, "rb") as fin:
        fin.seek(start)
        left = end - start
        while left > 0:
            block = fin.read(min(left, 1 << 20))
            if not block:
                raise TracelintError(f"{path}: changed while it was read")
            out.write(block)
            left -= len(block)


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


class _JsonScrubber:
    """The edits redact makes to JSON strings, the hits they remove and how many changed."""

    def __init__(self, paths: bool, names: P.NameSet | None):
        self.paths, self.names = paths, names
        self.col, self.changed = Collector(), 0
        #: bytes one of which a slice holds if anything in it can change (suspicious_events)
        self.needles = BYTE_NEEDLES + (tuple(n.lower().encode() for n in names.kinds)
                                       if paths and names else ())

    def visit(self, text, parts, key, is_key):
        ms = json_matches(text, parts, key, is_key, self.paths)
        new = _scrub_with(text, ms, self.paths, self.names)
        if new == text:
            return None
        json_hits(self.col, text, parts, key, is_key,
                  [m for m in ms if m.category == P.SECRET or self.paths])
        self.changed += 1
        return new

    def raw(self, raw, parts):
        """The raw slice, or what replaces it when something in it changed: a new Raw, or
        _Pieces for a value of SPLIT_MIN bytes or more. Such a value (rocprofv3's records
        under one key) is split into its items, and only the items that could hold a match are
        decoded, as scan._scan_raw reads them: decoded whole and joined again, 95 MB of records
        took 2.7 s and 399 MiB; split, 1.2 s and 206 MiB."""
        if len(raw) >= SPLIT_MIN:
            first = memoryview(raw)[0]
            if first == 0x5B:                                      # [
                items = RAW_LIST.decode(raw)
                changed = False
                for i in suspicious_items(items, SPLIT_MIN, self.needles):
                    new = self.raw(items[i], [*parts, i])
                    if new is not items[i]:
                        items[i], changed = new, True
                return _Pieces.array(items) if changed else raw
            if first == 0x7B:                                      # {
                obj = RAW_TOP.decode(raw)
                pairs = list(self._keys_and_values(obj, parts))
                if all(k == ok and v is ov for (k, v), (ok, ov) in zip(pairs, obj.items())):
                    return raw
                return _Pieces.object(pairs)
        before = self.changed
        obj = _EXACT_DEC.decode(raw)
        if isinstance(obj, str):
            key = parts[-1] if parts and isinstance(parts[-1], str) else None
            nv = self.visit(obj, list(parts), key, False)
            obj = nv if nv is not None else obj
        else:
            obj = walk_json(obj, list(parts), self.visit)
        return msgspec.Raw(_EXACT_ENC.encode(obj)) if self.changed != before else raw

    def top(self, top: dict, events: msgspec.Raw | None):
        """(key, value) of the top-level object scrubbed. events: traceEvents' value, read
        apart; None: it is scrubbed as the other values are."""
        return self._keys_and_values(top, [], {} if events is None else {"traceEvents": events})

    def _keys_and_values(self, obj: dict, parts: list, given: dict | None = None):
        """(key, value) of an object of raw values scrubbed, keys too, in walk_json's order
        (two keys scrubbed to the same text stay two); a key in `given` takes its value."""
        seen: set[str] = set()
        for k, raw in obj.items():
            nk = self.visit(k, parts, None, True)
            nk = nk if nk is not None else k
            value = given[k] if given and k in given else self.raw(raw, [*parts, k])
            base, n = nk, 2
            while nk in seen:
                nk, n = f"{base}#{n}", n + 1
            seen.add(nk)
            yield nk, value

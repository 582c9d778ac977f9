"""File input / output helpers.

Output: a regular file (or a new one) is written atomically (temp file + rename: a crash never
leaves half a report); a device node or a FIFO (`-o /dev/stdout`, `-o /dev/null`, a pipe) is
written straight into, never replaced; a directory or one of the command's inputs is refused
with one line. Input: `check_input` refuses what would block or is not a file (FIFOs, sockets,
devices, directories) before an importer opens it."""
from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import tempfile
from collections import deque
from pathlib import Path


def write_atomic(path: str | Path, data: str | bytes, private: bool = False) -> None:
    """Write `data` through atomic_writer."""
    with atomic_writer(path, private) as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)


@contextlib.contextmanager
def atomic_writer(path: str | Path, private: bool = False):
    """A binary file to write into, that becomes `path` on leaving: a temp file in the same
    folder, then renamed, so a crash never leaves half a file. Only a regular file (or a new
    one) is replaced so: a device node or a FIFO is written straight into (renaming over
    /dev/null would turn it into a file); a directory is refused.

    The file gets the permissions the user's umask gives new files (mkstemp alone would leave
    0600, which breaks CI artifact uploads and shared report folders); private=True keeps
    0600, for outputs that may hold unscrubbed secrets."""
    from .errors import TracelintError
    path = Path(path)
    shown = _shown(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise TracelintError(f"{shown}: cannot write: {exc.strerror or exc}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise TracelintError(f"{shown}: is a directory; give the output file name")
    try:
        if st is not None and not stat.S_ISREG(st.st_mode):
            fh, tmp = open(path, "wb"), None
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            fh = os.fdopen(fd, "wb")
    except OSError as exc:
        raise TracelintError(f"{shown}: cannot write: {exc.strerror or exc}") from None
    try:
        with fh:
            if tmp is not None and not private:
                os.fchmod(fh.fileno(), 0o666 & ~_umask())
            yield fh
        if tmp is not None:
            os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        if isinstance(exc, OSError):
            raise TracelintError(f"{shown}: cannot write: {exc.strerror or exc}") from None
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _shown(path) -> str:
    from .reporters.escape import terminal_text
    return terminal_text(str(path), 200)


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except (OSError, RuntimeError, ValueError):
        return False


def check_output(path: str | Path, inputs=()) -> None:
    """Refuse (one-line TracelintError) an output naming one of the command's inputs."""
    from .errors import TracelintError
    for src in inputs:
        if isinstance(src, (str, Path)) and _same(Path(src), Path(path)):
            raise TracelintError(f"{_shown(path)}: the output is one of the inputs; give another "
                                 "file name (tracelint never overwrites a trace)")


def write_output(path: str | Path, data: str | bytes, inputs=()) -> None:
    """A command's output file: never one of its inputs, then `write_atomic`."""
    check_output(path, inputs)
    write_atomic(path, data)


def check_input(path: str | Path) -> None:
    """Refuse inputs that would block or are not regular files (one-line TracelintError)."""
    from .errors import TraceFormatError
    shown = _shown(path)
    if str(path) == "-":
        raise TraceFormatError("-: reading a trace from stdin is not supported; save it to a "
                               "file first")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise TraceFormatError(f"{shown}: no such file") from None
    except OSError as exc:
        raise TraceFormatError(f"{shown}: cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise TraceFormatError(f"{shown}: is a directory, not a trace file")
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO (pipe)" if stat.S_ISFIFO(st.st_mode) else "not a regular file"
        raise TraceFormatError(f"{shown}: is {kind}; save the trace to a file first "
                               "(stdin and pipes are not read)")


def readonly_sqlite_uri(path: str | Path) -> str:
    """A file: URI that opens a SQLite file read-only and immutable: no journal, no WAL, no
    write of any kind to a user's trace, whatever its name contains (spaces, #, %, ?)."""
    return Path(path).resolve().as_uri() + "?mode=ro&immutable=1"


def copy_sqlite(src: str | Path, dst: str | Path) -> sqlite3.Connection:
    """Copy a SQLite trace into `dst` with the backup API (the source opened read-only) and
    return a writable connection to the copy. Raises TraceFormatError for unreadable input."""
    from .errors import TraceFormatError
    try:
        source = sqlite3.connect(readonly_sqlite_uri(src), uri=True)
    except sqlite3.Error as exc:
        raise TraceFormatError(f"{src}: cannot open as SQLite: {exc}") from None
    out = sqlite3.connect(dst)
    try:
        source.backup(out)
    except sqlite3.DatabaseError as exc:
        out.close()
        raise TraceFormatError(f"{src}: cannot copy the SQLite file (corrupt?): {exc}") from None
    finally:
        source.close()
    return out


#: Limits on gzip input (a 1 MB file must not become 2 GB in memory). Environment variables
#: override them: TRACELINT_GZIP_MAX_BYTES (absolute, decompressed) and TRACELINT_GZIP_MAX_RATIO
#: (decompressed / compressed, checked once the output passes GZIP_RATIO_FROM bytes).
GZIP_MAX_BYTES = 16 << 30
GZIP_MAX_RATIO = 200
GZIP_RATIO_FROM = 64 << 20


def _env_limit(name: str, default: int) -> int:
    try:
        return max(int(os.environ.get(name, default)), 1)
    except ValueError:
        return default


GZIP_MAGIC = b"\x1f\x8b"


def decompressed(data: bytes, path: str | Path) -> bytes | bytearray:
    """A trace file's bytes as text: gunzipped within the limits (gunzip_capped) when they start
    with the gzip magic, whatever the file's name; else as they are."""
    return gunzip_capped(data, path) if data[:2] == GZIP_MAGIC else data


def gunzip_capped(data: bytes, path: str | Path) -> bytearray:
    """Stream-decompress gzip `data` (all members) within the limits above; TraceFormatError
    (one line) when the data is corrupt or expands past a limit. The text is returned in the
    buffer it was gathered in: a copy into bytes held it twice at once (8 MiB of the lint's
    peak on a trace of 21 MB of text)."""
    out = bytearray()
    for block in gunzip_blocks(data, path):
        out += block
    return out


def inflater():
    """The zlib-like module that inflates gzip: python-isal's (the `fast` extra) where it is
    installed, else the standard library's. isal's inflate took 0.20-0.34 s against zlib's
    0.41-0.45 s for the 287 MB reference text, and 0.02 s against 0.05-0.07 s for a 54 MB
    real trace; its output is the same bytes (tests/test_gzip_inflaters.py)."""
    if os.environ.get("TRACELINT_ISAL", "1") != "0":
        try:
            from isal import isal_zlib
            return isal_zlib
        except ImportError:
            pass
    import zlib
    return zlib


def gunzip_blocks(data: bytes, path: str | Path, block: int = 1 << 20):
    """gunzip_capped's output a block of at most `block` bytes at a time, so that a caller can
    write it out instead of holding it (importers/gzip_staging); the same limits and errors."""
    from .errors import TraceFormatError
    inflate = inflater()
    max_bytes = _env_limit("TRACELINT_GZIP_MAX_BYTES", GZIP_MAX_BYTES)
    max_ratio = _env_limit("TRACELINT_GZIP_MAX_RATIO", GZIP_MAX_RATIO)
    cap = max(min(max_bytes, max(len(data) * max_ratio, GZIP_RATIO_FROM)), 1)
    total = 0
    rest = data
    try:
        while rest:
            d = inflate.decompressobj(16 + inflate.MAX_WBITS)
            chunk = rest
            while chunk:
                out = d.decompress(chunk, block)
                chunk = d.unconsumed_tail
                total += len(out)
                if total > cap:
                    why = (f"more than {max_bytes:,} bytes" if cap == max_bytes else
                           f"more than {max_ratio}x its compressed size")
                    raise TraceFormatError(
                        f"{_shown(path)}: gzip data expands to {why} (a decompression bomb?); "
                        "raise TRACELINT_GZIP_MAX_BYTES / TRACELINT_GZIP_MAX_RATIO to read it")
                if out:
                    yield out
            if not d.eof:
                raise TraceFormatError(f"{_shown(path)}: truncated gzip data")
            tail = d.flush()
            if tail:
                yield tail
            rest = d.unused_data.lstrip(b"\x00")
            if rest and rest[:2] != b"\x1f\x8b":
                break                         # trailing garbage after a member: ignored, as gzip does
    except inflate.error as exc:
        raise TraceFormatError(f"{_shown(path)}: truncated or corrupt gzip data ({exc})") from None


#: Above this much JSON, a quick secret scan (lint's TL100/TL101, report scrubbing:
#: secrets/scan.py) reads only the trace's metadata, from the first and last few MB of its
#: text: the byte pre-filter over every event costs ~0.8 s per 100 MB (2.3 s on the 287 MB
#: reference), too much beside a 0.7 s/100 MB load. `tracelint redact [--check]` always scans
#: everything. Kept here, beside the ends a staged gzip load keeps for that scan (TextEnds).
QUICK_SCAN_LIMIT = 64 << 20


def json_size(path: Path) -> int:
    """Bytes of JSON text in the file: its size, or for gzip the decompressed size its last
    four bytes give (RFC 1952; modulo 2**32, so never taken below the compressed size)."""
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
        size = os.fstat(fh.fileno()).st_size
        if not gz or size < 4:
            return size
        fh.seek(size - 4)
        return max(size, int.from_bytes(fh.read(4), "little"))


def quick_scan_reads_ends(path: Path) -> bool:
    """Whether the quick secret scan reads only the ends of this file's JSON text (and so
    whether a staged gzip load keeps them for it)."""
    return json_size(path) > QUICK_SCAN_LIMIT


class TextEnds:
    """The first and last `window` bytes of a text seen a block at a time (the quick secret
    scan of a large trace reads only its metadata, which Kineto writes at both ends)."""

    def __init__(self, window: int = 4 << 20):
        self.window, self._head = window, bytearray()
        self._tail: deque[bytes] = deque()      # the last blocks, as they came: no copy
        self._tail_bytes = 0

    def add(self, block: bytes) -> None:
        if len(self._head) < self.window:
            self._head += block[:self.window - len(self._head)]
        self._tail.append(block)
        self._tail_bytes += len(block)
        while self._tail_bytes - len(self._tail[0]) >= self.window:
            self._tail_bytes -= len(self._tail.popleft())

    def ends(self) -> tuple[bytes, bytes]:
        return bytes(self._head), b"".join(self._tail)[-self.window:]


#: TextEnds of gzip files decompressed whole by the load (importers/gzip_staging), by file
#: identity, so that the quick scan does not decompress them again: the last few only.
_GZIP_ENDS: dict[tuple, tuple[int, bytes, bytes]] = {}


def _file_key(path: str | Path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return str(Path(path).resolve()), st.st_size, st.st_mtime_ns


def remember_gzip_ends(path: str | Path, ends: TextEnds) -> None:
    key = _file_key(path)
    if key is not None:
        while len(_GZIP_ENDS) >= 2:
            _GZIP_ENDS.pop(next(iter(_GZIP_ENDS)))
        _GZIP_ENDS[key] = (ends.window, *ends.ends())


def gzip_ends(path: str | Path, window: int) -> tuple[bytes, bytes] | None:
    """The first and last `window` bytes of the decompressed text of `path`, when the load
    kept at least that many (remember_gzip_ends); None otherwise."""
    got = _GZIP_ENDS.get(_file_key(path))
    if got is None or got[0] < window:
        return None
    return got[1][:window], got[2][-window:]


#: Largest download of one URL trace (TRACELINT_URL_MAX_BYTES overrides).
URL_MAX_BYTES = 16 << 30


def copy_capped(src, dst, name: str) -> None:
    """Copy a stream within URL_MAX_BYTES; one-line TracelintError past it."""
    from .errors import TracelintError
    cap = _env_limit("TRACELINT_URL_MAX_BYTES", URL_MAX_BYTES)
    done = 0
    while chunk := src.read(8 << 20):
        done += len(chunk)
        if done > cap:
            raise TracelintError(f"{_shown(name)}: larger than {cap:,} bytes; raise "
                                 "TRACELINT_URL_MAX_BYTES to read it")
        dst.write(chunk)


class url_errors:
    """Turn what fsspec raises for a URL (missing client library, unknown protocol, refused
    connection, missing member) into one TracelintError line; the secret sink scrubs any
    password the URL holds before it is printed."""

    def __init__(self, url: str):
        self.url = url

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        from .errors import TracelintError
        if exc is None or isinstance(exc, (TracelintError, KeyboardInterrupt, MemoryError)):
            return False
        if isinstance(exc, Exception):
            why = " ".join(str(exc).split())[:200] or type(exc).__name__
            if isinstance(exc, ImportError):
                why = f"the client for this URL is not installed ({why})"
            raise TracelintError(f"{_shown(self.url)}: cannot read: {why}") from None
        return False

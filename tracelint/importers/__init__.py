"""Format detection by content (never by extension) and dispatch to one importer per format.

Imports nothing heavy at module level: the Timeline (pandas) comes with the importer that
builds it, so that a parallel Kineto load forks its decoding workers before pandas is imported
and this process imports it while they decode (kineto_parallel)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import TraceFormatError
from ..io import GZIP_MAGIC
from .. import collector

if TYPE_CHECKING:
    from ..timeline.model import Timeline

SQLITE_MAGIC = b"SQLite format 3\x00"
NSYS_REP_MAGICS = (b"QDREP", b"NSYS")


def sniff(path: Path) -> str:
    """Return 'nsys-sqlite', 'rocpd-sqlite', 'kineto-json', 'rocprofv3-json', 'jax-json' or
    'nsys-rep' from the file's content (SQLite: its table names; JSON: its first keys)."""
    from ..io import check_input
    check_input(path)              # no such file, directory, FIFO (would block), device
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not head:
        raise TraceFormatError(f"{path}: empty file")
    if head.startswith(SQLITE_MAGIC):
        return "rocpd-sqlite" if _has_rocpd_tables(path) else "nsys-sqlite"
    if head.startswith(GZIP_MAGIC):
        return json_flavour(_gunzip_head(path)) or _flavour_past_head(path, gz=True)
    stripped = head.lstrip()
    if stripped.startswith(b"\xef\xbb\xbf"):        # a UTF-8 byte order mark
        stripped = stripped[3:].lstrip()
    if stripped[:1] in (b"{", b"["):
        return json_flavour(head) or _flavour_past_head(path, gz=False)
    if path.suffix in (".nsys-rep", ".qdrep") or any(m in head[:64] for m in NSYS_REP_MAGICS):
        return "nsys-rep"
    raise TraceFormatError(
        f"{path}: not a recognised trace (expected an Nsight Systems SQLite export, a "
        "torch.profiler JSON/JSON.gz trace, rocprofv3 JSON or rocpd SQLite, a jax.profiler "
        "trace, or a .nsys-rep)")


#: The first of these in a JSON trace's text says whose it is: rocprofv3's tool key, an XPlane
#: process name (jax.profiler), or Kineto's top-level keys and event categories (old and new).
_FLAVOUR_MARKS = re.compile(
    rb'"(rocprofiler-sdk-tool)"|"(/device:|/host:CPU")|"(schemaVersion|deviceProperties|'
    rb'cuda_runtime|cuda_driver|cpu_op|user_annotation|python_function|gpu_memcpy|gpu_memset|'
    rb'ac2g|Operator|Kernel|Runtime)"')
_FLAVOURS = ("rocprofv3-json", "jax-json", "kineto-json")


def json_flavour(text: bytes) -> str | None:
    """Which Chrome-trace-like JSON the text is, by the first mark in it; None when it has none.
    (Kineto's keys come in any order: a tool's wrapper may come first.)"""
    m = _FLAVOUR_MARKS.search(text)
    return None if m is None else _FLAVOURS[m.lastindex - 1]


def _flavour_past_head(path: Path, gz: bool) -> str:
    """json_flavour of the whole text, read a block at a time until a mark turns up: the head
    held none (lane names written after the events, a long wrapper). A JAX trace read as Kineto
    had "no GPU activity". Kineto when nothing says otherwise; damage is the importer's to tell."""
    from ..io import inflater
    block, overlap = 1 << 20, 64
    try:
        with open(path, "rb") as fh:
            tail = b""
            for b in (_gunzipped(fh, block) if gz else iter(lambda: fh.read(block), b"")):
                text = tail + b
                found = json_flavour(text)
                if found:
                    return found
                tail = text[-overlap:]
    except (OSError, inflater().error):     # damage: the importer reports it
        pass
    return "kineto-json"


def _gunzipped(fh, block: int):
    """The first gzip member's text, at most `block` bytes at a time, read as it is inflated
    (a sniff holds neither the compressed file nor its text)."""
    from ..io import inflater
    inflate = inflater()
    d = inflate.decompressobj(16 + inflate.MAX_WBITS)
    while not d.eof and (chunk := fh.read(block)):
        while chunk:
            out = d.decompress(chunk, block)
            chunk = d.unconsumed_tail
            if out:
                yield out


def _gunzip_head(path: Path, size: int = 1 << 16) -> bytes:
    """The first decompressed bytes of a gzip file ('' if it is not readable gzip)."""
    import zlib
    try:
        with open(path, "rb") as fh:
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(fh.read(size), size)
    except (OSError, zlib.error):
        return b""


def _has_rocpd_tables(path: Path) -> bool:
    import sqlite3
    from ..io import readonly_sqlite_uri
    try:
        con = sqlite3.connect(readonly_sqlite_uri(path), uri=True)
        try:
            from .rocprof_rocpd import is_rocpd
            return is_rocpd(con)
        finally:
            con.close()
    except sqlite3.DatabaseError:
        return False     # the nsys importer reports the damage in its own words


def load(path: str | os.PathLike, progress=None) -> Timeline:
    """Load any supported trace into a Timeline. Raises TraceFormatError on bad input."""
    p = Path(path)
    t0 = time.perf_counter()
    try:
        with collector.paused():         # millions of acyclic objects: tracelint.collector
            tl = _load(p, progress)
    except RecursionError:
        from ..reporters.escape import terminal_text
        raise TraceFormatError(f"{terminal_text(str(path), 200)}: nested too deeply to read "
                               "(JSON nesting beyond Python's recursion limit)") from None
    tl.meta.load_s = time.perf_counter() - t0
    return tl


def _load(p: Path, progress) -> Timeline:
    path = p
    fmt = sniff(p)
    if fmt == "nsys-rep":
        exported = export_nsys_rep(p)
        try:
            from .nsys_sqlite import load_nsys_sqlite
            tl = load_nsys_sqlite(exported, progress=progress)
        finally:                   # the export's temporary folder never outlives the load
            shutil.rmtree(exported.parent, ignore_errors=True)
        tl.meta.notes.append(f"exported from {p.name} with `nsys export --type sqlite`")
    elif fmt == "nsys-sqlite":
        from .nsys_sqlite import load_nsys_sqlite
        tl = load_nsys_sqlite(p, progress=progress)
        wal = Path(f"{p}-wal")
        if wal.is_file() and wal.stat().st_size > 0:     # read immutable: the WAL is not seen
            tl.meta.notes.append(f"{wal.name} beside the export holds changes not yet written "
                                 "into it, which are not read; checkpoint it first "
                                 "(sqlite3 FILE 'PRAGMA wal_checkpoint')")
    elif fmt == "rocpd-sqlite":
        from .rocprof_rocpd import load_rocpd
        tl = load_rocpd(p)
    elif fmt == "rocprofv3-json":
        from .rocprof_json import load_rocprof_json
        tl = load_rocprof_json(p)
    elif fmt == "jax-json":
        from .jax_trace import load_jax
        tl = load_jax(p)
    else:
        from .kineto_json import load_kineto
        tl = load_kineto(p, progress=progress)
    from ..timeline.schema import share_constant_tables
    tl.meta.source = str(path)
    share_constant_tables(tl)
    return tl


def export_nsys_rep(path: Path) -> Path:
    """Export a .nsys-rep/.qdrep to SQLite with the nsys CLI into a temp dir (input untouched)."""
    nsys = shutil.which("nsys")
    if nsys is None:
        raise TraceFormatError(
            f"{path}: an Nsight Systems report; export it first with "
            f"`nsys export --type sqlite -o {path.with_suffix('.sqlite').name} {path.name}` "
            "(nsys is not on PATH)")
    out = Path(tempfile.mkdtemp(prefix="tracelint-")) / (path.stem + ".sqlite")
    res = subprocess.run([nsys, "export", "--type", "sqlite", "--force-overwrite", "true",
                          "-o", str(out), str(path)], capture_output=True, text=True)
    if res.returncode != 0 or not out.exists():
        shutil.rmtree(out.parent, ignore_errors=True)
        msg = (res.stderr or res.stdout).strip().splitlines()
        shutil.rmtree(out.parent, ignore_errors=True)
        raise TraceFormatError(f"{path}: nsys export failed: {msg[-1] if msg else res.returncode}")
    return out

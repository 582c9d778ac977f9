"""A large gzip Kineto trace decompressed, a block at a time, into a temporary plain file, so that
it is read like a large plain one: by byte range, by several processes (kineto_ranges,
kineto_parallel).

Why: the byte ranges need a file they can read at any offset, which gzip is not. A large
.json.gz therefore took the whole-buffer path: the decompressed file and one raw slice per
event held at once, in one process. The 287 MB reference, gzipped (gzip -1: 23 MB), linted at
a peak of 894 MB and 2.1x the CPU of the same file plain. Staged, it is the plain file's load
plus the decompression, at the plain file's peak: the decompressed text goes to disk, never to
memory.

Where the temporary file cannot be written (no space, no temporary folder), the whole-buffer
path runs as before; it is removed as soon as the load has read it.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from .kineto_ranges import STREAM_MIN

#: Gzip that expands to less is read in memory (the whole-buffer path). From here on its text
#: is written out, for the byte-range path that plain files of this size take (kineto_ranges:
#: several processes, no raw slice per event). It was 64 MiB, set while the ranges were there
#: to bound memory; every real gzip trace shared with this project (10-56 MB of text) then
#: loaded in one process, its lint 1.2-1.6x the wall time of the same trace plain
#: (docs/performance.md, twenty-ninth pass).
STAGE_MIN = STREAM_MIN
#: The last four bytes of a gzip member hold its decompressed size modulo 2**32 (RFC 1952): a
#: file whose size says less than STAGE_MIN is small unless it is this large compressed
#: (multi-member files and sizes past 4 GiB, whose hint is not the size).
COMPRESSED_LARGE = 16 << 20


def worth_staging(path: Path) -> bool:
    """Whether `path` is gzip that expands to a large file (by its size hint, RFC 1952)."""
    try:
        with open(path, "rb") as fh:
            if fh.read(2) != b"\x1f\x8b":
                return False
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(size - 4, 0))
            hint = int.from_bytes(fh.read(4), "little")
    except OSError:
        return False
    return hint >= STAGE_MIN or size >= COMPRESSED_LARGE


@contextlib.contextmanager
def staged(path: Path):
    """Yields a temporary plain copy of the gzip file `path` (removed on leaving), or None when
    it is not worth it or cannot be written. The gzip limits apply as on every read
    (io.gunzip_blocks): a decompression bomb or corrupt data raises TraceFormatError here."""
    if not worth_staging(path):
        yield None
        return
    from ..io import TextEnds, gunzip_blocks, quick_scan_reads_ends, remember_gzip_ends
    try:
        data = path.read_bytes()
        fd, name = tempfile.mkstemp(prefix="tracelint-", suffix=".json")
    except OSError:
        yield None
        return
    plain = Path(name)
    try:
        try:
            # the ends of the text, for a quick secret scan that will read only them: a text
            # it reads whole needs none (keeping them cost 16 MiB of a 21 MB trace's lint peak)
            ends = TextEnds() if quick_scan_reads_ends(path) else None
            with os.fdopen(fd, "wb") as out:
                for block in gunzip_blocks(data, path):
                    out.write(block)
                    if ends is not None:
                        ends.add(block)
        except OSError:
            yield None
            return
        del data
        if ends is not None:
            remember_gzip_ends(path, ends)  # for the quick secret scan (secrets/scan.py)
        yield plain
    finally:
        with contextlib.suppress(OSError):
            plain.unlink()

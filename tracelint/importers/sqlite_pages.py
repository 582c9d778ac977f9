"""Integer columns of a SQLite table read straight from the file's B-tree pages, compiled by
numba: the nsys importer's path for the tables of millions of rows (kernels, runtime calls).

Why: through SQL every value is formatted as text by SQLite (group_concat) and parsed back by
numpy; at 10 M kernels that is most of a lint's load time and a string of hundreds of MB per
chunk. The pages hold the values as big-endian integers in a simple record format
(https://www.sqlite.org/fileformat.html, "B-tree Pages" and "Record Format"), so a compiled
pass reads them directly, about 10x faster, into the final arrays.

Scope, and what falls back to SQL (the caller then scans as before): only ordinary rowid
tables whose wanted columns hold integers or NULL, with every record on its page (no overflow
pages) and as many columns as the table (no defaults from ALTER TABLE). Anything else, and
anything that does not look like a well-formed B-tree (a page type, an offset out of its page,
rowids out of order), returns None; SQL then reads the file, or reports it damaged. The file
is mapped read-only, like the immutable SQL connection (a -wal file is ignored by both).
"""
from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np

from ..jit import Loop

#: Leaf pages decoded per batch, between two releases of the mapped file (the pages read stay
#: in the OS page cache, not in this process's resident memory): about 110 k rows of an nsys
#: kernel table, a batch block of 17 MB (4x as many pages: 90 MB more at the 3 M-kernel
#: load's peak, and no faster).
BATCH_PAGES = 1 << 10
LEAF, INTERIOR = 0x0D, 0x05
FAIL, UNSUPPORTED = -1, -2


def _u16(b, o):
    return (np.int64(b[o]) << 8) | np.int64(b[o + 1])


def _u32(b, o):
    return (np.int64(b[o]) << 24) | (np.int64(b[o + 1]) << 16) | (np.int64(b[o + 2]) << 8) \
        | np.int64(b[o + 3])


def _varint(b, o, end):
    """(value, next offset); next offset -1 past `end`."""
    v = np.int64(0)
    for k in range(9):
        if o >= end:
            return v, -1
        c = np.int64(b[o])
        o += 1
        if k == 8:
            return (v << 8) | c, o
        v = (v << 7) | (c & 0x7F)
        if c < 0x80:
            return v, o
    return v, o


def _size(st):
    """Bytes of a value of serial type st; -1: a reserved type."""
    if st <= 4:
        return st
    if st == 5:
        return 6
    if st <= 7:
        return 8
    if st <= 9:
        return 0
    if st <= 11:
        return -1
    return (st - 12) // 2 if st % 2 == 0 else (st - 13) // 2


def _leaf_pages(b, page_size, root, out):
    """The table's leaf pages in key order into out; their count, or FAIL."""
    n_pages = len(b) // page_size
    stack_page = np.zeros(64, np.int64)
    stack_cell = np.zeros(64, np.int64)
    stack_page[0], depth, n = root, 1, 0
    while depth > 0:
        page = stack_page[depth - 1]
        if page < 1 or page > n_pages:
            return FAIL
        base = (page - 1) * page_size
        hdr = base + (100 if page == 1 else 0)
        kind = b[hdr]
        if kind == LEAF:
            if n >= len(out):
                return FAIL
            out[n] = page
            n += 1
            depth -= 1
            continue
        if kind != INTERIOR:
            return FAIL
        cells = _u16(b, hdr + 3)
        if hdr + 12 + 2 * cells > base + page_size:
            return FAIL
        cell = stack_cell[depth - 1]
        stack_cell[depth - 1] = cell + 1
        if cell < cells:
            ptr = _u16(b, hdr + 12 + 2 * cell)
            if ptr < 12 or ptr + 4 > page_size:
                return FAIL
            child = _u32(b, base + ptr)
        elif cell == cells:
            child = _u32(b, hdr + 8)
        else:
            depth -= 1
            continue
        if depth >= 64:
            return FAIL
        stack_page[depth], stack_cell[depth] = child, 0
        depth += 1
    return n


def _count_cells(b, page_size, pages, counts):
    """Rows on the leaf pages: each page's cell count into counts, their total returned."""
    total = 0
    for i in range(len(pages)):
        page = pages[i]
        counts[i] = _u16(b, (page - 1) * page_size + (100 if page == 1 else 0) + 3)
        total += counts[i]
    return total


def _read_rows(b, page_size, usable, pages, slot, values, nulls, rowids, at, last):
    """Decode the leaf pages' records from row `at` on: column col into values[slot[col]]
    and its NULL mask into nulls[slot[col]] (slot -1: not wanted). The row count after them,
    or FAIL / UNSUPPORTED. `last`: the rowid before."""
    max_local = usable - 35
    n = at
    for page in pages:
        base = (page - 1) * page_size
        hdr = base + (100 if page == 1 else 0)
        end = base + page_size
        if b[hdr] != LEAF:
            return FAIL
        cells = _u16(b, hdr + 3)
        if hdr + 8 + 2 * cells > end or n + cells > len(rowids):
            return FAIL
        for c in range(cells):
            ptr = _u16(b, hdr + 8 + 2 * c)
            o = base + ptr
            if ptr < 8 or o >= end:
                return FAIL
            size, o = _varint(b, o, end)
            if o < 0:
                return FAIL
            rowid, o = _varint(b, o, end)
            if o < 0 or rowid <= last:
                return FAIL
            if size > max_local:
                return UNSUPPORTED               # the record continues on overflow pages
            rec_end = o + size
            if rec_end > end:
                return FAIL
            h, p = _varint(b, o, rec_end)
            hdr_end = o + h
            if p < 0 or h < 1 or hdr_end > rec_end:
                return FAIL
            body, col = hdr_end, 0
            while p < hdr_end and col < len(slot):
                st, p = _varint(b, p, hdr_end)
                width = _size(st)
                if p < 0 or width < 0 or body + width > rec_end:
                    return FAIL
                k = slot[col]
                if k != -1:
                    if st == 0:
                        v = np.int64(-1)
                        nulls[k, n] = 1
                    elif st == 8 or st == 9:
                        v = np.int64(st - 8)
                    elif st <= 6:
                        v = np.int64(b[body])
                        if v >= 128:
                            v -= 256
                        for i in range(1, width):
                            v = (v << 8) | np.int64(b[body + i])
                    else:
                        return UNSUPPORTED       # a float, text or blob where an integer is wanted
                    values[k, n] = v
                body += width
                col += 1
            if col < len(slot):
                return UNSUPPORTED               # a short record: its last columns are defaults
            rowids[n] = rowid
            last = rowid
            n += 1
    return n


_HELPERS = {"_u16": _u16, "_u32": _u32, "_varint": _varint, "_size": _size}
LEAVES = Loop(_leaf_pages, 0, helpers=_HELPERS)
CELLS = Loop(_count_cells, 0, helpers=_HELPERS)
ROWS = Loop(_read_rows, 0, helpers=_HELPERS)


def read_columns(path: Path, root: int, columns: list[str], table_columns: list[str],
                 rowid_alias: str | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
    """{column: (int64 values, NULL mask)} of a rowid table in rowid order (NULL: -1 and
    True), or None where this reader does not apply (numba missing, TRACELINT_JIT=0, or any
    case in the module docstring). table_columns: the table's columns in declaration order;
    rowid_alias: its INTEGER PRIMARY KEY column (stored as the rowid), if any. A column (or
    mask) that holds one value throughout comes back as a read-only stride-0 view; every other
    is an array of its own."""
    if not all(f.use_compiled(1 << 62) for f in (LEAVES, CELLS, ROWS)) or \
            any(c not in table_columns for c in columns):
        return None
    wanted = [c for c in columns if c != rowid_alias]
    slot = np.full(len(table_columns), -1, np.int64)
    for k, c in enumerate(wanted):
        slot[table_columns.index(c)] = k
    slot = slot[:max([table_columns.index(c) for c in wanted], default=-1) + 1]
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size < 1024:
            return None
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        got = _parse(mm, root, slot, len(wanted), rowid_alias in columns)
    except Exception:
        if not ROWS.broken and not LEAVES.broken and not CELLS.broken:
            raise
        got = None                       # numba could not compile the reader: SQL reads
    finally:
        try:
            mm.close()                   # no view of it outlives _parse
        except BufferError:              # unless an exception's frames hold one: GC closes it
            pass
    if got is None:
        return None
    values, nulls, rowids = got
    out = {c: (values[k], nulls[k]) for k, c in enumerate(wanted)}
    if rowid_alias in columns:
        out[rowid_alias] = (rowids, np.zeros(len(rowids), np.bool_))
    return out


class _Column:
    """A column filled batch by batch that stays one value until a batch holds another.

    Why: reading every column into one full-length block first kept the columns that turn
    out constant (9 of 15 kernel columns at 10 M kernels: 720 MB) and every NULL mask (330 MB)
    at full length until the end of the read, the load's peak; a varying column is stored at
    full length from its first differing batch on, a constant one never."""

    def __init__(self, n: int, dtype):
        self.n, self.dtype, self.value, self.full = n, dtype, None, None

    def put(self, at: int, part: np.ndarray) -> None:
        if self.full is None:
            if not len(part):
                return
            if self.value is None:
                self.value = part[0]
            if part[0] == self.value and (part == self.value).all():
                return
            self.full = np.empty(self.n, self.dtype)
            self.full[:at] = self.value
        self.full[at:at + len(part)] = part

    def array(self) -> np.ndarray:
        if self.full is not None:
            return self.full
        if self.n < 2 or self.value is None:
            return np.full(self.n, 0 if self.value is None else self.value, self.dtype)
        return np.broadcast_to(np.array(self.value, self.dtype), (self.n,))   # read-only


def _release(mm: mmap.mmap) -> None:
    """Drop the file's pages read so far from this process's resident memory (they stay in the
    OS page cache): the table is read once, and would otherwise add its size to the peak."""
    if hasattr(mm, "madvise"):
        mm.madvise(mmap.MADV_DONTNEED)


def _parse(mm: mmap.mmap, root: int, slot: np.ndarray, w: int, keep_rowids: bool):
    """([w values], [w NULL masks], rowids or None) from the mapped file, or None. The rows are
    decoded BATCH_PAGES leaf pages at a time into a small block, then spread into _Columns."""
    b = np.frombuffer(mm, np.uint8)
    page_size = int(_u16(b, 16))
    page_size = 65536 if page_size == 1 else page_size
    usable = page_size - int(b[20])
    if page_size < 512 or page_size & (page_size - 1) or usable < 480:
        return None
    b = b[:len(b) - len(b) % page_size]
    pages = np.zeros(len(b) // page_size, np.int64)
    n_leaves = LEAVES.run_compiled(b, page_size, root, pages)
    if n_leaves < 0:
        return None
    pages = pages[:n_leaves]
    counts = np.zeros(n_leaves, np.int64)
    n = int(CELLS.run_compiled(b, page_size, pages, counts))
    _release(mm)                         # counting touched every leaf page
    values = [_Column(n, np.int64) for _ in range(w)]
    nulls = [_Column(n, np.bool_) for _ in range(w)]
    rowids = np.empty(n if keep_rowids else 0, np.int64)
    at, last = 0, np.iinfo(np.int64).min
    rows = ROWS.run_compiled
    for lo in range(0, n_leaves, BATCH_PAGES):
        m = int(counts[lo:lo + BATCH_PAGES].sum())
        block, null_block = np.empty((w, m), np.int64), np.zeros((w, m), np.bool_)
        ids = rowids[at:at + m] if keep_rowids else np.empty(m, np.int64)
        if rows(b, page_size, usable, pages[lo:lo + BATCH_PAGES], slot, block, null_block,
                ids, 0, last) != m:
            return None
        for k in range(w):
            values[k].put(at, block[k])
            nulls[k].put(at, null_block[k])
        last = ids[m - 1] if m else last
        at += m
        _release(mm)
    return [c.array() for c in values], [c.array() for c in nulls], rowids

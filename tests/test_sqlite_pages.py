"""Columns read from a SQLite file's pages (importers/sqlite_pages.py) equal what SQL reads:
the kernels and runtime calls of every real nsys export, tables built here to hit each part of
the record format, and None (SQL then reads) wherever the reader does not apply or the file
is damaged."""
from __future__ import annotations

import shutil
import sqlite3

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, TRACES

from tracelint.importers import sqlite_pages
from tracelint.importers.nsys_activity import read_kernels
from tracelint.importers.nsys_db import KERNEL, Db
from tracelint.importers.nsys_host import read_api_calls

pytest.importorskip("numba", reason="numba (the `fast` extra) not installed")

EXPORTS = sorted((TRACES / "nsys").glob("*.sqlite")) + sorted((REPO / "fixtures" / "examples").glob("*.sqlite"))


def _tables(path, monkeypatch, mode):
    monkeypatch.setenv("TRACELINT_JIT", mode)     # 1: pages at any size; 0: SQL
    db = Db(path)
    try:
        return read_kernels(db), read_api_calls(db)
    finally:
        db.close()


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name[:40])
def test_real_exports_read_from_pages_equal_sql(path, monkeypatch):
    monkeypatch.setenv("TRACELINT_JIT", "1")
    db = Db(path)
    used = db.raw_scan(KERNEL, {"s": '"start"'}) is not None if "start" in db.columns(KERNEL) else None
    db.close()
    if used is None:
        pytest.skip("no kernel table")
    assert used, "the page reader fell back to SQL on a real export"
    for sql, pages in zip(_tables(path, monkeypatch, "0"), _tables(path, monkeypatch, "1")):
        pd.testing.assert_frame_equal(sql, pages)


def _db(tmp_path, ddl, rows, page_size=1024):
    path = tmp_path / "t.sqlite"
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA page_size = {page_size}")
    con.execute(ddl)
    con.executemany(f"INSERT INTO t VALUES ({','.join('?' * len(rows[0]))})", rows)
    con.commit()
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 't'").fetchone()[0]
    cols = [r[1] for r in con.execute("PRAGMA table_info(t)")]
    con.close()
    return path, root, cols


def _sql(path, cols):
    con = sqlite3.connect(path)
    rows = con.execute(f"SELECT {','.join(cols)} FROM t ORDER BY rowid").fetchall()
    con.close()
    return rows


def test_every_integer_width_null_and_many_pages(tmp_path):
    """Serial types 0-6, 8, 9 (NULL, 1-8 byte integers, the constants 0 and 1), negative
    values, a text column skipped over, thousands of rows over a multi-level B-tree."""
    rng = np.random.default_rng(5)
    widths = [0, 1, 127, -128, 300, -32768, 1 << 20, -(1 << 23), 1 << 40, -(1 << 47), 1 << 62,
              -(1 << 63), (1 << 63) - 1, None]
    rows = [(int(i), str(rng.integers(0, 10**6)) * int(rng.integers(0, 4)),
             widths[i % len(widths)], None if i % 7 == 0 else int(rng.integers(-10**12, 10**12)))
            for i in range(5000)]
    path, root, cols = _db(tmp_path, "CREATE TABLE t (a INTEGER, s TEXT, b INTEGER, c INTEGER)", rows)
    got = sqlite_pages.read_columns(path, root, ["a", "b", "c"], cols)
    for k, col in enumerate(["a", "b", "c"]):
        values, nulls = got[col]
        want = [r[k] for r in _sql(path, ["a", "b", "c"])]
        assert nulls.tolist() == [w is None for w in want]
        assert values.tolist() == [-1 if w is None else w for w in want]


def test_constant_columns_are_never_stored_at_full_length(tmp_path):
    """A column (or NULL mask) with one value throughout comes back as a read-only stride-0
    view; the others are arrays of their own, not rows of a shared block."""
    rows = [(7, i, -1, i * i, None) for i in range(3000)]
    path, root, cols = _db(tmp_path, "CREATE TABLE t (a INTEGER, b INTEGER, c INTEGER, "
                           "d INTEGER, e INTEGER)", rows)
    got = sqlite_pages.read_columns(path, root, cols, cols)
    assert [got[c][0].tolist() for c in cols] == [[-1 if v is None else v for v in col]
                                                   for col in zip(*rows)]
    assert [got[c][0].strides == (0,) for c in cols] == [True, False, True, False, True]
    assert [got[c][1].strides == (0,) for c in cols] == [True] * 5
    assert got["e"][1].all() and not got["a"][1].any()
    assert got["b"][0].base is None and got["d"][0].base is None
    assert not got["a"][0].flags.writeable and got["b"][0].flags.writeable


def test_a_column_that_varies_only_in_a_later_batch(tmp_path, monkeypatch):
    """Read two leaf pages per batch: a column constant over the first batches and different
    (or NULL) only near the end still reads back whole, its earlier rows included."""
    monkeypatch.setattr(sqlite_pages, "BATCH_PAGES", 2)
    n = 4000
    rows = [(5 if i < n - 3 else i, None if i == n - 1 else 9, i) for i in range(n)]
    path, root, cols = _db(tmp_path, "CREATE TABLE t (a INTEGER, b INTEGER, c INTEGER)", rows)
    got = sqlite_pages.read_columns(path, root, cols, cols)
    assert got["a"][0].tolist() == [r[0] for r in rows]
    assert got["b"][0].tolist() == [9] * (n - 1) + [-1]
    assert got["b"][1].tolist() == [False] * (n - 1) + [True]
    assert got["c"][0].tolist() == list(range(n))


def test_rowid_alias_and_deleted_rows(tmp_path):
    """An INTEGER PRIMARY KEY is the rowid (stored as NULL in the record); deleted rows leave
    gaps in it; the rows come back in rowid order."""
    rows = [(i * 3, i * i) for i in range(2000)]
    path, root, cols = _db(tmp_path, "CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)", rows)
    con = sqlite3.connect(path)
    con.execute("DELETE FROM t WHERE v % 5 = 0")
    con.commit()
    con.close()
    got = sqlite_pages.read_columns(path, root, ["id", "v"], cols, rowid_alias="id")
    want = _sql(path, ["id", "v"])
    assert got["id"][0].tolist() == [r[0] for r in want]
    assert got["v"][0].tolist() == [r[1] for r in want]


@pytest.mark.parametrize("ddl, rows, why", [
    ("CREATE TABLE t (a INTEGER, b INTEGER)", [(1, 2.5)], "a float where an integer is wanted"),
    ("CREATE TABLE t (a INTEGER, b TEXT)", [(1, "x")], "text where an integer is wanted"),
    ("CREATE TABLE t (a INTEGER, b BLOB)", [(1, b"x" * 5000)], "a record on overflow pages"),
    ("CREATE TABLE t (a INTEGER PRIMARY KEY, b INTEGER) WITHOUT ROWID", [(1, 2)], "no rowid"),
])
def test_what_the_reader_leaves_to_sql(tmp_path, ddl, rows, why):
    path, root, cols = _db(tmp_path, ddl, rows)
    assert sqlite_pages.read_columns(path, root, ["a", "b"], cols) is None, why


def test_short_records_leave_defaults_to_sql(tmp_path):
    """Rows written before ALTER TABLE ADD COLUMN hold fewer columns: their value is the
    column's default, which only SQL knows."""
    path, root, cols = _db(tmp_path, "CREATE TABLE t (a INTEGER)", [(1,), (2,)])
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE t ADD COLUMN b INTEGER DEFAULT 7")
    con.commit()
    con.close()
    cols = cols + ["b"]
    assert sqlite_pages.read_columns(path, root, ["a", "b"], cols) is None
    assert sqlite_pages.read_columns(path, root, ["a"], cols)["a"][0].tolist() == [1, 2]


def test_damaged_files_never_crash(tmp_path):
    """Random bytes overwritten in a copy of a real export: the reader returns None or
    arrays of the table's length; it never reads out of bounds (the process survives)."""
    src = next((p for p in EXPORTS if "cloverleaf" in p.name), None)
    if src is None:
        pytest.skip("cloverleaf export not present")
    con = sqlite3.connect(f"file:{src}?mode=ro&immutable=1", uri=True)
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (KERNEL,)).fetchone()[0]
    cols = [r[1] for r in con.execute(f"PRAGMA table_info({KERNEL})")]
    con.close()
    data = src.read_bytes()
    rng = np.random.default_rng(1)
    outcomes = set()
    for trial in range(40):
        buf = bytearray(data)
        for at in rng.integers(100, len(buf), 200 if trial % 2 else 20):
            buf[at] = int(rng.integers(0, 256))
        path = tmp_path / f"d{trial}.sqlite"
        path.write_bytes(bytes(buf))
        got = sqlite_pages.read_columns(path, root, cols[:6], cols)
        outcomes.add(got is None)
        if got is not None:
            assert len({len(v) for v, _ in got.values()}) == 1
    assert True in outcomes


def test_input_file_is_not_changed(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACELINT_JIT", "1")
    src = next(iter(EXPORTS), None)
    if src is None:
        pytest.skip("no export")
    path = tmp_path / src.name
    shutil.copy(src, path)
    before = path.read_bytes()
    db = Db(path)
    assert db.raw_scan(KERNEL, {"s": '"start"'}) is not None
    db.close()
    assert path.read_bytes() == before

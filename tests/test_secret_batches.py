"""The secret scan's batch calls (many texts at once, joined by text_scan.JOIN) give exactly
what a call per text gives: the needle gate (suspects), literal and regex searches
(containing, matching), the report sink's batch (Sink.texts) and the SQLite cells the scans
read (iter_sqlite_text with a batch filter). Checked on texts built from the secrets, near
misses and odd characters of test_secrets and test_secret_long_texts: the characters whose
lower case changes a text's length or folds to ASCII, NULs inside a text, empty texts."""
from __future__ import annotations

import random
import sqlite3

import pytest

from test_secret_long_texts import ODD
from test_secrets import NEGATIVES, POSITIVES
from tracelint.secrets import sqlite_cells
from tracelint.secrets import text_scan as T
from tracelint.secrets.masking import NameSet
from tracelint.secrets.sink import Sink

NAMES = {"alice7": "user-name", "gpu-node-17": "host-name"}


def _texts(seed: int, n: int = 3000) -> list[str]:
    """Short texts like trace names: pieces of secrets, near misses and odd characters,
    user and host names, plain kernel names; some empty, some cut."""
    rng = random.Random(seed)
    pool = [t for t, _ in POSITIVES] + NEGATIVES + ODD + list(NAMES) + [
        "aten::to, op_id = 317151", "void gemm_kernel<128>", "ncclAllReduce", "\u0130KEY",
        "\u212aey", "x\u03a3", "\u03a3\u0130", "alice7x", "-alice7-", "alice7"]
    out = []
    for _ in range(n):
        parts = [rng.choice(pool) for _ in range(rng.randrange(0, 4))]
        if parts and rng.random() < 0.3:
            parts[-1] = parts[-1][:rng.randrange(len(parts[-1]) + 1)]
        out.append(rng.choice(["", " ", "\x00", "_"]).join(parts))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_batch_gate_is_the_gate_of_each_text(seed):
    texts = _texts(seed)
    for personal in (True, False):
        want = [i for i, t in enumerate(texts) if T.suspect(t, personal)]
        assert T.suspects(texts, personal) == want
        assert 0 < len(want) < len(texts)


@pytest.mark.parametrize("seed", range(3))
def test_batch_searches_are_the_searches_of_each_text(seed):
    texts = _texts(seed)
    for raws in (["alice7", "Token", "ü"], ["alice7", "\x00x"]):    # the second holds JOIN
        want = [i for i, t in enumerate(texts) if any(r in t for r in raws)]
        assert T.containing(raws, texts) == want and 0 < len(want) < len(texts)
    rx = NameSet(NAMES).regex         # lookarounds at each text's start and end
    want = [i for i, t in enumerate(texts) if rx.search(t)]
    assert T.matching(rx, texts) == want and 0 < len(want) < len(texts)
    assert T.containing(["x"], []) == [] == T.matching(rx, [])


def _sink(paths: bool, raws: set[str]) -> Sink:
    sk = Sink(paths=paths)
    sk.learn(["trace"], found={"trace": (frozenset(raws), dict(NAMES))})
    return sk


@pytest.mark.parametrize("paths", [False, True])
@pytest.mark.parametrize("raws", [set(), {"op_id = 3171", "gemm_kernel"}, {"gemm\x00x"}])
def test_the_sinks_batch_is_its_text_of_each(paths, raws):
    items = _texts(11, 2000) + [None, 3, 2.5, ""]
    one_by_one = [_sink(paths, raws).text(x) for x in items]
    assert _sink(paths, raws).texts(items) == one_by_one
    assert one_by_one != items                      # the batch had work to do
    assert Sink(enabled=False).texts(items) == items


@pytest.mark.parametrize("numpy_from", [0, 1 << 40])
@pytest.mark.parametrize("raws", [set(), {"op_id = 3171", "gemm_kernel"}])
def test_the_sinks_batch_of_only_strings_is_its_text_of_each(raws, numpy_from, monkeypatch):
    monkeypatch.setattr(T, "NUMPY_FROM", numpy_from)        # both searches of the joined texts
    items = _texts(12, 2000) + ["", "API_KEY=abcdefghij123456"]   # every item a str
    one_by_one = [_sink(True, raws).text(x) for x in items]
    assert _sink(True, raws).texts(items) == one_by_one != items


def _trace_db(path, texts: list[str]) -> None:
    """Tables as an nsys export has them: ids and several text columns, a key/value table,
    a table without rowid; NULLs, numbers, invalid UTF-8 and NULs among the text."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    con.execute("CREATE TABLE NVTX_EVENTS (start INT, text TEXT, domain TEXT, color)")
    con.execute("CREATE TABLE META_DATA (name TEXT, value TEXT)")
    con.execute("CREATE TABLE PLAIN (k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID")
    for i, t in enumerate(texts):
        con.execute("INSERT INTO StringIds VALUES (?, ?)", (i, t))
        con.execute("INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, ?)",
                    (i, t if i % 5 else None, texts[-1 - i] if i % 3 else None, i if i % 2 else t))
        if i % 50 == 0:
            con.execute("INSERT INTO META_DATA VALUES (?, ?)", (f"TOKEN_{i}" if i % 100 else t, t))
            con.execute("INSERT OR IGNORE INTO PLAIN VALUES (?, ?)", (f"k{i}", t))
    con.execute("INSERT INTO NVTX_EVENTS VALUES (0, CAST(x'ff41' AS TEXT), "
                "CAST(x'6b657900ff' AS TEXT), NULL)")
    con.commit()
    con.close()


def _in_row_order(con, cells) -> None:
    """Cells come table by table, row by row, and in a row column by column."""
    def place(c):
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({c.table})")]
        return int(c.row_label.replace("=", " ").split()[-1]), cols.index(c.column)
    tables = [c.table for c in cells]
    assert tables == sorted(tables)
    for t in set(tables):
        places = [place(c) for c in cells if c.table == t]
        assert places == sorted(places) and len(set(places)) == len(places)


@pytest.mark.parametrize("batch_rows", [7, 4096])
def test_the_cells_a_scan_reads_are_every_cell_that_can_match(tmp_path, monkeypatch, batch_rows):
    """iter_sqlite_text with the gate yields, in order, every cell that find_matches could
    report on: each key/value row's value and each suspect text."""
    monkeypatch.setattr(sqlite_cells, "BATCH_ROWS", batch_rows)
    db = tmp_path / "t.sqlite"
    _trace_db(db, _texts(5, 400))
    con = sqlite_cells.open_readonly(db)
    try:
        every = list(sqlite_cells.iter_sqlite_text(con))
        _in_row_order(con, every)
        for personal in (True, False):
            want = [c for c in every if c.key is not None or T.suspect(c.text, personal)]
            got = list(sqlite_cells.iter_sqlite_text(con, lambda ts: T.suspects(ts, personal)))
            assert got == want
            assert 0 < len(got) < len(every)
            assert {c.table for c in got} == {"StringIds", "NVTX_EVENTS", "META_DATA", "PLAIN"}
    finally:
        con.close()

"""Numeric columns that hold one value throughout are stored once (timeline.schema.
share_constant_columns): on every real trace the loaded tables equal what the importers built,
every constant column costs no memory per row, and no other column changes."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import ALL_TRACES, REPO, needs_shared

from tracelint import importers
from tracelint.timeline import schema
from tracelint.timeline.schema import TABLES, share_constant_columns, take_rows

EXAMPLES = sorted((REPO / "fixtures" / "examples").glob("*.sqlite")) \
    + sorted((REPO / "fixtures" / "examples").glob("*.json.gz"))


def _is_shared(v: np.ndarray) -> bool:
    return len(v) >= 2 and v.strides == (0,)


@needs_shared()
@pytest.mark.parametrize("path", ALL_TRACES + EXAMPLES, ids=lambda p: p.name)
def test_loaded_tables_equal_the_importers_and_share_constants(path, monkeypatch):
    shared = importers.load(path)
    monkeypatch.setattr(schema, "share_constant_columns", lambda df: df)   # read by the load
    built = importers.load(path)
    n_shared = 0
    for table in TABLES:
        got, want = shared.table(table), built.table(table)
        pd.testing.assert_frame_equal(got, want)
        for col in got.columns:
            if got[col].dtype.kind not in "iub":
                continue
            v, w = got[col].to_numpy(), want[col].to_numpy()
            constant = len(w) >= 2 and (w == w[0]).all()
            assert _is_shared(v) == constant, (table, col)
            if constant:
                assert not v.flags.writeable
                n_shared += 1
    if len(shared.kernels) >= 2:
        assert n_shared, "a trace with kernels repeats at least its pid or block_z"
        assert shared.gpu_activity.equals(built.gpu_activity)


def test_only_constant_numeric_columns_are_shared():
    df = pd.DataFrame({"same": np.full(5, 7, np.int64), "varies": np.arange(5),
                       "flag": np.ones(5, bool), "nan": np.full(5, np.nan),
                       "name": pd.Categorical(["a"] * 5)}, index=np.arange(10, 15))
    out = share_constant_columns(df)
    pd.testing.assert_frame_equal(out, df)
    assert [c for c in out.columns if _is_shared(out[c].to_numpy())] == ["same", "flag"]
    assert out["same"].to_numpy().base.nbytes == 8      # one value, whatever the row count
    one_row = df.iloc[:1]
    assert share_constant_columns(one_row) is one_row         # nothing to save on one row
    varies = df[["varies", "nan"]]
    assert share_constant_columns(varies) is varies


def test_a_copied_table_is_writable_row_by_row():
    """The documented way to edit a loaded table (README, tracelint.load): copy it first. The
    shared column then holds its own rows, so one write changes one row."""
    df = share_constant_columns(pd.DataFrame({"device": np.zeros(4, np.int64), "x": np.arange(4)}))
    assert not df["device"].to_numpy().flags.writeable
    mine = df.copy()
    mine.loc[1, "device"] = 3
    assert mine["device"].tolist() == [0, 3, 0, 0] and df["device"].tolist() == [0, 0, 0, 0]


def test_take_rows_keeps_a_shared_column_shared_and_copies_the_rest():
    rows = np.array([4, 0, 4, 2])
    shared = np.broadcast_to(np.int64(9), (6,))
    got = take_rows(shared, rows)
    assert got.strides == (0,) and not got.flags.writeable
    assert np.array_equal(got, shared[rows]) and got.dtype == shared.dtype
    plain = np.arange(6, dtype=np.int64) * 3
    assert np.array_equal(take_rows(plain, rows), plain[rows])
    assert len(take_rows(shared, rows[:0])) == 0


def test_empty_tables_are_fresh_copies_with_the_schema_dtypes():
    """A Timeline's empty tables come from one frame made per table: each has the schema's
    columns and dtypes, and what a caller does to one never reaches the next."""
    from tracelint.timeline.model import Timeline
    from tracelint.timeline.schema import empty_table
    first = Timeline()
    first.kernels["extra"] = []
    del first.kernels["start"]
    for table, spec in TABLES.items():
        got = getattr(Timeline(), table)
        assert len(got) == 0 and list(got.columns) == list(spec), table
        assert [str(t) for t in got.dtypes] == [str(pd.Series([], dtype=d).dtype)
                                                 for d in spec.values()], table
    assert empty_table("kernels") is not empty_table("kernels")

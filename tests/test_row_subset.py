"""RowSubset: a group's rows of a dict of columns, each column taken when first read."""
from __future__ import annotations

import numpy as np

from tracelint.timeline.row_subset import RowSubset


def test_columns_are_taken_on_first_read_and_equal_the_plain_subset():
    rng = np.random.default_rng(3)
    cols = {k: rng.integers(0, 100, 50) for k in ("a", "b", "c")}
    rows = np.array([4, 9, 9, 31, 0])
    sub = RowSubset(cols, rows)
    assert len(sub) == 0                     # nothing copied before a read
    assert np.array_equal(sub["b"], cols["b"][rows])
    assert list(sub) == ["b"] and sub["b"] is sub["b"]      # taken once
    assert [sub.at("c", i) for i in range(len(rows))] == cols["c"][rows].tolist()
    assert "c" not in sub                    # a single value does not take the column

"""RowSubset: a group's rows of a dict of columns, each column taken for the figure that reads it."""
from __future__ import annotations

import numpy as np

from tracelint.timeline.row_subset import RowSubset, as_run


def test_columns_taken_equal_the_plain_subset_and_single_values_take_nothing():
    rng = np.random.default_rng(3)
    cols = {k: rng.integers(0, 100, 50) for k in ("a", "b", "c")}
    rows = np.array([4, 9, 9, 31, 0])
    sub = RowSubset(cols, rows)
    assert len(sub) == 5 and np.array_equal(sub.take("b"), cols["b"][rows])
    assert sub.take("b") is not sub.take("b")           # not kept: freed after its figure
    assert [sub.at("c", i) for i in range(len(rows))] == cols["c"][rows].tolist()


def test_one_ascending_run_reads_views_and_anything_else_copies():
    cols = {"a": np.arange(100) * 3}
    run = RowSubset(cols, np.arange(20, 60))
    assert np.shares_memory(run.take("a"), cols["a"]) and not run.take("a").flags.writeable
    assert np.array_equal(run.take("a"), cols["a"][20:60]) and run.at("a", 5) == cols["a"][25]
    # the ends of a run, but not one: a permutation, a repeat, a gap
    for rows in ([0, 2, 1, 3], [4, 4, 5, 7], [1, 3]):
        sub = RowSubset(cols, np.array(rows))
        assert not np.shares_memory(sub.take("a"), cols["a"])
        assert np.array_equal(sub.take("a"), cols["a"][rows])
    assert as_run(np.array([7])) == slice(7, 8) and as_run(np.zeros(0, np.int64)).size == 0

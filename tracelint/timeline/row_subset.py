"""Some rows of a dict of equal-length columns, each column taken only for the figure that
reads it.

Why: a rule that reports one group of rows (a call site of millions of calls) reads a few of
the group's columns in full, once each, and single values of the others. Copying every column
for the group's rows first cost TL005 395 MB at 3 M kernels; keeping each column once read
still held six copies at once (137 MiB at 3 M kernels, 458 MiB at 10 M). Taken one at a time, a
figure's columns are freed before the next figure's are taken; rows that are one ascending run
are read as views, no copies.
"""
from __future__ import annotations

import numpy as np


def as_run(rows: np.ndarray) -> slice | np.ndarray:
    """rows as a slice when they are one ascending run without gaps (a[slice] is a view,
    equal to a[rows]); else rows."""
    n = len(rows)
    if n == 0 or int(rows[-1]) - int(rows[0]) != n - 1 or int(rows[0]) < 0:
        return rows
    if n > 1 and not (rows[1:] > rows[:-1]).all():    # [0, 2, 1, 3] has the ends of a run
        return rows
    return slice(int(rows[0]), int(rows[0]) + n)


class RowSubset:
    """cols' rows `rows`: `take(key)` is the column's rows (not kept; a read-only view when the
    rows are one run), `at(key, i)` the value at the subset's i-th row."""

    def __init__(self, cols: dict, rows: np.ndarray):
        self.cols, self.rows, self._take = cols, rows, as_run(rows)

    def __len__(self) -> int:
        return len(self.rows)

    def take(self, key: str) -> np.ndarray:
        v = self.cols[key][self._take]
        if isinstance(self._take, slice):
            v = v.view()
            v.flags.writeable = False          # a view: writing it would change cols
        return v

    def at(self, key: str, i: int):
        return self.cols[key][self.rows[i]]

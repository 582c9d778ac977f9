"""Some rows of a dict of equal-length columns, each column taken only when first read.

Why: a rule that reports one group of rows (a call site of millions of calls) often reads a
few of the group's columns in full and single values of the others; copying every column for
the group's rows first cost TL005 395 MB at 3 M kernels for five columns it needed.
"""
from __future__ import annotations

import numpy as np


class RowSubset(dict):
    """cols' rows `rows`: `subset[key]` is the column's rows (taken once, on first read),
    `subset.at(key, i)` the value at the subset's i-th row without taking the column."""

    def __init__(self, cols: dict, rows: np.ndarray):
        super().__init__()
        self.cols, self.rows = cols, rows

    def __missing__(self, key: str) -> np.ndarray:
        self[key] = self.cols[key][self.rows]
        return self[key]

    def at(self, key: str, i: int):
        return self.cols[key][self.rows[i]]

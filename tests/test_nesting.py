"""timeline.nesting.nest against forests whose nesting is known by construction: random trees
of ranges on several threads, rows shuffled, with zero-length ranges, children that start with
their parent, siblings that touch, ranges that share a start, and thread keys of real width."""
from __future__ import annotations

import numpy as np
import pytest

from tracelint.timeline.nesting import nest


def _forest(rng, threads: int, roots: int, max_depth: int):
    """Rows (group, start, end, depth, parent) in creation order; children lie in [start, end)
    of their parent and never repeat it, so the nesting is unambiguous."""
    rows: list[list[int]] = []

    def grow(group, lo, hi, depth, parent):
        t = lo
        while t < hi and len(rows) < 4000:
            if rng.random() < 0.25:            # a gap before the next sibling
                t += int(rng.integers(1, 4))
                continue
            length = int(rng.integers(0, max(1, hi - t)))
            if length == 0 and rng.random() < 0.5:
                length = hi - t                  # a child that runs to its parent's end
            if parent >= 0 and t == rows[parent][1] and t + length == rows[parent][2]:
                length -= 1                      # never a copy of its parent
            end = t + max(length, 0)
            me = len(rows)
            rows.append([group, t, end, depth, parent])
            if depth < max_depth and end - t > 1:
                grow(group, t, end, depth + 1, me)
            t = end if end > t else t + 1        # siblings touch, or follow a zero-length one

    for k in range(threads):
        group = (int(rng.integers(1, 2**20)) << 32) | int(rng.integers(0, 2**31))
        for r in range(roots):
            base = r * 1000 + int(rng.integers(0, 50))
            grow(group, base, base + 900, 0, -1)
    return np.array(rows, dtype=np.int64).reshape(-1, 5)


@pytest.mark.parametrize("seed", range(40))
def test_depth_and_parent_of_random_forests(seed):
    rng = np.random.default_rng(seed)
    rows = _forest(rng, threads=int(rng.integers(1, 4)), roots=int(rng.integers(1, 4)),
                   max_depth=int(rng.integers(1, 12)))
    shuffle = rng.permutation(len(rows))
    rows = rows[shuffle]
    where = np.empty(len(rows), np.int64)
    where[shuffle] = np.arange(len(rows))        # creation index -> shuffled row
    group, start, end, depth, parent = rows.T
    parent = np.where(parent >= 0, where[np.clip(parent, 0, None)], -1)
    got_depth, got_parent = nest(group, start, end)
    assert got_depth.tolist() == depth.tolist()
    assert got_parent.tolist() == parent.tolist()


def test_ranges_that_share_a_start_nest_longest_first():
    depth, parent = nest([7, 7, 7, 7], [5, 5, 5, 9], [6, 20, 10, 10])
    assert depth.tolist() == [2, 0, 1, 2] and parent.tolist() == [2, -1, 1, 2]


def test_threads_never_nest_into_each_other():
    depth, parent = nest([1, 2, 1, 2], [0, 1, 2, 3], [100, 50, 10, 4])
    assert depth.tolist() == [0, 0, 1, 1] and parent.tolist() == [-1, -1, 0, 1]

"""The launch link (timeline/links.py) equals a plain dictionary join: the first api_calls row
(in table order) with the GPU row's key, on keys in table order (the path without a sort) and
shuffled ones, with duplicates, unknown correlations and per-process keys."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tracelint.timeline.links import launch_rows


def _expected(api: pd.DataFrame, gpu: pd.DataFrame, per_process: bool) -> list[int]:
    first: dict = {}
    for row, (pid, corr) in enumerate(zip(api["pid"], api["correlation"])):
        if corr >= 0:
            first.setdefault((pid, corr) if per_process else corr, row)
    return [first.get((pid, corr) if per_process else corr, -1) if corr >= 0 else -1
            for pid, corr in zip(gpu["pid"], gpu["correlation"])]


@pytest.mark.parametrize("unknown", [False, True])
@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("per_process", [False, True])
def test_launch_rows_equal_a_dictionary_join(shuffled, per_process, unknown):
    rng = np.random.default_rng(3)
    n = 5000
    corr = np.sort(rng.integers(-3 if unknown else 0, 3000, n))   # duplicates; unknown: -1 ...
    pid = np.sort(rng.integers(1, 4, n)) if per_process else np.full(n, 7)
    if per_process:                                      # in (pid, correlation) order
        order = np.lexsort((corr, pid))
        pid, corr = pid[order], corr[order]
    if shuffled:
        perm = rng.permutation(n)
        pid, corr = pid[perm], corr[perm]
    api = pd.DataFrame({"pid": pid, "correlation": corr})
    gpu = pd.DataFrame({"pid": rng.integers(1, 4, 800) if per_process else np.full(800, 7),
                        "correlation": rng.integers(-2, 3100, 800)})
    got = launch_rows(api, gpu, per_process)
    assert got.dtype == np.int64
    assert got.tolist() == _expected(api, gpu, per_process)


def test_no_usable_call_links_nothing():
    api = pd.DataFrame({"pid": [1, 1], "correlation": [-1, -1]})
    gpu = pd.DataFrame({"pid": [1], "correlation": [-1]})
    assert launch_rows(api, gpu, True).tolist() == [-1]
    assert launch_rows(api.iloc[:0], gpu, True).tolist() == [-1]

"""TL008 groups repeated range names on the name column's codes (_frequent_names): the same
groups, rows and order as a groupby of the names as str, on the range names of real traces
(an emit_nvtx export with an op id in every name, Kineto annotations) and on a column with
missing names, which read "nan" as str() reads them."""
from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest
from conftest import BUNDLED, trace_or_skip

import tracelint

tl008 = importlib.import_module("tracelint.rules.tl008_tail_latency")


def _by_groupby(names: pd.Series, at_least: int) -> list[tuple[str, list[int]]]:
    """What TL008 did before: a str per row, counted and grouped."""
    s = names.astype(str).reset_index(drop=True)
    counts = s.value_counts()
    keep = s.isin(counts[counts >= at_least].index)
    return [(str(k), g.index.tolist()) for k, g in s[keep].groupby(s[keep], sort=False)]


def _mine(names: pd.Series, at_least: int) -> list[tuple[str, list[int]]]:
    return [(n, rows.tolist()) for n, rows in tl008._frequent_names(names, at_least)]


@pytest.mark.parametrize("trace", ["nsys/nsys2026.2_nsys-ai-pytorch-2gpu-1s-slice_h100.sqlite",
                                   "torch/kineto_tbplugin_resnet50_v100_2021-06.pt.trace.json.gz"])
def test_groups_of_real_range_names(trace):
    path = trace_or_skip(BUNDLED / trace)
    names = tracelint.load(path).ranges["name"]
    for at_least in (1, 2, 5, 50):
        want = _by_groupby(names, at_least)
        assert _mine(names, at_least) == want
    assert 0 < len(_by_groupby(names, 2)) < len(_by_groupby(names, 1))


def test_missing_and_odd_names():
    values = ["b", None, "a", "b", "nan", None, "a", "c", "b"]
    rng = np.random.default_rng(3)
    for names in (pd.Series(pd.Categorical(values)), pd.Series(values, dtype=object),
                  pd.Series(pd.Categorical(["x"] * 3 + ["y"], categories=["y", "z", "x"])),
                  pd.Series(pd.Categorical(rng.choice(list("pqrs"), 200))),
                  pd.Series(pd.Categorical([], categories=["a"]))):
        for at_least in (1, 2, 3):
            assert _mine(names, at_least) == _by_groupby(names, at_least)


def test_no_name_at_all():
    """A range table whose names are all missing has no category to count (an empty count)."""
    for names in (pd.Series(pd.Categorical([None, None])), pd.Series([None, None], dtype=object),
                  pd.Series([], dtype=object)):
        for at_least in (1, 2):
            assert _mine(names, at_least) == _by_groupby(names, at_least)

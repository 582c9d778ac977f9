"""timeline.categories.str_categorical is pd.Categorical(values), made with Python's sorted():
the same categories (values, order and dtype) and codes, on real traces' names and on missing,
odd and mixed values."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import BUNDLED, trace_or_skip

import tracelint
from tracelint.timeline.categories import str_categorical


def _same(values) -> None:
    want, got = pd.Categorical(values), str_categorical(values)
    assert got.categories.dtype == want.categories.dtype
    assert got.categories.tolist() == want.categories.tolist()
    assert np.asarray(got.codes).tolist() == np.asarray(want.codes).tolist()
    assert got.ordered == want.ordered


@pytest.mark.parametrize("trace", ["nsys/nsys2026.2_nsys-ai-pytorch-2gpu-1s-slice_h100.sqlite",
                                   "torch/kineto_tbplugin_resnet50_v100_2021-06.pt.trace.json.gz"])
def test_real_names(trace):
    path = trace_or_skip(BUNDLED / trace)
    tl = tracelint.load(path)
    for table in ("ranges", "kernels", "api_calls"):
        names = np.asarray(getattr(tl, table)["name"].astype(object))
        assert len(names) > 0
        _same(names)
        _same(np.concatenate([names[::-1], [None, np.nan]]))


@pytest.mark.parametrize("values", [
    [], [None], [np.nan, None], ["b", "a", None, "b", "", "A", "a"],
    ["é", "e", "z", "\x00", "😀", "ß", "SS", "aten::to, op_id = 10", "aten::to, op_id = 9"],
    np.array(["x", "y", "x"], dtype=object), ["1", 1, "2"], [1.5, 2.5], [b"a", "a"],
])
def test_odd_values(values):
    _same(values)


def test_many_names_in_random_order():
    rng = np.random.default_rng(7)
    names = np.array([f"aten::op_{i % 997}, op_id = {i}" for i in range(5_000)], dtype=object)
    _same(names[rng.permutation(len(names))])

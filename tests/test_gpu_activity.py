"""Timeline.gpu_activity (kernels, copies and memsets in one frame by device and start) on every
real trace equals the plain construction it replaced: a str "table" column and a stable sort
always. The table column is a categorical now, and the sort is skipped when the rows are
already in order (its copy of every column was 0.5 GB at 10 M kernels)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import ALL_TRACES, REPO, needs_shared

import tracelint
from tracelint.timeline.model import _sorted_by
from tracelint.timeline.schema import GPU_ACTIVITY_TABLES

EXAMPLES = sorted((REPO / "fixtures" / "examples").glob("*.sqlite")) \
    + sorted((REPO / "fixtures" / "examples").glob("*.json.gz"))


def _plain(tl) -> pd.DataFrame:
    parts = [pd.DataFrame({"device": df["device"].to_numpy(), "stream": df["stream"].to_numpy(),
                           "start": df["start"].to_numpy(), "end": df["end"].to_numpy(),
                           "correlation": df["correlation"].to_numpy(),
                           "name": df["name"].astype(str).to_numpy(), "table": t,
                           "row": np.arange(len(df), dtype=np.int64)})
             for t in GPU_ACTIVITY_TABLES if len(df := tl.table(t))]
    if not parts:
        return pd.DataFrame()
    return pd.concat(parts, ignore_index=True).sort_values(["device", "start"], kind="stable",
                                                           ignore_index=True)


@needs_shared()
@pytest.mark.parametrize("path", ALL_TRACES + EXAMPLES, ids=lambda p: p.name)
def test_gpu_activity_equals_the_plain_concat_and_sort(path):
    tl = tracelint.load(path)
    got, want = tl.gpu_activity, _plain(tl)
    assert isinstance(got["table"].dtype, pd.CategoricalDtype)
    assert list(got["table"].cat.categories) == list(GPU_ACTIVITY_TABLES)
    if not len(want):
        assert len(got) == 0
        return
    for c in want.columns:
        g = got[c].astype(str) if c in ("name", "table") else got[c]
        assert np.array_equal(g.to_numpy(), want[c].to_numpy()), c


@needs_shared()
@pytest.mark.parametrize("path", ALL_TRACES + EXAMPLES, ids=lambda p: p.name)
def test_gpu_activity_by_stream_equals_a_stable_sort_of_gpu_activity(path):
    """The what-if graph's (device, stream, start) order made straight from the tables equals
    the stable sort of gpu_activity it replaced, ties included, and is not kept."""
    tl = tracelint.load(path)
    got = tl.gpu_activity_by(("device", "stream", "start"))
    assert "gpu_activity" not in tl.__dict__
    want = tl.gpu_activity.sort_values(["device", "stream", "start"], kind="stable",
                                       ignore_index=True)
    assert list(got.columns) == list(want.columns)
    for c in want.columns:
        assert np.array_equal(np.asarray(got[c]), np.asarray(want[c])), c


@pytest.mark.parametrize("seed", range(40))
def test_sorted_by_agrees_with_a_stable_sort(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 60))
    major = np.sort(rng.integers(0, 3, n)) if seed % 2 else rng.integers(0, 3, n)
    minor = rng.integers(0, 5, n)
    if seed % 4 == 1:                  # sorted on both keys
        order = np.lexsort((minor, major))
        major, minor = major[order], minor[order]
    order = np.lexsort((minor, major))
    assert _sorted_by(major, minor) == bool((order == np.arange(n)).all()
                                            or (np.array_equal(major[order], major)
                                                and np.array_equal(minor[order], minor)))


def test_rule_caches_released_before_the_what_if_are_made_again_the_same():
    """The runner forgets the busy intervals and the gpu_activity frame before the what-if
    stage (it reads neither); the report asks again and gets the same arrays."""
    tl = tracelint.load(REPO / "fixtures" / "examples" / "training_step_antipatterns.json.gz")
    dev = tl.devices_in_use()[0]
    first = [a.copy() for a in tl.busy_intervals(dev)]
    share = tl.gpu_busy_fraction(dev)
    act = tl.gpu_activity.copy()
    tl.release_rule_caches()
    assert "_busy" not in tl.__dict__ and "gpu_activity" not in tl.__dict__
    pd.testing.assert_frame_equal(tl.gpu_activity, act)
    again = tl.busy_intervals(dev)
    assert all(np.array_equal(a, b) for a, b in zip(first, again)) and len(first[0])
    assert tl.gpu_busy_fraction(dev) == share

"""row_codes / thread_codes give exactly np.unique(axis=0)'s codes and row order (the slow form
they replace in TL005 and the diff buckets), on random columns with extreme values and on the
threads of a real trace."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pandas as pd

from tracelint.timeline.codes import (compact_row_codes, distinct_labels, mode_label, row_codes,
                                     thread_codes)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"


@pytest.mark.parametrize("n,k,seed", [(0, 2, 0), (1, 1, 1), (7, 3, 2), (20_000, 2, 3), (5_000, 6, 4)])
def test_row_codes_equal_unique_axis0(n, k, seed):
    rng = np.random.default_rng(seed)
    cols = [rng.integers(-3, 6, n, dtype=np.int64) for _ in range(k)]
    if n > 2:  # values that a 32-bit packing of (pid, tid) would collide or misorder
        cols[0][::3] = 2**40 + 1
        cols[-1][::5] = -(2**62)
        cols[-1][1::5] = 2**32 + cols[-1][1::5]
    mat = np.stack(cols, axis=1) if n else np.zeros((0, k), np.int64)
    uniq, inv = np.unique(mat, axis=0, return_inverse=True)
    codes, first = row_codes(*cols)
    assert np.array_equal(codes, inv.reshape(-1))
    assert np.array_equal(mat[first], uniq)
    assert all(codes[f] == c and (codes[:f] != c).all() for c, f in enumerate(first))


@pytest.mark.parametrize("base", [0, -(2**62), 2**62, 2**63 - 100])
def test_row_codes_packed_into_one_key_equal_unique_axis0(base):
    """Columns whose spans multiply to at most 62 bits are packed into one key (codes._packed),
    far from zero too: the same codes and rows as np.unique(axis=0), and the fold for spans
    one value too wide."""
    rng = np.random.default_rng(7)
    cols = [base - 1 + rng.integers(0, 50, 20_000, dtype=np.int64) for _ in range(3)]
    from tracelint.timeline.codes import _packed

    def bounds(cs):
        return [(int(c.min()), int(c.max())) for c in cs]
    assert _packed(cols, bounds(cols)) is not None
    mat = np.stack(cols, axis=1)
    uniq, inv = np.unique(mat, axis=0, return_inverse=True)
    codes, first = row_codes(*cols)
    assert np.array_equal(codes, inv.reshape(-1)) and np.array_equal(mat[first], uniq)
    wide = [np.array([0, 2**31 - 1, 5]), np.array([2**31, 0, 7])]     # spans 2**31 x (2**31 + 1)
    assert _packed(wide, bounds(wide)) is None
    edge = [np.array([0, 2**31 - 1, 5]), np.array([2**31 - 1, 0, 7])]  # exactly 2**62
    assert _packed(edge, bounds(edge)) is not None
    for pair in (wide, edge):
        uniq, inv = np.unique(np.stack(pair, axis=1), axis=0, return_inverse=True)
        assert np.array_equal(row_codes(*pair)[0], inv.reshape(-1))


@pytest.mark.parametrize("where", [0, 1, 2])
def test_row_codes_of_shared_constant_columns(where):
    """A stride-0 column (timeline.schema.shared_if_constant) is skipped, not factorised: the
    codes and first rows equal those of the same values stored in full."""
    rng = np.random.default_rng(where)
    cols = [rng.integers(0, 4, 1000, dtype=np.int64) for _ in range(3)]
    cols[where] = np.full(1000, 9, np.int64)
    shared = list(cols)
    shared[where] = np.broadcast_to(np.int64(9), (1000,))
    want, got = row_codes(*cols), row_codes(*shared)
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
    mat = np.stack(cols, axis=1)           # a column equal throughout is skipped too
    uniq, inv = np.unique(mat, axis=0, return_inverse=True)
    assert np.array_equal(want[0], inv.reshape(-1)) and np.array_equal(mat[want[1]], uniq)
    for make in (lambda v: np.broadcast_to(np.int64(v), (1000,)), lambda v: np.full(1000, v)):
        everything = row_codes(*[make(v) for v in (1, 2)])
        assert np.array_equal(everything[0], np.zeros(1000)) and everything[1].tolist() == [0]


@pytest.mark.parametrize("threads", [1, 3, 500])
def test_compact_row_codes_are_row_codes_int32_or_one_shared_value(threads):
    rng = np.random.default_rng(threads)
    pid = np.full(10_000, 7, np.int64)
    tid = rng.integers(0, threads, 10_000).astype(np.int64) * (2**40 + 3)
    got = compact_row_codes(pid, tid)
    assert np.array_equal(got, row_codes(pid, tid)[0])
    assert got.dtype == np.int32
    assert (got.strides == (0,)) == (threads == 1)      # one thread: one value, stored once
    assert got.flags.writeable == (threads > 1)


def test_thread_codes_shared_across_arrays_on_a_real_trace():
    import tracelint
    path = SHARED / "torch" / "hta_v100_rank1of2.json.gz"
    if not path.exists():
        pytest.skip("shared traces not present")
    tl = tracelint.load(path)
    a, k = tl.api_calls, tl.ranges
    pairs = [(a["pid"].to_numpy(), a["tid"].to_numpy()), (k["pid"].to_numpy(), k["tid"].to_numpy())]
    got = thread_codes(*pairs)
    mat = np.concatenate([np.stack(p, axis=1) for p in pairs])
    inv = np.unique(mat, axis=0, return_inverse=True)[1].reshape(-1)
    assert [len(g) for g in got] == [len(p[0]) for p in pairs]
    assert np.array_equal(np.concatenate(got), inv)
    assert len(np.unique(inv)) > 1


def test_distinct_labels_and_their_mode_agree_with_pandas_on_random_labels():
    rng = np.random.default_rng(7)
    for _ in range(200):
        # labels as a categorical's categories plus "", so "" may repeat; NaN is a label too
        pool = np.array(["", "b", "a", "ab", "", np.nan, "a "], dtype=object)
        labels = pool[rng.integers(0, len(pool), rng.integers(1, 6))]
        code, uniq = distinct_labels(labels)
        assert [str(x) for x in uniq[code]] == [str(x) for x in labels]
        assert len(uniq) == len(pd.unique(pd.Series(labels, dtype=object)))
        rows = rng.integers(0, len(labels), rng.integers(0, 30))
        want = pd.Series(labels[rows], dtype=object).replace("", np.nan).dropna()
        got = mode_label(labels, rows)
        assert got == (want.mode().iat[0] if len(want) else None), (labels, rows)


def test_coded_text_reads_as_the_object_array_of_its_labels():
    """CodedText from a categorical (missing labels included), from strings and a constant,
    joined: every row reads as the labels did, and equal labels share one code."""
    import pandas as pd
    from tracelint.timeline.codes import CodedText
    rng = np.random.default_rng(3)
    cats = ["cudaLaunchKernel", "cudaMemcpyAsync", "", "cudaStreamSynchronize"]
    col = pd.Series(pd.Categorical.from_codes(rng.integers(-1, len(cats), 500), cats))
    rows = rng.integers(0, 500, 300)
    texts = np.array(rng.choice(["aten::mul", "cudaLaunchKernel", "step"], 120), dtype=object)
    parts = [CodedText.categorical(col, rows), CodedText.of(texts), CodedText.constant("", 7)]
    want = np.concatenate([col.take(rows).astype(str).to_numpy(), texts,
                           np.full(7, "", dtype=object)])
    got = CodedText.concat(parts)
    assert len(got) == len(want)
    assert [str(x) for x in got[np.arange(len(want))]] == [str(x) for x in want]
    labels = [str(x) for x in got.labels]
    assert len(labels) == len(set(labels))                 # one code per distinct label
    assert int(np.asarray(pd.isna(got[np.arange(len(want))])).sum()) == int((col.take(rows).isna()).sum())


@pytest.mark.parametrize("hi", [3, 300, 70_000])
@pytest.mark.parametrize("lo", [0, -2])
def test_stable_order_equals_a_stable_argsort(lo, hi):
    """Codes sorted at a narrower width (8 or 16 bits, where they fit and none is negative)
    give the very order a stable argsort of the int64 codes gives, ties in row order."""
    from tracelint.timeline.codes import stable_order
    codes = np.random.default_rng(hi).integers(lo, hi, 50_000).astype(np.int64)
    assert np.array_equal(stable_order(codes), np.argsort(codes, kind="stable"))
    assert np.array_equal(stable_order(codes.astype(np.int32)), np.argsort(codes, kind="stable"))


@pytest.mark.parametrize("k", [0, 1, 5, 49_999, 50_000, 60_000])
@pytest.mark.parametrize("values", ["ints", "ties", "floats"])
def test_largest_first_equals_the_full_stable_sort(k, values):
    """The k largest, ties in row order, as the first k of a stable sort of all of them."""
    from tracelint.timeline.codes import largest_first
    rng = np.random.default_rng(k)
    v = {"ints": rng.integers(-10**9, 10**9, 50_000), "ties": rng.integers(0, 7, 50_000),
         "floats": rng.random(50_000)}[values]
    assert np.array_equal(largest_first(v, k), np.argsort(-v, kind="stable")[:k])

"""Dense codes of rows of several integer columns (e.g. (pid, tid) threads, nesting paths), and
whether rows are in the columns' lexicographic order already (then nothing needs sorting).

`np.unique(np.stack(cols, 1), axis=0)` gives the same codes but sorts a structured view row by
row (about 40x slower on a million rows). Here each column is ranked on its own with a sorted
hash factorisation, and the ranks are folded in one column at a time, re-densified after each
step so the key never overflows. The fold preserves lexicographic order, so codes and the order
of distinct rows are identical to np.unique(axis=0) for any int64 values (no bit packing that
could collide).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .schema import shared_if_constant


def row_codes(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, first): codes[i] is the rank of row i among the distinct rows in lexicographic
    order (as np.unique(axis=0, return_inverse=True)), first[c] the first row holding code c."""
    n = len(columns[0]) if columns else 0
    key = np.zeros(n, dtype=np.int64)
    # a column of one value (stored once, or equal throughout) distinguishes nothing
    cols = [c for c in (np.asarray(col, dtype=np.int64) for col in columns)
            if n and not (n > 1 and c.strides == (0,))]
    bounds = [(int(c.min()), int(c.max())) for c in cols]
    varies = [lo < hi for lo, hi in bounds]
    cols = [c for c, v in zip(cols, varies) if v]
    bounds = [b for b, v in zip(bounds, varies) if v]
    if not cols:             # one value in every column: one code, first held by row 0
        return key, np.zeros(1 if n else 0, np.int64)
    packed = _packed(cols, bounds)
    if packed is not None:
        key = pd.factorize(packed, sort=True)[0].astype(np.int64, copy=False)
        cols = []
    first_col = True
    for col in cols:
        rank, uniq = pd.factorize(col, sort=True)
        rank = rank.astype(np.int64, copy=False)
        key = rank if first_col else pd.factorize(key * len(uniq) + rank, sort=True)[0].astype(np.int64)
        first_col = False
    # each code's first row: numpy does not promise which of repeated fancy-index writes wins,
    # minimum.at takes every value (and is 3x faster than that write on 10 M rows)
    first = np.full(int(key.max()) + 1 if n else 0, n, dtype=np.int64)
    np.minimum.at(first, key, np.arange(n))
    return key, first


def stable_order(codes: np.ndarray) -> np.ndarray:
    """np.argsort(codes, kind="stable") for integer codes, sorted at the narrowest unsigned
    width they fit when they are small and not negative: numpy radix-sorts 8- and 16-bit
    integers (13 M codes of six values: 0.56 s as int32, 0.10 s as uint8)."""
    if len(codes) and codes.dtype.itemsize > 2:
        lo, hi = int(codes.min()), int(codes.max())
        if lo >= 0 and hi < 1 << 16:
            codes = codes.astype(np.uint8 if hi < 1 << 8 else np.uint16)
    return np.argsort(codes, kind="stable")


def largest_first(values: np.ndarray, k: int) -> np.ndarray:
    """np.argsort(-values, kind="stable")[:k] (the k largest, ties in row order) without
    sorting every value: only those at least the k-th largest are sorted (a rule's top five
    of 10 M gaps or calls). Integers only; other values take the full sort."""
    values = np.asarray(values)
    n = len(values)
    if k >= n or values.dtype.kind not in "iu":
        return np.argsort(-values, kind="stable")[:k]
    if k <= 0:
        return np.zeros(0, np.intp)
    kth = np.partition(values, n - k)[n - k]
    some = np.flatnonzero(values >= kth)
    return some[np.argsort(-values[some], kind="stable")][:k]


def in_order(*keys: np.ndarray) -> bool:
    """Whether the rows are in lexicographic order of the keys already (the first key the
    most significant), so a stable lexsort would leave them as they are: compared pairwise
    a key at a time, on the pairs the keys before tie."""
    n = len(keys[0])
    tie = np.ones(max(n - 1, 0), bool)
    for key in keys:
        if key.strides == (0,):                     # one value: every pair ties
            continue
        a, b = key[:-1], key[1:]
        if (tie & (b < a)).any():
            return False
        tie &= b == a
        if not tie.any():
            break
    return True


def _packed(cols: list[np.ndarray], bounds: list[tuple[int, int]]) -> np.ndarray | None:
    """The columns as one int64 key in the same lexicographic order, each an offset from its
    minimum times the spans of the columns after it, when the product of the spans fits 62
    bits (threads' pids and tids do): one factorisation instead of one per column and one per
    fold (1 M host rows: 22 -> 12 ms). None otherwise, or for fewer than two columns."""
    if len(cols) < 2:
        return None
    total = 1
    for lo, hi in bounds:
        total *= hi - lo + 1
    if total > 1 << 62:
        return None
    key = cols[0] - np.int64(bounds[0][0])
    for c, (lo, hi) in zip(cols[1:], bounds[1:]):
        key *= hi - lo + 1
        key += c - np.int64(lo)
    return key


def compact_row_codes(*columns: np.ndarray) -> np.ndarray:
    """row_codes' codes as int32, and stored once (a read-only stride-0 view) when every row
    holds the same values: for a code per row kept through a whole rule, such as the thread of
    every API call (23 M calls: 184 MB as int64; nothing for a trace of one thread)."""
    if columns and len(columns[0]) > 1 and all(np.asarray(c).strides == (0,) for c in columns):
        return np.broadcast_to(np.int32(0), len(columns[0]))     # one thread: nothing to code
    codes, first = row_codes(*columns)
    return shared_if_constant(codes.astype(np.int32) if len(first) < 2**31 else codes)


def thread_codes(*pairs: tuple[np.ndarray, np.ndarray]) -> list[np.ndarray]:
    """Thread codes shared across several (pid, tid) arrays: one code array per pair."""
    if not pairs:
        return []
    allp = np.concatenate([np.asarray(p, dtype=np.int64) for p, _ in pairs])
    allt = np.concatenate([np.asarray(t, dtype=np.int64) for _, t in pairs])
    codes, _ = row_codes(allp, allt)
    return np.split(codes, np.cumsum([len(p) for p, _ in pairs])[:-1])


def distinct_labels(labels) -> tuple[np.ndarray, np.ndarray]:
    """(code of each label, the distinct labels): equal labels share one code, so grouping on
    codes groups as on the labels themselves (a categorical's labels plus an added "" may
    repeat one)."""
    code, uniq = pd.factorize(np.asarray(labels, dtype=object), use_na_sentinel=False)
    return code, np.asarray(uniq, dtype=object)


def mode_label(labels: np.ndarray, codes: np.ndarray) -> str | None:
    """The most frequent non-empty str label of the rows' codes (the smallest label on a tie,
    as pandas' Series.mode), None when every label is empty: counted per code, not per row."""
    tally: dict[str, int] = {}
    used, counts = np.unique(codes, return_counts=True)
    for label, k in zip(labels[used], counts.tolist()):
        if isinstance(label, str) and label:
            tally[label] = tally.get(label, 0) + k
    if not tally:
        return None
    top = max(tally.values())
    return min(label for label, k in tally.items() if k == top)


class CodedText:
    """A text column as codes into its distinct labels, for rows taken from several tables.
    Host-idle attribution reads the launching thread's rows: at 3 M kernels 7 M calls with a
    few dozen names, where a string per row, then a hash factorisation of the strings, cost
    about 0.5 s per column. Indexing gives the row's label, as an object array of the labels
    would (a categorical's labels as `astype(str)` makes them, missing ones included)."""

    __slots__ = ("codes", "labels")

    def __init__(self, codes: np.ndarray, labels: np.ndarray):
        self.codes, self.labels = codes, labels

    def __getitem__(self, rows):
        return self.labels[self.codes[rows]]

    def __len__(self) -> int:
        return len(self.codes)

    @classmethod
    def of(cls, values: np.ndarray) -> "CodedText":
        codes, labels = pd.factorize(values, use_na_sentinel=False)
        return cls(codes.astype(np.int64), np.asarray(labels, dtype=object))

    @classmethod
    def constant(cls, value: str, n: int) -> "CodedText":
        return cls(np.zeros(n, np.int64), np.array([value], dtype=object))

    @classmethod
    def categorical(cls, column: pd.Series, rows: np.ndarray) -> "CodedText":
        cat = column.array
        if not isinstance(cat, pd.Categorical):
            return cls.of(column.astype(str).to_numpy()[rows])
        k = len(cat.categories)
        labels = pd.Categorical.from_codes(np.r_[np.arange(k), -1], cat.categories).astype(str)
        codes = np.asarray(cat.codes)[rows].astype(np.int64)
        return cls(np.where(codes >= 0, codes, k), np.asarray(labels, dtype=object))

    @classmethod
    def concat(cls, parts: list["CodedText"]) -> "CodedText":
        """One column of the parts' rows; equal labels of different parts share one code."""
        uniq, labels = pd.factorize(np.concatenate([p.labels for p in parts]), use_na_sentinel=False)
        offsets = np.cumsum([0] + [len(p.labels) for p in parts])
        codes = [uniq[o:][p.codes] for o, p in zip(offsets, parts)]
        return cls(np.concatenate(codes).astype(np.int64), np.asarray(labels, dtype=object))

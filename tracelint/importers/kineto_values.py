"""Kineto value conversion: microsecond timestamps (JSON ints or exact decimal text) to int64
ns, and the integer columns producers write as ints, numeric text, hex or "stream 7".

float64 cannot hold 1669783687389292.123: the decimal text is parsed digit by digit into
exact integer ns, because rounding invents gaps between back-to-back kernels.
"""
from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from itertools import chain
from operator import attrgetter

import numpy as np

_MAX_US = (2**63 - 1) // 1000 - 1   # largest |µs| whose ns value fits int64
_INT_TEXT = re.compile(r"^\s*(-?\d+)\s*$|^\s*0[xX]([0-9a-fA-F]+)\s*$|^[A-Za-z_ ]+ (\d+)$")


def us_to_ns(values: list) -> tuple[np.ndarray, np.ndarray]:
    """Exact int64 ns from Kineto µs values (JSON ints, decimal text as bytes or str) and a
    parsed-ok mask.

    Up to 3 fractional digits are exact; further digits round half up (none in real traces).
    """
    try:
        us = np.fromiter(values, np.int64, len(values))
    except (TypeError, ValueError, OverflowError):
        return _text_to_ns(values)
    ok = np.abs(us) <= _MAX_US
    return np.where(ok, us, 0) * 1000, ok


def _text_to_ns(values: list) -> tuple[np.ndarray, np.ndarray]:
    """Parse decimal text as a byte matrix (row: value, column: character), digit by digit."""
    b = _equal_width(values)
    if b is None:
        try:
            text = np.array(values, dtype="S")
        except (UnicodeError, TypeError, ValueError):
            text = np.array([str(v).encode("ascii", "replace") for v in values], dtype="S")
        n, w = len(text), max(text.dtype.itemsize, 1)
        b = text.view(np.uint8).reshape(n, w) if text.dtype.itemsize else np.zeros((n, 1), np.uint8)
    n, w = b.shape
    col = np.arange(w)
    digit, dot, neg = (b >= 48) & (b <= 57), b == 46, b[:, 0] == 45
    if n and not neg.any():
        fast = _one_layout(b, digit, dot)
        if fast is not None:
            return fast, np.ones(n, bool)
    dotpos = np.where(dot.any(1), dot.argmax(1), (b != 0).sum(1))
    int_digits = (digit & (col < dotpos[:, None])).sum(1)
    lead = b[np.arange(n), neg.astype(np.intp)]
    ok = ((digit | dot | (b == 0) | ((b == 45) & (col == 0))).all(1) & (dot.sum(1) <= 1)
          & digit.any(1) & ((int_digits < 16) | ((int_digits == 16) & (lead <= ord("8")))))
    val, nfrac, up = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, bool)
    for j in range(w):                 # Horner over columns, keeping 3 fractional digits
        d = b[:, j].astype(np.int64) - 48
        rel = j - dotpos
        take = digit[:, j] & (rel <= 3)
        val = np.where(take, val * 10 + d, val)
        nfrac += take & (rel > 0)
        up |= digit[:, j] & (rel == 4) & (d >= 5)
    val = np.where(neg, -1, 1) * (val * 10 ** (3 - nfrac) + up)
    for i in np.flatnonzero(~ok):      # exponents, huge or odd values: exact slow path
        ns = _one_to_ns(values[i])
        if ns is not None:
            val[i], ok[i] = ns, True
    return np.where(ok, val, 0), ok


def _equal_width(values: list) -> np.ndarray | None:
    """The (n, width) byte matrix of bytes values that all have one length (a trace's
    timestamps, as float_hook hands them over), from one join; None otherwise. numpy's own
    conversion to a fixed-width array cost 150-200 ns a value: 0.1 s of loading the 287 MB
    reference."""
    n = len(values)
    try:
        joined = b"".join(values)
    except TypeError:                  # ints or str among them
        return None
    if n == 0 or len(joined) % n:
        return None
    w = len(joined) // n
    if w == 0 or np.fromiter(map(len, values), np.int64, n).min() != w:   # min = mean: all w
        return None
    return np.frombuffer(joined, np.uint8).reshape(n, w)


def _one_layout(b: np.ndarray, digit: np.ndarray, dot: np.ndarray) -> np.ndarray | None:
    """Exact ns when every value has the same layout (same width, dot in the same column, at
    most 16 integer digits: a trace's timestamps): two integer matrix-vector products instead
    of a pass per column; None otherwise. 16 integer digits fit int64 ns up to a leading 8."""
    w = b.shape[1]
    p = int(dot[0].argmax()) if dot[0].any() else w
    if not 0 < p <= 16 or (p == 16 and (b[:, 0] > ord("8")).any()) or not digit[:, :p].all() or (
            p < w and not (dot[:, p].all() and digit[:, p + 1:].all())):
        return None
    d = b.astype(np.int64) - 48
    val = d[:, :p] @ (1000 * 10 ** np.arange(p - 1, -1, -1, dtype=np.int64))
    frac = w - p - 1 if p < w else 0
    if frac:
        k = min(frac, 3)
        val += d[:, p + 1:p + 1 + k] @ (10 ** np.arange(2, 2 - k, -1, dtype=np.int64))
    if frac > 3:                     # the 4th fractional digit rounds half up
        val += d[:, p + 4] >= 5
    return val


def _one_to_ns(v) -> int | None:
    if isinstance(v, bytes):
        v = v.decode("ascii", "replace")
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        return None
    try:
        d = Decimal(v)
        ns = int((d * 1000).to_integral_value(ROUND_HALF_UP)) if d.is_finite() else None
    except (InvalidOperation, ValueError):
        return None
    return ns if ns is not None and abs(ns) < 2**63 - 1 else None


def ints(values: list) -> np.ndarray:
    """Integer column from JSON values; -1 where absent or not an integer."""
    try:
        return np.fromiter(values, np.int64, len(values))
    except (TypeError, ValueError, OverflowError):
        return np.fromiter((to_int(v) for v in values), np.int64, len(values))


def int_col(objs: list, field: str, convert=None) -> np.ndarray:
    """One attribute of every object as int64, read in a C-level loop when all are ints;
    otherwise each value through convert (default to_int: -1 where not an integer)."""
    get = attrgetter(field)
    try:
        return np.fromiter(map(get, objs), np.int64, len(objs))
    except (TypeError, ValueError, OverflowError):
        return np.fromiter(map(convert or to_int, map(get, objs)), np.int64, len(objs))


def to_int(v) -> int:
    """int; numeric text; hex text ("0x0" ROCm streams); "stream 7" -> 7; else -1."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v if -2**63 <= v < 2**63 else -1
    m = _INT_TEXT.match(v) if isinstance(v, str) else None
    if not m:
        return -1
    dec, hexa, tail = m.groups()
    x = int(dec) if dec else int(hexa, 16) if hexa else int(tail)
    return x if x < 2**63 else -1


def dim3(values: list) -> np.ndarray:
    """(n, 3) ints from [x, y, z] lists; -1 where absent."""
    try:        # every value a list of 3 ints (the usual case): one C-level pass
        if set(map(len, values)) <= {3}:
            return np.fromiter(chain.from_iterable(values), np.int64, 3 * len(values)
                               ).reshape(len(values), 3)
    except (TypeError, ValueError, OverflowError):
        pass
    rows = [[to_int(x) for x in v] if isinstance(v, list) and len(v) == 3 else [-1] * 3
            for v in values]
    return np.array(rows, dtype=np.int64).reshape(len(values), 3)


def opt_int(v) -> int | None:
    x = to_int(v)
    return x if x >= 0 else None



"""The least a compiled columnar Kineto parser must do, as a numba prototype (not used by
tracelint; bench/bench_json_parsers.py times it).

One pass over the bytes of the traceEvents array: each event's ts and dur as exact integer ns,
pid, tid, args.correlation and args."External id" as integers, and the byte spans of its name
and category. Valid JSON is assumed (no error checks, no \\u escapes decoded, no string pids,
no nested objects outside args): a real loader needs all of that and table building on top,
so this bounds from below what a native path could cost.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _number(buf, i, scale):
    """The JSON number at i times scale (3 decimals exact for scale=1000), and the next index."""
    neg = buf[i] == 45
    if neg:
        i += 1
    v = 0
    while i < len(buf) and 48 <= buf[i] <= 57:
        v = v * 10 + (buf[i] - 48)
        i += 1
    v *= scale
    if i < len(buf) and buf[i] == 46:
        i += 1
        s = scale // 10
        while i < len(buf) and 48 <= buf[i] <= 57:
            if s > 0:
                v += (buf[i] - 48) * s
            s //= 10
            i += 1
    return (-v if neg else v), i


@njit(cache=True, nogil=True)
def scan(buf, lo, cap):
    """Columns of the events of the array that opens at buf[lo] ('['); cap: most events."""
    ints = np.empty((cap, 6), np.int64)         # ts, dur, pid, tid, correlation, external id
    spans = np.zeros((cap, 4), np.int64)        # name offset, length, cat offset, length
    # rows are set as events open: only the pages of rows in use are touched
    n, depth, i = -1, 0, lo
    key_at, key_len = 0, 0
    while i < len(buf):
        c = buf[i]
        if c == 34:                                  # a string: a key or a value
            j = i + 1
            while buf[j] != 34:
                j += 2 if buf[j] == 92 else 1
            k = j + 1
            while buf[k] == 32:
                k += 1
            if buf[k] == 58:
                key_at, key_len = i + 1, j - i - 1
            elif depth == 2 and n >= 0 and key_len == 4 and buf[key_at] == 110:   # name
                spans[n, 0], spans[n, 1] = i + 1, j - i - 1
            elif depth == 2 and n >= 0 and key_len == 3 and buf[key_at] == 99:    # cat
                spans[n, 2], spans[n, 3] = i + 1, j - i - 1
            i = j + 1
            continue
        if c == 123 or c == 91:
            depth += 1
            if depth == 2 and c == 123:
                n += 1
                if n == cap:
                    raise ValueError("more events than cap")
                ints[n, :] = -1
        elif c == 125 or c == 93:
            depth -= 1
            if depth == 0:
                break
        elif (c == 45 or 48 <= c <= 57) and n >= 0:
            row = -1
            if depth == 2 and key_len == 2 and buf[key_at] == 116:                  # ts
                row, scale = 0, 1000
            elif depth == 2 and key_len == 3 and buf[key_at] == 100:                # dur
                row, scale = 1, 1000
            elif depth == 2 and key_len == 3 and buf[key_at] == 112:                # pid
                row, scale = 2, 1
            elif depth == 2 and key_len == 3 and buf[key_at] == 116:                # tid
                row, scale = 3, 1
            elif depth == 3 and key_len == 11 and buf[key_at] == 99:                # correlation
                row, scale = 4, 1
            elif depth == 3 and key_len == 11 and buf[key_at] == 69:                # External id
                row, scale = 5, 1
            if row >= 0:
                ints[n, row], i = _number(buf, i, scale)
                continue
        i += 1
    n += 1
    return ints[:n].T, spans[:n].T


def columns(data: bytes):
    """(ints, spans, name codes) of a Kineto file's bytes; names coded in Python."""
    buf = np.frombuffer(data, np.uint8)
    lo = data.find(b"[", data.find(b'"traceEvents"'))
    ints, spans = scan(buf, lo, data.count(b"{"))     # every event opens a brace
    vocab: dict[bytes, int] = {}
    codes = np.fromiter((vocab.setdefault(data[a:a + n], len(vocab))
                         for a, n in zip(spans[0].tolist(), spans[1].tolist())),
                        np.int64, ints.shape[1])
    return ints, spans, codes

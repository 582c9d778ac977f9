"""Where any of many short needles starts in one long ASCII text, in a few passes of numpy
instead of one pass of str.find per needle.

Why: the secret gate (text_scan.suspects) looks for 38 needles in a trace's names joined into
one text. On the 332,000 distinct range names of an emit_nvtx export (10 MB joined) each
str.find took 6 ms, 0.22 s in all, and the gate runs twice per lint: over the trace file's
text cells (TL100/TL101) and over the Timeline's names (the output sink). Here every two-
character window is looked up once in a table of the needles' first two characters, and only
the windows found there are compared with the rest of their needles.
"""
from __future__ import annotations

import numpy as np

#: Two-character windows made at a time (each a uint16: bounds the temporaries).
CHUNK = 1 << 20


def starts(text: str, needles: list[str]) -> np.ndarray:
    """Sorted positions in the ASCII `text` where at least one needle starts, each position
    once; every occurrence, overlapping ones too. Needles must be non-empty; one that is not
    ASCII cannot occur. A one-character needle is one comparison; the others are found
    through their first two characters, then checked character by character where those
    occur."""
    a = np.frombuffer(text.encode("ascii"), np.uint8)
    n = len(a)
    out: list[np.ndarray] = []
    by_pair: dict[int, list[bytes]] = {}
    for needle in needles:
        if not needle.isascii() or len(needle) > n:
            continue
        b = needle.encode("ascii")
        if len(b) == 1:
            out.append(np.flatnonzero(a == b[0]))
        else:
            by_pair.setdefault(b[0] << 8 | b[1], []).append(b)
    if by_pair:
        wanted = np.zeros(1 << 16, dtype=bool)
        wanted[list(by_pair)] = True
        for lo in range(0, n - 1, CHUNK):
            x = a[lo:lo + CHUNK + 1]
            pair = x[:-1].astype(np.uint16)
            pair <<= 8
            pair |= x[1:]
            at = np.flatnonzero(wanted[pair])
            if not len(at):
                continue
            first = pair[at]
            at += lo
            for code, group in by_pair.items():
                p = at[first == code]
                for b in group:
                    ok = p[p + len(b) <= n]
                    for k in range(2, len(b)):
                        ok = ok[a[ok + k] == b[k]]
                    out.append(ok)
    if not out:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.concatenate(out)).astype(np.int64, copy=False)

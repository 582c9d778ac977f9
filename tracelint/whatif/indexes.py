"""Index and value widths of the what-if arrays: int32 where every value fits, half the memory
of int64 (at 10 M kernels the graph links 33 M nodes, and the critical path has tens of
millions of segments)."""
from __future__ import annotations

import numpy as np


def index_dtype(n: int) -> type:
    """The narrowest of int32 and int64 that holds every index below n (and -1): the graph's
    links into its own nodes, half the memory of int64 below 2**31 nodes."""
    return np.int32 if n < np.iinfo(np.int32).max else np.int64


def narrow(a: np.ndarray) -> np.ndarray:
    """a as int32 when every value fits, else as it is. For columns no edit writes (return
    latencies, step numbers) and for the graph's times, which an edit writes only into an
    int64 copy (replay.Plan.writable): a narrow array never receives a wide value."""
    i32 = np.iinfo(np.int32)
    if len(a) and (int(a.min()) < i32.min or int(a.max()) > i32.max):
        return a
    return a.astype(np.int32, copy=False)

"""The launch link, computed once: for each row of a GPU table, the api_calls row that
launched it (-1 when the trace does not say).

nsys numbers correlation ids per process, so a link there is (pid, correlation); Kineto gives
GPU rows the device's pseudo-pid, so a link is the correlation id alone. Every consumer (rules,
the graph view, replay, summaries, the import's resolved-fraction note) reads this one join.
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def _key(df: pd.DataFrame, use_pid: bool) -> np.ndarray:
    corr = df["correlation"].to_numpy()
    return (df["pid"].to_numpy() << 32) ^ corr if use_pid else corr


def launch_rows(api: pd.DataFrame, gpu: pd.DataFrame, per_process: bool) -> np.ndarray:
    """api_calls row per GPU row, or -1. With duplicate keys the first api row (in table
    order) wins.

    Exports keep the calls in correlation order (every shared nsys export does): the keys are
    then searched as they are, without the sort and its three copies of a key per call (23 M
    calls at 10 M kernels: 550 MB at the load's peak)."""
    if len(api) == 0 or len(gpu) == 0:
        return np.full(len(gpu), -1, dtype=np.int64)
    keys = _key(api, per_process)
    order = None                     # api row of each key; None: the keys are in table order
    valid = api["correlation"].to_numpy() >= 0
    if not valid.all() or (keys[1:] < keys[:-1]).any():
        rows = np.flatnonzero(valid)
        order = rows[np.argsort(keys[rows], kind="stable")]
        del rows
        keys = keys[order]
    del valid
    if len(keys) == 0:
        return np.full(len(gpu), -1, dtype=np.int64)
    g_key = _key(gpu, per_process)
    pos = np.searchsorted(keys, g_key)
    np.minimum(pos, len(keys) - 1, out=pos)
    hit = keys[pos] == g_key
    del g_key
    hit &= gpu["correlation"].to_numpy() >= 0
    if order is not None:
        pos = order[pos]
    pos[~hit] = -1
    return pos.astype(np.int64, copy=False)

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
    order) wins."""
    a_corr = api["correlation"].to_numpy()
    a_key = _key(api, per_process)
    valid = np.flatnonzero(a_corr >= 0)
    order = valid[np.argsort(a_key[valid], kind="stable")]
    keys = a_key[order]
    g_corr = gpu["correlation"].to_numpy()
    if len(keys) == 0 or len(gpu) == 0:
        return np.full(len(gpu), -1, dtype=np.int64)
    g_key = _key(gpu, per_process)
    pos = np.clip(np.searchsorted(keys, g_key), 0, len(keys) - 1)
    hit = (g_corr >= 0) & (keys[pos] == g_key)
    return np.where(hit, order[pos], -1).astype(np.int64)

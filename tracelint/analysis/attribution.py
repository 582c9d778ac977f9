"""Which launching call (time, process, thread) each GPU activity belongs to, and its class
and kernel key: the inputs of bucket attribution (see buckets.py)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..timeline import intervals
from ..timeline.model import Timeline
from .names import normalise_kernel_name

@dataclass
class _Activity:
    """GPU activity rows with their attribution time/thread and class."""

    start: np.ndarray
    end: np.ndarray
    dur: np.ndarray
    t: np.ndarray          # launching call start, or own start when unresolved
    pid: np.ndarray        # launching call pid, or -1
    tid: np.ndarray        # launching call tid, or -1
    resolved: np.ndarray
    cls: np.ndarray        # class label (object)
    label: np.ndarray      # normalised kernel name, or "copy" / "memset" (object)


def _activity(tl: Timeline) -> _Activity:
    from ..engine.context import Context
    ctx = Context(tl)
    api = tl.api_calls
    a_start = api["start"].to_numpy()
    a_pid = api["pid"].to_numpy()
    a_tid = api["tid"].to_numpy()
    parts = []
    for table in ("kernels", "copies", "memsets"):
        df = tl.table(table)
        if len(df) == 0:
            continue
        launch = ctx.launch_index(table)
        ok = launch >= 0
        li = np.where(ok, launch, 0)
        s = df["start"].to_numpy()
        e = df["end"].to_numpy()
        if table == "kernels":
            cls = np.asarray(tl.kernel_class, dtype=object)
            label = _kernel_keys(df)
        else:
            cls = np.full(len(df), "copy" if table == "copies" else "memset", dtype=object)
            label = cls
        parts.append((s, e, np.where(ok, a_start[li] if len(api) else s, s),
                      np.where(ok, a_pid[li] if len(api) else -1, -1),
                      np.where(ok, a_tid[li] if len(api) else -1, -1), ok, cls, label))
    if not parts:
        z = np.zeros(0, dtype=np.int64)
        return _Activity(z, z, z, z, z, z, np.zeros(0, bool), np.zeros(0, object), np.zeros(0, object))
    cat = [np.concatenate([p[i] for p in parts]) for i in range(8)]
    s, e = cat[0].astype(np.int64), cat[1].astype(np.int64)
    return _Activity(s, e, np.maximum(e - s, 0), cat[2].astype(np.int64), cat[3].astype(np.int64),
                     cat[4].astype(np.int64), cat[5].astype(bool), cat[6], cat[7])


def _kernel_keys(df: pd.DataFrame) -> np.ndarray:
    """Normalised kernel name per row (computed once per distinct name)."""
    cat = df["name"].array
    if not isinstance(cat, pd.Categorical):
        cat = pd.Categorical(cat)
    keys = np.array([normalise_kernel_name(c) for c in cat.categories.tolist()] + ["?"], dtype=object)
    codes = np.asarray(cat.codes)
    return keys[np.where(codes >= 0, codes, len(keys) - 1)]


def _assign(inst_group: np.ndarray, inst_start: np.ndarray, inst_end: np.ndarray,
            q_group: np.ndarray, q_t: np.ndarray) -> np.ndarray:
    """For each query (group, t): the instance of the same group whose [start, end) holds t
    (the latest-starting one if several), or -1."""
    out = np.full(len(q_t), -1, dtype=np.int64)
    if len(inst_start) == 0 or len(q_t) == 0:
        return out
    order = np.lexsort((inst_start, inst_group))
    gs, ss = inst_group[order], inst_start[order]
    lo = np.searchsorted(gs, q_group, side="left")
    hi = np.searchsorted(gs, q_group, side="right")
    has = hi > lo
    pos = np.full(len(q_t), -1, dtype=np.int64)
    if has.any():
        qi = np.flatnonzero(has)
        pos[qi] = intervals._search_in_slices(ss, lo[qi], hi[qi], q_t[qi])
    ok = pos >= 0
    cand = order[np.clip(pos, 0, None)]
    hit = ok & (inst_start[cand] <= q_t) & (inst_end[cand] > q_t)
    out[hit] = cand[hit]
    return out



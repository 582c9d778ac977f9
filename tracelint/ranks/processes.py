"""One nsys file that recorded several processes (an MPI job on one node): split it into one
timeline per process and find each one's rank."""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Any

import numpy as np

_RANK_NAME = re.compile(r"(?:^|[^a-z0-9])rank[-_]?(\d+)(?:of(\d+))?", re.I)
_OF_NAME = re.compile(r"(?:^|[^a-z0-9])(\d+)of(\d+)(?:[^0-9]|$)", re.I)
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]+://|::")
_EPOCH_MIN_NS = 10**18          # 2001-09-09: a time base this large is a Unix epoch


from .rank_summary import rank_from_name


# ----- one file, several processes (nsys) -------------------------------------------------------
def split_processes(tl) -> list[tuple[int | None, int | None, str, Any]]:
    """[(pid or None, rank hint, rank source, Timeline)]: an nsys export that recorded several
    processes with GPU work (torchrun under nsys) is one rank per process."""
    from ..timeline.schema import GPU_ACTIVITY_TABLES
    meta = tl.meta
    hint, source = _rank_hint(tl)
    if meta.format != "nsys-sqlite":
        return [(None, hint, source, tl)]
    pids = sorted({int(p) for t in GPU_ACTIVITY_TABLES for p in tl.table(t)["pid"].unique() if p >= 0})
    if len(pids) < 2:
        if hint is None:
            devs = tl.devices_in_use()
            if len(devs) == 1:
                return [(None, devs[0], "nsys device id", tl)]
            if len(pids) == 1:
                return [(None, None, "", tl)]
        return [(None, hint, source, tl)]
    dev_of = {p: sorted({int(d) for t in GPU_ACTIVITY_TABLES
                         for d in tl.table(t)["device"][tl.table(t)["pid"] == p].unique()})
              for p in pids}
    one_each = all(len(v) == 1 for v in dev_of.values()) and \
        len({v[0] for v in dev_of.values()}) == len(pids)
    out = []
    for i, p in enumerate(pids):
        part = _filter_process(tl, p, dev_of[p])
        if one_each:
            r, src = dev_of[p][0], "nsys device id"
        else:
            r, src = i, "nsys process order"
        part.meta.rank = r
        part.meta.notes.append(f"process {p} of {len(pids)} in this nsys file analysed as rank {r} "
                               f"({src})")
        out.append((p, r, src, part))
    return out


def _filter_process(tl, pid: int, devices: list[int]):
    from ..timeline.model import Timeline
    from ..timeline.schema import TABLES
    kw = {}
    for t in TABLES:
        df = tl.table(t)
        if t == "metrics":
            sel = df["device"].isin(devices) | (df["device"] < 0)
        else:
            sel = df["pid"] == pid
        keep = sel.to_numpy()
        part = df[keep].reset_index(drop=True)
        if "parent" in part.columns and len(df):
            # parent is a row of the same table: renumber it for the kept rows (-1 if dropped)
            new_row = np.full(len(df), -1, dtype=np.int64)
            new_row[keep] = np.arange(int(keep.sum()))
            par = part["parent"].to_numpy(np.int64)
            ok = (par >= 0) & (par < len(df))
            part["parent"] = np.where(ok, new_row[np.clip(par, 0, len(df) - 1)], -1)
        kw[t] = part
    meta = dataclasses.replace(tl.meta, devices=[d for d in tl.meta.devices if d.id in devices] or
                               list(tl.meta.devices), notes=list(tl.meta.notes),
                               captured=set(tl.meta.captured), extra=dict(tl.meta.extra))
    return Timeline(**kw, meta=meta)


def _rank_hint(tl) -> tuple[int | None, str]:
    meta = tl.meta
    dist = meta.extra.get("distributed") if isinstance(meta.extra, dict) else None
    if isinstance(dist, dict) and meta.rank is not None:
        return meta.rank, "distributedInfo"
    if meta.rank is not None and any("MPI Rank" in n for n in meta.notes):
        return meta.rank, "nsys MPI rank"
    r, _ = rank_from_name(os.path.basename(meta.source or ""))
    if r is not None:
        return r, "file name"
    if meta.rank is not None:
        return meta.rank, "trace"
    return None, ""

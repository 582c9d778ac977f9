"""Collective sizes from a Kineto trace's arguments (`In msg nelems`, `dtype`, `Group size`,
`Process Group Name` on NCCL kernels and record_param_comms ops), attached to a rank's
collectives: what the bus-bandwidth figures of the job view need and the Timeline does not keep."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from ..errors import TraceFormatError
from ..io import decompressed
from ..timeline.collectives import canonical_collective, collective_kind, dtype_bytes

_RANK_NAME = re.compile(r"(?:^|[^a-z0-9])rank[-_]?(\d+)(?:of(\d+))?", re.I)
_OF_NAME = re.compile(r"(?:^|[^a-z0-9])(\d+)of(\d+)(?:[^0-9]|$)", re.I)
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]+://|::")
_EPOCH_MIN_NS = 10**18          # 2001-09-09: a time base this large is a Unix epoch


from .rank_summary import COLL_COLUMNS, RankSummary


# ----- collective sizes (Kineto args) -----------------------------------------------------------
class _CArgs(msgspec.Struct, gc=False):
    correlation: Any = -1
    external_id: Any = msgspec.field(default=-1, name="External id")
    coll: Any = msgspec.field(default=None, name="Collective name")
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    dtype: Any = None
    group_size: Any = msgspec.field(default=None, name="Group size")
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")
    pg_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")


class _CEvent(msgspec.Struct, gc=False):
    cat: Any = ""
    name: Any = ""
    args: _CArgs | None = None


class _CTop(msgspec.Struct):
    traceEvents: list[msgspec.Raw] | None = None


def _int(v) -> int:
    if isinstance(v, bool) or v is None:
        return -1
    try:
        return int(v)
    except (TypeError, ValueError):
        return -1


def _args_dict(a: _CArgs) -> dict[str, Any]:
    return {"coll": a.coll if isinstance(a.coll, str) else None,
            "in_nelems": _int(a.in_nelems), "out_nelems": _int(a.out_nelems),
            "dtype": a.dtype if isinstance(a.dtype, str) else "",
            "group_size": _int(a.group_size),
            "pg": str(a.pg_ranks) if a.pg_ranks is not None else
            (f"pg:{a.pg_name}" if a.pg_name is not None else "")}


def read_comm_args(path: Path) -> tuple[dict[int, dict], dict[int, dict]]:
    """(kernel correlation -> args, record_param_comms External id -> args) from a Kineto JSON.

    A narrow second pass: skipped (no decode at all) when the file never mentions the keys."""
    try:
        data = decompressed(path.read_bytes(), path)   # the gzip limits of every read
    except (OSError, TraceFormatError):
        return {}, {}
    if b"nelems" not in data and b"Collective name" not in data:
        return {}, {}
    try:
        start = len(data) - len(data.lstrip())
        if data[start:start + 1] == b"[":
            raws = msgspec.json.decode(data, type=list[msgspec.Raw])
        else:
            raws = msgspec.json.decode(data, type=_CTop).traceEvents or []
    except (msgspec.DecodeError, msgspec.ValidationError):
        return {}, {}
    dec = msgspec.json.Decoder(_CEvent).decode
    kargs: dict[int, dict] = {}
    rpc: dict[int, dict] = {}
    for lo in range(0, len(raws), 65536):
        for raw in raws[lo:lo + 65536]:
            try:
                e = dec(raw)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            a = e.args
            if a is None:
                continue
            if e.name == "record_param_comms":
                x = _int(a.external_id)
                if x >= 0:
                    rpc[x] = _args_dict(a)
            elif a.in_nelems is not None or a.coll is not None:
                c = _int(a.correlation)
                if c >= 0 and e.cat in ("kernel", "Kernel"):
                    kargs[c] = _args_dict(a)
    return kargs, rpc


def attach_sizes(s: RankSummary, kargs: dict[int, dict], rpc: dict[int, dict]) -> None:
    c = s.collectives
    if not len(c) or not (kargs or rpc):
        return
    n = len(c)
    coll = c["coll"].to_numpy(dtype=object).copy()
    cols = {k: c[k].to_numpy().copy() for k in ("in_nelems", "out_nelems", "bytes", "group_size")}
    dtype = c["dtype"].to_numpy(dtype=object).copy()
    pg = c["pg"].to_numpy(dtype=object).copy()
    src = c["size_source"].to_numpy(dtype=object).copy()
    corr, ext = c["correlation"].to_numpy(), c["rpc_ext"].to_numpy()
    for i in range(n):
        a, how = kargs.get(int(corr[i])), "kernel args"
        if a is None:
            a, how = rpc.get(int(ext[i])), "record_param_comms"
        if a is None:
            continue
        canon = canonical_collective(a["coll"])
        if canon:               # the issuing op's own name for it beats the kernel's
            coll[i] = canon
        cols["in_nelems"][i], cols["out_nelems"][i] = a["in_nelems"], a["out_nelems"]
        cols["group_size"][i] = a["group_size"]
        dtype[i], pg[i] = a["dtype"], a["pg"]
        eb = dtype_bytes(a["dtype"])
        ne = max(a["in_nelems"], a["out_nelems"])
        if eb > 0 and ne >= 0:
            cols["bytes"][i] = ne * eb
            src[i] = how
    s.collectives = c.assign(coll=coll, dtype=dtype, pg=pg, size_source=src, **cols)


def finish_collectives(s: RankSummary) -> None:
    """Kinds and occurrence indexes (k-th call of each collective per process group, overall
    and within its iteration): the keys the reduce step matches ranks on."""
    c = s.collectives
    if not isinstance(c, pd.DataFrame) or not len(c):
        s.collectives = pd.DataFrame({col: pd.Series([], dtype=object if col in (
            "kernel", "coll", "kind", "pg", "dtype", "size_source") else "int64") for col in COLL_COLUMNS})
        return
    c = c.sort_values(["start", "device", "stream"], kind="stable").reset_index(drop=True)
    c["kind"] = [collective_kind(x) for x in c["coll"]]
    grp = [c["pg"].to_numpy(dtype=object), c["coll"].to_numpy(dtype=object)]
    c["occurrence"] = c.groupby(grp, sort=False).cumcount().astype(np.int64)
    c["k_in_step"] = c.groupby(grp + [c["step"].to_numpy()], sort=False).cumcount().astype(np.int64)
    s.collectives = c

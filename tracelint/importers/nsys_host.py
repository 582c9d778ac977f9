"""nsys host-side tables -> Timeline api_calls (CUDA runtime and driver calls), ranges (NVTX,
with ProfilerStep/iteration steps) and syncs (typed by the API call they belong to)."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..timeline import classify
from ..timeline.categories import str_categorical
from ..timeline.model import Meta
from ..timeline.name_groups import per_category
from ..timeline.nesting import nest
from ..timeline.schema import make_table
from .nsys_activity import activity_exprs
from .nsys_db import NVTX, RUNTIME, SYNC, Db, categorical, pick, pid_tid

#: syncType meaning from exporter 2025 on (earlier exporters stored other numbers).
SYNC_TYPES_2025 = {1: "event", 2: "stream_wait_event", 3: "stream", 4: "device"}
NVTX_PUSHPOP, NVTX_STARTEND = 59, 60
STEP_RX = re.compile(r"^(?:ProfilerStep#(\d+)|(?:iteration|iter|step)[ _#]?(\d+))$", re.I)


def read_api_calls(db: Db) -> pd.DataFrame:
    """CUDA runtime (eventClass 0) and driver (1) calls; backtrace rows (67-69) are dropped."""
    cols = db.columns(RUNTIME)
    has_class = "eventClass" in cols
    exprs = {"start": pick(cols, "start"), "end": pick(cols, "end"),
             "gtid": pick(cols, "globalTid"), "correlation": pick(cols, "correlationId")}
    raw = db.raw_scan(RUNTIME, {**exprs, "name_id": pick(cols, "nameId"),
                                "cls": pick(cols, "eventClass", default="0")})
    if raw is not None:             # the SQL below, on the values read from the pages
        d, null = raw
        key, cls = d.pop("name_id"), d.pop("cls")
        if not key.flags.writeable:  # one call name throughout: a stride-0 view
            key = key.copy()
        key <<= 1                   # in place: the reader's own array
        key |= cls == 1
        key[null["name_id"]] = -1
        keep = ~null["cls"] & ((cls == 0) | (cls == 1))
        if not keep.all():
            d = {k: v[keep] for k, v in d.items()}
            key = key[keep]
        d["key"] = key
    else:
        key = f"({pick(cols, 'nameId')} << 1) | " + ("(eventClass = 1)" if has_class else "0")
        d = db.scan(RUNTIME, {**exprs, "key": key}, where="eventClass IN (0, 1)" if has_class else "")
    key = d.pop("key")                               # nameId * 2 + is_driver
    strings = db.strings(key >> 1)
    name = lambda k: classify.strip_api_version(strings.get(k >> 1, "unknown"))  # noqa: E731
    d["name"] = categorical(key, name)
    d["api"] = categorical(key, lambda k: "driver" if k & 1 else "runtime") if has_class else \
        categorical(key, lambda k: "runtime" if name(k).startswith("cuda") else "driver")
    d["pid"], d["tid"] = pid_tid(d.pop("gtid"))
    return make_table("api_calls", d)


def read_ranges(db: Db, meta: Meta) -> pd.DataFrame:
    """Push/pop (59) and start/end (60) NVTX ranges; marks, domains and categories skipped."""
    cols = db.columns(NVTX)
    where = ((f"eventType IN ({NVTX_PUSHPOP}, {NVTX_STARTEND}) AND " if "eventType" in cols
              else "") + '"end" IS NOT NULL')
    d = db.scan(NVTX, {"rowid": "rowid", "start": pick(cols, "start"), "end": pick(cols, "end"),
                       "gtid": pick(cols, "globalTid"), "type": pick(cols, "eventType"),
                       "text_id": pick(cols, "textId")}, where=where)
    rowid, etype = d.pop("rowid"), d.pop("type")
    d["pid"], d["tid"] = pid_tid(d.pop("gtid"))
    d["name"] = name = str_categorical(_nvtx_labels(db, where, rowid, d.pop("text_id")))
    # per group of names equal but for emit_nvtx's op ids, which a step name never carries
    step_of = np.array(per_category(name.categories, _step_number) + [-1], dtype=np.int64)
    d["step"] = step = step_of[name.codes]
    d["kind"] = pd.Categorical(np.where(step >= 0, "step", "nvtx"), categories=["nvtx", "step"])
    # Start/end ranges may cross push/pop ranges (and threads): they nest only among themselves.
    group = (d["pid"] << 25) | (d["tid"] << 1) | (etype == NVTX_STARTEND)
    try:
        d["depth"], d["parent"] = nest(group, d["start"], d["end"])
    except ValueError as exc:                        # absurd timestamps: keep flat ranges
        meta.notes.append(f"NVTX nesting not rebuilt ({exc})")
    return make_table("ranges", d)


def _nvtx_labels(db: Db, where: str, rowid: np.ndarray, text_id: np.ndarray) -> np.ndarray:
    """COALESCE(text, StringIds[textId]) per row; inline text is read only where present."""
    strings = db.strings(text_id)
    inverse, uniq = pd.factorize(text_id)
    labels = np.array([strings.get(int(i), "(unnamed)") for i in uniq], dtype=object)[inverse]
    if "text" in db.columns(NVTX) and len(rowid):
        rows = db.text_query(f'SELECT rowid, text FROM "{NVTX}" WHERE {where} AND text IS NOT NULL')
        if rows:
            at = np.searchsorted(rowid, np.fromiter((r[0] for r in rows), np.int64, len(rows)))
            labels[at] = [str(r[1]) for r in rows]
    return labels


def _step_number(label: str) -> int:
    m = STEP_RX.match(label.strip())
    return int(m.group(1) or m.group(2)) if m else -1


def read_syncs(db: Db, api: pd.DataFrame, meta: Meta) -> pd.DataFrame:
    """GPU sync records, typed by the API call reached via (pid, correlationId)."""
    d = db.scan(SYNC, activity_exprs(db.columns(SYNC), raw="syncType"))
    d["pid"] = pid_tid(d.pop("gpid"))[0]
    row = _link(api, d["pid"], d["correlation"])
    hit = row >= 0
    cats = api["name"].cat.categories.tolist()
    codes = api["name"].cat.codes.to_numpy().astype(np.int64)    # int8 would overflow below
    name_code = np.where(hit, codes[row] if len(api) else -1, -1)
    d["tid"] = np.where(hit, api["tid"].to_numpy()[row] if len(api) else -1, -1)
    use_type = (_exporter_year(meta) or 0) >= 2025   # syncType numbering is reliable from 2025

    def sync_type(key: int) -> str:
        code, raw = (key >> 8) - 1, key & 0xFF
        by_name = classify.sync_kind(cats[code]) if code >= 0 else "other"
        if by_name in SYNC_TYPES_2025.values():
            return by_name
        return SYNC_TYPES_2025.get(raw, "unknown") if use_type else "unknown"

    d["sync_type"] = categorical(((name_code + 1) << 8) | (d.pop("raw") & 0xFF), sync_type)
    d["name"] = categorical(name_code, lambda c: cats[c] if c >= 0 else "unknown")
    if not hit.all():
        how = "by syncType (exporter >= 2025)" if use_type else "as unknown"
        meta.notes.append(f"{int((~hit).sum())} sync records have no API call; typed {how}")
    return make_table("syncs", d)


def _link(api: pd.DataFrame, pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """Row of api_calls with the same (pid, correlationId), or -1: ids are per process."""
    if len(api) == 0:
        return np.full(len(pid), -1, np.int64)
    api_key = (api["pid"].to_numpy() << 32) | (api["correlation"].to_numpy() & 0xFFFFFFFF)
    order = np.argsort(api_key, kind="stable")
    sorted_key = api_key[order]
    key = (pid << 32) | (corr & 0xFFFFFFFF)
    pos = np.minimum(np.searchsorted(sorted_key, key), len(order) - 1)
    return np.where(sorted_key[pos] == key, order[pos], -1)


def _exporter_year(meta: Meta) -> int | None:
    m = re.match(r"(\d{4})\.", meta.format_version)
    return int(m.group(1)) if m else None


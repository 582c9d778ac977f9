"""nsys GPU metric samples -> the Timeline metrics table: GPU_METRICS named via
TARGET_INFO_GPU_METRICS, or the 2022-era GENERIC_EVENTS JSON form."""
from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd

from ..timeline.model import Meta
from ..timeline.schema import make_table
from .nsys_db import Db, categorical, one_line, pick

GPU_METRIC_KEY_RX = (r"(?i)SMs? Active|SM Issue|Tensor|DRAM|Warps|PCIe|GR Active|NVLink|"
                     r"Throughput|Bandwidth|Clock|Frequency")


def read_metrics(db: Db, meta: Meta) -> pd.DataFrame:
    if "GPU_METRICS" in db.tables:
        return _gpu_metrics_table(db, meta)
    if {"data", "typeId"} <= db.columns("GENERIC_EVENTS"):
        return _generic_event_metrics(db, meta)
    return make_table("metrics", {}, 0)


def _gpu_metrics_table(db: Db, meta: Meta) -> pd.DataFrame:
    """GPU_METRICS samples named via TARGET_INFO_GPU_METRICS on (typeId, metricId)."""
    cols = db.columns("GPU_METRICS")
    ts = pick(cols, "timestamp", "rawTimestamp")
    if ts == '"rawTimestamp"':
        meta.notes.append("GPU_METRICS has only rawTimestamp: metric times are not converted")
    d = db.scan("GPU_METRICS", {"ts": ts, "type": pick(cols, "typeId"),
                                "metric_id": pick(cols, "metricId"), "value": '"value"'},
                floats=("value",))
    names = _metric_names(db)
    type_code, types = pd.factorize(d.pop("type"))
    key = (type_code.astype(np.int64) << 32) | (d.pop("metric_id") & 0xFFFFFFFF)

    def label(k: int) -> str:
        t, m = int(types[k >> 32]), k & 0xFFFFFFFF
        return names.get((t, m)) or names.get((None, m)) or f"metric {m}"

    d["metric"] = categorical(key, label)
    d["device"] = _metric_devices(db, meta, types)[type_code]
    return make_table("metrics", d)


def _metric_names(db: Db) -> dict[tuple, str]:
    """{(typeId, metricId): name}, plus {(None, metricId): name} for files without typeId."""
    info = db.columns("TARGET_INFO_GPU_METRICS")
    mid = pick(info, "metricId", "id", default="")
    name = pick(info, "metricName", "name", default="")
    out: dict[tuple, str] = {}
    if mid and name:
        for t, m, n in db.query(f"SELECT DISTINCT {pick(info, 'typeId')}, {mid}, {name} "
                                "FROM TARGET_INFO_GPU_METRICS"):
            out[(int(t), int(m))] = str(n)
            out.setdefault((None, int(m)), str(n))
    return out


def _metric_devices(db: Db, meta: Meta, type_ids) -> np.ndarray:
    """Device per typeId: its low byte is the Perfworks GPU id, TARGET_INFO_GPU.pwGpuId."""
    pw = dict(db.query("SELECT pwGpuId, id FROM TARGET_INFO_GPU")) if {
        "pwGpuId", "id"} <= db.columns("TARGET_INFO_GPU") else {}
    dev = np.array([pw.get(int(t) & 0xFF, -1) for t in type_ids], dtype=np.int64)
    if (dev < 0).any():
        meta.notes.append("some GPU metric samples are not mapped to a device (-1)")
    return dev


def _generic_event_metrics(db: Db, meta: Meta) -> pd.DataFrame:
    """2022-era form: GENERIC_EVENTS rows whose JSON `data` maps metric names to numbers."""
    ts = pick(db.columns("GENERIC_EVENTS"), "timestamp", "rawTimestamp")
    try:
        rows = db.query(f"SELECT g.{ts}, g.typeId, j.key, j.value FROM GENERIC_EVENTS g, "
                        "json_each(g.data) j WHERE json_valid(g.data) "
                        "AND json_type(g.data) = 'object'")
    except sqlite3.OperationalError as exc:       # SQLite built without JSON1
        meta.notes.append(f"GENERIC_EVENTS GPU metrics skipped ({one_line(exc)})")
        return make_table("metrics", {}, 0)
    df = pd.DataFrame(rows, columns=["ts", "type", "metric", "value"])
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    df = df[df["value"].notna() & df["ts"].notna()]
    # Keep event types that carry at least one GPU-metric-like key (others are ETW, ftrace...).
    metric_types = set(df.loc[df["metric"].astype(str).str.contains(GPU_METRIC_KEY_RX), "type"])
    df = df[df["type"].isin(metric_types)]
    if len(df):
        meta.notes.append("GPU metrics read from GENERIC_EVENTS JSON; device unknown (-1)")
    return make_table("metrics", {"ts": df["ts"].to_numpy(np.int64),
                                  "metric": pd.Categorical(df["metric"].astype(str)),
                                  "value": df["value"].to_numpy(np.float64)}, len(df))



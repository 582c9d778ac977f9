"""Row records -> Timeline, shared by the importers of smaller formats (rocprofv3 JSON, rocpd
SQLite, JAX/XLA traces): they collect plain Python rows per table and this module makes the
typed, sorted, nested tables, so each importer is only its format's parsing.
"""
from __future__ import annotations

import re
from operator import itemgetter
from typing import Iterable

import numpy as np
import pandas as pd

from ..timeline import classify
from ..timeline.categories import map_categorical
from ..timeline.model import Meta, Timeline
from ..timeline.nesting import nest
from ..timeline.schema import TABLES, make_table

#: Iteration markers: PyTorch's ProfilerStep#N, and "step N" / "iteration N" / "train_step#N".
STEP_RX = re.compile(r"^(?:ProfilerStep#(\d+)|(?:\w*[_ ])?(?:iteration|iter|step)[ _#]?(\d+))$",
                     re.I)


class Rows:
    """Column lists for one Timeline table; add() takes one row as keyword arguments."""

    def __init__(self, table: str):
        self.table = table
        self.cols: dict[str, list] = {c: [] for c in TABLES[table]}
        # (column, its list, its value when a row does not give one), looked up once: add()
        # is called per event, and looking both up per column was 3.9 of the 17 s of a
        # profiled 600 k-event JAX load
        self._slots = [(c, v, _UNKNOWN[TABLES[table][c]]) for c, v in self.cols.items()]

    def add(self, **row) -> None:
        get = row.get
        for col, values, unknown in self._slots:
            values.append(get(col, unknown))

    def extend(self, n: int, **columns: list) -> None:
        """n rows at once, each given column a list of n values (the others: unknown)."""
        for col, values, unknown in self._slots:
            got = columns.get(col)
            values.extend(got if got is not None else [unknown] * n)

    def __len__(self) -> int:
        return len(self.cols["start"]) if "start" in self.cols else len(self.cols["ts"])


_UNKNOWN = {"int64": -1, "float64": np.nan, "bool": False, "category": "unknown", "object": None}


def build_timeline(rows: Iterable[Rows], meta: Meta) -> Timeline:
    """A Timeline from the importer's rows (see timeline_from_columns)."""
    return timeline_from_columns({r.table: r.cols for r in rows if len(r)}, meta)


def timeline_from_columns(tables: dict[str, dict[str, list | np.ndarray]], meta: Meta) -> Timeline:
    """A Timeline from each table's columns (lists or arrays of equal length, "start" among
    them): each table sorted by start, names as categoricals, API version suffixes stripped,
    ranges nested per thread with ProfilerStep-style steps."""
    tl = Timeline(meta=meta)
    for table, c in tables.items():
        c = dict(c)
        names = c.get("name")
        if isinstance(names, pd.Categorical):          # once per distinct name, not per row
            if table == "api_calls":
                c["name"] = map_categorical(names, lambda n: classify.strip_api_version(str(n)))
            if table == "ranges":
                named = np.append([_step(str(n)) for n in names.categories], -1)[names.codes]
                c["step"] = np.where(np.asarray(c["step"]) >= 0, c["step"], named)
                c["kind"] = np.where(c["step"] >= 0, "step", np.asarray(c["kind"], object))
        elif table == "api_calls":
            c["name"] = [classify.strip_api_version(str(n)) for n in c["name"]]
        elif table == "ranges":
            steps = [s if s >= 0 else _step(str(n)) for s, n in zip(c["step"], c["name"])]
            c["step"] = steps
            c["kind"] = ["step" if s >= 0 else k for s, k in zip(steps, c["kind"])]
        order = np.argsort(np.asarray(c["start"] if "start" in c else c["ts"], np.int64),
                           kind="stable")
        arrays = (np.ndarray, pd.Categorical)
        lists = any(not isinstance(v, arrays) for v in c.values())
        take = itemgetter(*order.tolist()) if lists and len(order) > 1 else None   # one C pass
        c = {k: v[order] if isinstance(v, arrays) else list(take(v)) if take else v
             for k, v in c.items()}
        df = make_table(table, c, len(order))
        if table in ("ranges", "python_frames"):
            group = (df["pid"].to_numpy() << 24) ^ df["tid"].to_numpy()
            df["depth"], df["parent"] = nest(group, df["start"].to_numpy(), df["end"].to_numpy())
        setattr(tl, table, df)
    return tl


def _step(name: str) -> int:
    m = STEP_RX.match(name.strip())
    return int(m.group(1) or m.group(2)) if m else -1


def copy_kind_of(src_is_gpu: bool | None, dst_is_gpu: bool | None, same_agent: bool) -> str:
    """H2D / D2H / D2D / P2P / H2H from which ends of a copy are GPUs (None: unknown)."""
    if src_is_gpu is None or dst_is_gpu is None:
        return "other"
    if src_is_gpu and dst_is_gpu:
        return "D2D" if same_agent else "P2P"
    return {(False, True): "H2D", (True, False): "D2H"}.get((src_is_gpu, dst_is_gpu), "H2H")


def finish_meta(tl: Timeline, captured: dict[str, bool]) -> None:
    """Captured sources, raw counts and the launch-link note every importer reports."""
    tl.meta.captured |= {k for k, v in captured.items() if v}
    tl.meta.raw_event_counts = {**tl.counts(), **tl.meta.raw_event_counts}
    frac = tl.correlation_resolved_fraction()
    tl.meta.extra["correlation_resolved_fraction"] = frac
    if frac is not None and frac < 1.0 and len(tl.api_calls):
        n = len(tl.kernels)
        tl.meta.notes.append(f"{round((1 - frac) * n)} of {n} kernels ({1 - frac:.1%}) have no "
                             "launching API call in the trace")
    if not tl.has_gpu_activity:
        tl.meta.notes.append("no GPU activity in this trace")

"""rocprofv3 `--output-format rocpd` (ROCm 7.0+): the rocpd SQLite database -> Timeline.

Schema (rocprofiler-sdk source/share/rocprofiler-sdk-rocpd/rocpd_tables.sql, schema_version
3): tables carry a per-session uuid suffix and plain-named views (`rocpd_kernel_dispatch`,
...) select from them; the tables are read, never the views (see _tables). Two layouts share
that version: rows with their own pid/tid/agent/queue/stream and start/end columns, and the
newer one where rows point at a `rocpd_track` (the lane) and at `rocpd_timestamp` rows
(start_id/end_id); both are read. `rocpd_region` holds host API calls and roctx ranges, `rocpd_kernel_dispatch` and `rocpd_memory_copy` the device work; each row's
`event_id` points at `rocpd_event`, whose `category_id` names the domain (HIP_RUNTIME_API,
MARKER_CORE_API, ...) in `rocpd_string` and whose `correlation_id` links a HIP call to the
dispatch or copy it enqueued. `pid`/`tid`/`agent_id` are row ids of the rocpd_info_* tables.
"""
from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import TraceFormatError
from ..io import readonly_sqlite_uri
from ..timeline.model import Device, Meta, Timeline
from ..timeline.categories import categorical_from_codes
from .records import copy_kind_of, finish_meta, timeline_from_columns

BASES = ("rocpd_metadata", "rocpd_string", "rocpd_event", "rocpd_region", "rocpd_kernel_dispatch",
         "rocpd_memory_copy", "rocpd_info_agent", "rocpd_info_kernel_symbol", "rocpd_info_process",
         "rocpd_info_thread", "rocpd_track", "rocpd_timestamp")


def is_rocpd(con: sqlite3.Connection) -> bool:
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')")]
    return any(n.startswith("rocpd_kernel_dispatch") or n.startswith("rocpd_region") for n in names)


def load_rocpd(path) -> Timeline:
    path = Path(path)
    try:
        con = sqlite3.connect(readonly_sqlite_uri(path), uri=True)
        try:
            return _load(con, path)
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise TraceFormatError(f"{path}: cannot read the rocpd database (truncated or corrupt?): {exc}") from None


def _load(con: sqlite3.Connection, path: Path) -> Timeline:
    t, sessions_note = _tables(con)
    if "rocpd_kernel_dispatch" not in t and "rocpd_region" not in t:
        raise TraceFormatError(f"{path}: SQLite file without rocpd tables: not a rocprofv3 rocpd database")
    cols = _columns(con, t.get("rocpd_kernel_dispatch") or t.get("rocpd_region"))
    tracked = "start_id" in cols            # newer layout: times in rocpd_timestamp, lanes in rocpd_track
    if tracked and not {"rocpd_track", "rocpd_timestamp"} <= set(t):
        raise TraceFormatError(f"{path}: rocpd rows point at rocpd_track/rocpd_timestamp tables "
                               "that the file does not have")
    md = dict(con.execute(f"SELECT tag, value FROM {t['rocpd_metadata']}")) if "rocpd_metadata" in t else {}
    meta = Meta(format="rocpd-sqlite", format_version=str(md.get("schema_version", "")),
                producer="rocprofv3 (rocpd database)")
    if md.get("rocprofiler_sdk_version") or md.get("version"):
        meta.producer = f"rocprofv3 (rocprofiler-sdk {md.get('rocprofiler_sdk_version') or md.get('version')})"
    q = _Query(con, t, tracked, path)
    gpus = _agents(q, meta)
    tables = {"kernels": q.dispatches(gpus), "copies": q.copies(gpus), **_host_rows(q.regions())}
    tl = timeline_from_columns({k: v for k, v in tables.items() if v and len(v["start"])}, meta)
    if sessions_note:
        tl.meta.notes.append(sessions_note)
    finish_meta(tl, {"hip": len(tl.api_calls), "cuda": tl.has_gpu_activity, "nvtx": len(tl.ranges)})
    return tl


def _host_rows(region: dict | None) -> dict[str, dict]:
    """rocpd_region's rows as API calls (the HIP domains but the compiler's) and ranges (roctx
    markers that last), by the category of each row's event."""
    if region is None:
        return {}
    cats = region.pop("category")
    texts = [str(c) for c in cats.categories]
    is_api = np.array([c.startswith("HIP_") and "COMPILER" not in c for c in texts] + [False])
    is_marker = np.array([c.startswith("MARKER_") for c in texts] + [False])
    api = is_api[cats.codes]                           # code -1 (no category): the last, False
    marker = is_marker[cats.codes] & (region["end"] > region["start"])
    keep = ("pid", "tid", "start", "end", "name")
    n_api, n_marker = int(api.sum()), int(marker.sum())
    return {"api_calls": {**{c: _rows_of(region[c], api) for c in keep},
                          "api": np.full(n_api, "runtime"), "correlation": region["correlation"][api]},
            "ranges": {**{c: _rows_of(region[c], marker) for c in keep},
                       "kind": np.full(n_marker, "nvtx"), "step": np.full(n_marker, -1)}}


def _tables(con: sqlite3.Connection) -> tuple[dict[str, str], str | None]:
    """Base name -> the table of that name, else the first uuid-suffixed one (quoted for SQL);
    and a note when the file holds several sessions (uuid suffixes). Tables only, never views:
    the plain-named views are `SELECT *` of one session's tables in the files rocprofv3
    writes, and a view in an untrusted file can run any query (a recursive one never ends),
    which is why the nsys importer reads no view either."""
    names = sorted(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    out, note = {}, None
    for base in BASES:
        if base in names:
            out[base] = base
        else:
            cand = [n for n in names if n.startswith(base) and not n[len(base):len(base) + 1].isalpha()
                    and not n[len(base):].startswith("_info")]
            if cand:
                out[base] = cand[0]
                if len(cand) > 1 and note is None:
                    note = (f"the database holds {len(cand)} rocpd sessions (tables {', '.join(cand[:3])}"
                            f"{', ...' if len(cand) > 3 else ''}); only the first was read")
    return {k: f'"{v}"' for k, v in out.items()}, note


def _columns(con, table: str | None) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")} if table else set()


#: an id column's NULL as read here: no row has this id
NO_ID = -(1 << 62)
#: rows fetched and turned into columns at a time
FETCH_ROWS = 1 << 16


class _Ids:
    """A small table read once, id -> values, looked up for a whole column of ids at a time:
    per row, as correlated sub-selects, the lookups were most of the load (1.0 s per 100 k
    dispatches)."""

    def __init__(self, ids: np.ndarray, *values: np.ndarray):
        order = np.argsort(ids, kind="stable")
        self.ids = ids[order]
        self.values = [v[order] for v in values]

    def get(self, wanted: np.ndarray, col: int = 0, missing=None) -> np.ndarray:
        """values[col] of each wanted id; where no row has it, `missing` (an array or a value;
        None: the id itself, as SQL's COALESCE((SELECT ...), id) gave)."""
        missing = wanted if missing is None else missing
        if not len(self.ids):
            return np.broadcast_to(missing, wanted.shape).copy()
        pos = np.minimum(np.searchsorted(self.ids, wanted), len(self.ids) - 1)
        return np.where(self.ids[pos] == wanted, self.values[col][pos], missing)


def _columns_of(cursor, path: Path) -> list[np.ndarray]:
    """A query's integer columns (NULL read as NO_ID by the query), FETCH_ROWS rows at a time."""
    n = len(cursor.description)
    parts: list[list[np.ndarray]] = [[] for _ in range(n)]
    while rows := cursor.fetchmany(FETCH_ROWS):
        try:
            for part, col in zip(parts, zip(*rows)):
                part.append(np.array(col, dtype=np.int64))
        except (TypeError, ValueError, OverflowError):
            raise TraceFormatError(f"{path}: a rocpd row holds text or a number out of range where an "
                                   "integer id, time or size belongs") from None
    return [np.concatenate(p) if p else np.zeros(0, np.int64) for p in parts]


class _Query:
    """The rows of each table as columns, with the process/thread/track/timestamp/string/event
    tables read once and looked up with numpy (_Ids)."""

    def __init__(self, con, t, tracked: bool, path: Path):
        self.con, self.t, self.tracked, self.path = con, t, tracked, path
        self._read_ids: dict[tuple, _Ids] = {}

    def _read(self, sql: str) -> list[np.ndarray]:
        return _columns_of(self.con.execute(sql), self.path)

    def _ids(self, table: str, cols: tuple[str, ...]) -> _Ids:
        """The table's columns by id, read once (a column it lacks: NO_ID)."""
        key = (table, cols)
        if key not in self._read_ids:
            have = _columns(self.con, self.t.get(table))
            got = self._read(f"SELECT id, {', '.join(_int(c) if c in have else str(NO_ID) for c in cols)} "
                             f"FROM {self.t[table]}") if table in self.t \
                else [np.zeros(0, np.int64)] * (len(cols) + 1)
            self._read_ids[key] = _Ids(*got)
        return self._read_ids[key]

    def _names(self, table: str, id_col: str, text_sql: str) -> tuple[_Ids, list[str]]:
        """Texts by id as codes into a list of distinct texts."""
        rows = self.con.execute(f"SELECT {id_col}, {text_sql} FROM {self.t[table]}").fetchall() \
            if table in self.t else []
        texts = sorted({str(r[1]) for r in rows if r[1] is not None})
        code = {x: i for i, x in enumerate(texts)}
        ids = np.fromiter((r[0] if isinstance(r[0], int) else NO_ID for r in rows), np.int64, len(rows))
        codes = np.fromiter((code[str(r[1])] if r[1] is not None else -1 for r in rows), np.int64, len(rows))
        return _Ids(ids, codes), texts

    @functools.cached_property
    def _strings(self) -> tuple[_Ids, list[str]]:
        return self._names("rocpd_string", "id", "string")

    @property
    def _events(self) -> _Ids:
        return self._ids("rocpd_event", ("category_id", "correlation_id"))      # read once

    def _text(self, ids: np.ndarray, missing: str | None = "unknown") -> pd.Categorical:
        strings, texts = self._strings
        return _text_of(strings.get(ids, 0, -1), texts, missing)

    def _lanes(self, alias: str, cols: list[str]) -> str:
        """A row's lane columns (pid, tid, agent, ...): its own, or its track id (newer
        layout: _rows reads the track's)."""
        return f"{_int(alias + '.track_id')}" if self.tracked else ", ".join(_int(f"{alias}.{c}") for c in cols)

    def _times(self, alias: str) -> str:
        return (f"{_int(alias + '.start_id')}, {_int(alias + '.end_id')}" if self.tracked
                else f"{_int(alias + '.start')}, {_int(alias + '.end')}")

    def _rows(self, alias: str, table: str, lane_cols: list[str], rest: str) -> dict[str, np.ndarray]:
        """The table's lanes, times and other columns (rest), lanes and times resolved."""
        got = self._read(f"SELECT {self._lanes(alias, lane_cols)}, {self._times(alias)}, {rest} "
                         f"FROM {self.t[table]} {alias}")
        if self.tracked:
            track = self._ids("rocpd_track", tuple(lane_cols))
            lanes = [track.get(got[0], k, NO_ID) for k in range(len(lane_cols))]
            stamps = self._ids("rocpd_timestamp", ("value",))
            times = [stamps.get(got[1], 0, NO_ID), stamps.get(got[2], 0, NO_ID)]
            rest_cols = got[3:]
        else:
            n = len(lane_cols)
            lanes, times, rest_cols = got[:n], got[n:n + 2], got[n + 2:]
        if ((times[0] == NO_ID) | (times[1] == NO_ID)).any():
            raise TraceFormatError(f"{self.path}: rows of {table} without a start or end time")
        out = dict(zip(lane_cols, lanes))
        out["start"], out["end"] = times
        if "pid" in out:
            out["pid"] = self._ids("rocpd_info_process", ("pid",)).get(out["pid"])
        if "tid" in out:
            out["tid"] = self._ids("rocpd_info_thread", ("tid",)).get(out["tid"])
        out["_rest"] = rest_cols
        return out

    def regions(self) -> dict | None:
        if "rocpd_region" not in self.t:
            return None
        r = self._rows("R", "rocpd_region", ["pid", "tid"], f"{_int('R.name_id')}, {_int('R.event_id')}")
        name_id, event_id = r.pop("_rest")
        return {**r, "name": self._text(name_id),
                "category": self._text(self._events.get(event_id, 0, NO_ID), missing=None),
                "correlation": _known(self._events.get(event_id, 1, NO_ID))}

    def dispatches(self, gpus: dict[int, int]) -> dict:
        if "rocpd_kernel_dispatch" not in self.t:
            return {}
        k = self._rows("K", "rocpd_kernel_dispatch", ["pid", "agent_id", "queue_id", "stream_id"],
                       ", ".join(_int("K." + c) for c in (
                           "kernel_id", "event_id", "workgroup_size_x", "workgroup_size_y",
                           "workgroup_size_z", "grid_size_x", "grid_size_y", "grid_size_z",
                           "group_segment_size", "private_segment_size")))
        kernel_id, event_id, wx, wy, wz, gx, gy, gz, lds, scratch = k.pop("_rest")
        sym_table = self.t.get("rocpd_info_kernel_symbol")
        names, texts = self._names("rocpd_info_kernel_symbol", "id",
                                   "NULLIF(COALESCE(NULLIF(display_name, ''), kernel_name), '')")
        static = (self._ids("rocpd_info_kernel_symbol", ("group_segment_size",)).get(kernel_id, 0, NO_ID)
                  if sym_table else np.full(len(kernel_id), NO_ID))
        queue, stream = k["queue_id"], k["stream_id"]
        queue_or = np.where((queue == NO_ID) | (queue == 0), -1, queue)   # `queue or -1`
        agents = _Ids(np.array(list(gpus), np.int64), np.array(list(gpus.values()), np.int64))
        null = lambda a, v: np.where(a == NO_ID, v, a)   # noqa: E731
        wx_, wy_, wz_ = (np.maximum(1, w) for w in (wx, wy, wz))
        return {"device": agents.get(k["agent_id"], 0, -1), "stream": np.where(stream == NO_ID, queue_or, stream),
                "start": k["start"], "end": k["end"], "pid": _known(k["pid"]),
                "name": _text_of(names.get(kernel_id, 0, -1), texts),
                "correlation": _known(self._events.get(event_id, 1, NO_ID)),
                "grid_x": gx // wx_, "grid_y": gy // wy_, "grid_z": gz // wz_,
                "block_x": wx, "block_y": wy, "block_z": wz,
                "static_smem": null(static, -1),
                "dynamic_smem": np.maximum(0, null(lds, 0) - null(static, 0)),
                "local_mem_per_thread": null(scratch, -1)}

    def copies(self, gpus: dict[int, int]) -> dict:
        if "rocpd_memory_copy" not in self.t:
            return {}
        m = self._rows("M", "rocpd_memory_copy", ["pid", "stream_id"],
                       ", ".join(_int("M." + c) for c in ("name_id", "src_agent_id", "dst_agent_id",
                                                          "size", "event_id")))
        name_id, src, dst, size, event_id = m.pop("_rest")
        kinds, devices = [], []
        for s, d in zip(src.tolist(), dst.tolist()):      # copies are few: per row, as before
            kind = copy_kind_of(s in gpus, d in gpus, s == d) if gpus else "other"
            kinds.append(kind)
            devices.append(gpus.get(d if kind == "H2D" else s, gpus.get(d, -1)))
        on_gpu = lambda a: np.where(np.isin(a, list(gpus)), "device", "unknown")   # noqa: E731
        return {"device": np.array(devices, np.int64), "stream": _known(m["stream_id"]),
                "start": m["start"], "end": m["end"], "pid": _known(m["pid"]),
                "name": self._text(name_id), "bytes": _known(size),
                "correlation": _known(self._events.get(event_id, 1, NO_ID)),
                "kind": np.array(kinds, dtype=object), "src_kind": on_gpu(src), "dst_kind": on_gpu(dst)}

    def agents(self):
        if "rocpd_info_agent" not in self.t:
            return []
        return self.con.execute(
            f"SELECT id, type, type_index, logical_index, product_name, model_name, name "
            f"FROM {self.t['rocpd_info_agent']}")


def _rows_of(column, mask: np.ndarray):
    """Some rows of a column; a categorical keeps only the names they use."""
    if isinstance(column, pd.Categorical):
        return categorical_from_codes(column.codes[mask], column.categories.tolist())
    return column[mask]


def _int(col: str) -> str:
    return f"IFNULL({col}, {NO_ID})"


def _known(a: np.ndarray) -> np.ndarray:
    """NULL as the tables' unknown, -1."""
    return np.where(a == NO_ID, -1, a)


def _text_of(codes: np.ndarray, texts: list[str], missing: str | None = "unknown") -> pd.Categorical:
    """The texts of codes into `texts` (distinct), code -1 (no row, NULL) as `missing`."""
    if missing is not None and (codes < 0).any():
        at = texts.index(missing) if missing in texts else len(texts)
        texts = texts if at < len(texts) else [*texts, missing]
        codes = np.where(codes < 0, at, codes)
    return categorical_from_codes(codes, texts)


def _agents(q: _Query, meta: Meta) -> dict[int, int]:
    out = {}
    for i, (aid, typ, type_index, logical, product, model, name) in enumerate(q.agents()):
        if str(typ).upper() != "GPU":
            continue
        idx = int(type_index if type_index is not None else logical if logical is not None else i)
        out[int(aid)] = idx
        if meta.device(idx) is None:
            meta.devices.append(Device(id=idx, vendor="amd", name=product or model or name))
    return out

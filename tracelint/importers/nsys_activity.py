"""nsys GPU activity tables -> Timeline kernels, copies and memsets (names, launch pid, copy
directions and memory kinds from the ENUM_* tables where the exporter wrote them)."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..timeline.schema import make_table
from .nsys_db import KERNEL, MEMCPY, MEMSET, Db, categorical, pick, pid_tid

#: copyKind (ENUM_CUDA_MEMCPY_OPER numbering) -> label used in copy names.
MEMCPY_LABELS = {0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA",
                 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM HtoD",
                 12: "UVM DtoH", 13: "UVM DtoD"}
COPY_KINDS = {"HtoD": "H2D", "HtoA": "H2D", "DtoH": "D2H", "AtoH": "D2H", "DtoD": "D2D",
              "AtoA": "D2D", "AtoD": "D2D", "DtoA": "D2D", "PtoP": "P2P", "HtoH": "H2H"}
#: nsys's own memory-kind numbering (not CUPTI's), as in ENUM_CUDA_MEM_KIND.
MEM_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed",
             5: "Device Static", 6: "Managed Static", 7: "Unknown"}


def _names(db: Db, ids: np.ndarray) -> pd.Categorical:
    strings = db.strings(ids)
    return categorical(ids, lambda i: strings.get(i, "unknown"))



def activity_exprs(cols: set[str], **extra: str) -> dict[str, str]:
    """Columns shared by kernel, memcpy, memset and sync records, plus `extra` columns."""
    return {"start": pick(cols, "start"), "end": pick(cols, "end"),
            "device": pick(cols, "deviceId"),
            "stream": pick(cols, "streamId"), "correlation": pick(cols, "correlationId"),
            "gpid": pick(cols, "globalPid"), **{k: pick(cols, c) for k, c in extra.items()}}


def read_kernels(db: Db) -> pd.DataFrame:
    cols = db.columns(KERNEL)
    exprs = activity_exprs(
        cols, grid_x="gridX", grid_y="gridY", grid_z="gridZ", block_x="blockX",
        block_y="blockY", block_z="blockZ", registers_per_thread="registersPerThread",
        static_smem="staticSharedMemory", dynamic_smem="dynamicSharedMemory",
        local_mem_per_thread="localMemoryPerThread")
    raw = db.raw_scan(KERNEL, {**exprs, "dn": pick(cols, "demangledName"),
                               "sn": pick(cols, "shortName"), "graph": pick(cols, "graphNodeId")})
    if raw is not None:             # the SQL below, on the values read from the pages
        d, null = raw
        dn, sn, graph = d.pop("dn"), d.pop("sn"), d.pop("graph")
        if "demangledName" in cols and null["dn"].any():
            dn = np.where(null["dn"], sn, dn)     # ifnull(demangledName, shortName)
        d["name"] = dn if "demangledName" in cols else sn
        d["graph"] = (~null["graph"] & (graph != 0)).astype(np.int64) if "graphNodeId" in cols \
            else np.zeros(len(graph), np.int64)
    else:
        exprs["name"] = ("ifnull(demangledName, shortName)" if {"demangledName", "shortName"} <= cols
                         else pick(cols, "demangledName", "shortName"))
        exprs["graph"] = "ifnull(graphNodeId, 0) != 0" if "graphNodeId" in cols else "0"
        d = db.scan(KERNEL, exprs)
    d["pid"] = pid_tid(d.pop("gpid"))[0]
    d["name"] = _names(db, d["name"])
    d["graph_launched"] = d.pop("graph") == 1
    return make_table("kernels", d)


def _enum(db: Db, table: str, column: str) -> dict[int, str]:
    """An ENUM_* table (2022.4+) as {id: column}; empty when absent."""
    if {"id", column} <= db.columns(table):
        return {int(i): str(v) for i, v in db.query(f'SELECT id, "{column}" FROM "{table}"')}
    return {}


def _memory_labels(db: Db) -> tuple[dict[int, str], dict[int, str]]:
    """(copyKind -> 'HtoD'-style label, memory kind -> 'Pageable'-style label)."""
    copies = dict(MEMCPY_LABELS)
    for i, sym in _enum(db, "ENUM_CUDA_MEMCPY_OPER", "name").items():
        m = re.search(r"KIND_(UVM_)?([A-Z])TO([A-Z])$", sym)
        copies[i] = (("UVM " if m.group(1) else "") + f"{m.group(2)}to{m.group(3)}" if m
                     else "Unknown")
    return copies, {**MEM_KINDS, **_enum(db, "ENUM_CUDA_MEM_KIND", "label")}


def _mem_kind(label: str) -> str:
    """'Device Static' -> 'device'; anything unexpected -> 'unknown'."""
    first = label.split()[0].lower() if label else "unknown"
    return first if first in {"pageable", "pinned", "device", "array", "managed"} else "unknown"


def read_copies(db: Db) -> pd.DataFrame:
    d = db.scan(MEMCPY, activity_exprs(db.columns(MEMCPY), bytes="bytes", ck="copyKind",
                                        src="srcKind", dst="dstKind"))
    copy_label, mem_label = _memory_labels(db)
    cl = lambda k: copy_label.get(k, "Unknown")       # noqa: E731
    ml = lambda k: mem_label.get(k, "Unknown")        # noqa: E731
    ck, src, dst = d.pop("ck"), d.pop("src"), d.pop("dst")
    d["pid"] = pid_tid(d.pop("gpid"))[0]
    d["kind"] = categorical(ck, lambda k: COPY_KINDS.get(cl(k).replace("UVM ", ""), "other"))
    d["src_kind"] = categorical(src, lambda k: _mem_kind(ml(k)))
    d["dst_kind"] = categorical(dst, lambda k: _mem_kind(ml(k)))
    key = (ck & 0xFFFF) << 32 | (src & 0xFFFF) << 16 | (dst & 0xFFFF)
    d["name"] = categorical(key, lambda k: f"Memcpy {cl(k >> 32)} "
                                            f"({ml((k >> 16) & 0xFFFF)} -> {ml(k & 0xFFFF)})")
    return make_table("copies", d)


def read_memsets(db: Db) -> pd.DataFrame:
    d = db.scan(MEMSET, activity_exprs(db.columns(MEMSET), bytes="bytes", mk="memKind"))
    mem_label = _memory_labels(db)[1]
    mk = d.pop("mk")
    d["pid"] = pid_tid(d.pop("gpid"))[0]
    d["mem_kind"] = categorical(mk, lambda k: _mem_kind(mem_label.get(k, "Unknown")))
    d["name"] = categorical(mk, lambda k: f"Memset ({mem_label.get(k, 'Unknown')})")
    return make_table("memsets", d)


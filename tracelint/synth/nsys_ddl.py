"""Embedded Nsight Systems SQLite DDL and enum rows used by :mod:`tracelint.synth.builder`.

The target is a real ``nsys export --type sqlite`` from **Nsight Systems 2024.5.1**
(export schema 3.13.2). The ``CREATE TABLE`` statements below are copied verbatim, comments
included, from real exports in ``shared/traces/nsys``:

* ``nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite`` (the reference export: every table it has);
* ``CUPTI_ACTIVITY_KIND_MEMSET`` from the 2026.2.1 export (the 2024.5 file has no memsets; the
  table gained ``greenContextId`` in 2024.5 and nothing after it, so the columns match 2024.5);
* ``NVTX_EVENTS`` from the 2023.1.2 export (the 2024.5 file has no NVTX; ``binaryData`` only
  appears in 2026.2, so this is the 2024.5-era column list).

``GPU_METRICS`` and ``TARGET_INFO_GPU_METRICS`` occur in none of the sample files; their DDL
follows Nsight Systems' current "SQLite Schema Reference" (``rawTimestamp, timestamp, typeId,
metricId, value INTEGER`` and ``typeId, sourceId, typeName, metricId, metricName``).

The enum rows were read from the 2024.5 reference export (``SELECT id, name, label``).
The statements and rows live in ``nsys_2024_5_schema.json`` beside this module (data, not
code): it was generated once from those files; edit by regenerating, not by hand.
"""
from __future__ import annotations

import json
from pathlib import Path

_DATA = json.loads((Path(__file__).with_name("nsys_2024_5_schema.json")).read_text(encoding="utf-8"))

#: Exporter identity written to META_DATA_EXPORT (matches the DDL's origin).
EXPORT_PRODUCT_VERSION: str = _DATA["export_product_version"]
EXPORT_SCHEMA_VERSION: str = _DATA["export_schema_version"]
#: CREATE TABLE statement per table, verbatim.
DDL: dict[str, str] = dict(_DATA["ddl"])
#: ENUM_* table -> (id, name, label) rows.
ENUM_ROWS: dict[str, tuple[tuple[int, str, str], ...]] = {
    k: tuple(tuple(r) for r in v) for k, v in _DATA["enum_rows"].items()}

#: Tables written even when empty (a lazy export still has its metadata, targets and enums).
ALWAYS_CREATED = (
    "StringIds", "ThreadNames", "PROCESSES", "TARGET_INFO_SESSION_START_TIME",
    "META_DATA_EXPORT", "META_DATA_CAPTURE", "TARGET_INFO_GPU", *ENUM_ROWS,
)


def columns(table: str) -> list[str]:
    """Column names of an embedded table, in DDL order (parsed from the DDL text)."""
    cols = []
    for line in DDL[table].splitlines()[1:]:
        body = line.split("--", 1)[0].strip()
        if body and not body.startswith(")"):
            cols.append(body.split()[0])
    return cols

"""JSON reporter: the canonical, versioned document (Report.to_dict()) as text.

Numbers come out as plain JSON ints and floats (numpy scalars converted; NaN and infinity,
which JSON cannot carry, become null), so every consumer parses it without extensions. The
order is the report's own (findings by severity, then impact), so two runs over the same trace
diff cleanly. The schema is tracelint/schemas/report.schema.json, documented in
docs/json-schema.md.
"""
from __future__ import annotations

import json
import math
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.report import Report
from ..io import write_atomic


def jsonable(obj: Any) -> Any:
    """A deep copy with only JSON types: dict/list/str/int/float/bool/None."""
    if isinstance(obj, dict):
        return {str(k.value if isinstance(k, Enum) else k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = sorted(obj, key=str) if isinstance(obj, (set, frozenset)) else obj
        return [jsonable(v) for v in items]
    if isinstance(obj, np.ndarray):
        return [jsonable(v) for v in obj.tolist()]
    if isinstance(obj, Enum):
        return jsonable(obj.value)
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, Path):
        return str(obj)
    return str(obj)


def render_json(report: Report, indent: int | None = 2) -> str:
    """The report as JSON text (UTF-8 friendly; falls back to ASCII escapes for broken names)."""
    doc = jsonable(report.to_dict())
    try:
        text = json.dumps(doc, indent=indent, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
    except UnicodeEncodeError:          # lone surrogates from a broken trace: escape them
        text = json.dumps(doc, indent=indent, ensure_ascii=True, allow_nan=False)
    return text + "\n"


def write_json(report: Report, path: str | Path) -> None:
    write_atomic(path, render_json(report))


def report_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) every render_json document validates against."""
    text = resources.files("tracelint").joinpath("schemas/report.schema.json").read_text("utf-8")
    return json.loads(text)

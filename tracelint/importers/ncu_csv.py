"""Nsight Compute results given beside a trace (`--ncu FILE`): CSV from
`ncu --csv --page raw` (one row per profiled kernel launch, one column per metric, a units
row after the header). Returned long-form: kernel, launch, metric, value, unit."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd

from ..errors import TraceFormatError

ID_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
              "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name",
              "Metric Unit", "Metric Value", "Function Name", "Demangled Name", "Mangled Name"}


def load_ncu_csv(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read Nsight Compute CSV: {exc.strerror or exc}") from None
    lines = [ln for ln in text.splitlines() if not ln.startswith("==")]  # ncu log lines
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if not rows or "Kernel Name" not in rows[0]:
        raise TraceFormatError(f"{path}: not an Nsight Compute CSV (expected `ncu --csv --page raw`)")
    header = rows[0]
    k_col = header.index("Kernel Name")
    id_col = header.index("ID") if "ID" in header else None
    # Long form ("--page details" CSV): Metric Name / Metric Unit / Metric Value columns.
    if "Metric Name" in header and "Metric Value" in header:
        mi, ui, vi = header.index("Metric Name"), header.index("Metric Unit"), header.index("Metric Value")
        out = [(r[k_col], int(r[id_col]) if id_col is not None and r[id_col].isdigit() else -1,
                r[mi], _num(r[vi]), r[ui]) for r in rows[1:] if len(r) == len(header)]
    else:
        units = rows[1] if len(rows) > 1 and not rows[1][k_col] else [""] * len(header)
        body = rows[2:] if units is rows[1] else rows[1:]
        out = []
        for r in body:
            if len(r) != len(header):
                continue
            launch = int(r[id_col]) if id_col is not None and r[id_col].isdigit() else -1
            for i, name in enumerate(header):
                if name in ID_COLUMNS:
                    continue
                v = _num(r[i])
                if v is not None:
                    out.append((r[k_col], launch, name, v, units[i]))
    df = pd.DataFrame(out, columns=["kernel", "launch", "metric", "value", "unit"])
    return df.dropna(subset=["value"])


def _num(s: str):
    try:
        return float(s.replace(",", ""))
    except (ValueError, AttributeError):
        return None

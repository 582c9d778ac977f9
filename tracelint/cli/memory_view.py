"""`tracelint info`'s memory section: per device the peaks, where they happen, fragmentation
and churn per iteration (data: timeline/memory.py memory_summary)."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..reporters.escape import rich_text as escape


def _size(v) -> str:
    if v is None:
        return "–"
    for unit, p in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(v) >= p:
            return f"{v / p:.2f} {unit}"
    return f"{v} B"


def _where(at: dict) -> str:
    if not at:
        return "–"
    it = f"iteration {at['iteration']}" if at.get("iteration") is not None else "outside iterations"
    return f"{it}, {escape(at['op'])}" if at.get("op") else it


def print_memory(console: Console, mem: dict | None) -> None:
    if not mem or not mem["devices"]:
        return
    t = Table(title="Memory timeline", title_justify="left")
    for col in ("device", "source", "peak allocated", "peak reserved", "of capacity", "at the peak",
                "reserved − allocated", "allocs / iter", "reserved released / iter"):
        t.add_column(col, justify="left" if col in ("device", "source", "at the peak") else "right")
    for d in mem["devices"]:
        med = d.get("per_iteration_median") or {}
        share = d.get("peak_share_of_capacity")
        at = d["at_peak_reserved"] or d["at_peak_allocated"]
        t.add_row(escape(d["label"]), d["source"], _size(d["peak_allocated"]), _size(d["peak_reserved"]),
                  f"{share:.1%}" if share is not None else "unknown",
                  _where(at), _size(d["fragmentation_at_peak"]),
                  "–" if med.get("allocs") is None else f"{med['allocs']:,}",
                  _size(med.get("reserved_released")))
    console.print(t)

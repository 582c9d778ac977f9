"""The device table (devices.json): datasheet peaks and per-SM limits, matched by device name.

Matching reads only the trace's device name (and its memory size to tell 40 GB from 80 GB
parts); a name that matches no row, or several, is reported as unknown with the reason,
never guessed from a file name or a generation.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

#: Math types a kernel can run in, and the peak key each falls back to when a device lists none.
DTYPES = ("fp64", "fp64_tc", "fp32", "tf32", "fp16", "bf16", "fp8", "fp4")


@dataclass(frozen=True)
class DeviceSpec:
    key: str
    name: str
    arch: str
    sm_count: int
    memory_bps: float                     # peak DRAM bytes/s
    peak_flops: dict[str, float]          # dtype -> FLOP/s (dense)
    limits: dict[str, Any]                # per-SM limits of the architecture
    interconnect: str
    source: str
    note: str = ""

    def peak(self, dtype: str) -> float | None:
        """Peak FLOP/s for a math type; bf16 falls back to fp16 (same rate on every listed
        part that has both), tf32 to fp32 on parts without TF32."""
        p = self.peak_flops
        if dtype in p:
            return p[dtype]
        fallback = {"bf16": None, "tf32": "fp32", "fp64_tc": "fp64"}.get(dtype)
        return p.get(fallback) if fallback else None

    def ridge(self, dtype: str) -> float | None:
        """Arithmetic intensity (FLOP/byte) where the roofline turns from memory to compute."""
        pk = self.peak(dtype)
        return pk / self.memory_bps if pk else None


@dataclass(frozen=True)
class Match:
    """The result of matching a trace device: spec or None with the reason."""

    spec: DeviceSpec | None
    reason: str
    candidates: list[str] = field(default_factory=list)

    @property
    def known(self) -> bool:
        return self.spec is not None


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    text = resources.files("tracelint.efficiency").joinpath("devices.json").read_text("utf-8")
    return json.loads(text)


@lru_cache(maxsize=1)
def all_devices() -> tuple[DeviceSpec, ...]:
    t = _table()
    out = []
    for row in t["devices"]:
        arch = t["architectures"][row["arch"]]
        out.append(DeviceSpec(
            key=row["key"], name=row["name"], arch=row["arch"], sm_count=int(row["sm_count"]),
            memory_bps=float(row["memory_gbps"]) * 1e9,
            peak_flops={k: float(v) * 1e12 for k, v in row["peak_tflops"].items()},
            limits={k: v for k, v in arch.items() if k != "source"} | {"sm_count": row["sm_count"]},
            interconnect=row["interconnect"], source=f"{row['source']}; limits: {arch['source']}",
            note=row.get("note", "")))
    return tuple(out)


def match_device(name: str | None, memory_bytes: int | None = None,
                 sm_count: int | None = None) -> Match:
    """The table row for a trace's device name; the memory size and SM count the trace
    records separate rows that share a name (A100 40/80 GB, MI250X/MI250)."""
    if not name or not str(name).strip():
        return Match(None, "unknown device: the trace records no device name")
    rows = _table()["devices"]
    hits = [r for r in rows if any(re.search(p, str(name), re.IGNORECASE) for p in r["match"])]
    if len(hits) > 1 and memory_bytes:
        gb = memory_bytes / 1e9
        hits = [r for r in hits if "memory_gb" not in r
                or r["memory_gb"][0] <= gb <= r["memory_gb"][1]] or hits
    if len(hits) > 1 and sm_count:
        hits = [r for r in hits if int(r["sm_count"]) == int(sm_count)] or hits
    specs = {s.key: s for s in all_devices()}
    if len(hits) == 1:
        return Match(specs[hits[0]["key"]], f"matched {hits[0]['name']} by device name")
    if not hits:
        return Match(None, f"unknown device {str(name)[:80]!r}: not in the device table "
                           "(tracelint/efficiency/devices.json)")
    keys = [r["key"] for r in hits]
    return Match(None, f"ambiguous device {str(name)[:80]!r}: one of {', '.join(keys)} "
                       "(the trace's memory size and SM count do not tell them apart)", keys)


def match_trace_device(device) -> Match:
    """match_device for a timeline Device (meta.devices entry), or None."""
    if device is None:
        return Match(None, "unknown device: the trace does not describe this device")
    return match_device(device.name, device.memory_bytes, device.sm_count)


def device_limits(name: str | None, memory_bytes: int | None = None) -> dict[str, Any] | None:
    """Per-SM limits for occupancy: regs_per_sm, smem_per_sm, smem_per_block_max,
    max_threads_per_sm, max_blocks_per_sm, warp_size, sm_count; None for an unknown device."""
    m = match_device(name, memory_bytes)
    return dict(m.spec.limits) if m.spec else None

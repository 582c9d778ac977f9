"""When a case applies: the device class, vendor and workload kind of the trace, and ranges
of the finding's key metrics. A case is compared with a finding only when they all hold, so a
CPU-only gloo trace is never "like" an LLM-prefill case however close two numbers happen to be.

    applies_when:
      device: gpu                  # gpu | cpu | any
      vendor: nvidia               # nvidia | amd | intel | any
      workload: [training]         # training, inference, serving, other; empty = any
      metrics:                     # the finding's numbers (as in expected.findings)
        idle_share: {min: 0.05}
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEVICES = ("gpu", "cpu", "any")
VENDORS = ("nvidia", "amd", "intel", "any")
WORKLOADS = ("training", "inference", "serving", "other")


@dataclass
class Preconditions:
    device: str = "any"
    vendor: str = "any"
    workload: tuple[str, ...] = ()
    metrics: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"device": self.device}
        if self.vendor != "any":
            d["vendor"] = self.vendor
        if self.workload:
            d["workload"] = list(self.workload)
        if self.metrics:
            d["metrics"] = {k: {n: v for n, v in (("min", lo), ("max", hi)) if v is not None}
                            for k, (lo, hi) in self.metrics.items()}
        return d

    def check(self, trace: dict[str, str], value_of) -> tuple[bool, list[str]]:
        """(holds, why): trace is {device, vendor, workload} of the finding's trace;
        value_of(name) reads one of the finding's numbers (None when it has none)."""
        why: list[str] = []
        if self.device != "any":
            if trace.get("device") != self.device:
                return False, [f"needs a {self.device} trace"]
            why.append(f"{self.device} trace")
        if self.vendor != "any":
            if trace.get("vendor") != self.vendor:
                return False, [f"needs {self.vendor} hardware"]
            why.append(f"{self.vendor} hardware")
        if self.workload:
            if trace.get("workload") not in self.workload:
                return False, [f"needs a {' or '.join(self.workload)} workload"]
            why.append(f"{trace['workload']} workload")
        for name, (lo, hi) in self.metrics.items():
            v = value_of(name)
            if v is None or (lo is not None and v < lo) or (hi is not None and v > hi):
                return False, [f"{name} outside {_range(lo, hi)}"]
            why.append(f"{name} {v:.4g} within {_range(lo, hi)}")
        return True, why


def _range(lo, hi) -> str:
    return f"[{'' if lo is None else f'{lo:g}'}, {'' if hi is None else f'{hi:g}'}]"


def parse(raw: Any, v) -> Preconditions:
    """From case.yaml's applies_when mapping; v is the case validator (one-line errors)."""
    if raw is None:
        return Preconditions()
    if not isinstance(raw, dict):
        v.fail("applies_when", "expected a mapping: device, vendor, workload, metrics")
    v.known(raw, ("device", "vendor", "workload", "metrics"), "applies_when")
    device = v.text(raw, "device", "applies_when", default="any")
    if device not in DEVICES:
        v.fail("applies_when.device", f"must be one of {', '.join(DEVICES)}, not {device!r}")
    vendor = v.text(raw, "vendor", "applies_when", default="any")
    if vendor not in VENDORS:
        v.fail("applies_when.vendor", f"must be one of {', '.join(VENDORS)}, not {vendor!r}")
    work = raw.get("workload") or []
    if isinstance(work, str):
        work = [work]
    if not isinstance(work, list) or any(w not in WORKLOADS for w in work):
        v.fail("applies_when.workload", f"expected a list of {', '.join(WORKLOADS)}")
    ranges: dict[str, tuple[float | None, float | None]] = {}
    for name, rng in (raw.get("metrics") or {}).items():
        where = f"applies_when.metrics.{name}"
        if not isinstance(rng, dict) or not rng:
            v.fail(where, "expected {min: x, max: y} (either may be left out)")
        v.known(rng, ("min", "max"), where)
        ranges[str(name)] = (v.number(rng, "min", where, optional=True),
                             v.number(rng, "max", where, optional=True))
    return Preconditions(device, vendor, tuple(work), ranges)

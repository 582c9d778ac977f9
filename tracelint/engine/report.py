"""A lint run's result: trace facts, findings, rule metadata and skipped rules.

Report.to_dict() is the canonical JSON form (versioned; see docs/json-schema.md). Every other
reporter renders from the same object.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from .. import __version__
from .finding import Finding, Severity

if TYPE_CHECKING:  # type-only: importing the model pulls pandas and numpy into every command
    from ..timeline.model import Timeline

JSON_SCHEMA_VERSION = "1.1"   # 1.1: evidence status "estimated", `efficiency`; saving_*, critical_path


@dataclass
class RuleInfo:
    id: str
    slug: str
    title: str
    severity: str
    summary: str
    doc: str
    layers: list[str]
    fix: str = ""
    counter_example: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Report:
    source: str
    timeline: Timeline
    findings: list[Finding]
    rules: list[RuleInfo]                       # every rule that ran or was skipped
    skipped: dict[str, str] = field(default_factory=dict)   # rule id -> why it did not run
    suppressed: int = 0                          # findings hidden by the baseline
    elapsed_s: dict[str, float] = field(default_factory=dict)   # load, rules, per rule
    # Top-level JSON sections a higher layer attaches, computed when rendered
    # (tracelint.api adds "efficiency"); name -> callable returning the section.
    sections: dict[str, Callable[[], dict[str, Any]]] = field(default_factory=dict)
    saving_all_ns: int | None = None             # all findings' fixes replayed together
    critical_path: dict[str, Any] | None = None  # whatif.analysis.WhatIf.critical_path_dict

    def summary(self) -> dict[str, Any]:
        tl = self.timeline
        devices = []
        for d in tl.devices_in_use():
            info = tl.meta.device(d)
            devices.append({"id": d, "name": info.name if info else None,
                            "busy_share": round(tl.gpu_busy_fraction(d), 6)})
        by_sev = {s.value: 0 for s in Severity}
        for f in self.findings:
            by_sev[f.severity.value] += 1
        return {
            "format": tl.meta.format, "format_version": tl.meta.format_version,
            "span_ns": int(tl.span_ns), "start_ns": int(tl.span[0]), "end_ns": int(tl.span[1]),
            "devices": devices, "rank": tl.meta.rank, "world_size": tl.meta.world_size,
            "counts": tl.counts(), "has_gpu_activity": tl.has_gpu_activity,
            "findings_by_severity": by_sev, "notes": list(tl.meta.notes),
        }

    def exit_code(self, fail_on: str) -> int:
        """0, or 1 when a finding is at or above `fail_on` (error, warning, info; never: 0)."""
        if fail_on == "never":
            return 0
        threshold = Severity(fail_on).rank
        return 1 if any(f.severity.rank >= threshold for f in self.findings) else 0

    def write_baseline(self, path: str, scrub=None) -> int:
        """Accept every current finding into an accepted-findings baseline file (``scrub``:
        the output layer's cleaner for the keys, names from the trace)."""
        from .baseline import write_baseline
        write_baseline(path, self.findings, scrub=scrub)
        return len(self.findings)

    def sorted_findings(self) -> list[Finding]:
        """By projected saving; findings without one after those with one."""
        return sorted(self.findings, key=lambda f: (f.saving_ns is None, -(f.saving_ns or 0),
                                                    -f.severity.rank, -f.impact_ns, f.rule))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": JSON_SCHEMA_VERSION,
            "tool": {"name": "tracelint", "version": __version__},
            "source": self.source,
            "summary": self.summary(),
            "findings": [f.to_dict() for f in self.sorted_findings()],
            "rules": [r.to_dict() for r in self.rules],
            "skipped_rules": dict(self.skipped),
            "suppressed_by_baseline": self.suppressed,
            "timing_s": {k: round(v, 4) for k, v in self.elapsed_s.items()},
            **{name: make() for name, make in self.sections.items()},
            "saving_all_ns": self.saving_all_ns,
            "critical_path": self.critical_path,
        }

    def to_pandas(self):
        import pandas as pd
        return pd.DataFrame([{**f.to_dict(), **{f"where.{k}": v for k, v in f.where.to_dict().items()}}
                             for f in self.sorted_findings()])

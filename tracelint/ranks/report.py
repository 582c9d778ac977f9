"""A job's report: per-rank summaries and findings, cross-rank findings and the job view.

JobReport.to_dict() is the JSON form (schema "job-1.0"); tracelint.reporters.job renders it
(terminal, JSON, HTML, Markdown) like every other result.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .. import __version__
from ..engine.finding import Finding, Severity
from ..engine.report import RuleInfo
from .summary import RankSummary

JOB_SCHEMA_VERSION = "job-1.0"
SEV_ORDER = {"error": 2, "warning": 1, "info": 0}


def _plain(x: Any) -> Any:
    """JSON-safe: numpy scalars to Python, NaN/inf to None."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def _records(df: pd.DataFrame, limit: int | None = None) -> list[dict[str, Any]]:
    if df is None or not len(df):
        return []
    d = df.reset_index() if df.index.name else df
    if limit is not None:
        d = d.head(limit)
    return [_plain(r) for r in d.to_dict(orient="records")]


@dataclass
class JobReport:
    sources: list[str]
    ranks: list[RankSummary]                      # the analysed job, sorted by rank
    findings: list[Finding]                       # cross-rank findings
    rules: list[RuleInfo]
    failed: list[RankSummary] = field(default_factory=list)
    excluded: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    suppressed: int = 0
    world_size: int | None = None
    notes: list[str] = field(default_factory=list)
    execution: dict[str, Any] = field(default_factory=dict)
    elapsed_s: dict[str, float] = field(default_factory=dict)
    context: Any = None                           # JobContext (not serialised)
    whatif: dict[str, Any] = field(default_factory=dict)   # job replay: fidelity, saving_all_ns
    # source -> what its worker's secret scan found, for the output sink (not serialised)
    scanned: dict[str, Any] = field(default_factory=dict, repr=False)

    # ----- views -----------------------------------------------------------------------------
    def sorted_findings(self) -> list[Finding]:
        """By projected job saving (job replay); findings without one after those with one."""
        return sorted(self.findings, key=lambda f: (f.saving_ns is None, -(f.saving_ns or 0),
                                                    -f.severity.rank, -f.impact_ns, f.rule))

    def rank_findings(self) -> list[dict[str, Any]]:
        """Every per-rank finding (dicts), each with where.rank set."""
        out = []
        for s in self.ranks:
            out += s.findings
        return out

    def findings_by_severity(self, per_rank: bool = False) -> dict[str, int]:
        by = {s.value: 0 for s in Severity}
        if per_rank:
            for f in self.rank_findings():
                by[f["severity"]] += 1
        else:
            for f in self.findings:
                by[f.severity.value] += 1
        return by

    def exit_code(self, fail_on: str) -> int:
        """0, or 1 when a cross-rank or per-rank finding is at or above `fail_on`; 2 when no
        rank could be analysed."""
        if not self.ranks:
            return 2
        if fail_on == "never":
            return 0
        threshold = Severity(fail_on).rank
        sev = [f.severity.rank for f in self.findings] + \
              [SEV_ORDER[f["severity"]] for f in self.rank_findings()]
        return 1 if any(s >= threshold for s in sev) else 0

    def gpu_names(self) -> list[str]:
        names = []
        for s in self.ranks:
            for d in s.devices:
                if d.get("name") and d["name"] not in names:
                    names.append(d["name"])
        return names

    def summary(self) -> dict[str, Any]:
        ctx = self.context
        return {
            "ranks": len(self.ranks), "world_size": self.world_size,
            "rank_ids": [s.rank for s in self.ranks],
            "failed": len(self.failed), "excluded": len(self.excluded),
            "formats": sorted({s.format for s in self.ranks}),
            "gpus": self.gpu_names(),
            "iterations_matched_by": ctx.matched_by if ctx else None,
            "iterations_matched": int(ctx.iterations["it"].nunique()) if ctx is not None and len(ctx.iterations) else 0,
            "collectives_matched_by": ctx.coll_matched_by if ctx else None,
            "collective_calls_matched": int(len(ctx.matched)) if ctx is not None else 0,
            "window_ns": int(ctx.window_ns) if ctx is not None else 0,
            "saving_all_ns": (self.whatif or {}).get("saving_all_ns"),
            "findings_by_severity": self.findings_by_severity(),
            "per_rank_findings_by_severity": self.findings_by_severity(per_rank=True),
        }

    def job_tables(self) -> dict[str, Any]:
        ctx = self.context
        if ctx is None:
            return {}
        it = ctx.iteration_matrix
        steps = [int(c) for c in it["dur_ns"].columns] if not it["dur_ns"].empty else []
        iters = {"matched_by": ctx.matched_by, "iterations": steps, "ranks": []}
        for r in (it["dur_ns"].index if not it["dur_ns"].empty else []):
            iters["ranks"].append({"rank": int(r),
                                   "dur_ns": _plain(it["dur_ns"].loc[r].tolist()),
                                   "compute_ns": _plain(it["compute_ns"].loc[r].tolist()),
                                   "exposed_comm_ns": _plain(it["exposed_comm_ns"].loc[r].tolist())})
        rt = ctx.rank_table
        exposed = {"total_ns": int(rt["exposed_comm_ns"].sum()) if len(rt) else 0,
                   "wait_ns": int(rt["exposed_wait_ns"].sum()) if len(rt) else 0,
                   "transfer_ns": int(rt["exposed_transfer_ns"].sum()) if len(rt) else 0}
        return {
            "iterations": iters,
            "ranks": _records(rt.drop(columns=["label"]) if len(rt) else rt),
            "collective_skew": _records(ctx.skew_by_collective),
            "collective_bandwidth": _records(ctx.bandwidth_by_collective),
            "collective_calls": _records(ctx.matched.drop(columns=["kernel"]) if len(ctx.matched) else ctx.matched, 5000),
            "clock_offsets_ns": [{"rank": int(r), "offset_ns": int(o)} for r, o in sorted(ctx.offsets.items())],
            "exposed_communication": exposed,
            "worst_ranks": self.worst_ranks(),
            "notes": list(ctx.notes),
        }

    def worst_ranks(self, n: int = 5) -> list[dict[str, Any]]:
        """Ranks named by cross-rank findings first (by impact), then by median iteration time."""
        ctx = self.context
        if ctx is None or not len(ctx.rank_table):
            return []
        rt = ctx.rank_table
        named: dict[int, list[str]] = {}
        impact: dict[int, int] = {}
        for f in self.sorted_findings():
            if f.where.rank is not None:
                named.setdefault(f.where.rank, []).append(f.rule)
                impact[f.where.rank] = impact.get(f.where.rank, 0) + int(f.impact_ns)
        order = sorted(rt.index, key=lambda r: (-impact.get(r, 0), -(rt.at[r, "step_median_ns"]
                                                                     if not math.isnan(rt.at[r, "step_median_ns"]) else 0)))
        out = []
        for r in order[:n]:
            out.append(_plain({"rank": int(r), "rules": named.get(r, []), "impact_ns": impact.get(r, 0),
                               "step_median_ns": rt.at[r, "step_median_ns"],
                               "compute_median_ns": rt.at[r, "compute_median_ns"],
                               "median_late_ns": rt.at[r, "median_late_ns"],
                               "exposed_comm_ns": rt.at[r, "exposed_comm_ns"],
                               "label": rt.at[r, "label"]}))
        return out

    def to_dict(self) -> dict[str, Any]:
        ranks = []
        for s in self.ranks:
            ranks.append(_plain({
                "rank": s.rank, "source": s.source, "label": s.label, "rank_source": s.rank_source,
                "process": s.process, "format": s.format, "producer": s.producer,
                "world_size": s.world_size, "devices": s.devices,
                "epoch_start_ns": s.epoch_start_ns, "span_ns": s.end_ns - s.start_ns,
                "iterations": s.steps, "totals": s.totals,
                "findings_by_severity": s.findings_by_severity(),
                "findings": s.findings, "skipped_rules": s.skipped,
                "suppressed_by_baseline": s.suppressed,
                "notes": s.notes, "timing_s": {k: round(v, 4) for k, v in s.timing_s.items()},
                "worker": s.worker, "worker_peak_rss_bytes": s.worker_peak_rss_bytes,
            }))
        return {
            "schema_version": JOB_SCHEMA_VERSION,
            "kind": "job",
            "tool": {"name": "tracelint", "version": __version__},
            "sources": list(self.sources),
            "summary": _plain(self.summary()),
            "findings": [f.to_dict() for f in self.sorted_findings()],
            "ranks": ranks,
            "failed": [{"source": s.source, "label": s.label, "rank": s.rank_hint, "error": s.error}
                       for s in self.failed],
            "excluded": _plain(self.excluded),
            "job": self.job_tables(),
            "whatif": _plain(self.whatif),
            "rules": [r.to_dict() for r in self.rules],
            "skipped_rules": dict(self.skipped),
            "suppressed_by_baseline": self.suppressed,
            "notes": list(self.notes),
            "execution": _plain(self.execution),
            "timing_s": {k: round(v, 4) for k, v in self.elapsed_s.items()},
        }

    def write_baseline(self, path: str, scrub=None) -> int:
        """Accept every current finding (per rank and cross-rank) into a baseline file."""
        from ..engine.baseline import findings_baseline_doc
        from ..io import write_atomic
        if scrub is None:            # keys are names from traces: never commit a secret
            from ..secrets.sink import scrub_committed as scrub
        clean = scrub
        entries = {(f.fingerprint(), f.rule, clean(f.key)) for f in self.findings}
        entries |= {(f["fingerprint"], f["rule"], clean(f.get("key", ""))) for f in self.rank_findings()}
        doc = findings_baseline_doc(entries)
        write_atomic(path, json.dumps(doc, indent=1) + "\n")
        return len(entries)


# ----- scrubbing ---------------------------------------------------------------------------------
_KEEP = frozenset({"fingerprint", "key", "rule", "slug", "severity", "verdict", "unit", "status"})


def scrub_job_report(report: JobReport, paths: bool = False) -> None:
    """Scrub, in place, every string a job renderer may print (the job-mode counterpart of
    tracelint.secrets.scrub_report): finding texts, per-rank finding dicts, kernel and device
    names, sources and labels (with paths=True also home directories, user and host names),
    notes, errors and exclusion reasons. Fingerprints and keys are kept so baselines match."""
    from ..secrets import scrub_text

    def f(x):
        return scrub_text(x, paths=paths) if isinstance(x, str) else x

    def deep(x, key=None):
        if isinstance(x, dict):
            return {k: (v if k in _KEEP else deep(v, k)) for k, v in x.items()}
        if isinstance(x, list):
            return [deep(v) for v in x]
        return f(x)
    report.sources = [f(x) for x in report.sources]
    report.notes = [f(x) for x in report.notes]
    report.skipped = {k: f(v) for k, v in report.skipped.items()}
    report.excluded = deep(report.excluded)
    for fd in report.findings:
        fd.message, fd.title, fd.fix = f(fd.message), f(fd.title), f(fd.fix)
        fd.counter_example = f(fd.counter_example)
        w = fd.where
        w.file, w.function, w.kernel = f(w.file), f(w.function), f(w.kernel)
        w.nvtx_path = [f(p) for p in w.nvtx_path]
        for ev in fd.evidence.values():
            ev.summary, ev.capture_hint = f(ev.summary), f(ev.capture_hint)
    for s in [*report.ranks, *report.failed]:
        s.source, s.label, s.error = f(s.source), f(s.label), f(s.error)
        s.notes = [f(x) for x in s.notes]
        s.findings = deep(s.findings)
        s.skipped = {k: f(v) for k, v in s.skipped.items()}
        s.top_kernels = [(f(n), t, c) for n, t, c in s.top_kernels]
        s.devices = deep(s.devices)
        if isinstance(s.collectives, pd.DataFrame) and "kernel" in s.collectives:
            s.collectives["kernel"] = s.collectives["kernel"].astype(str).map(f)
    ctx = report.context
    if ctx is not None:
        ctx.notes = [f(x) for x in ctx.notes]
        if len(ctx.collectives) and "kernel" in ctx.collectives:
            ctx.collectives["kernel"] = ctx.collectives["kernel"].astype(str).map(f)
        if len(ctx.matched) and "kernel" in ctx.matched:
            ctx.matched["kernel"] = ctx.matched["kernel"].astype(str).map(f)
        if len(ctx.rank_table):
            ctx.rank_table["label"] = ctx.rank_table["label"].map(f)



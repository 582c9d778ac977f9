"""SARIF for a multi-rank job: ONE run holding the cross-rank findings and every rank's own
findings, each result carrying its rank in the location's properties (and the rank's trace as
the fallback artifact), so code scanning shows one tool run per CI job, not one per rank."""
from __future__ import annotations

from typing import Any

from ..engine.finding import Evidence, Finding, Layer, Severity, Where
from ..engine.report import RuleInfo
from .sarif import SRCROOT, _artifact, _result, render_run


def finding_from_dict(d: dict[str, Any]) -> Finding:
    """A Finding rebuilt from Finding.to_dict() (per-rank findings travel as dicts)."""
    known = set(Where.__dataclass_fields__)
    where = Where(**{k: v for k, v in (d.get("where") or {}).items() if k in known})
    evidence = {Layer(k): Evidence(v.get("status", "not_captured"), v.get("summary", ""), {},
                                   v.get("capture_hint"), v.get("supports"))
                for k, v in (d.get("evidence") or {}).items() if k in Layer._value2member_map_}
    impact, share = int(d.get("impact_ns", 0)), float(d.get("impact_share", 0.0))
    f = Finding(rule=d["rule"], slug=d.get("slug", ""), title=d.get("title", ""),
                severity=Severity(d.get("severity", "warning")), message=d.get("message", ""),
                impact_ns=impact, span_ns=int(round(impact / share)) if share > 0 else 0,
                where=where, evidence=evidence, fix=d.get("fix", ""),
                occurrences=int(d.get("occurrences", 1)), key=d.get("key", ""))
    return f


def render_job_sarif(report) -> dict[str, Any]:
    """The job report (ranks/report.JobReport) as a SARIF 2.1.0 log with one run."""
    cross = report.sorted_findings()
    per_rank: list[tuple[Finding, str | None]] = []
    for rs in report.ranks:
        for d in rs.findings:
            f = finding_from_dict(d)
            f.where.rank = rs.rank
            per_rank.append((f, rs.source))
    pairs = [(f, None) for f in cross] + sorted(
        per_rank, key=lambda p: (-p[0].severity.rank, -p[0].impact_ns, p[0].where.rank or 0))
    rules = list(report.rules)
    known = {r.id for r in rules}
    for f, _ in pairs:
        if f.rule not in known:
            known.add(f.rule)
            rules.append(RuleInfo(id=f.rule, slug=f.slug, title=f.title, severity=f.severity.value,
                                  summary=f.title, doc=f.title, layers=sorted(x.value for x in f.evidence)))
    index = {r.id: i for i, r in enumerate(rules)}
    results = []
    for n, (f, source) in enumerate(pairs, 1):
        res = _result(f, index[f.rule], _artifact(source) if source else None, 0, n)
        if f.where.rank is not None:
            locs = res.setdefault("locations", [{}])
            for loc in locs:
                loc.setdefault("properties", {})["rank"] = int(f.where.rank)
        results.append(res)
    artifacts = [_artifact(s) for s in report.sources]
    return render_run(rules, results, [a for a in artifacts if a],
                      properties={"kind": "job", "ranks": len(report.ranks),
                                  "world_size": report.world_size,
                                  "failed_ranks": len(report.failed)},
                      skipped=report.skipped)


__all__ = ["render_job_sarif", "finding_from_dict", "SRCROOT"]

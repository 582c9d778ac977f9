"""The golden-findings snapshot of one trace: per finding its rule, severity, key, message, the
key numbers (impact, occurrences, metrics) and where, in a stable, reviewable JSON form.

Every change to a finding on a shared trace shows up as a diff of tests/golden/<trace>.json;
`pytest tests/test_golden.py --update-golden` rewrites the snapshots after a reviewed change.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden"
WHERE_KEYS = ("device", "stream", "kernel", "file", "line", "function", "iteration", "rank")


def _num(v):
    """Numbers to 6 significant digits (floats), so a snapshot does not churn on the last ulp."""
    if isinstance(v, float):
        return 0.0 if v == 0 or not math.isfinite(v) else float(f"{v:.6g}")
    return v


def snapshot(findings) -> list[dict]:
    out = []
    for f in findings:
        w = f.where
        where = {k: getattr(w, k) for k in WHERE_KEYS if getattr(w, k, None) not in (None, "", [])}
        if isinstance(where.get("kernel"), str):
            where["kernel"] = where["kernel"][:120]
        out.append({
            "rule": f.rule, "severity": f.severity.value, "key": f.key, "message": f.message,
            "impact_ns": _num(f.impact_ns), "occurrences": f.occurrences,
            "metrics": {k: _num(m.value) for k, m in sorted(f.metrics.items())},
            "where": where,
        })
    return sorted(out, key=lambda d: (d["rule"], d["key"]))


def path_for(trace: Path) -> Path:
    name = trace.name
    for suffix in (".json.gz", ".pt.trace", ".sqlite"):
        name = name.removesuffix(suffix)
    return GOLDEN / f"{name}.json"


def write(trace: Path, snap: list[dict]) -> None:
    path_for(trace).write_text(json.dumps({"trace": trace.name, "findings": snap}, indent=1,
                                          ensure_ascii=False, sort_keys=True) + "\n")


def read(trace: Path) -> list[dict] | None:
    p = path_for(trace)
    return json.loads(p.read_text())["findings"] if p.exists() else None

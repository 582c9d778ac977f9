"""Projected savings on the bundled example (planted launch storm, sync, copies, layout and
dequant kernels): every fix is replayed, findings are ranked by it, and fixes that overlap
are not added twice."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema

import tracelint
from tracelint.reporters.json_report import report_schema
from tracelint.whatif.analysis import WhatIf

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "examples" / "training_step_antipatterns.json.gz"


def test_findings_carry_savings_and_sort_by_them():
    report = tracelint.lint(EXAMPLE)
    d = report.to_dict()
    jsonschema.validate(json.loads(json.dumps(d)), report_schema())
    fs = d["findings"]
    with_saving = [f for f in fs if f["saving_ns"] is not None]
    assert {f["rule"] for f in with_saving} >= {"TL002", "TL005"}
    # ranked by saving, findings without one last, each of those says why
    savings = [f["saving_ns"] for f in with_saving]
    assert savings == sorted(savings, reverse=True)
    assert fs[: len(with_saving)] == with_saving
    assert all(f["saving_note"] for f in fs[len(with_saving):])
    # all fixes together: no more than the sum, and at least the best single fix
    total = sum(max(s, 0) for s in savings)
    assert max(savings) <= d["saving_all_ns"] <= total
    # a finding's saving equals an independent replay of its rule's edits
    w = WhatIf(report.timeline)
    assert d["critical_path"]["length_ns"] == w.base.work_span_ns
    assert sum(d["critical_path"]["breakdown_ns"].values()) == w.base.work_span_ns


def test_sync_saving_is_bounded_by_the_blocked_time():
    report = tracelint.lint(EXAMPLE)
    f = next(f for f in report.findings if f.rule == "TL005")
    blocked = f.metrics["host_blocked_ns"].value
    assert 0 < f.saving_ns <= blocked

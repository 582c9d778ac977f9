"""The planted-pattern suite: every rule's positives fire and its near-misses stay silent,
in both formats (Kineto JSON and nsys SQLite), on traces the project generates."""
from __future__ import annotations

import pytest

from tracelint.api import lint
from tracelint.synth.scenarios import all_scenarios, evaluate, scenario_config, write

CASES = [(s, fmt) for s in all_scenarios() for fmt in s.formats]


@pytest.mark.parametrize("scenario,fmt", CASES, ids=[f"{s.id}-{f}" for s, f in CASES])
def test_planted(scenario, fmt, tmp_path):
    path = write(scenario, fmt, tmp_path)
    report = lint(path, scenario_config(scenario))
    ok, why = evaluate(scenario, report.findings)
    assert ok, why


def test_every_rule_has_positive_and_near_miss():
    from tracelint.api import available_rules
    by_rule: dict[str, set[bool]] = {}
    for s in all_scenarios():
        by_rule.setdefault(s.rule, set()).add(s.fires)
    security = {r.id for r in available_rules() if "security" in r.groups}
    for r in available_rules():
        if r.id in security or r.scope == "job":
            continue  # covered by tests/test_secrets.py and tests/test_ranks.py
        assert by_rule.get(r.id) == {True, False}, f"{r.id} needs a positive and a near-miss scenario"

"""The two files called "baseline": accepted findings (lint) and performance (gate). Each
loader refuses the other kind, and any corrupt or mistyped file, in one line naming the file
and the field (exit 2 from the CLI), never an internal error."""
from __future__ import annotations

import json

import pytest

from conftest import REPO, run_cli
from tracelint.analysis.perf_baseline import read_metrics_baseline
from tracelint.engine.baseline import FINDINGS_KIND, PERF_KIND, read_baseline, write_baseline
from tracelint.errors import ConfigError

EXAMPLE = REPO / "fixtures" / "examples" / "training_step_antipatterns.json.gz"
PERF_DOC = {"kind": PERF_KIND, "version": 2, "runs": 1,
            "metrics": {"gpu_time": {"unit": "ns", "better": "lower", "runs": [1.0]}},
            "findings": [{"fingerprint": "abc", "rule": "TL001", "key": "k"}]}


def _write(tmp_path, name, doc):
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


def test_findings_baseline_has_its_kind_and_scrubs_through_the_callers_callable(tmp_path):
    from tracelint.engine.finding import Finding, Severity, Where
    f = Finding(rule="TL001", slug="x", title="t", severity=Severity.WARNING, message="m",
                key="token=hunter2", where=Where(), impact_ns=0, span_ns=1, evidence={})
    p = tmp_path / "b.json"
    write_baseline(p, [f], scrub=lambda s: s.replace("hunter2", "<redacted>"))
    doc = json.loads(p.read_text())
    assert doc["kind"] == FINDINGS_KIND and doc["findings"][0]["key"] == "token=<redacted>"
    assert read_baseline(p) == {f.fingerprint()}


def test_findings_baseline_version_1_without_kind_still_reads(tmp_path):
    p = _write(tmp_path, "old.json", {"version": 1, "findings": [{"fingerprint": "ab", "rule": "TL1"}]})
    assert read_baseline(p) == {"ab"}


@pytest.mark.parametrize("loader,doc,field", [
    (read_baseline, PERF_DOC, "kind"),
    (read_baseline, {"kind": "tracelint-metrics-baseline", "metrics": {}}, "kind"),
    (read_baseline, {"findings": [{"fingerprint": 3}]}, "$.findings[0].fingerprint"),
    (read_baseline, {"findings": "all"}, "$.findings"),
    (read_baseline, {"kind": FINDINGS_KIND, "version": 99, "findings": []}, "version"),
    (read_baseline, {"no": "findings"}, "findings"),
    (read_baseline, "[1, 2", "JSON"),
    (read_baseline, "[]", "object"),
    (read_metrics_baseline, {"kind": FINDINGS_KIND, "version": 2, "findings": []}, "kind"),
    (read_metrics_baseline, {"version": 1, "findings": []}, "kind"),
    (read_metrics_baseline, {"kind": PERF_KIND, "version": 2, "metrics": {"gpu_time": {"runs": ["fast"]}}}, ".runs[0]"),
    (read_metrics_baseline, {"kind": PERF_KIND, "version": 2, "metrics": {"gpu_time": {"runs": [1], "better": "up"}}}, "better"),
    (read_metrics_baseline, {"kind": PERF_KIND, "version": 2, "metrics": []}, "$.metrics"),
    (read_metrics_baseline, {"kind": "tracelint-metrics-baseline", "version": 1, "metrics": {}}, "version"),
])
def test_loaders_refuse_in_one_line_naming_file_and_field(tmp_path, loader, doc, field):
    p = _write(tmp_path, "bad.json", doc)
    with pytest.raises(ConfigError) as e:
        loader(p)
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg and field in msg


def test_cli_perf_baseline_given_as_findings_baseline_exit_2_one_line(tmp_path):
    perf = _write(tmp_path, "tracelint-perf-baseline.json", PERF_DOC)
    res = run_cli("lint", EXAMPLE, "--baseline", perf, "-q")
    assert res.returncode == 2, res.stdout + res.stderr
    err = res.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "performance baseline" in err and str(perf) in err


def test_cli_findings_baseline_given_to_gate_exit_2_one_line(tmp_path):
    fb = _write(tmp_path, "tracelint-baseline.json", {"kind": FINDINGS_KIND, "version": 2, "findings": []})
    res = run_cli("gate", EXAMPLE, "--baseline", fb)
    assert res.returncode == 2
    err = res.stderr.strip()
    assert len(err.splitlines()) == 1 and "findings baseline" in err and "Traceback" not in err

"""Every shared real trace: lint runs without error, every finding is well formed, and the JSON
and SARIF reports validate against their schemas; `info --json` has what scripts rely on."""
from __future__ import annotations

import json

import pytest
from jsonschema import Draft7Validator, Draft202012Validator
from typer.testing import CliRunner

from conftest import ALL_TRACES, REPO
from tracelint.api import lint
from tracelint.reporters.json_report import render_json, report_schema
from tracelint.reporters.markdown import render_markdown
from tracelint.reporters.sarif import render_sarif

SARIF_SCHEMA = json.loads((REPO / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
JSON_VALIDATOR = Draft202012Validator(report_schema())
SARIF_VALIDATOR = Draft7Validator(SARIF_SCHEMA)


@pytest.fixture(scope="module")
def cli_app():
    from tracelint.cli.app import _register, app
    _register()
    return app


@pytest.mark.parametrize("path", ALL_TRACES, ids=lambda p: p.name)
def test_lint_and_reports_on_real_trace(path):
    report = lint(path)
    doc = json.loads(render_json(report))
    errors = sorted(JSON_VALIDATOR.iter_errors(doc), key=str)
    assert not errors, errors[0].message
    for f in doc["findings"]:
        assert f["severity"] in ("error", "warning", "info") and f["impact_ns"] >= 0
        assert set(f["evidence"]) == {"system", "kernel", "microarch"}
        for layer in f["evidence"].values():
            assert layer["status"] in ("measured", "not_captured", "not_applicable", "estimated")
            if layer["status"] == "estimated":
                assert layer.get("formula"), f"{f['rule']}: an estimate without its formula"
            if layer["status"] == "not_captured":
                assert layer.get("capture_hint"), f"{f['rule']}: not captured without a hint"
    sarif = render_sarif(report)
    errors = sorted(SARIF_VALIDATOR.iter_errors(sarif), key=str)
    assert not errors, errors[0].message
    assert len(sarif["runs"][0]["results"]) == len(report.findings)
    assert len(render_markdown(report, max_chars=20_000)) <= 20_000


@pytest.mark.parametrize("path", ALL_TRACES, ids=lambda p: p.name)
def test_info_json(cli_app, path):
    res = CliRunner().invoke(cli_app, ["info", str(path), "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert {"format", "span_ns", "devices", "counts"} <= set(info)
    assert {"kernels", "copies", "memsets", "api_calls", "ranges"} <= set(info["counts"])
    assert all(isinstance(v, int) for v in info["counts"].values())
    assert info["span_ns"] > 0

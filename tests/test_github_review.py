"""The GitHub Action's script against a fake pull-request event, with no network: it must
write the code-scanning upload payload, one marked comment (escaped, within GitHub's limit,
linking the full report) and the request that posts it, and exit by the gate."""
from __future__ import annotations

import base64
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import REPO, SHARED
from tracelint.synth import TraceBuilder

HOSTILE = "<img src=x onerror=alert(1)>_@everyone_[click](http://evil)_`x`_gemm"


def _trace(path: Path) -> Path:
    """Launch gaps after a kernel with a hostile name: TL001 names that kernel."""
    b = TraceBuilder(device_name="NVIDIA H100 80GB HBM3", pid=1000)
    for step in range(4):
        with b.step(step):
            for _ in range(6):
                b.launch(HOSTILE, 20_000, gap_after_ns=400_000)
    b.write_kineto(path)
    return path


def _run(tmp_path: Path, traces: list, fail_on: str = "warning"):
    event = {"action": "synchronize", "number": 42,
             "pull_request": {"number": 42, "head": {"sha": "a" * 40, "ref": "feature"}},
             "repository": {"full_name": "acme/model"}}
    (tmp_path / "event.json").write_text(json.dumps(event))
    env = {"PATH": "/usr/bin:/bin", "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
           "GITHUB_REPOSITORY": "acme/model", "GITHUB_SERVER_URL": "https://github.com",
           "GITHUB_RUN_ID": "777", "GITHUB_API_URL": "https://api.github.com",
           "GITHUB_TOKEN": "unused-in-dry-run", "GITHUB_WORKSPACE": str(tmp_path),
           "TRACELINT_REVIEW_DRY_RUN": str(tmp_path / "dry"), "PYTHONDONTWRITEBYTECODE": "1"}
    res = subprocess.run([sys.executable, "-m", "tracelint.cli.github_review", *map(str, traces),
                          "--fail-on", fail_on, "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    return res, tmp_path / "dry"


def test_pull_request_dry_run(tmp_path):
    res, dry = _run(tmp_path, [_trace(tmp_path / "run.json")])
    assert res.returncode == 1, res.stderr[-2000:]            # TL001 is a warning
    body = (dry / "comment.md").read_text()
    assert body.startswith("<!-- tracelint-review -->") and "gate failed" in body
    assert "TL001" in body and len(body) <= 65536
    assert "[HTML](https://github.com/acme/model/actions/runs/777#artifacts)" in body
    # no raw HTML, no live mention, no live link from the hostile kernel name
    without_marker = body.replace("<!-- tracelint-review -->", "")
    tags = re.findall(r"<(/?[a-zA-Z][^>]*)>", without_marker)
    assert all(t.split()[0] in ("a", "details", "summary", "/details", "/summary", "/a")
               for t in tags), tags
    assert "onerror" not in " ".join(tags) and "@everyone" not in body
    assert not re.search(r"(?<!\\)\]\(http://evil", body)      # brackets escaped: no link
    req = json.loads((dry / "comment-request.json").read_text())
    assert req["method"] == "POST"
    assert req["url"] == "https://api.github.com/repos/acme/model/issues/42/comments"
    assert req["body"]["body"] == body
    upload = json.loads((dry / "sarif-upload.json").read_text())
    assert upload["commit_sha"] == "a" * 40 and upload["ref"] == "refs/pull/42/head"
    sarif = json.loads(gzip.decompress(base64.b64decode(upload["sarif"])))
    assert sarif == json.loads((tmp_path / "out" / "tracelint.sarif").read_text())
    assert sarif["version"] == "2.1.0" and len(sarif["runs"]) == 1
    assert any(r["ruleId"] == "TL001" for r in sarif["runs"][0]["results"])
    assert (tmp_path / "out" / "tracelint.html").stat().st_size > 1000


def test_gate_passes_when_fail_on_never(tmp_path):
    res, dry = _run(tmp_path, [_trace(tmp_path / "run.json")], fail_on="never")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "gate passed" in (dry / "comment.md").read_text()


def test_job_of_several_traces_is_one_sarif_run_with_ranks(tmp_path):
    ranks = sorted((SHARED / "traces" / "torch").glob("hta_sampled_rank*of128.json.gz"))
    if len(ranks) < 2:
        import pytest
        pytest.skip("shared traces not present")
    res, dry = _run(tmp_path, ranks, fail_on="never")
    assert res.returncode == 0, res.stderr[-2000:]
    sarif = json.loads((tmp_path / "out" / "tracelint.sarif").read_text())
    assert len(sarif["runs"]) == 1
    per_rank = [r for r in sarif["runs"][0]["results"]
                if r.get("locations") and "rank" in r["locations"][0].get("properties", {})]
    assert {r["locations"][0]["properties"]["rank"] for r in per_rank} == {0, 1}


def test_action_runs_the_script():
    """action.yml is a composite action whose lint step calls this script and whose last step
    exits with the script's code."""
    action = yaml.safe_load((REPO / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    runs = " ".join(s.get("run", "") for s in action["runs"]["steps"])
    assert "python -m tracelint.cli.github_review" in runs
    assert action["runs"]["steps"][-1]["run"].strip() == "exit ${{ steps.lint.outputs.exit-code }}"
    assert {"traces", "fail-on", "source-root"} <= set(action["inputs"])

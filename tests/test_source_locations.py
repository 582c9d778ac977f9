"""Source locations a reviewer can act on, in terminal, JSON and SARIF.

One small program is captured with `tracelint capture` (CPU torch): `.item()` inside a
function, `.item()` in module-level code, and `.item()` inside a library called from user
code. Expected lines are read from the program text by marker comments, never hard-coded.
Legacy Kineto "Call stack" traces are checked on a trace written here and on a real one.
"""
from __future__ import annotations

import gzip
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from conftest import SHARED, run_cli

torch = pytest.importorskip("torch")

PROGRAM = '''import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent / "site-packages"))
import fakelib  # noqa: E402


def log_loss(loss):
    doubled = loss * 2
    return doubled.item()  # CALL-IN-FUNCTION


def record(loss):
    return fakelib.fetch(loss)  # CALL-INTO-LIBRARY


w = torch.randn(32, 32, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.01)
for _ in range(8):
    loss = (w @ w).sum()
    loss.backward()
    opt.step()  # PROFILING-STARTS-HERE
    opt.zero_grad()
    log_loss(loss)
    record(loss)
    seen = loss.detach().item()  # MODULE-LEVEL
'''
LIBRARY = "def fetch(t):\n    return float(t.item())\n"


def line_of(marker: str) -> int:
    return next(i for i, ln in enumerate(PROGRAM.splitlines(), 1) if marker in ln)


def def_line(fn: str) -> int:
    return line_of(f"def {fn}(")


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    root = tmp_path_factory.mktemp("proj")
    (root / "prog.py").write_text(PROGRAM)
    (root / "site-packages" / "fakelib").mkdir(parents=True)
    (root / "site-packages" / "fakelib" / "__init__.py").write_text(LIBRARY)
    res = run_cli("capture", "-o", root / "out", "--format", "json", "--", sys.executable,
                  "prog.py", cwd=root)
    assert res.returncode in (0, 1), res.stderr[-2000:]
    report = json.loads(res.stdout[res.stdout.index("{"):])
    return root, report


def _tl010(findings: list[dict]) -> dict[str, dict]:
    """TL010 findings keyed by the function they are located in."""
    return {f["where"]["function"]: f["where"] for f in findings if f["rule"] == "TL010"}


def test_json_locations_are_the_calls(captured):
    _, report = captured
    sites = _tl010(report["findings"])
    assert set(sites) == {"log_loss", "record", "<module>"}, sites
    assert sites["log_loss"]["line"] == line_of("CALL-IN-FUNCTION")
    assert sites["log_loss"]["line_kind"] == "call" and sites["log_loss"]["callee"] == "item"
    # the first USER frame: the call into the library, not the library's own file
    assert sites["record"]["file"] == "prog.py"
    assert sites["record"]["line"] == line_of("CALL-INTO-LIBRARY")
    assert sites["record"]["callee"] == "fetch"
    # module-level code: the read-back's line, not the line running when profiling started
    assert sites["<module>"]["line"] == line_of("MODULE-LEVEL")
    assert sites["<module>"]["line"] != line_of("PROFILING-STARTS-HERE")
    assert all(w["file"] == "prog.py" and not w.get("library") for w in sites.values())


def test_terminal_says_file_line_and_function(captured):
    root, _ = captured
    res = run_cli("lint", root / "out" / "trace.json", "--select", "TL010", cwd=root)
    text = " ".join(res.stdout.split())
    assert f"at prog.py:{line_of('CALL-IN-FUNCTION')} in `log_loss()`" in text
    assert f"at prog.py:{line_of('CALL-INTO-LIBRARY')} in `record()`" in text
    assert f"at prog.py:{line_of('MODULE-LEVEL')} (module level)" in text
    assert "fakelib" not in text


def test_sarif_regions_resolve_in_the_repository(captured):
    root, _ = captured
    res = run_cli("lint", root / "out" / "trace.json", "--select", "TL010", "-f", "sarif",
                  "--source-root", root, cwd=root.parent)
    sarif = json.loads(res.stdout)
    got = {}
    for r in sarif["runs"][0]["results"]:
        phys = r["locations"][0]["physicalLocation"]
        art = phys["artifactLocation"]
        assert art["uri"] == "prog.py" and art["uriBaseId"] == "%SRCROOT%", art
        fn = r["locations"][0]["logicalLocations"][0]["name"]
        got[fn] = phys["region"]["startLine"]
        assert r["properties"]["line_kind"] == "call"
    assert got == {"log_loss": line_of("CALL-IN-FUNCTION"), "record": line_of("CALL-INTO-LIBRARY"),
                   "<module>": line_of("MODULE-LEVEL")}


def test_without_source_the_line_is_called_a_definition(captured, tmp_path):
    """Linted where the program's source cannot be read: the trace alone says which function
    and its first line; the report must call it that, and leave module-level code unpinned."""
    root, _ = captured
    trace = tmp_path / "trace.json"
    shutil.copy(root / "out" / "trace.json", trace)
    res = run_cli("lint", trace, "--select", "TL010", "-f", "json", cwd=tmp_path)
    sites = _tl010(json.loads(res.stdout)["findings"])
    assert sites["log_loss"]["line"] == def_line("log_loss")
    assert sites["log_loss"]["line_kind"] == "def"
    assert "line" not in sites["<module>"] or sites["<module>"]["line_kind"] == "start"
    res = run_cli("lint", trace, "--select", "TL010", cwd=tmp_path)
    text = " ".join(res.stdout.split())
    assert f"in `log_loss()`, defined at prog.py:{def_line('log_loss')}, calling `item`" in text
    assert f"prog.py:{line_of('PROFILING-STARTS-HERE')}" not in text.replace(
        "was running when profiling started", "")


# ----- legacy Kineto "Call stack" ---------------------------------------------------------------
def _legacy_trace(path: Path, stack: str) -> None:
    """A 2021-style trace: Operator events with args["Call stack"], one read-back per step."""
    ev, t = [], 1000
    for step in range(6):
        ev.append({"ph": "X", "cat": "Operator", "name": f"ProfilerStep#{step}", "pid": 7, "tid": 7,
                   "ts": t, "dur": 900, "args": {}})
        ev.append({"ph": "X", "cat": "Operator", "name": "aten::item", "pid": 7, "tid": 7,
                   "ts": t + 100, "dur": 50, "args": {"Call stack": stack}})
        t += 1000
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))


def test_legacy_call_stack_gives_the_executing_line(tmp_path):
    stack = ("/env/lib/python3.8/site-packages/torch/_tensor.py(401): item;"
             "train.py(57): log_metrics;train.py(88): <module>")
    _legacy_trace(tmp_path / "legacy.json", stack)
    res = run_cli("lint", tmp_path / "legacy.json", "--select", "TL010", "-f", "json", cwd=tmp_path)
    (f,) = json.loads(res.stdout)["findings"]
    w = f["where"]
    assert (w["file"], w["line"], w["function"], w["line_kind"]) == ("train.py", 57, "log_metrics", "call")
    res = run_cli("lint", tmp_path / "legacy.json", "--select", "TL010", "-f", "sarif", cwd=tmp_path)
    loc = json.loads(res.stdout)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "train.py" and loc["region"]["startLine"] == 57
    res = run_cli("lint", tmp_path / "legacy.json", "--select", "TL010", cwd=tmp_path)
    assert "at train.py:57 in `log_metrics()`" in " ".join(res.stdout.split())


LEGACY = SHARED / "traces" / "torch" / "kineto_tbplugin_resnet50_v100_2021-06.pt.trace.json.gz"


@pytest.mark.skipif(not LEGACY.exists(), reason="shared traces not present")
def test_real_legacy_trace_findings_point_at_recorded_user_frames(tmp_path):
    """Every located finding names a (file, line, function) that the trace's own Call stack
    strings contain, is a user frame (no site-packages), and says the line is the call."""
    frames = set()
    for e in json.loads(gzip.decompress(LEGACY.read_bytes()))["traceEvents"]:
        for part in (e.get("args") or {}).get("Call stack", "").split(";"):
            m = re.match(r"^(.*)\((\d+)\): (.*)$", part)
            if m:
                frames.add((m.group(1), int(m.group(2)), m.group(3)))
    res = run_cli("lint", LEGACY, "-f", "json", cwd=tmp_path)
    located = [f["where"] for f in json.loads(res.stdout)["findings"] if f["where"].get("line")]
    assert located
    for w in located:
        assert (w["file"], w["line"], w["function"]) in frames
        assert "site-packages" not in w["file"] and w["line_kind"] == "call"

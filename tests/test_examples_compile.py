"""examples/compile_recompile.py and its fixed twin compile_fixed.py, captured on the CPU.

torch.compile (Dynamo + Inductor, which compiles C++ with gcc here) runs the same on the CPU,
so a CPU trace shows everything TL037 reads: the compile ranges inside the recorded
iterations, their compile ids, and the Torch-Compiled Regions with the resume function's region
nested in each call. Expected figures come from the raw trace file (a regex over its text: the
anti-pattern's trace is ~150 MB of Python frames recorded during compilation) and from the
example's source (marker lines), never from tracelint's own tables.
"""
from __future__ import annotations

import json
import re
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import REPO, run_cli

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow   # each capture compiles with Inductor: ~1 min on a busy 2-core box

EXAMPLES = REPO / "examples"
GPU_RULES = {"TL001", "TL002", "TL003", "TL004", "TL005", "TL006", "TL007", "TL009", "TL038"}
#: One Kineto event, as torch.profiler writes it: name, pid, tid, ts, dur on consecutive lines.
EVENT = re.compile(r'"name": "((?:[^"\\]|\\.)*)",\s*"pid": (-?\d+),\s*"tid": (-?\d+),\s*'
                   r'"ts": ([\d.]+),\s*"dur": ([\d.]+)')


def _line_of(example: str, marker: str) -> int:
    src = (EXAMPLES / example).read_text().splitlines()
    return next(i for i, ln in enumerate(src, 1) if marker in ln)


def _ns(us: str) -> int:
    return int(Decimal(us) * 1000)


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    cache: dict[str, tuple[dict, list]] = {}

    def get(example: str):
        if example not in cache:
            out = tmp_path_factory.mktemp(Path(example).stem)
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("OMP_NUM_THREADS", "1")
                res = run_cli("capture", "-o", out, "--format", "json", "--",
                              sys.executable, EXAMPLES / example, timeout=900)
            assert res.returncode in (0, 1), res.stderr[-2000:]
            report = json.loads(res.stdout[res.stdout.index("{"):])
            manifest = json.loads((out / "capture-manifest.json").read_text())
            assert manifest["exit_code"] == 0 and manifest["trace_written"], manifest
            text = (out / "trace.json").read_text()
            events = [(m.group(1), _ns(m.group(4)), _ns(m.group(4)) + _ns(m.group(5))) for m in EVENT.finditer(text)]
            del text
            cache[example] = (report, events)
        return cache[example]
    return get


def _steps(events):
    return sorted((s, e) for n, s, e in events if n.startswith("ProfilerStep#"))


def _in(events, name_re, windows):
    rx = re.compile(name_re)
    return [(n, s, e) for n, s, e in events if rx.search(n) and any(a <= s < b for a, b in windows)]


def test_recompiles_and_graph_break_found_at_the_right_line(capture):
    report, events = capture("compile_recompile.py")
    steps = _steps(events)
    assert len(steps) == 3
    # raw: Dynamo compiles inside every recorded iteration; count them and their recompile ids
    compiles = _in(events, r"^dynamo$", steps)
    ids = [n.rsplit("=", 1)[1] for n, _, _ in _in(events, r"^dynamo_data: compile_id=", steps)]
    assert len(compiles) >= 3 and len(ids) == len(compiles)
    recompiles = sum(int(i.split("/")[1]) > 0 for i in ids)
    # raw: regions nested in another region (the code after the graph break)
    regions = _in(events, r"^Torch-Compiled Region: ", steps)
    nested = [r for r in regions if any(o is not r and o[1] <= r[1] and r[2] <= o[2] for o in regions)]
    break_line = _line_of("compile_recompile.py", "GRAPH-BREAK")
    resumes = {int(m.group(1)) for n, _, _ in events
               for m in [re.search(r"compile_recompile\.py\(\d+\): torch_dynamo_resume_in_features_at_(\d+)$", n)] if m}
    assert resumes == {break_line}

    found = {("graph-break" if "graph_breaks" in f["metrics"] else "recompile"): f
             for f in report["findings"] if f["rule"] == "TL037"}
    assert len(found) == len([f for f in report["findings"] if f["rule"] == "TL037"])
    assert set(found) == {"recompile", "graph-break"}, report["findings"]
    rec, brk = found["recompile"], found["graph-break"]
    assert rec["metrics"]["compilations"]["value"] == len(compiles)
    assert rec["metrics"]["recompilations"]["value"] == recompiles >= 3
    assert rec["metrics"]["compile_in_loop_ns"]["value"] == sum(e - s for _, s, e in compiles)
    # the frame compiled again in every iteration is the code after the break (its value guard)
    assert rec["where"]["file"].endswith("compile_recompile.py") and rec["where"]["line"] == break_line
    assert brk["metrics"]["graph_breaks"]["value"] == len(nested) == 3
    assert brk["where"]["file"].endswith("compile_recompile.py")
    assert (brk["where"]["line"], brk["where"]["function"]) == (break_line, "features")
    assert not [f for f in report["findings"] if f["rule"] in GPU_RULES]


def test_fixed_twin_compiles_once_before_the_loop(capture):
    report, events = capture("compile_fixed.py")
    steps = _steps(events)
    assert len(steps) == 3
    assert not _in(events, r"^dynamo$", steps)                       # raw: no compilation in the loop
    regions = _in(events, r"^Torch-Compiled Region: ", steps)
    assert len(regions) == 3                                         # one region per call, none nested
    assert not [f for f in report["findings"] if f["rule"] == "TL037"], report["findings"]
    assert not [f for f in report["findings"] if f["rule"] in GPU_RULES]

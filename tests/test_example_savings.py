"""Issue #13 on the examples/ pairs captured on the CPU: a finding either projects a saving
that matches the real difference between the anti-pattern and its fixed twin (median
ProfilerStep span, within +-20 %), or says that no saving can be established from the trace.

Only item_in_loop.py / item_fixed.py has a rule that fires on a CPU capture (TL010); the other
pairs' rules need GPU activity (tests/test_examples.py). TL010's fix removes a wait on the
device, and a CPU trace has no device to wait on and no runtime calls for the what-if replay:
the finding must carry no number and say so. The figures of every pair are in docs/whatif.md
(scripts/example_twin_savings.py).
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_cli

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow   # 2 captures, ~10-20 s each

EXAMPLES = REPO / "examples"
STEPS = 6          # iterations recorded (the examples run 8: 1 skipped, 1 warm-up)
TOLERANCE = 0.20   # issue #13: projected saving within +-20 % of the real difference


def _capture(tmp_path: Path, example: str) -> tuple[dict, list[dict]]:
    out = tmp_path / Path(example).stem
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")   # as tests/test_examples.py: no OpenMP spin on 2 cores
        res = run_cli("capture", "-o", out, "--steps", STEPS, "--format", "json", "--",
                      sys.executable, EXAMPLES / example)
    assert res.returncode in (0, 1), res.stderr[-2000:]
    report = json.loads(res.stdout[res.stdout.index("{"):])
    doc = json.loads((out / "trace.json").read_text())
    return report, doc["traceEvents"] if isinstance(doc, dict) else doc


def _steps(events) -> list[dict]:
    return sorted((e for e in events if e.get("ph") == "X"
                   and str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])


def test_readback_in_loop_pair_projects_no_number_on_the_cpu(tmp_path):
    report, events = _capture(tmp_path, "item_in_loop.py")
    twin_report, twin_events = _capture(tmp_path, "item_fixed.py")
    steps, twin_steps = _steps(events), _steps(twin_events)
    assert len(steps) == STEPS and len(twin_steps) == STEPS
    assert not any(e.get("cat") == "kernel" for e in events)           # a CPU-only trace

    tl010 = [f for f in report["findings"] if f["rule"] == "TL010"]
    assert len(tl010) == 1 and not [f for f in twin_report["findings"] if f["rule"] == "TL010"]
    f = tl010[0]
    # what the finding does measure, recomputed from the raw trace: the read-backs in the steps
    items = [e for e in events if e.get("ph") == "X" and e.get("name") == "aten::item"
             and any(s["ts"] <= e["ts"] < s["ts"] + s["dur"] for s in steps)]
    assert f["occurrences"] == len(items) == STEPS
    assert f["impact_ns"] == pytest.approx(sum(e["dur"] for e in items) * 1000, abs=STEPS)
    # no number, and why: nothing in a CPU trace waits on a device
    assert f["saving_ns"] is None and f["saving_share"] is None and not f["saving_iterations"]
    assert "no saving can be established" in f["saving_note"] and "GPU" in f["saving_note"]
    assert report.get("saving_all_ns") is None

    # every other finding of either capture: a checked number or a reason
    real = (statistics.median(s["dur"] for s in steps)
            - statistics.median(s["dur"] for s in twin_steps)) * 1000     # ns per step
    for g in report["findings"] + twin_report["findings"]:
        if g["saving_ns"] is None:
            assert g["saving_note"], g["rule"]
        else:
            assert abs(g["saving_ns"] / STEPS - real) <= TOLERANCE * abs(real), (g["rule"], real)

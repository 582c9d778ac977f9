"""Capture end to end on the CPU: the planted `.item()` is found at its Python line from the
recorded stacks, and the fixed twin has no finding of that kind."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_cli

torch = pytest.importorskip("torch")

EXAMPLES = REPO / "examples"


def _line_of(path: Path, marker: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if marker in ln)


def _capture(tmp_path, example: str):
    out = tmp_path / Path(example).stem
    res = run_cli("capture", "-o", out, "--format", "json", "--", sys.executable, EXAMPLES / example)
    assert res.returncode in (0, 1), res.stderr[-2000:]
    manifest = json.loads((out / "capture-manifest.json").read_text())
    return json.loads(res.stdout[res.stdout.index("{"):]), manifest


def test_item_in_loop_found_at_its_line(tmp_path):
    report, manifest = _capture(tmp_path, "item_in_loop.py")
    assert manifest["steps_seen"] == 8 and manifest["trace_written"]
    line = _line_of(EXAMPLES / "item_in_loop.py", "losses.append(loss.item())")   # the call
    hits = [f for f in report["findings"] if f["rule"] in ("TL005", "TL010")]
    assert hits, [f["rule"] for f in report["findings"]]
    assert any(f["where"].get("line") == line and f["where"]["file"].endswith("item_in_loop.py")
               for f in hits), [f["where"] for f in hits]


def test_fixed_twin_is_clean(tmp_path):
    report, _ = _capture(tmp_path, "item_fixed.py")
    assert not [f for f in report["findings"] if f["rule"] in ("TL005", "TL010")]


def test_profile_api_in_process(tmp_path):
    import tracelint
    x = torch.randn(64, 64)
    with tracelint.profile(out=tmp_path / "t.json") as p:
        for _ in range(3):
            (x @ x).sum().item()
    assert p.trace_path.exists()
    report = p.report()
    assert report.timeline.counts()["ranges"] > 0

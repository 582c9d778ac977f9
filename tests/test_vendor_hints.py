"""Capture hints and warm-up advice name the tools of the GPU vendor the trace was recorded on
(engine/capture_hints): an AMD trace is not told to run nsys or ncu. Real traces."""
from __future__ import annotations

from pathlib import Path

import pytest

import tracelint
from conftest import TRACES, trace_or_skip
from tracelint.api import lint
from tracelint.engine.capture_hints import AMD_HINTS, CAPTURE_HINTS, capture_hint
from tracelint.engine.config import Config
from tracelint.timeline import classify

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "torch"
MI300 = REAL / "tracelens_mi300x_resnet_actckpt_rank0of8.json.gz"
MI250 = REAL / "hta_mi250_minitoy_rocm62.json.gz"
NVIDIA_TOOLS = ("nsys", "ncu", "Nsight", "Turing", "CUPTI")


def _not_captured_hints(report) -> list[str]:
    return [ev.capture_hint for f in report.findings for ev in f.evidence.values()
            if ev.status == "not_captured"]


@pytest.mark.parametrize("path, vendor", [
    (MI300, "amd"), (MI250, "amd"),
    (TRACES / "nsys" / "nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite", "nvidia"),
])
def test_the_trace_says_its_vendor(path, vendor):
    assert classify.trace_vendor(tracelint.load(trace_or_skip(path))) == vendor


def test_amd_findings_never_send_the_user_to_nvidia_tools():
    report = lint(MI300, Config())
    hints = _not_captured_hints(report)
    assert hints, "the MI300X trace has findings without hardware counters"
    assert not [h for h in hints if any(t in h for t in NVIDIA_TOOLS)], hints
    assert any("rocprofv3" in h for h in hints)
    texts = [f.fix or "" for f in report.findings] + [
        ev.summary for f in report.findings for ev in f.evidence.values()]
    assert not [t for t in texts if "cuDNN/cuBLAS" in t or "nsys --capture-range" in t]


def test_nvidia_findings_keep_nsight_hints():
    report = lint(trace_or_skip(TRACES / "torch" / "hta_alexnet_a100.json.gz"), Config())
    hints = _not_captured_hints(report)
    assert hints and any("ncu" in h or "nsys" in h for h in hints)
    assert not any("rocprofv3" in h for h in hints)


def test_every_source_has_an_amd_hint_with_the_same_fields():
    assert set(AMD_HINTS) == set(CAPTURE_HINTS)
    assert "-k regex:k1" in capture_hint("gpu_metrics", "nvidia", kernel="k1")
    assert "'k1'" in capture_hint("gpu_metrics", "amd", kernel="k1")
    assert capture_hint("cuda") == CAPTURE_HINTS["cuda"]        # unknown vendor: NVIDIA's

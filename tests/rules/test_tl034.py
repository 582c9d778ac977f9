"""TL034 conv-bias-before-batchnorm: expected values come from the raw trace (json.load of the
Kineto events, SQL over the nsys export) or from the scenario's own constants, never from the
rule's output."""
from __future__ import annotations

import gzip
import json
import sqlite3
import sys
from pathlib import Path

import pytest

from conftest import REPO, TRACES, run_cli, trace_or_skip

from tracelint.api import lint
from tracelint.engine.config import Config
from tracelint.synth.scenarios import tl034
from tracelint.synth.scenarios import write as write_scenario
from tracelint.synth.scenarios import Scenario

ONLY = Config(select=["TL034"])


def _events(path: Path) -> list[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def _scenario(name: str) -> Scenario:
    return next(s for s in tl034.SCENARIOS if s.name == name)


def _biased_convs(events) -> list[dict]:
    return [e for e in events if e.get("ph") == "X" and e.get("name") == "aten::conv2d"
            and len(e.get("args", {}).get("Input Dims", [])) > 2 and e["args"]["Input Dims"][2]]


def test_synthetic_kineto_counts_and_measured_bias_kernels(tmp_path):
    path = write_scenario(_scenario("positive-conv-bias-then-batchnorm"), "kineto", tmp_path)
    ev = _events(path)
    convs = _biased_convs(ev)
    bias_kernels = [e for e in ev if e.get("cat") == "kernel" and e["name"] == tl034.BIAS_ADD]
    steps = [e for e in ev if e.get("ph") == "X" and e.get("cat") != "gpu_user_annotation"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
    (f,) = lint(path, ONLY).findings
    assert f.occurrences == len(convs) == 12
    assert f.metrics["per_iteration"].value == len(convs) / len(steps)
    # bias elements: one [C_out] bias per distinct layer
    assert f.metrics["bias_elements"].value == sum(c_out for _, c_out, _ in tl034.BLOCKS)
    kernel_ns = round(sum(e["dur"] for e in bias_kernels) * 1000)
    k = f.evidence[next(layer for layer in f.evidence if layer.value == "kernel")]
    assert k.status == "measured"
    assert k.facts["kernels"].value == len(bias_kernels) == 12
    assert abs(k.facts["gpu_time_ns"].value - kernel_ns) <= len(bias_kernels)   # µs rounding
    assert f.where.file == "train.py" and f.where.line == 41
    # the fix removes those kernels and their launches: a saving, never more than they cost
    launches = {e["args"]["correlation"] for e in bias_kernels}
    launch_ns = round(sum(e["dur"] for e in ev if e.get("cat") == "cuda_runtime"
                          and e.get("args", {}).get("correlation") in launches) * 1000)
    assert f.saving_ns is not None and 0 < f.saving_ns <= kernel_ns + launch_ns


def test_synthetic_nsys_reads_emit_nvtx_sizes(tmp_path):
    path = write_scenario(_scenario("positive-conv-bias-then-batchnorm"), "nsys", tmp_path)
    with sqlite3.connect(path) as con:
        texts = [t for (t,) in con.execute("SELECT text FROM NVTX_EVENTS WHERE text LIKE 'aten::conv2d,%'")]
    with_bias = [t for t in texts if json.loads(t.split("sizes = ", 1)[1])[2]]
    (f,) = lint(path, ONLY).findings
    assert f.occurrences == len(with_bias) == 12


def test_without_shapes_the_rule_is_skipped_with_the_pair_count(tmp_path):
    path = write_scenario(_scenario("near-miss-shapes-not-recorded"), "kineto", tmp_path)
    ev = _events(path)
    assert not any("Input Dims" in e.get("args", {}) for e in ev)
    n_conv = sum(1 for e in ev if e.get("name") == "aten::conv2d")
    report = lint(path, ONLY)
    assert not report.findings
    assert report.skipped["TL034"].startswith(f"{n_conv} convolution -> batch norm pair(s) seen")
    assert "record_shapes=True" in report.skipped["TL034"]


@pytest.mark.parametrize("name", ["kineto_tbplugin_resnet50_v100_2021-06.pt.trace.json.gz",
                                  "tracelens_mi300x_resnet_actckpt_rank0of8.json.gz"])
def test_real_resnets_use_bias_false_and_stay_silent(name):
    path = trace_or_skip(TRACES / "torch" / name)
    convs = [e for e in _events(path) if e.get("ph") == "X" and e.get("name") == "aten::conv2d"]
    assert convs and all("Input Dims" in e["args"] and e["args"]["Input Dims"][2] == [] for e in convs)
    report = lint(path, ONLY)
    assert not report.findings and "TL034" not in report.skipped


def test_real_resnet_without_shapes_is_skipped_not_guessed():
    path = trace_or_skip(TRACES / "torch" / "param_resnet_rtx2080ti.json.gz")
    ev = _events(path)
    convs = [e for e in ev if e.get("ph") == "X" and e.get("name") == "aten::conv2d"]
    assert not any("Input Dims" in e.get("args", {}) for e in convs)
    report = lint(path, ONLY)
    assert not report.findings
    assert report.skipped["TL034"].startswith(f"{len(convs)} convolution -> batch norm pair(s)")


# ----- the CPU example pair: examples/conv_bias_bn.py and its fixed twin -------------------------
EXAMPLES = REPO / "examples"


def _capture(tmp_path: Path, example: str, monkeypatch) -> tuple[dict, list[dict]]:
    pytest.importorskip("torch")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / Path(example).stem
    res = run_cli("capture", "-o", out, "--format", "json", "--", sys.executable, EXAMPLES / example)
    assert res.returncode in (0, 1), res.stderr[-2000:]
    report = json.loads(res.stdout[res.stdout.index("{"):])
    return report, _events(out / "trace.json")


def _line_of(example: str, marker: str) -> int:
    return next(i for i, ln in enumerate((EXAMPLES / example).read_text().splitlines(), 1) if marker in ln)


@pytest.mark.slow
def test_cpu_example_fires_at_the_forward_line_and_twin_is_silent(tmp_path, monkeypatch):
    report, ev = _capture(tmp_path, "conv_bias_bn.py", monkeypatch)
    steps = [e for e in ev if e.get("ph") == "X" and e.get("cat") != "gpu_user_annotation"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
    in_steps = [c for c in _biased_convs(ev)
                if any(s["ts"] <= c["ts"] < s["ts"] + s["dur"] for s in steps)]
    (f,) = [f for f in report["findings"] if f["rule"] == "TL034"]
    assert f["occurrences"] == len(in_steps) == 4 * len(steps)    # 4 ConvBlocks per forward
    assert f["where"]["file"].endswith("conv_bias_bn.py")
    assert f["where"]["line"] == _line_of("conv_bias_bn.py", "def forward")
    assert f["evidence"]["kernel"]["status"] == "estimated"        # no GPU: bytes, not time
    assert f.get("saving_ns") is None and "no saving can be established" in f["saving_note"]

    report, ev = _capture(tmp_path, "conv_bias_bn_fixed.py", monkeypatch)
    assert not _biased_convs(ev)
    assert any(e.get("name") == "aten::batch_norm" for e in ev)
    assert not [f for f in report["findings"] if f["rule"] == "TL034"]
    assert "TL034" not in report["skipped_rules"]

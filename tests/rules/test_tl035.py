"""TL035 data-parallel: expected values from the raw trace (json.load, SQL), never from the
rule's output; and a real CPU run showing why a CPU capture cannot carry the pattern."""
from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest

from tracelint.api import lint
from tracelint.engine.config import Config
from tracelint.synth.scenarios import tl035
from tracelint.synth.scenarios import write as write_scenario

ONLY = Config(select=["TL035"])
#: DataParallel's autograd Functions as PyTorch records them (class names), outermost only
DP_OUTER = {"Scatter", "Broadcast", "Gather", "autograd::engine::evaluate_function: BroadcastBackward"}


def _events(path: Path) -> list[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def _scenario(name: str):
    return next(s for s in tl035.SCENARIOS if s.name == name)


def test_kineto_positive_against_raw_events(tmp_path):
    path = write_scenario(_scenario("positive-two-gpus"), "kineto", tmp_path)
    ev = _events(path)
    dp = [e for e in ev if e.get("cat") == "cpu_op" and e["name"] in DP_OUTER]
    host_ns = round(sum(e["dur"] for e in dp) * 1000)
    gathers = [e for e in dp if e["name"] == "Gather"]
    steps = [e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    gpus = {e["pid"] for e in ev if e.get("cat") in ("kernel", "gpu_memcpy")}
    # copies whose launching call starts inside one of the DataParallel ops
    calls = {e["args"]["correlation"] for e in ev if e.get("cat") == "cuda_runtime"
             and any(d["ts"] <= e["ts"] < d["ts"] + d["dur"] for d in dp)}
    copies = [e for e in ev if e.get("cat") == "gpu_memcpy" and e["args"]["correlation"] in calls]

    (f,) = lint(path, ONLY).findings
    assert f.occurrences == len(gathers) == len(steps) == 4
    assert f.metrics["gpus"].value == len(gpus) == 2
    assert abs(f.metrics["host_time_ns"].value - host_ns) <= len(dp)        # µs rounding
    kernel = next(e for layer, e in f.evidence.items() if layer.value == "kernel")
    assert kernel.facts["copies"].value == len(copies)
    assert kernel.facts["bytes"].value == sum(e["args"]["bytes"] for e in copies)
    assert (f.where.file, f.where.line) == ("train.py", 52)
    assert f.saving_ns is None and "no saving can be projected" in f.saving_note


def test_nsys_positive_reads_emit_nvtx_ranges(tmp_path):
    path = write_scenario(_scenario("positive-two-gpus"), "nsys", tmp_path)
    with sqlite3.connect(path) as con:
        (gathers,) = con.execute("SELECT count(*) FROM NVTX_EVENTS WHERE text LIKE 'Gather,%'").fetchone()
        (gpus,) = con.execute("SELECT count(DISTINCT deviceId) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    (f,) = lint(path, ONLY).findings
    assert f.occurrences == gathers == 4 and f.metrics["gpus"].value == gpus == 2


def test_one_gpu_data_parallel_only_scatters(tmp_path):
    path = write_scenario(_scenario("near-miss-one-gpu"), "kineto", tmp_path)
    names = {e["name"] for e in _events(path) if e.get("cat") == "cpu_op"}
    assert "Scatter" in names and not names & {"Broadcast", "Gather"}
    assert not lint(path, ONLY).findings


@pytest.mark.slow
def test_cpu_data_parallel_is_a_pass_through(tmp_path):
    """On a machine without CUDA, DataParallel has no device ids and calls the module directly:
    the trace shows its forward frame and none of the Functions, so the rule cannot fire on a CPU
    capture (why examples/ has no DataParallel pair)."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("checks the CPU-only behaviour")
    model = torch.nn.DataParallel(torch.nn.Linear(8, 4))
    assert model.device_ids == []
    x = torch.randn(16, 8)
    with torch.profiler.profile(with_stack=True) as prof:
        for _ in range(3):
            model(x).sum().backward()
    out = tmp_path / "dp_cpu.json"
    prof.export_chrome_trace(str(out))
    ev = _events(out)
    assert any("torch/nn/parallel/data_parallel.py" in e["name"] for e in ev if e.get("cat") == "python_function")
    assert not {e["name"] for e in ev if e.get("cat") == "cpu_op"} & {"Scatter", "Broadcast", "Gather"}
    assert not lint(out, ONLY).findings

"""Real captures from an NVIDIA H200 (fixtures/captures/h200, recorded by this project): a
PyTorch training step before and after review, and a JAX step jitted (XLA runs it as a CUDA
graph) and dispatched op by op. Expected facts are read from the raw files and the programs."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

import tracelint

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "captures" / "h200"
TORCH_PROGRAM = HERE / "torch_train_step.py"


def _raw(name: str) -> list[dict]:
    with gzip.open(HERE / name) as f:
        return [e for e in json.load(f)["traceEvents"] if isinstance(e, dict)]


def _rules(report) -> set[str]:
    return {f.rule for f in report.findings}


def test_the_torch_step_before_review_shows_its_planted_causes_where_they_are():
    report = tracelint.lint(HERE / "torch_h200_train_step_anti.json.gz")
    assert {"TL030", "TL011"} <= _rules(report)      # per-parameter AdamW, FP32 GEMMs
    step_line = 1 + next(i for i, text in enumerate(TORCH_PROGRAM.read_text().splitlines())
                         if text.strip() == "opt.step()")
    per_param = next(f for f in report.findings if f.rule == "TL030")
    assert per_param.where.file.endswith("train_step.py") and per_param.where.line == step_line
    gemm = next(f for f in report.findings if f.rule == "TL011")
    assert "H200" in gemm.message


def test_the_reviewed_torch_step_drops_those_causes_and_runs_shorter():
    anti = tracelint.load(HERE / "torch_h200_train_step_anti.json.gz")
    fixed = tracelint.load(HERE / "torch_h200_train_step_fixed.json.gz")
    assert not {"TL030", "TL011"} & _rules(tracelint.lint(fixed))
    for tl in (anti, fixed):
        assert tl.meta.devices[0].name == "NVIDIA H200"
        assert tl.correlation_resolved_fraction() == 1.0
    kernel_ns = [int((tl.kernels["end"] - tl.kernels["start"]).sum()) for tl in (anti, fixed)]
    assert kernel_ns[1] < kernel_ns[0]
    assert len(fixed.kernels) < len(anti.kernels)     # the fused optimizer: fewer launches


def test_a_jitted_jax_step_is_a_cuda_graph_linked_to_its_launch():
    raw = _raw("jax_h200_step_jit.trace.json.gz")
    graph_launches = [e for e in raw if str(e.get("name", "")).startswith("cuGraphLaunch (")]
    in_graph = {e["args"]["correlation_id"] for e in raw
                if e.get("pid") == 1 and (e.get("args") or {}).get("cuda_graph_id")}
    assert graph_launches and in_graph == {e["args"]["correlation_id"] for e in graph_launches}
    tl = tracelint.load(HERE / "jax_h200_step_jit.trace.json.gz")
    assert tl.kernels["graph_launched"].all()
    assert (tl.api_calls["name"].astype(str) == "cuGraphLaunch").sum() == len(graph_launches)
    assert tl.correlation_resolved_fraction() == 1.0
    report = tracelint.lint(tl)
    assert "TL002" not in _rules(report)      # a graph's kernels pay no launch each
    start = next(f for f in report.findings if f.rule == "TL013")
    assert "JAX dispatches asynchronously" in start.fix and "CUDA graph" not in start.fix


def test_jax_op_by_op_launches_link_and_the_storm_is_found():
    raw = _raw("jax_h200_step_eager.trace.json.gz")
    host_launches = [e for e in raw if e.get("pid") != 1 and "device_id" in (e.get("args") or {})
                     and "correlation_id" in e["args"]]
    tl = tracelint.load(HERE / "jax_h200_step_eager.trace.json.gz")
    assert not tl.kernels["graph_launched"].any()
    assert len(tl.api_calls) >= len(host_launches) > len(tl.kernels)
    assert tl.correlation_resolved_fraction() == 1.0
    kinds = dict(zip(tl.ranges["name"].astype(str), tl.ranges["kind"].astype(str)))
    assert kinds["PjitFunction(multiply)"] == "op" and kinds["train"] == "step"
    steps = {e["args"]["step_num"] for e in raw if (e.get("args") or {}).get("step_num")}
    assert int((tl.ranges["kind"] == "step").sum()) == len(steps)
    report = tracelint.lint(tl)
    storm = next(f for f in report.findings if f.rule == "TL002")
    assert "100% of kernels" in storm.message
    named = [f for f in report.findings if f.rule == "TL008" and f.key]
    runtime = tl.ranges[tl.ranges["kind"].astype(str) == "op"]["name"].astype(str)
    assert not [f for f in named if f.key in set(runtime)]     # no tail finding on XLA's records
    assert np.isin(["op", "step"], tl.ranges["kind"].astype(str).unique()).all()


def test_a_graph_captured_once_is_replayed_not_re_recorded():
    """The recorded steps hold the warm-up, the one capture and its instantiation (in the next
    step), then replays: TL038 must not call that re-recording."""
    raw = _raw("torch_h200_train_step_graphed.json.gz")
    names = [str(e.get("name", "")) for e in raw if e.get("cat") == "cuda_runtime"]
    assert names.count("cudaStreamBeginCapture") == 1 and names.count("cudaGraphLaunch") >= 1
    tl = tracelint.load(HERE / "torch_h200_train_step_graphed.json.gz")
    launched = tl.api_calls["name"].astype(str).to_numpy() == "cudaGraphLaunch"
    replayed = np.isin(tl.kernels["correlation"], tl.api_calls["correlation"][launched])
    assert replayed.any() and (tl.kernels["graph_launched"].to_numpy() == replayed).all()
    report = tracelint.lint(tl)
    assert not [f for f in report.findings if f.rule == "TL038" and f.key == "graph-rerecord"]


def test_the_memory_timeline_of_a_real_capture():
    raw = [e for e in _raw("torch_h200_train_step_anti_memory.json.gz") if e.get("name") == "[memory]"]
    tl = tracelint.load(HERE / "torch_h200_train_step_anti_memory.json.gz")
    assert len(tl.memory) == len(raw) > 0
    assert int(tl.memory["total_allocated"].max()) == max(e["args"]["Total Allocated"] for e in raw)
    assert tracelint.lint(tl).sections["memory"]()["events"] == len(raw)

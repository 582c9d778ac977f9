"""Kineto traces of other PyTorch backends: an Intel GPU's (XPU) runtime calls are recorded
under xpu_runtime, as Unified Runtime calls (urEnqueueKernelLaunch, urQueueFinish, ...). They
become API calls with launch, sync and copy roles, so kernels link to their launches, gaps get
a measured cause, and hints name Intel's tools. The trace is written here in the layout of
Kineto's XPU plugin tests (kineto/libkineto/test/xpupti: categories xpu_runtime, kernel,
gpu_memcpy; args correlation and External id)."""
from __future__ import annotations

import json

import pytest

import tracelint
from tracelint.api import lint
from tracelint.engine.config import Config
from tracelint.engine.finding import Layer
from tracelint.timeline import classify

GPU = "Intel(R) Data Center GPU Max 1550"


def _xpu_trace(path, steps: int = 6, host_gap_us: int = 400):
    """A training loop on one Intel GPU: per step two kernel launches and a blocking
    urQueueFinish, with host work between steps that leaves the GPU idle."""
    ev, corr, ts = [], 0, 1000
    for step in range(steps):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1,
                   "tid": 1, "ts": ts, "dur": host_gap_us + 300, "args": {}})
        for k in range(2):
            corr += 1
            ev.append({"ph": "X", "cat": "xpu_runtime", "name": "urEnqueueKernelLaunch", "pid": 1,
                       "tid": 1, "ts": ts + 10 + 30 * k, "dur": 8, "args": {"correlation": corr,
                                                                            "External id": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": f"gemm_kernel_{k}", "pid": 0, "tid": 3,
                       "ts": ts + 25 + 60 * k, "dur": 55, "args": {"correlation": corr, "device": 0,
                                                                   "queue": 3}})
        ev.append({"ph": "X", "cat": "xpu_runtime", "name": "urQueueFinish", "pid": 1, "tid": 1,
                   "ts": ts + 80, "dur": 70, "args": {"correlation": corr + 1000}})
        ts += host_gap_us + 300
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": GPU}], "traceEvents": ev}
    path.write_text(json.dumps(doc))
    return path


def test_xpu_runtime_calls_become_api_calls_with_roles(tmp_path):
    tl = tracelint.load(_xpu_trace(tmp_path / "xpu.json"))
    api = tl.api_calls
    assert len(api) == 6 * 3
    roles = dict(zip(api["name"].astype(str), tl.api_role.astype(str)))
    assert roles == {"urEnqueueKernelLaunch": "launch", "urQueueFinish": "sync"}
    launch = tl.launch_index("kernels")
    assert (launch >= 0).all()                          # every kernel links to its launch
    assert set(api["name"].astype(str).to_numpy()[launch]) == {"urEnqueueKernelLaunch"}
    assert classify.trace_vendor(tl) == "intel"


def test_gaps_on_an_intel_gpu_have_a_measured_cause_and_intel_hints(tmp_path):
    report = lint(_xpu_trace(tmp_path / "xpu.json"), Config(select=["TL001"]))
    (f,) = [f for f in report.findings if "warm-up" not in f.message]
    assert "no launch call in the trace" not in f.message
    assert f.evidence[Layer.SYSTEM].facts["unlinked_gaps"].value == 0
    hints = [ev.capture_hint for ev in f.evidence.values() if ev.status == "not_captured"]
    assert hints and all("vtune" in h and "nsys" not in h and "ncu" not in h for h in hints)


@pytest.mark.parametrize("name, role", [
    ("urEnqueueUSMMemcpy", "copy"), ("urEnqueueMemBufferRead", "copy"),
    ("urEnqueueUSMFill", "memset"), ("urUSMDeviceAlloc", "alloc"), ("urUSMFree", "alloc"),
    ("zeCommandListAppendLaunchKernel", "launch"), ("zeEventHostSynchronize", "sync"),
    ("urEventWait", "sync"), ("cudaLaunchKernel", "launch"),
])
def test_unified_runtime_and_level_zero_roles(name, role):
    assert classify.api_role(name) == role


def test_an_intel_trace_is_not_told_to_use_nvidia_tools(tmp_path):
    report = lint(_xpu_trace(tmp_path / "xpu.json"), Config())
    texts = [f.fix or "" for f in report.findings] + [
        ev.summary + (ev.capture_hint or "") for f in report.findings for ev in f.evidence.values()]
    assert report.findings
    assert not [t for t in texts if "nsys" in t or "ncu " in t or "cuDNN/cuBLAS" in t], texts

"""TL036 cudnn-autotune-in-steps: expected values from the raw Kineto events (json.load), never
from the rule's output."""
from __future__ import annotations

import bisect
import gzip
import json
from pathlib import Path

import pytest

from conftest import TRACES, trace_or_skip

from tracelint.api import lint
from tracelint.engine.config import Config
from tracelint.synth.scenarios import tl036
from tracelint.synth.scenarios import write as write_scenario

ONLY = Config(select=["TL036"])
BLOCKING = {"cudaDeviceSynchronize", "cudaEventSynchronize", "cudaStreamSynchronize"}


def _events(path: Path) -> list[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def _conv_calls(ev, names=("aten::conv2d",)):
    """(conv op event, runtime calls inside it on its thread, kernels they launched)."""
    runtime = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver", "Runtime")]
    kernels = {e["args"]["correlation"]: e for e in ev if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel")}
    runtime.sort(key=lambda c: c["ts"])
    starts = [c["ts"] for c in runtime]
    out = []
    for op in (e for e in ev if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "Operator") and e["name"] in names):
        lo, hi = bisect.bisect_left(starts, op["ts"]), bisect.bisect_left(starts, op["ts"] + op["dur"])
        inside = [c for c in runtime[lo:hi] if c["tid"] == op["tid"]]
        ks = [kernels[c["args"]["correlation"]] for c in inside if c.get("args", {}).get("correlation") in kernels]
        out.append((op, inside, ks))
    return out


def _write(name: str, tmp_path) -> Path:
    return write_scenario(next(s for s in tl036.SCENARIOS if s.name == name), "kineto", tmp_path)


def test_positive_against_raw_events(tmp_path):
    path = _write("positive-shape-changes-every-step", tmp_path)
    ev = _events(path)
    steps = [e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    tuning = [(op, calls, ks) for op, calls, ks in _conv_calls(ev)
              if sum(c["name"] in BLOCKING for c in calls) >= 2]
    in_steps = {s["name"] for s in steps for op, _, _ in tuning if s["ts"] <= op["ts"] < s["ts"] + s["dur"]}
    host_ns = round(sum(op["dur"] for op, _, _ in tuning) * 1000)
    n_kernels = sum(len(ks) for _, _, ks in tuning)
    (f,) = lint(path, ONLY).findings
    assert f.occurrences == len(tuning) == 3 * len(steps)
    assert f.metrics["later_iterations"].value == len(in_steps) - 1 == len(steps) - 1
    assert abs(f.metrics["host_time_ns"].value - host_ns) <= len(tuning)     # µs rounding
    kernel = next(e for layer, e in f.evidence.items() if layer.value == "kernel")
    assert kernel.facts["kernels"].value == n_kernels
    assert kernel.facts["distinct_kernels"].value == len({k["name"] for _, _, ks in tuning for k in ks})
    # the fix drops every candidate run but the last launch of each call (the chosen algorithm)
    cand = [k for _, _, ks in tuning for k in sorted(ks, key=lambda k: k["ts"])[:-1]]
    corr = {k["args"]["correlation"] for k in cand}
    bound = round((sum(k["dur"] for k in cand) + sum(c["dur"] for _, calls, _ in tuning for c in calls
                                                       if c["args"].get("correlation") in corr)) * 1000)
    assert f.saving_ns is not None and 0 < f.saving_ns <= bound


def test_tuning_only_in_the_first_profiled_step_is_warm_up(tmp_path):
    path = _write("near-miss-fixed-shapes-tuned-once", tmp_path)
    ev = _events(path)
    first = min((e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")),
                key=lambda e: e["ts"])
    tuning = [op for op, calls, _ in _conv_calls(ev) if sum(c["name"] in BLOCKING for c in calls) >= 2]
    assert tuning and all(first["ts"] <= op["ts"] < first["ts"] + first["dur"] for op in tuning)
    assert not lint(path, ONLY).findings


@pytest.mark.parametrize("name", ["kineto_tbplugin_resnet50_v100_2021-06.pt.trace.json.gz",
                                  "param_resnet_rtx2080ti.json.gz"])
def test_real_resnet_convolutions_never_block_and_stay_silent(name):
    path = trace_or_skip(TRACES / "torch" / name)
    ev = _events(path)
    calls = _conv_calls(ev, names=("aten::cudnn_convolution",))
    assert calls and max(sum(c["name"] in BLOCKING for c in inside) for _, inside, _ in calls) == 0
    assert not lint(path, ONLY).findings

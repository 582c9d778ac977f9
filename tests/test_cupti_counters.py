"""Kineto traces recorded with CUPTI range-profiler metrics: the `cuda_profiler_range` events
become kernels with their counters, checked against the raw JSON; rules that measure time skip
(the range times are Kineto's placeholders), and TL011's microarchitecture layer is measured
from the counters."""
from __future__ import annotations

import gzip
import json
from functools import lru_cache

import pytest

import tracelint
from tracelint.engine.context import Context
from tracelint.engine.finding import Layer
from tracelint.api import lint

from conftest import SHARED

TRACE = SHARED / "traces" / "torch" / "hta_cupti_counters_a100.json.gz"
pytestmark = pytest.mark.skipif(not TRACE.exists(), reason="shared CUPTI-counter trace not present")
FP = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"


@lru_cache(maxsize=None)
def raw_ranges() -> list[dict]:
    events = json.loads(gzip.decompress(TRACE.read_bytes()))["traceEvents"]
    return sorted((e for e in events if e.get("cat") == "cuda_profiler_range"), key=lambda e: e["ts"])


@lru_cache(maxsize=None)
def timeline():
    return tracelint.load(TRACE)


def test_ranges_become_kernels_with_their_counters():
    tl, raw = timeline(), raw_ranges()
    assert len(tl.kernels) == len(raw) == 77
    assert tl.kernels["name"].astype(str).tolist() == [e["name"] for e in raw]
    assert (tl.kernels["device"] == [e["pid"] for e in raw]).all()
    c = tl.kernel_counters
    assert len(c) == sum(len(e["args"]) for e in raw)
    for i, e in enumerate(raw):
        got = dict(zip(c.loc[c["launch"] == i, "metric"], c.loc[c["launch"] == i, "value"]))
        assert got == {k: float(v) for k, v in e["args"].items()}, i
    assert set(c["unit"]) == {"count"}
    assert tl.meta.extra["kernel_timing"] == "synthetic"
    assert any("synthetic" in n for n in tl.meta.notes)
    assert len(tl.metrics) == 0     # per-kernel counters are not time samples


def test_ranges_linked_to_launches_by_order():
    """77 ranges and 77 cudaLaunchKernel calls: the i-th range is the i-th launch. The link is
    checked by what launched each kernel: the op around the launch call names the same work."""
    tl = timeline()
    ctx = Context(tl)
    li = ctx.launch_index("kernels")
    assert (li >= 0).all()
    ops = tl.ranges[tl.ranges["kind"] == "op"]
    expect = {"sgemm": ("addmm", "mm", "linear", "conv"), "max_pool": ("max_pool",),
              "nchwToNhwc": ("conv",), "clamp": ("clamp", "relu")}
    checked = 0
    for row, name in enumerate(tl.kernels["name"].astype(str)):
        t = int(tl.api_calls["start"].iat[li[row]])
        around = " ".join(ops[(ops["start"] <= t) & (ops["end"] >= t)]["name"].astype(str))
        for key, words in expect.items():
            if key in name:
                assert any(w in around for w in words), (name[:60], around)
                checked += 1
    assert checked >= 30


def test_tl011_microarch_layer_measured_from_counters():
    report = lint(TRACE)
    tl = report.timeline
    f = next(f for f in report.findings if f.rule == "TL011")
    micro = f.evidence[Layer.MICROARCH]
    assert micro.status == "measured" and micro.supports is True
    # independent: the FP32 GEMM kernels' counters summed from the raw JSON
    gemm = [e for e in raw_ranges() if "sgemm" in e["name"]]
    assert len(gemm) == f.occurrences == 7
    ffma = sum(e["args"][FP.format("ffma")] for e in gemm)
    assert micro.facts[FP.format("ffma")].value == ffma
    fp = {p: sum(e["args"][FP.format(p[0] + op)] for e in gemm for op in ("add", "fma", "mul"))
          for p in ("d", "f", "h")}
    assert micro.facts["fp32_share_of_fp_instructions"].value == pytest.approx(
        100 * fp["f"] / sum(fp.values()), abs=0.01)
    # the share is of counted FP instructions, not of (synthetic) time, and no time is claimed
    every = sum(v for e in raw_ranges() for k, v in e["args"].items())
    share = f.metrics["fp32_gemm_share"].value
    assert share == pytest.approx(sum(sum(e["args"].values()) for e in gemm) / every, abs=1e-4)
    assert f.impact_ns == 0 and "not measured" in f.message
    assert tl.meta.extra["kernel_timing"] == "synthetic"


def test_time_rules_skip_with_reason():
    report = lint(TRACE)
    for rid in ("TL001", "TL002", "TL005", "TL006", "TL007"):
        assert "synthetic" in report.skipped[rid], rid
    assert "TL011" not in report.skipped


def test_info_does_not_show_placeholder_times(cli):
    res = cli("info", "--json", TRACE)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["counts"]["kernels"] == 77 and data["kernel_timing"] == "synthetic"
    assert data["top_kernels"] == [] and data["streams"] == []
    assert next(d for d in data["devices"] if d["id"] == 0)["busy_share"] is None


def test_percent_counters_judge_the_rule_expectation(tmp_path):
    """Percent-of-peak counters (achieved occupancy, tensor pipe) are averaged over a kernel's
    launches and compared with what the rule expects; counts and bytes are summed."""
    occ, local, tensor = ("sm__warps_active.avg.pct_of_peak_sustained_active",
                          "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
                          "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active")
    ranges = [{"ph": "X", "cat": "cuda_profiler_range", "name": n, "pid": 0, "tid": 0,
               "ts": 1000 + 10 * i, "dur": 10, "args": {occ: o, local: b, tensor: t}}
              for i, (n, o, b, t) in enumerate([("spilly", 20, 4096, 0), ("spilly", 30, 1024, 0),
                                                ("gemm", 90, 0, 85)])]
    launches = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7,
                 "ts": 900 + i, "dur": 1, "args": {"correlation": 50 + i}} for i in range(3)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ranges + launches}))
    ctx = Context(tracelint.load(p))
    ev = ctx.microarch(0, 0, 0, kernels=["spilly"], expect={r"warps.?active": "low"})
    assert ev.status == "measured" and ev.supports is True
    assert ev.facts[occ].value == 25.0 and ev.facts[occ].unit == "%"
    assert ev.facts[local].value == 5120 and ev.facts[local].unit == "bytes"
    gemm = ctx.microarch(0, 0, 0, kernels=["gemm"], expect={r"Tensor|pipe_tensor": "low"})
    assert gemm.supports is False and gemm.facts[tensor].value == 85.0
    assert (ctx.launch_index("kernels") >= 0).all()      # 3 ranges, 3 launches: linked by order

"""Shape coverage: per-op shape distribution and the one-shape-benchmark warning."""
from __future__ import annotations

import tracelint
from tracelint.efficiency.coverage import coverage_warnings, shape_summary
from tracelint.synth.builder import TraceBuilder

BF16 = "c10::BFloat16"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"


def _trace(tmp_path, name, ms, reps=3):
    b = TraceBuilder()
    for s in range(reps):
        with b.step(s):
            for m in ms:
                with b.op("aten::mm", {"Input Dims": [[m, 1024], [1024, 1024]], "Input type": [BF16, BF16]}):
                    b.launch(GEMM, 10 * m)
            b.sync("cudaDeviceSynchronize")
    return tracelint.load(b.write_kineto(tmp_path / f"{name}.json.gz"))


def test_shape_distribution(tmp_path):
    s = shape_summary(_trace(tmp_path, "prod", [128, 256, 512, 1024, 2048]))
    mm = s["aten::mm"]
    assert len(mm) == 5
    assert mm["[512,1024]bf16 x [1024,1024]bf16"] == {"calls": 3, "kernel_ns": 3 * 5120}


def test_one_shape_benchmark_warns_against_many_shape_baseline(tmp_path):
    prod = shape_summary(_trace(tmp_path, "prod", [128, 256, 512, 1024, 2048]))
    bench = shape_summary(_trace(tmp_path, "bench", [1024], reps=10))
    w = coverage_warnings(prod, bench)
    assert len(w) == 1 and w[0].startswith("aten::mm: the comparison covers 1 shape")
    assert "baseline shows 5" in w[0]
    # the one shape is 1024·10 of 3970·10 ns per step: 26 % of the baseline's mm time
    assert f"{1024 / (128 + 256 + 512 + 1024 + 2048):.0%}" in w[0]


def test_near_miss_full_coverage_and_missing_shapes(tmp_path):
    prod = shape_summary(_trace(tmp_path, "prod", [128, 256, 512, 1024, 2048]))
    assert coverage_warnings(prod, shape_summary(_trace(tmp_path, "b2", [128, 256, 512, 1024, 2048]))) == []
    # the benchmark ran the dominant shape (2048: 52 % of the time): enough coverage
    assert coverage_warnings(prod, shape_summary(_trace(tmp_path, "b3", [2048]))) == []
    # no shapes on one side: nothing to say
    b = TraceBuilder()
    with b.step(0):
        b.launch(GEMM, 1000, op="aten::mm")
    assert shape_summary(tracelint.load(b.write_kineto(tmp_path / "x.json.gz"))) == {}
    assert coverage_warnings(prod, {}) == []


def test_merge_runs(tmp_path):
    from tracelint.efficiency.coverage import merge_summaries
    a = shape_summary(_trace(tmp_path, "a", [128, 256]))
    b = shape_summary(_trace(tmp_path, "b", [256, 512]))
    m = merge_summaries([a, b])["aten::mm"]
    assert len(m) == 3 and m["[256,1024]bf16 x [1024,1024]bf16"]["calls"] == 6


def test_diff_and_gate_warn_when_a_benchmark_covers_one_shape(tmp_path):
    """The wiring: a one-shape benchmark compared with a many-shape production run says so in
    the diff's notes and the gate's warnings; the same shapes on both sides say nothing."""
    from tracelint.analysis.buckets import profile
    from tracelint.analysis.diff import diff_profiles
    from tracelint.analysis.gate import run_gate
    from tracelint.analysis.perf_baseline import make_baseline
    prod = profile(_trace(tmp_path, "prod", [128, 256, 512, 1024, 2048]))
    bench = profile(_trace(tmp_path, "bench", [1024], reps=10))
    same = profile(_trace(tmp_path, "same", [128, 256, 512, 1024, 2048]))
    note = "aten::mm: the comparison covers 1 shape"
    assert any(n.startswith(note) for n in diff_profiles([prod], [bench]).notes)
    assert not any(n.startswith("aten::mm:") for n in diff_profiles([prod], [same]).notes)
    gate = run_gate(make_baseline([prod]), [bench])
    assert any(w.startswith(note) for w in gate.warnings)

"""Buckets, A/B diff, baselines and the regression gate (tracelint.analysis, diff/baseline/gate
commands). Synthetic Timelines are built directly with make_table: exact, fast, deterministic;
the real traces in ../shared are read, never copied."""
from __future__ import annotations

import gzip
import json
from decimal import Decimal

import numpy as np
import pytest

from conftest import TRACES, run_cli
from tracelint.analysis import (compare, diff_profiles, make_baseline, min_samples,
                                normalise_kernel_name, normalise_range_name, profile, run_gate)
from tracelint.analysis.buckets import cold_prefix, parse_request_range
from tracelint.analysis.diff_render import render_html, render_markdown
from tracelint.timeline import Device, Meta, Timeline, make_table
from tracelint.timeline.summary import percentile

PID, TID = 100, 1
GEMM = "ampere_sgemm_128x64_nn"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)"
FLASH = "void flash_fwd_kernel<Flash_fwd_traits<128, 64>, true>(Flash_fwd_params)"
KERNELS = [(GEMM, 1_000_000), (ADD, 200_000), (FLASH, 500_000)]

HTA = TRACES / "torch" / "hta_v100_rank0of1.pt.trace.json.gz"
NSYS = TRACES / "nsys" / "nsys2026.2_nsys-ai-pytorch-2gpu-1s-slice_h100.sqlite"
needs = lambda p: pytest.mark.skipif(not p.exists(), reason=f"real trace not present: {p.name}")  # noqa: E731


def synth(steps, kernels=KERNELS, *, sync=False, extra=None, scale=1.0, source="synth",
          other_thread_kernel=None, jitter=0.0, seed=0, device=0):
    """One thread launching `kernels` in every step; step i lasts steps[i] ns.

    Each step: a `ProfilerStep#i` range, an `## forward ##` annotation over the launches,
    then (sync=True) a cudaStreamSynchronize after the annotation. Kernel durations are
    multiplied by `scale` and, with `jitter`, by 1 + jitter x U(-1, 1) drawn per kernel from
    `seed` (run-to-run and iteration-to-iteration noise). `extra` adds ranges:
    [(name, kind, start_offset, dur)] per step. `device` is the GPU index the kernels run on.
    """
    rand = np.random.default_rng(seed)
    api = {k: [] for k in ("pid", "tid", "start", "end", "name", "correlation")}
    ker = {k: [] for k in ("device", "stream", "start", "end", "name", "correlation", "pid")}
    rng = {k: [] for k in ("pid", "tid", "start", "end", "name", "kind", "depth", "parent", "step")}

    def add(d, **kw):
        for k, v in kw.items():
            d[k].append(v)

    t, free, corr = 1_000_000, 0, 1
    for i, dur in enumerate(steps):
        add(rng, pid=PID, tid=TID, start=t, end=t + dur, name=f"ProfilerStep#{i}", kind="step",
            depth=0, parent=-1, step=i)
        step_row = len(rng["pid"]) - 1
        cur = t + 1000
        fwd = cur
        for name, kd in kernels:
            add(api, pid=PID, tid=TID, start=cur, end=cur + 4000, name="cudaLaunchKernel",
                correlation=corr)
            ks = max(cur + 2000, free)
            free = ks + int(kd * scale * (1 + jitter * rand.uniform(-1, 1)))
            add(ker, device=device, stream=7, start=ks, end=free, name=name, correlation=corr, pid=0)
            corr += 1
            cur += 5000
        add(rng, pid=PID, tid=TID, start=fwd, end=cur, name="## forward ##", kind="annotation",
            depth=1, parent=step_row, step=-1)
        if other_thread_kernel:
            add(api, pid=PID, tid=TID + 1, start=fwd + 10, end=fwd + 500, name="cudaLaunchKernel",
                correlation=corr)
            ks = max(fwd + 600, free)
            free = ks + other_thread_kernel
            add(ker, device=0, stream=7, start=ks, end=free, name="other_thread_kernel",
                correlation=corr, pid=0)
            corr += 1
        if sync:
            end = max(cur, free) + 1000
            add(api, pid=PID, tid=TID, start=cur, end=end, name="cudaStreamSynchronize",
                correlation=corr)
            corr += 1
            cur = end
        for name, kind, off, d in extra or ():
            add(rng, pid=PID, tid=TID, start=t + off, end=t + off + d, name=name.format(i=i),
                kind=kind, depth=1, parent=step_row, step=-1)
        assert cur < t + dur and free < t + dur + 5_000_000, "steps too short for their work"
        t += dur + 10_000
    api["api"] = ["runtime"] * len(api["pid"])
    tl = Timeline(api_calls=make_table("api_calls", api), kernels=make_table("kernels", ker),
                  ranges=make_table("ranges", rng),
                  meta=Meta(source=source, format="kineto-json", producer="synth",
                            devices=[Device(device, "Synth GPU")], captured={"cuda"}))
    return tl


def prof(tl, **kw):
    return profile(tl, **kw)


def changes(a, b, **kw):
    return set(diff_profiles([prof(x) for x in a], [prof(x) for x in b], **kw).changes())


STEPS = [10_000_000 + (i * 7919 % 101) * 1000 for i in range(40)]     # ~1 % spread


# ----- definitions ---------------------------------------------------------------------------

def test_percentile_is_type7():
    v = np.array([1.0, 2.0, 3.0, 4.0, 10.0])
    assert percentile(v, 50) == 3.0
    assert percentile(v, 99) == pytest.approx(4 + 0.96 * 6)       # h = 3.96
    assert percentile(v, 90) == float(np.percentile(v, 90, method="linear"))


def test_names():
    assert normalise_range_name("ProfilerStep#12") == "ProfilerStep#N"
    assert normalise_range_name("prefill req=17") == "prefill req=N"
    assert normalise_range_name("layer3 fp16") == "layer3 fp16"
    assert normalise_kernel_name(ADD) == "at::native::vectorized_elementwise_kernel"
    assert normalise_kernel_name("void k<0x7f1234>(float*, 0xdeadbeef)") == "k"
    assert normalise_kernel_name(GEMM) == GEMM
    assert parse_request_range("req-17/decode tokens=4") == ("17", "decode", 4)
    assert parse_request_range("required_grad prefill") is None


def test_order_statistic_interval_coverage_and_min_samples():
    from math import comb
    from tracelint.analysis.stats import order_stat_ranks

    def coverage(n, q, lo, hi):          # P(lo <= B <= hi - 1), B ~ Binomial(n, q), by hand
        return sum(comb(n, k) * q ** k * (1 - q) ** (n - k) for k in range(lo, hi))
    for n, q in ((6, 0.5), (40, 0.5), (100, 0.9), (400, 0.99)):
        lo, hi = order_stat_ranks(n, q)
        assert coverage(n, q, lo, hi) >= 0.95
        assert coverage(n, q, lo + 1, hi) < 0.95 or coverage(n, q, lo, hi - 1) < 0.95  # tight
    # fewest samples: the smallest n with q^n <= 2.5 % and (1-q)^n <= 2.5 %, found by search
    for q in (0.5, 0.9, 0.99):
        n = next(n for n in range(1, 10_000) if q ** n <= 0.025 and (1 - q) ** n <= 0.025)
        assert min_samples(q) == n
        assert order_stat_ranks(n - 1, q) is None and order_stat_ranks(n, q) is not None
    assert min_samples(0.5) == 6 and min_samples(0.99) == 368


def test_compare_single_runs_and_repeated_runs():
    x = np.arange(100.0, 140.0)                       # 40 samples, P50 = 119.5
    c = compare([x], [x * 1.10])
    lo, hi = np.sort(x)[13], np.sort(x)[26]           # ranks 14 and 27 for n = 40 (binomial)
    assert c.method == "instances" and c.low == pytest.approx(1.1 * lo / hi - 1)
    assert c.high == pytest.approx(1.1 * hi / lo - 1) and c.verdict == "uncertain"
    assert compare([x], [x * 1.5]).verdict == "worse"
    assert compare([x[:5]], [x[:5] * 2]).verdict == "not gated"          # P50 needs 6
    assert "needs >= 368" in compare([x], [x], 99).why
    runs_a = [np.array([v]) for v in (97.0, 100.0, 103.0)]
    c = compare(runs_a, [np.array([110.0])])
    half = 4.303 * 3.0 * np.sqrt(1 / 3 + 1)           # t(2) x s x sqrt(1/nA + 1/nB)
    assert c.method == "runs" and c.low == pytest.approx((110 - half) / 100 - 1)
    assert c.verdict == "uncertain" and c.runs_needed > 3
    assert compare(runs_a, [np.array([100.5])]).verdict == "no change"
    tight = [np.array([v]) for v in (100.0, 100.1, 99.9)]
    assert compare(tight, [np.array([103.0])]).verdict == "worse"
    assert compare(tight, [np.array([97.0])]).verdict == "better"


def test_cold_start_reported_apart():
    steps = [50_000_000, 30_000_000] + [10_000_000 + 100_000 * (i % 3) for i in range(8)]
    assert cold_prefix(steps) == 2
    assert cold_prefix([10, 11, 10, 12, 10]) == 0
    b = prof(synth(steps)).buckets["iteration"]
    st = b.stats()
    assert st["cold_count"] == 2 and st["cold_ns"] == [50_000_000, 30_000_000]
    assert st["steady_count"] == 8 and st["max_ns"] < 11_000_000


# ----- buckets --------------------------------------------------------------------------------

def test_buckets_attribution_and_classes():
    tl = synth(STEPS[:5], other_thread_kernel=300_000)
    p = prof(tl)
    it, fwd = p.buckets["iteration"], p.buckets["## forward ##"]
    assert it.count == 5 and fwd.count == 5
    # the step gets every kernel; the annotation only what its own thread launched
    assert list(it.gpu_ns) == [2_000_000] * 5
    assert list(fwd.gpu_ns) == [1_700_000] * 5
    st = it.stats()
    assert st["gpu_class_ns"] == {"gemm": 5_000_000, "elementwise": 1_000_000,
                                  "attention": 2_500_000, "other": 1_500_000}
    assert 0 < st["gpu_busy_pct"] < 100
    assert st["p50_ns"] == percentile(np.array(STEPS[:5], float), 50)


def test_pattern_buckets_and_serving():
    extra = [("request {i}", "annotation", 100_000, 8_000_000),
             ("prefill req={i}", "annotation", 1_100_000, 2_000_000)]
    extra += [("decode req={i}", "annotation", 3_100_000 + k * 1_000_000, 500_000)
              for k in range(4)]
    tl = synth(STEPS[:6], extra=extra)
    p = profile(tl, ["(prefill|decode)"])
    assert p.buckets["prefill"].count == 6 and p.buckets["decode"].count == 24
    ttft, tpot = p.buckets["TTFT"], p.buckets["TPOT"]
    assert list(ttft.values) == [3_000_000] * 6          # prefill end - request start
    assert list(tpot.values) == [(6_600_000 - 3_100_000) / 4] * 6
    assert p.buckets["prefill req=N"].count == 6         # the automatic name bucket too


# ----- diff: exactly the planted changes ------------------------------------------------------

def test_identical_inputs_no_change():
    tl = synth(STEPS, sync=True)
    res = diff_profiles([prof(tl)], [prof(tl)])
    assert res.changes() == [] and res.verdict == "no change"
    assert all(r.status == "no change" for r in res.kernels + res.buckets + res.syncs)


def test_kernel_20_percent_slower():
    a = synth(STEPS)
    b = synth(STEPS, kernels=[(GEMM, 1_200_000), (ADD, 200_000), (FLASH, 500_000)])
    res = diff_profiles([prof(a)], [prof(b)])
    assert set(res.changes()) == {("kernel", GEMM, "slower"), ("class", "gemm", "slower"),
                                  ("total", "gpu_time", "slower"), ("total", "gpu_busy", "slower")}
    k = next(r for r in res.kernels if r.key == GEMM)
    assert k.metrics["p50"].change == pytest.approx(0.20)
    # iteration times did not move: the bucket is unchanged, its GPU time is not
    it = next(r for r in res.buckets if r.key == "iteration")
    assert it.status == "no change" and it.changed == ["gpu_time"]


def test_new_sync_appears():
    res = diff_profiles([prof(synth(STEPS))], [prof(synth(STEPS, sync=True))])
    assert res.changes() == [("sync", "cudaStreamSynchronize", "appeared")]
    back = diff_profiles([prof(synth(STEPS, sync=True))], [prof(synth(STEPS))])
    assert back.changes() == [("sync", "cudaStreamSynchronize", "disappeared")]


def test_shifted_p99_equal_p50():
    base = [10_000_000 + (i * 7919 % 997) * 1000 for i in range(400)]
    top = np.argsort(base)[-20:]                     # the 20 longest steps get 1.5x longer
    tail = [int(d * 1.5) if i in top else d for i, d in enumerate(base)]
    res = diff_profiles([prof(synth(base))], [prof(synth(tail))])
    assert res.changes() == [("bucket", "iteration", "slower")]
    it = next(r for r in res.buckets if r.key == "iteration")
    assert it.changed == ["p99"]
    assert it.metrics["p50"].change == 0 and it.metrics["p90"].change == 0
    assert it.metrics["p99"].change > 0.3


def test_templated_kernels_match_by_normalised_name():
    a = synth(STEPS, kernels=[("void gemm_kernel<128, 64>(float*)", 1_000_000)])
    b = synth(STEPS, kernels=[("void gemm_kernel<256, 32>(float*)", 1_000_000)])
    res = diff_profiles([prof(a)], [prof(b)])
    assert [(r.key, r.status) for r in res.kernels] == [("gemm_kernel", "no change")]
    assert "template args differ" in res.kernels[0].label
    c = synth(STEPS, kernels=[("other_kernel", 1_000_000)])
    res = diff_profiles([prof(a)], [prof(c)])
    assert {(r.key, r.status) for r in res.kernels} == {
        ("void gemm_kernel<128, 64>(float*)", "disappeared"), ("other_kernel", "appeared")}


def test_repeated_runs_noise_is_no_change_but_real_shift_is():
    A = [synth(STEPS, scale=f) for f in (0.98, 1.0, 1.02)]
    B = [synth(STEPS, scale=f) for f in (1.01, 0.99, 1.0)]
    assert changes(A, B) == set()
    tight = [synth(STEPS, scale=f) for f in (1.0, 1.001, 0.999)]
    shifted = [synth(STEPS, scale=f * 1.03) for f in (1.0, 1.001, 0.999)]
    assert ("kernel", GEMM, "slower") in changes(tight, shifted)


def test_single_runs_judge_by_the_spread_within_the_run():
    noisy_a, noisy_b = synth(STEPS, jitter=0.10, seed=1), synth(STEPS, jitter=0.10, seed=2)
    assert not [c for c in changes([noisy_a], [noisy_b]) if c[2] == "slower"]
    # 3 % slower: inside the ±10 % spread of kernel instances -> not slower; no spread -> slower
    assert ("kernel", GEMM, "slower") not in changes([noisy_a], [synth(STEPS, jitter=0.10, seed=2, scale=1.03)])
    assert ("kernel", GEMM, "slower") in changes([synth(STEPS)], [synth(STEPS, scale=1.03)])


def test_findings_gained_and_lost_by_fingerprint():
    pa, pb = prof(synth(STEPS)), prof(synth(STEPS))
    pa.lint = {"fp_old": {"rule": "TL001", "key": "k1"}, "fp_same": {"rule": "TL002", "key": "k"}}
    pb.lint = {"fp_new": {"rule": "TL003", "key": "k2"}, "fp_same": {"rule": "TL002", "key": "k"}}
    res = diff_profiles([pa], [pb])
    assert [f["identity"] for f in res.findings_gained] == ["fp_new"]
    assert [f["identity"] for f in res.findings_lost] == ["fp_old"]
    # flaky: present in one of two B runs -> neither gained nor lost, counted unstable
    pb2 = prof(synth(STEPS))
    pb2.lint = {"fp_same": {"rule": "TL002", "key": "k"}}
    res = diff_profiles([pa], [pb, pb2])
    assert res.findings_gained == [] and res.findings_unstable == 1


def test_findings_from_lint_do_not_break_diff():
    tl = synth(STEPS)
    p = profile(tl, findings=True)
    assert p.lint_error is None and p.lint is not None      # linting must have run
    assert p.lint, "the synthetic steps have an idle GPU between launches: findings expected"
    res = diff_profiles([p], [profile(tl, findings=True)])
    assert res.findings_checked and not [c for c in res.changes() if c[0] == "finding"]


def test_renderers_escape_and_carry_the_changes():
    a = synth(STEPS, kernels=[("<script>alert(1)</script>_gemm", 1_000_000)])
    b = synth(STEPS, kernels=[("<script>alert(1)</script>_gemm", 1_300_000)])
    res = diff_profiles([prof(a)], [prof(b)])
    html = render_html(res)
    assert "<script>alert" not in html and "&lt;script&gt;" in html and "slower" in html
    md = render_markdown(res)
    assert "**Verdict: slower**" in md and "+30.0%" in md
    assert "<script>" not in md and "&lt;script&gt;" in md      # one escaping path: reporters.escape
    data = json.loads(res.to_json())
    assert data["summary"]["kernels"] == {"slower": 1}
    assert data["method"]["floor"] == 0.02 and data["waterfall"][0]["classes"]


# ----- baseline and gate ----------------------------------------------------------------------

def test_gate_noise_passes_regression_fails(tmp_path):
    base = [prof(synth(STEPS, scale=f)) for f in (0.98, 1.0, 1.01, 1.02, 0.99)]
    doc = make_baseline(base, cwd=tmp_path)
    assert doc["git"] is None                        # not a git repo: recorded as null
    g = doc["metrics"]["gpu_time"]
    assert len(g["runs"]) == 5 and len(g["samples"][0]) == len(STEPS)
    assert doc["fingerprint"]["devices"] == ["Synth GPU"]
    ok = run_gate(doc, [prof(synth(STEPS, scale=1.015))])
    assert ok.status == "passed" and ok.metrics["gpu_time"].verdict == "no change"
    assert ok.metrics["gpu_time"].method == "runs"
    bad = run_gate(doc, [prof(synth(STEPS, scale=1.10))])
    assert bad.status == "failed" and {"gpu_time", "gpu_time[gemm]"} <= set(bad.regressions)
    assert "iteration.p50" not in bad.regressions                   # steps did not move
    slow_steps = run_gate(doc, [prof(synth([int(s * 1.08) for s in STEPS]))])
    assert slow_steps.regressions == ["iteration.p50"]
    assert slow_steps.metrics["iteration.p99"].verdict == "not gated"   # 40 steps < 368


def test_gate_single_run_baseline_uses_the_spread_of_iterations():
    doc = make_baseline([prof(synth(STEPS, jitter=0.03, seed=1))])
    ok = run_gate(doc, [prof(synth(STEPS, jitter=0.03, seed=2))])       # noise inside the band
    assert ok.status == "passed" and ok.metrics["gpu_time[gemm]"].method == "instances"
    assert ok.metrics["gpu_time[gemm]"].low < 0 < ok.metrics["gpu_time[gemm]"].high
    slow = [(GEMM, 1_200_000), (ADD, 200_000), (FLASH, 500_000)]
    res = run_gate(doc, [prof(synth(STEPS, slow, jitter=0.03, seed=2))])  # gemm class 20 % slower
    assert res.status == "failed" and "gpu_time[gemm]" in res.regressions
    assert "gpu_time[elementwise]" not in res.regressions and "gpu_time[attention]" not in res.regressions
    assert any("gpu_time[gemm]" in r for r in res.reasons())


def test_gate_new_findings_only_fail_when_asked():
    pa = prof(synth(STEPS))
    pa.lint = {"fp_a": {"rule": "TL001", "key": "x"}}
    doc = make_baseline([pa])
    pb = prof(synth(STEPS))
    pb.lint = {"fp_a": {"rule": "TL001", "key": "x"}, "fp_b": {"rule": "TL009", "key": "y"}}
    assert not run_gate(doc, [pb]).failed
    res = run_gate(doc, [pb], fail_on_findings=True)
    assert res.failed and [f["identity"] for f in res.new_findings] == ["fp_b"]


# ----- real traces ------------------------------------------------------------------------------

@needs(HTA)
def test_profilerstep_buckets_match_raw_json():
    from tracelint import load
    raw = json.loads(gzip.open(HTA).read(), parse_float=Decimal)
    ev = [e for e in raw["traceEvents"] if e.get("cat") == "user_annotation"
          and str(e.get("name", "")).startswith("ProfilerStep#")]
    durs = sorted(int((Decimal(e["ts"]) + Decimal(e["dur"])) * 1000) - int(Decimal(e["ts"]) * 1000)
                  for e in ev)
    b = profile(load(HTA)).buckets["iteration"]
    assert b.count == len(ev) == 5
    assert sorted(int(x) for x in b.values) == durs
    st = b.stats()
    steady = np.array(sorted(durs)[:], float) if st["cold_count"] == 0 else None
    assert st["cold_count"] == 0
    assert st["p50_ns"] == float(np.percentile(steady, 50))
    assert st["p99_ns"] == float(np.percentile(steady, 99))


@needs(NSYS)
def test_nsys_trace_diff_with_itself_is_no_change():
    from tracelint import load
    tl = load(NSYS)
    pattern = [r"^(aten::(?:linear|bmm|einsum))\b"]      # emit_nvtx op ranges: ask by --bucket
    p = profile(tl, pattern)
    assert p.kernels and {"aten::linear", "aten::bmm", "aten::einsum"} <= set(p.buckets)
    assert p.buckets["aten::linear"].stats()["gpu_class_ns"]      # launches joined on (pid, corr)
    res = diff_profiles([p], [profile(tl, pattern)])
    assert res.changes() == [] and res.verdict == "no change"


@pytest.mark.slow
@needs(HTA)
def test_cli_diff_self_json_and_separator(tmp_path):
    res = run_cli("diff", HTA, HTA, "-f", "json", "-o", tmp_path / "d.json")
    assert res.returncode == 0, res.stderr
    d = json.loads((tmp_path / "d.json").read_text())
    assert d["summary"]["verdict"] == "no change"
    assert all(r["status"] == "no change" for s in ("buckets", "kernels", "syncs", "classes")
               for r in d[s])
    assert not d["findings"]["gained"] and not d["findings"]["lost"]
    it = next(b for b in d["buckets"] if b["key"] == "iteration")
    assert it["a"]["count"] == 5
    res = run_cli("diff", HTA, "--", HTA, HTA, "--no-findings", "-f", "markdown")
    assert res.returncode == 0 and "**Verdict: no change**" in res.stdout
    assert "B (2 run(s))" in res.stdout
    bad = run_cli("diff", HTA, HTA, HTA)
    assert bad.returncode == 2 and "--" in bad.stderr and "Traceback" not in bad.stderr
    bad = run_cli("diff", HTA, HTA, "--bucket", "([unclosed")
    assert bad.returncode == 2 and "regex" in bad.stderr


@pytest.mark.slow
@needs(HTA)
def test_cli_baseline_and_gate(tmp_path):
    bl = tmp_path / "baseline.json"
    res = run_cli("baseline", "save", HTA, "-o", bl, "--no-findings", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = json.loads(bl.read_text())
    assert doc["git"] is None and doc["hardware"]["devices"] == ["Tesla V100-SXM2-32GB"]
    assert doc["kind"] == "tracelint-perf-baseline"
    assert doc["versions"]["format"] == "kineto-json"
    assert {"iteration.p50", "iteration.p99", "gpu_time", "gpu_time[gemm]"} <= set(doc["metrics"])
    res = run_cli("gate", HTA, "--baseline", bl, "--no-findings")
    assert res.returncode == 0, res.stdout + res.stderr
    # a baseline 20 % faster than today: the same trace now regresses
    for m in doc["metrics"].values():
        m["runs"] = [v * 0.8 for v in m["runs"]]
        m["samples"] = [[v * 0.8 for v in run] for run in m["samples"]]
    fast = tmp_path / "fast.json"
    fast.write_text(json.dumps(doc))
    res = run_cli("gate", HTA, "--baseline", fast, "--no-findings", "-f", "json")
    assert res.returncode == 1
    out = json.loads(res.stdout)
    assert not out["passed"] and out["status"] == "failed" and out["regressions"]
    it = out["metrics"]["iteration.p50"]                # 5 steps: too few for a P50 interval
    assert it["verdict"] == "not gated" and "needs >= 6" in it["why"]
    # not a baseline: usage error
    (tmp_path / "x.json").write_text("{}")
    res = run_cli("gate", HTA, "--baseline", tmp_path / "x.json")
    assert res.returncode == 2 and "Traceback" not in res.stderr


@pytest.mark.slow
@needs(HTA)
def test_cli_baseline_records_git_commit_in_repo(tmp_path):
    from conftest import REPO
    bl = tmp_path / "b.json"
    res = run_cli("baseline", "save", HTA, "-o", bl, "--no-findings", cwd=REPO)
    assert res.returncode == 0, res.stderr
    git = json.loads(bl.read_text())["git"]
    assert git is not None and len(git["commit"]) == 40

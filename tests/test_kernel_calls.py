"""Kernel calls paired across runs (tracelint/analysis/kernel_calls.py): which calls pair, what
is left out, and that a baseline file keeps the calls in call order. The gate decisions on real
traces are in test_gate_decisions.py."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_diff_gate import GEMM, STEPS, synth

from tracelint.analysis import make_baseline, profile, run_gate
from tracelint.analysis.inject import slow_down
from tracelint.analysis.kernel_calls import MIN_PAIRED, compare_calls, kernel_calls
from tracelint.analysis.perf_baseline import read_metrics_baseline, save_baseline


def _with_grid(tl, grid_x: int, only: str | None = None):
    """A copy of tl whose kernels (those named `only`) run with grid (grid_x, 1, 1)."""
    k = tl.kernels.copy()
    sel = np.ones(len(k), bool) if only is None else (k["name"].astype(str) == only).to_numpy()
    for col, v in (("grid_x", grid_x), ("grid_y", 1), ("grid_z", 1)):
        k[col] = np.where(sel, v, k[col].to_numpy() if col in k else -1)
    return dataclasses.replace(tl, kernels=k)


def test_calls_are_keyed_by_kernel_and_launch_configuration_in_call_order():
    tl = synth(STEPS[:6], jitter=0.05, seed=4)
    calls = kernel_calls(_with_grid(tl, 80))
    (gemm_key,) = calls["gemm"]
    assert gemm_key.startswith(GEMM) and "|grid=80x1x1|" in gemm_key
    k = tl.kernels[(tl.kernels["name"].astype(str) == GEMM).to_numpy()].sort_values("start")
    assert calls["gemm"][gemm_key].tolist() == (k["end"] - k["start"]).tolist()
    since = int(k["start"].iloc[3])                      # from the 4th step on
    assert len(kernel_calls(_with_grid(tl, 80), since)["gemm"][gemm_key]) == 3


def test_communication_calls_are_left_out():
    tl = synth(STEPS[:6], kernels=[("ncclKernel_AllReduce_RING_LL_Sum_float", 500_000),
                                   (GEMM, 1_000_000)])
    assert set(kernel_calls(tl)) == {"gemm"}


def test_relaunched_with_another_grid_does_not_pair():
    base = profile(_with_grid(synth(STEPS, jitter=0.03, seed=1), 80))
    other = profile(_with_grid(synth(STEPS, jitter=0.03, seed=2), 160, only=GEMM))
    c = run_gate(make_baseline([base]), [other]).metrics["kernel_calls[gemm]"]
    assert c.verdict == "not gated" and f"{0:.0%} of the baseline's call time pairs" in c.why
    assert MIN_PAIRED == 0.5


def test_identical_runs_no_change_with_a_zero_width_interval():
    calls = kernel_calls(synth(STEPS, jitter=0.03, seed=1))["gemm"]
    c = compare_calls([calls], [calls])
    assert (c.verdict, c.change, c.low, c.high) == ("no change", 0.0, 0.0, 0.0)


def test_one_class_slower_names_only_that_class():
    a = profile(synth(STEPS, jitter=0.03, seed=1))
    b = slow_down(synth(STEPS, jitter=0.03, seed=2), "gemm", 1.2)
    res = run_gate(make_baseline([a]), [profile(b)])
    calls = {m: c for m, c in res.metrics.items() if m.startswith("kernel_calls[")}
    assert len(calls) > 1 and calls["kernel_calls[gemm]"].verdict == "worse"
    assert calls["kernel_calls[gemm]"].change == pytest.approx(0.2, abs=0.04)
    assert all(c.verdict == "no change" for m, c in calls.items() if m != "kernel_calls[gemm]")


def test_baseline_file_keeps_every_runs_calls_in_call_order(tmp_path):
    runs = [profile(synth(STEPS, jitter=0.03, seed=s)) for s in (1, 2)]
    doc = make_baseline(runs)
    path = tmp_path / "perf.json"
    save_baseline(path, doc)
    back = read_metrics_baseline(path)
    m = back["metrics"]["kernel_calls[gemm]"]
    (key,) = runs[0].calls["gemm"]
    assert [r[key] for r in m["calls"]] == [p.calls["gemm"][key].tolist() for p in runs]
    cur = profile(synth(STEPS, jitter=0.03, seed=3))
    a, b = run_gate(doc, [cur]), run_gate(back, [cur])
    assert a.metrics["kernel_calls[gemm]"].to_dict() == b.metrics["kernel_calls[gemm]"].to_dict()


def test_diff_shows_the_same_calls_per_class():
    """diff's class rows carry the paired calls too: a class whose calls got 20 % slower is
    "slower" and its row says by how much; untouched classes stay "no change"."""
    from tracelint.analysis import diff_profiles
    from tracelint.analysis.diff_render import render_markdown
    a = profile(synth(STEPS, jitter=0.03, seed=1))
    b = slow_down(synth(STEPS, jitter=0.03, seed=2), "gemm", 1.2)
    res = diff_profiles([a], [profile(b)])
    rows = {r.key: r for r in res.classes}
    assert rows["gemm"].status == "slower" and rows["gemm"].metrics["calls"].verdict == "worse"
    assert all(r.status == "no change" for c, r in rows.items() if c != "gemm")
    assert "same calls (change, interval)" in render_markdown(res)

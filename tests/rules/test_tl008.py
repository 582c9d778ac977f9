"""TL008 tail-latency: small hand-built Timelines with percentiles recomputed by a plain loop,
and a real-trace check against the raw JSON."""
from __future__ import annotations

import gzip
import json
import math

import pytest

from conftest import needs_shared
from mini_tables import RELU, US, _kernels, _ranges, _run, _timeline
from raw_traces import TORCH, _ns
from tracelint.engine.finding import Layer, Severity


def _percentile(values, q):
    """Linear interpolation between closest ranks (type 7), written out."""
    v = sorted(values)
    h = (len(v) - 1) * q / 100
    lo = math.floor(h)
    return v[lo] + (h - lo) * (v[min(lo + 1, len(v) - 1)] - v[lo])


def _steps_trace(durations, gap=10 * US, extra=()):
    rows, t = [], 1_000_000
    for i, d in enumerate(durations):
        rows.append((f"ProfilerStep#{i}", "step", t, t + d, i))
        t += d + gap
    rows += list(extra)
    # one kernel after the last step so the trace does not end with it
    k = _kernels([(RELU, t, t + 5 * US, -1, 7)])
    return _timeline(ranges=_ranges(rows), kernels=k)


def test_tl008_iteration_tail():
    d = [1_000 * US + 7 * US * (i % 5) for i in range(30)]
    d[12], d[25] = 2_600 * US, 3_100 * US
    found = _run(_steps_trace(d), "TL008")
    (f,) = [f for f in found if f.key == "iterations"]
    p50, p99 = _percentile(d, 50), _percentile(d, 99)
    assert f.metrics["p50_ns"].value == pytest.approx(p50)
    assert f.metrics["p99_ns"].value == pytest.approx(p99)
    tail = [x for x in d if x >= 1.5 * p50]
    assert f.occurrences == len(tail) == 2
    assert f.impact_ns == int(sum(x - p50 for x in tail))
    assert f.where.iteration == 25


def test_tl008_cold_start_reported_apart():
    d = [9_000 * US, 6_000 * US] + [1_000 * US + 5 * US * (i % 3) for i in range(20)]
    found = _run(_steps_trace(d), "TL008")
    (cold,) = found
    assert cold.key == "cold-start|iterations" and cold.severity == Severity.INFO
    assert cold.occurrences == 2
    p50 = _percentile(d[2:], 50)
    assert cold.impact_ns == int(d[0] - p50 + d[1] - p50)


def test_tl008_truncated_last_step_excluded_and_said():
    d = [1_000 * US] * 10 + [3_000 * US, 1_000 * US, 1_000 * US, 400 * US]
    rows, t = [], 1_000_000
    for i, x in enumerate(d):
        rows.append((f"ProfilerStep#{i}", "step", t, t + x, i))
        t += x + 10 * US
    tl = _timeline(ranges=_ranges(rows), kernels=_kernels([(RELU, 1_000_000, 1_000_000 + US, -1, 7)]))
    (f,) = _run(tl, "TL008")
    sys_ev = f.evidence[Layer.SYSTEM]
    assert "cut by the profiler window" in sys_ev.summary and "#13" in sys_ev.summary
    assert sys_ev.facts["excluded_iterations"].value == 1
    assert sys_ev.facts["window_end_ns"].value == rows[-2][3]
    assert f.metrics["p99_ns"].value == pytest.approx(_percentile(d[:-1], 99))


def test_tl008_named_ranges():
    extra, t = [], 50_000_000
    d = [200 * US] * 11 + [2_000 * US]
    for x in d:
        extra.append(("dataloader", "annotation", t, t + x))
        t += x + 5 * US
    for i in range(6):  # too few instances to judge
        extra.append(("rare", "annotation", t, t + (5_000 * US if i == 5 else 10 * US)))
        t += 6_000 * US
    found = _run(_steps_trace([1_000 * US] * 8, extra=extra), "TL008")
    (f,) = found
    assert f.key == "range|dataloader"
    p50 = _percentile(d, 50)
    assert f.impact_ns == int(2_000 * US - p50)


def test_tl008_near_miss_jitter():
    d = [1_000 * US + 31 * US * ((i * 7) % 11) for i in range(40)]
    assert _run(_steps_trace(d), "TL008") == []


@needs_shared()
def test_real_tl008_dataloader_tail_vs_json():
    import tracelint
    path = TORCH / "param_resnet_rtx2080ti.json.gz"
    name = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
    ev = json.load(gzip.open(path))["traceEvents"]
    d = [_ns(e["dur"]) for e in sorted((e for e in ev if e.get("cat") == "user_annotation"
                                        and e["name"] == name), key=lambda e: _ns(e["ts"]))]
    # cold start: leading instances among the first 3 slower than 2 x the P50 of the rest
    ref = _percentile(d[3:], 50)
    k = 0
    while k < 3 and d[k] > 2.0 * ref:
        k += 1
    steady = d[k:]
    p50, p99 = _percentile(steady, 50), _percentile(steady, 99)
    (f,) = [f for f in _run(tracelint.load(path), "TL008") if f.key == f"range|{name}"]
    assert k == 1 and len(steady) == 29
    assert f.metrics["p50_ns"].value == pytest.approx(p50) and f.metrics["p99_ns"].value == pytest.approx(p99)
    assert f.impact_ns == int(sum(x - p50 for x in steady if x >= 2.0 * p50))


def _starts(durations, gap=10 * US):
    t, out = 1_000_000, []
    for d in durations:
        out.append(t)
        t += d + gap
    return out


@pytest.mark.parametrize("compile_us, named", [(1_500, True), (400, False)])
def test_tl008_tail_iterations_that_recompile_say_so(compile_us, named):
    """torch.compile ranges (nested, as Dynamo and Inductor write them) inside the slow
    iterations: their union is the compile time; when it is most of the excess, the finding
    names it and gives the recompile fix."""
    from tracelint.rules.tl008_tail_latency import RECOMPILE_TAIL_FIX
    d = [1_000 * US + 7 * US * (i % 5) for i in range(30)]
    d[12], d[25] = 2_600 * US, 3_100 * US
    at = _starts(d)
    extra = []
    for i in (12, 25):
        s = at[i] + 50 * US
        extra += [("dynamo", "op", s, s + compile_us * US, -1),
                  ("entire_frame_compile", "op", s + 10 * US, s + (compile_us - 10) * US, -1)]
    found = _run(_steps_trace(d, extra=extra), "TL008")
    (f,) = [f for f in found if f.key == "iterations"]
    assert f.evidence[Layer.SYSTEM].facts["compile_ns"].value == 2 * compile_us * US
    assert ("torch.compile compiling again" in f.message) == named
    assert (f.fix == RECOMPILE_TAIL_FIX) == named

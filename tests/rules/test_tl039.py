"""TL039 allocator-churn: expected values from the raw files (json.load / SQL) or by hand."""
from __future__ import annotations

import gzip
import json
import sqlite3
import sys

import pytest

from conftest import REPO, TRACES, run_cli, trace_or_skip

import tracelint
from tracelint.engine.config import Config
from tracelint.synth.scenarios import tl039

MIB = 1 << 20


def _lint(path, *rules, **options):
    cfg = Config(select=list(rules), options={rules[0]: options} if options else {})
    return tracelint.lint(path, cfg).findings


def _steps(events):
    return sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"]), int(e["name"].split("#")[1]))
                  for e in events if str(e.get("name", "")).startswith("ProfilerStep#")
                  and e.get("cat") != "gpu_user_annotation")     # the host-side iterations


def _step_of(steps, ts):
    return next((n for s, e, n in steps if s <= ts < e), None)


def test_empty_cache_kineto_counts_from_raw(tmp_path):
    path = tl039.empty_cache_every_step().write_kineto(tmp_path / "t.json")
    events = json.loads(path.read_text())["traceEvents"]
    steps = _steps(events)
    mem = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: float(e["ts"]))
    # iterations in which Total Reserved both drops and grows between consecutive events
    cycled = {}
    for prev, cur in zip(mem, mem[1:]):
        d = cur["args"]["Total Reserved"] - prev["args"]["Total Reserved"]
        s = _step_of(steps, float(cur["ts"]))
        cycled.setdefault(s, set()).add("drop" if d < 0 else "grow" if d > 0 else "")
    n = sum(1 for s, kinds in cycled.items() if s is not None and {"drop", "grow"} <= kinds)
    (f,) = _lint(path, "TL039")
    assert f.occurrences == n == 5         # iteration 0 fills the empty cache: nothing released yet
    # host time in the allocator calls inside the iterations, from the raw runtime events
    alloc_ns = sum(round(float(e["dur"]) * 1000) for e in events if e.get("cat") == "cuda_runtime"
                   and e["name"] in ("cudaMalloc", "cudaFree") and _step_of(steps, float(e["ts"])) is not None)
    assert f.impact_ns == alloc_ns > 0
    assert f.where.line == 34              # the empty_cache() line: where the cudaFree is issued


def test_empty_cache_nsys_counts_from_sql(tmp_path):
    path = tl039.empty_cache_every_step().write_nsys_sqlite(tmp_path / "t.sqlite", nvtx_ops=True)
    con = sqlite3.connect(path)
    per_step = con.execute(
        "SELECT n.text, SUM(m.memoryOperationType = 1), SUM(m.memoryOperationType = 0),"
        " SUM(CASE WHEN m.memoryOperationType = 1 THEN m.bytes ELSE 0 END)"
        " FROM CUDA_GPU_MEMORY_USAGE_EVENTS m JOIN NVTX_EVENTS n"
        " ON m.start >= n.start AND m.start < n.end AND n.text LIKE 'ProfilerStep#%'"
        " GROUP BY n.text").fetchall()
    cycled = [r for r in per_step if r[1] > 0 and r[2] > 0]
    (f,) = _lint(path, "TL039")
    assert f.occurrences == len(cycled) == 6
    assert f.metrics["released_per_iteration"].value == cycled[0][3] == 768 * MIB


def test_does_not_double_count_tl005(tmp_path):
    path = tl039.empty_cache_every_step().write_kineto(tmp_path / "t.json")
    found = _lint(path, "TL005", "TL039")
    churn = [f for f in found if f.rule == "TL039"]
    assert churn and churn[0].saving_ns is None and "TL005" in churn[0].saving_note
    assert "TL005" in churn[0].evidence[next(iter(k for k in churn[0].evidence if k.value == "kernel"))].summary


@pytest.mark.parametrize("build,fires", [(tl039.stable_cache, False), (tl039.empty_cache_after_loop, False)])
def test_near_misses_both_formats(tmp_path, build, fires):
    b = build()
    assert not _lint(b.write_kineto(tmp_path / "t.json"), "TL039")
    assert not _lint(b.write_nsys_sqlite(tmp_path / "t.sqlite", nvtx_ops=True), "TL039")


def test_cpu_temporaries_threshold(tmp_path):
    path = tl039.cpu_temporaries().write_kineto(tmp_path / "t.json")
    (f,) = _lint(path, "TL039")
    assert (f.where.file, f.where.line) == ("train.py", 20)
    assert f.metrics["transient_bytes_per_iteration"].value == 32 * MIB
    assert not _lint(path, "TL039", min_transient_bytes=33 * MIB)   # just above: silent


def test_real_gpu_trace_with_a_stable_cache_is_silent():
    path = trace_or_skip(TRACES / "torch" / "hta_v100_rank1of2.json.gz")
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    res = [e["args"]["Total Reserved"] for e in sorted(
        (e for e in events if e.get("name") == "[memory]" and e["args"]["Device Type"] == 1),
        key=lambda e: float(e["ts"]))]
    assert all(b >= a for a, b in zip(res, res[1:]))     # reserved never given back
    assert not _lint(path, "TL039")


# ----- real CPU capture: examples/alloc_churn.py and its fixed twin ---------------------------
@pytest.mark.slow
@pytest.mark.parametrize("example,fires", [("alloc_churn.py", True), ("alloc_churn_fixed.py", False)])
def test_real_capture(tmp_path, monkeypatch, example, fires):
    pytest.importorskip("torch")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    src = REPO / "examples" / example
    res = run_cli("capture", "--profile-memory", "-o", tmp_path, "--format", "json",
                  "--select", "TL039", "--", sys.executable, src)
    assert res.returncode in (0, 1), res.stderr[-2000:]
    report = json.loads(res.stdout[res.stdout.index("{"):])
    found = [f for f in report["findings"] if f["rule"] == "TL039"]
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    steps = _steps(events)
    mem = [e for e in events if e.get("name") == "[memory]" and _step_of(steps, float(e["ts"])) is not None]
    if not fires:
        assert not found
        assert sum(e["args"]["Bytes"] for e in mem if e["args"]["Bytes"] > 0) < MIB   # no temporaries
        return
    (f,) = found
    line = next(i for i, t in enumerate(src.read_text().splitlines(), 1) if "ANTI-PATTERN" in t)
    assert f["where"]["file"].endswith("alloc_churn.py") and f["where"]["line"] == line
    # allocations freed again in the same iteration (an address is allocated, then freed), all
    # from blend(): the loop runs nothing else. Four are the 8x3x512x512 float32 temporaries.
    per_step, live = {}, {}
    for e in sorted(mem, key=lambda e: float(e["ts"])):
        a, s = e["args"], _step_of(steps, float(e["ts"]))
        if a["Bytes"] > 0:
            live[a["Addr"]] = (s, a["Bytes"])
        elif live.get(a["Addr"], (None, 0))[0] == s and live[a["Addr"]][1] == -a["Bytes"]:
            per_step[s] = per_step.get(s, 0) + live.pop(a["Addr"])[1]
    values = sorted(per_step.values())
    assert f["metrics"]["transient_bytes_per_iteration"]["value"] == values[len(values) // 2]
    assert values[0] >= 4 * 8 * 3 * 512 * 512 * 4
    assert f["occurrences"] == len(steps) == len(per_step)

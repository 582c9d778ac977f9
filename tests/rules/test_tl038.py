"""TL038 cuda-graph-opportunity: region idle checked against the raw trace (json.load / SQL),
the projected saving against a hand calculation, the combined saving with TL002 (no double
counting), graph replays versus launches, and re-recording."""
from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from decimal import Decimal

import pytest

from tracelint.api import lint
from tracelint.engine.config import Config
from tracelint.synth.scenarios import tl038
from tracelint.timeline import compile_names

ONLY = Config(select=["TL038"])


def _ns(us) -> int:
    return int(Decimal(str(us)) * 1000)


def _finding(report, key):
    hits = [f for f in report.findings if f.rule == "TL038" and f.key == key]
    assert len(hits) == 1, [(f.rule, f.key) for f in report.findings]
    return hits[0]


def _idle_per_step(kernels_by_step: dict) -> int:
    """Sum over steps of the gaps between consecutive kernels (sorted by start)."""
    total = 0
    for ks in kernels_by_step.values():
        ks = sorted(ks)
        total += sum(max(0, ks[i + 1][0] - ks[i][1]) for i in range(len(ks) - 1))
    return total


def test_region_idle_matches_raw_kineto(tmp_path):
    path = tl038.launch_bound().write_kineto(tmp_path / "t.json")
    ev = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in ev if e["name"].startswith("ProfilerStep#"))
    launch_ts = {e["args"]["correlation"]: _ns(e["ts"]) for e in ev
                 if e.get("cat") == "cuda_runtime" and e["name"] == "cudaLaunchKernel"}
    by_step = defaultdict(list)
    for e in ev:
        if e.get("cat") == "kernel":
            t = launch_ts[e["args"]["correlation"]]
            step = next(i for i, (a, b) in enumerate(steps) if a <= t < b)
            by_step[step].append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])))
    idle = _idle_per_step(by_step)
    f = _finding(lint(path, ONLY), "device0")
    assert f.metrics["region_idle_ns"].value == idle == tl038.STEPS * tl038.REGION_IDLE_NS
    assert f.metrics["region_kernels"].value == sum(map(len, by_step.values())) == tl038.STEPS * tl038.N
    # a graph replays the region with one launch and the GPU runs it back to back: each step
    # loses exactly the GPU's wait between its kernels (hand: 19 x (10 + 5 - 8) µs per step)
    assert f.saving_ns == tl038.STEPS * (tl038.N - 1) * (tl038.PY_NS + tl038.API_NS - tl038.KERNEL_NS)
    assert f.saving_iterations == {s: (tl038.N - 1) * 7_000 for s in range(tl038.STEPS)}


def test_region_idle_matches_raw_nsys(tmp_path):
    path = tl038.launch_bound().write_nsys_sqlite(tmp_path / "t.sqlite")
    con = sqlite3.connect(path)
    steps = con.execute("SELECT start, end FROM NVTX_EVENTS WHERE text LIKE 'ProfilerStep#%' ORDER BY start").fetchall()
    rows = con.execute("SELECT k.start, k.end, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                       "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId").fetchall()
    con.close()
    by_step = defaultdict(list)
    for ks, ke, t in rows:
        by_step[next(i for i, (a, b) in enumerate(steps) if a <= t < b)].append((ks, ke))
    f = _finding(lint(path, ONLY), "device0")
    assert f.metrics["region_idle_ns"].value == _idle_per_step(by_step) == tl038.STEPS * tl038.REGION_IDLE_NS


def test_combined_saving_with_tl002_is_not_double_counted(tmp_path):
    """Kernels of 2 µs launched every 5 µs: TL002 (kernels shorter than their launch) and TL038
    (a repeating launch-bound region) both fire on the same idle; the report's all-fixes saving
    replays both fixes once, so it is no more than the larger of the two plus nothing."""
    path = tl038.launch_bound(kernel_ns=2_000, py_ns=0).write_kineto(tmp_path / "t.json")
    rep = lint(path, Config(select=["TL002", "TL038"]))
    by_rule = {f.rule: f.saving_ns for f in rep.findings}
    assert set(by_rule) == {"TL002", "TL038"}
    # TL038 by hand: 19 gaps of (5 - 2) µs per step
    assert by_rule["TL038"] == tl038.STEPS * (tl038.N - 1) * 3_000
    assert rep.saving_all_ns == max(by_rule.values()) < sum(by_rule.values())


def test_graph_replays_counted_and_rerecording(tmp_path):
    path = tl038.graphed(recapture=True).write_kineto(tmp_path / "t.json")
    ev = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]
    rt = [e for e in ev if e.get("cat") == "cuda_runtime"]
    steps = sorted(_ns(e["ts"]) for e in ev if e["name"].startswith("ProfilerStep#"))
    later = [e for e in rt if _ns(e["ts"]) >= steps[1]]
    f = _finding(lint(path, ONLY), "graph-rerecord")
    assert f.metrics["graph_launches"].value == sum(e["name"] == "cudaGraphLaunch" for e in rt) == tl038.STEPS
    assert f.metrics["plain_launches"].value == sum(e["name"] == "cudaLaunchKernel" for e in rt)
    assert f.metrics["captures"].value == sum(e["name"] == "cudaStreamBeginCapture" for e in later) == tl038.STEPS - 1
    assert f.metrics["instantiations"].value == sum(e["name"].startswith("cudaGraphInstantiate") for e in later)
    # host time: from each BeginCapture to the end of the instantiation that follows it
    begins = sorted(_ns(e["ts"]) for e in later if e["name"] == "cudaStreamBeginCapture")
    inst_ends = sorted(_ns(e["ts"]) + _ns(e["dur"]) for e in later if e["name"].startswith("cudaGraphInstantiate"))
    assert f.impact_ns == sum(b - a for a, b in zip(begins, inst_ends)) == (tl038.STEPS - 1) * tl038.RERECORD_NS
    assert f.saving_ns is None and f.saving_note
    assert (f.where.file, f.where.function) == ("model.py", "capture_graph")


@pytest.mark.parametrize("build", [lambda: tl038.graphed(recapture=False),
                                   lambda: tl038.launch_bound(grid_of=lambda s: (64 * (s + 1), 1, 1))],
                         ids=["graph-replayed", "shapes-change"])
def test_silent(tmp_path, build):
    assert not lint(build().write_kineto(tmp_path / "t.json"), ONLY).findings


def test_classify_graph_api():
    assert compile_names.graph_api("cudaGraphLaunch_v10000") == "launch"
    assert compile_names.graph_api("hipGraphLaunch") == "launch"
    assert compile_names.graph_api("cudaStreamBeginCapture_v10000") == "capture_begin"
    assert compile_names.graph_api("cuStreamEndCapture") == "capture_end"
    assert compile_names.graph_api("cudaGraphInstantiateWithFlags_v11040") == "instantiate"
    assert compile_names.graph_api("cudaGraphExecUpdate") == "update"
    assert compile_names.graph_api("cudaLaunchKernel") is None


def test_real_launch_bound_training_step():
    """hta_v100_rank1of2 (SGD + DDP on a V100): the same 3470 kernels on stream 7 in each of the
    5 ProfilerSteps. Recomputed from the raw JSON: kernels per step by their launch call's time,
    the gaps of at most 100 µs between consecutive ones, minus what other device work (the NCCL
    stream, copies, memsets) covers of them."""
    import bisect
    import gzip
    import itertools

    from conftest import TRACES, trace_or_skip
    path = trace_or_skip(TRACES / "torch" / "hta_v100_rank1of2.json.gz")
    with gzip.open(path) as fh:
        ev = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in ev if str(e["name"]).startswith("ProfilerStep#"))
    launch = {e["args"]["correlation"]: _ns(e["ts"]) for e in ev if e.get("cat") == "cuda_runtime"}
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e["args"].get("device") == 1]
    busy = sorted((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in gpu)
    by_step = defaultdict(list)
    for e in gpu:
        t = launch.get(e["args"].get("correlation"))
        if e.get("cat") == "kernel" and e["args"].get("stream") == 7 and t is not None:
            i = next((i for i, (a, b) in enumerate(steps) if a <= t < b), None)
            if i is not None:
                by_step[i].append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])))
    assert sorted(map(len, by_step.values())) == [3470] * 5

    merged = []                          # union of the device's busy time, in order
    for s, e in busy:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    starts = [s for s, _ in merged]

    def covered(lo, hi):
        i, out = max(bisect.bisect_right(starts, lo) - 1, 0), 0
        while i < len(merged) and merged[i][0] < hi:
            out += max(0, min(hi, merged[i][1]) - max(lo, merged[i][0]))
            i += 1
        return out

    idle = 0
    for ks in by_step.values():
        ks.sort()
        for (_, e0), (s1, _) in itertools.pairwise(ks):
            if 0 < s1 - e0 <= 100_000:
                idle += (s1 - e0) - covered(e0, s1)
    f = _finding(lint(path, ONLY), "device1")
    assert f.metrics["region_kernels"].value == 5 * 3470
    assert f.metrics["region_idle_ns"].value == idle


def test_fix_reuses_the_regions_that_check_found():
    """fix_edits reads the candidate regions check() computed for the same context (not a
    second pass over the kernels), and states the same edits as from regions found afresh."""
    from conftest import TRACES, trace_or_skip
    import tracelint
    from tracelint.engine.context import Context
    from tracelint.rules.tl038_cuda_graph_opportunity import CudaGraphOpportunity
    tl = tracelint.load(trace_or_skip(TRACES / "torch" / "hta_v100_rank1of2.json.gz"))
    ctx = Context(tl, Config(), None)
    rule = CudaGraphOpportunity()
    found = [f for f in rule.check(ctx) if f.key.startswith("device")]
    assert found
    fresh = CudaGraphOpportunity()
    calls = []
    real = CudaGraphOpportunity._candidates
    rule._candidates = lambda c, use: calls.append(1) or real(rule, c, use)
    edits, _ = rule.fix_edits(found[0], ctx)
    assert calls == [] and edits
    assert edits == fresh.fix_edits(found[0], ctx)[0]
    other = Context(tl, Config(), None)           # another context: its own regions
    rule.fix_edits(found[0], other)
    assert calls == [1]

"""The memory timeline (timeline/memory.py) from torch.profiler [memory] events and nsys
CUDA_GPU_MEMORY_USAGE_EVENTS: every expected value is computed here from the raw file
(json.load / SQL) or by hand, never taken from the code under test."""
from __future__ import annotations

import gzip
import json
import sqlite3
from collections import defaultdict

import numpy as np
import pytest

from conftest import TRACES, trace_or_skip

import tracelint
from tracelint.importers.kineto_memory import MARKER, is_memory_raw
from tracelint.synth.builder import TraceBuilder
from tracelint.synth.memory import memory
from tracelint.timeline.memory import device_memory

MIB = 1 << 20
#: Real traces recorded with profile_memory=True whose events carry "Total Allocated".
WITH_TOTALS = ["hta_v100_rank1of2.json.gz", "tracelens_h100_bert_small_inference.json.gz",
               "tracelens_h100_owlv2_inference.json.gz"]


def _raw_memory_events(path) -> list[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as fh:
        data = json.load(fh)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [e for e in events if e.get("name") == "[memory]"]


def _raw_peaks(events) -> dict[tuple[str, int], int]:
    """max "Total Allocated" per (device type, device), from the raw events."""
    kinds = {0: "cpu", 1: "cuda"}
    out: dict = defaultdict(lambda: -1)
    for e in events:
        a = e["args"]
        key = (kinds.get(a["Device Type"], "other"), -1 if a["Device Type"] == 0 else a["Device Id"])
        out[key] = max(out[key], a["Total Allocated"])
    return dict(out)


@pytest.mark.parametrize("name", WITH_TOTALS)
def test_peak_equals_the_traces_own_total_allocated(name):
    path = trace_or_skip(TRACES / "torch" / name)
    raw = _raw_memory_events(path)
    tl = tracelint.load(path)
    assert len(tl.memory) == len(raw)       # every [memory] event survives the loader
    peaks = {(d.device_type, d.device): d.peak_allocated for d in device_memory(tl)}
    assert peaks == _raw_peaks(raw)


def test_peak_reserved_iteration_and_op_on_a_real_gpu_trace():
    path = trace_or_skip(TRACES / "torch" / "hta_v100_rank1of2.json.gz")
    raw = [e for e in _raw_memory_events(path) if e["args"]["Device Type"] == 1]
    peak = max(e["args"]["Total Reserved"] for e in raw)
    at_peak = [e for e in raw if e["args"]["Total Reserved"] == peak]
    dm = next(d for d in device_memory(tracelint.load(path)) if d.device_type == "cuda")
    assert dm.peak_reserved == peak
    first = min(at_peak, key=lambda e: float(e["ts"]))         # the timeline's peak: the first
    top = next(e for e in at_peak if abs(float(e["ts"]) * 1000 - dm.at_peak_reserved["ts"]) < 1)
    assert float(top["ts"]) == float(first["ts"])
    assert dm.fragmentation_at_peak == peak - top["args"]["Total Allocated"]
    assert dm.max_fragmentation == max(e["args"]["Total Reserved"] - e["args"]["Total Allocated"]
                                       for e in raw)
    assert dm.capacity == 34089730048          # deviceProperties totalGlobalMem of the V100
    # the op at the peak: the innermost cpu_op around the event on its thread, found by hand
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    ts = float(top["ts"])
    around = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"
              and e["tid"] == top["tid"] and float(e["ts"]) <= ts <= float(e["ts"]) + float(e["dur"])]
    innermost = min(around, key=lambda e: float(e["dur"]))
    assert dm.at_peak_reserved["op"] == innermost["name"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")
             and float(e["ts"]) <= ts < float(e["ts"]) + float(e["dur"])]
    assert dm.at_peak_reserved["iteration"] == int(steps[0]["name"].split("#")[1])


def test_2021_traces_without_totals_get_the_running_sum():
    path = trace_or_skip(TRACES / "torch" / "kineto_tbplugin_resnet50_v100_2021-06.pt.trace.json.gz")
    raw = _raw_memory_events(path)
    assert "Total Allocated" not in raw[0]["args"]
    run, lo, hi = 0, 0, 0
    for e in sorted((e for e in raw if e["args"]["Device Type"] == 1), key=lambda e: float(e["ts"])):
        run += e["args"]["Bytes"]
        lo, hi = min(lo, run), max(hi, run)
    tl = tracelint.load(path)
    dm = next(d for d in device_memory(tl) if d.device_type == "cuda")
    assert dm.peak_allocated == hi - lo
    assert any("running sum" in n for n in tl.meta.notes)


def _churn_builder(empty_cache: bool) -> TraceBuilder:
    b = TraceBuilder()
    mem = memory(b)
    for s in range(3):
        with b.step(s):
            blocks = [mem.alloc(100 * MIB, op="aten::empty") for _ in range(2)]
            b.launch("gemm_kernel", 100_000, op="aten::mm")
            for a in blocks:
                mem.free(a)
            if empty_cache:
                mem.empty_cache()
    return b


def test_kineto_synthetic_series_against_raw(tmp_path):
    path = _churn_builder(True).write_kineto(tmp_path / "t.json")
    raw = _raw_memory_events(path)
    assert len(raw) == 12                                          # 3 steps x (2 allocs + 2 frees)
    tl = tracelint.load(path)
    assert "memory" in tl.meta.captured
    assert list(tl.memory["bytes"]) == [e["args"]["Bytes"] for e in raw]
    assert list(tl.memory["op"].astype(str)) == ["aten::empty", "aten::empty", "", ""] * 3
    (dm,) = device_memory(tl)
    assert dm.peak_allocated == 200 * MIB == max(e["args"]["Total Allocated"] for e in raw)
    # hand calculation: 2 MiB blocks, 100 MiB each -> reserved 200 MiB after the second alloc;
    # empty_cache gives all of it back, the next step's first event shows 100 MiB. Changes are
    # between consecutive events: the first event's reserved has no "before" (baseline unknown)
    assert dm.peak_reserved == 200 * MIB
    assert [(s.allocs, s.frees, s.alloc_bytes) for s in dm.steps] == [(2, 2, 200 * MIB)] * 3
    assert [(s.reserved_grown, s.reserved_released) for s in dm.steps] == \
        [(100 * MIB, 0), (100 * MIB, 100 * MIB), (100 * MIB, 100 * MIB)]


def test_nsys_driver_events_against_sql(tmp_path):
    path = _churn_builder(True).write_nsys_sqlite(tmp_path / "t.sqlite", nvtx_ops=True)
    con = sqlite3.connect(path)
    rows = con.execute("SELECT bytes, memoryOperationType FROM CUDA_GPU_MEMORY_USAGE_EVENTS "
                       "ORDER BY start").fetchall()
    run, peak = 0, 0
    for nbytes, op in rows:
        run += -nbytes if op == 1 else nbytes
        peak = max(peak, run)
    tl = tracelint.load(path)
    assert len(tl.memory) == len(rows) == 9                  # 3 x (2 cudaMalloc + 1 cudaFree)
    (dm,) = device_memory(tl)
    assert dm.source == "driver" and dm.peak_allocated is None
    assert dm.peak_reserved == peak == 200 * MIB
    assert set(tl.memory["op"].astype(str)) == {"aten::empty", ""}   # emit_nvtx op, cudaFree: none
    assert [(s.reserved_grown, s.reserved_released) for s in dm.steps] == [(200 * MIB, 200 * MIB)] * 3


def test_nsys_export_with_empty_memory_table_is_captured_and_empty():
    path = trace_or_skip(TRACES / "nsys" / "nsys2022.2_pipit-saxpy-mpi-cuda_a100.sqlite")
    n = sqlite3.connect(f"file:{path}?mode=ro", uri=True).execute(
        "SELECT COUNT(*) FROM CUDA_GPU_MEMORY_USAGE_EVENTS").fetchone()[0]
    tl = tracelint.load(path)
    assert n == 0 and len(tl.memory) == 0 and device_memory(tl) == []


def test_memory_hook_is_explicit():
    """The [memory] events are cpu_instant_event instants: a loader that skips instant events by
    their bytes must keep those is_memory_raw accepts."""
    ev = {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1,
          "tid": 1, "ts": 1.5, "args": {"Bytes": 8, "Total Allocated": 8, "Total Reserved": 0,
                                        "Device Type": 0, "Device Id": -1, "Addr": 1}}
    raw = json.dumps(ev).encode()
    assert MARKER in raw and is_memory_raw(raw)
    other = dict(ev, name="Iteration Start: PyTorch Profiler", args={})
    assert not is_memory_raw(json.dumps(other).encode())


def test_no_memory_events_means_no_table(tmp_path):
    b = TraceBuilder()
    with b.step(0):
        b.launch("gemm_kernel", 100_000)
    tl = tracelint.load(b.write_kineto(tmp_path / "t.json"))
    assert len(tl.memory) == 0 and "memory" not in tl.meta.captured


@pytest.mark.parametrize("seed", range(20))
def test_churn_per_iteration_equals_the_plain_sums(seed):
    from tracelint.timeline.memory import _churn
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 200))
    step = rng.integers(-1, 6, n)                     # -1: outside every iteration
    nbytes = rng.integers(-4096, 4096, n)
    res = np.where(rng.random(n) < 0.1, -1, np.cumsum(rng.integers(0, 512, n)))
    for source, r in (("allocator", res), ("allocator", None), ("driver", None)):
        got = [c.to_dict() for c in _churn(step, nbytes, r, source)]
        delta = nbytes if source == "driver" else (
            np.where((res >= 0) & (np.roll(res, 1) >= 0), np.diff(res, prepend=res[0] if n else 0), 0)
            if r is not None else np.zeros(n, np.int64))
        want = []
        for s in sorted(set(step[step >= 0].tolist())):
            b, d = nbytes[step == s], delta[step == s]
            want.append({"step": s, "allocs": int((b > 0).sum()), "alloc_bytes": int(b[b > 0].sum()),
                         "frees": int((b < 0).sum()), "free_bytes": int(-b[b < 0].sum()),
                         "reserved_grown": int(d[d > 0].sum()), "reserved_released": int(-d[d < 0].sum())})
        assert [{k: g[k] for k in w} for g, w in zip(got, want)] == want and len(got) == len(want)


def test_enclosing_ops_against_a_scan_of_the_ranges():
    """The innermost op / annotation around random instants of a real trace's threads (and of
    a thread it lacks), by a plain scan of the ranges; the Categorical the Kineto importer
    stores equals one made from those names."""
    import pandas as pd
    from tracelint.timeline.memory import enclosing_ops, enclosing_ops_categorical
    tl = tracelint.load(trace_or_skip(TRACES / "torch" / "hta_v100_rank1of2.json.gz"))
    r = tl.ranges
    rng = np.random.default_rng(7)
    pick = rng.integers(0, len(r), 300)
    pid = np.where(np.arange(300) % 10 == 0, 12345, r["pid"].to_numpy()[pick])
    tid = r["tid"].to_numpy()[pick]
    ts = r["start"].to_numpy()[pick] + rng.integers(-2_000, 20_000, 300)
    ts[:5] = r["start"].to_numpy()[pick[:5]]               # exactly at a start
    want = []
    for p, t, x in zip(pid, tid, ts):
        on = r[(r["pid"] == p) & (r["tid"] == t) & r["kind"].isin(["op", "annotation"])
               & (r["start"] <= x) & ((r["end"] > x) | (r["start"] == x)) & (r["end"] >= r["start"])]
        want.append(str(on.loc[on["depth"].idxmax(), "name"]) if len(on) else "")
    assert sum(w != "" for w in want) > 100 and "" in want
    got = enclosing_ops(r, pid, tid, ts)
    assert got.tolist() == want
    cat = enclosing_ops_categorical(r, pid, tid, ts)
    by_strings = pd.Categorical(want)
    assert list(cat.categories) == list(by_strings.categories)
    assert np.array_equal(cat.codes, by_strings.codes)


def test_owner_ranges_by_level_then_start_as_lexsort():
    """The one sort of a thread's owner ranges: the stable (depth, start) order of np.lexsort,
    whether the starts come sorted (a radix sort by depth alone) or not, with ties, and with
    depths too deep for 16 bits."""
    from tracelint.timeline.memory import _by_level_then_start
    rng = np.random.default_rng(3)
    for n, deepest in ((0, 3), (1, 3), (500, 4), (2_000, 40), (300, 1 << 20)):
        depth = rng.integers(0, deepest, n)
        start = np.sort(rng.integers(0, 50, n))            # many equal starts
        want = np.lexsort((start, depth))
        assert np.array_equal(_by_level_then_start(depth, start), want)
        shuffled = rng.permutation(start)
        assert np.array_equal(_by_level_then_start(depth, shuffled), np.lexsort((shuffled, depth)))


def test_device_rows_are_the_groups_of_device_and_type():
    """device_memory's groups without groupby: the same rows, in the same order, for every
    real trace with memory events, and for interleaved devices with a missing device type
    (dropped, as groupby drops it)."""
    import pandas as pd
    from tracelint.timeline.memory import _device_rows

    def by_groupby(m):
        return [g.index.to_numpy() for _, g in
                m.groupby(["device", "device_type"], observed=True, sort=True)]

    seen = 0
    for name in WITH_TOTALS:
        path = TRACES / "torch" / name
        if not path.exists():
            continue
        m = tracelint.load(path).memory
        got, want = _device_rows(m), by_groupby(m)
        assert len(want) >= 2 and len(got) == len(want)
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
        seen += 1
    m = pd.DataFrame({"device": [1, 0, -1, 1, 0, 1, -1],
                      "device_type": pd.Categorical(["cuda", "cuda", "cpu", None, "hip", "cuda",
                                                     "cpu"], categories=["cpu", "cuda", "hip"])})
    got, want = _device_rows(m), by_groupby(m)
    assert [a.tolist() for a in got] == [a.tolist() for a in want] == [[2, 6], [1], [4], [0, 5]]
    assert _device_rows(m.iloc[:0]) == []
    if not seen:
        pytest.skip("no shared trace with memory events")

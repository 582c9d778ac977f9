"""TL005 hidden-sync: small hand-built Timelines with every asserted number recomputed by a
plain loop, and a real-trace check against SQL."""
from __future__ import annotations

import bisect
import sqlite3

import numpy as np
import pytest

from conftest import needs_shared
from mini_tables import (GEMM, PID, RELU, TID, US, _kernels, _merge, _overlap, _ranges, _run,
                         _timeline)
from raw_traces import NSYS
from tracelint.engine.finding import Layer
from tracelint.timeline.nesting import nest
from tracelint.timeline.schema import make_table


def _frames(rows):
    """rows: (file, line, func, start, end) python frames on (PID, TID)."""
    start = np.array([r[3] for r in rows])
    end = np.array([r[4] for r in rows])
    depth, parent = nest(np.zeros(len(rows), dtype=np.int64), start, end)
    return make_table("python_frames", {
        "pid": [PID] * len(rows), "tid": [TID] * len(rows), "start": start, "end": end,
        "file": [r[0] for r in rows], "line": [r[1] for r in rows],
        "function": [r[2] for r in rows], "depth": depth, "parent": parent})


def _api(rows):
    """rows: (name, start, end, correlation)."""
    return make_table("api_calls", {
        "pid": [PID] * len(rows), "tid": [TID] * len(rows),
        "start": [r[1] for r in rows], "end": [r[2] for r in rows],
        "name": [r[0] for r in rows], "correlation": [r[3] for r in rows],
        "api": ["runtime"] * len(rows)})


def _sync_trace(n_steps=5, sync="cudaStreamSynchronize", *, at_step_end=False, busy_stream=False,
                lines=(42,), extra_api=()):
    """Per step (300 us): launch a 100 us GEMM, a blocking call at model.py:<line> that returns
    1 us after the GEMM, then (unless at_step_end) a launch whose kernel starts 5 us later."""
    api, kern, ranges, frames = [], [], [], []
    corr = 1
    for s in range(n_steps):
        t = 1_000_000 + s * 300 * US
        ranges.append((f"ProfilerStep#{s}", "step", t, t + 290 * US, s))
        frames.append(("train.py", 10, "train", t, t + 290 * US))
        api.append(("cudaLaunchKernel", t, t + 5 * US, corr))
        kern.append((GEMM, t + 4 * US, t + 104 * US, corr, 7))
        corr += 1
        for j, line in enumerate(lines):
            s0 = t + 10 * US + j * 100 * US
            end = max(s0 + 2 * US, t + 105 * US + j * 100 * US)
            if at_step_end:
                s0, end = t + 200 * US + j * 10 * US, t + 202 * US + j * 10 * US
            api.append((sync, s0, end, corr))
            frames.append(("model.py", line, "forward", s0 - US, end + US))
            corr += 1
            if not at_step_end:
                api.append(("cudaLaunchKernel", end + US, end + 6 * US, corr))
                kern.append((RELU, end + 6 * US, end + 56 * US, corr, 7))
                corr += 1
        for name, dt, dur in extra_api:
            api.append((name, t + dt, t + dt + dur, corr))
            corr += 1
        if busy_stream:
            kern.append((GEMM, t, t + 295 * US, -1, 9))
    return _timeline(api_calls=_api(api), kernels=_kernels(kern), ranges=_ranges(ranges),
                     python_frames=_frames(frames))


def _oracle_idle(calls, busy) -> int:
    """The rule's definition as a plain loop. calls: (start, end, counted) in start order; busy:
    merged GPU busy intervals. Per call, the GPU idle from its start to the first GPU activity
    after its end (none when the GPU is busy at its end), each window charged once, capped at
    the call's time; summed over the counted calls."""
    starts = [b[0] for b in busy]
    total, prev_end = 0, -1
    for s, e, counted in calls:
        i = bisect.bisect_right(starts, e)
        if i > 0 and busy[i - 1][1] > e:
            nb = e
        elif i < len(busy):
            nb = busy[i][0]
        else:
            continue
        eff = max(s, prev_end)
        prev_end = max(prev_end, nb)
        near = busy[max(bisect.bisect_right(starts, eff) - 1, 0):bisect.bisect_left(starts, nb) + 1]
        if counted:
            total += min(max(nb - eff, 0) - _overlap(eff, max(nb, eff), near), e - s)
    return total


def _reference_idle(tl, api_name):
    """(idle, host time, count) of one API's calls, by _oracle_idle."""
    k = tl.kernels
    busy = _merge(list(zip(k["start"].tolist(), k["end"].tolist())))
    calls = sorted((s, e) for n, s, e in zip(tl.api_calls["name"].astype(str), tl.api_calls["start"],
                                             tl.api_calls["end"]) if n == api_name)
    return (_oracle_idle([(s, e, True) for s, e in calls], busy),
            sum(e - s for s, e in calls), len(calls))


def test_tl005_names_python_line_and_counts():
    tl = _sync_trace()
    (f,) = _run(tl, "TL005")
    idle, blocked, n = _reference_idle(tl, "cudaStreamSynchronize")
    assert (f.where.file, f.where.line) == ("model.py", 42)
    assert f.occurrences == n == 5
    assert f.impact_ns == idle > 0
    assert f.metrics["host_blocked_ns"].value == blocked
    assert f.where.iteration == 0 and f.where.device == 0
    assert f.evidence[Layer.SYSTEM].status == "measured"
    assert f.evidence[Layer.MICROARCH].status == "not_captured"
    assert "model.py:42" in f.message


def test_tl005_one_finding_per_call_site():
    tl = _sync_trace(lines=(42, 77))
    found = _run(tl, "TL005")
    assert sorted(f.where.line for f in found) == [42, 77]
    assert all(f.occurrences == 5 for f in found)
    assert len({f.fingerprint() for f in found}) == 2


@pytest.mark.parametrize("api", ["cudaDeviceSynchronize", "cuStreamSynchronize", "hipDeviceSynchronize",
                                 "cudaEventSynchronize", "cuCtxSynchronize", "hipStreamSynchronize"])
def test_tl005_runtime_driver_and_hip_syncs(api):
    (f,) = _run(_sync_trace(sync=api), "TL005")
    assert f.key.startswith(f"sync|{api}|")


def test_tl005_near_miss_gpu_kept_busy_by_another_stream():
    assert _run(_sync_trace(busy_stream=True), "TL005") == []


def test_tl005_near_miss_sync_at_step_end_unless_asked():
    tl = _sync_trace(at_step_end=True)
    assert _run(tl, "TL005") == []
    # Asked for: the next step's launch refills the queue after each end-of-step sync.
    (f,) = _run(tl, "TL005", include_step_end=True)
    assert f.occurrences == 5


def test_tl005_stream_wait_event_and_queries_are_not_host_blocking():
    tl = _sync_trace(sync="cudaStreamWaitEvent")
    assert _run(tl, "TL005") == []
    assert _run(_sync_trace(sync="cudaEventQuery"), "TL005") == []


def test_tl005_allocator_calls_only_inside_iterations():
    # cudaFree for 150 us right after the GEMM was queued: the GPU drains during the call.
    tl = _sync_trace(sync="cudaFree")
    (f,) = _run(tl, "TL005")
    idle, blocked, n = _reference_idle(tl, "cudaFree")
    assert f.key.startswith("alloc|cudaFree") and f.impact_ns == idle and n == 5
    # Same calls with the ProfilerStep ranges removed: warm-up, not mid-iteration.
    r = tl.ranges
    tl2 = _timeline(api_calls=tl.api_calls, kernels=tl.kernels, python_frames=tl.python_frames,
                    ranges=_ranges([]))
    assert len(r) and _run(tl2, "TL005") == []
    # Stream-ordered allocation is the fix, not the problem.
    assert _run(_sync_trace(sync="cudaMallocAsync"), "TL005") == []


def test_tl005_item_named_by_enclosing_op_and_idle_capped_by_call_time():
    tl = _sync_trace()
    t = tl.api_calls
    rows = [(f"ProfilerStep#{s}", "step", 1_000_000 + s * 300 * US, 1_000_000 + s * 300 * US + 290 * US, s)
            for s in range(5)]
    for s, e, n in zip(t["start"], t["end"], t["name"].astype(str)):
        if n == "cudaStreamSynchronize":
            rows += [("aten::item", "op", s - 500, e + 500), ("aten::_local_scalar_dense", "op", s - 400, e + 400)]
    tl = _timeline(api_calls=t, kernels=tl.kernels, python_frames=tl.python_frames, ranges=_ranges(rows))
    (f,) = _run(tl, "TL005")
    assert "aten::item" in f.message and f.key.startswith("read|cudaStreamSynchronize|aten::item")


def test_tl005_synchronous_d2h_copy():
    api, kern, copies, ranges = [], [], [], []
    for s in range(4):
        t = 1_000_000 + s * 400 * US
        ranges.append((f"ProfilerStep#{s}", "step", t, t + 390 * US, s))
        api.append(("cudaLaunchKernel", t, t + 5 * US, 10 * s + 1))
        kern.append((GEMM, t + 5 * US, t + 150 * US, 10 * s + 1, 7))
        api.append(("cudaMemcpy", t + 6 * US, t + 162 * US, 10 * s + 2))
        copies.append((t + 150 * US, t + 160 * US, 10 * s + 2))
        api.append(("cudaLaunchKernel", t + 170 * US, t + 175 * US, 10 * s + 3))
        kern.append((RELU, t + 175 * US, t + 200 * US, 10 * s + 3, 7))
    cp = make_table("copies", {"device": [0] * 4, "stream": [7] * 4, "start": [c[0] for c in copies],
                               "end": [c[1] for c in copies], "correlation": [c[2] for c in copies],
                               "pid": [PID] * 4, "bytes": [4] * 4, "kind": ["D2H"] * 4,
                               "src_kind": ["device"] * 4, "dst_kind": ["pageable"] * 4,
                               "name": ["Memcpy DtoH (Device -> Pageable)"] * 4})
    tl = _timeline(api_calls=_api(api), kernels=_kernels(kern), copies=cp, ranges=_ranges(ranges))
    (f,) = _run(tl, "TL005")
    # idle per call: copy ends at +160, call returns +162, next kernel +175: 15 us (capped at 156)
    assert f.key.startswith("copy|cudaMemcpy") and f.impact_ns == 4 * 15 * US


@needs_shared()
def test_real_tl005_cloverleaf_device_syncs_vs_sql():
    """cudaDeviceSynchronize after every launch: count, host time and caused GPU idle."""
    import tracelint
    path = NSYS / "nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite"
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    calls = con.execute(  # the device syncs, and the synchronous D2H copies they interleave with
        "SELECT r.start, r.end, s.value LIKE 'cudaDeviceSynchronize%' FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
        "JOIN StringIds s ON s.id = r.nameId LEFT JOIN CUPTI_ACTIVITY_KIND_MEMCPY m "
        "ON m.correlationId = r.correlationId AND m.globalPid = r.globalTid / 16777216 * 16777216 "
        "WHERE s.value LIKE 'cudaDeviceSynchronize%' OR (s.value LIKE 'cudaMemcpy\\_v%' ESCAPE '\\' "
        "AND m.copyKind = 2) ORDER BY r.start").fetchall()
    gpu = con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL "
                      "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY").fetchall()
    con.close()
    idle = _oracle_idle(calls, _merge(gpu))      # the copies shape the windows, syncs count
    syncs = [(s, e) for s, e, is_sync in calls if is_sync]
    found = _run(tracelint.load(path), "TL005")
    (f,) = [f for f in found if f.key.startswith("sync|cudaDeviceSynchronize")]
    assert f.occurrences == len(syncs) == 1312
    assert f.metrics["host_blocked_ns"].value == sum(e - s for s, e in syncs)
    assert f.impact_ns == idle


def test_tl005_sync_on_the_device_its_thread_last_launched_on():
    """With two devices in use and no sync records, a sync is placed on the device its thread
    last launched on; with one device in use, on that device."""
    tl = _sync_trace()
    k = tl.kernels
    rows = [(str(n), int(s), int(e), int(c), 7, 1) for n, s, e, c in
            zip(k["name"], k["start"], k["end"], k["correlation"])]
    other = (RELU, 500_000, 510_000, -1, 9, 0)            # device 0 in use, launched by no call
    two = _timeline(devices=(0, 1), api_calls=tl.api_calls, kernels=_kernels(rows + [other]),
                    python_frames=tl.python_frames, ranges=tl.ranges)
    one = _timeline(devices=(1,), api_calls=tl.api_calls, kernels=_kernels(rows),
                    python_frames=tl.python_frames, ranges=tl.ranges)
    for t in (two, one):
        (f,) = _run(t, "TL005")
        assert f.where.device == 1 and f.impact_ns > 0

"""TL005 hidden-sync, TL007 register-spill, TL008 tail-latency, TL009 exposed-communication.

Unit tests build small Timelines by hand and recompute every asserted number with a plain loop;
real-trace tests recompute the key number from the raw file (JSON events or SQL), not through
the importers."""
from __future__ import annotations

import bisect
import gzip
import json
import math
import sqlite3
from decimal import Decimal

import numpy as np
import pytest

from tracelint.engine.config import Config
from tracelint.engine.finding import Layer, Severity
from tracelint.api import lint
from tracelint.timeline.model import Device, Meta, Timeline
from tracelint.timeline.nesting import nest
from tracelint.timeline.schema import make_table

from conftest import TRACES, needs_shared

US = 1_000
PID = TID = 100


# ------------------------------------------------------------------------------------------
# helpers


def _ranges(rows):
    """rows: (name, kind, start, end[, step]) on thread (PID, TID); depth/parent rebuilt."""
    if not rows:
        return make_table("ranges", {})
    start = np.array([r[2] for r in rows])
    end = np.array([r[3] for r in rows])
    depth, parent = nest(np.zeros(len(rows), dtype=np.int64), start, end)
    return make_table("ranges", {
        "pid": [PID] * len(rows), "tid": [TID] * len(rows), "start": start, "end": end,
        "name": [r[0] for r in rows], "kind": [r[1] for r in rows], "depth": depth,
        "parent": parent, "step": [r[4] if len(r) > 4 else -1 for r in rows]})


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


def _kernels(rows, **cols):
    """rows: (name, start, end, correlation, stream[, device])."""
    base = {"name": [r[0] for r in rows], "start": [r[1] for r in rows],
            "end": [r[2] for r in rows], "correlation": [r[3] for r in rows],
            "stream": [r[4] for r in rows], "device": [r[5] if len(r) > 5 else 0 for r in rows],
            "pid": [PID] * len(rows)}
    base.update(cols)
    return make_table("kernels", base)


def _timeline(cc="8.0", devices=(0,), **tables):
    meta = Meta(format="kineto-json",
                devices=[Device(id=d, vendor="nvidia", compute_capability=cc) for d in devices])
    return Timeline(meta=meta, **tables)


def _run(tl, rule, **options):
    cfg = Config(select=[rule], options={rule: options} if options else {})
    return [f for f in lint(tl, cfg).findings if f.rule == rule]


def _merge(iv):
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _overlap(s, e, merged):
    return sum(max(0, min(e, b) - max(s, a)) for a, b in merged)


def _percentile(values, q):
    """Linear interpolation between closest ranks (type 7), written out."""
    v = sorted(values)
    h = (len(v) - 1) * q / 100
    lo = math.floor(h)
    return v[lo] + (h - lo) * (v[min(lo + 1, len(v) - 1)] - v[lo])


# ------------------------------------------------------------------------------------------
# TL005 hidden-sync

GEMM = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8"
RELU = "void at::native::vectorized_elementwise_kernel<4, relu>"


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


def _reference_idle(tl, api_name):
    """Plain loop: per call, GPU idle from its start to the first GPU activity after its end
    (none when the GPU is busy at its end), windows charged once, capped at the call's time."""
    k = tl.kernels
    busy = _merge(list(zip(k["start"].tolist(), k["end"].tolist())))
    starts = [b[0] for b in busy]
    calls = [(s, e) for n, s, e in zip(tl.api_calls["name"].astype(str), tl.api_calls["start"],
                                       tl.api_calls["end"]) if n == api_name]
    total, prev_end = 0, -1
    for s, e in sorted(calls):
        i = bisect.bisect_right(starts, e)
        if i > 0 and busy[i - 1][1] > e:
            nb = e
        elif i < len(busy):
            nb = busy[i][0]
        else:
            continue
        eff = max(s, prev_end)
        prev_end = max(prev_end, nb)
        idle = max(nb - eff, 0) - _overlap(eff, max(nb, eff), busy)
        total += min(idle, e - s)
    return total, sum(e - s for s, e in calls), len(calls)


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


# ------------------------------------------------------------------------------------------
# TL007 register-spill

FUSED = "triton_per_fused_add_gelu_native_layer_norm_0"


def _reg_occupancy(regs, threads, max_warps=64, regs_sm=65536, max_blocks=32):
    """Written out from the CUDA occupancy calculator: per-warp allocation in 256s."""
    warps = -(-threads // 32)
    per_warp = -(-regs * 32 // 256) * 256
    blocks = min((regs_sm // per_warp) // warps, max_warps // warps, max_blocks)
    return blocks * warps / max_warps


def _spill_trace(regs, local, block=256, name=FUSED, cc="8.0", fused_ns=300 * US):
    rows, cols = [], {"registers_per_thread": [], "local_mem_per_thread": [], "block_x": []}
    for i in range(4):
        t = 1_000_000 + i * 1_000 * US
        rows.append((name, t, t + fused_ns, -1, 7))
        rows.append((RELU, t + fused_ns, t + fused_ns + 200 * US, -1, 7))
        cols["registers_per_thread"] += [regs, 24]
        cols["local_mem_per_thread"] += [local, 0]
        cols["block_x"] += [block, 128]
    n = len(rows)
    return _timeline(cc=cc, kernels=_kernels(rows, block_y=[1] * n, block_z=[1] * n, **cols))


def test_tl007_register_cap():
    tl = _spill_trace(regs=255, local=0)
    (f,) = _run(tl, "TL007")
    occ = _reg_occupancy(255, 256)
    assert occ == 0.125
    assert f.metrics["theoretical_occupancy"].value == occ
    assert f.impact_ns == 4 * 300 * US and f.occurrences == 4
    assert f.where.kernel == FUSED and f.key == f"regcap|{FUSED}"
    k = f.evidence[Layer.KERNEL]
    assert k.facts["registers_per_thread"].value == 255 and k.facts["threads_per_block"].value == 256


def test_tl007_turing_limits_and_unknown_gpu():
    # cc 7.5: 32 warps per SM; 200 regs x 256 threads: 10 warps by registers = 1 block = 25 %
    assert _run(_spill_trace(regs=200, local=0, cc="7.5"), "TL007") == []
    (f,) = _run(_spill_trace(regs=200, local=0, cc="7.5"), "TL007", max_occupancy=0.3)
    assert f.metrics["theoretical_occupancy"].value == _reg_occupancy(200, 256, max_warps=32, max_blocks=16)
    (g,) = _run(_spill_trace(regs=255, local=0, cc=None), "TL007")
    assert "assumed 65536 registers" in g.evidence[Layer.KERNEL].summary


def test_tl007_spill_and_not_captured_launch_config():
    (f,) = _run(_spill_trace(regs=128, local=96), "TL007")
    assert f.key == f"spill|{FUSED}" and f.metrics["local_mem_per_thread"].value == 96
    (g,) = _run(_spill_trace(regs=-1, local=32), "TL007")
    assert g.evidence[Layer.KERNEL].status == "not_captured"


def test_tl007_near_misses():
    assert _run(_spill_trace(regs=40, local=0), "TL007") == []            # full occupancy
    assert _run(_spill_trace(regs=128, local=-1), "TL007") == []          # 25 %: not below
    assert _run(_spill_trace(regs=-1, local=-1), "TL007") == []           # nothing captured
    gemm = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
    assert _run(_spill_trace(regs=255, local=0, name=gemm), "TL007") == []  # by design
    assert _run(_spill_trace(regs=128, local=64, fused_ns=2 * US), "TL007") == []  # 1 % share
    # the class exemption is an option
    assert len(_run(_spill_trace(regs=255, local=0, name=gemm), "TL007", regcap_skip_classes=())) == 1


# ------------------------------------------------------------------------------------------
# TL008 tail-latency


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


# ------------------------------------------------------------------------------------------
# TL009 exposed-communication

AR = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def _comm_trace(overlap_us):
    """Per step: compute on stream 7 for 300 us; a 200 us all-reduce on stream 20 that starts
    overlap_us before compute ends."""
    rows = []
    for i in range(5):
        t = 1_000_000 + i * 1_000 * US
        rows.append((GEMM, t, t + 300 * US, -1, 7))
        c0 = t + (300 - overlap_us) * US
        rows.append((AR, c0, c0 + 200 * US, -1, 20))
        rows.append((RELU, c0 + 200 * US + 5 * US, c0 + 260 * US, -1, 7))
    return _timeline(kernels=_kernels(rows))


def _reference_exposed(tl, device=0):
    k = tl.kernels
    comm, comp = [], []
    for n, s, e, d in zip(k["name"].astype(str), k["start"], k["end"], k["device"]):
        if d != device:
            continue
        (comm if "nccl" in n.lower() else comp).append((s, e))
    merged = _merge(comp)
    total = sum(e - s for s, e in comm)
    return total, total - sum(_overlap(s, e, merged) for s, e in comm)


def test_tl009_exposed_allreduce():
    tl = _comm_trace(overlap_us=50)
    (f,) = _run(tl, "TL009")
    total, exposed = _reference_exposed(tl)
    assert exposed == 5 * 150 * US
    assert f.impact_ns == exposed and f.metrics["comm_ns"].value == total
    assert f.key == "AllReduce|device0" and f.where.stream == 20 and f.occurrences == 5


def test_tl009_near_miss_hidden_under_compute_on_another_stream():
    assert _run(_comm_trace(overlap_us=300), "TL009") == []


def test_tl009_compute_on_another_device_does_not_hide_it():
    rows = []
    for i in range(5):
        t = 1_000_000 + i * 1_000 * US
        rows.append((GEMM, t, t + 900 * US, -1, 7, 0))
        rows.append((GEMM, t, t + 100 * US, -1, 7, 1))
        rows.append((AR, t + 100 * US, t + 400 * US, -1, 20, 1))
    tl = _timeline(kernels=_kernels(rows), devices=(0, 1))
    (f,) = _run(tl, "TL009")
    assert f.where.device == 1 and f.impact_ns == _reference_exposed(tl, device=1)[1] == 5 * 300 * US


# ------------------------------------------------------------------------------------------
# real traces: the key number recomputed from the raw file

NSYS = TRACES / "nsys"
TORCH = TRACES / "torch"


def _ns(x) -> int:
    return int(Decimal(str(x)) * 1000)


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
    busy = _merge(gpu)
    starts = [b[0] for b in busy]
    idle, prev_end, syncs = 0, -1, []
    for s, e, is_sync in calls:   # the rule's definition, written as a loop
        if is_sync:
            syncs.append((s, e))
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
        if is_sync:
            idle += min(max(nb - eff, 0) - _overlap(eff, max(nb, eff), near), e - s)
    found = _run(tracelint.load(path), "TL005")
    (f,) = [f for f in found if f.key.startswith("sync|cudaDeviceSynchronize")]
    assert f.occurrences == len(syncs) == 1312
    assert f.metrics["host_blocked_ns"].value == sum(e - s for s, e in syncs)
    assert f.impact_ns == idle


@needs_shared()
def test_real_tl009_nccl_allreduce_vs_json():
    import tracelint
    path = TORCH / "hta_nccl_a100_rank0of2.json.gz"
    ev = json.load(gzip.open(path))["traceEvents"]
    ks = [e for e in ev if e.get("cat") == "kernel" and e.get("ph") == "X" and e["args"].get("device") == 0]
    comm = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in ks if "AllReduce" in e["name"]]
    comp = _merge([(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in ks if "nccl" not in e["name"]])
    total = sum(e - s for s, e in comm)
    exposed = total - sum(_overlap(s, e, comp) for s, e in comm)
    (f,) = [f for f in _run(tracelint.load(path), "TL009") if f.key == "AllReduce|device0"]
    assert f.metrics["comm_ns"].value == total and f.impact_ns == exposed
    assert f.occurrences == len(comm) == 15


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


@needs_shared()
def test_real_tl007_register_cap_vs_sql():
    """TensorRT convolutions on an RTX 3090 (cc 8.6): which kernels registers cap below 25 %,
    recomputed per launch from the SQL rows (GEMM exemption off). Registers must be the one
    binding limit: a tie with shared memory (one block either way) is not a register cap."""
    import tracelint
    path = NSYS / "nsys2023.1_memfusion-tensorrt-conv_rtx3090.sqlite"
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT s.value, k.end - k.start, k.registersPerThread, k.blockX * k.blockY * k.blockZ, "
        "k.staticSharedMemory + k.dynamicSharedMemory, k.localMemoryPerThread "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName").fetchall()
    con.close()
    total = sum(r[1] for r in rows)
    expected: dict[str, list] = {}
    ties = set()
    for name, dur, regs, threads, smem, local in rows:
        # cc 8.6: 48 warps, 16 blocks, 100 KiB shared memory per SM (+1 KiB reserved per block)
        warps = -(-threads // 32)
        by_regs = (65536 // (-(-regs * 32 // 256) * 256)) // warps
        other = min(48 // warps, 16, (100 * 1024) // (smem + 1024) if smem else 10**9)
        occ = min(by_regs, other) * warps / 48
        if local > 0 or (by_regs < other and occ < 0.25):
            expected.setdefault(name, []).append((dur, occ, regs))
        elif by_regs == other and occ < 0.25:
            ties.add(name)
    expected = {n: v for n, v in expected.items() if sum(d for d, _, _ in v) >= 0.02 * total}
    tl = tracelint.load(path)
    assert _run(tl, "TL007") == []               # tensor-core convolutions: low occupancy by design
    found = {f.where.kernel: f for f in _run(tl, "TL007", regcap_skip_classes=())}
    assert set(found) == set(expected) and ties and not ties & set(found)
    for name, launches in expected.items():
        f = found[name]
        assert f.impact_ns == sum(d for d, _, _ in launches) and f.occurrences == len(launches)
        assert f.metrics["registers_per_thread"].value == launches[0][2]
        assert f.metrics["theoretical_occupancy"].value == pytest.approx(launches[0][1], abs=1e-4)

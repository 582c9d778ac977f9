"""TL004 unoverlapped-copy: hand-built copies with the key numbers recomputed by plain loops,
near-misses that must stay silent, and a real-trace cross-check."""
from __future__ import annotations

import sqlite3

import pytest

from conftest import needs_shared
from mini_trace import US, Trace, lint, union_len
from raw_traces import NSYS, load


def uncovered(query, cover):
    """Length of the union of `query` intervals not covered by the union of `cover`."""
    both = union_len(list(query) + list(cover))
    return both - union_len(cover)


def copy_trace(pinned_overlapped=False):
    t = Trace()
    if pinned_overlapped:
        t.kernel("volta_sgemm_128x64_nn", 0, 3000 * US, stream=7)
        t.copy("H2D", 100 * US, 1000 * US, 16 << 20, src="pinned", stream=8)
        t.copy("D2H", 1500 * US, 800 * US, 8 << 20, src="device", dst="pinned", stream=8)
        return t
    t.kernel("volta_sgemm_128x64_nn", 0, 300 * US, stream=7)
    t.copy("H2D", 400 * US, 1000 * US, 16 << 20, stream=7)                 # fully exposed, same stream
    t.kernel("volta_sgemm_128x64_nn", 1500 * US, 300 * US, stream=7)
    t.copy("H2D", 1700 * US, 400 * US, 16 << 20, src="pinned", stream=8)   # half overlapped
    t.kernel("ncclDevKernel_AllReduce_Sum_f32", 1800 * US, 500 * US, stream=9)  # comm is not compute
    t.copy("H2D", 2300 * US, 2 * US, 1024, stream=7)                        # tiny: ignored
    return t


def test_tl004_unoverlapped_h2d():
    t = copy_trace()
    (f,) = lint(t.timeline(), "TL004")
    compute = [(k["start"], k["end"]) for k in t.k if "nccl" not in k["name"]]
    copies = [(c["start"], c["end"]) for c in t.c if c["kind"] == "H2D" and c["bytes"] >= 65_536]
    assert f.impact_ns == uncovered(copies, compute) == 1000 * US + 300 * US
    assert f.key == "device0/H2D"
    sysf = f.evidence["system"].facts
    assert sysf["pageable_copies"].value == 1 and sysf["same_stream_copies"].value == 1
    assert sysf["copies"].value == 2
    kf = f.evidence["kernel"].facts
    assert kf["bytes"].value == 2 * (16 << 20)
    assert kf["achieved_gbps"].value == pytest.approx(2 * (16 << 20) / (1400 * US), abs=0.01)
    assert "link_peak_gbps" not in kf     # the timeline names no GPU: no PCIe generation is guessed
    assert (f.where.start_ns, f.where.end_ns) == (400 * US, 1400 * US)


def test_tl004_near_miss_pinned_and_overlapped():
    assert lint(copy_trace(pinned_overlapped=True).timeline(), "TL004") == []


def test_tl004_min_bytes():
    t = Trace()
    t.copy("D2H", 0, 500 * US, 1000, src="device")
    t.kernel("k", 600 * US, 100 * US)
    assert lint(t.timeline(), "TL004") == []
    assert len(lint(t.timeline(), "TL004", min_bytes=1)) == 1


@needs_shared()
def test_tl004_real_saxpy_pageable_copies():
    path = NSYS / "nsys2022.2_pipit-saxpy-mpi-cuda_a100.sqlite"
    findings = {f.key: f for f in lint(load(path), "TL004")}
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    kernels = con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = 0").fetchall()
    for copy_kind, key in ((1, "device0/H2D"), (2, "device0/D2H")):
        copies = con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = ? AND "
                             "deviceId = 0 AND bytes >= 65536", (copy_kind,)).fetchall()
        assert findings[key].impact_ns == uncovered(copies, kernels)
        assert findings[key].metrics["pageable_copies"].value == len(copies)   # srcKind/dstKind 0 = pageable
    con.close()

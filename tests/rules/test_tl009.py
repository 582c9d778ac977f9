"""TL009 exposed-communication: small hand-built Timelines with the exposed time recomputed
by a plain loop, and a real-trace check against the raw JSON."""
from __future__ import annotations

import gzip
import json

from conftest import needs_shared
from mini_tables import GEMM, RELU, US, _kernels, _merge, _overlap, _run, _timeline
from raw_traces import TORCH, _ns


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

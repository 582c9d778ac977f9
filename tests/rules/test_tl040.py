"""TL040 memory-peak-near-capacity: expected values from the raw files or by hand."""
from __future__ import annotations

import gzip
import json
import sqlite3

from conftest import TRACES, trace_or_skip

import tracelint
from tracelint.engine.config import Config
from tracelint.synth.scenarios import tl040

GIB = 1 << 30


def _lint(path, **options):
    return tracelint.lint(path, Config(select=["TL040"], options={"TL040": options} if options else {})).findings


def test_peak_share_iteration_and_op_kineto(tmp_path):
    path = tl040.peak_run().write_kineto(tmp_path / "t.json")
    data = json.loads(path.read_text())
    cap = data["deviceProperties"][0]["totalGlobalMem"]
    mem = [e for e in data["traceEvents"] if e.get("name") == "[memory]"]
    peak = max(e["args"]["Total Reserved"] for e in mem)
    (f,) = _lint(path)
    assert f.metrics["peak_share"].value == round(peak / cap, 4) == round(76 * GIB / 85018279936, 4)
    assert f.where.iteration == 2 and "aten::cat" in f.message and f.where.line == 52
    assert f.saving_ns is None and f.saving_note


def test_peak_from_nsys_driver_events(tmp_path):
    path = tl040.peak_run().write_nsys_sqlite(tmp_path / "t.sqlite", nvtx_ops=True)
    con = sqlite3.connect(path)
    run = peak = 0
    for nbytes, op in con.execute("SELECT bytes, memoryOperationType FROM "
                                  "CUDA_GPU_MEMORY_USAGE_EVENTS ORDER BY start"):
        run += -nbytes if op else nbytes
        peak = max(peak, run)
    cap = con.execute("SELECT totalMemory FROM TARGET_INFO_GPU").fetchone()[0]
    (f,) = _lint(path)
    assert f.metrics["peak_bytes"].value == peak and f.metrics["capacity_bytes"].value == cap
    assert f.where.iteration == 2 and "aten::cat" in f.message


def test_no_memory_size_no_finding(tmp_path):
    b = tl040.peak_run(props={"totalGlobalMem": None})
    assert not _lint(b.write_kineto(tmp_path / "t.json"))
    assert not _lint(b.write_nsys_sqlite(tmp_path / "t.sqlite"))


def test_real_v100_trace_against_raw():
    path = trace_or_skip(TRACES / "torch" / "hta_v100_rank1of2.json.gz")
    with gzip.open(path, "rt") as fh:
        data = json.load(fh)
    cap = next(p["totalGlobalMem"] for p in data["deviceProperties"] if p["id"] == 1)
    mem = [e for e in data["traceEvents"] if e.get("name") == "[memory]" and e["args"]["Device Type"] == 1]
    peak = max(e["args"]["Total Reserved"] for e in mem)
    assert peak / cap < 0.9
    assert not _lint(path)                                  # 37.5 % of 32 GB: no risk
    (f,) = _lint(path, min_share=round(peak / cap, 3) - 0.001)   # just below the share: reported
    assert f.metrics["peak_bytes"].value == peak and f.where.device == 1
    first = min((e for e in mem if e["args"]["Total Reserved"] == peak), key=lambda e: float(e["ts"]))
    steps = [e for e in data["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")
             and float(e["ts"]) <= float(first["ts"]) < float(e["ts"]) + float(e["dur"])]
    assert f.where.iteration == int(steps[0]["name"].split("#")[1])

"""TL013 idle-before-first-kernel: the idle from each iteration's start to its first GPU
activity, what the host did then, and the replayed saving. Expected values come from the raw
files (json.load / SQL) and the builder's own clock constants, not from the rule."""
from __future__ import annotations

import gzip
import json
import sqlite3

import pytest

from tracelint.api import lint
from tracelint.engine.config import Config
from tracelint.engine.finding import Layer
from tracelint.synth.builder import TraceBuilder
from tracelint.synth.scenarios import tl013 as sc

FORMATS = ("kineto", "nsys")


def _write(b, fmt, tmp_path):
    path = tmp_path / ("t.json.gz" if fmt == "kineto" else "t.sqlite")
    (b.write_kineto if fmt == "kineto" else b.write_nsys_sqlite)(path)
    return path


def _raw_head_idle(path, fmt) -> list[int]:
    """Per iteration after the first: first kernel start minus step start, from the raw file."""
    if fmt == "kineto":
        ev = [e for e in json.load(gzip.open(path))["traceEvents"] if e.get("ph") == "X"]
        ns = lambda us: int(round(float(us) * 1000))     # noqa: E731
        steps = sorted(ns(e["ts"]) for e in ev if e["name"].startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation")
        kernels = [ns(e["ts"]) for e in ev if e.get("cat") == "kernel"]
    else:
        db = sqlite3.connect(path)
        steps = sorted(r[0] for r in db.execute("SELECT start FROM NVTX_EVENTS WHERE text LIKE 'ProfilerStep#%'"))
        kernels = [r[0] for r in db.execute("SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL")]
    return [min(k for k in kernels if k >= s) - s for s in steps[1:]]


def _lint(path, rules=("TL013",)):
    return lint(path, Config(select=list(rules)))


@pytest.mark.parametrize("fmt", FORMATS)
def test_fires_with_raw_idle_and_names_the_loader(fmt, tmp_path):
    path = _write(sc.load_first(), fmt, tmp_path)
    heads = _raw_head_idle(path, fmt)
    (f,) = _lint(path).findings
    assert f.impact_ns == sum(heads)
    assert f.occurrences == sc.STEPS - 1
    assert f.metrics["median_idle_ns"].value == sorted(heads)[len(heads) // 2]
    assert f"data loading `{sc.NEXT}`" in f.message
    assert f"({sc.LOAD_NS / 1e6:.2f} ms per iteration" in f.message
    facts = f.evidence[Layer.SYSTEM].facts
    assert facts["top_activity_ns"].value == (sc.STEPS - 1) * sc.LOAD_NS     # the planted loads
    assert facts["top_category_ns"].value == (sc.STEPS - 1) * sc.LOAD_NS
    if fmt == "kineto":
        assert (f.where.file, f.where.line) == ("train.py", 42)
    assert "num_workers" in f.fix


@pytest.mark.parametrize("fmt", FORMATS)
def test_saving_is_the_removed_loading_and_counted_once(fmt, tmp_path):
    path = _write(sc.load_first(), fmt, tmp_path)
    report = _lint(path, ("TL001", "TL013"))
    (f13,) = [f for f in report.findings if f.rule == "TL013"]
    removed = (sc.STEPS - 1) * sc.LOAD_NS       # GPU-bound after it: each iteration shorter by it
    assert abs(f13.saving_ns - removed) <= 0.02 * removed
    assert all(f.saving_ns is None for f in report.findings if f.rule == "TL001")
    assert report.saving_all_ns == f13.saving_ns     # TL001 adds no edit: the idle counts once


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("build", [sc.load_overlapped, sc.load_first_warmup_only])
def test_near_misses_silent(fmt, build, tmp_path):
    assert _lint(_write(build(), fmt, tmp_path)).findings == []


def test_one_iteration_is_not_enough(tmp_path):
    b = TraceBuilder()
    with b.step(0):
        sc._load(b)
        sc._gpu(b)
    assert _lint(_write(b, "kineto", tmp_path)).findings == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_unrecorded_host_work_states_no_saving(fmt, tmp_path):
    """Host time with nothing recorded before the first kernel: named as such, no edit."""
    b = TraceBuilder()
    for s in range(4):
        with b.step(s):
            b.cpu(1_000_000)
            sc._gpu(b)
            b.sync("cudaStreamSynchronize")
    (f,) = _lint(_write(b, fmt, tmp_path)).findings
    assert "no host activity recorded (1.00 ms per iteration" in f.message
    assert f.saving_ns is None and "nothing is recorded" in f.saving_note
    assert "with_stack=True" in f.fix


def test_gc_at_iteration_start_is_named(tmp_path):
    """Kineto `Python GC` events (record_python_gc_info) before the first kernel: GC is named
    and its fix is gc.freeze/gc.disable."""
    b, gc = TraceBuilder(), []
    for s in range(4):
        with b.step(s):
            with b.python("train.py", 30, "train"):
                gc.append((b.cursor, b.cursor + 800_000))
                b.cpu(800_000)
            sc._gpu(b)
            b.sync("cudaStreamSynchronize")
    path = tmp_path / "t.json.gz"
    b.write_kineto(path)
    d = json.load(gzip.open(path))
    d["traceEvents"] += [{"ph": "X", "cat": "python_function", "name": "Python GC", "pid": b.pid,
                          "tid": b.tid, "ts": s / 1000, "dur": (e - s) / 1000, "args": {}} for s, e in gc]
    with gzip.open(path, "wt") as fh:
        json.dump(d, fh)
    (f,) = _lint(path).findings
    assert "Python garbage collection `Python GC` (0.80 ms per iteration" in f.message
    assert "in `train()`, defined at train.py:30" in f.message and "gc.freeze()" in f.fix
    assert f.saving_ns is not None and f.saving_ns > 0


def test_launches_from_another_thread_state_no_saving(tmp_path):
    """Half of each iteration's kernels launched from a second host thread (as the autograd
    engine's backward thread does): the replay cannot move that thread with this one, so no
    saving is stated, and the finding itself is unchanged."""
    path = _write(sc.load_first(), "kineto", tmp_path)
    d = json.load(gzip.open(path))
    launches = sorted((e for e in d["traceEvents"] if e.get("name") == "cudaLaunchKernel"), key=lambda e: e["ts"])
    for i, e in enumerate(launches):
        if i % 8 >= 4:
            e["tid"] = e["tid"] + 1
    with gzip.open(path, "wt") as fh:
        json.dump(d, fh)
    (f,) = _lint(path).findings
    assert f.impact_ns == sum(_raw_head_idle(path, "kineto"))
    assert f.saving_ns is None and "other host threads" in f.saving_note

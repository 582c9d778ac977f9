"""TL032 blocking-or-pageable-h2d: the host time blocked in upload calls, the cause and the
Python line, checked against the raw files (json.load of the Kineto trace, SQL on the nsys
export); no double report of TL033's constants; the combined saving with TL005 (the same stream
sync) counts shared time once; a real torch.profiler trace of ResNet-50 training with pageable batches."""
from __future__ import annotations

import gzip
import json
import sqlite3
from decimal import Decimal

import pytest

from conftest import TRACES, trace_or_skip
from tracelint.api import lint
from tracelint.engine.config import Config
from tracelint.engine.finding import Layer
from tracelint.synth.scenarios import tl032

RESNET = TRACES / "torch" / "kineto_tbplugin_resnet50_v100_2021-06.pt.trace.json.gz"


def _ns(x) -> int:
    return int(Decimal(str(x)) * 1000)


def _kineto_events(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as fh:
        data = json.load(fh)
    return [e for e in data["traceEvents"] if e.get("ph") == "X"]


def _kineto_blocked(path) -> tuple[int, int]:
    """(host ns in the upload calls that waited + the stream syncs right after them, uploads)
    inside ProfilerStep ranges, from the raw events."""
    ev = _kineto_events(path)
    steps = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in ev if e["name"].startswith("ProfilerStep#")
             and e.get("cat") in ("user_annotation", "cpu_instant_event", "cpu_op", "Operator")]
    runtime = sorted((e for e in ev if e.get("cat") in ("cuda_runtime", "Runtime")), key=lambda e: e["ts"])
    h2d = {e["args"]["correlation"]: e for e in ev if e.get("cat") in ("gpu_memcpy", "Memcpy")
           and "HtoD" in e["name"]}
    total = n = 0
    for i, call in enumerate(runtime):
        copy = h2d.get(call["args"].get("correlation"))
        if copy is None:
            continue
        cs = _ns(call["ts"])
        if not any(a <= cs < b for a, b in steps):
            continue
        ce, xs, xe = cs + _ns(call["dur"]), _ns(copy["ts"]), _ns(copy["ts"]) + _ns(copy["dur"])
        blocked = 0
        if 2 * max(0, min(ce, xe) - max(cs, xs)) >= xe - xs:      # the call covered the copy
            blocked += ce - cs
        nxt = next((r for r in runtime[i + 1:] if r["tid"] == call["tid"]), None)
        if nxt is not None and nxt["name"] == "cudaStreamSynchronize" and _ns(nxt["ts"]) - ce <= 50_000:
            blocked += _ns(nxt["dur"])
        if blocked:
            total, n = total + blocked, n + 1
    return total, n


def _nsys_blocked(path) -> tuple[int, int]:
    """The same from the SQLite export: runtime rows joined to MEMCPY rows (copyKind 1)."""
    con = sqlite3.connect(path)
    rows = con.execute(
        "SELECT r.start, r.end, r.globalTid, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
        "JOIN StringIds s ON s.id = r.nameId ORDER BY r.start").fetchall()
    copies = {c: (s, e) for c, s, e in con.execute(
        "SELECT correlationId, start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1")}
    corr = dict(con.execute("SELECT start, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME"))
    con.close()
    total = n = 0
    for i, (cs, ce, tid, name) in enumerate(rows):
        cp = copies.get(corr[cs])
        if cp is None or not name.startswith("cudaMemcpy"):
            continue
        blocked = ce - cs if 2 * max(0, min(ce, cp[1]) - max(cs, cp[0])) >= cp[1] - cp[0] else 0
        nxt = next((r for r in rows[i + 1:] if r[2] == tid), None)
        if nxt is not None and nxt[3].startswith("cudaStreamSynchronize") and nxt[0] - ce <= 50_000:
            blocked += nxt[1] - nxt[0]
        if blocked:
            total, n = total + blocked, n + 1
    return total, n


def _lint(b, fmt, tmp_path, rules=("TL032",)):
    path = tmp_path / ("t.json.gz" if fmt == "kineto" else "t.sqlite")
    if fmt == "kineto":
        b.write_kineto(path)
    else:
        b.write_nsys_sqlite(path)
    return path, lint(path, Config(select=list(rules)), match_cases=False)


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
@pytest.mark.parametrize("src_kind", ["pageable", "pinned"])
def test_blocked_time_matches_raw_file(fmt, src_kind, tmp_path):
    path, report = _lint(tl032.loop(src_kind), fmt, tmp_path)
    want, n = (_kineto_blocked if fmt == "kineto" else _nsys_blocked)(path)
    assert n == tl032.STEPS
    (f,) = [x for x in report.findings if x.rule == "TL032"]
    assert f.metrics["blocked_ns"].value == want == f.impact_ns
    assert f.occurrences == n
    pageable = f.metrics["pageable_copies"].value
    assert pageable == (n if src_kind == "pageable" else 0)
    assert f.metrics["synced_copies"].value == n
    # the fix follows the cause: pin only when the source was pageable
    assert ("pin_memory=True" in f.fix) == (src_kind == "pageable")
    assert "non_blocking=True" in f.fix
    if fmt == "kineto":
        assert (f.where.file, f.where.line) == ("train.py", tl032.LINE)
    # the host can prepare the batch (1 ms of aten::stack per step) while the copy runs
    assert 0 < f.saving_ns <= want
    assert f.saving_ns >= tl032.STEPS * 900_000


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_pinned_non_blocking_is_silent(fmt, tmp_path):
    _, report = _lint(tl032.loop("pinned", non_blocking=True), fmt, tmp_path)
    assert not [f for f in report.findings if f.rule == "TL032"]


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_explicit_synchronize_after_a_pinned_copy(fmt, tmp_path):
    """A pinned non_blocking copy followed by torch.cuda.synchronize(): the sync is the cause,
    not the memory or non_blocking; the wait is the device sync's duration from the raw file."""
    path, report = _lint(tl032.loop("pinned", non_blocking=True, explicit_sync=True), fmt, tmp_path)
    (f,) = [x for x in report.findings if x.rule == "TL032"]
    assert f.evidence[Layer.SYSTEM].facts["explicit_sync_copies"].value == tl032.STEPS
    assert f.metrics["pageable_copies"].value == 0
    assert "Drop the synchronize" in f.fix and "pin_memory" not in f.fix
    if fmt == "kineto":
        ev = _kineto_events(path)
        syncs = sorted((e for e in ev if e["name"] == "cudaDeviceSynchronize"), key=lambda e: e["ts"])
        # the first device sync of each step follows the copy; the second ends the step
        want = sum(_ns(e["dur"]) for e in syncs[0::2])
        assert len(syncs) == 2 * tl032.STEPS and f.metrics["blocked_ns"].value == want


def test_constant_is_left_to_tl033(tmp_path):
    """torch.zeros(...).to(device) blocks too, but TL033 names it (its fix removes the copy)."""
    _, report = _lint(tl032.loop(constant=True), "kineto", tmp_path, rules=("TL032", "TL033"))
    rules = sorted(f.rule for f in report.findings)
    assert rules == ["TL033"], rules


def test_combined_saving_counts_shared_time_once(tmp_path):
    """A pinned upload with non_blocking=False: its stream sync is also TL005's hidden sync.
    Both findings project the same saving; the report's saving_all_ns replays both fixes
    together, so the shared time is counted once, not twice."""
    _, report = _lint(tl032.loop("pinned"), "kineto", tmp_path, rules=("TL005", "TL032"))
    by = {f.rule: f for f in report.findings}
    assert set(by) == {"TL005", "TL032"}
    assert by["TL005"].saving_ns > 0 and by["TL032"].saving_ns > 0
    assert report.saving_all_ns == max(by["TL005"].saving_ns, by["TL032"].saving_ns)
    assert report.saving_all_ns < by["TL005"].saving_ns + by["TL032"].saving_ns


def test_real_resnet50_pageable_batches():
    """torch.profiler's ResNet-50 tutorial trace: batches `.to(device)` from pageable memory
    with non_blocking=False, each followed by a stream sync, at line 44 of the script."""
    path = trace_or_skip(RESNET)
    want, n = _kineto_blocked(path)
    report = lint(path, Config(select=["TL032"]), match_cases=False)
    (f,) = [x for x in report.findings if x.rule == "TL032"]
    assert n == 12 and f.occurrences == n
    assert f.metrics["blocked_ns"].value == want
    assert f.metrics["pageable_copies"].value == n and f.metrics["synced_copies"].value == n
    # the script's frame in the `Call stack` of the aten::to around the first upload call
    ev = _kineto_events(path)
    first = min((e for e in ev if e.get("cat") in ("Memcpy", "gpu_memcpy")), key=lambda e: e["ts"])
    call = next(e for e in ev if e.get("cat") in ("Runtime", "cuda_runtime")
                and e["args"].get("correlation") == first["args"]["correlation"])
    to = next(e for e in ev if e["name"] == "aten::to" and str(e["tid"]) == str(call["tid"])
              and e["ts"] <= call["ts"] < e["ts"] + e["dur"])
    frame = next(fr for fr in to["args"]["Call stack"].split(";") if fr.startswith("resnet50_profiler_api.py("))
    line = int(frame.split("(", 1)[1].split(")", 1)[0])
    assert f.where.file.endswith("resnet50_profiler_api.py") and f.where.line == line

"""TL033 cpu-tensor-moved-each-step: the copies of tensors a factory op made on the CPU just
before, counted from the raw files (json.load of the Kineto trace; SQL on the nsys export with
emit_nvtx op ranges); near-misses silent; a real ROCm trace (HTA's toy model) that builds its
inputs with torch.randn on the CPU and moves them every step."""
from __future__ import annotations

import gzip
import json
import sqlite3
from decimal import Decimal

import pytest

from conftest import TRACES, trace_or_skip
from tracelint.api import lint
from tracelint.engine.config import Config
from tracelint.synth.scenarios import tl033

MINITOY = TRACES / "torch" / "hta_mi250_minitoy_rocm62.json.gz"
FACTORIES = {"aten::zeros", "aten::ones", "aten::full", "aten::arange", "aten::randn", "aten::rand"}


def _ns(x) -> int:
    return int(Decimal(str(x)) * 1000)


def _events(path):
    with gzip.open(path, "rt") as fh:
        return [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]


def _kineto_moves(path) -> list[tuple[int, int]]:
    """(start, dur) in ns of each top-level aten::to inside a ProfilerStep that contains an H2D
    copy call and whose previous op on its thread at the same level is a CPU factory op (no
    runtime call inside it) that ended at most 100 us before."""
    ev = _events(path)
    steps = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in ev if e["name"].startswith("ProfilerStep#")
             and e.get("cat") == "user_annotation"]
    ops = sorted((e for e in ev if e.get("cat") == "cpu_op"), key=lambda e: (e["ts"], -e["dur"]))
    runtime = [e for e in ev if e.get("cat") == "cuda_runtime"]
    h2d = {e["args"]["correlation"] for e in ev if e.get("cat") == "gpu_memcpy" and "HtoD" in e["name"]}

    def span(e):
        return _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])

    def top(e):        # not nested in another cpu_op
        s, t = span(e)
        return not any(o is not e and o["tid"] == e["tid"] and span(o)[0] <= s and t <= span(o)[1]
                       and (span(o) != (s, t) or ops.index(o) < ops.index(e)) for o in ops)

    out = []
    tops = [o for o in ops if top(o)]
    for i, e in enumerate(tops):
        s, t = span(e)
        if e["name"] != "aten::to" or not any(a <= s < b for a, b in steps):
            continue
        calls = [r for r in runtime if r["tid"] == e["tid"] and s <= span(r)[0] < t]
        if not any(r["args"].get("correlation") in h2d for r in calls):
            continue
        prev = [o for o in tops[:i] if o["tid"] == e["tid"]]
        if not prev or prev[-1]["name"] not in FACTORIES:
            continue
        fs, fe = span(prev[-1])
        if s - fe > 100_000 or any(r["tid"] == e["tid"] and fs <= span(r)[0] < fe for r in runtime):
            continue
        out.append((s, t - s))
    return out


def _lint(b, fmt, tmp_path):
    path = tmp_path / ("t.json.gz" if fmt == "kineto" else "t.sqlite")
    if fmt == "kineto":
        b.write_kineto(path)
    else:
        b.write_nsys_sqlite(path, nvtx_ops=True)
    return path, lint(path, Config(select=["TL033"]), match_cases=False)


@pytest.mark.parametrize("factory", ["aten::zeros", "aten::arange"])
def test_kineto_counts_match_raw_json(factory, tmp_path):
    path, report = _lint(tl033.loop(factory=factory), "kineto", tmp_path)
    moves = _kineto_moves(path)
    assert len(moves) == tl033.STEPS
    (f,) = report.findings
    assert f.occurrences == len(moves) == f.metrics["copies"].value
    assert f.metrics["move_host_ns"].value == sum(d for _, d in moves) == f.impact_ns
    assert (f.where.file, f.where.line) == ("model.py", tl033.LINE)
    assert f.key == f"model.py:{tl033.LINE}"
    assert factory in f.message
    # removing the copy and its stream sync saves time, never more than the moves cost
    assert 0 < f.saving_ns <= f.impact_ns


def test_nsys_emit_nvtx_counts_match_sql(tmp_path):
    path, report = _lint(tl033.loop(), "nsys", tmp_path)
    con = sqlite3.connect(path)
    moves = con.execute("SELECT start, end FROM NVTX_EVENTS WHERE text LIKE 'aten::to,%' ORDER BY start").fetchall()
    factories = con.execute("SELECT end FROM NVTX_EVENTS WHERE text LIKE 'aten::zeros,%' ORDER BY start").fetchall()
    con.close()
    paired = [(s, e) for s, e in moves if any(0 <= s - fe <= 100_000 for (fe,) in factories)]
    assert len(paired) == tl033.STEPS
    (f,) = report.findings
    assert f.occurrences == len(paired)
    assert f.metrics["move_host_ns"].value == sum(e - s for s, e in paired)


def test_plain_nsys_cannot_see_the_ops(tmp_path):
    """Without emit_nvtx an nsys export has the copies but not the ops: no claim."""
    path = tmp_path / "t.sqlite"
    tl033.loop().write_nsys_sqlite(path)
    assert not lint(path, Config(select=["TL033"]), match_cases=False).findings


@pytest.mark.parametrize("kind", ["device", "batch", "hoisted"])
@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_near_misses_are_silent(kind, fmt, tmp_path):
    _, report = _lint(tl033.loop(kind), fmt, tmp_path)
    assert not report.findings, [f.message for f in report.findings]


def test_real_rocm_toy_moves_randn_inputs_every_step():
    """HTA's MI250 toy: `torch.randn(...).to(device)` for input and target in every step."""
    path = trace_or_skip(MINITOY)
    moves = _kineto_moves(path)
    report = lint(path, Config(select=["TL033"]), match_cases=False)
    (f,) = report.findings
    assert len(moves) >= 2 and f.occurrences == len(moves)
    assert f.metrics["move_host_ns"].value == sum(d for _, d in moves)
    assert "aten::randn" in f.message

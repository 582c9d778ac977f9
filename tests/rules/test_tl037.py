"""TL037 torch-compile-recompile: the numbers it reports, checked against the raw trace (json.load
of the Kineto file, SQL on the nsys export) and against hand calculations."""
from __future__ import annotations

import json
import re
import sqlite3
from decimal import Decimal

import pytest

from tracelint.api import lint
from tracelint.engine.config import Config
from tracelint.engine.finding import Layer
from tracelint.synth.scenarios import tl037
from tracelint.timeline import compile_names

ONLY = Config(select=["TL037"])


def _ns(us) -> int:
    return int(Decimal(str(us)) * 1000)


def _events(path) -> list[dict]:
    return [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]


def _finding(report, key):
    hits = [f for f in report.findings if f.rule == "TL037" and f.key == key]
    assert len(hits) == 1, [(f.rule, f.key) for f in report.findings]
    return hits[0]


# ----- the names, as torch 2.13 writes them (seen in CPU captures of examples/compile_*.py) ------
@pytest.mark.parametrize("name,role,cid", [
    ("Torch-Compiled Region: 0/2", "region", (0, 2)),
    ("Torch-Compiled Region: 1/0_1", "region", (1, 0)),          # restart attempt suffix
    ("Torch-Compiled Region: !0/1/3", "region", (1, 3)),        # compiled autograd prefix
    ("Torch-Compiled Region", "region", None),                  # torch 2.1 - 2.4: no id
    ("TorchDynamo Cache Lookup", "cache_lookup", None),
    ("dynamo", "compile", None),
    ("entire_frame_compile", "compile", None),
    ("_compile.compile_inner (dynamo_timed)", "compile", None),
    ("OutputGraph.call_user_compiler (dynamo_timed)", "compile", None),
    ("dynamo_data: compile_id=0/2", "compile_data", (0, 2)),
    ("entire_frame_compile_data: fn_name=_compile.compile_inner, compile_id=1/3", "compile_data", (1, 3)),
    ("## Call CompiledFxGraph fx3u57gsm5a4ycsjpfggdkdyrkn37c4gzadsmgvsmn5t7cb2rfgi ##", "graph_call", None),
    ("CompiledFunction", "graph_call", None),
    ("CompiledFunctionBackward", "graph_call", None),
    ("Torch-Compiled Region: 0/2, op_id = 7", "region", (0, 2)),   # emit_nvtx suffix
    ("aten::mm", None, None), ("gc", None, None), ("ProfilerStep#3", None, None),
])
def test_classify_names(name, role, cid):
    assert compile_names.torch_compile_role(name) == role
    assert compile_names.compile_id(name) == cid


def test_resume_frame_names_the_break():
    assert compile_names.dynamo_resume("torch_dynamo_resume_in_features_at_29") == ("features", 29)
    assert compile_names.dynamo_resume("features") is None
    assert compile_names.is_dynamo_wrapper("Pregraph bytecode") and compile_names.is_dynamo_wrapper(
        "AOTDispatcher Runtime Wrapper Prologue") and not compile_names.is_dynamo_wrapper("aten::item")


# ----- recompilation -----------------------------------------------------------------------------
def _raw_compiles_kineto(path):
    """(total ns, count, recompiles) of `dynamo` ranges in steps after the first, from the raw JSON."""
    ev = _events(path)
    steps = sorted((e for e in ev if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    later = [(_ns(s["ts"]), _ns(s["ts"]) + _ns(s["dur"])) for s in steps[1:]]
    dyn = [e for e in ev if e["name"] == "dynamo" and any(a <= _ns(e["ts"]) < b for a, b in later)]
    data = [e["name"] for e in ev if e["name"].startswith("dynamo_data: compile_id=")
            and any(a <= _ns(e["ts"]) < b for a, b in later)]
    recompiles = sum(int(n.rsplit("/", 1)[1]) > 0 for n in data)
    return sum(_ns(e["dur"]) for e in dyn), len(dyn), recompiles


def test_recompile_figures_match_raw_kineto(tmp_path):
    path = tl037.recompiling().write_kineto(tmp_path / "t.json")
    total, count, recompiles = _raw_compiles_kineto(path)
    assert (total, count, recompiles) == (3 * 40_000_000, 3, 3)     # hand: 3 steps x 40 ms
    f = _finding(lint(path, ONLY), "recompile")
    assert f.metrics["compile_in_loop_ns"].value == total == f.impact_ns
    assert f.metrics["compilations"].value == count
    assert f.metrics["recompilations"].value == recompiles
    ids = {m.group(1) for e in _events(path) for m in [re.search(r"(?:Region: |compile_id=)(\d+/\d+)", e["name"])] if m}
    assert f.metrics["distinct_compile_ids"].value == len(ids) == 4
    # no kernel runs while compiling: the GPU idles for all of it
    assert f.evidence[Layer.KERNEL].facts["gpu_idle_ns"].value == total
    # the fix compiles once, before the loop: each later step loses its compilation
    assert f.saving_ns == total


def test_recompile_figures_match_raw_nsys(tmp_path):
    path = tl037.recompiling().write_nsys_sqlite(tmp_path / "t.sqlite", nvtx_ops=True)
    con = sqlite3.connect(path)
    steps = con.execute("SELECT start, end FROM NVTX_EVENTS WHERE text LIKE 'ProfilerStep#%' ORDER BY start").fetchall()
    rows = con.execute("SELECT start, end FROM NVTX_EVENTS WHERE text LIKE 'dynamo, op_id = %'").fetchall()
    con.close()
    later = steps[1:]
    total = sum(e - s for s, e in rows if any(a <= s < b for a, b in later))
    f = _finding(lint(path, ONLY), "recompile")
    assert f.metrics["compile_in_loop_ns"].value == total == 3 * tl037.COMPILE_NS


def test_recompile_points_at_the_compiled_function(tmp_path):
    f = _finding(lint(tl037.recompiling().write_kineto(tmp_path / "t.json"), ONLY), "recompile")
    assert (f.where.file, f.where.line, f.where.function) == ("train.py", 12, "forward")


def test_first_compilation_is_warm_up(tmp_path):
    for ids in (True, False):
        rep = lint(tl037.warmup_only(ids).write_kineto(tmp_path / f"w{ids}.json"), ONLY)
        assert not rep.findings


# ----- graph breaks ------------------------------------------------------------------------------
def test_graph_break_figures_match_raw_kineto(tmp_path):
    path = tl037.graph_break().write_kineto(tmp_path / "t.json")
    ev = _events(path)
    regions = [e for e in ev if e["name"].startswith("Torch-Compiled Region")]
    span = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in regions]
    nested = [i for i, (s, e) in enumerate(span)
              if any(j != i and a <= s and e <= b for j, (a, b) in enumerate(span))]
    outer = [span[i] for i in range(len(span)) if i not in nested]
    eager = sum(_ns(e["dur"]) for e in ev if e.get("cat") == "cpu_op" and e["name"] in ("aten::item", "aten::mul")
                and any(a <= _ns(e["ts"]) < b for a, b in outer))
    f = _finding(lint(path, ONLY), "graph-break")
    assert f.metrics["graph_breaks"].value == len(nested) == tl037.STEPS
    assert f.metrics["eager_between_graphs_ns"].value == eager == tl037.STEPS * (tl037.ITEM_NS + tl037.MUL_API_NS)
    assert f.metrics["regions_per_iteration"].value == len(regions) / tl037.STEPS == 2
    # the break's line comes from the resume function's name, not from its def line
    assert (f.where.file, f.where.line, f.where.function) == ("train.py", tl037.BREAK_LINE, "forward")
    # the eager multiply between the graphs launches one kernel per step
    assert f.evidence[Layer.KERNEL].facts["eager_launches"].value == tl037.STEPS
    assert f.saving_ns is None and "graph break" in f.saving_note


def test_side_by_side_regions_are_not_breaks(tmp_path):
    assert not lint(tl037.two_functions().write_kineto(tmp_path / "t.json"), ONLY).findings

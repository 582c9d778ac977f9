"""The memory timeline in tracelint info, the JSON report and the HTML report."""
from __future__ import annotations

import json
import re

import jsonschema

from conftest import run_cli

import tracelint
from tracelint.reporters.html import render_html
from tracelint.reporters.json_report import render_json, report_schema
from tracelint.synth.builder import TraceBuilder
from tracelint.synth.memory import memory

MIB = 1 << 20
EVIL = "<script>alert(1)</script>"


def _trace(tmp_path):
    b = TraceBuilder()
    mem = memory(b)
    for s in range(3):
        with b.step(s):
            a = mem.alloc((10 + s) * MIB, op=EVIL)
            b.launch("gemm_kernel", 100_000, op="aten::mm")
            mem.free(a)
            mem.empty_cache()
    return b.write_kineto(tmp_path / "t.json")


def test_json_report_memory_section(tmp_path):
    path = _trace(tmp_path)
    raw = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("name") == "[memory]"]
    doc = json.loads(render_json(tracelint.lint(path)))
    jsonschema.validate(doc, report_schema())
    (d,) = doc["memory"]["devices"]
    assert d["peak_allocated"] == max(e["args"]["Total Allocated"] for e in raw) == 12 * MIB
    assert d["at_peak_allocated"]["iteration"] == 2 and d["at_peak_allocated"]["op"] == EVIL
    assert d["capacity"] == json.loads(path.read_text())["deviceProperties"][0]["totalGlobalMem"]
    assert len(d["series"]["ts"]) == len(raw)
    assert [s["allocs"] for s in d["steps"]] == [1, 1, 1]


def test_no_memory_section_without_events(tmp_path):
    b = TraceBuilder()
    with b.step(0):
        b.launch("gemm_kernel", 100_000)
    doc = json.loads(render_json(tracelint.lint(b.write_kineto(tmp_path / "t.json"))))
    assert "memory" not in doc


def test_html_memory_plot_is_inline_and_escaped(tmp_path):
    html = render_html(tracelint.lint(_trace(tmp_path)))
    svg = re.findall(r'<svg class="plot".*?</svg>', html, re.S)
    mem = [s for s in svg if "Memory over time: CUDA 0" in s]
    assert len(mem) == 1 and 'class="line mres"' in mem[0] and 'class="line"' in mem[0]
    assert EVIL not in html and "alert(1)" not in html.replace("&lt;script&gt;alert(1)", "")
    assert not re.search(r'(src|href)="https?:', html)


def test_info_shows_the_memory_timeline(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")          # the table's columns unwrapped
    path = _trace(tmp_path)
    res = run_cli("info", "--json", str(path))
    assert res.returncode == 0, res.stderr[-1000:]
    d = json.loads(res.stdout)["memory"]["devices"][0]
    assert d["peak_allocated"] == 12 * MIB and d["peak_reserved"] == 12 * MIB
    text = run_cli("info", str(path)).stdout
    assert "Memory timeline" in text and "12.00 MiB" in text

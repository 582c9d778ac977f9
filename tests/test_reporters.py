"""Reporter tests on hand-built timelines and findings (no importer or rule needed)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from tracelint.engine.finding import Evidence, Finding, Layer, Measure, Severity, Where
from tracelint.engine.report import Report, RuleInfo
from tracelint.reporters.html import render_html

from conftest import TRACES
from tracelint.timeline.model import Device, Meta, Timeline
from tracelint.timeline.schema import make_table

EVIL = "<script>alert(1)</script>\"'"
PIPE = "k|pipe`tick`[bold]x[/bold] *star* @someone"
T0 = 1_700_000_000_000_000_000          # epoch ns, like Kineto traces


def make_timeline(n_kernels: int = 400, steps: int = 20, seed: int = 0) -> Timeline:
    """Two devices; kernels with a few evil names, copies, memsets, API calls, steps."""
    rng = np.random.default_rng(seed)
    names = np.array(["gemm_kernel", "elementwise_add", EVIL, PIPE, "nccl_allreduce"])
    dur = rng.integers(2_000, 80_000, n_kernels)
    gap = rng.integers(500, 30_000, n_kernels)
    start = T0 + 10_000 + np.cumsum(dur + gap) - (dur + gap)
    device = (np.arange(n_kernels) % 4 == 3).astype(np.int64)
    kernels = make_table("kernels", {
        "device": device, "stream": 7 + device, "start": start, "end": start + dur,
        "name": names[np.arange(n_kernels) % len(names)], "correlation": np.arange(n_kernels) + 1,
        "pid": np.full(n_kernels, 4242), "grid_x": np.full(n_kernels, 128),
        "block_x": np.full(n_kernels, 256), "registers_per_thread": np.full(n_kernels, 32)})
    launch_start = start - 5_000
    api = make_table("api_calls", {
        "pid": np.full(n_kernels + 2, 4242), "tid": np.full(n_kernels + 2, 4243),
        "start": np.r_[launch_start, start[0] - 9000, start[-1] + 1000],
        "end": np.r_[launch_start + 3_000, start[0] - 8500, start[-1] + 1500],
        "name": ["cudaLaunchKernel"] * n_kernels + ["cudaMemcpyAsync", "cudaMemsetAsync"],
        "correlation": np.r_[np.arange(n_kernels) + 1, 100_001, 100_002],
        "api": ["runtime"] * (n_kernels + 2)})
    copies = make_table("copies", {
        "device": [0], "stream": [7], "start": [start[0] - 8000], "end": [start[0] - 2000],
        "name": ["Memcpy HtoD (Pageable -> Device)"], "correlation": [100_001], "pid": [4242],
        "bytes": [1 << 20], "kind": ["H2D"], "src_kind": ["pageable"], "dst_kind": ["device"]})
    memsets = make_table("memsets", {
        "device": [0], "stream": [7], "start": [start[-1] + 90_000],
        "end": [start[-1] + 92_000], "name": ["Memset (Device)"], "correlation": [100_002],
        "pid": [4242], "bytes": [4096], "mem_kind": ["device"]})
    end = int(start[-1] + dur[-1])
    edges = np.linspace(T0, end, steps + 1).astype(np.int64)
    ranges = make_table("ranges", {
        "pid": np.full(steps, 4242), "tid": np.full(steps, 4243), "start": edges[:-1],
        "end": edges[1:] - 100, "name": [f"ProfilerStep#{i}" for i in range(steps)],
        "kind": ["step"] * steps, "depth": np.zeros(steps), "step": np.arange(steps)})
    meta = Meta(source="trace.json", format="kineto-json", format_version="1",
                producer="PyTorch 2.3.0", devices=[Device(0, name="NVIDIA A100"),
                                                   Device(1, name=EVIL)],
                rank=0, world_size=2, captured={"cuda", "shapes"},
                notes=["correlation resolved for 100% of kernels"])
    return Timeline(kernels=kernels, copies=copies, memsets=memsets, api_calls=api,
                    ranges=ranges, meta=meta)


def make_finding(i: int, tl: Timeline, sev: Severity = Severity.WARNING, rule: str = "TL001",
                 slug: str = "launch-gap") -> Finding:
    s0 = int(tl.span[0]) + 50_000 * (i + 1)
    ev = {Layer.SYSTEM: Evidence.measured(
              f"{i + 3} gaps idle the GPU for 1.2 ms around `{EVIL}`",
              idle_ns=Measure(1_234_567, "ns"), idle_share=Measure(0.1234, "ratio"),
              gaps=Measure(i + 3, "count")),
          Layer.KERNEL: Evidence.measured(f"neighbours `{PIPE}`", supports=(i % 3 != 1),
                                          largest_gap_ns=Measure(52_000, "ns"),
                                          bytes_moved=Measure(1 << 20, "bytes"),
                                          bandwidth=Measure(12.5, "GB/s")),
          Layer.MICROARCH: Evidence.not_captured(
              "No hardware counters for this window.",
              "nsys profile --gpu-metrics-devices=all (or ncu --set full)")}
    return Finding(
        rule=rule, slug=slug, title="GPU idle between kernels while the host launches",
        severity=sev, message=f"GPU 0 idle {1.2 + i:.2f} ms in {i + 3} gaps before `{EVIL}`",
        impact_ns=1_000_000 + 10_000 * i, span_ns=tl.span_ns,
        where=Where(device=i % 2, stream=7, start_ns=s0, end_ns=s0 + 30_000, pid=4242, tid=4243,
                    nvtx_path=["train", f"fwd|{EVIL}"], iteration=i % 5,
                    file="models/train.py" if i % 2 == 0 else "/abs/path/with space/x.py",
                    line=42 + i, function="step", kernel=EVIL if i % 2 else PIPE, rank=0),
        evidence=ev, fix="Use CUDA graphs; see `torch.compile`.",
        counter_example="Deliberate gaps (checkpointing).", occurrences=i + 3,
        windows=[(s0, s0 + 30_000), (s0 + 40_000, s0 + 45_000)],
        metrics={"idle_ns": Measure(1_234_567, "ns"), "idle_share": Measure(0.1234, "ratio")},
        cases=([{"id": "w4a16-ttft", "title": f"W4A16 {EVIL}", "fix": "per-bucket quant",
                 "similarity": 0.82}] if i == 0 else []),
        key=f"k{i}")


RULES = [RuleInfo(id="TL001", slug="launch-gap", title="GPU idle between kernels",
                  severity="warning", summary="GPU idles between kernels.",
                  doc="GPU idles between kernels.\n\nWhat it detects: gaps.\nFix: graphs.",
                  layers=["kernel", "microarch", "system"]),
         RuleInfo(id="TL005", slug="hidden-sync", title="Hidden synchronisation",
                  severity="error", summary="Syncs mid-iteration.", doc="Syncs mid-iteration.",
                  layers=["system"]),
         RuleInfo(id="TL007", slug="register-spill", title="Register spills",
                  severity="info", summary="Spills.", doc="Spills.", layers=["kernel"])]


def make_report(n_findings: int = 6, tl: Timeline | None = None) -> Report:
    tl = tl or make_timeline()
    sevs = [Severity.ERROR, Severity.WARNING, Severity.INFO]
    rules = [("TL005", "hidden-sync"), ("TL001", "launch-gap"), ("TL007", "register-spill")]
    fs = [make_finding(i, tl, sevs[i % 3], *rules[i % 3]) for i in range(n_findings)]
    return Report(source="runs/trace.json", timeline=tl, findings=fs, rules=RULES,
                  skipped={"TL007": "no kernel launch configuration"}, suppressed=1,
                  elapsed_s={"load": 0.1, "rules": 0.02})


# ----- helpers -------------------------------------------------------------------------------
REPO = Path(__file__).resolve().parents[1]
SARIF_SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"   # official, verbatim


def term(report: Report, **kw) -> str:
    c = Console(record=True, width=120, color_system=None)
    from tracelint.reporters.terminal import render_terminal
    render_terminal(report, c, **kw)
    return c.export_text()


def empty_report() -> Report:
    meta = Meta(source="cpu.sqlite", format="nsys-sqlite", format_version="2022.4")
    ranges = make_table("ranges", {"pid": [1], "tid": [1], "start": [0], "end": [1000],
                                   "name": ["main"], "kind": ["nvtx"], "depth": [0]})
    return Report(source="cpu.sqlite", timeline=Timeline(ranges=ranges, meta=meta), findings=[],
                  rules=RULES, skipped={"TL001": "no GPU activity in the trace"})


# ----- terminal ------------------------------------------------------------------------------
def test_terminal_summary_findings_and_evidence():
    out = term(make_report())
    assert "span 23.40 ms" in out
    assert "GPU 0 NVIDIA A100 busy 54.6%" in out
    assert "findings: 6 (2 error, 2 warning, 2 info)" in out
    for rid in ("TL001 launch-gap", "TL005 hidden-sync", "TL007 register-spill"):
        assert rid in out
    assert "impact 1.03 ms (4.4% of span)" in out
    assert "✓ system" in out and "✗ microarch not captured" in out
    assert "≠ kernel" in out                       # a contradicting measured layer
    assert "verdict partial" in out and "verdict conflict" in out
    assert "at models/train.py:42 in `step()`" in out
    assert "similar cases: w4a16-ttft (82%)" in out
    # errors come first: the TL005 group is printed before TL001 and TL007
    assert out.index("TL005 hidden-sync") < out.index("TL001 launch-gap") < out.index("TL007 register-spill")
    assert "gpu-metrics-devices" not in out         # capture hints only with -v


def test_terminal_verbose_shows_hints_facts_fix():
    out = term(make_report(), verbose=True)
    assert "capture: nsys profile --gpu-metrics-devices=all" in out
    assert "fix: Use CUDA graphs" in out
    assert "bytes_moved=1.05 MB" in out and "idle_share=12.3%" in out
    assert "TL007: no kernel launch configuration" in out


def test_terminal_quiet_one_line_per_finding():
    out = term(make_report(9), quiet=True)
    lines = [ln for ln in out.splitlines() if ln.startswith("#")]
    assert len(lines) == 9
    assert lines[0].startswith("#1 error")
    assert "verdict" not in out


def test_terminal_escapes_untrusted_names():
    r = make_report()
    r.findings[0].where.kernel = "evil\x1b[31mRED\x1b[0m :fire: [link=http://x]y[/link]"
    out = term(r, verbose=True)
    assert "[bold]x[/bold]" in out                  # rich markup in a name prints as text
    assert "[link=http://x]y[/link]" in out
    assert ":fire:" in out and "🔥" not in out      # no emoji substitution
    assert "\x1b" not in out                          # no terminal escape injection
    assert EVIL in out


def test_terminal_no_colour_when_not_a_tty():
    import io
    buf = io.StringIO()
    from tracelint.reporters.terminal import render_terminal
    render_terminal(make_report(), Console(file=buf, width=120))
    assert "\x1b[" not in buf.getvalue()


def test_terminal_no_gpu_activity():
    out = term(empty_report())
    assert "no GPU activity in this trace" in out
    assert "No findings." in out


def test_terminal_caps_detail_for_many_findings():
    out = term(make_report(500))
    assert out.count("    impact ") == 30                       # full blocks
    assert "more findings not shown" in out
    assert "findings: 500" in out


# ----- markdown ------------------------------------------------------------------------------
def test_markdown_table_anchors_and_details():
    from tracelint.reporters.markdown import render_markdown
    md = render_markdown(make_report())
    assert md.startswith("### tracelint: 6 findings (2 errors, 2 warnings, 2 info)")
    assert "| # | Rule | Severity | Impact | Where |" in md
    for n in range(1, 7):
        assert f'<a id="tl-finding-{n}"></a>' in md
        assert f"[{n}](#tl-finding-{n})" in md
    assert "system ✓ measured · kernel ✓ measured · microarch ✗ not captured" in md
    assert "**Fix**: Use CUDA graphs" in md
    assert "Truncated" not in md


def test_markdown_truncates_under_max_chars():
    from tracelint.reporters.markdown import render_markdown
    r = make_report(2000)
    for limit in (60000, 20000, 5000):
        md = render_markdown(r, max_chars=limit)
        assert len(md) <= limit
        assert "Truncated to stay under" in md
        linked = set(re.findall(r"\]\(#(tl-finding-\d+)\)", md))
        anchors = set(re.findall(r'<a id="(tl-finding-\d+)"></a>', md))
        assert linked and linked == anchors            # every link has its anchor
    assert "1 of 2000" not in render_markdown(r)       # the default lists many rows


def test_markdown_escapes_untrusted_text():
    from tracelint.reporters.markdown import md_escape, render_markdown
    md = render_markdown(make_report())
    assert "<script" not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert r"k\|pipe\`tick\`" in md
    assert re.search(r"(?<!\\)`", md) is None           # every backtick escaped
    assert "@someone" not in md                          # no mention pings
    for row in (ln for ln in md.splitlines() if ln.startswith("| [")):
        assert len(re.findall(r"(?<!\\)\|", row)) == 6   # escaped pipes never split a cell
    assert md_escape("# x") == r"\# x" and md_escape("1. x") == r"1\. x"
    assert md_escape("a\nb\x07") == "a b"


def test_markdown_no_findings():
    from tracelint.reporters.markdown import render_markdown
    md = render_markdown(empty_report())
    assert "No findings." in md and "no GPU activity" in md


# ----- HTML ----------------------------------------------------------------------------------
def test_html_self_contained_and_escaped():
    r = make_report()
    html = render_html(r)
    assert html.startswith("<!DOCTYPE html>")
    assert re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I) is None
    assert "<script" not in html.lower()
    assert "<link" not in html.lower() and "@import" not in html and "url(" not in html
    assert "Content-Security-Policy" in html
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    for n in range(1, 7):
        assert html.count(f'id="finding-{n}"') == 1
        assert f'href="#finding-{n}"' in html
    assert html.count('class="layer ') == 18              # 3 layers per card, side by side
    assert "How to capture:" in html and "w4a16-ttft" in html
    assert "Iteration time" in html and "P99" in html and "Top kernels by total GPU time" in html
    assert "gap length (log scale)" in html and "time (ms)" in html


def test_html_caps_cards_and_lists_the_rest():
    r = make_report(260)
    html = render_html(r)
    assert html.count('<article class="card') == 200
    assert 'id="finding-201"' in html and 'id="finding-260"' in html
    assert "More findings (60" in html


def test_html_no_gpu_activity():
    html = render_html(empty_report())
    assert "No GPU activity in this trace" in html
    assert "No findings." in html
    assert "svg class=\"strip\"" not in html


def test_busy_columns_vectorised():
    from tracelint.reporters.html import busy_columns
    k = make_table("kernels", {"device": [0, 0], "stream": [1, 1], "start": [0, 500],
                               "end": [250, 1000], "name": ["a", "b"]})
    tl = Timeline(kernels=k)
    frac = busy_columns(tl, 0, 0, 1000, columns=4)
    assert np.allclose(frac, [1.0, 0.0, 1.0, 1.0])
    frac = busy_columns(tl, 0, 0, 1000, columns=8)
    assert np.allclose(frac, [1, 1, 0, 0, 1, 1, 1, 1])


@pytest.mark.slow
def test_html_scales_to_a_million_events():
    import time
    tl = make_timeline(n_kernels=1_000_000, steps=3000)
    r = make_report(3000, tl)
    t0 = time.perf_counter()
    html = render_html(r)
    elapsed = time.perf_counter() - t0
    assert html.count('<article class="card') == 200
    assert len(html) < 6_000_000
    assert elapsed < 30, elapsed                     # ~2 s on one idle core


# ----- JSON ----------------------------------------------------------------------------------
def test_json_validates_against_schema():
    import jsonschema
    from tracelint.reporters.json_report import render_json, report_schema
    schema = report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for r in (make_report(), empty_report()):
        doc = json.loads(render_json(r))
        validator.validate(doc)
    doc = json.loads(render_json(make_report()))
    f = doc["findings"][0]
    assert isinstance(f["impact_ns"], int) and isinstance(f["impact_share"], float)
    assert f["evidence"]["system"]["facts"]["idle_ns"] == {"value": 1234567, "unit": "ns"}
    assert [x["severity"] for x in doc["findings"]] == ["error", "error", "warning", "warning",
                                                        "info", "info"]


def test_json_numpy_and_nan_become_plain_json():
    from tracelint.reporters.json_report import render_json
    r = make_report(1)
    f = r.findings[0]
    f.metrics = {"n": Measure(np.int64(7), "count"), "x": Measure(np.float64("nan"), "ratio"),
                 "b": Measure(np.float64(4096.0), "bytes")}
    # (numpy ints in Where are not tested: Where.to_dict's `v not in (None, [])` raises on
    # them; reported to the engine owner.)
    text = render_json(r)
    assert "NaN" not in text
    doc = json.loads(text)
    m = doc["findings"][0]["metrics"]
    assert m == {"n": {"value": 7, "unit": "count"}, "x": {"value": None, "unit": "ratio"},
                 "b": {"value": 4096, "unit": "bytes"}}
    assert render_json(r) == text                     # deterministic


def test_json_schema_documented():
    doc = (REPO / "docs" / "json-schema.md").read_text()
    from tracelint.reporters.json_report import report_schema
    s = report_schema()
    fields = set(s["properties"]) | set(s["$defs"]["finding"]["properties"]) | \
        set(s["$defs"]["summary"]["properties"]) | set(s["$defs"]["evidence"]["properties"]) | \
        set(s["$defs"]["where"]["properties"])
    missing = [f for f in fields if f"`{f}`" not in doc and f"`{f}[]`" not in doc]
    assert not missing, f"fields not documented in docs/json-schema.md: {missing}"


# ----- SARIF ---------------------------------------------------------------------------------
def _sarif_validator():
    import jsonschema
    schema = json.loads(SARIF_SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)      # draft-07 for SARIF 2.1.0
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_sarif_validates_against_official_schema():
    from tracelint.reporters.sarif import render_sarif
    v = _sarif_validator()
    for r in (make_report(), make_report(40), empty_report()):
        log = json.loads(json.dumps(render_sarif(r)))
        errors = sorted(v.iter_errors(log), key=str)
        assert not errors, [e.message for e in errors[:5]]


def test_sarif_content():
    from tracelint.reporters.sarif import render_sarif
    r = make_report()
    r.findings[2].where.file = "<frozen importlib._bootstrap>"      # not a real file
    r.findings[3].where.file, r.findings[3].where.line = None, None
    log = render_sarif(r)
    run = log["runs"][0]
    assert log["version"] == "2.1.0"
    driver = run["tool"]["driver"]
    assert driver["name"] == "tracelint"
    ids = [x["id"] for x in driver["rules"]]
    assert ids == ["TL001", "TL005", "TL007"]
    rule = driver["rules"][0]
    assert rule["name"] == "launch-gap" and rule["defaultConfiguration"]["level"] == "warning"
    assert "**What it detects:**" in rule["help"]["markdown"]
    assert driver["rules"][2]["defaultConfiguration"]["level"] == "note"
    results = run["results"]
    assert len(results) == 6
    for res in results:
        assert driver["rules"][res["ruleIndex"]]["id"] == res["ruleId"]
        assert re.fullmatch(r"[0-9a-f]{16}", res["partialFingerprints"]["tracelint/v1"])
        assert "Impact " in res["message"]["text"] and "window +" in res["message"]["text"]
        p = res["properties"]
        assert {"impact_ns", "impact_share", "window_start_ns", "window_end_ns", "device",
                "stream", "verdict", "evidence"} <= set(p)
    by_fp = {f.fingerprint(): f for f in r.findings}
    levels = {by_fp[x["partialFingerprints"]["tracelint/v1"]].severity.value: x["level"]
              for x in results}
    assert levels == {"error": "error", "warning": "warning", "info": "note"}
    locs = {x["partialFingerprints"]["tracelint/v1"]: x["locations"][0] for x in results}
    rel = locs[r.findings[0].fingerprint()]["physicalLocation"]
    assert rel["artifactLocation"] == {"uri": "models/train.py", "uriBaseId": "%SRCROOT%"}
    assert rel["region"] == {"startLine": 42}
    absolute = locs[r.findings[1].fingerprint()]["physicalLocation"]
    assert absolute["artifactLocation"]["uri"] == "file:///abs/path/with%20space/x.py"
    for f in (r.findings[2], r.findings[3]):              # falls back to the trace file
        phys = locs[f.fingerprint()]["physicalLocation"]
        assert phys["artifactLocation"] == {"uri": "runs/trace.json", "uriBaseId": "%SRCROOT%"}
        assert "region" not in phys
    logical = locs[r.findings[1].fingerprint()]["logicalLocations"]
    kinds = {(x["kind"], x.get("fullyQualifiedName")) for x in logical}
    assert ("namespace", f"train/fwd|{EVIL}") in kinds
    assert run["originalUriBaseIds"]["%SRCROOT%"]
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert notes[0]["descriptor"]["id"] == "TL007"


def test_sarif_rule_missing_from_report_gets_a_descriptor():
    from tracelint.reporters.sarif import render_sarif
    r = make_report(1)
    r.rules = []
    log = render_sarif(r)
    assert [x["id"] for x in log["runs"][0]["tool"]["driver"]["rules"]] == ["TL005"]
    assert not list(_sarif_validator().iter_errors(log))


# ----- annotated trace -----------------------------------------------------------------------
def test_us_text_is_exact():
    from tracelint.reporters.annotate import us_text
    assert us_text(np.array([0, 1, 999, 1000, 1234567, -1, -1001, T0 + 7])) == [
        "0.000", "0.001", "0.999", "1.000", "1234.567", "-0.001", "-1.001",
        "1700000000000000.007"]


def _annotated(tmp_path, name="annotated.json", n=6):
    from tracelint.reporters.annotate import write_annotated_trace
    r = make_report(n)
    out = write_annotated_trace(r, tmp_path / name)
    return r, out


def test_annotated_trace_has_finding_track(tmp_path):
    import gzip
    r, out = _annotated(tmp_path)
    doc = json.loads(out.read_text())
    ev = doc["traceEvents"]
    tl_ev = [e for e in ev if e.get("cat") == "tracelint"]
    assert len(tl_ev) == sum(len(f.windows) for f in r.findings) == 12
    e = tl_ev[0]
    assert e["ph"] == "X" and e["name"] in ("TL005 hidden-sync", "TL001 launch-gap",
                                            "TL007 register-spill")
    assert {"message", "impact_ns", "severity"} <= set(e["args"])
    meta = [m for m in ev if m["ph"] == "M" and m["pid"] == e["pid"]]
    assert {"name": "tracelint"} in [m["args"] for m in meta if m["name"] == "process_name"]
    k = [x for x in ev if x.get("cat") == "kernel"]
    assert len(k) == 400 and {"device", "stream", "correlation"} <= set(k[0]["args"])
    assert EVIL in {x["name"] for x in k}
    assert {x["cat"] for x in ev if x["ph"] == "X"} == {
        "tracelint", "kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "user_annotation"}
    _, gz = _annotated(tmp_path, "annotated.json.gz")
    assert json.loads(gzip.decompress(gz.read_bytes())) == doc


def _kineto_importer_ready() -> bool:
    try:
        import tracelint.importers.kineto_json  # noqa: F401
    except Exception:
        return False
    return True


@pytest.mark.skipif(not _kineto_importer_ready(), reason="tracelint.importers.kineto_json "
                    "does not import yet (written concurrently); runs as soon as it does")
def test_annotated_trace_round_trips_through_kineto_importer(tmp_path):
    import tracelint
    r, out = _annotated(tmp_path)
    tl0 = r.timeline
    tl = tracelint.load(out)
    for t in ("kernels", "copies", "memsets", "api_calls", "ranges"):
        assert len(tl.table(t)) == len(tl0.table(t)), t
        a = tl0.table(t).sort_values(["start", "end"], kind="stable")
        b = tl.table(t).sort_values(["start", "end"], kind="stable")
        assert (a["start"].to_numpy() == b["start"].to_numpy()).all(), t     # exact ns
        assert (a["end"].to_numpy() == b["end"].to_numpy()).all(), t
        assert list(a["name"].astype(str)) == list(b["name"].astype(str)), t
    k0 = tl0.kernels.sort_values("start")
    k = tl.kernels.sort_values("start")
    for col in ("device", "stream", "correlation", "grid_x", "block_x", "registers_per_thread"):
        assert (k0[col].to_numpy() == k[col].to_numpy()).all(), col
    assert (tl.ranges["kind"].astype(str) == "step").sum() == 20
    assert tl.meta.rank == 0 and tl.meta.world_size == 2
    assert [d.name for d in tl.meta.devices] == ["NVIDIA A100", EVIL]
    cats = tl.meta.extra.get("category_counts")
    if isinstance(cats, dict):                  # the importer saw (and skipped) our track
        assert cats.get("tracelint") == 12


def test_annotated_trace_is_the_same_text_written_a_few_rows_at_a_time(tmp_path, monkeypatch):
    """The events are made and written BATCH rows at a time; batches of 7 rows (steps renamed
    to ProfilerStep#N among them, whatever batch they fall in) give the text of one batch."""
    import gzip
    from tracelint.reporters import annotate
    r = make_report(6)
    rg = r.timeline.ranges
    steps = (rg["kind"].astype(str) == "step").to_numpy()
    rg["name"] = rg["name"].astype(str).where(~steps, "iteration " + rg["step"].astype(str)
                                              ).astype("category")      # named otherwise
    whole = annotate.render_annotated_trace(r)
    assert whole.count('"tracelint_name": "iteration ') == steps.sum() > 10
    monkeypatch.setattr(annotate, "BATCH", 7)
    assert annotate.render_annotated_trace(r) == whole
    assert gzip.decompress(annotate.write_annotated_trace(r, tmp_path / "a.json.gz").read_bytes()) \
        == whole.encode()


REAL_TRACES = [TRACES / p for p in (
    "torch/hta_alexnet_a100.json.gz",                    # CUDA, syncs, steps
    "torch/hta_mi250_minitoy_rocm62.json.gz",            # ROCm names and string args
    "torch/tracelens_h100_bert_small_inference.json.gz",  # python_function frames
    "nsys/nsys2022.4_gpu4-vecadd-4streams_t4.sqlite")]    # nsys source, 4 streams


@pytest.mark.skipif(not _kineto_importer_ready(), reason="kineto importer not importable yet")
@pytest.mark.parametrize("path", REAL_TRACES, ids=lambda p: p.name)
def test_annotated_real_trace_round_trips(tmp_path, path):
    import tracelint
    if not path.exists():
        pytest.skip(f"real trace not present: {path.name}")
    from tracelint.reporters.annotate import write_annotated_trace
    tl0 = tracelint.load(path)
    f = make_finding(0, tl0)
    r = Report(source=str(path), timeline=tl0, findings=[f], rules=RULES)
    tl = tracelint.load(write_annotated_trace(r, tmp_path / "a.json.gz"))
    for t in ("kernels", "copies", "memsets", "api_calls", "ranges", "syncs", "python_frames"):
        a, b = tl0.table(t), tl.table(t)
        assert len(a) == len(b), t
        assert (np.sort(a["start"].to_numpy()) == np.sort(b["start"].to_numpy())).all(), t
        assert (np.sort(a["end"].to_numpy()) == np.sort(b["end"].to_numpy())).all(), t
    assert (tl0.ranges["kind"].astype(str).value_counts().to_dict()
            == tl.ranges["kind"].astype(str).value_counts().to_dict())
    assert tl.devices_in_use() == tl0.devices_in_use()

"""The case library: the built-in cases replay, a case whose pattern is removed fails, a case
added from a real trace round-trips (add -> check -> matched on re-lint), excerpts are small,
load through the importers and keep the source schema, and validation errors are one line."""
from __future__ import annotations

import gzip
import importlib.util
import json
import re
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest
import yaml

import tracelint
from tracelint.cases import (SIZE_LIMIT_BYTES, CaseError, builtin_library, create_case, cut,
                             load_case, load_library, match_findings, stored_size)
from tracelint.cases.check import check_case
from tracelint.cases.match import gpu_family, similarity
from tracelint.engine.config import Config
from tracelint.api import lint

from conftest import REPO, TRACES, md5, run_cli

CLOVERLEAF = TRACES / "nsys" / "nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite"
BERT = TRACES / "torch" / "tracelens_h100_bert_small_inference.json.gz"
CORE_RULES = {f"TL00{i}" for i in range(1, 10)}
W4A16 = "w4a16-short-prompt-ttft"
HUMAN = ["--symptom", "Timestep loop slower than the published A100 figure.",
         "--judgement", "Host-side work between kernels leaves the GPU waiting.",
         "--fix", "Batch the small kernels and drop the per-step device sync.",
         "--counter-example", "Long kernels that keep the GPU busy across host work.",
         "--rollback", "idle_share>0.1 ratio", "--rollback-note", "CI lint of the nightly trace",
         "--tag", "framework=CUDA C++", "--tag", "model=CloverLeaf 2D hydro",
         "--tag", "workload=hydro timestep"]


def _one_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, text
    return lines[0]


def _copy_case(case_id: str, dest: Path) -> Path:
    lib = dest / "lib"
    shutil.copytree(builtin_library() / case_id, lib / case_id)
    return lib


# ----- the built-in library --------------------------------------------------------------------
def test_builtin_library_replays():
    res = run_cli("case", "check")
    assert res.returncode == 0, res.stdout + res.stderr
    cases = load_library(builtin_library())
    assert len(cases) >= 10
    assert f"{len(cases)} of {len(cases)} case(s) reproduce" in res.stdout
    assert CORE_RULES <= {r for c in cases for r in c.rules}
    assert {c.excerpt.format for c in cases} == {"kineto-json", "nsys-sqlite"}


def test_builtin_cases_are_complete_small_and_load():
    for c in load_library(builtin_library()):
        assert not c.todos(), c.id
        assert c.symptom and c.fix and c.counter_example and c.judgement and c.observation
        # a reported figure needs a source; an illustrative case says what it is instead
        reported = [m for m in c.key_metrics if m.source == "reported"]
        assert not reported or "Reported figures:" in c.symptom, c.id
        assert c.synthetic == c.symptom.startswith("Illustrative scenario") or bool(reported), c.id
        assert any(m.source == "measured" for m in c.key_metrics), c.id
        assert all(m.unit for m in c.key_metrics), c.id
        assert c.rollback.direction in ("above", "below")
        script = "make_cases.py" if c.synthetic else "make_real_cases.py"
        assert script in c.provenance["command"], c.id
        size = stored_size(c.excerpt_path)
        assert size <= SIZE_LIMIT_BYTES, (c.id, size)
        tl = tracelint.load(c.excerpt_path)
        assert len(tl.kernels) > 0, c.id


def test_w4a16_case_has_prefill_and_decode_ranges():
    case = load_library(builtin_library())
    case = next(c for c in case if c.id == W4A16)
    assert case.rules == ["TL003"] and case.metric("ttft_p50").baseline == 0.82
    tl = tracelint.load(case.excerpt_path)
    names = set(tl.ranges["name"].astype(str))
    assert {"prefill", "decode"} <= names
    report = lint(tl, Config())
    f = next(f for f in report.findings if f.rule == "TL003")
    assert f.where.nvtx_path == ["prefill"]
    match_findings([f], [builtin_library()], timeline=tl)
    assert f.cases[0]["id"] == W4A16 and f.cases[0]["similarity"] >= 0.9
    assert {"id", "title", "fix", "counter_example", "similarity"} <= set(f.cases[0])


# ----- a case whose pattern is gone fails ---------------------------------------------------------
def _drop_sqlite_kernels(path: Path, like: list[str]) -> None:
    con = sqlite3.connect(path)
    with con:
        cond = " OR ".join("value LIKE ?" for _ in like)
        con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE demangledName IN "
                    f"(SELECT id FROM StringIds WHERE {cond})", [f"%{s}%" for s in like])
    con.close()


def _drop_kineto_kernels(path: Path, pattern: str) -> None:
    data = json.loads(gzip.decompress(path.read_bytes()))
    data["traceEvents"] = [e for e in data["traceEvents"]
                           if not (e.get("cat") == "kernel" and re.search(pattern, e.get("name", "")))]
    path.write_bytes(gzip.compress(json.dumps(data).encode()))


@pytest.mark.parametrize("case_id,rule,strip", [
    ("nchw-model-on-tensor-cores", "TL006",
     lambda p: _drop_sqlite_kernels(p, ["nchwToNhwc", "nhwcToNchw"])),
    (W4A16, "TL003", lambda p: _drop_kineto_kernels(p, "dequantize")),
])
def test_check_fails_when_the_pattern_is_removed(tmp_path, case_id, rule, strip):
    lib = _copy_case(case_id, tmp_path)
    case = load_case(lib / case_id)
    ok = run_cli("case", "check", lib)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    strip(case.excerpt_path)
    res = run_cli("case", "check", lib)
    assert res.returncode == 1, res.stdout + res.stderr
    fail = [ln for ln in res.stdout.splitlines() if ln.startswith("FAIL")]
    assert fail == [f"FAIL  {case_id}: {fail[0].split(': ', 1)[1]}"]
    assert f"{rule} no longer fires" in fail[0]


def test_check_fails_on_metric_range_and_todo(tmp_path):
    lib = _copy_case(W4A16, tmp_path)
    path = lib / W4A16 / "case.yaml"
    data = yaml.safe_load(path.read_text())
    data["expected"]["findings"][0]["metrics"]["worst_share"] = {"min": 0.9}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    res = check_case(load_case(lib / W4A16))
    assert not res.ok and "worst_share=0.381 is outside [0.9, ]" in res.reason
    data["fix"] = "TODO: what fixed it"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    res = run_cli("case", "check", lib)
    assert res.returncode == 1 and "still a template: fill in fix" in res.stdout


def test_check_unreadable_library_exits_2(tmp_path):
    lib = _copy_case(W4A16, tmp_path)
    (lib / W4A16 / "case.yaml").write_text("id: [unclosed\n")
    res = run_cli("case", "check", lib)
    assert res.returncode == 2
    line = _one_line(res.stderr)
    assert "case.yaml: invalid YAML: line" in line
    res = run_cli("case", "check", tmp_path / "nowhere")
    assert res.returncode == 2 and "case library not found" in _one_line(res.stderr)


# ----- round trip from real traces -------------------------------------------------------------
@pytest.mark.skipif(not CLOVERLEAF.exists(), reason="real trace not present")
def test_round_trip_nsys_add_check_match(tmp_path):
    before = md5(CLOVERLEAF)
    lib = tmp_path / "team-cases"
    # findings sort by projected saving: take the launch-gap finding wherever it ranks
    n = [f.rule for f in lint(CLOVERLEAF, Config()).sorted_findings()].index("TL001")
    res = run_cli("case", "add", CLOVERLEAF, "--finding", str(n), "--library", lib,
                  "--id", "cloverleaf-launch-gap", "--title", "CloverLeaf: host-side gaps", *HUMAN)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "added case cloverleaf-launch-gap" in res.stdout and "to fill in" not in res.stdout
    case = load_case(lib / "cloverleaf-launch-gap")
    assert case.rules == ["TL001"] and case.excerpt.format == "nsys-sqlite"
    assert case.provenance["method"] == "cut" and case.provenance["source_md5"] == before
    assert case.tags["hardware"].startswith("NVIDIA A100") and case.rollback.describe() == "idle_share > 0.1 ratio"
    assert any(m.name == "idle_share" and m.source == "measured" for m in case.key_metrics)
    # small, loads through the normal importer, same schema as its source
    assert stored_size(case.excerpt_path) <= SIZE_LIMIT_BYTES
    assert case.excerpt_path.stat().st_size < CLOVERLEAF.stat().st_size
    tl = tracelint.load(case.excerpt_path)
    assert 0 < len(tl.kernels) < len(tracelint.load(CLOVERLEAF).kernels)
    assert _schema(case.excerpt_path) == _schema(CLOVERLEAF)
    # replays
    chk = run_cli("case", "check", lib)
    assert chk.returncode == 0, chk.stdout + chk.stderr
    # linting the original again, with the team library configured beside the built-in one,
    # names the new case first on the same finding
    findings = lint(CLOVERLEAF, Config(case_libraries=[str(lib)])).sorted_findings()
    gap = next(f for f in findings if f.rule == "TL001" and "warmup" not in f.key)
    assert gap.cases[0]["id"] == "cloverleaf-launch-gap"
    assert gap.cases[0]["similarity"] >= 0.9
    assert md5(CLOVERLEAF) == before


@pytest.mark.skipif(not BERT.exists(), reason="real trace not present")
def test_round_trip_kineto_excerpt_keeps_launches_and_flows(tmp_path):
    before = md5(BERT)
    lib = tmp_path / "lib"
    res = run_cli("case", "add", BERT, "--finding", "0", "--library", lib, "--id", "bert-gap")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "to fill in: symptom" in res.stdout          # the TODO template
    case = load_case(lib / "bert-gap")
    assert case.excerpt.format == "kineto-json" and case.tags["framework"] == "pytorch"
    assert "TODO" in case.fix and "generic advice" in case.fix
    chk = run_cli("case", "check", lib)
    assert chk.returncode == 1 and "still a template" in chk.stdout
    data = json.loads(gzip.decompress(case.excerpt_path.read_bytes()))
    evs = data["traceEvents"]
    assert data["tracelintExcerpt"]["source"] == BERT.name
    assert data["deviceProperties"] and any(e.get("ph") == "M" for e in evs)
    launch = {e["args"]["correlation"] for e in evs if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and "correlation" in e.get("args", {})}
    kernels = [e for e in evs if e.get("cat") == "kernel"]
    assert kernels and all(k["args"]["correlation"] in launch for k in kernels)
    flows = [e for e in evs if e.get("cat") == "ac2g"]
    assert sorted(e["id"] for e in flows if e["ph"] == "s") == sorted(e["id"] for e in flows if e["ph"] == "f")
    assert md5(BERT) == before


def _schema(path: Path) -> list[tuple]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return sorted(con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master "
                                  "WHERE name NOT LIKE 'sqlite_%'").fetchall())
    finally:
        con.close()


# ----- add by rule + window, size limit, input untouched ------------------------------------------
def _make_cases_module():
    spec = importlib.util.spec_from_file_location("make_cases", REPO / "fixtures" / "cases" / "make_cases.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_cases"] = mod          # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_add_by_rule_and_window(tmp_path):
    mc = _make_cases_module()
    trace = tmp_path / "cnn.json.gz"
    mc.nchw_model_on_tensor_cores().write_kineto(trace)
    tl = tracelint.load(trace)
    steps = tl.ranges[tl.ranges["kind"].astype(str) == "step"].sort_values("start")
    a, b = int(steps["start"].iat[1]), int(steps["end"].iat[2])
    lib = tmp_path / "lib"
    res = run_cli("case", "add", trace, "--rule", "TL006", "--window", f"{a}:{b}", "--library", lib,
                  "--metric", "latency_p50=9.1->7.4 ms", "--tag", "model=ResNet-50")
    assert res.returncode == 0, res.stdout + res.stderr
    case = load_library(lib)[0]
    assert case.excerpt.window_ns == (a, b) and case.rules == ["TL006"]
    m = case.metric("latency_p50")
    assert (m.value, m.baseline, m.unit, m.source) == (7.4, 9.1, "ms", "reported")
    assert case.tags["model"] == "ResNet-50"
    # a rule that does not fire there is refused, in one line, and nothing is left behind
    res = run_cli("case", "add", trace, "--rule", "TL009", "--window", f"{a}:{b}", "--library", lib,
                  "--id", "not-there")
    assert res.returncode == 2
    assert "reproduces TL009" in _one_line(res.stderr)
    assert not (lib / "not-there").exists() and len(list(lib.iterdir())) == 1


@pytest.mark.skipif(not CLOVERLEAF.exists(), reason="real trace not present")
def test_size_limit_refuses_and_input_is_unchanged(tmp_path):
    before = md5(CLOVERLEAF)
    full = tracelint.load(CLOVERLEAF)
    f = lint(full, Config()).sorted_findings()[0]
    with pytest.raises(CaseError) as exc:
        create_case(CLOVERLEAF, tmp_path / "lib", finding=f, timeline=full, limit=4 * 1024)
    msg = str(exc.value)
    assert "\n" not in msg and "over the 4 KiB limit" in msg
    assert not (tmp_path / "lib").exists() or not any((tmp_path / "lib").iterdir())
    # cutting is read-only for the source in both formats
    cut(CLOVERLEAF, tmp_path / "x.sqlite", (int(f.where.start_ns), int(f.where.end_ns)), 1_000_000)
    if BERT.exists():
        b0 = md5(BERT)
        t = tracelint.load(BERT).span
        cut(BERT, tmp_path / "x.json.gz", (t[0], t[0] + (t[1] - t[0]) // 3), 0)
        assert md5(BERT) == b0
    assert md5(CLOVERLEAF) == before


def test_excerpt_of_whole_span_keeps_everything(tmp_path):
    mc = _make_cases_module()
    src = tmp_path / "ddp.sqlite"
    mc.ddp_allreduce_after_backward().write_nsys_sqlite(src)
    tl = tracelint.load(src)
    cut(src, tmp_path / "all.sqlite", tl.span, 0)
    again = tracelint.load(tmp_path / "all.sqlite")
    assert again.counts() == tl.counts()
    info = cut(src, tmp_path / "none.sqlite", (0, 10), 0)      # before the trace: nothing timed
    assert sum(info.kept.values()) == 0 and _schema(tmp_path / "none.sqlite") == _schema(src)


@pytest.mark.skipif(not BERT.exists(), reason="shared trace not present")
def test_cut_to_fit_reads_the_trace_once_and_picks_what_whole_cuts_pick(tmp_path, monkeypatch):
    """cut_to_fit halves the context until the excerpt fits: the trace is read once for all
    its cuts, and a cut is given up as soon as its gzip passes the limit; the excerpt chosen
    is the one that cutting whole at each context, largest first, chooses."""
    import gzip as gz
    from tracelint.cases import excerpt
    from tracelint.cases.kineto_excerpt import KinetoEvents
    monkeypatch.setattr(KinetoEvents, "_last", None)
    reads, real = [], excerpt._read_json_bytes
    monkeypatch.setattr(excerpt, "_read_json_bytes", lambda p: reads.append(p) or real(p))
    cuts, real_cut = [], excerpt._cut
    monkeypatch.setattr(excerpt, "_cut", lambda *a, **k: cuts.append(a[3]) or real_cut(*a, **k))
    t0, t1 = tracelint.load(BERT).span
    window, context, limit = (t0 + (t1 - t0) // 2, t0 + (t1 - t0) // 2 + 1000), (t1 - t0) // 2, 24 * 1024
    info = excerpt.cut_to_fit(BERT, tmp_path / "fit.json.gz", window, context, limit)
    assert len(reads) == 1 and 0 < info.context_ns < context and info.stored_bytes <= limit
    fit_cuts = list(cuts)
    halvings, ctx = 0, context
    while True:                                       # the same search, every cut made whole
        whole = excerpt.cut(BERT, tmp_path / "whole.json.gz", window, ctx)
        if whole.stored_bytes <= limit:
            break
        ctx, halvings = (ctx // 2 if ctx > 1000 else 0), halvings + 1
    assert (whole.context_ns, whole.kept) == (info.context_ns, info.kept)
    assert gz.decompress(whole.path.read_bytes()) == gz.decompress(info.path.read_bytes())
    assert len(reads) == 1
    # the bare window first, then the contexts largest first
    assert fit_cuts == [0, *fit_cuts[1:]] and len(fit_cuts) == halvings + 2
    # too big even bare: one cut says so
    cuts.clear()
    with pytest.raises(CaseError, match="even with no context"):
        excerpt.cut_to_fit(BERT, tmp_path / "no.json.gz", window, context, 1024)
    assert cuts == [0] and not (tmp_path / "no.json.gz").exists()


# ----- validation -------------------------------------------------------------------------------
def _mutate(tmp_path: Path, fn) -> Path:
    lib = _copy_case(W4A16, tmp_path)
    path = lib / W4A16 / "case.yaml"
    data = yaml.safe_load(path.read_text())
    fn(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return lib / W4A16


@pytest.mark.parametrize("mutate,expect", [
    (lambda d: d.pop("symptom"), "symptom: missing"),
    (lambda d: d.update(symtom="x"), "symtom: unknown field (did you mean 'symptom'?)"),
    (lambda d: d["rollback"].update(direction="up"), "rollback.direction: must be above or below, not 'up'"),
    (lambda d: d["judgement"].update(rules=["dequant"]), "judgement.rules: 'dequant' is not a rule id"),
    (lambda d: d["key_metrics"][0].update(value="fast"), "key_metrics[0].value: expected a number"),
    (lambda d: d["excerpt"].update(format="csv"), "excerpt.format: must be one of kineto-json, nsys-sqlite"),
    (lambda d: d["excerpt"].update(file="../x.json"), "excerpt.file: '../x.json' must be a plain file name"),
    (lambda d: d["expected"]["findings"][0].update(rule="TL009"), "is not in judgement.rules"),
    (lambda d: d["tags"].pop("hardware"), "tags.hardware: missing"),
    (lambda d: d.update(id="Bad Id"), "id: 'Bad Id' is not a slug"),
    (lambda d: d["provenance"].pop("command"), "provenance.command:"),
])
def test_validation_errors_are_one_line(tmp_path, mutate, expect):
    folder = _mutate(tmp_path, mutate)
    with pytest.raises(CaseError) as exc:
        load_case(folder)
    msg = str(exc.value)
    assert "\n" not in msg and expect in msg and "case.yaml: " in msg


def test_cli_errors_are_one_line(tmp_path):
    res = run_cli("case", "show", "no-such-case")
    assert res.returncode == 2 and "no case 'no-such-case'" in _one_line(res.stderr)
    res = run_cli("case", "add", tmp_path / "x.sqlite", "--finding", "0", "--rule", "TL001")
    assert res.returncode == 2 and "either --finding" in _one_line(res.stderr)
    res = run_cli("case", "add", tmp_path / "missing.sqlite", "--rule", "TL001", "--window", "5:1")
    assert res.returncode == 2 and "END is before START" in _one_line(res.stderr)
    res = run_cli("case", "add", tmp_path / "missing.sqlite", "--rule", "TL001", "--window", "1:5",
                  "--rollback", "soon")
    assert res.returncode == 2 and "--rollback 'soon'" in _one_line(res.stderr)


# ----- list / show / render / matching / determinism ----------------------------------------------
def test_list_show_render(tmp_path):
    res = run_cli("case", "list")
    assert res.returncode == 0 and W4A16 in res.stdout and "case(s)" in res.stdout
    res = run_cli("case", "show", W4A16)
    assert res.returncode == 0
    for text in ("Symptom", "Rollback trigger", "ttft_p50", "Counter-example"):
        assert text in res.stdout
    res = run_cli("case", "render", "-o", tmp_path / "pages")
    assert res.returncode == 0, res.stderr
    index = (tmp_path / "pages" / "index.md").read_text()
    for c in load_library(builtin_library()):
        assert f"[{c.id}]({c.id}.md)" in index
        page = (tmp_path / "pages" / f"{c.id}.md").read_text()
        assert page.startswith(f"# {c.title}") and "## Rollback trigger" in page


def test_similarity_prefers_close_metrics_and_same_context():
    cases = {c.id: c for c in load_library(builtin_library())}
    tl = tracelint.load(cases[W4A16].excerpt_path)
    f = next(f for f in lint(tl, Config()).findings if f.rule == "TL003")
    from tracelint.cases.match import finding_context
    ctx = finding_context(f, tl)
    assert ctx["hardware"] == "H100" and ctx["kernel_class"] == "dequant"
    assert similarity(f, cases[W4A16], ctx) > similarity(f, cases["fp8-act-quant-batch1-decode"], ctx)
    assert similarity(f, cases["ddp-allreduce-after-backward"], ctx) == 0.0   # other rule
    assert gpu_family("NVIDIA GeForce RTX 3090") == "RTX3090" and gpu_family("AMD Instinct MI300X") == "MI300X"
    assert gpu_family("NVIDIA A100-SXM4-80GB") == "A100"


def test_make_cases_is_deterministic(tmp_path):
    mc = _make_cases_module()
    ids = [W4A16, "nchw-model-on-tensor-cores"]
    for out in ("a", "b"):
        assert mc.main(["--out", str(tmp_path / out), *sum((["--only", i] for i in ids), [])]) == 0
    for i in ids:
        for name in ("case.yaml", "excerpt.json.gz" if i == W4A16 else "excerpt.sqlite"):
            assert (tmp_path / "a" / i / name).read_bytes() == (tmp_path / "b" / i / name).read_bytes()


def test_add_refuses_an_excerpt_with_secrets(tmp_path):
    pytest.importorskip("tracelint.secrets.scan")
    mc = _make_cases_module()
    trace = tmp_path / "leaky.json.gz"
    mc.nchw_model_on_tensor_cores().write_kineto(trace)
    data = json.loads(gzip.decompress(trace.read_bytes()))
    data["metadata"] = {"env": {"HF_TOKEN": "hf_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z"}}
    trace.write_bytes(gzip.compress(json.dumps(data).encode()))
    report = lint(trace, Config())
    f = next(f for f in report.findings if f.rule == "TL006")
    with pytest.raises(CaseError, match="holds 1 secret"):
        create_case(trace, tmp_path / "lib", finding=f, timeline=report.timeline)
    assert not (tmp_path / "lib").exists()


@pytest.mark.parametrize("fmt", ["jax-json", "rocprofv3-json"])
def test_add_from_a_jax_or_rocprofv3_trace(fmt, tmp_path, monkeypatch):
    """jax.profiler traces are Chrome-trace JSON with their lanes named by metadata events, cut
    like Kineto's; rocprofv3 JSON is cut record list by record list, the HIP calls of kept GPU
    work kept wherever they lie. Each excerpt reads back in its format, linked, and reproduces
    the finding (both were an internal KeyError)."""
    from tracelint.synth.jax_writer import write_jax_trace
    from tracelint.synth.rocprof_writer import write_rocprof_json
    from tracelint.synth.scenarios import all_scenarios
    sc = next(s for s in all_scenarios() if s.id == "TL004-positive-pageable")
    trace = (write_jax_trace(sc.build(), tmp_path / "host.trace.json.gz") if fmt == "jax-json"
             else write_rocprof_json(sc.build(), tmp_path / "results.json"))
    tl = tracelint.load(trace)
    steps = tl.ranges[tl.ranges["kind"].astype(str) == "step"].sort_values("start")
    a, b = int(steps["start"].iat[1]), int(steps["end"].iat[1])
    lib = tmp_path / "lib"
    res = run_cli("case", "add", trace, "--rule", "TL004", "--window", f"{a}:{b}", "--library", lib,
                  "--context-ns", "0")
    assert res.returncode == 0, res.stdout + res.stderr
    case = load_library(lib)[0]
    assert case.excerpt.format == fmt
    assert case.tags["framework"] == ("jax" if fmt == "jax-json" else case.tags["framework"])
    part = tracelint.load(case.excerpt_path)
    assert part.meta.format == fmt and part.meta.devices
    assert 0 < len(part.kernels) < len(tl.kernels) and len(part.copies) >= 1
    assert part.correlation_resolved_fraction() == tl.correlation_resolved_fraction()
    assert {f.rule for f in lint(part, Config()).findings} >= {"TL004"}
    chk = run_cli("case", "check", lib)
    assert chk.returncode == 1 and "still a template" in chk.stdout
    if fmt == "rocprofv3-json":         # the whole span, in pieces of a few records: the same JSON
        from tracelint.cases import excerpt, rocprof_excerpt
        monkeypatch.setattr(rocprof_excerpt, "PIECE_BYTES", 300)
        whole = excerpt.cut(trace, tmp_path / "whole.json.gz", tl.span, 0)
        got = json.loads(gzip.decompress(whole.path.read_bytes()))
        assert got["rocprofiler-sdk-tool"] == json.loads(trace.read_text())["rocprofiler-sdk-tool"]

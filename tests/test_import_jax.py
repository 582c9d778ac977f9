"""jax.profiler (XProf trace-viewer JSON) traces: counts and links against an independent
reading of the raw events, no double counting of the derived XLA Ops line on GPUs, TPU planes,
the planted-pattern cases a JAX trace can show, PyTorch-only rules skipped with the reason,
and one-line errors. Files come from tracelint.synth.jax_writer (layout from XProf/TSL
sources; no public jax.profiler trace was found to copy): checked against documentation only."""
from __future__ import annotations

import gzip
import json
from decimal import Decimal

import pandas as pd
import pytest

import tracelint
from tracelint.api import available_rules, lint
from tracelint.importers import sniff
from tracelint.synth.jax_writer import write_jax_trace
from tracelint.synth.scenarios import all_scenarios, evaluate, scenario_config

from conftest import run_cli

#: Cases a jax.profiler trace cannot show: no local-memory field in kernel_details, no GPU
#: model, register file or compute capability in the trace (the Pascal near-miss, TL021 and
#: the TL007 register-limit cases need them).
NOT_APPLICABLE = {"TL007-positive-spill", "TL011-near-miss-pascal", "TL021-positive-sm75-on-h100",
                  "TL007-positive-registers-bind", "TL007-positive-trace-register-file",
                  # a PyTorch constant left to TL033 by its aten:: op names, which JAX lacks
                  "TL032-near-miss-constant-is-tl033",
                  # memory-usage events: the JAX importer reads no allocator timeline
                  "TL039-positive-empty-cache-every-step", "TL040-positive-peak-in-iteration-2"}
OWN_NAMES = {"TL012-positive-clone-d2d": "where.kernel"}     # XProf names copies MemcpyD2D
PYTORCH_ONLY = {r.id for r in available_rules() if r.frameworks and "jax" not in r.frameworks}
CASES = [s for s in all_scenarios() if "nsys" in s.formats and s.id not in NOT_APPLICABLE
         and s.rule not in PYTORCH_ONLY]


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    sc = next(s for s in all_scenarios() if s.id == "TL004-positive-pageable")
    return write_jax_trace(sc.build(), tmp_path_factory.mktemp("jax") / "host.trace.json.gz")


def _raw(path) -> dict:
    """Counts from the raw events: lanes by their metadata names, nothing from tracelint."""
    ev = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
    lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
    xs = [e for e in ev if e.get("ph") == "X"]
    dev = [e for e in xs if procs[e["pid"]].startswith("/device:")]
    stream = [e for e in dev if lanes[(e["pid"], e["tid"])].startswith("Stream #")]
    kernels = [e for e in stream if not e["name"].startswith(("Memcpy", "Memset"))]
    host = [e for e in xs if procs[e["pid"]] == "/host:CPU"]
    api = [e for e in host if e["name"].startswith("cu")]
    api_corr = {e["args"]["correlation_id"] for e in api}
    return {"kernels": len(kernels), "copies": sum(e["name"].startswith("Memcpy") for e in stream),
            "api_calls": len(api), "ranges": len(host) - len(api) + len(dev) - len(stream),
            "xla_ops": sum(lanes[(e["pid"], e["tid"])] == "XLA Ops" for e in dev),
            "kernel_ns": int(sum(Decimal(e["dur"]) * 1000 for e in kernels)),
            "linked": sum(e["args"]["correlation_id"] in api_corr for e in kernels),
            "steps": sum("step_num" in e.get("args", {}) for e in host)}


def test_counts_and_links_match_the_raw_file(trace):
    assert sniff(trace) == "jax-json"
    tl, raw = tracelint.load(trace), _raw(trace)
    got = tl.counts()
    for table in ("kernels", "copies", "api_calls", "ranges"):
        assert got[table] == raw[table], table
    assert raw["xla_ops"] == raw["kernels"] > 0         # the derived line is not counted twice
    assert int((tl.kernels["end"] - tl.kernels["start"]).sum()) == raw["kernel_ns"]
    assert tl.correlation_resolved_fraction() == raw["linked"] / raw["kernels"] == 1.0
    assert (tl.ranges["kind"] == "step").sum() == raw["steps"] == 3
    assert set(tl.copies["src_kind"].astype(str)) == {"pageable"}   # from memcpy_details
    assert tl.meta.extra["framework"] == "jax" and tl.meta.format == "jax-json"


def test_tpu_plane_ops_are_the_device_work(tmp_path):
    """A TPU plane has no stream lines: its XLA Ops line is the device work."""
    m = lambda pid, name, tid=None: {"ph": "M", "pid": pid, **({"tid": tid} if tid else {}),  # noqa: E731
                                     "name": "thread_name" if tid else "process_name", "args": {"name": name}}
    x = lambda tid, name, ts, dur: {"ph": "X", "pid": 2, "tid": tid, "name": name, "ts": ts, "dur": dur}  # noqa: E731
    events = [m(1, "/host:CPU"), m(2, "/device:TPU:0"), m(2, "XLA Modules", 1), m(2, "XLA Ops", 2),
              x(1, "jit_step(1)", 10.0, 30.5), x(2, "fusion.1", 10.0, 10.25),
              x(2, "convolution.2", 20.25, 20.000001)]
    p = tmp_path / "tpu.trace.json"
    p.write_text(json.dumps({"displayTimeUnit": "ns", "traceEvents": events}))
    tl = tracelint.load(p)
    assert tl.kernels["name"].astype(str).tolist() == ["fusion.1", "convolution.2"]
    assert tl.kernels["end"].tolist() == [20_250, 40_250]              # µs text -> exact ns (rounded)
    assert tl.ranges["kind"].astype(str).tolist() == ["gpu_annotation"]
    assert tl.meta.devices[0].vendor == "google"


def test_pytorch_only_rules_skip_with_reason(trace):
    report = lint(trace)
    assert {"TL010", "TL030", "TL031"} <= PYTORCH_ONLY
    for rid in PYTORCH_ONLY:
        assert "jax trace" in report.skipped[rid], rid
    assert not any(f.rule in PYTORCH_ONLY for f in report.findings)


def test_info_reports_format_and_producer(trace, cli):
    res = cli("info", "--json", trace)
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["format"] == "jax-json" and "jax.profiler" in info["producer"]


@pytest.mark.parametrize("scenario", CASES, ids=[s.id for s in CASES])
def test_planted_cases_in_jax_format(scenario, tmp_path):
    path = write_jax_trace(scenario.build(), tmp_path / "t.trace.json.gz")
    expect = {k: v for k, v in scenario.expect.items() if k != OWN_NAMES.get(scenario.id)}
    ok, why = evaluate(type(scenario)(**{**scenario.__dict__, "expect": expect}),
                       lint(path, scenario_config(scenario)).findings)
    assert ok, why


@pytest.mark.parametrize("cut", [0.2, 0.6, 0.95])
def test_truncated_trace_is_one_line_error(trace, tmp_path, cut):
    raw = gzip.decompress(trace.read_bytes())
    bad = tmp_path / "cut.trace.json"
    bad.write_bytes(raw[: int(len(raw) * cut)])
    res = run_cli("lint", bad)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def _tables(tl) -> dict:
    return {t: getattr(tl, t).reset_index(drop=True)
            for t in ("kernels", "copies", "memsets", "api_calls", "ranges")}


def test_odd_events_are_dropped_and_odd_args_read_as_none(trace, tmp_path):
    """Events decode into slim structs (only the fields read); a document they do not fit (an
    event that is not an object, args that are not one) is read event by event instead, with
    the same tables as the file without those oddities."""
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    odd = dict(doc, traceEvents=doc["traceEvents"] + [
        7, "text", None,
        {"ph": "X", "name": "host-note", "pid": 9, "tid": 9, "ts": 5, "dur": 1, "args": ["x"]}])
    clean = dict(doc, traceEvents=doc["traceEvents"] + [
        {"ph": "X", "name": "host-note", "pid": 9, "tid": 9, "ts": 5, "dur": 1}])
    paths = {}
    for name, d in (("odd", odd), ("clean", clean)):
        paths[name] = tmp_path / f"{name}.trace.json"
        paths[name].write_text(json.dumps(d))
    got, want = (_tables(tracelint.load(paths[k])) for k in ("odd", "clean"))
    assert (got["ranges"]["name"] == "host-note").sum() == 1
    for t in want:
        pd.testing.assert_frame_equal(got[t], want[t])

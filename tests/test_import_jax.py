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
from tracelint.importers import jax_trace, kineto_ranges, sniff
from tracelint.importers.jax_tables import JaxColumns
from tracelint.synth.jax_writer import write_jax_trace
from tracelint.synth.scenarios import all_scenarios, evaluate, scenario_config

from conftest import REPO, run_cli

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


def test_an_id_past_int64_reads_as_unknown(trace, tmp_path):
    """An id no int64 holds makes that row's id unknown, not the trace unreadable."""
    corr = int(tracelint.load(trace).kernels["correlation"].iloc[0])
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    for e in doc["traceEvents"]:
        if str(e.get("args", {}).get("correlation_id")) == str(corr):   # the writer writes text
            e["args"]["correlation_id"] = 2**70
    path = tmp_path / "t.trace.json"
    path.write_text(json.dumps(doc))
    tl = tracelint.load(path)
    for t in (tl.kernels, tl.api_calls):
        assert corr not in set(t["correlation"]) and (t["correlation"] == -1).sum() == 1


EAGER = REPO / "fixtures" / "captures" / "h200" / "jax_h200_step_eager.trace.json.gz"


@pytest.fixture
def ranges_read(monkeypatch) -> list:
    """Byte ranges of a few KiB from any size on (they start at 1 MiB, 4 MiB each): the
    ranges read, as (start, end), are listed in the list returned."""
    monkeypatch.setattr(kineto_ranges, "STREAM_MIN", 0)
    monkeypatch.setattr(kineto_ranges, "RANGE_BYTES", 48 << 10)
    read, real = [], kineto_ranges.read_range

    def spy(path, start, end):
        read.append((start, end))
        return real(path, start, end)
    monkeypatch.setattr(kineto_ranges, "read_range", spy)
    return read


def _whole_tables(path) -> dict:
    """The tables from the whole file decoded at once (the path small files take)."""
    got = JaxColumns()
    got.add(jax_trace._whole(path))
    return _tables(got.timeline())


@pytest.mark.parametrize("layout", ["as captured", "metadata last", "event per line"])
def test_byte_ranges_give_the_tables_of_the_whole_file(tmp_path, ranges_read, layout):
    """A file read a byte range at a time gives the tables of the file decoded whole, even
    where the lanes' names come after their events (decided once every range is in)."""
    doc = json.loads(gzip.decompress(EAGER.read_bytes()))
    if layout == "metadata last":
        ev = doc["traceEvents"]
        doc["traceEvents"] = [e for e in ev if e.get("ph") != "M"] + [e for e in ev if e.get("ph") == "M"]
    path = tmp_path / "t.trace.json"
    path.write_text(json.dumps(doc, separators=(",", ":")) if layout != "event per line" else
                    json.dumps(doc).replace("}, {\"ph\"", "},\n{\"ph\""))
    tl = tracelint.load(path)
    assert tl.meta.format == "jax-json"                  # sniffed past a head with no lane names
    got = _tables(tl)
    assert len(ranges_read) > 100                        # read by range, not whole
    want = _whole_tables(path)
    assert len(want["kernels"]) > 300 and len(want["copies"]) > 200 and len(want["ranges"]) > 10_000
    for t in want:
        pd.testing.assert_frame_equal(got[t], want[t])


def test_large_gzip_is_read_by_range_from_a_plain_copy(ranges_read):
    got = _tables(tracelint.load(EAGER))
    assert len(ranges_read) > 100
    want = _whole_tables(EAGER)
    for t in want:
        pd.testing.assert_frame_equal(got[t], want[t])


def test_a_range_the_structs_do_not_fit_leaves_the_file_to_the_whole_decode(trace, tmp_path,
                                                                            ranges_read):
    """An event that is not an object in some range: the whole file is decoded as JSON and
    read event by event, as a small file is (test_odd_events_are_dropped_...)."""
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    ev = doc["traceEvents"]
    odd = tmp_path / "odd.trace.json"
    odd.write_text(json.dumps(dict(doc, traceEvents=ev[:len(ev) // 2] + [7] + ev[len(ev) // 2:])))
    clean = tmp_path / "clean.trace.json"
    clean.write_text(json.dumps(doc))
    got, want = _tables(tracelint.load(odd)), _tables(tracelint.load(clean))
    assert ranges_read
    for t in want:
        pd.testing.assert_frame_equal(got[t], want[t])


def test_the_format_is_told_by_the_first_mark_in_the_text(trace, tmp_path):
    """The sniffer reads 4 KiB (64 KiB of gzip): where no mark is in it, it reads on. A JAX
    trace with its lane names after the events was read as Kineto: "no GPU activity"."""
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    ev = doc["traceEvents"]
    pad = [{"ph": "i", "pid": 1, "tid": 1, "name": f"mark{i}", "ts": "0.000", "s": "t"}
           for i in range(3000)]
    doc["traceEvents"] = [e for e in ev if e.get("ph") != "M"] + pad + [e for e in ev if e.get("ph") == "M"]
    late = json.dumps(doc).encode()
    assert b'"/device:' not in late[:1 << 16] and b'"/device:' in late
    want = {f.rule for f in lint(trace).findings}
    assert "TL004" in want
    for path in (tmp_path / "late.trace.json", tmp_path / "late.trace.json.gz"):
        path.write_bytes(gzip.compress(late) if path.suffix == ".gz" else late)
        assert sniff(path) == "jax-json"
        assert {f.rule for f in lint(path).findings} == want
    # a tool's long wrapper before Kineto's keys; a Chrome trace with no mark at all
    kineto = tmp_path / "wrapped.json"
    kineto.write_text(json.dumps({"metadata": {"note": "x" * 10_000}, "schemaVersion": 1,
                                  "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k"}]}))
    assert sniff(kineto) == "kineto-json"
    plain = tmp_path / "chrome.json"
    plain.write_text(json.dumps({"traceEvents": pad}))
    assert sniff(plain) == "kineto-json"

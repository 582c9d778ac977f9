"""Kineto JSON importer: every shared trace against an independent json.load reference, exact
nanosecond times, and one-line errors for bad input."""
from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections import Counter
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

import pytest

import tracelint
from tracelint.errors import TraceFormatError
from tracelint.importers.kineto_json import load_kineto, us_to_ns

from conftest import TORCH_TRACES as TRACES, needs_shared

needs_traces = needs_shared()
by_name = pytest.mark.parametrize("path", TRACES, ids=[p.name.split(".")[0] for p in TRACES])

RANGE_CATS = ("cpu_op", "Operator", "user_annotation", "gpu_user_annotation")
API_CATS = ("cuda_runtime", "cuda_driver", "Runtime")


# ----- independent reference: stdlib json with exact decimals ------------------------------------
@lru_cache(maxsize=None)
def reference(path: Path) -> dict:
    data = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)
    events = data["traceEvents"] if isinstance(data, dict) else data
    xs = [e for e in events if e.get("ph") == "X"]
    count = Counter(e.get("cat") for e in xs)
    kernels = [e for e in xs if e.get("cat") in ("kernel", "Kernel")]
    kernels = kernels or [e for e in xs if e.get("cat") == "cuda_profiler_range"]  # CUPTI counters
    ns = [(Decimal(e["ts"]) * 1000, Decimal(e.get("dur", 0)) * 1000) for e in kernels]
    assert all(s == s.to_integral_value() and d == d.to_integral_value() for s, d in ns)
    api_corr = {e.get("args", {}).get("correlation") for e in xs if e.get("cat") in API_CATS}
    linked = sum(e.get("args", {}).get("correlation") in api_corr for e in kernels)
    if kernels and kernels[0].get("cat") == "cuda_profiler_range":   # linked by launch order
        launches = sum(e.get("cat") in API_CATS and e["name"] == "cudaLaunchKernel" for e in xs)
        linked = len(kernels) if launches == len(kernels) else 0
    return {
        "kernels": len(kernels),
        "copies": count["gpu_memcpy"] + count["Memcpy"],
        "memsets": count["gpu_memset"] + count["Memset"],
        "api_calls": sum(count[c] for c in API_CATS),
        "ranges": sum(count[c] for c in RANGE_CATS),
        "syncs": count["cuda_sync"],
        # Python tracer events, else one frame per entry of legacy args["Call stack"] strings
        "python_frames": count["python_function"] or sum(
            len([f for f in e["args"]["Call stack"].split(";") if re.match(r".*\(\d+\): ", f)])
            for e in xs if e.get("cat") in RANGE_CATS and (e.get("args") or {}).get("Call stack")),
        "kernel_starts": sorted(int(s) for s, _ in ns),
        "kernel_ns": int(sum(d for _, d in ns)),
        "linked": linked / len(kernels) if kernels else None,
        "hip_calls": sum(1 for e in xs if e.get("cat") in API_CATS and e["name"].startswith("hip")),
    }


@lru_cache(maxsize=None)
def loaded(path: Path):
    return load_kineto(path)


# ----- every shared trace ----------------------------------------------------------------------
@needs_traces
@by_name
def test_counts_match_reference(path):
    tl, ref = loaded(path), reference(path)
    got = tl.counts()
    for table in ("kernels", "copies", "memsets", "api_calls", "ranges", "syncs", "python_frames"):
        assert got[table] == ref[table], table
    assert tl.meta.format == "kineto-json"
    assert tl.meta.raw_event_counts["kernels"] == ref["kernels"]


@needs_traces
@by_name
def test_kernel_times_exact(path):
    tl, ref = loaded(path), reference(path)
    k = tl.kernels
    assert int((k["end"] - k["start"]).sum()) == ref["kernel_ns"]
    assert sorted(k["start"].tolist()) == ref["kernel_starts"]


@needs_traces
@by_name
def test_correlation_resolved(path):
    tl, ref = loaded(path), reference(path)
    frac = tl.correlation_resolved_fraction()
    print(f"{path.name}: correlation_resolved_fraction={frac} reference={ref['linked']}")
    if ref["kernels"] == 0 or ref["api_calls"] == 0:
        return
    assert frac == pytest.approx(ref["linked"])
    if ref["linked"] >= 0.9:
        assert frac >= 0.9
    else:   # launches before the profiler window: GPU rows kept, unlinked share reported
        assert any("no launching API call" in n for n in tl.meta.notes)


@needs_traces
@by_name
def test_table_invariants(path):
    tl = loaded(path)
    for name in ("kernels", "copies", "memsets", "api_calls", "ranges", "python_frames"):
        df = tl.table(name)
        assert (df["end"] >= df["start"]).all(), name
        assert df["start"].is_monotonic_increasing, name
    # GPU annotations may overlap by a ns (mi300x trace): not well nested, not checked
    for r, check in ((tl.ranges, tl.ranges["kind"].to_numpy() != "gpu_annotation"),
                     (tl.python_frames, True)):
        par = r["parent"].to_numpy()
        has = (par >= 0) & check
        assert (r["start"].to_numpy()[par[has]] <= r["start"].to_numpy()[has]).all()
        assert (r["end"].to_numpy()[par[has]] >= r["end"].to_numpy()[has]).all()
        assert (r["depth"].to_numpy()[has] == r["depth"].to_numpy()[par[has]] + 1).all()
    assert (tl.ranges.loc[tl.ranges["kind"] == "step", "step"] >= 0).all()
    if len(tl.kernels):
        assert (tl.kernels["device"] >= 0).all() and (tl.kernels["stream"] >= 0).all()
    assert "HF_TOKEN" not in repr(tl.meta) and "redacted" not in repr(tl.meta)


@needs_traces
def test_rocm_traces_have_hip_calls():
    rocm = [p for p in TRACES if "mi250" in p.name or "mi300x" in p.name]
    assert len(rocm) == 3
    for path in rocm:
        tl = loaded(path)
        names = [str(n) for n in tl.api_calls["name"].cat.categories]
        assert any(n.startswith("hip") for n in names), path.name
        assert not any(n.startswith("cuda") for n in names), path.name
        assert reference(path)["hip_calls"] == len(tl.api_calls)
        assert {d.vendor for d in tl.meta.devices} == {"amd"}
        assert len(tl.kernels) and "cuda" in tl.meta.captured


@needs_traces
def test_cpu_only_trace():
    tl = loaded(next(p for p in TRACES if "cpu_only" in p.name))
    assert not tl.has_gpu_activity and tl.correlation_resolved_fraction() is None
    assert len(tl.ranges) > 0 and "cuda" not in tl.meta.captured
    assert any("no GPU activity" in n for n in tl.meta.notes)
    assert (tl.meta.rank, tl.meta.world_size) == (34, 300)


@needs_traces
def test_python_frames_in_tracelens_traces():
    for path in [p for p in TRACES if p.name.startswith("tracelens")]:
        tl = loaded(path)
        f = tl.python_frames
        assert len(f) and "python_stacks" in tl.meta.captured, path.name
        parsed = f[f["line"] >= 0]
        files = parsed["file"].astype(str)      # "<frozen os>(808): getenv" parses too
        assert len(parsed) and (files.str.endswith(".py") | files.str.startswith("<")).all()
        builtin = f[f["line"] < 0]["file"].astype(str)     # built-ins and with_modules rows
        assert builtin.str.startswith(("<built-in", "nn.Module: ")).all()
        assert f["depth"].max() > 3 and (f["parent"] >= 0).any()


@needs_traces
def test_metadata_of_known_traces():
    tl = loaded(next(p for p in TRACES if "nccl_a100" in p.name))
    assert (tl.meta.rank, tl.meta.world_size, tl.meta.format_version) == (0, 2, "1")
    assert tl.meta.devices[0].name == "NVIDIA A100-PG509-200"
    assert tl.meta.devices[0].compute_capability == "8.0" and tl.meta.devices[0].sm_count == 108
    assert tl.meta.extra["trace_start_ns"] == tl.span[0]
    lens = loaded(next(p for p in TRACES if "bert_small" in p.name))
    assert lens.meta.producer == "PyTorch 2.6.0+cu124"
    assert {"cuda", "python_stacks", "shapes"} <= lens.meta.captured
    sampled = loaded(next(p for p in TRACES if "sampled_rank1of128" in p.name))
    assert [d.id for d in sampled.meta.devices] == [1]
    assert any("inferred" in n for n in sampled.meta.notes)


@needs_traces
def test_steps_syncs_copies_metrics():
    tl = loaded(next(p for p in TRACES if p.name == "hta_v100_rank1of2.json.gz"))
    steps = tl.ranges[tl.ranges["kind"] == "step"]
    assert len(steps) == 5 and steps["name"].astype(str).str.startswith("ProfilerStep#").all()
    assert (steps["step"] == steps["name"].astype(str).str.split("#").str[1].astype(int)).all()
    assert set(tl.copies["kind"].astype(str)) <= {"H2D", "D2H", "D2D", "P2P", "H2H"}
    legacy = loaded(next(p for p in TRACES if "2021" in p.name))
    assert len(legacy.ranges[legacy.ranges["kind"] == "step"]) == 6
    assert (legacy.kernels["stream"] == 7).all() and (legacy.api_calls["tid"] > 0).all()
    sync = loaded(next(p for p in TRACES if "alexnet" in p.name)).syncs
    assert dict(Counter(sync["sync_type"].astype(str))) == {
        "stream": 16, "device": 5, "stream_wait_event": 20}
    counters = loaded(next(p for p in TRACES if "cupti_counters" in p.name))
    assert len(counters.kernel_counters) and "kernel_counters" in counters.meta.captured
    assert counters.meta.extra["kernel_timing"] == "synthetic"   # see test_cupti_counters.py


@needs_traces
def test_dispatch_and_progress():
    path = next(p for p in TRACES if "event_sync_a100" in p.name)
    seen = []
    tl = tracelint.load(path, progress=lambda stage, frac: seen.append((stage, frac)))
    assert tl.counts() == loaded(path).counts()
    assert {s for s, _ in seen} == {"read", "decode", "build"}
    assert all(0.0 <= f <= 1.0 for _, f in seen)


# ----- exact time on generated traces ----------------------------------------------------------
def _kernel(ts, dur, corr=1, **args):
    return {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": corr, **args}}


def _write(tmp_path, events, name="t.json", gz=False, raw_text=None) -> Path:
    text = raw_text if raw_text is not None else json.dumps({"traceEvents": events})
    p = tmp_path / name
    p.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return p


def test_exact_ns_from_decimal_text(tmp_path):
    text = ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, '
            '"ts": 1669783687389292.123, "dur": 0.5, "args": {"correlation": 1}}]}')
    k = load_kineto(_write(tmp_path, None, raw_text=text)).kernels
    assert k["start"].iloc[0] == 1669783687389292123
    assert k["end"].iloc[0] == 1669783687389292623


def test_back_to_back_kernels_have_zero_gap(tmp_path):
    # float64 would turn these into ...292.125 + 0.877: a 2 ns overlap/gap that is not there
    text = ('{"traceEvents": ['
            '{"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, '
            '"ts": 1669783687389292.123, "dur": 0.877, "args": {"correlation": 1, "stream": 7}},'
            '{"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, '
            '"ts": 1669783687389293, "dur": 1.001, "args": {"correlation": 2, "stream": 7}},'
            '{"ph": "X", "cat": "kernel", "name": "c", "pid": 0, "tid": 7, '
            '"ts": 1669783687389294.001, "dur": 2, "args": {"correlation": 3, "stream": 7}}]}')
    k = load_kineto(_write(tmp_path, None, raw_text=text, gz=True)).kernels
    gaps = k["start"].to_numpy()[1:] - k["end"].to_numpy()[:-1]
    assert gaps.tolist() == [0, 0]
    assert k["end"].iloc[-1] == 1669783687389296001


def test_us_to_ns_forms():
    ns, ok = us_to_ns([1, "2.5", "-0.25", "1.5e3", "7.0001", "7.0005", "1669783687389292.999",
                       "92233720368547758.1", None, "x", "12"])
    assert ns[:8].tolist() == [1000, 2500, -250, 1_500_000, 7000, 7001, 1669783687389292999, 0]
    assert ok.tolist() == [True] * 7 + [False, False, False, True]
    assert ns[10] == 12000



@pytest.mark.parametrize("values", [
    [b"1669783689294500.0", b"1669783689294513.5", b"1669783689294519.9"],   # one width
    [b"1669783689294500.25", b"1669783689294513.5", b"10.125"],                # widths differ
    [b"12", b"7.5", b"-3.0"],                                                 # a sign, two widths
    [b"1.5e3", b"2.0e3"],                                                     # one width, exponents
    [b"", b""], [b"ab", b"cd"], [b"1.0", "2.0"], [b"12.5", 3],                # empty, junk, mixed
])
def test_decimal_bytes_parse_as_decimal(values):
    """Bytes of one width are read from one join (kineto_values._equal_width); every form
    gives what exact decimal arithmetic gives, or not-ok."""
    from decimal import Decimal, InvalidOperation
    ns, ok = us_to_ns(values)
    for v, got, good in zip(values, ns.tolist(), ok.tolist()):
        try:
            want = int(Decimal(v.decode() if isinstance(v, bytes) else v) * 1000)
        except (InvalidOperation, ValueError):
            want = None
        assert (got if good else None) == want, v
    from tracelint.importers.kineto_values import _equal_width
    matrix = _equal_width(values)
    one_width = all(isinstance(v, bytes) for v in values) and len({len(v) for v in values}) == 1 \
        and values[0] != b""
    assert (matrix is not None) == one_width
    if one_width:       # the same bytes numpy's fixed-width conversion gives, row by row
        assert matrix.tolist() == [list(v) for v in values]

# ----- generated traces: shapes of input -------------------------------------------------------
def test_bare_array_and_flow_correlation(tmp_path):
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel_v7000", "pid": 10, "tid": 11,
         "ts": 100, "dur": 5, "args": {"External id": 3}},
        {"ph": "s", "id": 42, "pid": 10, "tid": 11, "ts": 100, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 42, "pid": 0, "tid": 7, "ts": 110, "cat": "ac2g", "name": "ac2g",
         "bp": "e"},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 110, "dur": 3,
         "args": {"device": 0, "stream": 7}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0,
         "tid": 7, "ts": 120, "dur": 2, "args": {"bytes": 64, "correlation": 9}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 10, "tid": 11,
         "ts": 90, "dur": 50},
    ]
    tl = load_kineto(_write(tmp_path, None, raw_text=json.dumps(events)))
    assert tl.kernels["correlation"].tolist() == [42]
    assert tl.api_calls["correlation"].tolist() == [42]
    assert tl.api_calls["name"].astype(str).tolist() == ["cudaLaunchKernel"]
    assert tl.kernels["pid"].tolist() == [10]            # the launching process
    assert tl.correlation_resolved_fraction() == 1.0
    c = tl.copies.iloc[0]
    assert (c["kind"], c["src_kind"], c["dst_kind"]) == ("H2D", "pageable", "device")
    assert c["bytes"] == 64
    assert tl.ranges[["kind", "step"]].values.tolist() == [["step", 4]]
    assert any("flow" in n for n in tl.meta.notes)


def test_counter_and_metadata_events(tmp_path):
    events = [
        {"name": "thread_name", "ph": "M", "pid": 10, "tid": 11, "args": {"name": "main"}},
        {"name": "process_name", "ph": "M", "pid": 10, "tid": 0, "args": {"name": "python"}},
        {"ph": "C", "name": "mem", "pid": 10, "ts": 5.5, "args": {"used": 3, "free": 1.5}},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Traces",
         "tid": "PyTorch Profiler", "ts": 1, "dur": 100},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 10, "tid": 11, "ts": 2},
    ]
    tl = load_kineto(_write(tmp_path, events))
    m = tl.metrics.sort_values("metric")
    assert m["metric"].astype(str).tolist() == ["mem.free", "mem.used"]
    assert m["value"].tolist() == [1.5, 3.0] and (m["ts"] == 5500).all()
    assert tl.meta.extra["thread_names"] == {"10:11": "main"}
    assert tl.meta.extra["process_names"] == {"10": "python"}
    assert tl.meta.extra["profiler_window_ns"] == (1000, 101000)
    assert not tl.has_gpu_activity and tl.meta.raw_event_counts["total"] == 5


def test_empty_event_list_is_a_valid_empty_trace(tmp_path):
    tl = load_kineto(_write(tmp_path, [], gz=True))
    assert not tl.has_gpu_activity and sum(tl.counts().values()) == 0


# ----- bad input -------------------------------------------------------------------------------
GOOD = json.dumps({"traceEvents": [_kernel(1, 2)]})
BAD = {
    "empty.json": b"",
    "blank.json": b"  \n ",
    "truncated.json": GOOD[: len(GOOD) // 2].encode(),
    "object.json": b'{"a": 1}',
    "numbers.json": b"[1, 2, 3]",
    "events_not_list.json": b'{"traceEvents": 5}',
    "bad_event.json": b'{"traceEvents": [{"ph": "X", "name": 5}]}',
    "garbage.json": b"{nope",
    "scalar.json": b"42",
    "truncated.json.gz": gzip.compress(GOOD.encode())[:-12],
    "corrupt_gzip.json": b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"not deflate data at all",
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises_one_line(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(BAD[name])
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(TraceFormatError) as exc:
        load_kineto(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg and len(msg) < 500
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


@needs_traces
def test_truncated_real_gzip(tmp_path):
    src = next(p for p in TRACES if "alexnet" in p.name).read_bytes()
    path = tmp_path / "cut.json.gz"
    path.write_bytes(src[: len(src) // 2])
    with pytest.raises(TraceFormatError, match="gzip"):
        tracelint.load(path)
    assert path.read_bytes() == src[: len(src) // 2]

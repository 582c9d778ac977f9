"""The byte-range Kineto path gives the same Timeline as the whole-buffer path (every table,
row order included, and meta), and leaves anything it cannot cut safely to the whole buffer."""
from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TRACES, trace_or_skip

from tracelint import forking
from tracelint.importers import kineto_json as kj
from tracelint.importers import kineto_ranges as kr


@pytest.fixture(autouse=True)
def _one_process(monkeypatch):
    """Each test decodes in this process unless it asks for more (a CLI call earlier in the
    session may have set the usable CPUs)."""
    monkeypatch.setattr(forking, "_LOAD_WORKERS", 1)

TABLES = ("kernels", "copies", "memsets", "api_calls", "ranges", "syncs", "python_frames", "metrics",
          "memory")


def _plain(tmp_path: Path, name: str) -> Path:
    src = trace_or_skip(TRACES / "torch" / name)
    out = tmp_path / name.removesuffix(".gz")
    out.write_bytes(gzip.decompress(src.read_bytes()))
    return out


def _launches(n: int, name, kernel_correlation: bool) -> list[dict]:
    """n launches: the API call, its ac2g flow pair and the kernel (with or without its own
    args.correlation, so that only the flow links them)."""
    events = []
    for i in range(n):
        ts = 1000 + 10 * i
        kargs = {"device": 0, "stream": 7, **({"correlation": i} if kernel_correlation else {})}
        events += [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": ts, "dur": 2, "args": {"correlation": i}},
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": i, "pid": 1, "tid": 1, "ts": ts},
            {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": i, "pid": 0, "tid": 7, "ts": ts + 5,
             "bp": "e"},
            {"ph": "X", "cat": "kernel", "name": name(i), "pid": 0, "tid": 7, "ts": ts + 5,
             "dur": 3, "args": kargs}]
    return events


def _assert_same(a, b):
    for t in TABLES:
        pd.testing.assert_frame_equal(getattr(a, t), getattr(b, t))
    assert dataclasses.asdict(a.meta) == dataclasses.asdict(b.meta)
    assert list(a.meta.extra["category_counts"]) == list(b.meta.extra["category_counts"])


@pytest.mark.parametrize("name,range_bytes", [
    ("hta_trace_diff_control_a100_rank3of8.json.gz", 150_000),   # ops and annotations tie on start
    ("hta_cupti_counters_a100.json.gz", 3_000),                   # counters: special events
    ("hta_v100_rank0of1.pt.trace.json.gz", 400_000),
])
def test_ranges_equal_whole_buffer(tmp_path, monkeypatch, name, range_bytes):
    path = _plain(tmp_path, name)
    monkeypatch.setattr(kr, "RANGE_BYTES", range_bytes)
    monkeypatch.setattr(kr, "STREAM_MIN", 0)
    _, ranges = kr.plan(path, path.stat().st_size)
    assert len(ranges) > 3
    by_ranges = kj._load_in_ranges(path, lambda stage, fraction: None)
    assert by_ranges is not None
    monkeypatch.setattr(kr, "STREAM_MIN", 1 << 62)
    _assert_same(by_ranges, kj.load_kineto(path))


def test_the_last_ranges_are_smaller_so_that_processes_end_together(tmp_path, monkeypatch):
    """Ranges are RANGE_BYTES long except over the file's last TAIL_RANGES * RANGE_BYTES, cut
    a quarter that size; every event is in exactly one range, and the Timeline is the same."""
    path = _plain(tmp_path, "hta_v100_rank0of1.pt.trace.json.gz")
    size = path.stat().st_size
    monkeypatch.setattr(kr, "RANGE_BYTES", 400_000)
    monkeypatch.setattr(kr, "STREAM_MIN", 0)
    _, ranges = kr.plan(path, size)
    lengths = [hi - lo for lo, hi in ranges]
    tail_from = size - kr.TAIL_RANGES * 400_000
    early = [n for (lo, _), n in zip(ranges, lengths) if lo + 400_000 < tail_from]
    late = [n for (lo, _), n in zip(ranges[:-1], lengths) if lo > tail_from]
    assert early and all(400_000 <= n < 400_000 + 64_000 for n in early)
    assert len(late) >= 4 and all(100_000 <= n < 100_000 + 64_000 for n in late)
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))
    by_ranges = kj._load_in_ranges(path, lambda stage, fraction: None)
    monkeypatch.setattr(kr, "TAIL_RANGES", 0)
    assert len(kr.plan(path, size)[1]) < len(ranges)
    _assert_same(by_ranges, kj._load_in_ranges(path, lambda stage, fraction: None))


def test_correlation_from_flows_across_ranges(tmp_path, monkeypatch):
    """Kernels without args.correlation take it from ac2g flows, also when the flow and the
    kernel sit in different ranges and batches."""
    events = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "p"}}]
    events += _launches(300, lambda i: f"k{i % 7}", kernel_correlation=False)
    path = tmp_path / "flows.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [\n'
                    + ",\n".join(json.dumps(e) for e in events) + '\n], "traceName": "x"}')
    monkeypatch.setattr(kr, "RANGE_BYTES", 2_000)
    monkeypatch.setattr(kj, "CHUNK", 97)
    monkeypatch.setattr(kr, "STREAM_MIN", 0)
    by_ranges = kj._load_in_ranges(path, lambda stage, fraction: None)
    assert by_ranges is not None
    assert sorted(by_ranges.kernels["correlation"]) == list(range(300))
    assert by_ranges.meta.extra["trace_name"] == "x"
    monkeypatch.setattr(kr, "STREAM_MIN", 1 << 62)
    _assert_same(by_ranges, kj.load_kineto(path))



def test_events_longer_than_the_cut_window(tmp_path, monkeypatch):
    """Cuts are looked for a window at a time: windows that hold no event boundary (here
    events 2-4 times a window's length) are stepped over, and the ranges still give the
    whole-buffer Timeline."""
    events = _launches(60, lambda i: "k" * (1000 + 500 * (i % 3)) + str(i % 5),
                       kernel_correlation=True)
    path = tmp_path / "long.json"
    path.write_text('{"traceEvents": [\n' + ",\n".join(json.dumps(e) for e in events) + "\n]}")
    monkeypatch.setattr(kr, "_CUT_WINDOW", 512)
    monkeypatch.setattr(kr, "RANGE_BYTES", 3_000)
    monkeypatch.setattr(kr, "STREAM_MIN", 0)
    _, ranges = kr.plan(path, path.stat().st_size)
    assert len(ranges) > 10
    by_ranges = kj._load_in_ranges(path, lambda stage, fraction: None)
    assert by_ranges is not None and len(by_ranges.kernels) == 60
    monkeypatch.setattr(kr, "STREAM_MIN", 1 << 62)
    _assert_same(by_ranges, kj.load_kineto(path))

@pytest.mark.parametrize("text", [
    # no newline between events: nothing to cut at
    '{"traceEvents": [' + ",".join(['{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, '
                                    '"tid": 7, "ts": 1, "dur": 1}'] * 50) + "]}",
    # objects one per line inside an event's args: a cut there must not be taken
    '{"traceEvents": [\n' + ",\n".join(['{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, '
                                        '"tid": 1, "ts": 1, "dur": 1, "args": {"l": [\n{"a": 1},\n'
                                        '{"b": 2}\n]}}'] * 50) + "\n]}",
])
def test_unsafe_or_uncuttable_files_take_the_whole_buffer(tmp_path, monkeypatch, text):
    path = tmp_path / "t.json"
    path.write_text(text)
    monkeypatch.setattr(kr, "RANGE_BYTES", 200)
    monkeypatch.setattr(kr, "STREAM_MIN", 0)
    try:
        got = kj._load_in_ranges(path, lambda stage, fraction: None)
    except kr.NotSplittable:  # pragma: no cover - _load_in_ranges catches it
        raise
    monkeypatch.setattr(kr, "STREAM_MIN", 1 << 62)
    whole = kj.load_kineto(path)
    if got is not None:  # a cut was possible and every range decoded: must equal the whole
        _assert_same(got, whole)
    assert len(whole.kernels) + len(whole.ranges) == 50


@pytest.mark.parametrize("name,range_bytes", [
    ("hta_trace_diff_control_a100_rank3of8.json.gz", 150_000),   # ops and annotations tie on start
    ("hta_cupti_counters_a100.json.gz", 3_000),                   # counters: special events
    ("hta_v100_rank1of2.json.gz", 400_000),                       # [memory] events
])
def test_worker_processes_equal_one_process(tmp_path, monkeypatch, name, range_bytes):
    """Ranges decoded by 3 processes (names renumbered, columns merged in file order) give
    the same Timeline as the whole-buffer path."""
    path = _plain(tmp_path, name)
    monkeypatch.setattr(kr, "RANGE_BYTES", range_bytes)
    monkeypatch.setattr(kr, "STREAM_MIN", 0)
    monkeypatch.setattr(forking, "_LOAD_WORKERS", 3)
    _, ranges = kr.plan(path, path.stat().st_size)
    assert len(ranges) >= 6
    by_workers = kj._load_in_ranges(path, lambda stage, fraction: None)
    assert by_workers is not None
    monkeypatch.setattr(forking, "_LOAD_WORKERS", 1)
    monkeypatch.setattr(kr, "STREAM_MIN", 1 << 62)
    _assert_same(by_workers, kj.load_kineto(path))


def test_ranges_are_dealt_to_every_process_and_a_dead_worker_s_are_decoded_here(tmp_path,
                                                                                monkeypatch):
    """Each process takes the next range: the workers and this process all decode some; a
    worker that dies mid-range leaves its ranges to this process, with the same Timeline."""
    import os
    from tracelint.importers import kineto_parallel as kp
    path = _plain(tmp_path, "hta_v100_rank1of2.json.gz")
    monkeypatch.setattr(kr, "RANGE_BYTES", 400_000)
    monkeypatch.setattr(kr, "STREAM_MIN", 0)
    monkeypatch.setattr(forking, "_LOAD_WORKERS", 3)
    parent, by = os.getpid(), {}
    decode_one = kp._decode_one

    def recording(p, rng):
        got = decode_one(p, rng)
        got["decoded_by"] = os.getpid()
        return got

    monkeypatch.setattr(kp, "_decode_one", recording)
    merge_all = kp._merge_all
    monkeypatch.setattr(kp, "_merge_all", lambda b, parts: (
        by.update(enumerate(p.pop("decoded_by") for p in parts)) or merge_all(b, parts)))
    dealt = kj._load_in_ranges(path, lambda stage, fraction: None)
    assert parent in by.values() and len(set(by.values())) == 3

    def dies_in_worker(p, rng):
        if os.getpid() != parent:
            os._exit(3)
        return recording(p, rng)

    by.clear()
    monkeypatch.setattr(kp, "_decode_one", dies_in_worker)
    rescued = kj._load_in_ranges(path, lambda stage, fraction: None)
    assert set(by.values()) == {parent}
    rescued.meta.load_s = dealt.meta.load_s
    _assert_same(rescued, dealt)
    monkeypatch.setattr(forking, "_LOAD_WORKERS", 1)
    monkeypatch.setattr(kr, "STREAM_MIN", 1 << 62)
    one = kj.load_kineto(path)
    one.meta.load_s = dealt.meta.load_s
    _assert_same(dealt, one)


@pytest.mark.parametrize("odd", [{"ph": "Q"}, {}], ids=["unknown phase", "no phase"])
def test_event_outside_the_phase_union_falls_back_to_the_whole_buffer(tmp_path, monkeypatch, odd):
    """The range path decodes events by phase (flows as their category only); an event with an
    unknown phase or none is no error of the trace: the whole-buffer path reads the file, and
    the flows of both paths are counted alike."""
    events = _launches(200, lambda i: "k", kernel_correlation=True)
    path = tmp_path / "t.json"
    monkeypatch.setattr(kr, "RANGE_BYTES", 4_000)
    monkeypatch.setattr(kr, "STREAM_MIN", 0)
    path.write_text(json.dumps({"traceEvents": events}).replace("}, {", "},\n{"))
    clean = kj._load_in_ranges(path, lambda stage, fraction: None)
    assert clean is not None and clean.meta.raw_event_counts["flows"] == 400
    monkeypatch.setattr(kr, "STREAM_MIN", 1 << 62)
    _assert_same(clean, kj.load_kineto(path))         # flows skipped, counts and order kept
    monkeypatch.setattr(kr, "STREAM_MIN", 0)
    events.insert(len(events) // 2, {"name": "odd", "pid": 1, "tid": 1, "ts": 5, **odd})
    path.write_text(json.dumps({"traceEvents": events}).replace("}, {", "},\n{"))
    assert kj._load_in_ranges(path, lambda stage, fraction: None) is None   # left to the buffer
    whole = kj.load_kineto(path)
    assert len(whole.kernels) == 200 and whole.meta.raw_event_counts["flows"] == 400


def test_flows_without_category_next_to_memory_events_equal_the_whole_buffer(tmp_path, monkeypatch):
    """2021 traces leave "cat" empty: their flows land in the same bucket as their [memory]
    instants, and the flow structs (category only) must read as no memory event."""
    events = _launches(150, lambda i: "k", kernel_correlation=True)
    for i, e in enumerate(events):
        if e["ph"] in ("s", "f"):
            e["cat"] = ""
    events += [{"ph": "i", "cat": "", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1000 + 10 * i,
                "args": {"Bytes": 512, "Total Allocated": 512 * (i + 1), "Device Type": 1,
                         "Device Id": 0}} for i in range(150)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}).replace("}, {", "},\n{"))
    monkeypatch.setattr(kr, "RANGE_BYTES", 4_000)
    monkeypatch.setattr(kr, "STREAM_MIN", 0)
    by_ranges = kj._load_in_ranges(path, lambda stage, fraction: None)
    assert by_ranges is not None and len(by_ranges.memory) == 150
    monkeypatch.setattr(kr, "STREAM_MIN", 1 << 62)
    _assert_same(by_ranges, kj.load_kineto(path))


def test_cli_loads_with_the_usable_cpus_a_library_call_with_one(tmp_path, monkeypatch):
    """`tracelint lint FILE` (cli.common.load_trace) decodes a large plain file with the
    usable CPUs, at most 4, or with --jobs; tracelint.load alone stays in its process. The
    Timeline is the same either way."""
    import tracelint
    from tracelint.cli.common import load_trace
    from tracelint.importers import kineto_parallel as kp
    path = _plain(tmp_path, "hta_v100_rank1of2.json.gz")
    monkeypatch.setattr(kr, "RANGE_BYTES", 400_000)
    monkeypatch.setattr(kr, "STREAM_MIN", 0)
    monkeypatch.setattr(forking, "usable_cpus", lambda: 8)
    used = []
    decode = kp.decode_parallel
    monkeypatch.setattr(kp, "decode_parallel", lambda *a: used.append(a[-1]) or decode(*a))
    one = tracelint.load(path)
    assert used == []
    by_cli = load_trace(str(path), progress=False)
    assert used == [forking.MAX_DEFAULT_LOAD_WORKERS]
    load_trace(str(path), progress=False, workers=1)
    load_trace(str(path), progress=False, workers=2)
    assert used == [4, 2]
    by_cli.meta.load_s = one.meta.load_s       # the load's own wall time
    _assert_same(by_cli, one)


FORKS_FIRST = r"""
import sys
from tracelint.importers import kineto_parallel as kp, kineto_ranges as kr
kr.STREAM_MIN, kr.RANGE_BYTES = 0, 400_000
warm = kp._warm_imports
def watched():
    print("pandas imported before the workers forked:", "pandas" in sys.modules, file=sys.stderr,
          flush=True)
    warm()
kp._warm_imports = watched
from tracelint.cli.app import run
sys.argv = ["tracelint", "lint", sys.argv[1], "-f", "json", "-o", sys.argv[2], "--fail-on",
            "never", "--jobs", "2"]
run()
"""


def test_the_command_forks_its_decoders_before_it_imports_pandas(tmp_path):
    """`tracelint lint FILE` imports nothing heavy before the load: the decoding workers fork
    first and this process imports pandas (0.2 s) while they decode. A module that imports
    pandas on the way (a job check, a format sniff) would put that time back on the path."""
    import subprocess
    import sys
    path = _plain(tmp_path, "hta_v100_rank1of2.json.gz")
    out = tmp_path / "report.json"
    res = subprocess.run([sys.executable, "-c", FORKS_FIRST, str(path), str(out)],
                         capture_output=True, text=True, timeout=300)
    assert "pandas imported before the workers forked: False" in res.stderr, res.stderr[-2000:]
    assert json.loads(out.read_text())["findings"]


def test_a_parallel_load_nests_its_ranges_in_a_worker_and_survives_its_death(tmp_path,
                                                                           monkeypatch):
    """After a parallel decode the ranges' nesting and the [memory] events' owners are made by
    a forked worker (kineto_tables.ranges_work) while this process builds the other tables;
    if that worker dies before or between them, this process makes them itself. Each way
    gives the one-process Timeline."""
    import os
    from tracelint.importers import kineto_tables as kt
    path = _plain(tmp_path, "hta_v100_rank1of2.json.gz")
    monkeypatch.setattr(kr, "RANGE_BYTES", 400_000)
    monkeypatch.setattr(kr, "STREAM_MIN", 0)
    monkeypatch.setattr(forking, "_LOAD_WORKERS", 2)
    parent, made_here = os.getpid(), []
    work = kt.ranges_work

    def recording(c, names, memory, die_after=None):
        for i, answer in enumerate(work(c, names, memory)):
            if os.getpid() == parent:
                made_here.append(i)
            elif i == die_after:
                os._exit(3)
            else:
                os.write(w, b"w")           # the worker says so through a pipe
            yield answer

    r, w = os.pipe()
    monkeypatch.setattr(kt, "ranges_work", recording)
    beside = kj._load_in_ranges(path, lambda stage, fraction: None)
    os.close(w)
    assert os.read(r, 10) == b"ww" and made_here == []
    os.close(r)
    assert len(beside.memory) and (np.asarray(beside.memory["op"], dtype=object) != "").any()
    rescued = []
    for die_after in (0, 1):
        made_here.clear()
        w = os.open(os.devnull, os.O_WRONLY)
        monkeypatch.setattr(kt, "ranges_work", lambda c, n, m, d=die_after: recording(c, n, m, d))
        rescued.append(kj._load_in_ranges(path, lambda stage, fraction: None))
        os.close(w)
        assert made_here == [0, 1]            # what the worker did not send: all made here
    monkeypatch.setattr(forking, "_LOAD_WORKERS", 1)
    monkeypatch.setattr(kr, "STREAM_MIN", 1 << 62)
    one = kj.load_kineto(path)
    for tl in (beside, *rescued):
        tl.meta.load_s = one.meta.load_s
        _assert_same(tl, one)


@pytest.mark.parametrize("name", ["hta_v100_rank0of1.pt.trace.json.gz",      # dumped on one line
                                  "hta_sampled_rank0of128.json.gz"])         # written so
def test_a_trace_on_one_line_is_cut_before_its_events(tmp_path, monkeypatch, name):
    """A trace with no newline between its events (json.dump of a loaded trace) is cut before
    each range's first event, and gives the whole-buffer Timeline."""
    src = trace_or_skip(TRACES / "torch" / name)
    text = gzip.decompress(src.read_bytes())
    path = tmp_path / "one_line.json"
    path.write_bytes(json.dumps(json.loads(text)).encode() if b"\n" in text else text)
    assert b"\n" not in path.read_bytes()
    monkeypatch.setattr(kr, "RANGE_BYTES", 100_000)
    monkeypatch.setattr(kr, "STREAM_MIN", 0)
    _, ranges = kr.plan(path, path.stat().st_size)
    assert len(ranges) > 3
    by_ranges = kj._load_in_ranges(path, lambda stage, fraction: None)
    assert by_ranges is not None and len(by_ranges.api_calls) + len(by_ranges.ranges) > 1000
    monkeypatch.setattr(kr, "STREAM_MIN", 1 << 62)
    _assert_same(by_ranges, kj.load_kineto(path))


def test_a_one_line_cut_inside_nested_objects_leaves_the_file_to_the_whole_buffer(tmp_path,
                                                                                   monkeypatch):
    """Objects nested in an event that look like events: a range cut between them fails to
    decode, and the whole-buffer path reads the file."""
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i,
               "dur": 1, "args": {"nested": [{"ph": "i", "name": "x"}] * 50}}
              for i in range(200)]
    path = tmp_path / "nested.json"
    path.write_text(json.dumps({"traceEvents": events}))
    monkeypatch.setattr(kr, "RANGE_BYTES", 3_000)
    monkeypatch.setattr(kr, "STREAM_MIN", 0)
    assert kj._load_in_ranges(path, lambda stage, fraction: None) is None
    assert len(kj.load_kineto(path).ranges) == 200


@pytest.mark.parametrize("lead", [b"\xef\xbb\xbf", b"\n\xef\xbb\xbf  \n"])
def test_a_byte_order_mark_before_the_trace(tmp_path, monkeypatch, lead):
    """A UTF-8 byte order mark (white space around it too: this trace starts with a newline)
    before the trace: the same Timeline by range and from the whole buffer as without it."""
    plain = _plain(tmp_path, "hta_v100_rank0of1.pt.trace.json.gz")
    (tmp_path / "bom").mkdir()
    path = tmp_path / "bom" / plain.name               # the same name: the same meta
    path.write_bytes(lead + plain.read_bytes())
    monkeypatch.setattr(kr, "RANGE_BYTES", 400_000)
    monkeypatch.setattr(kr, "STREAM_MIN", 0)
    by_ranges = kj._load_in_ranges(path, lambda stage, fraction: None)
    assert by_ranges is not None
    monkeypatch.setattr(kr, "STREAM_MIN", 1 << 62)
    whole = kj.load_kineto(path)
    _assert_same(by_ranges, whole)
    _assert_same(whole, kj.load_kineto(plain))

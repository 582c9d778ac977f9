"""A large gzip Kineto trace is read through a temporary plain copy by the byte-range path
(importers/gzip_staging): the same Timeline as the whole-buffer path, the copy removed, the
input untouched, bad gzip refused in one line; and lint's quick secret scan treats it as the
large trace it is (metadata only)."""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from pathlib import Path

import pytest
from conftest import TRACES, trace_or_skip

import tracelint.io as tracelint_io  # the quick scan's limit lives there
from tracelint import forking
from tracelint.errors import TraceFormatError
from tracelint.importers import gzip_staging as gs
from tracelint.importers import kineto_json as kj
from tracelint.importers import kineto_ranges as kr

from test_kineto_ranges import _assert_same

REAL = "hta_v100_rank0of1.pt.trace.json.gz"


@pytest.fixture
def small_limits(monkeypatch, tmp_path):
    """Every file counts as large, ranges are small, and temporary files go to a folder of
    this test's own (to see that the copy is removed)."""
    monkeypatch.setattr(forking, "_LOAD_WORKERS", 1)
    monkeypatch.setattr(kr, "STREAM_MIN", 0)
    monkeypatch.setattr(gs, "STAGE_MIN", 0)
    monkeypatch.setattr(kr, "RANGE_BYTES", 400_000)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


def _whole_buffer(path: Path, monkeypatch):
    monkeypatch.setattr(kr, "STREAM_MIN", 1 << 62)
    monkeypatch.setattr(gs, "STAGE_MIN", 1 << 62)
    monkeypatch.setattr(gs, "COMPRESSED_LARGE", 1 << 62)
    return kj.load_kineto(path)


def test_a_large_gzip_trace_is_read_by_range_from_a_plain_copy(small_limits, monkeypatch):
    src = trace_or_skip(TRACES / "torch" / REAL)
    before = hashlib.sha256(src.read_bytes()).hexdigest()
    seen = []
    real = kj._load_in_ranges
    monkeypatch.setattr(kj, "_load_in_ranges", lambda p, r, source=None: seen.append(
        (Path(p).suffix, source)) or real(p, r, source))
    staged = kj.load_kineto(src)
    assert seen == [(".gz", None), (".json", src)]        # the .gz, then its plain copy
    assert list(small_limits.iterdir()) == []              # the copy is gone
    assert hashlib.sha256(src.read_bytes()).hexdigest() == before
    _assert_same(staged, _whole_buffer(src, monkeypatch))


def test_two_processes_read_the_plain_copy(small_limits, monkeypatch):
    src = trace_or_skip(TRACES / "torch" / REAL)
    monkeypatch.setattr(forking, "_LOAD_WORKERS", 2)
    two = kj.load_kineto(src)
    assert list(small_limits.iterdir()) == []
    _assert_same(two, _whole_buffer(src, monkeypatch))


def test_without_a_temporary_folder_the_whole_buffer_path_runs(small_limits, monkeypatch):
    src = trace_or_skip(TRACES / "torch" / REAL)

    def no_space(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(tempfile, "mkstemp", no_space)
    _assert_same(kj.load_kineto(src), _whole_buffer(src, monkeypatch))


def test_gzip_is_staged_from_the_size_plain_files_are_read_by_range(tmp_path):
    """A real trace of 15 MB of text in 1.2 MB of gzip is staged, as a plain file of its size
    would be read by range; one of 0.3 MB of text is read in memory, as a plain one would."""
    mid = trace_or_skip(TRACES / "torch" / REAL)
    small = trace_or_skip(TRACES / "torch" / "hta_alexnet_a100.json.gz")
    assert mid.stat().st_size < gs.COMPRESSED_LARGE        # chosen by the size hint alone
    assert gs.STAGE_MIN == kr.STREAM_MIN
    assert gs.worth_staging(mid)
    assert not gs.worth_staging(small)
    plain = tmp_path / "plain.json"
    plain.write_bytes(b'{"traceEvents": []}')
    assert not gs.worth_staging(plain)


@pytest.mark.parametrize("damage", ["truncated", "bomb"])
def test_bad_large_gzip_is_refused_in_one_line(small_limits, tmp_path, monkeypatch, damage):
    doc = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,
                            "ts": i, "dur": 1, "args": {"device": 0, "stream": 7}}
                           for i in range(5000)]}
    data = gzip.compress(("{\"traceEvents\": [\n" + ",\n".join(
        json.dumps(e) for e in doc["traceEvents"]) + "\n]}").encode())
    path = tmp_path / "t.json.gz"
    if damage == "truncated":
        path.write_bytes(data[:len(data) // 2])
    else:
        path.write_bytes(data)
        monkeypatch.setenv("TRACELINT_GZIP_MAX_BYTES", "10000")
    with pytest.raises(TraceFormatError) as err:
        kj.load_kineto(path)
    assert "\n" not in str(err.value) and ("truncated" in str(err.value) or "bomb" in str(err.value))
    assert list(small_limits.iterdir()) == []


def test_quick_scan_of_large_gzip_json_reads_metadata_only(tmp_path, monkeypatch):
    """As for a large plain trace (test_secrets): the metadata is scanned, events are not, and
    the finding says how large the JSON is, not the gzip file."""
    from tracelint.secrets import scan as S
    token = "hf_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z"
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 1, "tid": 7, "ts": i,
               "dur": 1, "args": {"device": 0, "stream": 7, "note": token if i == 5 else ""}}
              for i in range(20000)]
    doc = {"schemaVersion": 1, "traceEvents": events,
           "metadata": {"system": {"env": {"HF_TOKEN": token}}}}
    path = tmp_path / "big.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    text = len(json.dumps(doc).encode())
    assert tracelint_io.json_size(path) == text > path.stat().st_size
    monkeypatch.setattr(tracelint_io, "QUICK_SCAN_LIMIT", text - 1)
    S.clear_cache()
    quick = S.scan_file(path, deep=False)
    assert quick.partial and [h.location for h in quick.secrets if token in h.raw] \
        and not any("traceEvents" in h.location for h in quick.secrets)
    monkeypatch.setattr(tracelint_io, "QUICK_SCAN_LIMIT", text)
    S.clear_cache()
    full = S.scan_file(path, deep=False)
    assert not full.partial and any("traceEvents" in h.location for h in full.secrets)
    S.clear_cache()
    assert os.path.exists(path)


def test_the_quick_scan_reuses_the_ends_the_staged_load_kept(small_limits, monkeypatch):
    """After a staged load, the quick scan of the same gzip file reads the first and last MB
    the load kept, and finds what decompressing it again finds."""
    import tracelint.io as io
    from tracelint.secrets import scan as S
    src = trace_or_skip(TRACES / "torch" / REAL)
    monkeypatch.setattr(tracelint_io, "QUICK_SCAN_LIMIT", 0)
    S.clear_cache()
    again = S.scan_file(src, deep=False)
    kj.load_kineto(src)
    calls = []
    real = io.gunzip_blocks
    monkeypatch.setattr(io, "gunzip_blocks", lambda *a, **k: calls.append(1) or real(*a, **k))
    S.clear_cache()
    kept = S.scan_file(src, deep=False)
    assert calls == [] and kept.partial
    assert [(h.kind, h.location) for h in kept.hits] == [(h.kind, h.location) for h in again.hits]
    assert io.gzip_ends(src, 4 << 20) is not None and io.gzip_ends(src, 8 << 20) is None


def test_a_staged_text_the_quick_scan_reads_whole_keeps_no_ends(small_limits):
    """Below the quick scan's limit the scan reads the whole text, so the staged load keeps
    none of it (its ends were 16 MiB of a 21 MB trace's lint peak)."""
    import tracelint.io as io
    src = trace_or_skip(TRACES / "torch" / REAL)
    assert not io.quick_scan_reads_ends(src)
    io._GZIP_ENDS.clear()
    kj.load_kineto(src)                                   # staged (small_limits)
    assert io.gzip_ends(src, 1) is None


def test_the_partial_scan_finding_of_a_gzip_trace_does_not_state_its_size_field(monkeypatch):
    """gzip's size field is the size modulo 4 GiB: the finding names the gzip file's size and
    that its JSON is over the limit, which holds either way."""
    import tracelint
    from tracelint.api import available_rules
    from tracelint.engine.config import Config
    from tracelint.engine.runner import run_rules
    from tracelint.secrets import scan as S
    src = trace_or_skip(TRACES / "torch" / REAL)
    monkeypatch.setattr(tracelint_io, "QUICK_SCAN_LIMIT", 1 << 20)
    S.clear_cache()
    tl = tracelint.load(src)
    tl.meta.source = str(src)
    rules = [r for r in available_rules(Config()) if r.id == "TL100"]
    found = [f for f in run_rules(tl, rules).findings if f.key == "partial-scan"]
    mb = src.stat().st_size / 2**20
    assert len(found) == 1 and f"({mb:.0f} MB gzip file, over 1 MiB of JSON)" in found[0].message
    S.clear_cache()

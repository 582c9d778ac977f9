"""Bad input gets one line on stderr and exit code 2: no traceback, input untouched."""
from __future__ import annotations

import gzip
import json
import sqlite3

import pytest

from conftest import NSYS_TRACES, TORCH_TRACES, md5, run_cli


def _assert_clean_error(res, needle: str | None = None):
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("tracelint: error:")
    if needle:
        assert needle in lines[0].lower()


def _make_bad_inputs(tmp_path):
    bad = {}
    good_gz = TORCH_TRACES[0].read_bytes() if TORCH_TRACES else gzip.compress(b'{"traceEvents": []}')
    bad["truncated.json.gz"] = good_gz[: len(good_gz) // 2]
    raw = gzip.decompress(good_gz) if TORCH_TRACES else b'{"traceEvents": [{"ph": "X"}]}'
    bad["truncated.json"] = raw[: len(raw) // 2]
    bad["not_a_trace.json"] = json.dumps({"hello": "world", "n": [1, 2, 3]}).encode()
    bad["numbers.json"] = b"[1, 2, 3]"
    bad["empty.json"] = b""
    bad["garbage.bin"] = bytes(range(256)) * 4
    bad["corrupt.sqlite"] = b"SQLite format 3\x00" + b"\xff" * 5000
    if NSYS_TRACES:
        bad["truncated.sqlite"] = NSYS_TRACES[0].read_bytes()[:8192]
    paths = {}
    for name, data in bad.items():
        p = tmp_path / name
        p.write_bytes(data)
        paths[name] = p
    empty_db = tmp_path / "empty.sqlite"
    sqlite3.connect(empty_db).close()
    con = sqlite3.connect(tmp_path / "other.sqlite")
    con.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    con.execute("INSERT INTO users VALUES (1, 'x')")
    con.commit()
    con.close()
    paths["other.sqlite"] = tmp_path / "other.sqlite"
    if empty_db.stat().st_size:  # sqlite writes nothing for an untouched db
        paths["empty.sqlite"] = empty_db
    return paths


@pytest.mark.parametrize("command", ["info", "lint"])
def test_bad_inputs_exit_2_with_one_line(tmp_path, command):
    for name, path in _make_bad_inputs(tmp_path).items():
        before = md5(path)
        res = run_cli(command, path)
        _assert_clean_error(res)
        assert md5(path) == before, f"{name} was modified"


def test_missing_file(tmp_path):
    _assert_clean_error(run_cli("info", tmp_path / "nope.json"), "no such file")


def test_directory_without_traces(tmp_path):
    (tmp_path / "readme.txt").write_text("not a trace")
    _assert_clean_error(run_cli("lint", tmp_path))


def test_unknown_rule_selector_is_usage_error(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": []}))
    _assert_clean_error(run_cli("lint", p, "--select", "TL999"), "unknown rule")


def test_nsys_rep_without_nsys_says_how_to_export(tmp_path, monkeypatch):
    p = tmp_path / "run.nsys-rep"
    p.write_bytes(b"\x00NSYS-REP" + b"\x00" * 100)
    res = run_cli("info", p)
    if res.returncode == 2 and "nsys export" in res.stderr:
        _assert_clean_error(res)
    else:  # nsys is installed here: the export itself must fail cleanly on a fake report
        _assert_clean_error(res)

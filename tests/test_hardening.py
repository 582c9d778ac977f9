"""Hardened by default (issue 21): one test per defect class.

- secrets: tokens of several kinds planted in kernel, op, annotation and device names of a
  synthetic trace (both formats) go through every command and output format; stdout, stderr
  and every file written are grepped for each token;
- injection: a hostile name (raw HTML, remote image, `<!--`, @mention, ANSI / OSC-8, bidi and
  line-separator characters) through the Markdown and terminal writers;
- output paths: -o onto a FIFO, a device node (root only), the input, a directory;
- config: typed validation and the bounded upward search;
- bounded input: gzip bomb, FIFO input, views never read;
- importer edge cases that used to be internal errors.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fuzz_lib import planted_trace as _planted  # noqa: E402

SECRETS = {
    "github": "ghp_" + "Zq8Xw2Lk5Np3Rt7Vb9Mc4Hd6Jf1Gs0Ay2Eu8",
    "hf": "hf_" + "QpLmZx9Wv8Ut7Sr6Qo5Pn4Mk3Lj2Ih1GfEd",
    "aws": "AKIA" + "Q7W2E9R4T6Y1U3I8",
    "slack": "xoxb-" + "48151623421-aBcDeFgHiJkLmNoPqRsT",
    "openai": "sk-proj-" + "T9x8W7v6U5t4S3r2Q1p0OnMlKj",
}
HOSTILE = ("<img src=x onerror=alert(1)> ![t](https://evil.example/p.png) <!-- @octocat "
           "\x1b]8;;https://evil.example\x07link\x1b]8;;\x07 \x1b[2J \u202egnp.exe \u2028\u2029\u061c\ufeff")
CONTROL = ("\x1b", "\x07", "\u202e", "\u2028", "\u2029", "\u061c", "\ufeff")


def _cli(*args, cwd: Path, stdin=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracelint", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300, stdin=stdin,
                          env={**os.environ, **(env or {})})


def _commands(trace: Path, base: Path) -> list[list[str]]:
    t = str(trace)
    out = [["lint", t, "-f", f, "-o", f"r.{f}"] for f in ("json", "markdown", "sarif", "html", "terminal")]
    out += [["lint", t], ["lint", t, "--write-baseline", "accepted.json", "--annotate", "a.json"],
            ["lint", t, t, "-f", "json", "--write-baseline", "job-accepted.json"],
            ["lint", t, t, "-f", "markdown", "-o", "job.md"], ["lint", t, t],
            ["info", t], ["info", "--json", t],
            ["diff", t, t], ["diff", t, t, "-o", "d.txt"]]
    out += [["diff", t, t, "-f", f, "-o", f"d.{f}"] for f in ("json", "markdown", "html")]
    out += [["baseline", "save", t, "-o", "b.json"], ["gate", t, "--baseline", str(base)],
            ["gate", t, "--baseline", str(base), "-o", "g.txt"]]
    out += [["gate", t, "--baseline", str(base), "-f", f, "-o", f"g.{f}"] for f in ("json", "markdown")]
    return out


@pytest.mark.parametrize("fmt", ["json", "sqlite"])
def test_no_secret_reemitted_by_any_command(tmp_path, fmt):
    j, s = _planted(tmp_path, SECRETS, device=f"NVIDIA H100 {SECRETS['github']}")
    trace = j if fmt == "json" else s
    base = tmp_path / "base.json"
    assert _cli("baseline", "save", trace, "-o", base, cwd=tmp_path).returncode == 0
    leaks = []
    for i, cmd in enumerate(_commands(trace, base)):
        work = tmp_path / f"run{i}"
        work.mkdir()
        r = _cli(*cmd, cwd=work)
        ok = (0, 1, 2) if cmd[0] == "gate" else (0, 1)     # gate: 2 = inconclusive (4 steps)
        assert r.returncode in ok and "error:" not in r.stderr, (cmd, r.stderr[-500:])
        texts = {"stdout": r.stdout, "stderr": r.stderr}
        for f in work.iterdir():
            data = f.read_bytes()
            texts[f.name] = (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8", "replace")
        assert len(texts) > 2 or "-o" not in cmd, cmd
        for where, text in texts.items():
            leaks += [(cmd[0:2], where, k) for k, v in SECRETS.items() if v in text or v[4:20] in text]
    assert not leaks, leaks[:10]
    assert "<redacted>" in base.read_text()


def test_url_password_not_printed_in_errors(tmp_path):
    r = _cli("lint", "s3://user:Sup3rS3cretPw@bucket.example/job/", cwd=tmp_path)
    assert r.returncode == 2 and "Sup3rS3cretPw" not in r.stderr + r.stdout
    assert len(r.stderr.strip().splitlines()) == 1


def test_hostile_names_escaped_in_every_writer(tmp_path):
    j, _ = _planted(tmp_path, {"h": HOSTILE}, device=HOSTILE)
    r = _cli("baseline", "save", j, "-o", tmp_path / "base.json", "--no-findings", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for cmd in (["diff", j, j, "-f", "markdown"], ["gate", j, "--baseline", tmp_path / "base.json", "-f", "markdown"],
                ["lint", j, "-f", "markdown"]):
        md = _cli(*cmd, cwd=tmp_path).stdout
        assert "<img" not in md and "<!--" not in md, cmd
        assert not re.search(r"(?<!\\)\]\(https://evil", md), cmd     # no live image or link
        assert "@octocat" not in md, cmd
        assert not any(c in md for c in CONTROL), cmd
    for cmd in (["info", j], ["diff", j, j], ["gate", j, "--baseline", tmp_path / "base.json"], ["lint", j]):
        out = _cli(*cmd, cwd=tmp_path, env={"COLUMNS": "400"})
        assert not any(c in out.stdout + out.stderr for c in CONTROL), cmd
    bad = tmp_path / f"x{HOSTILE[:40]}.json"
    r = _cli("info", bad, cwd=tmp_path)
    assert r.returncode == 2 and not any(c in r.stderr for c in CONTROL)


def test_escape_module():
    from tracelint.reporters.escape import md_escape, sarif_uri_ok, terminal_text
    assert not any(c in terminal_text(HOSTILE) for c in CONTROL)
    md = md_escape(HOSTILE)
    assert "<" not in md and "@octocat" not in md and "![" not in md
    assert sarif_uri_ok("src/train.py") and sarif_uri_ok("/abs/x.py") and sarif_uri_ok("C:\\x\\y.py")
    assert not sarif_uri_ok("https://evil.example/x.py") and not sarif_uri_ok("javascript:alert(1)")


def test_case_yaml_never_writes_bidi_raw():
    import yaml
    from tracelint.cases.model import dump_yaml
    text = dump_yaml({"title": "train\u202egnp.py", "note": "a\nb\u2066"})
    assert "\u202e" not in text and "\u2066" not in text
    assert yaml.safe_load(text) == {"title": "train\u202egnp.py", "note": "a\nb\u2066"}


# ----- output paths -----------------------------------------------------------------------------
def test_output_onto_fifo_device_input_directory(tmp_path):
    j, _ = _planted(tmp_path, {"a": "x"}, device="NVIDIA H100")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = {}
    reader = threading.Thread(target=lambda: got.setdefault("data", fifo.read_bytes()))
    reader.start()
    r = _cli("lint", j, "-f", "json", "-o", fifo, cwd=tmp_path)
    reader.join(60)
    assert r.returncode in (0, 1), r.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode) and json.loads(got["data"])["findings"] is not None
    before = j.read_bytes()
    r = _cli("lint", j, "-f", "json", "-o", j, cwd=tmp_path)
    assert r.returncode == 2 and "one of the inputs" in r.stderr and j.read_bytes() == before
    r = _cli("diff", j, j, "-f", "json", "-o", tmp_path, cwd=tmp_path)
    assert r.returncode == 2 and "is a directory" in r.stderr and "internal" not in r.stderr
    if os.geteuid() == 0:
        dev = tmp_path / "null"
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        r = _cli("info", "--json", j, cwd=tmp_path)
        r = _cli("lint", j, "-f", "json", "-o", dev, cwd=tmp_path)
        assert r.returncode in (0, 1) and stat.S_ISCHR(dev.stat().st_mode)


def test_fifo_input_refused(tmp_path):
    fifo = tmp_path / "in.json"
    os.mkfifo(fifo)
    r = _cli("info", fifo, cwd=tmp_path)
    assert r.returncode == 2 and "FIFO" in r.stderr


# ----- config -----------------------------------------------------------------------------------
@pytest.mark.parametrize("body, words", [
    ("select = 5", "select must be"), ("select = [5]", "select must be"),
    ("rules-dirs = [1]", "rules-dirs must be"), ('rules-dirs = "abc"', "rules-dirs must be"),
    ("baseline = 5", "baseline must be"), ('[tool.tracelint.severity]\nTL001 = "x"', "severity for"),
    ("[tool.tracelint.rules.launch-gap]\nmin_gap_ns = 1e400", "whole number"),
    ("[tool.tracelint.rules.launch-gap]\nmin_gap_ns = 2.9", "whole number"),
    ('[tool.tracelint.rules.launch-gap]\nmin_share = "0.1"', "finite number"),
])
def test_config_typed_validation(tmp_path, body, words):
    from tracelint.engine.config import load_config
    from tracelint.rules import builtin_rules
    from tracelint.errors import ConfigError
    cfg = tmp_path / "pyproject.toml"
    cfg.write_text(f"[tool.tracelint]\n{body}\n")
    with pytest.raises(ConfigError) as e:
        c = load_config(str(cfg))
        c.validate(builtin_rules())
    assert words in str(e.value) and str(cfg) in str(e.value) and "\n" not in str(e.value)


def test_bool_option_is_not_coerced():
    from tracelint.engine.config_types import option_value
    from tracelint.errors import ConfigError
    with pytest.raises(ConfigError):
        option_value("x", "false", True)
    assert option_value("x", 3.0, 2) == 3 and option_value("x", 2, 0.5) == 2.0


def test_config_dir_and_rules_from_untrusted_parent(tmp_path):
    from tracelint.engine.config import load_config
    from tracelint.errors import ConfigError
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(str(tmp_path))
    (tmp_path / "tracelint.toml").write_text('rules-dirs = ["evil"]\nfail-on = "error"\n')
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    cfg = load_config(start=sub)                 # no repository or home in between
    assert cfg.fail_on == "error" and cfg.rules_dirs == []
    (tmp_path / "a" / ".git").mkdir()            # inside a repository: search stops at its root
    assert load_config(start=sub).fail_on == "warning"


def test_world_writable_rule_file_refused(tmp_path):
    from tracelint.engine.registry import rules_from_dir
    from tracelint.errors import ConfigError
    f = tmp_path / "r.py"
    f.write_text("x = 1\n")
    f.chmod(0o666)
    with pytest.raises(ConfigError, match="world-writable"):
        rules_from_dir(tmp_path)


# ----- bounded input, importer edge cases -------------------------------------------------------
def test_gzip_bomb_refused(tmp_path):
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b'{"traceEvents":[' + b" " * (80 << 20) + b"]}"))
    r = _cli("info", bomb, cwd=tmp_path, env={"TRACELINT_GZIP_MAX_RATIO": "50"})
    assert r.returncode == 2 and "decompression bomb" in r.stderr


@pytest.mark.parametrize("head", [
    b'{"traceEvents":[{"ph":"M","pid":1,"name":"process_name","args":{"name":"/device:GPU:0"}},',
    b'{"rocprofiler-sdk-tool":[{"metadata":{"pid":1}},',
], ids=["jax", "rocprofv3"])
def test_gzip_bomb_refused_by_every_json_importer(tmp_path, head):
    """A JAX or rocprofv3 trace inflates within the same limits as a Kineto one (io.gunzip_capped):
    those importers used gzip.decompress, which has none."""
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(head + b" " * (8 << 20) + b"]}"))
    r = _cli("lint", bomb, cwd=tmp_path, env={"TRACELINT_GZIP_MAX_BYTES": str(1 << 20)})
    assert r.returncode == 2 and "decompression bomb" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def _nsys_copy(tmp_path: Path, *sql: str) -> Path:
    _, s = _planted(tmp_path, {"a": "x"}, device="NVIDIA H100")
    con = sqlite3.connect(s)
    for q in sql:
        con.execute(q)
    con.commit()
    con.close()
    return s


@pytest.mark.parametrize("sql", [
    ["UPDATE StringIds SET value = X'00ff' WHERE id = (SELECT min(id) FROM StringIds)"],
    ["UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = 'abc'"],
    ["UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = 9e999"],
    ["UPDATE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION SET syncType = 9e999"],
    ["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 'zz'"],
    ["DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL",
     "CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL "
     "SELECT x + 1 FROM r) SELECT x AS start, x AS end, 0 AS deviceId FROM r"],
])
def test_nsys_edge_cases_one_line(tmp_path, sql):
    s = _nsys_copy(tmp_path, *sql)
    r = _cli("info", "--json", s, cwd=tmp_path)
    assert r.returncode in (0, 2) and "internal error" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) <= 1


def test_kineto_edge_cases_one_line(tmp_path):
    j, _ = _planted(tmp_path, {"a": "x"}, device="NVIDIA H100")
    doc = json.loads(j.read_text())
    cases = {"deep.json": ('{"traceEvents":[],"x":' + '{"a":' * 5000 + "1" + "}" * 5001).encode(),
             "bom.json": b"\xef\xbb\xbf" + j.read_bytes()}
    d = json.loads(json.dumps(doc))
    d["deviceProperties"] = [{"id": 0, "name": 5}]
    cases["devname.json"] = json.dumps(d).encode()
    d = json.loads(json.dumps(doc))
    for e in d["traceEvents"]:
        if str(e.get("name", "")).startswith("ProfilerStep"):
            e["name"] = "ProfilerStep#99999999999999999999"
    cases["bigstep.json"] = json.dumps(d).encode()
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        r = _cli("info", tmp_path / name, cwd=tmp_path)
        assert r.returncode in (0, 2) and "internal error" not in r.stderr, (name, r.stderr)
        assert len(r.stderr.strip().splitlines()) <= 1, name
    assert _cli("info", tmp_path / "bom.json", cwd=tmp_path).returncode == 0


def test_nsys_rep_export_leaves_no_temp_folder(tmp_path, monkeypatch):
    """A failing .nsys-rep export leaves no temporary folder behind."""
    import tempfile
    from tracelint.importers import export_nsys_rep
    from tracelint.errors import TraceFormatError
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nsys").write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    (fake / "nsys").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    rep = tmp_path / "x.nsys-rep"
    rep.write_bytes(b"QDREP....")
    with pytest.raises(TraceFormatError):
        export_nsys_rep(rep)
    assert list((tmp_path / "tmp").iterdir()) == []




def test_redact_refuses_secrets_it_cannot_rewrite(tmp_path):
    """A token stored as a BLOB or as text in an INTEGER column is not called clean."""
    s = _nsys_copy(tmp_path, f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET gridX = '{SECRETS['hf']}' "
                             "WHERE rowid = (SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)")
    for cmd in (["redact", "--check", s], ["redact", s, "-o", tmp_path / "out.sqlite"]):
        r = _cli(*cmd, cwd=tmp_path)
        assert r.returncode == 2 and "CUPTI_ACTIVITY_KIND_KERNEL.gridX" in r.stderr, r.stderr
        assert SECRETS["hf"] not in r.stderr + r.stdout
    assert not (tmp_path / "out.sqlite").exists()


def test_redact_refuses_secrets_it_cannot_rewrite_in_a_rocpd_database(tmp_path):
    """The same for rocprofv3's rocpd database (its odd cells went unchecked: only nsys
    exports were), and `case add`, which cuts nsys and Kineto excerpts only, says so in one
    line instead of an internal error."""
    import sqlite3
    from tracelint.synth.builder import TraceBuilder
    from tracelint.synth.rocprof_writer import write_rocpd
    b = TraceBuilder()
    b.launch("gemm_kernel", 50_000)
    b.sync()
    db = write_rocpd(b, tmp_path / "results.db")
    con = sqlite3.connect(db)
    kd = con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE "
                     "'rocpd_kernel_dispatch_%'").fetchone()[0]
    con.execute(f'UPDATE "{kd}" SET grid_size_x = CAST(? AS BLOB)', (SECRETS["hf"],))
    con.commit()
    con.close()
    for cmd in (["redact", "--check", db], ["redact", db, "-o", tmp_path / "out.db"]):
        r = _cli(*cmd, cwd=tmp_path)
        assert r.returncode == 2 and "grid_size_x" in r.stderr, r.stderr
        assert SECRETS["hf"] not in r.stderr + r.stdout
    assert not (tmp_path / "out.db").exists()
    r = _cli("case", "add", db, "--rule", "TL001", "--window", "0:1", "--library", tmp_path / "lib",
             cwd=tmp_path)
    assert r.returncode == 2 and "rocpd-sqlite trace" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1

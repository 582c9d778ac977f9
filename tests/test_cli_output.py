"""Output people read without friction: help, flag conflicts, width off a terminal, file
permissions, and commands that must not write into the user's working directory."""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys

from conftest import REPO, run_cli

EXAMPLE = REPO / "fixtures" / "examples" / "training_step_antipatterns.json.gz"


def test_help_has_no_python_type_names():
    for cmd in (("lint",), ("capture",), ("case", "add")):
        res = run_cli(*cmd, "--help")
        assert res.returncode == 0
        assert not re.search(r"<(bool|int|str|list\[\w+\]|float)>", res.stdout), cmd


def test_capture_format_is_the_lint_enum(tmp_path):
    import typing

    from tracelint.cli.capture import capture
    from tracelint.cli.lint import Format, lint
    hints = {f: typing.get_type_hints(f, include_extras=True)["fmt"] for f in (capture, lint)}
    assert all(typing.get_args(h)[0] is Format for h in hints.values())
    res = run_cli("capture", "-o", tmp_path, "--format", "yaml", "--", sys.executable, "-c", "0")
    assert res.returncode == 2 and "yaml" in res.stderr


def test_quiet_and_verbose_together_is_an_error():
    res = run_cli("lint", EXAMPLE, "-q", "-v")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def _lint_piped(columns: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns:
        env["COLUMNS"] = columns
    return subprocess.run([sys.executable, "-m", "tracelint", "lint", EXAMPLE], env=env,
                          capture_output=True, text=True, timeout=300).stdout


def test_no_hard_wrap_off_a_terminal_and_columns_honoured():
    wide = _lint_piped(None).splitlines()
    assert max(map(len, wide)) > 120                     # a finding's message stays one line
    narrow = _lint_piped("72").splitlines()
    assert max(map(len, narrow)) <= 72


def test_fix_and_one_line_verdict_by_default():
    out = _lint_piped(None)
    findings = out.count("\n  #")
    assert out.count("    fix: ") == findings or out.count("    fix:") == findings
    verdicts = [ln for ln in out.splitlines() if ln.strip().startswith("verdict ")]
    assert verdicts and all(len(v) < 120 for v in verdicts)
    assert "Only some layers were captured" not in out        # boilerplate only with -v


def test_reports_respect_the_umask(tmp_path):
    out = tmp_path / "r.json"
    old = os.umask(0o022)
    try:
        run_cli("lint", EXAMPLE, "-f", "json", "-o", out)
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    timing = json.loads(out.read_text())["timing_s"]
    # the CLI loads the trace before it lints: the importer's own time is reported, not 0
    assert timing["load"] > 0 and timing["rules"] > 0


def test_case_commands_do_not_write_into_the_working_directory(tmp_path):
    res = run_cli("case", "add", EXAMPLE, "--rule", "TL001", "--window", "1:5", cwd=tmp_path)
    assert res.returncode == 2 and "--library" in res.stderr
    res = run_cli("case", "render", cwd=tmp_path)
    assert res.returncode == 0
    assert not (tmp_path / "docs").exists() and not (tmp_path / "fixtures").exists()
    assert (tmp_path / "tracelint-cases" / "index.md").exists()

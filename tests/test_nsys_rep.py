"""A .qdrep / .nsys-rep linted end to end, the way a user runs it: `tracelint lint run.qdrep`
exports with Debian's `nsys` (scripts/test.sh installs nsight-systems 2022.4 where it can) and
must give what linting the same report's 2022.4 SQLite export gives."""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import SHARED, md5, run_cli

NSYS = SHARED / "traces" / "nsys"
REP = NSYS / "nsys2021.2_mordred-hashjoin_quadro-rtx6000.qdrep"
# the same capture, exported by nsys 2022.4 (the Debian package's version) when it was shared
SIBLING = NSYS / "nsys2021.2-capture_reexported-by-2022.4_mordred-hashjoin_quadro-rtx6000.sqlite"


@pytest.fixture(scope="module")
def nsys():
    if not REP.exists() or not SIBLING.exists():
        pytest.skip("shared nsys traces not present")
    exe = shutil.which("nsys")
    if exe is None:
        msg = ("NOT RUN: .nsys-rep end-to-end test needs `nsys` (Debian non-free nsight-systems; "
               "scripts/test.sh installs it when run as root with apt-get)")
        print(f"\n*** {msg} ***", file=sys.stderr)
        pytest.skip(msg)
    return exe


def _lint(path) -> dict:
    res = run_cli("lint", path, "-f", "json", "--fail-on", "never")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_qdrep_lints_like_its_sqlite_export(nsys):
    before = md5(REP)
    tmp_before = set(Path(tempfile.gettempdir()).glob("tracelint-*"))
    via_rep, via_sqlite = _lint(REP), _lint(SIBLING)
    assert md5(REP) == before                       # the report is never written to
    assert set(Path(tempfile.gettempdir()).glob("tracelint-*")) <= tmp_before   # export cleaned
    assert via_rep["summary"]["counts"] == via_sqlite["summary"]["counts"]
    assert via_rep["summary"]["counts"]["kernels"] == 12

    def key(report):   # TL1xx scan the file itself, and a .qdrep's strings are not scanned
        return sorted((f["rule"], f["impact_ns"], f["occurrences"]) for f in report["findings"]
                      if not f["rule"].startswith("TL1"))
    assert key(via_rep) == key(via_sqlite) and key(via_rep)


def test_qdrep_info_reports_nsys_format(nsys):
    res = run_cli("info", REP, "--json")
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["format"] == "nsys-sqlite" and info["producer"].startswith("Nsight Systems")
    assert any("nsys export" in n for n in info["notes"])


def test_truncated_report_is_one_line_error(nsys, tmp_path):
    bad = tmp_path / "cut.qdrep"
    bad.write_bytes(REP.read_bytes()[:5000])
    res = run_cli("lint", bad)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1

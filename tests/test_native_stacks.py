"""nsys CUDA API backtraces (--cudabacktrace) as locations: the finding names the user's
native function that made the API call, read independently here from the export's own
CUDA_CALLCHAINS rows, and says there is no source line."""
from __future__ import annotations

import json
import sqlite3

import pytest

from conftest import SHARED, run_cli

SAXPY = SHARED / "traces" / "nsys" / "nsys2022.2_pipit-saxpy-mpi-cuda_a100.sqlite"
pytestmark = pytest.mark.skipif(not SAXPY.exists(), reason="shared traces not present")


def _user_symbols() -> set[str]:
    """Symbols of chain frames in the program's own binary (module named like the program)."""
    con = sqlite3.connect(f"file:{SAXPY}?mode=ro&immutable=1", uri=True)
    rows = con.execute("SELECT s.value, m.value FROM CUDA_CALLCHAINS c JOIN StringIds s ON "
                       "s.id = c.symbol JOIN StringIds m ON m.id = c.module").fetchall()
    return {s.split("(")[0] for s, m in rows if m.endswith("/saxpy-mpi-cuda")}


def test_hidden_sync_names_the_native_caller(tmp_path):
    res = run_cli("lint", SAXPY, "--select", "TL005", "-f", "json", cwd=tmp_path)
    (f,) = json.loads(res.stdout)["findings"]
    w = f["where"]
    assert w["line_kind"] == "native" and "line" not in w
    assert w["file"] == "saxpy-mpi-cuda" and w["function"] in _user_symbols()
    assert w["function"] == "main" and w["callee"] == "cudaMemcpy"   # the API the rule is about
    res = run_cli("lint", SAXPY, "--select", "TL005", cwd=tmp_path)
    assert "in `main` of saxpy-mpi-cuda (native frame: the trace names no source line)" in \
        " ".join(res.stdout.split())


def test_sarif_names_native_functions_without_pointing_into_a_binary(tmp_path):
    res = run_cli("lint", SAXPY, "--select", "TL005", "-f", "sarif", cwd=tmp_path)
    (r,) = json.loads(res.stdout)["runs"][0]["results"]
    loc = r["locations"][0]
    assert loc["physicalLocation"]["artifactLocation"]["uri"].endswith(".sqlite")  # the trace
    assert "region" not in loc["physicalLocation"]
    assert {"name": "main", "kind": "function"} in loc["logicalLocations"]
    assert r["properties"]["line_kind"] == "native"

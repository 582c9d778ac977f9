"""The command's process ends without interpreter teardown (tracelint.cli.quick_exit), yet keeps
everything a normal exit keeps: the exit code, flushed output, atexit callbacks; and takes the
normal exit where skipping teardown could lose something."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "nsys" / \
    "nsys2022.2_pipit-saxpy-mpi-cuda_a100.sqlite"

# A module-level object whose __del__ runs only in interpreter teardown, an atexit callback,
# and main() ending with the code given on the command line.
PROBE = """
import atexit, sys, threading, time
from pathlib import Path
from tracelint.cli.quick_exit import run
out = Path(sys.argv[1])
class Teardown:
    def __init__(self, path):
        self.path = str(path)
    def __del__(self, open=open):              # module globals may be gone by then
        with open(self.path, "w") as fh:
            fh.write("ran")
keep = Teardown(out / "teardown")
atexit.register(lambda: (out / "atexit").write_text("ran"))
mode, code = sys.argv[2], sys.argv[3]
if mode == "trace":
    sys.settrace(lambda *a: None)
if mode == "thread":
    threading.Thread(target=lambda: (time.sleep(0.3), (out / "thread").write_text("ran"))).start()
def main():
    sys.stdout.write("x" * 200_000)          # more than a pipe holds
    sys.stdout.write("end")                  # left in the buffer: must be flushed
    raise SystemExit(None if code == "none" else (int(code) if code.lstrip("-").isdigit() else code))
run(main)
"""


def _probe(tmp_path, mode, code):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}   # buffered stdout
    res = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path), mode, code],
                         capture_output=True, text=True, timeout=120, env=env)
    ran = {p.name for p in tmp_path.iterdir()}
    return res, ran


@pytest.mark.parametrize("code, status", [("0", 0), ("1", 1), ("2", 2), ("none", 0),
                                          ("257", 1), ("-1", 255)])
def test_teardown_skipped_exit_code_output_and_atexit_kept(tmp_path, code, status):
    res, ran = _probe(tmp_path, "plain", code)
    assert res.returncode == status
    assert res.stdout == "x" * 200_000 + "end"
    assert "atexit" in ran and "teardown" not in ran


@pytest.mark.parametrize("mode", ["trace", "thread"])
def test_normal_exit_when_a_tracer_or_a_thread_needs_it(tmp_path, mode):
    res, ran = _probe(tmp_path, mode, "1")
    assert res.returncode == 1 and res.stdout == "x" * 200_000 + "end"
    assert {"atexit", "teardown"} <= ran
    if mode == "thread":
        assert "thread" in ran


def test_a_text_exit_code_is_printed_as_python_does(tmp_path):
    res, ran = _probe(tmp_path, "plain", "bad input")
    assert res.returncode == 1 and res.stderr.strip().endswith("bad input")
    assert "teardown" in ran


def test_the_command_writes_its_report_and_exit_code(tmp_path):
    out = tmp_path / "r.json"
    res = subprocess.run([sys.executable, "-m", "tracelint", "lint", str(FIXTURE), "-f", "json",
                          "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 1                  # findings at warning or above
    assert json.loads(out.read_text())["findings"]
    res = subprocess.run([sys.executable, "-m", "tracelint", "lint", str(FIXTURE), "-f", "json",
                          "--fail-on", "never"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and json.loads(res.stdout)["findings"]

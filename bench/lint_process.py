"""One `tracelint lint ARGS` run as a whole process, timed from outside: wall seconds, CPU
seconds of it and its workers, and with peak=True its largest process's peak RSS (from
/usr/bin/time). Shared by the benchmarks that pair lint commands in one run."""
from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def lint_process(args: list[str], peak: bool = False) -> dict:
    """{wall_s, cpu_s[, peak_mib]} of `python -m tracelint lint *args`; exits on failure."""
    timer = ["/usr/bin/time", "-f", "%M"] if peak else []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    res = subprocess.run([*timer, sys.executable, "-m", "tracelint", "lint", *args], cwd=REPO,
                         capture_output=True, text=True)
    wall = time.perf_counter() - t
    if res.returncode:
        raise SystemExit(f"lint {' '.join(args)} failed:\n{res.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}
    if peak:
        out["peak_mib"] = round(int(res.stderr.strip().splitlines()[-1]) / 1024, 1)
    return out

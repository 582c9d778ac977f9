"""Lint CPU of each shared nsys export against `nsys analyze` on the same file, same run.

    python bench/bench_small_nsys.py [--runs 3]

Each file is copied to a temporary folder (nsys writes next to its input); then, alternating,
`nsys analyze FILE` and `tracelint lint FILE -f json -o OUT` run in fresh processes. CPU is the
child's user+sys from wait4(). Also reported: the CPU of importing what lint needs (interpreter,
pandas, importers, every rule) without a trace, so the fixed cost shows beside the per-file work. Target (issue 16): lint <= 3x `nsys analyze`.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "traces" / "nsys"
IMPORTS = ("from tracelint.cli import blas_threads; from tracelint import collector; "
           "blas_threads.limit_to_one(); collector.pause_for_startup(); "   # as the command starts
           "import tracelint.cli.lint, tracelint.importers.nsys_sqlite, tracelint.engine.runner, "
           "tracelint.api as a; a.available_rules()")


def run(argv: list[str]) -> tuple[float, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    return time.perf_counter() - t0, ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    nsys = shutil.which("nsys")
    if not nsys:
        raise SystemExit("nsys not on PATH (Debian: apt-get install nsight-systems, non-free)")
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        fixed = [run([sys.executable, "-c", IMPORTS])[1] for _ in range(args.runs)]
        for src in sorted(TRACES.glob("*.sqlite")):
            path = Path(tmp) / src.name
            shutil.copy(src, path)
            out = Path(tmp) / "report.json"
            lint = [sys.executable, "-m", "tracelint", "lint", str(path), "-f", "json",
                    "--fail-on", "never", "-o", str(out)]
            cpu_n, cpu_t = [], []
            for _ in range(args.runs):
                cpu_n.append(run([nsys, "analyze", str(path)])[1])
                cpu_t.append(run(lint)[1])
            rows.append((src.name, src.stat().st_size, statistics.median(cpu_n),
                         statistics.median(cpu_t)))
    print(f"1-min load average before/after: {load_before:.2f}/{os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} CPUs; median of {args.runs} runs; imports alone "
          f"(interpreter, pandas, importers, rules): {statistics.median(fixed):.2f} s CPU\n")
    print("| file | MB | `nsys analyze` CPU s | `tracelint lint` CPU s | ratio |")
    print("|---|---|---|---|---|")
    for name, size, n, t in rows:
        print(f"| {name} | {size / 1e6:.1f} | {n:.2f} | {t:.2f} | {t / n:.1f}x |")


if __name__ == "__main__":
    main()

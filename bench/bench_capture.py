#!/usr/bin/env python3
"""Capture overhead: wall time of an example with `tracelint capture` vs plain `python`.

Both are timed in the same run, alternating (A-B-B-A...) to spread machine noise, median of
N each. The capture side includes profiling, trace export and linting; `--no-lint` isolates
the profiler. Usage: .venv/bin/python bench/bench_capture.py [--runs 5] [--example examples/item_in_loop.py]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--example", default="examples/item_in_loop.py")
    args = ap.parse_args()
    py = sys.executable
    tl = [py, "-m", "tracelint"]
    sides = {
        "plain python": [py, args.example],
        "capture, no lint": [*tl, "capture", "-o", tempfile.mkdtemp(), "--no-lint", "--", py, args.example],
        "capture + lint": [*tl, "capture", "-o", tempfile.mkdtemp(), "--", py, args.example],
    }
    times: dict[str, list[float]] = {k: [] for k in sides}
    order = list(sides)
    for i in range(args.runs):
        for name in (order if i % 2 == 0 else order[::-1]):
            times[name].append(timed(sides[name]))
    base = statistics.median(times["plain python"])
    print("| side | median wall s | ratio to plain | runs |\n|---|---|---|---|")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"| {name} | {med:.2f} | {med / base:.2f}x | {len(ts)} |")


if __name__ == "__main__":
    main()

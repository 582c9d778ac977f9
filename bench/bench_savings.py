#!/usr/bin/env python3
"""Cost of projected savings: dependency graph + base replay + critical path + one replay per
finding + one for all fixes, as a ratio to the lint time without them, measured in one run.

Target (issue #13): at most +50 % on the 287 MB reference Kineto trace (bench/out/big.json,
made by ../shared/bench/make_big_trace.py ... --copies 6; see bench_lint.py).
Usage: .venv/bin/python bench/bench_savings.py [--runs 2] [--big bench/out/big.json]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from bench_lint import ensure_big  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--big", type=Path, default=REPO / "bench" / "out" / "big.json")
    args = ap.parse_args()
    ensure_big(args.big)
    from tracelint.api import available_rules
    from tracelint.engine.runner import run_rules
    from tracelint.importers import load
    loads, rules, savings, parts = [], [], [], []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        tl = load(args.big)
        loads.append(time.perf_counter() - t0)
        t1 = time.perf_counter()
        report = run_rules(tl, available_rules())
        total = time.perf_counter() - t1
        savings.append(report.elapsed_s["savings"])
        rules.append(total - report.elapsed_s["savings"])
        n = sum(f.saving_ns is not None for f in report.findings)
        parts.append(n)
    t_load, t_rules, t_sav = (statistics.median(x) for x in (loads, rules, savings))
    lint = t_load + t_rules
    print(f"| 287 MB trace: lint (load + rules) | {lint:.2f} s | 1.00 |")
    print(f"| + critical path and {parts[-1]} finding replays + all fixes | {t_sav:.2f} s | "
          f"+{t_sav / lint:.0%} |")


if __name__ == "__main__":
    main()

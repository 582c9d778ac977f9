#!/usr/bin/env python3
"""Rule and report overhead, as ratios measured in one run.

1. The 287 MB reference Kineto trace (bench/out/big.json, made by
   ../shared/bench/make_big_trace.py ... --copies 6): load time vs load + all rules
   (target: rules add at most 30 % to the load time).
2. The largest shared trace: lint time (load + rules) vs lint + HTML rendering
   (target: HTML adds at most 20 %).

Each measurement is the median of N runs in this process after one warm-up.
Usage: .venv/bin/python bench/bench_lint.py [--runs 3] [--big bench/out/big.json]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def median_time(fn, runs: int) -> float:
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def ensure_big(path: Path) -> None:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(SHARED / "bench" / "make_big_trace.py"),
                        str(SHARED / "traces" / "torch" / "hta_v100_rank1of2.json.gz"), str(path),
                        "--copies", "6"], check=True)


def main() -> None:
    import tracelint
    from tracelint.api import lint
    from tracelint.reporters.html import render_html
    from tracelint.secrets.scan import clear_cache

    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--big", default=str(REPO / "bench" / "out" / "big.json"))
    args = ap.parse_args()
    big = Path(args.big)
    ensure_big(big)

    rows = []
    t_load = median_time(lambda: tracelint.load(big), args.runs)
    rule_times, per_rule = [], {}
    for _ in range(args.runs):
        tl = tracelint.load(big)          # fresh timeline: no cached derived columns
        clear_cache()                     # and no cached secret scan of the file
        t0 = time.perf_counter()
        per_rule = lint(tl).elapsed_s
        rule_times.append(time.perf_counter() - t0)
        del tl
    t_rules = statistics.median(rule_times)
    rows.append(("287 MB reference trace: load", t_load, 1.0))
    rows.append(("all rules on top of the load", t_rules, t_rules / t_load))

    largest = max((SHARED / "traces").rglob("*.json.gz"), key=lambda p: p.stat().st_size)
    t_lint = median_time(lambda: (clear_cache(), lint(tracelint.load(largest))), args.runs)
    rep = lint(tracelint.load(largest))
    t_html = median_time(lambda: render_html(rep), args.runs)
    rows.append((f"{largest.name}: lint (load + rules)", t_lint, 1.0))
    rows.append(("HTML report on top of lint", t_html, t_html / t_lint))

    print("| measurement | median wall s | ratio |\n|---|---|---|")
    for name, t, r in rows:
        print(f"| {name} | {t:.2f} | {r:.2f} |")
    print("\nper rule on the reference trace (s): " +
          ", ".join(f"{k} {v:.2f}" for k, v in sorted(per_rule.items())))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""One large trace's lint with its rules checked by one process and by two, in one run.

    .venv/bin/python bench/bench_rule_processes.py [--pairs 5] [FILE]

FILE defaults to the 287 MB reference (bench/out/big.json, made if missing). Each pair runs
`tracelint lint FILE -f json -o OUT` with `--jobs 1` (load and rules in one process) and with
`--jobs 2` (the load decoded by two processes, the rules dealt to two: engine/rule_processes),
alternating which goes first, each a fresh process. Printed per side: the whole command's wall
and CPU (all its processes), the peak of the summed RSS of its processes (bench/tree_peak_rss),
and the report's own `timing_s`: load, and rules (the rules plus the what-if savings). The
reports are compared with `timing_s` dropped: they must be identical.
Target (issue 16): a single big trace uses more than one core; the whole command's speed-up is
what a user sees, the rules' speed-up what this stage adds to the load's.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_lint import ensure_big  # noqa: E402
from bench_vs_hta import timed  # noqa: E402

REPO = HERE.parent
TREE = HERE / "tree_peak_rss.py"


def run(file: Path, jobs: int, out: Path, env: dict) -> dict:
    cmd = [str(REPO / ".venv" / "bin" / "tracelint"), "lint", str(file), "-f", "json",
           "-o", str(out), "--jobs", str(jobs)]
    got = timed(cmd, env, (0, 1))
    peak = subprocess.run([sys.executable, str(TREE), *cmd], capture_output=True, text=True,
                          env=env, cwd=REPO)
    got["tree_rss_mb"] = float(peak.stdout.split()[2]) if peak.stdout.startswith("tree peak") else float("nan")
    report = json.loads(out.read_text())
    got["timing"] = report.pop("timing_s")
    got["report"] = report
    return got


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("file", nargs="?", default=str(REPO / "bench" / "out" / "big.json"))
    ap.add_argument("--pairs", type=int, default=5)
    a = ap.parse_args()
    file = Path(a.file)
    if file == REPO / "bench" / "out" / "big.json":
        ensure_big(file)
    env = {**os.environ, "PYTHONPYCACHEPREFIX": "/tmp/tracelint-bench-pyc"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    runs: dict[int, list] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        run(file, 1, out, env)                          # warm-up: compile the package once
        load0 = os.getloadavg()[0]
        for i in range(a.pairs):
            for jobs in ((1, 2) if i % 2 == 0 else (2, 1)):
                runs[jobs].append(run(file, jobs, out, env))
        load1 = os.getloadavg()[0]
    same = all(r["report"] == runs[1][0]["report"] for r in runs[1] + runs[2])
    print(f"file: {file} ({file.stat().st_size / 1e6:.0f} MB); {a.pairs} alternating pairs; "
          f"1-min load average before/after: {load0:.2f}/{load1:.2f} on {os.cpu_count()} CPUs\n")
    print("| --jobs | wall s (median) | CPU s | tree peak RSS MB | load s | rules + savings s |")
    print("|---|---|---|---|---|---|")
    med = {}
    for jobs, rs in runs.items():
        med[jobs] = {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu", "tree_rss_mb")}
        for k in ("load", "rules"):
            med[jobs][k] = statistics.median(r["timing"][k] for r in rs)
        m = med[jobs]
        print(f"| {jobs} | {m['wall']:.2f} | {m['cpu']:.2f} | {m['tree_rss_mb']:.0f} | "
              f"{m['load']:.2f} | {m['rules']:.2f} |")
    pairs = [x["wall"] / y["wall"] for x, y in zip(runs[1], runs[2])]
    rules = [x["timing"]["rules"] / y["timing"]["rules"] for x, y in zip(runs[1], runs[2])]
    print(f"\nwhole command, --jobs 1 / --jobs 2 wall per pair: "
          f"{', '.join(f'{p:.2f}x' for p in pairs)}; median {statistics.median(pairs):.2f}x")
    print(f"rules + savings, per pair: {', '.join(f'{p:.2f}x' for p in rules)}; "
          f"median {statistics.median(rules):.2f}x")
    print(f"reports identical (timing_s dropped): {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

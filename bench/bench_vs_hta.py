#!/usr/bin/env python3
"""`tracelint lint` against Holistic Trace Analysis (HTA) 0.5 on the reference trace, in one run.

    python3 -m venv /tmp/htavenv && /tmp/htavenv/bin/pip install HolisticTraceAnalysis==0.5.0
    .venv/bin/python bench/bench_vs_hta.py --hta-python /tmp/htavenv/bin/python [--runs 2]

HTA is not a dependency of tracelint (it pulls Jupyter and plotly), so it runs from its own
interpreter. Both sides are whole processes started fresh, runs alternating:

* HTA: `TraceAnalysis(trace_dir=...)` (parse) + 4 analyses: temporal breakdown, idle time
  breakdown, GPU kernel breakdown, comm/comp overlap (no plots);
* tracelint: `tracelint lint FILE -f json -o /dev/null` (load + every rule + savings + report).

The reference trace is bench/out/big.json (287 MB, 1.3 M events: hta_v100_rank1of2 replicated
6 times, made if missing), linked into bench/out/hta_dir/ for HTA, which reads a folder. Peak RSS
is the child's own maximum. Target (issue 16): tracelint wall <= 0.08x HTA's.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_lint import ensure_big  # noqa: E402

REPO = HERE.parent
BIG = REPO / "bench" / "out" / "big.json"
HTA_DIR = REPO / "bench" / "out" / "hta_dir"

HTA = r"""
import sys
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
a.get_temporal_breakdown(visualize=False)
a.get_idle_time_breakdown(ranks=sorted(a.t.get_ranks())[:1], visualize=False)
a.get_gpu_kernel_breakdown(visualize=False)
a.get_comm_comp_overlap(visualize=False)
"""


WRAP = r"""
import json, resource, subprocess, sys, time
t = time.perf_counter()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode
wall = time.perf_counter() - t
r = resource.getrusage(resource.RUSAGE_CHILDREN)     # this one command (and its children)
print(json.dumps({"rc": rc, "wall": wall, "cpu": r.ru_utime + r.ru_stime,
                  "rss_mb": r.ru_maxrss / 1024}))
"""


def timed(cmd: list[str], env: dict | None = None, ok=(0,)) -> dict:
    """Wall, CPU and peak RSS of one command, measured by a fresh wrapper process."""
    res = subprocess.run([sys.executable, "-c", WRAP, *cmd], capture_output=True, text=True,
                         cwd=REPO, env=env)
    out = json.loads(res.stdout.strip().splitlines()[-1])
    if out["rc"] not in ok:
        raise SystemExit(f"{cmd[0]} failed ({out['rc']})")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hta-python", default=os.environ.get("TRACELINT_HTA_PYTHON"),
                    help="an interpreter with HolisticTraceAnalysis==0.5.0 installed")
    ap.add_argument("--runs", type=int, default=2)
    a = ap.parse_args()
    if not a.hta_python:
        raise SystemExit("give --hta-python (see the module docstring)")
    ensure_big(BIG)
    HTA_DIR.mkdir(parents=True, exist_ok=True)
    link = HTA_DIR / "rank1.json"
    if not link.exists():
        link.symlink_to(BIG)
    env = {**os.environ, "PYTHONPYCACHEPREFIX": "/tmp/tracelint-bench-pyc"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    lint = [str(REPO / ".venv" / "bin" / "tracelint"), "lint", str(BIG), "-f", "json",
            "-o", os.devnull]
    hta = [a.hta_python, "-c", HTA, str(HTA_DIR)]
    timed(lint, env, (0, 1))                          # warm-up: compile the package once
    load0 = os.getloadavg()[0]
    runs = {"hta": [], "lint": []}
    for _ in range(a.runs):
        runs["hta"].append(timed(hta, env))
        runs["lint"].append(timed(lint, env, (0, 1)))   # 1: lint found something
    load1 = os.getloadavg()[0]
    med = {k: {m: statistics.median(r[m] for r in v) for m in ("wall", "cpu", "rss_mb")}
           for k, v in runs.items()}
    pairs = [x["wall"] / y["wall"] for x, y in zip(runs["lint"], runs["hta"])]
    print(f"file: {BIG.relative_to(REPO)} ({BIG.stat().st_size / 1e6:.0f} MB); "
          f"1-min load average before/after: {load0:.2f}/{load1:.2f} on {os.cpu_count()} CPUs; "
          f"median of {a.runs} alternating runs\n")
    print("| command | wall s (median) | wall s (all runs) | CPU s | peak RSS MB |")
    print("|---|---|---|---|---|")
    for k, label in (("hta", "HTA 0.5: parse + 4 analyses"), ("lint", "tracelint lint -f json")):
        m = med[k]
        walls = ", ".join(f"{r['wall']:.2f}" for r in runs[k])
        print(f"| {label} | {m['wall']:.2f} | {walls} | {m['cpu']:.2f} | {m['rss_mb']:.0f} |")
    ratio = statistics.median(pairs)
    print(f"\ntracelint / HTA wall, run by run: {', '.join(f'{p:.3f}x' for p in pairs)}; median "
          f"{ratio:.3f}x; memory {med['lint']['rss_mb'] / med['hta']['rss_mb']:.2f}x")
    print(f"target (<= 0.08x HTA wall): {'met' if ratio <= 0.08 else 'NOT met'}")
    print(json.dumps({"runs": runs}), file=sys.stderr)
    return 0 if ratio <= 0.08 else 1


if __name__ == "__main__":
    sys.exit(main())

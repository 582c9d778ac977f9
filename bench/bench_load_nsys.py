"""Benchmark: load a 1,000,000-kernel Nsight Systems export with tracelint.load.

    python bench/bench_load_nsys.py [--kernels N] [--src FILE] [--repeat 3] [--rebuild]
    python bench/bench_load_nsys.py --file EXPORT --vs OTHER_CHECKOUT [--repeat 3]

Builds bench/out/nsys_<N>k.sqlite from a real export (bench/replicate_nsys.py; bench/out is
git-ignored, the source is only read), then times tracelint.load in fresh subprocesses
(median of --repeat; each child reports its load time and peak RSS), and, as a same-run
reference, a plain ``SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL`` fetchall. Prints a markdown
table row for docs/performance.md. With --vs, the loads alternate with those of another
checkout of tracelint (a worktree of an older commit) on the same file, and the ratios of
their medians and peaks are printed: how a change moved the load, in one run.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from replicate_nsys import replicate  # noqa: E402

DEFAULT_SRC = HERE.parents[1] / "shared" / "traces" / "nsys" / \
    "nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite"

CHILD = """
import json, resource, sys, time
import tracelint
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])   # user + system
t0, c0 = time.perf_counter(), cpu()
tl = tracelint.load(sys.argv[1])
dt, dc = time.perf_counter() - t0, cpu() - c0
print(json.dumps({"seconds": dt, "cpu_seconds": dc, "kernels": len(tl.kernels),
                  "api_calls": len(tl.api_calls),
                  "linked": tl.correlation_resolved_fraction(),
                  "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def _count(path: Path, table: str) -> int:
    if not path.exists():
        return -1
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    except sqlite3.Error:
        return -1
    finally:
        con.close()


def build(src: Path, kernels: int, rebuild: bool) -> Path:
    out = HERE / "out" / f"nsys_{kernels // 1000}k.sqlite"
    if rebuild or _count(out, "CUPTI_ACTIVITY_KIND_KERNEL") != kernels:
        t0 = time.perf_counter()
        replicate(src, out, kernels)
        print(f"built {out} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return out


def time_load(path: Path, checkout: Path | None = None) -> dict:
    """One tracelint.load in a fresh interpreter (no warm caches of ours, own peak RSS); from
    `checkout` when given (the child's first import path is its working folder)."""
    res = subprocess.run([sys.executable, "-c", CHILD, str(path.resolve())], capture_output=True,
                         text=True, check=True, cwd=checkout)
    return json.loads(res.stdout.strip().splitlines()[-1])


def time_select_all(path: Path) -> float:
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        t0 = time.perf_counter()
        con.execute("SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
        return time.perf_counter() - t0
    finally:
        con.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--src", type=Path, default=DEFAULT_SRC)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--file", type=Path, help="an existing export to load (nothing is built)")
    ap.add_argument("--vs", type=Path, help="another checkout of tracelint, loaded alternately")
    args = ap.parse_args(argv)
    path = args.file or build(args.src, args.kernels, args.rebuild)
    if args.vs:
        return _versus(path, args.vs, args.repeat)
    runs = [time_load(path) for _ in range(args.repeat)]
    load_s = statistics.median(r["seconds"] for r in runs)
    cpu_s = statistics.median(r["cpu_seconds"] for r in runs)
    rss_mib = max(r["peak_rss_kib"] for r in runs) / 1024
    ref_s = time_select_all(path)
    first = runs[0]
    times = ", ".join(f"{r['seconds']:.2f}" for r in runs)
    print(f"loads: {times} s; "
          f"kernels {first['kernels']:,}, api_calls {first['api_calls']:,}, "
          f"linked {first['linked']:.3f}; {os.cpu_count()} CPUs, load avg "
          f"{os.getloadavg()[0]:.1f}, {platform.python_version()}", file=sys.stderr)
    print("| input | kernels | API rows | tracelint.load wall (median of "
          f"{args.repeat}) | CPU (all threads) | peak RSS | `SELECT *` kernels fetchall "
          "| load / fetchall |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {args.src.name} replicated | {first['kernels']:,} | {first['api_calls']:,} | "
          f"{load_s:.2f} s | {cpu_s:.2f} s | {rss_mib:.0f} MiB | {ref_s:.2f} s | "
          f"{load_s / ref_s:.2f}x |")
    return 0


def _versus(path: Path, other: Path, repeat: int) -> int:
    """This checkout's load against another's on one file, runs alternating."""
    pairs = [(time_load(path, HERE.parent), time_load(path, other)) for _ in range(repeat)]
    print(f"{path.name}: {os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.1f}; median of "
          f"{repeat} alternating runs", file=sys.stderr)
    print("| checkout | wall s (runs) | CPU s (median) | peak RSS MiB (runs) |")
    print("|---|---|---|---|")
    med = {}
    for side, name in ((0, "this"), (1, str(other))):
        runs = [p[side] for p in pairs]
        med[side] = (statistics.median(r["seconds"] for r in runs),
                     statistics.median(r["peak_rss_kib"] for r in runs) / 1024)
        walls = ", ".join(f"{r['seconds']:.2f}" for r in runs)
        peaks = ", ".join(f"{r['peak_rss_kib'] / 1024:.0f}" for r in runs)
        cpu_s = statistics.median(r["cpu_seconds"] for r in runs)
        print(f"| {name} | {walls} | {cpu_s:.2f} | {peaks} |")
    print(f"this / other: wall {med[0][0] / med[1][0]:.2f}x, peak {med[0][1] / med[1][1]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Load time and peak memory of the Kineto importer against json.load of the same file.

    python bench/bench_load_kineto.py [--runs 3] [--copies 6]

Builds the reference trace if missing (hta_v100_rank1of2 replicated 6 times: 287 MB of JSON,
1.3 M events, in bench/out/, git-ignored) with ../shared/bench/make_big_trace.py. Then, in one
run, times `json.load` (reference) and `tracelint.load`, each call in a fresh subprocess so peak
RSS is that of the load alone. Runs alternate between the two loaders so that machine load hits
both alike. Reported: median wall seconds of the call (imports excluded), its CPU seconds,
whole-process wall seconds (interpreter start and imports included) and peak RSS.
With --workers N (default 2) a fourth row decodes the byte ranges in N processes
(kineto_parallel; CPU then sums all processes, peak RSS is the largest one).
Targets (issue 16): tracelint <= 0.35x json.load wall time on one core, >= 1.7x faster again
with 2 processes than with 1, peak RSS <= 0.8x the file size. After each round, the host's own
ceiling for N processes (bench/host_parallel.py: the same perfectly parallel work alone and N
copies at once) is measured and printed beside the speed-up; with 2 processes, so is this
load's own ceiling: two one-process loads of the file started together ("twin"), against one
alone in the same round. Each process decodes slower while the other runs (shared caches and
memory, the neighbours of a virtual machine), and this says by how much for this very work.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from host_parallel import ceiling

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SRC = SHARED / "traces" / "torch" / "hta_v100_rank1of2.json.gz"
MAKER = SHARED / "bench" / "make_big_trace.py"
OUT = REPO / "bench" / "out" / "big.json"

CHILD = r"""
import json, resource, sys, time
path, mode = sys.argv[1], sys.argv[2]
if mode != "json":
    import tracelint
    from tracelint import forking
    from tracelint.importers import kineto_ranges
    from tracelint.importers import kineto_tables  # noqa: F401 - pandas: imports not timed
    if mode == "whole":          # the whole-buffer path, for comparison
        kineto_ranges.STREAM_MIN = 1 << 62
    if mode.startswith("workers"):   # workersN: the byte ranges decoded by N processes
        forking.set_load_workers(int(mode[7:]))
wall, cpu = time.perf_counter(), time.process_time()
if mode == "json":
    with open(path, "rb") as fh:
        obj = json.load(fh)
    n = len(obj["traceEvents"])
elif mode == "twin":        # two one-process loads started together, each timed by itself
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    barrier, walls = ctx.Barrier(2), ctx.SimpleQueue()

    def one():
        barrier.wait()
        t = time.perf_counter()
        rows = sum(tracelint.load(path).counts().values())
        walls.put((time.perf_counter() - t, rows))
    twin = ctx.Process(target=one)
    twin.start()
    one()
    twin.join()
    (a, n), (b, _) = walls.get(), walls.get()
else:
    n = sum(tracelint.load(path).counts().values())
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
if mode == "twin":
    wall = max(a, b)        # the slower copy: what the pair took
kids = resource.getrusage(resource.RUSAGE_CHILDREN)    # worker processes (none for json)
print(json.dumps({"wall": wall, "cpu": cpu + kids.ru_utime + kids.ru_stime, "rss_mb": max(
    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, kids.ru_maxrss) / 1024, "rows": n}))
"""


def ensure_trace(copies: int) -> list[str]:
    cmd = [sys.executable, str(MAKER), str(SRC), str(OUT), "--copies", str(copies)]
    if not OUT.exists():
        OUT.parent.mkdir(parents=True, exist_ok=True)
        print("generating:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    return cmd


def measure(mode: str) -> dict:
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", CHILD, str(OUT), mode], capture_output=True,
                         text=True, cwd=REPO)
    if res.returncode:
        raise SystemExit(f"{mode} failed:\n{res.stderr}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["process"] = time.perf_counter() - t
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--copies", type=int, default=6)
    ap.add_argument("--workers", type=int, default=2, help="a row with this many processes")
    a = ap.parse_args()
    gen = ensure_trace(a.copies)
    runs: dict[str, list[dict]] = {"json": [], "tracelint": [], "whole": []}
    if a.workers > 1:
        runs[f"workers{a.workers}"] = []
    if a.workers == 2:
        runs["twin"] = []
    load_before = os.getloadavg()[0]
    ceilings = []
    for i in range(a.runs):
        for mode in runs:
            runs[mode].append(measure(mode))
            print(f"run {i + 1} {mode}: {runs[mode][-1]}", flush=True)
        if a.workers > 1:
            ceilings.append(ceiling(a.workers)["speedup"])
    med = {m: {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu", "process")}
           for m, rs in runs.items()}
    rss = {m: max(r["rss_mb"] for r in rs) for m, rs in runs.items()}
    ratio = med["tracelint"]["wall"] / med["json"]["wall"]
    print(f"\nfile: {OUT.relative_to(REPO)} ({OUT.stat().st_size / 1e6:.0f} MB, "
          f"{runs['json'][0]['rows']} events); generated by: python3 {' '.join(gen[1:])}")
    print(f"machine: {platform.processor() or platform.machine()}, Python "
          f"{platform.python_version()}; median of {a.runs} alternating runs\n")
    size_mb = OUT.stat().st_size / 2**20
    print(f"1-min load average before/after: {load_before:.2f}/{os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} CPUs; file {size_mb:.0f} MiB; CPU: all processes of the call\n")
    print("| loader | call wall s (median) | call wall s (all runs) | call CPU s (vs json) | "
          "process wall s | peak RSS MB | wall vs json.load |")
    print("|---|---|---|---|---|---|---|")
    labels = {"json": "json.load (reference)", "tracelint": "tracelint.load",
              "whole": "tracelint.load, whole-buffer path",
              f"workers{a.workers}": f"tracelint.load, {a.workers} processes",
              "twin": "two one-process loads at once (the slower)"}
    for mode in runs:
        label = labels[mode]
        m, all_runs = med[mode], ", ".join(f"{r['wall']:.2f}" for r in runs[mode])
        rel = m["wall"] / med["json"]["wall"]
        print(f"| {label} | {m['wall']:.2f} | {all_runs} | {m['cpu']:.2f} "
              f"({m['cpu'] / med['json']['cpu']:.2f}x) | {m['process']:.2f} "
              f"| {rss[mode]:.0f} ({rss[mode] / size_mb:.2f}x file) | {rel:.2f}x |")
    if a.workers > 1:
        pairs = [x["wall"] / y["wall"] for x, y in zip(runs["tracelint"], runs[f"workers{a.workers}"])]
        print(f"\n1 process / {a.workers} processes, call wall, run by run (same run): "
              + ", ".join(f"{p:.2f}x" for p in pairs) + f"; median {statistics.median(pairs):.2f}x")
        print(f"host ceiling for {a.workers} processes after each round (host_parallel.py): "
              + ", ".join(f"{c:.2f}x" for c in ceilings)
              + f"; median {statistics.median(ceilings):.2f}x; speed-up / ceiling, run by run: "
              + ", ".join(f"{p / c:.2f}" for p, c in zip(pairs, ceilings)))
    if "twin" in runs:
        own = [2 * x["wall"] / t["wall"] for x, t in zip(runs["tracelint"], runs["twin"])]
        print("this load's own ceiling (2 x one load / the slower of two at once), run by run: "
              + ", ".join(f"{c:.2f}x" for c in own) + f"; median {statistics.median(own):.2f}x; "
              "speed-up / it: " + ", ".join(f"{p / c:.2f}" for p, c in zip(pairs, own))
              + f"; median {statistics.median(p / c for p, c in zip(pairs, own)):.2f}")
    checks = [("load <= 0.35x json.load", ratio <= 0.35, f"{ratio:.2f}x"),
              ("peak RSS <= 0.8x file", rss["tracelint"] <= 0.8 * size_mb,
               f"{rss['tracelint'] / size_mb:.2f}x")]
    if a.workers > 1:
        checks.append((f">= 1.7x with {a.workers} processes", statistics.median(pairs) >= 1.7,
                       f"{statistics.median(pairs):.2f}x"))
    print("\ntargets: " + "; ".join(f"{name}: {'met' if ok else 'NOT met'} ({got})"
                                    for name, ok, got in checks))
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())

"""`tracelint lint DIR --jobs N` against `--jobs 1` on a generated multi-rank job, with the
host's own ceiling for N processes measured between the runs (bench/host_parallel.py).

    python bench/bench_jobs.py [--jobs 2] [--pairs 5] [--ranks 8] [--target-mb 20]

Each pair runs the whole command (interpreter start, imports, map, reduce, report written to a
file) once with --jobs 1 and once with --jobs N, in alternating order, then the host ceiling.
Reported per pair and as medians: wall seconds, CPU seconds of the command and its workers,
the speed-up (jobs 1 wall / jobs N wall), the host's ceiling and the speed-up's share of it.
The job is generated once into bench/out/ranks{R}_{MB}mb/ (bench_ranks.generate), the same
input as the figures in docs/performance.md ("Many ranks").
Target (issue 16): >= 1.7x with 2 workers on an idle 2-core machine.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_ranks import generate  # noqa: E402
from host_parallel import ceiling  # noqa: E402
from lint_process import lint_process  # noqa: E402


def lint(folder: Path, jobs: int, out: Path) -> dict:
    """Wall and CPU seconds of one `tracelint lint` process (its workers included)."""
    return lint_process([str(folder), "--jobs", str(jobs), "-f", "json", "-o", str(out),
                         "--fail-on", "never"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--target-mb", type=float, default=20.0)
    a = ap.parse_args()
    folder = HERE / "out" / f"ranks{a.ranks}_{int(a.target_mb)}mb"
    if len(list(folder.glob("rank*.json"))) != a.ranks:
        generate(folder, a.ranks, a.target_mb)
    pairs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.pairs):
            load = os.getloadavg()[0]
            order = (1, a.jobs) if i % 2 == 0 else (a.jobs, 1)
            got = {j: lint(folder, j, Path(tmp) / f"j{j}.json") for j in order}
            host = ceiling(a.jobs)
            speedup = got[1]["wall_s"] / got[a.jobs]["wall_s"]
            pairs.append({"jobs_1": got[1], f"jobs_{a.jobs}": got[a.jobs],
                          "speedup": round(speedup, 3), "host_ceiling": host["speedup"],
                          "share_of_ceiling": round(speedup / host["speedup"], 3),
                          "loadavg_1min_before_after": [round(load, 2),
                                                        round(os.getloadavg()[0], 2)]})
            print(json.dumps(pairs[-1]), file=sys.stderr, flush=True)
    med = {k: round(statistics.median(p[k] for p in pairs), 3)
           for k in ("speedup", "host_ceiling", "share_of_ceiling")}
    print(json.dumps({"folder": str(folder.relative_to(REPO)), "jobs": a.jobs,
                      "cpus": os.cpu_count(), "pairs": pairs, "median": med,
                      "target_1_7x_met": med["speedup"] >= 1.7}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark multi-rank analysis: coordinator memory and wall time for a whole job against one rank.

    .venv/bin/python bench/bench_ranks.py                       # 16 ranks of ~50 MB, 2 workers
    .venv/bin/python bench/bench_ranks.py --ranks 8 --jobs 2 --target-mb 50

Generates the job once into bench/out/ranks{N}_{MB}mb/ (git-ignored): a real NCCL rank
(../shared/traces/torch/hta_nccl_a100_rank0of2.json.gz) replicated to about --target-mb MB of
JSON per rank, with a planted straggler (rank 1, 3 ms late at every collective) so the cross-rank
step has something to find. Then, each in a fresh Python process:

1. one rank: summarize_source() of rank 0 (load + per-rank rules + summary) — wall time and
   peak RSS of that process;
2. the job: lint_job() over all ranks with --jobs local workers — wall time, the coordinating
   process's own peak RSS and the largest worker's (each reads its own VmHWM: ru_maxrss is
   inherited across fork+exec on Linux, so it would report the parent's size), and the time
   each rank took inside its worker (sum / workers is the ideal on this machine's load).

Targets: coordinator peak < 2x one rank's peak; job wall ~ ranks x one-rank wall / workers.
Prints one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SRC = REPO.parent / "shared" / "traces" / "torch" / "hta_nccl_a100_rank0of2.json.gz"

ONE_RANK = r"""
import json, sys, time
t0 = time.perf_counter()
from tracelint.ranks.summary import peak_rss_bytes, summarize_source
t1 = time.perf_counter()
s = summarize_source(sys.argv[1])[0]
t2 = time.perf_counter()
assert s.ok, s.error
print(json.dumps({"wall_s": t2 - t1, "import_s": t1 - t0, "timing_s": s.timing_s,
                  "peak_rss_mb": peak_rss_bytes() / 2**20}))
"""

JOB = r"""
import json, os, pickle, sys, time
import numpy as np
t0 = time.perf_counter()
from tracelint.ranks.job import lint_job
from tracelint.ranks.summary import peak_rss_bytes
t1 = time.perf_counter()
load0 = os.getloadavg()[0]
r = lint_job([sys.argv[1]], jobs=int(sys.argv[2]))
t2 = time.perf_counter()
per_rank = [s.timing_s.get("total", 0.0) for s in r.ranks]
print(json.dumps({
    "wall_s": t2 - t1, "import_s": t1 - t0, "elapsed_s": r.elapsed_s,
    "coordinator_peak_rss_mb": peak_rss_bytes() / 2**20,
    "worker_peak_rss_mb": max(s.worker_peak_rss_bytes or 0 for s in r.ranks) / 2**20,
    "per_rank_in_worker_s": {"median": float(np.median(per_rank)), "sum": float(sum(per_rank))},
    "loadavg_1min_before_after": [load0, os.getloadavg()[0]],
    "ranks": len(r.ranks), "failed": len(r.failed), "execution": r.execution,
    "findings": sorted([f.rule, f.where.rank] for f in r.findings),
    "per_rank_findings": len(r.rank_findings()),
    "summary_bytes_total": sum(len(pickle.dumps(s)) for s in r.ranks),
}))
"""


def generate(out: Path, ranks: int, target_mb: float) -> dict:
    from tracelint.ranks.synth import RawTrace, make_job
    t0 = time.perf_counter()
    raw = RawTrace.load(SRC)
    one_copy_mb = 8.7            # one copy of the source as synth writes it (measured)
    copies = max(1, round(target_mb / one_copy_mb))
    paths = make_job(raw, out, ranks=ranks, straggler=1, delay_us=3000.0, copies=copies,
                     suffix=".json")
    sizes = [p.stat().st_size for p in paths]
    return {"generated_s": round(time.perf_counter() - t0, 1), "copies": copies,
            "rank_mb": round(sum(sizes) / len(sizes) / 1e6, 1)}


def run(code: str, *args: str) -> dict:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         cwd=REPO, env=env)
    if res.returncode != 0:
        raise SystemExit(res.stderr[-3000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--target-mb", type=float, default=50.0)
    ap.add_argument("--jobs", type=int, default=2, help="local worker processes")
    ap.add_argument("--out", default=None, help="folder for the generated job (default bench/out/...)")
    ap.add_argument("--regenerate", action="store_true")
    a = ap.parse_args(argv)
    out = Path(a.out) if a.out else HERE / "out" / f"ranks{a.ranks}_{int(a.target_mb)}mb"
    info = {"ranks": a.ranks, "jobs": a.jobs, "cpus": os.cpu_count(), "folder": str(out)}
    files = sorted(out.glob("rank*.json")) if out.exists() else []
    if a.regenerate or len(files) != a.ranks:
        info["generate"] = generate(out, a.ranks, a.target_mb)
        files = sorted(out.glob("rank*.json"))
    info["rank_mb"] = round(sum(f.stat().st_size for f in files) / len(files) / 1e6, 1)
    one = run(ONE_RANK, str(out / "rank0.json"))
    job = run(JOB, str(out), str(a.jobs))
    ideal = a.ranks * one["wall_s"] / a.jobs
    in_worker_ideal = job["per_rank_in_worker_s"]["sum"] / a.jobs
    info.update({
        "one_rank": one, "job": job,
        "in_worker_ideal_s": round(in_worker_ideal, 2),
        "job_wall_over_in_worker_ideal": round(job["wall_s"] / in_worker_ideal, 3),
        "ideal_job_wall_s": round(ideal, 2),
        "job_wall_over_ideal": round(job["wall_s"] / ideal, 3),
        "coordinator_over_one_rank_peak": round(job["coordinator_peak_rss_mb"] / one["peak_rss_mb"], 3),
        "targets_met": {
            "coordinator_peak_lt_2x_one_rank": job["coordinator_peak_rss_mb"] < 2 * one["peak_rss_mb"],
            "wall_within_25pct_of_ranks_x_one_over_workers": job["wall_s"] <= 1.25 * ideal,
        },
    })
    print(json.dumps(info, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

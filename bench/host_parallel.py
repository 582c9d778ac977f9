"""What N processes can gain over one on this host right now: the ceiling of every
"faster with N processes" figure, measured in the same run as the figure.

    python bench/host_parallel.py [--workers 2] [--runs 5]

Why: the benchmark machines are virtual, and their cores do not scale alone. The same fixed,
perfectly parallel work (no shared data, no communication) run as two copies at once took
1.47x to 2.35x less time than twice one copy in consecutive runs of one afternoon, and one
copy's own time moved by 40 % from one run to the next. A tracelint speed-up read without
that ceiling says as much about the neighbours as about tracelint, so the parallel benchmarks
(bench_load_kineto.py, bench_jobs.py) measure it between their own runs and print both.

The work mixes what tracelint's processes do: a Python loop over many small objects (decoding
events) and numpy sorts and copies of a few large arrays (building columns). Each copy runs in
its own forked process, started together at a barrier and timed inside the process, so process
start-up and pool overhead are not in the ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from multiprocessing import get_context

#: Sized for about 1.5 s a copy on the 2-core benchmark machine (a shorter run catches one
#: moment of the neighbours, not the minute a benchmark pair takes).
PY_ITEMS = 4_000_000
NP_ITEMS = 10_000_000


def work() -> float:
    """Seconds of one copy of the reference work."""
    import numpy as np
    t = time.perf_counter()
    rows = [{"ts": i, "dur": i % 97, "name": "k%d" % (i % 50)} for i in range(PY_ITEMS // 10)]
    total = 0
    for _ in range(10):
        for r in rows:
            total += r["dur"] + len(r["name"])
    a = np.random.default_rng(0).integers(0, 1 << 40, NP_ITEMS)
    for _ in range(3):
        a = np.sort(a)[::-1].copy()
    return time.perf_counter() - t


def _timed(barrier=None) -> float:
    if barrier is not None:
        barrier.wait()
    return work()


def ceiling(workers: int = 2) -> dict:
    """One copy alone, then `workers` copies at once: {"one_s", "many_s", "speedup"}, where
    speedup = workers x one copy's time / the slowest copy's time at once (the ideal is
    `workers`)."""
    ctx = get_context("fork")
    with ctx.Pool(1) as pool:
        one = pool.apply(_timed)
    manager = ctx.Manager()
    barrier = manager.Barrier(workers)
    with ctx.Pool(workers) as pool:
        many = max(pool.map(_timed, [barrier] * workers, chunksize=1))
    manager.shutdown()
    return {"one_s": round(one, 3), "many_s": round(many, 3),
            "speedup": round(workers * one / many, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    load = os.getloadavg()[0]
    runs = [ceiling(a.workers) for _ in range(a.runs)]
    print(json.dumps({"workers": a.workers, "cpus": os.cpu_count(), "runs": runs,
                      "median_speedup": statistics.median(r["speedup"] for r in runs),
                      "loadavg_1min_before_after": [round(load, 2),
                                                    round(os.getloadavg()[0], 2)]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Loading a large jax.profiler trace (or any other JSON trace tracelint reads: rocprofv3's)
against `json.load` of the same file, in one run.

    python bench/make_big_jax_trace.py bench/out/jax_big.trace.json
    python bench/bench_load_jax.py [FILE] [--runs 3]
    python bench/make_big_rocprof_trace.py bench/out/rocprof_big.json
    python bench/bench_load_jax.py bench/out/rocprof_big.json --runs 3

Each run is a fresh process, the two alternating: `tracelint.load(FILE)` (the importer:
decode, tables, links) and `json.load(open(FILE))` (decode only). Reported: medians of wall,
CPU (user + system) and peak RSS (/usr/bin/time), and each as a ratio to json.load's. Not an
issue target: the figure that says whether such a trace costs what its decode costs.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO / "bench" / "out" / "jax_big.trace.json"
CODE = {"tracelint.load": "import sys, tracelint; tracelint.load(sys.argv[1])",
        "json.load": "import json, sys; json.load(open(sys.argv[1], 'rb'))"}


def run(code: str, path: Path) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    res = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, "-c", code, str(path)],
                         cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if res.returncode:
        raise SystemExit(res.stderr[-2000:])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall_s": round(wall, 3),
            "cpu_s": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 3),
            "peak_mib": round(int(res.stderr.strip().splitlines()[-1]) / 1024, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    if not a.file.exists():
        raise SystemExit(f"{a.file} missing: python bench/make_big_jax_trace.py {a.file}")
    load = round(os.getloadavg()[0], 2)
    got: dict[str, list] = {k: [] for k in CODE}
    for i in range(a.runs):
        for name in (list(CODE) if i % 2 == 0 else list(CODE)[::-1]):
            got[name].append(run(CODE[name], a.file))
    med = {k: {m: statistics.median(r[m] for r in rs) for m in rs[0]} for k, rs in got.items()}
    ref = med["json.load"]
    print(json.dumps({"file_mb": round(a.file.stat().st_size / 1e6, 1),
                      "loadavg_1min_before_after": [load, round(os.getloadavg()[0], 2)],
                      "runs": got, "median": med,
                      "tracelint_vs_json": {m: round(med["tracelint.load"][m] / ref[m], 2)
                                            for m in ref}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

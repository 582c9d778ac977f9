#!/usr/bin/env python3
"""Lint of a 2 GB Kineto trace: peak memory against the file, and how every stage scales.

    python bench/bench_lint_scaling.py [--target-mb 2048] [--out /tmp/big2g.json] [--jobs 1]
    python bench/bench_lint_scaling.py --small A.sqlite --large B.sqlite    # any pair of traces

Builds (if missing) a trace of about --target-mb with ../shared/bench/make_big_trace.py from the
same source as the 287 MB reference (bench/out/big.json, hta_v100_rank1of2 replicated), then runs
`tracelint lint FILE -f json -o OUT` on the reference and on the big file, one after the other in
the same run, each in a fresh process. Printed: wall, CPU and peak RSS of each, peak RSS over the
file size, and per stage of the report's `timing_s` (load, every rule, the projected savings)
the seconds at both sizes with the growth exponent log(t_big / t_ref) / log(size_big / size_ref):
1.0 is linear; a stage above 1.15 is listed as superlinear (a lookup that scans all rows per
row, for instance; TL009 was 1.6 before its per-thread search).
Target (issue 16): a 2 GB Kineto trace lints within 2 GB of RAM. The big file is not deleted.
With --small/--large, any two traces of one workload at two sizes (bench/replicate_nsys.py
grows an nsys export) are compared the same way; the 2 GB verdict is then not given.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_lint import SHARED, ensure_big  # noqa: E402
from bench_vs_hta import timed  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
REF = REPO / "bench" / "out" / "big.json"
SRC = SHARED / "traces" / "torch" / "hta_v100_rank1of2.json.gz"
SUPERLINEAR = 1.15
SMALL_S = 0.2          # stages shorter than this at the big size are not judged (noise)


def lint_once(path: Path, env: dict, jobs: int | None = None) -> tuple[dict, dict]:
    """(wall/CPU/RSS of the whole lint process, the report's timing_s)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        cmd = [str(REPO / ".venv" / "bin" / "tracelint"), "lint", str(path), "-f", "json",
               "-o", str(out), "--fail-on", "never"] + (["--jobs", str(jobs)] if jobs else [])
        proc = timed(cmd, env)
        return proc, json.loads(out.read_text())["timing_s"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target-mb", type=int, default=2048)
    ap.add_argument("--out", default="/tmp/tracelint-bench/big2g.json")
    ap.add_argument("--small", help="the smaller trace (default: the 287 MB reference)")
    ap.add_argument("--large", help="the larger trace (default: --out, built if missing)")
    ap.add_argument("--jobs", type=int, help="processes for both lints (`lint --jobs N`); "
                    "by default the reference's rules run on two and a trace above 4 M rows' "
                    "on one (engine/rule_processes), so its stage exponents compare unlike "
                    "runs: --jobs 1 compares like with like")
    a = ap.parse_args()
    ref = Path(a.small) if a.small else REF
    big = Path(a.large or a.out)
    if not a.small:
        ensure_big(REF)
    if not a.large and not big.exists():
        big.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(SHARED / "bench" / "make_big_trace.py"), str(SRC),
                        str(big), "--target-mb", str(a.target_mb)], check=True)
    env = {**os.environ, "PYTHONPYCACHEPREFIX": "/tmp/tracelint-bench-pyc"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    load0 = os.getloadavg()[0]
    ref_p, ref_t = lint_once(ref, env, a.jobs)
    big_p, big_t = lint_once(big, env, a.jobs)
    load1 = os.getloadavg()[0]
    s_ref, s_big = ref.stat().st_size, big.stat().st_size
    growth = math.log(s_big / s_ref)
    print(f"files: {ref.name} {s_ref / 1e6:.0f} MB and {big.name} {s_big / 1e6:.0f} MB "
          f"({s_big / s_ref:.2f}x); 1-min load average before/after: {load0:.2f}/{load1:.2f} "
          f"on {os.cpu_count()} CPUs\n")
    print("| file | wall s | CPU s | peak RSS MB | peak RSS / file |")
    print("|---|---|---|---|---|")
    for p, size, name in ((ref_p, s_ref, ref.name), (big_p, s_big, big.name)):
        print(f"| {name} | {p['wall']:.1f} | {p['cpu']:.1f} | {p['rss_mb']:.0f} | "
              f"{p['rss_mb'] * 2**20 / size:.2f}x |")
    print("\n| stage | s at reference | s at big | growth exponent |")
    print("|---|---|---|---|")
    superlinear = []
    for stage in sorted(big_t, key=lambda k: -big_t[k]):
        t0, t1 = ref_t.get(stage, 0.0), big_t[stage]
        if t1 < 0.01:
            continue
        exp = math.log(t1 / t0) / growth if t0 > 0 else float("inf")
        flag = exp > SUPERLINEAR and t1 >= SMALL_S
        superlinear += [stage] if flag else []
        print(f"| {stage} | {t0:.2f} | {t1:.2f} | {exp:.2f}{' superlinear' if flag else ''} |")
    gb = big_p["rss_mb"] * 2**20 / 1e9
    within = gb <= 2.0 or bool(a.large)
    if not a.large:
        print(f"\ntarget: a {s_big / 1e9:.2f} GB trace lints within 2 GB: "
              f"{'met' if gb <= 2.0 else 'NOT met'} (peak {gb:.2f} GB)")
    print(f"superlinear stages: {', '.join(superlinear) or 'none'}")
    return 0 if within and not superlinear else 1


if __name__ == "__main__":
    sys.exit(main())

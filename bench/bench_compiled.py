"""What the compiled loops save: `tracelint lint FILE` with them (the default when numba is
installed) against the same code with them off (`TRACELINT_JIT=0`: plain Python loops, SQL
for the nsys tables), alternating, in fresh processes, same run.

    python bench/bench_compiled.py FILE [FILE ...] [--runs 3]

Reported per file: median CPU (user + sys of the child, from wait4), wall and peak RSS of
each mode, and the ratio. Both modes must write the same report (checked, timing removed).
The first compiled run of a fresh checkout also compiles (up to about 8 s, cached on disk after):
one untimed run per file warms the cache first.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(path: Path, out: Path, jit: str) -> tuple[float, float, float]:
    env = {**os.environ, "TRACELINT_JIT": jit}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    argv = [sys.executable, "-m", "tracelint", "lint", str(path), "-f", "json", "--no-scrub",
            "--fail-on", "never", "-o", str(out)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    if status:
        raise SystemExit(f"lint failed ({status}) on {path} with TRACELINT_JIT={jit}")
    return ru.ru_utime + ru.ru_stime, time.perf_counter() - t0, ru.ru_maxrss / 1024


def report(out: Path) -> dict:
    d = json.loads(out.read_text())
    d.pop("timing_s", None)
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    print("| file | mode | CPU s (median) | wall s | peak RSS MiB | CPU vs plain |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        plain_out, fast_out = Path(tmp) / "plain.json", Path(tmp) / "fast.json"
        for path in args.files:
            run(path, fast_out, "")                 # warm numba's cache
            got: dict[str, list] = {"0": [], "": []}
            for _ in range(args.runs):
                got["0"].append(run(path, plain_out, "0"))
                got[""].append(run(path, fast_out, ""))
            if report(plain_out) != report(fast_out):
                raise SystemExit(f"{path}: the reports differ between the two modes")
            med = {m: [statistics.median(r[i] for r in got[m]) for i in range(3)] for m in got}
            for mode, name in (("0", "plain (TRACELINT_JIT=0)"), ("", "compiled")):
                cpu, wall, rss = med[mode]
                print(f"| {path.name} | {name} | {cpu:.2f} | {wall:.2f} | {rss:,.0f} | "
                      f"{cpu / med['0'][0]:.2f}x |")
    print(f"\n{args.runs} alternating pairs per file; 1-min load average before/after: "
          f"{load_before:.2f}/{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
          "reports identical in both modes")


if __name__ == "__main__":
    main()

"""Start-up cost of the light commands, whole process, against references in the same run.

    python bench/bench_startup.py [--runs 7] [--before /work/main/.venv/bin/python]
    python bench/bench_startup.py --command "lint TRACE --select TL005 -f json" --before ...

Each command runs in a fresh process; CPU is the child's user+sys time from wait4(), so other
jobs on a shared machine inflate the wall time but hardly the CPU. Runs interleave the
commands so machine load hits them alike. References: a bare interpreter (`python -c pass`)
and `python -c "import pandas"`; with --before, the same commands run by another checkout's
interpreter (e.g. /work/main/.venv/bin/python: main before this change;
the venv's checkout is taken as the folder above .venv). The rule list is run once first so its cache is warm.
Target: `--version`, `--help`, `rules` <= 0.2 s CPU.
"""
from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time

COMMANDS = [["--version"], ["--help"], ["rules"]]


def run_once(argv: list[str]) -> tuple[float, float]:
    t0 = time.perf_counter()
    cwd = None
    if argv[0] != sys.executable:  # another checkout: run it from its own root (`-m tracelint`)
        cwd = os.path.dirname(os.path.dirname(os.path.dirname(argv[0])))
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd)
    _, _, ru = os.wait4(proc.pid, 0)
    return time.perf_counter() - t0, ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--before", help="interpreter of another checkout to compare with")
    ap.add_argument("--command", action="append", default=None, metavar="ARGS",
                    help="tracelint arguments to time instead of the start-up commands "
                         "(repeatable), e.g. 'lint trace.json.gz --select TL005 -f json'")
    args = ap.parse_args()
    commands = [shlex.split(c) for c in args.command] if args.command else COMMANDS
    cases: dict[str, list[str]] = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import pandas'": [sys.executable, "-c", "import pandas"],
    }
    for cmd in commands:
        cases["tracelint " + " ".join(cmd)] = [sys.executable, "-m", "tracelint", *cmd]
        if args.before:
            before = [os.path.abspath(a) if os.path.exists(a) else a for a in cmd]
            cases["before: tracelint " + " ".join(cmd)] = [args.before, "-m", "tracelint", *before]
    for argv in cases.values():  # warm the bytecode and rule-catalogue caches
        run_once(argv)
    load_before = os.getloadavg()[0]
    wall: dict[str, list[float]] = {k: [] for k in cases}
    cpu: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.runs):
        for name, argv in cases.items():
            w, c = run_once(argv)
            wall[name].append(w)
            cpu[name].append(c)
    ref = statistics.median(cpu["python -c 'import pandas'"])
    print(f"1-min load average before/after: {load_before:.2f}/{os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} CPUs; median of {args.runs} runs")
    print("| command | CPU s (median) | wall s (median) | CPU vs `import pandas` |")
    print("|---|---|---|---|")
    for name in cases:
        c, w = statistics.median(cpu[name]), statistics.median(wall[name])
        print(f"| `{name}` | {c:.3f} | {w:.3f} | {c / ref:.2f}x |")


if __name__ == "__main__":
    main()

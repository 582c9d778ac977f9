"""Peak of the summed RSS of a command and every process it starts, sampled every 20 ms.

    python bench/tree_peak_rss.py COMMAND [ARG ...]

`/usr/bin/time` and `getrusage` give the largest single process; with worker processes (the
parallel Kineto load, `lint DIR --jobs N`) the machine holds their sum. Pages a forked worker
shares with its parent count in both, so the sum is an upper bound. Used for the default load
processes in docs/performance-history.md ("Eleventh pass").
"""
from __future__ import annotations

import subprocess
import sys
import time


def tree_rss_kib(root: int) -> int:
    """Summed RSS (KiB) of root and its descendants, from one `ps` listing."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,rss="], capture_output=True,
                         text=True).stdout
    rows = [tuple(map(int, line.split())) for line in out.splitlines() if line.strip()]
    tree, grew = {root}, True
    while grew:
        grew = False
        for pid, ppid, _ in rows:
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return sum(rss for pid, _, rss in rows if pid in tree)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss_kib(proc.pid))
        time.sleep(0.02)
    print(f"tree peak {peak / 1024:.0f} MiB (exit {proc.returncode})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

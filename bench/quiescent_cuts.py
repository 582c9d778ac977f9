"""Where a trace's what-if graph could be cut into independent windows: the times at which no
GPU op runs or waits launched (from its launch call's start to its end).

    python bench/quiescent_cuts.py TRACE [TRACE ...]

Prints, per trace, the GPU ops, the cut points and the largest window's share of the ops.
Used for the windowed-replay figures in docs/performance.md ("Twenty-fourth pass"): a replay
that works one window at a time bounds its memory only where windows are small.
"""
from __future__ import annotations

import sys

import numpy as np


def windows(path: str) -> tuple[int, int, int]:
    """(GPU ops, cut points, ops in the largest window)."""
    import tracelint
    from tracelint.engine.context import Context
    from tracelint.timeline import intervals
    tl = tracelint.load(path)
    act = tl.gpu_activity
    if not len(act):
        return 0, 0, 0
    start, end = act["start"].to_numpy(), act["end"].to_numpy()
    launch = Context(tl).activity_launch
    api_start = tl.api_calls["start"].to_numpy()
    issued = start.copy()
    linked = launch >= 0
    issued[linked] = np.minimum(api_start[launch[linked]], start[linked])
    lo, _ = intervals.merge(issued, end)
    per_window = np.bincount(np.searchsorted(lo, start, side="right") - 1, minlength=len(lo))
    return len(act), len(lo) - 1, int(per_window.max())


def main(paths: list[str]) -> None:
    print("| trace | GPU ops | cuts | largest window |\n|---|---|---|---|")
    for path in paths:
        n, cuts, big = windows(path)
        share = f"{big / n:.1%} of the ops" if n else "no GPU work"
        print(f"| {path.rsplit('/', 1)[-1]} | {n} | {cuts} | {big} ({share}) |")


if __name__ == "__main__":
    main(sys.argv[1:])

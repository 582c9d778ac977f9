"""Seconds per what-if replay of one trace, its loop as plain Python (no numba).

    python bench/bench_replay.py [FILE] [--runs 5]

FILE defaults to the 287 MB reference trace (bench/out/big.json, made by bench_lint.py). Loads
the trace, builds its run graph once, then replays it with no edit --runs times and prints
each replay's seconds, how many events the order holds and how many of them the loop visits
(the rest go to the array passes of whatif/sweep.py). Run it from two worktrees to compare
two versions of the replay; times move with the host, so alternate them.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

os.environ["TRACELINT_JIT"] = "0"        # the plain path: what a default install runs

import tracelint  # noqa: E402
from tracelint.whatif import sweep  # noqa: E402
from tracelint.whatif.graph import build  # noqa: E402
from tracelint.whatif.replay import Plan, _order, replay  # noqa: E402

REFERENCE = Path(__file__).resolve().parent / "out" / "big.json"


def visited(g) -> int | None:
    """Events the loop visits in a replay with no edit (None before sweep had its passes)."""
    if not hasattr(sweep, "_runs"):
        return None
    p = Plan.of(g)
    order = _order(g, p)
    nh = g.n_host
    runs = sweep._runs(g.h_chains, g.h_prev, g.h_inside, p.h_gap, p.h_dur, p.h_target) \
        if nh else None
    if runs is not None:     # None: the runs would not pay, every host item is visited
        order = sweep._visited(order, runs)
    in_ranges = sum(b - a for a, b in sweep._op_ranges(order, nh, g.n_gpu, p.g_xpred))
    return int(len(order) - in_ranges)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file", nargs="?", default=str(REFERENCE))
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    g = build(tracelint.load(args.file))
    secs = []
    for _ in range(args.runs):
        t = time.perf_counter()
        replay(g)
        secs.append(round(time.perf_counter() - t, 4))
    print(json.dumps({"file": args.file, "events": int(len(_order(g, Plan.of(g)))),
                      "visited_by_loop": visited(g), "replay_s": secs,
                      "median_s": statistics.median(secs), "min_s": min(secs)}))


if __name__ == "__main__":
    main()

"""What splitting a Kineto load into ranges for several processes costs, in one process.

    python bench/kineto_split_cost.py [FILE] [--runs 3]

A parallel load (importers/kineto_parallel) gives each byte range its own Builder, has the
worker write each range's columns into a memory file, and merges every range into the
parent's Builder. All of it is work a one-process load does not do. Here each way runs in
this process alone, so the host's two-process slowdown is not in the figures:
all ranges into one Builder (the one-process load), one Builder per range, the same plus
the memory-file writes, then the parent's receive and merge. FILE defaults to the
reference trace (bench/bench_load_kineto.py makes it).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from tracelint import shared_result
from tracelint.importers import kineto_parallel as kp
from tracelint.importers import kineto_ranges as kr
from tracelint.importers.kineto_columns import Builder

REF = Path(__file__).resolve().parent / "out" / "big.json"


def _timed(fn) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def one_round(path: Path, ranges: list) -> dict[str, float]:
    """Seconds of each way over every range of the file."""
    out = {}
    out["one Builder"], _ = _timed(lambda: kr.decode_in_ranges(
        path, ranges, Builder(), lambda *a: None))
    out["a Builder per range"], _ = _timed(lambda: [kp._decode_one(path, r) for r in ranges])
    fd = shared_result.open_file()
    try:
        put = shared_result.Writer(fd).put
        out["... and memory-file writes"], sent = _timed(
            lambda: {i: put(kp._decode_one(path, r)) for i, r in enumerate(ranges)})
        out["receive"], got = _timed(lambda: shared_result.receive_each(sent, fd))
        out["merge"], _ = _timed(lambda: kp._merge_all(Builder(), [got[i] for i in
                                                                  range(len(ranges))]))
    finally:
        shared_result.close(fd)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", nargs="?", default=str(REF))
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    path = Path(a.file)
    _, ranges = kr.plan(path, path.stat().st_size)
    rounds = [one_round(path, ranges) for _ in range(a.runs)]
    print(f"{path} ({path.stat().st_size / 1e6:.0f} MB, {len(ranges)} ranges), "
          f"{a.runs} rounds, seconds")
    for k in rounds[0]:
        print(f"  {k:28s} " + "  ".join(f"{r[k]:.3f}" for r in rounds))


if __name__ == "__main__":
    main()

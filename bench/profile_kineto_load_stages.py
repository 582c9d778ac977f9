"""Where one Kineto load spends its time, with 1 or more decoding processes.

    python bench/profile_kineto_load_stages.py FILE [WORKERS]

Prints a line per stage of `tracelint.load` on a large plain-JSON trace (the same columns as
bench/profile_lint_stages.py: wall since start, CPU, RSS): planning the byte ranges, decoding
(the parent's share when WORKERS > 1), waiting for the workers' columns, merging, and building
the tables. A forked worker prints its own lines (its decode, with its own CPU and RSS). The
serial stages bound what more processes can gain (docs/performance-history.md, "Eighth pass").
"""
from __future__ import annotations

import concurrent.futures as cf
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import profile_lint_stages as stages  # noqa: E402


def main(path: str, workers: int) -> None:
    from tracelint.heap import keep_freed_pages
    keep_freed_pages()
    import tracelint
    from tracelint import forking
    from tracelint.importers import kineto_columns as kc
    from tracelint.importers import kineto_json as kj
    from tracelint.importers import kineto_parallel as kp
    from tracelint.importers import kineto_ranges as kr

    for owner, name in ((kr, "plan"), (kr, "decode_in_ranges"), (kp, "_merge"),
                        (kc.Builder, "columns"), (kc.Builder, "fill_correlation_from_flows"),
                        (kj, "build_timeline"), (kj, "build_meta"), (kj, "attach_memory")):
        stages._wrap(owner, name, name)
    stages._wrap(cf.Future, "result", "wait for a worker's columns")
    forking.set_load_workers(workers)
    stages.T0 = time.perf_counter()
    stages.mark("begin")
    tracelint.load(path)
    stages.mark("end")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1)

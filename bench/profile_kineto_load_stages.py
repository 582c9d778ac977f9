"""Where one Kineto load spends its time, with 1 or more decoding processes.

    python bench/profile_kineto_load_stages.py FILE [WORKERS]

Prints a line per stage of `tracelint.load` on a large plain-JSON trace (the same columns as
bench/profile_lint_stages.py: wall since start, CPU, RSS): planning the byte ranges, decoding
(one process), importing the table builders while the workers decode (WORKERS > 1), waiting
for the workers' columns, merging, and building the tables. The serial stages bound what more
processes can gain (docs/performance-history.md, "Eighth pass").
"""
from __future__ import annotations

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
    from multiprocessing.connection import Connection

    from tracelint.importers import kineto_columns as kc
    from tracelint.importers import kineto_memory as km
    from tracelint.importers import kineto_meta as kmeta
    from tracelint.importers import kineto_parallel as kp
    from tracelint.importers import kineto_ranges as kr
    from tracelint.importers import kineto_tables as kt

    for owner, name in ((kr, "plan"), (kp, "_warm_imports"), (kp, "_merge_all"),
                        (kc.Builder, "columns"), (kc.Builder, "fill_correlation_from_flows"),
                        (kt, "build_timeline"), (kmeta, "build_meta"), (km, "attach")):
        stages._wrap(owner, name, name)
    if workers < 2:
        stages._wrap(kr, "decode_in_ranges", "decode_in_ranges")
    stages._wrap(Connection, "recv", "wait for a worker's columns")
    forking.set_load_workers(workers)
    stages.T0 = time.perf_counter()
    stages.mark("begin")
    tracelint.load(path)
    stages.mark("end")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1)

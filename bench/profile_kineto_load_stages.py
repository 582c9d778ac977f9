"""Where one Kineto load spends its wall time, with 1 or more decoding processes.

    python bench/profile_kineto_load_stages.py FILE [WORKERS]

Prints wall and CPU seconds at each stage of `tracelint.load` on a large plain-JSON trace:
planning the byte ranges, decoding (the parent's share when WORKERS > 1), waiting for the
workers' columns, merging, and building the tables. The serial stages bound what more
processes can gain (docs/performance.md, "Eighth pass").
"""
from __future__ import annotations

import concurrent.futures as cf
import resource
import sys
import time


def main(path: str, workers: int) -> None:
    from tracelint.heap import keep_freed_pages
    keep_freed_pages()
    import tracelint
    from tracelint.importers import kineto_columns as kc
    from tracelint.importers import kineto_json as kj
    from tracelint.importers import kineto_parallel as kp
    from tracelint.importers import kineto_ranges as kr

    t0, marks = [0.0], []

    def mark(what: str) -> None:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        marks.append((time.perf_counter() - t0[0], ru.ru_utime + ru.ru_stime, what))

    def timed(owner, name: str) -> None:
        fn = getattr(owner, name)

        def run(*a, **k):
            mark(f"start {name}")
            out = fn(*a, **k)
            mark(f"done {name}")
            return out
        setattr(owner, name, run)
    for owner, name in ((kr, "plan"), (kr, "decode_in_ranges"), (kp, "_merge"),
                        (kc.Builder, "columns"), (kc.Builder, "fill_correlation_from_flows"),
                        (kj, "build_timeline"), (kj, "build_meta"), (kj, "attach_memory")):
        timed(owner, name)
    result = cf.Future.result

    def waited(self, *a, **k):
        mark("wait for a worker")
        out = result(self, *a, **k)
        mark("got its columns")
        return out
    cf.Future.result = waited
    kp.set_workers(workers)
    t0[0] = time.perf_counter()
    mark("begin")
    tracelint.load(path)
    mark("end")
    for wall, cpu, what in marks:
        print(f"{wall:7.2f} s  cpu {cpu:6.2f}  {what}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1)

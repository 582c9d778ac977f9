"""A large rocprofv3 trace for the AMD importers' benchmarks: N kernel launches (each a HIP call
and a dispatch) in steps of 500 under roctx ranges, with a device sync per step, written as
`rocprofv3 --output-format json` (results.json, indented as rocprofv3 writes it) and as rocpd
SQLite beside it.

    python bench/make_big_rocprof_trace.py OUT.json [--kernels 100000]

100,000 kernels make a JSON file of about 95 MB and a rocpd file of about 11 MB
(docs/performance.md, thirtieth pass). Then, for example:

    python bench/bench_load_jax.py OUT.json --runs 3      # the load against json.load
"""
from __future__ import annotations

import argparse
from pathlib import Path

from tracelint.synth.builder import TraceBuilder
from tracelint.synth.rocprof_writer import write_rocpd, write_rocprof_json

STEP = 500


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--kernels", type=int, default=100_000)
    a = ap.parse_args()
    b = TraceBuilder("AMD Instinct MI300X")
    for step in range(-(-a.kernels // STEP)):
        with b.range(f"step {step}"):
            for i in range(min(STEP, a.kernels - step * STEP)):
                b.launch(f"gemm_kernel_{i % 7}", 3_000)
            b.sync("cudaDeviceSynchronize")
    write_rocprof_json(b, a.out)
    db = write_rocpd(b, a.out.with_suffix(".db"))
    for p in (a.out, db):
        print(f"{p}: {p.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()

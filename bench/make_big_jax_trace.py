"""A large jax.profiler trace for the JAX importer's benchmarks: the H200 jitted-step capture
(fixtures/captures/h200) repeated in time until it holds about N complete events.

    python bench/make_big_jax_trace.py OUT [--events 600000]

Each copy of the capture's complete ("X") events is shifted by the capture's span (plus 100 µs)
and its correlation ids by a million, so launches still link to their own copy's kernels; the
metadata events are kept once. Timestamps are written with 3 decimals (exact ns). 600,000
events make about 178 MB of JSON (docs/performance.md, twenty-ninth pass).
"""
from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "fixtures" / "captures" / "h200" / "jax_h200_step_jit.trace.json.gz"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--events", type=int, default=600_000)
    a = ap.parse_args()
    doc = json.loads(gzip.decompress(SOURCE.read_bytes()))
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    lo = min(float(e["ts"]) for e in xs)
    span = max(float(e["ts"]) + float(e.get("dur", 0)) for e in xs) - lo + 100
    out = [e for e in doc["traceEvents"] if e.get("ph") != "X"]
    for copy in range(a.events // len(xs) + 1):
        for e in xs:
            e2 = dict(e, ts=round(float(e["ts"]) + copy * span, 3))
            if "correlation_id" in e.get("args", {}):
                e2["args"] = dict(e["args"], correlation_id=int(e["args"]["correlation_id"])
                                  + copy * 1_000_000)
            out.append(e2)
    a.out.write_text(json.dumps(dict(doc, traceEvents=out)))
    print(f"{a.out}: {len(out)} events, {a.out.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()

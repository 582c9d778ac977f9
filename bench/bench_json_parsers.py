"""Compiled JSON parsers against tracelint's msgspec path, on the Kineto reference trace.

    python bench/bench_json_parsers.py [--python PY] [--runs 3]

Issue 16 asks whether a compiled columnar JSON path beats the msgspec route. Each candidate
runs in a fresh subprocess of PY (an interpreter with tracelint installed and, where wanted,
orjson, pysimdjson, polars, pyarrow and numba; a missing library is reported, not fatal), and
is timed in the same run as `json.load` of the same file (bench/out/big.json, built by
bench/bench_load_kineto.py). Candidates:
- tracelint.load: the whole load (tables, metadata, memory events, sorted), msgspec route;
- orjson.loads: the whole document as dicts, as json.load does, in C;
- simdjson: pysimdjson's parse (a compiled DOM), then one field (ts) of every event read
  from Python: the per-event access that any column still costs;
- polars / pyarrow: the events cut into NDJSON (msgspec), then read into columns;
- numba scan: bench/json_scan_prototype.py, the least a compiled columnar parser must do
  (10 fields of every event, names coded; no validation, no tables).
Reported: median call wall seconds (imports excluded, their time listed apart), CPU and peak
RSS, and wall against json.load.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out" / "big.json"

CHILD = r"""
import json, resource, sys, time
path, mode = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
t = time.perf_counter()
if mode == "tracelint":
    import tracelint
    import tracelint.importers.kineto_json   # pandas, numpy, msgspec: imports, not the call
elif mode == "orjson":
    import orjson
elif mode == "simdjson":
    import simdjson
elif mode in ("polars", "pyarrow"):
    import io, msgspec
    from tracelint.importers.kineto_events import Top
    import polars as pl
    if mode == "pyarrow":
        import pyarrow as pa, pyarrow.json as pj
elif mode == "numba":
    import json_scan_prototype
imports = time.perf_counter() - t
wall, cpu = time.perf_counter(), time.process_time()
note = ""
if mode == "json":
    with open(path, "rb") as fh:
        n = len(json.load(fh)["traceEvents"])
elif mode == "tracelint":
    n = sum(tracelint.load(path).counts().values())
    note = "rows in tables"
elif mode == "orjson":
    with open(path, "rb") as fh:
        n = len(orjson.loads(fh.read())["traceEvents"])
elif mode == "simdjson":
    with open(path, "rb") as fh:
        events = simdjson.Parser().parse(fh.read())["traceEvents"]
        n = len([e.get("ts") for e in events])
elif mode in ("polars", "pyarrow"):
    with open(path, "rb") as fh:
        raws = msgspec.json.decode(fh.read(), type=Top).traceEvents
    nd = b"\n".join(map(bytes, raws))
    del raws
    try:
        if mode == "polars":
            n = len(pl.read_ndjson(io.BytesIO(nd), infer_schema_length=None))
        else:
            n = pj.read_json(pa.BufferReader(nd)).num_rows
    except Exception as exc:
        n, note = -1, " ".join(str(exc).split())[:90]
elif mode == "numba":
    with open(path, "rb") as fh:
        n = json_scan_prototype.columns(fh.read())[0].shape[1]
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print(json.dumps({"wall": wall, "cpu": cpu, "imports": imports, "rows": n, "note": note,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
MODES = {"json": "json.load (reference)", "tracelint": "tracelint.load (msgspec route)",
         "orjson": "orjson.loads", "simdjson": "pysimdjson parse + ts of every event",
         "polars": "NDJSON cut + polars.read_ndjson", "pyarrow": "NDJSON cut + pyarrow.json",
         "numba": "numba scan prototype (10 fields, no tables)"}


def measure(python: str, mode: str) -> dict:
    res = subprocess.run([python, "-c", CHILD, str(OUT), mode, str(REPO / "bench")],
                         capture_output=True, text=True, cwd=REPO)
    if res.returncode:
        last = (res.stderr.strip().splitlines() or ["failed"])[-1]
        return {"error": last[:120]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable, help="interpreter with the libraries")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    if not OUT.exists():
        raise SystemExit(f"{OUT} missing: run bench/bench_load_kineto.py first")
    if "numba" in MODES:                     # compile (or load) the scan before timing it
        measure(a.python, "numba")
    load_before = os.getloadavg()[0]
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    for i in range(a.runs):
        for mode in MODES:                   # alternating: machine load hits all alike
            runs[mode].append(measure(a.python, mode))
            print(f"run {i + 1} {mode}: {runs[mode][-1]}", flush=True)
    ok = {m: [r for r in rs if "error" not in r and r["rows"] >= 0] for m, rs in runs.items()}
    ref = statistics.median(r["wall"] for r in ok["json"])
    print(f"\nfile: {OUT.relative_to(REPO)} ({OUT.stat().st_size / 1e6:.0f} MB); median of "
          f"{a.runs} alternating runs; 1-min load average before/after: {load_before:.2f}/"
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; {time.strftime('%H:%M')}\n")
    print("| parser | call wall s (median) | all runs | CPU s | imports s | peak RSS MiB "
          "| wall vs json.load |")
    print("|---|---|---|---|---|---|---|")
    for mode, label in MODES.items():
        if not ok[mode]:
            why = runs[mode][-1].get("error") or runs[mode][-1].get("note")
            print(f"| {label} | — | — | — | — | — | fails: {why} |")
            continue
        med = {k: statistics.median(r[k] for r in ok[mode]) for k in ("wall", "cpu", "imports")}
        rss = max(r["rss_mb"] for r in ok[mode])
        walls = ", ".join(f"{r['wall']:.2f}" for r in ok[mode])
        print(f"| {label} | {med['wall']:.2f} | {walls}"
              f" | {med['cpu']:.2f} | {med['imports']:.2f} | {rss:.0f} | {med['wall'] / ref:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

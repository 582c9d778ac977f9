"""`tracelint lint` of the reference trace in the forms users keep it, each against the plain
file in the same run: gzip (PyTorch's `use_gzip=True`, HTA's samples) and written on one line
(a trace loaded and dumped again by a script).

    python bench/bench_trace_forms.py [--runs 3]
    python bench/bench_trace_forms.py --real [--runs 3]

--real: instead of the reference, every shared real gzip Kineto trace of at least
kineto_ranges.STREAM_MIN of text (the size from which both forms are read by byte range),
each against its own text decompressed into a temporary plain file.

Each form is made once from bench/out/big.json (../shared/bench/make_big_trace.py ...
--copies 6) into bench/out/: big.json.gz (gzip level 6, Python's default) and
big_one_line.json (json.dumps of the loaded trace). Runs alternate plain and the form; each is a
fresh `tracelint lint FILE -f json -o OUT` process. Reported per form: medians of wall, CPU
(user + sys) and peak RSS, and their ratios to the plain file's. What a form should cost:
the plain file's peak, and its CPU plus, for gzip, the decompression. Also checked: each form's
report equals the plain file's but for the source path.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from lint_process import lint_process  # noqa: E402

OUT = REPO / "bench" / "out"
PLAIN = OUT / "big.json"


def make_forms() -> dict[str, Path]:
    forms = {"gzip": OUT / "big.json.gz", "one line": OUT / "big_one_line.json"}
    if not forms["gzip"].exists():
        with open(PLAIN, "rb") as src, gzip.open(forms["gzip"], "wb", compresslevel=6) as out:
            while block := src.read(1 << 24):
                out.write(block)
    if not forms["one line"].exists():
        forms["one line"].write_text(json.dumps(json.loads(PLAIN.read_bytes())))
    return forms


def lint(path: Path, out: Path) -> dict:
    return lint_process([str(path), "-f", "json", "-o", str(out), "--fail-on", "never"],
                        peak=True)


def _report(path: Path) -> dict:
    d = json.loads(path.read_text())
    source = d.get("source")
    for k in ("timing_s", "source"):
        d.pop(k, None)
    for f in d.get("findings", []):      # the partial-scan finding names the file
        if (f.get("where") or {}).get("file") == source:   # a finding in the trace file itself
            f["where"].pop("file")
            f.pop("fingerprint", None)
        if f.get("message", "").startswith("Secret scan limited to the trace's metadata"):
            for k in ("message", "where", "metrics", "evidence", "fingerprint"):
                f.pop(k, None)
    return d


def compare(plain: Path, form: Path, name: str, runs: int, tmp: Path) -> dict:
    """Lint of `form` against lint of `plain` (the same trace), alternating, in one run."""
    got = {"plain": [], name: []}
    for i in range(runs):
        for which in (("plain", name) if i % 2 == 0 else (name, "plain")):
            got[which].append(lint(plain if which == "plain" else form, tmp / f"{which}.json"))
    med = {w: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for w, rs in got.items()}
    return {"file_mb": round(form.stat().st_size / 1e6, 1), "median": med,
            "ratio_to_plain": {k: round(med[name][k] / med["plain"][k], 3) for k in med[name]},
            "report_same_as_plain": _report(tmp / "plain.json") == _report(tmp / f"{name}.json")}


def real_gzip_traces() -> list[Path]:
    """The shared gzip Kineto traces whose text the byte-range path reads (size hint)."""
    from tracelint.importers.kineto_ranges import STREAM_MIN
    from tracelint.io import json_size
    shared = REPO.parent / "shared" / "traces" / "torch"
    return sorted((p for p in shared.glob("*.json.gz") if json_size(p) >= STREAM_MIN),
                  key=json_size)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--real", action="store_true", help="the shared real gzip traces")
    a = ap.parse_args()
    env_note = {"loadavg_1min_before": round(os.getloadavg()[0], 2)}
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if a.real:
            for gz in real_gzip_traces():
                plain = tmp / gz.name.removesuffix(".gz")
                plain.write_bytes(gzip.decompress(gz.read_bytes()))
                result[gz.name] = compare(plain, gz, "gzip", a.runs, tmp)
                plain.unlink()
                print(json.dumps({gz.name: result[gz.name]}), file=sys.stderr, flush=True)
        else:
            if not PLAIN.exists():
                raise SystemExit(f"{PLAIN} missing: see docs/performance.md for how to make it")
            for name, path in make_forms().items():
                result[name] = compare(PLAIN, path, name, a.runs, tmp)
                print(json.dumps({name: result[name]}), file=sys.stderr, flush=True)
    env_note["loadavg_1min_after"] = round(os.getloadavg()[0], 2)
    head = {} if a.real else {"plain_mb": round(PLAIN.stat().st_size / 1e6, 1)}
    print(json.dumps({**head, **env_note, "forms": result}, indent=1))
    if a.real:
        print("\n| trace | gzip MB | wall gzip/plain | CPU gzip/plain | peak gzip/plain | same report |"
              "\n|---|---|---|---|---|---|")
        for k, r in result.items():
            q = r["ratio_to_plain"]
            print(f"| {k} | {r['file_mb']} | {q['wall_s']:.2f}x | {q['cpu_s']:.2f}x | "
                  f"{q['peak_mib']:.2f}x | {r['report_same_as_plain']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

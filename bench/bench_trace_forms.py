"""`tracelint lint` of the reference trace in the forms users keep it, each against the plain
file in the same run: gzip (PyTorch's `use_gzip=True`, HTA's samples) and written on one line
(a trace loaded and dumped again by a script).

    python bench/bench_trace_forms.py [--runs 3]

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
    for k in ("timing_s", "source"):
        d.pop(k, None)
    for f in d.get("findings", []):      # the partial-scan finding names the file
        if f.get("message", "").startswith("Secret scan limited to the trace's metadata"):
            for k in ("message", "where", "metrics", "evidence", "fingerprint"):
                f.pop(k, None)
    return d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    if not PLAIN.exists():
        raise SystemExit(f"{PLAIN} missing: see docs/performance.md for how to make it")
    forms = make_forms()
    env_note = {"loadavg_1min_before": round(os.getloadavg()[0], 2)}
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in forms.items():
            runs = {"plain": [], name: []}
            for i in range(a.runs):
                order = ("plain", name) if i % 2 == 0 else (name, "plain")
                for which in order:
                    src = PLAIN if which == "plain" else path
                    runs[which].append(lint(src, Path(tmp) / f"{which}.json"))
            med = {w: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
                   for w, rs in runs.items()}
            same = _report(Path(tmp) / "plain.json") == _report(Path(tmp) / f"{name}.json")
            result[name] = {"file_mb": round(path.stat().st_size / 1e6, 1), "median": med,
                            "ratio_to_plain": {k: round(med[name][k] / med["plain"][k], 3)
                                               for k in med[name]},
                            "report_same_as_plain": same}
            print(json.dumps({name: result[name]}), file=sys.stderr, flush=True)
    env_note["loadavg_1min_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps({"plain_mb": round(PLAIN.stat().st_size / 1e6, 1), **env_note,
                      "forms": result}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Projected saving vs the real difference, for the examples/ pairs captured on the CPU (#13).

    .venv/bin/python scripts/example_twin_savings.py [--steps 6] [--keep DIR] [--only FILE ...]

Captures each anti-pattern and its fixed twin with `tracelint capture --steps N` (one intra-op
thread, as tests/test_examples.py), reads the ProfilerStep spans from the raw trace JSON
(`json.load`, not through tracelint), and lints the anti-pattern's capture. Per pair it prints
the median step span of each capture (with min-max over steps), the real difference per step
(median anti-pattern - median twin), every finding on the anti-pattern's capture with its
`saving_ns` per iteration or its `saving_note`, and whether the projection can be checked
against the real difference (within +-20 %). Markdown (docs/whatif.md). Takes ~3 minutes.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAIRS = [("item_in_loop.py", "item_fixed.py"), ("tiny_ops_loop.py", "tiny_ops_fused.py"),
         ("pageable_copy.py", "pinned_copy.py"), ("dequant_linear.py", "dequant_fused.py"),
         ("transposes.py", "transposes_fixed.py"), ("optimizer_per_param.py", "optimizer_fused.py"),
         ("dataloader_main.py", "dataloader_workers.py")]
#: The tolerance of issue #13: a projected saving within +-20 % of the real difference.
TOLERANCE = 0.20


def capture(example: str, out: Path, steps: int) -> dict:
    """Capture one example; return its lint report (JSON)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    exe = Path(sys.executable).with_name("tracelint")
    res = subprocess.run([str(exe), "capture", "-o", str(out), "--steps", str(steps), "--format",
                          "json", "--", sys.executable, str(REPO / "examples" / example)],
                         capture_output=True, text=True, env=env, cwd=REPO, check=False)
    if res.returncode not in (0, 1):
        raise SystemExit(f"capture of {example} failed: {res.stderr.strip().splitlines()[-1:]}")
    return json.loads(res.stdout[res.stdout.index("{"):])


def step_spans_us(trace: Path) -> list[float]:
    """ProfilerStep#N durations (µs) straight from the trace JSON, in step order."""
    doc = json.loads(trace.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    steps = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    return [float(e["dur"]) for e in sorted(steps, key=lambda e: e["ts"])]


def fmt_us(v: float) -> str:
    return f"{v / 1000:.2f} ms" if abs(v) >= 1000 else f"{v:.0f} µs"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6, help="iterations recorded per capture")
    ap.add_argument("--keep", help="write the captures here (default: a temporary folder)")
    ap.add_argument("--only", nargs="+", metavar="FILE",
                    help="only the pairs whose anti-pattern is one of these (optimizer_per_param.py ...)")
    args = ap.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="twins-"))
    print("| pair | steps | median step: anti-pattern (min-max) | twin (min-max) | real difference "
          "per step | findings on the anti-pattern's CPU capture | projected saving per step | "
          "checkable |\n|---|---|---|---|---|---|---|---|")
    for anti, fixed in PAIRS:
        if args.only and anti not in args.only:
            continue
        report = capture(anti, root / Path(anti).stem, args.steps)
        capture(fixed, root / Path(fixed).stem, args.steps)
        sa = step_spans_us(root / Path(anti).stem / "trace.json")
        sf = step_spans_us(root / Path(fixed).stem / "trace.json")
        ma, mf = statistics.median(sa), statistics.median(sf)
        diff = ma - mf
        counts: dict[str, int] = {}
        saved: dict[str, str] = {}
        check: list[str] = []
        for f in report["findings"]:
            if f["rule"] in ("TL100", "TL101"):          # privacy findings: no fix to time
                continue
            counts[f["rule"]] = counts.get(f["rule"], 0) + 1
            if f["saving_ns"] is None:
                saved[f["rule"]] = f"none ({f['saving_note'].split(':')[0].split('.')[0]})"
                continue
            per_step = f["saving_ns"] / 1000 / max(len(sa), 1)
            saved[f["rule"]] = fmt_us(per_step)
            ok = diff and abs(per_step - diff) <= TOLERANCE * abs(diff)
            check.append(f"{f['rule']} {'within' if ok else 'NOT within'} ±{TOLERANCE:.0%}"
                         + (f" ({per_step / diff - 1:+.0%})" if diff else ""))
        found = ", ".join(r + (f" ×{n}" if n > 1 else "") for r, n in counts.items())
        if counts and not check:
            check = ["no: no finding gives a number"]
        print(f"| `{anti}` / `{fixed}` | {len(sa)} / {len(sf)} | {fmt_us(ma)} ({fmt_us(min(sa))}-"
              f"{fmt_us(max(sa))}) | {fmt_us(mf)} ({fmt_us(min(sf))}-{fmt_us(max(sf))}) | "
              f"{fmt_us(diff)} ({diff / mf:+.0%}) | {found or 'none'} | "
              f"{'; '.join(f'{r}: {v}' for r, v in saved.items()) or '–'} | "
              f"{'; '.join(check) or 'no: nothing fires'} |")

if __name__ == "__main__":
    main()

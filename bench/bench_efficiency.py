#!/usr/bin/env python3
"""Efficiency estimate overhead, as a ratio measured in one run: on the shared traces with op
shapes, load time vs the time of efficiency() (attribution, work models, roofline, MFU) on the
loaded trace (target: at most 50 % of the load time).

Each measurement is the median of N runs in this process after one warm-up.
Usage: .venv/bin/python bench/bench_efficiency.py [--runs 3]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench_lint import median_time      # same folder: the script's directory is on sys.path

REPO = Path(__file__).resolve().parents[1]
TRACES = ["tracelens_h100_owlv2_inference.json.gz", "kineto_tbplugin_resnet50_v100_2021-06.pt.trace.json.gz",
          "tracelens_mi300x_resnet_actckpt_rank0of8.json.gz"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    import tracelint
    from tracelint.efficiency.roofline import efficiency
    for name in TRACES:
        path = REPO.parent / "shared" / "traces" / "torch" / name
        if not path.exists():
            print(f"{name}: not present, skipped")
            continue
        tl = tracelint.load(path)                     # warm-up
        efficiency(tl)
        t_load = median_time(lambda: tracelint.load(path), args.runs)
        t_eff = median_time(lambda: efficiency(tl), args.runs)
        print(f"{name}: load {t_load:.2f} s, efficiency {t_eff:.2f} s = {t_eff / t_load:.0%} of load")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

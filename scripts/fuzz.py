"""The long fuzzing mode: `python scripts/fuzz.py --cases 2000 --seed 7` (tests/fuzz_lib.py).
Prints the outcome counts; exits 1 with the failing case's message on a broken contract."""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fuzz_lib import run  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cases", type=int, default=1000, help="cases per loader")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tracelint-fuzz-") as d:
        try:
            counts = run(Path(d), a.cases, seed=a.seed)
        except AssertionError as exc:
            print(f"FAIL (seed {a.seed}): {exc}")
            return 1
    print(f"{a.cases} case(s) per loader, seed {a.seed}, {time.perf_counter() - t0:.0f} s: {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

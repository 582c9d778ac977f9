"""Seeded, bounded mutation fuzzing of every input loader (issue 21): Kineto JSON, nsys SQLite,
the config loader and both baseline loaders (findings, performance). Each case must load or fail with a one-line
TracelintError, never another exception, never a change to the input (tests/fuzz_lib.py).
The longer mode: `python scripts/fuzz.py --cases 2000 --seed N`."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from fuzz_lib import run  # noqa: E402

CASES = 60          # per loader; sized to keep this file well under 2 minutes in CI


def test_fuzz_loaders(tmp_path):
    counts = run(tmp_path, CASES, seed=20261201)
    assert set(counts) == {"kineto", "nsys", "config", "baseline", "perf-baseline"}
    for kind, c in counts.items():
        assert sum(c.values()) == CASES, kind
    # the mutations exercise both outcomes (a fuzzer that only makes garbage tests little)
    assert counts["kineto"].get("ok", 0) and counts["kineto"].get("error", 0)
    assert counts["config"].get("error", 0)

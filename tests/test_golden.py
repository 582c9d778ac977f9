"""Golden findings for every shared trace: the findings (rule, severity, key numbers, where)
must equal the committed snapshot in tests/golden/. A deliberate change is reviewed as a diff
of the snapshot: regenerate with

    .venv/bin/python -m pytest -q tests/test_golden.py --update-golden

What was checked by hand per trace is in docs/golden-review.md."""
from __future__ import annotations

import pytest

import golden_snapshot as gs
from conftest import ALL_TRACES
from tracelint.api import lint
from tracelint.engine.config import Config

#: Performance rules only: the security rules flag host and user names that every real export
#: records (tests/test_secrets.py covers them).
CONFIG = Config(select=["ALL"], ignore=["security"])


@pytest.mark.parametrize("trace", ALL_TRACES, ids=[t.name for t in ALL_TRACES])
def test_golden_findings(trace, update_golden):
    got = gs.snapshot(lint(trace, CONFIG).findings)
    if update_golden:
        gs.write(trace, got)
        return
    want = gs.read(trace)
    assert want is not None, f"no snapshot for {trace.name}: run pytest tests/test_golden.py --update-golden"
    assert got == want, (f"findings on {trace.name} changed: review the diff of {gs.path_for(trace).name} "
                         "after pytest tests/test_golden.py --update-golden")

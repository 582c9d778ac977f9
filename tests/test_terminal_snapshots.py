"""Terminal output snapshots (wide and narrow) of three shared traces, reviewed for readability
and committed: a change to what a user reads shows up as a diff in review, not by accident.

Update after an intended change (then read the diff before committing):

    TRACELINT_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest -q tests/test_terminal_snapshots.py
"""
from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from conftest import SHARED

SNAPSHOTS = Path(__file__).parent / "snapshots"
TRACES = {
    "bert": SHARED / "traces" / "torch" / "tracelens_h100_bert_small_inference.json.gz",
    "event-sync": SHARED / "traces" / "torch" / "hta_event_sync_a100.json.gz",
    "vecadd-nsys": SHARED / "traces" / "nsys" / "nsys2022.4_gpu4-vecadd-4streams_t4.sqlite",
}
WIDTHS = {"wide": None, "narrow": 80}
UPDATE = os.environ.get("TRACELINT_UPDATE_SNAPSHOTS") == "1"


def render(trace: Path, width: int | None) -> str:
    from tracelint.api import lint
    from tracelint.reporters.terminal import NO_WRAP, render_terminal
    from tracelint.secrets import scrub_report
    report = lint(trace)
    report.source = trace.name            # not the machine's absolute path
    scrub_report(report)
    buf = io.StringIO()
    render_terminal(report, Console(file=buf, width=width or NO_WRAP, color_system=None,
                                    force_terminal=False))
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines()) + "\n"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", TRACES)
def test_terminal_snapshot(name, width):
    trace = TRACES[name]
    if not trace.exists():
        pytest.skip("shared traces not present")
    got = render(trace, WIDTHS[width])
    golden = SNAPSHOTS / f"{name}.{width}.txt"
    if UPDATE or not golden.exists():
        golden.write_text(got)
        if not UPDATE:
            pytest.fail(f"{golden.name} was missing: written, review and commit it")
    assert got == golden.read_text(), (
        f"terminal output of {name} ({width}) changed; if intended, rerun with "
        "TRACELINT_UPDATE_SNAPSHOTS=1 and review the diff")
    lines = got.splitlines()
    if WIDTHS[width]:
        assert max(map(len, lines)) <= WIDTHS[width]
    else:                                  # wide: one finding message is one line
        assert all(not ln.startswith("    ") or ln.strip() for ln in lines)

"""A projected saving says what its replay leaves out, and a finding without one says why, in
the terminal and in Markdown as in JSON. Real trace: the saxpy MPI program's pageable uploads
(TL032) and unoverlapped copies (TL004), whose replays free the host and overlap the copies
but cannot make the copies themselves faster."""
from __future__ import annotations

from conftest import TRACES, trace_or_skip
from tracelint.api import lint
from tracelint.engine.config import Config
from tracelint.reporters import render

SAXPY = TRACES / "nsys" / "nsys2022.2_pipit-saxpy-mpi-cuda_a100.sqlite"


def test_pageable_upload_saving_is_called_a_lower_bound(capsys):
    report = lint(trace_or_skip(SAXPY), Config(select=["TL032", "TL004"]))
    moved = [f for f in report.findings if f.rule in ("TL032", "TL004")]
    assert {f.rule for f in moved} == {"TL032", "TL004"}
    for f in moved:            # both replays keep the copies' traced (pageable) durations
        assert f.metrics["pageable_copies"].value > 0
        assert f.saving_ns is not None and f.saving_note.startswith("a lower bound")
    md = render(report, "markdown")
    assert "Projected saving" in md and "a lower bound" in md
    render(report, "terminal")
    assert "saving: a lower bound" in capsys.readouterr().out

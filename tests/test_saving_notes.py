"""A projected saving says what its replay leaves out, and a finding without one says why, in
the terminal and in Markdown as in JSON. Real trace: the saxpy MPI program's pageable uploads
(TL032), whose replay frees the host but cannot make the copies themselves faster."""
from __future__ import annotations

from conftest import TRACES, trace_or_skip
from tracelint.api import lint
from tracelint.engine.config import Config
from tracelint.reporters import render

SAXPY = TRACES / "nsys" / "nsys2022.2_pipit-saxpy-mpi-cuda_a100.sqlite"


def test_pageable_upload_saving_is_called_a_lower_bound(capsys):
    report = lint(trace_or_skip(SAXPY), Config(select=["TL032", "TL011"]))
    (f,) = [f for f in report.findings if f.rule == "TL032"]
    assert f.metrics["pageable_copies"].value > 0
    assert f.saving_ns is not None and f.saving_note.startswith("a lower bound")
    md = render(report, "markdown")
    assert "Projected saving" in md and "a lower bound" in md
    render(report, "terminal")
    assert "saving: a lower bound" in capsys.readouterr().out

"""A projected saving says what its replay leaves out, and a finding without one says why, in
the terminal and in Markdown as in JSON. Real trace: the saxpy MPI program's pageable uploads
(TL032) and unoverlapped copies (TL004), whose replays free the host and overlap the copies
but cannot make the copies themselves faster: the saving is a lower bound, and where the GPU
names its host link, a second replay with the copies at the link's peak gives the upper end
(whatif/pinned.py)."""
from __future__ import annotations

import dataclasses
import re

import numpy as np

import tracelint
from conftest import TRACES, trace_or_skip
from tracelint.api import lint
from tracelint.engine.config import Config
from tracelint.reporters import render
from tracelint.whatif import pinned
from tracelint.whatif.analysis import WhatIf
from tracelint.whatif.edits import CopyAtRate

SAXPY = TRACES / "nsys" / "nsys2022.2_pipit-saxpy-mpi-cuda_a100.sqlite"


def test_pageable_upload_saving_is_a_range(capsys):
    report = lint(trace_or_skip(SAXPY), Config(select=["TL032", "TL004"]))
    moved = [f for f in report.findings if f.rule in ("TL032", "TL004")]
    assert {f.rule for f in moved} == {"TL032", "TL004"}
    for f in moved:            # both replays keep the copies' traced (pageable) durations
        assert f.metrics["pageable_copies"].value > 0
        assert f.saving_ns is not None and "a lower bound" in f.saving_note
        # the A100's name implies PCIe Gen4 x16 (25 GB/s); the copies ran slower than that
        assert f.saving_upper_ns is not None and f.saving_upper_ns > f.saving_ns
        assert f.saving_note.startswith("up to ") and "25 GB/s PCIe Gen4 x16" in f.saving_note
        assert f.to_dict()["saving_upper_ns"] == f.saving_upper_ns
    md = render(report, "markdown")
    assert "Projected saving" in md and "a lower bound" in md and ") (up to " in md
    render(report, "terminal")
    out = capsys.readouterr().out
    assert "saving: up to " in out
    assert re.search(r"projected saving \S+ \S+ \([^)]*\) up to \S+ \S+ · time touched", out), out
    assert " – " in render(report, "html")


def test_without_a_known_link_the_saving_stays_a_lower_bound():
    """A trace that does not name its GPU: no link rate is guessed, so no upper end."""
    tl = tracelint.load(trace_or_skip(SAXPY))
    tl.meta.devices = [dataclasses.replace(d, name=None) for d in tl.meta.devices]
    rows = np.arange(len(tl.copies))
    assert pinned.at_link_rate(tl, 0, rows) is None
    assert pinned.at_link_rate(tl, 0, rows, configured_gbps=25.0) is not None
    assert pinned.at_link_rate(tl, 0, rows, configured_gbps=0.5) is None   # slower than traced


def test_copies_at_the_link_rate_take_bytes_over_rate_and_never_longer():
    tl = tracelint.load(trace_or_skip(SAXPY))
    w = WhatIf(tl)
    c = tl.copies
    rows = np.flatnonzero(c["bytes"].to_numpy() > 0)[:4]
    nbytes = c["bytes"].to_numpy()[rows]
    traced = (c["end"] - c["start"]).to_numpy()[rows]
    for gbps, expect in ((1e6, np.maximum(np.ceil(nbytes / 1e6), 1)), (1e-6, traced)):
        out = w.run([CopyAtRate(tuple(rows), tuple(nbytes), gbps)])
        ops = np.flatnonzero((w.graph.g_table == "copies") & np.isin(w.graph.g_row, rows))
        got = dict(zip(w.graph.g_row[ops], (out.g_end - out.g_start)[ops]))
        assert [got[r] for r in rows] == list(expect.astype(np.int64))


def test_async_copies_from_pinned_memory_return_at_once():
    """TL004's fix: the moved copies' launching calls cost at most a launch; from pageable
    memory they lasted as long as the driver's staging, kept as host work before."""
    from tracelint.whatif.edits import AsyncCopies, Ops
    tl = tracelint.load(trace_or_skip(SAXPY))
    w = WhatIf(tl)
    g = w.graph
    h2d = (g.g_table == "copies") & (np.asarray(g.g_kind) == "H2D")
    calls = g.g_launch[h2d][g.g_launch[h2d] >= 0]
    assert (g.h_dur[calls] > 5_000).any()
    edit = AsyncCopies(ops=Ops(kinds=("H2D",)), call_cost_ns=5_000)
    out = w.run([edit])
    assert ((out.h_end - out.h_start)[calls] <= 5_000).all()
    assert w.saving([edit])[0] > w.saving([AsyncCopies(ops=Ops(kinds=("H2D",)))])[0]


def test_where_faster_copies_save_no_more_the_saving_is_no_bound():
    """OWLv2 inference on an H100 (PCIe Gen5 assumed): with the host no longer waiting, the
    pageable uploads are off the critical path, so the replay at the link's peak saves no
    more. The note says so instead of calling the saving a lower bound, and no range."""
    report = lint(trace_or_skip(TRACES / "torch" / "tracelens_h100_owlv2_inference.json.gz"),
                  Config(select=["TL032"]))
    (f,) = report.findings
    assert f.saving_ns > 0 and f.saving_upper_ns is None
    assert f.saving_note.startswith("replayed also with the pageable copies pinned and at the 50 GB/s")
    assert "no more" in f.saving_note and "lower bound" not in f.saving_note

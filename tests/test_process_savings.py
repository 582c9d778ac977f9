"""A trace of several processes driving GPUs (two replicas under one nsys session): each
finding's saving is measured on its own process's run, and fixes replayed together compose
(a second copy edit used to put the first GPU's moved copies back in their old stream order)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import BUNDLED

import tracelint
from tracelint.api import available_rules, lint
from tracelint.engine.config import Config
from tracelint.engine.context import Context
from tracelint.whatif.analysis import WhatIf
from tracelint.whatif.edits import AsyncCopies, Ops

TWO_GPUS = BUNDLED / "nsys" / "nsys2026.2_nsys-ai-pytorch-2gpu-1s-slice_h100.sqlite"
ONE_GPU = BUNDLED / "nsys" / "nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite"


def _uploads(device: int) -> AsyncCopies:
    return AsyncCopies(ops=Ops(devices=(device,), kinds=("H2D",)))


@pytest.fixture(scope="module")
def two_gpus():
    tl = tracelint.load(TWO_GPUS)
    return tl, WhatIf(tl)


def test_copy_fixes_on_two_gpus_compose(two_gpus):
    """Together, each process saves what its own fix saves alone: the processes share nothing."""
    _, w = two_gpus
    _, _, alone0 = w.saving([_uploads(0)])
    _, _, alone1 = w.saving([_uploads(1)])
    total, _, both = w.saving([_uploads(0), _uploads(1)])
    p0, p1 = w.process_of(None, 0), w.process_of(None, 1)
    assert p0 != p1 and alone0[p0] > 1_000_000 and alone1[p1] > 1_000_000
    assert both[p0] == alone0[p0] and both[p1] == alone1[p1]
    assert 1_000_000 < total <= max(both.values())   # the trace's end moves once both do


def test_each_finding_saving_is_its_own_process(two_gpus):
    """The trace ends with one process: a fix on the other moves the trace's end by nothing,
    yet shortens its own run; each TL004 finding reports its own process's saving (the
    replay of the rule's own fix), and says so."""
    tl, w = two_gpus
    config = Config()
    rules = {r.id: r(config.options_for(r)) for r in available_rules(config)}
    ctx = Context(tl, config)
    found = [f for f in lint(TWO_GPUS).findings if f.rule == "TL004"]
    assert len(found) == 2
    for f in found:
        pid = w.process_of(f.where.pid, f.where.device)
        trace, _, own = w.saving(rules["TL004"].fix_edits(f, ctx)[0])
        assert f.saving_ns == own[pid] > trace
        assert f"process {pid}" in f.saving_note
    assert min(w.saving(rules["TL004"].fix_edits(f, ctx)[0])[0] for f in found) < 1_000_000


def test_one_process_keeps_the_trace_saving():
    tl = tracelint.load(ONE_GPU)
    w = WhatIf(tl)
    assert w.process_of(None, 0) is None
    report = lint(ONE_GPU)
    assert all("process" not in (f.saving_note or "") for f in report.findings)


def test_a_fix_that_moves_several_processes_keeps_the_trace_saving(two_gpus):
    """A finding named after one process whose fix changes both (a call site grouped over
    processes) is measured on the trace, not on its representative's process."""
    from tracelint.engine.finding import Finding, Severity, Where
    from tracelint.engine.savings import _on_own_process
    _, w = two_gpus
    both = [_uploads(0), _uploads(1)]
    trace, _, own = w.saving(both)
    f = Finding(rule="TL004", slug="x", title="x", severity=Severity.WARNING, message="x",
                impact_ns=0, span_ns=1, where=Where(pid=w.process_of(None, 0)), evidence={})
    assert _on_own_process(w, f, trace, own) == (trace, "")
    alone, _, own0 = w.saving(both[:1])
    assert _on_own_process(w, f, alone, own0)[0] == own0[f.where.pid] > alone


def test_processes_that_run_collectives_keep_the_trace_saving(two_gpus):
    """Ranks that run collectives wait for each other in the real run, which one trace's graph
    does not model: no finding is measured on its own process there."""
    tl, w = two_gpus
    k = tl.kernels.copy()
    names = k["name"].cat.add_categories(["ncclKernel_AllReduce_RING_LL_Sum_float"])
    first = [int(np.flatnonzero(k["device"].to_numpy() == d)[0]) for d in (0, 1)]
    names[first] = "ncclKernel_AllReduce_RING_LL_Sum_float"
    k["name"] = names
    coupled = WhatIf(dataclasses.replace(tl, kernels=k))
    assert w.process_of(None, 0) is not None
    assert coupled.process_of(None, 0) is None and coupled.process_of(None, 1) is None
    assert coupled.saving([_uploads(0)])[2] == {}

"""tracelint.collector: no collections while a command starts or an importer runs; what the
start made is frozen when the first trace loads, and nothing a load makes ever is."""
from __future__ import annotations

import gc
import subprocess
import sys
import weakref

import pytest

from conftest import REPO
from tracelint import collector

EXAMPLE = REPO / "fixtures" / "examples" / "training_step_antipatterns.json.gz"


def test_paused_restores_the_collector_as_it_was():
    assert gc.isenabled()
    with collector.paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector.paused():
            pass
        assert not gc.isenabled()          # a caller's own pause is kept
    finally:
        gc.enable()
    with pytest.raises(ValueError), collector.paused():
        raise ValueError
    assert gc.isenabled()


def test_a_load_runs_without_collections(monkeypatch):
    """The importer's millions of acyclic objects trigger no collection while it runs; the one
    they are due comes after."""
    import tracelint
    from tracelint import importers
    inside, during = [False], []
    load = importers._load

    def watched(*args):
        inside[0] = True
        try:
            return load(*args)
        finally:
            inside[0] = False

    def record(phase, info):
        during.append(inside[0])
    monkeypatch.setattr(importers, "_load", watched)
    tracelint.load(EXAMPLE)              # the importers' modules imported
    gc.callbacks.append(record)
    try:
        tl = tracelint.load(EXAMPLE)
    finally:
        gc.callbacks.remove(record)
    assert len(tl.kernels) and gc.isenabled()
    assert True not in during


# The command's entry point, watched: collections by phase (before the first load, during it,
# after it), the frozen count when the load starts, and whether a cycle that a load leaves
# behind is collected afterwards.
COMMAND = r"""
import gc, sys, weakref
from tracelint.cli import app
phase = ["start"]
seen = {"start": 0, "load": 0, "after": 0}
state = {}
class Node:
    pass
real_main = app.main
def main():                                  # runs inside app.run(), after the pause began
    gc.callbacks.append(lambda p, info: p == "start" and seen.__setitem__(phase[0], seen[phase[0]] + 1))
    from tracelint import importers          # pandas, numpy...: imported during the pause
    load = importers._load
    def watched(*args):
        state["frozen_at_load"] = gc.get_freeze_count()
        phase[0] = "load"
        a, b = Node(), Node()
        a.b, b.a = b, a                      # cyclic garbage left by the load
        state["cycle"] = weakref.ref(a)
        try:
            return load(*args)
        finally:
            phase[0] = "after"
    importers._load = watched
    try:
        real_main(sys.argv[1:])
    finally:
        gc.collect()
        print(seen["start"], seen["load"], state.get("frozen_at_load", -1),
              state["cycle"]() is None if "cycle" in state else None, gc.isenabled())
app.main = main
app.run()
"""


def test_the_command_starts_without_collections_and_collects_after(tmp_path):
    out = tmp_path / "r.json"
    res = subprocess.run([sys.executable, "-c", COMMAND, "lint", str(EXAMPLE), "-f", "json",
                          "-o", str(out), "--fail-on", "never"], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    start, during_load, frozen, cycle_freed, enabled = res.stdout.split()
    assert int(start) == 0                   # ~200 collections here before this module
    assert int(during_load) == 0
    assert int(frozen) > 10_000              # the start's objects: out of the collector's reach
    assert cycle_freed == "True"             # a load's cyclic garbage is not frozen
    assert enabled == "True"
    assert out.stat().st_size > 0


def test_the_start_pause_ends_once_and_only_when_taken(monkeypatch):
    monkeypatch.setattr(collector, "_startup_pause", False)
    collector.end_startup_pause()            # no pause was taken: nothing changes
    assert gc.isenabled() and gc.get_freeze_count() == 0
    collector.pause_for_startup()
    try:
        assert not gc.isenabled()
        kept = [object() for _ in range(10)]
        collector.end_startup_pause()
        assert gc.isenabled() and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.enable()
    del kept
    node = type("Node", (), {})
    a, b = node(), node()
    a.b, b.a = b, a
    ref = weakref.ref(a)
    del a, b
    collector.end_startup_pause()            # a second end: no freeze of the cycle above
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert ref() is None

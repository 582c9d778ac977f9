"""When the cyclic garbage collector runs: not while a command starts, nor while an importer
runs; as usual otherwise.

Why:
- A command imports about 760 modules before its first trace (pandas, numpy, the rules): about
  a million objects that live as long as the process and form no garbage. Collections
  triggered while they are made walk them again and again and free nothing: 190-230
  collections, 55-85 ms of CPU in a lint, 7 % of a small export's. The command's entry point
  pauses the collector from its start (`pause_for_startup`); the first trace load, or the first
  workers' fork, ends the pause and freezes what exists by then out of the collector's reach
  (`gc.freeze`), so that later full collections skip it too (until a parallel load's
  `forking.frozen_heap` unfreezes the whole heap after its workers). Nothing a load makes is
  frozen.
- An importer makes millions of short-lived objects (decoded events, per-chunk lists) that
  form no reference cycles. Their allocation triggers collections that walk the whole heap
  (numpy, pandas, the rules) and free nothing: 320 collections (0.05 s) in a load of the
  287 MB Kineto reference, 175-310 (0.07-0.16 s) in one of a 1 M-kernel nsys export, by
  `gc.callbacks` (`paused`).
"""
from __future__ import annotations

import contextlib
import gc

_startup_pause = False


def pause_for_startup() -> None:
    """The command's start: no collection until end_startup_pause()."""
    global _startup_pause
    gc.disable()
    _startup_pause = True


def end_startup_pause() -> None:
    """Freeze what the start made (modules, classes, options) and turn the collector back on;
    once, and only after pause_for_startup()."""
    global _startup_pause
    if _startup_pause:
        _startup_pause = False
        gc.freeze()
        gc.enable()


@contextlib.contextmanager
def paused():
    """The collector off for the block (as it was after); what the block leaves in cycles is
    collected by the next collection after it. Forked workers inherit the pause. Ends the
    start's pause first, so a block's garbage is never frozen."""
    end_startup_pause()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()

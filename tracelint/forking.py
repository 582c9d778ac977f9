"""Worker processes that fork from this one: which start method, and a heap the workers do not
copy. Used by the parallel Kineto load (importers/kineto_parallel) and `lint DIR --jobs N`
(ranks/job)."""
from __future__ import annotations

import contextlib
import gc
import os


def mp_context():
    """fork where the OS has it (Linux): workers start fast, inherit the imported modules, and a
    caller's script is never re-imported (spawn and forkserver re-run an unguarded script in
    every worker). Elsewhere spawn. TRACELINT_MP_START overrides."""
    import multiprocessing as mp
    method = os.environ.get("TRACELINT_MP_START") or (
        "fork" if "fork" in mp.get_all_start_methods() and os.name == "posix"
        and os.uname().sysname == "Linux" else "spawn")
    return mp.get_context(method)


@contextlib.contextmanager
def frozen_heap():
    """While workers fork and run: the parent's objects (pandas, numpy, the rules...) moved out
    of the collector's reach. A forked worker inherits them all, and each collection in it
    would walk them and write their reference counts, copying every page it touches. On the
    287 MB reference load with 2 processes: 0.2 s less CPU and 0.1 s less wall."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()

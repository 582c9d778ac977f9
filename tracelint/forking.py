"""Worker processes that fork from this one: how many, which start method, and a heap the
workers do not copy. Used by the parallel Kineto load (importers/kineto_parallel) and
`lint DIR --jobs N` (ranks/job)."""
from __future__ import annotations

import contextlib
import gc
import os

#: Processes that one large file's load may use (importers/kineto_parallel). A library call
#: loads in its own process unless it asks for more; the CLI uses the usable CPUs.
_LOAD_WORKERS = 1
#: At most this many by default: beyond it the serial part of a load (table building, about
#: 0.3 s of 2 s on the 287 MB reference) dominates, and each process holds its share.
MAX_DEFAULT_LOAD_WORKERS = 4


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask (a container's or taskset's limit)
    where the OS has one, else the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def set_load_workers(n: int | None) -> None:
    """Processes that decode one large file (1: this process only; None: the usable CPUs, at
    most MAX_DEFAULT_LOAD_WORKERS)."""
    global _LOAD_WORKERS
    _LOAD_WORKERS = max(1, int(n)) if n else min(usable_cpus(), MAX_DEFAULT_LOAD_WORKERS)


def load_workers() -> int:
    return _LOAD_WORKERS


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
    from .collector import end_startup_pause
    end_startup_pause()          # workers and parent collect as usual (tracelint.collector)
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()

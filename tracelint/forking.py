"""Worker processes that fork from this one: how many, which start method, a heap the
workers do not copy, work dealt item by item to this process and a worker, and one function's
answers computed beside this process. Used by the parallel Kineto load (importers/
kineto_parallel, and kineto_json for the tables after it), a large trace's rules and fixes'
replays (engine/rule_processes, engine/savings) and `lint DIR --jobs N` (ranks/job)."""
from __future__ import annotations

import contextlib
import gc
import os
from typing import Callable, Iterable

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


def taken(counter, n: int):
    """The items this process takes from a shared counter (multiprocessing Value), one at a
    time, until none of the n is left."""
    while True:
        with counter.get_lock():
            i = counter.value
            counter.value = i + 1
        if i >= n:
            return
        yield i


def deal_in_two(n: int, do: Callable[[int, bool], object],
                first: Callable[[], None] | None = None) -> list:
    """do(i, in_worker) for every i < n, by this process and one forked worker, each taking
    the next item from a shared counter: items cost what they cost (a rule on one trace, a
    replay with one fix), so neither process waits for the other while items are left. The
    results in item order. `first` runs here while the worker starts. The worker's results
    come back pickled; if it fails in any way (a crash, memory, a result that cannot be
    pickled), this process does the items it had taken, so an item's own error is raised here
    as in one process. Needs the fork start method (the worker shares this heap)."""
    mp = mp_context()
    counter = mp.Value("i", 0)
    receive, send = mp.Pipe(duplex=False)
    out: dict[int, object] = {}
    with frozen_heap():
        worker = mp.Process(target=_deal_worker, args=(n, do, counter, send), daemon=True)
        worker.start()
        send.close()
        try:
            if first is not None:
                first()
            for i in taken(counter, n):
                out[i] = do(i, False)
            out.update(receive.recv())
        except (EOFError, OSError):
            pass                      # the worker died: its items are done below
        finally:
            receive.close()
            if worker.is_alive() and len(out) < n:
                worker.terminate()    # this process failed: nothing more is wanted from it
            worker.join()
    for i in range(n):
        if i not in out:
            out[i] = do(i, False)
    return [out[i] for i in range(n)]


def _deal_worker(n: int, do, counter, send) -> None:
    try:
        send.send({i: do(i, True) for i in taken(counter, n)})
    except BaseException:    # noqa: BLE001 - the parent does whatever did not come back
        pass
    finally:
        send.close()


@contextlib.contextmanager
def beside(stages: Callable[[], Iterable]):
    """The answers stages() yields, computed by a forked worker while this process goes on:
    yields `answer(i)`, which waits for the i-th (each is sent as soon as it is made, so an
    early one is used while the worker makes the next). stages must be pure (what it yields is
    all that counts; the worker shares this heap copy-on-write); arrays come back through a
    memory file (tracelint.shared_result). If the worker fails in any way before the i-th
    answer, answer(i) runs stages() here, so its own error is raised here as in one process;
    without fork, stages() always runs here. Leaving the block ends a worker still running,
    without waiting for its exit: unmapping its copy of a large heap took 11-18 ms of the
    parallel load's serial tail (the 287 MB reference); multiprocessing reaps it when the next
    process starts, or at exit."""
    from . import shared_result
    here: list = []

    def from_here(i: int):
        if not here:
            here.append(list(stages()))
        return here[0][i]
    if mp_context().get_start_method() != "fork":
        yield from_here
        return
    mp = mp_context()
    fd = shared_result.open_file()
    receive, send = mp.Pipe(duplex=False)
    worker = mp.Process(target=_beside_worker, args=(stages, send, fd), daemon=True)
    worker.start()
    send.close()
    got: list = []
    ended: list = []

    def answer(i: int = 0):
        while len(got) <= i and not ended:
            try:
                got.append(shared_result.receive(receive.recv(), fd))
            except (EOFError, OSError):
                ended.append(True)    # the worker died, or stages failed there
        return got[i] if i < len(got) else from_here(i)
    try:
        yield answer
    finally:
        receive.close()
        if worker.is_alive():
            worker.terminate()    # not waited for (see the docstring)
        else:
            worker.join()
        shared_result.close(fd)


def _beside_worker(stages, send, fd) -> None:
    from .shared_result import Writer
    put = Writer(fd).put
    try:
        for one in stages():
            send.send(put(one))
    except BaseException:    # noqa: BLE001 - the parent runs stages itself
        pass
    finally:
        send.close()

"""forking.beside: the answers of a pure generator computed by a forked worker while this
process goes on, each used as soon as it is sent, with this process taking over whenever the
worker fails; and its use by a parallel Kineto load, which nests the ranges and finds the
memory events' owners in that worker (importers/kineto_json._ranges_beside)."""
from __future__ import annotations

import multiprocessing as mp
import os
import time

import numpy as np
import pytest

from tracelint import forking

pytestmark = pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="fork: Linux")


def _stages():
    yield os.getpid(), np.arange(100_000, dtype=np.int64) * 7
    yield os.getpid(), [1, 2, 3]


def test_the_answers_come_from_a_worker_in_order():
    with forking.beside(_stages) as answer:
        pid, arr = answer(0)
        assert answer(0)[0] == pid                        # asked twice: one answer
        assert answer(1) == (pid, [1, 2, 3])
    assert pid != os.getpid()
    assert np.array_equal(arr, np.arange(100_000) * 7)


def test_the_first_answer_is_used_while_the_worker_makes_the_next():
    parent = os.getpid()
    r, w = os.pipe()

    def slow_second():
        yield "first"
        os.read(r, 1)           # waits until the parent has the first answer
        yield "second"

    with forking.beside(slow_second) as answer:
        assert answer(0) == "first"
        os.write(w, b"x")
        assert answer(1) == "second"
    assert os.getpid() == parent
    os.close(r)
    os.close(w)


def test_a_failing_worker_leaves_the_stages_to_this_process_and_errors_are_raised_here():
    parent = os.getpid()

    def dies_after_the_first():
        yield "one"
        if os.getpid() != parent:
            os._exit(3)
        yield "two"

    with forking.beside(dies_after_the_first) as answer:
        assert answer(0) == "one" and answer(1) == "two"

    def fails():
        raise ValueError("bad input, in whichever process")
        yield

    with forking.beside(fails) as answer:
        with pytest.raises(ValueError, match="bad input"):
            answer(0)


def test_leaving_the_block_ends_a_worker_still_running():
    def sleeps():
        time.sleep(30)
        yield None

    started = time.perf_counter()
    with forking.beside(sleeps):
        pass
    assert time.perf_counter() - started < 10


def test_leaving_the_block_does_not_wait_for_the_worker_s_exit():
    """A worker still alive when the block ends is ended and left to multiprocessing to reap
    (its exit unmaps its copy of this heap: 11-18 ms of a parallel load's serial tail). Here
    it ignores SIGTERM and would take 20 s to exit: the block still ends at once."""
    import signal

    def lingers():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        yield os.getpid()
        time.sleep(20)

    started = time.perf_counter()
    with forking.beside(lingers) as answer:
        pid = answer(0)
    assert time.perf_counter() - started < 10
    assert pid != os.getpid() and pid in [p.pid for p in mp.active_children()]
    os.kill(pid, signal.SIGKILL)
    deadline = time.perf_counter() + 10
    while pid in [p.pid for p in mp.active_children()] and time.perf_counter() < deadline:
        time.sleep(0.01)                  # active_children() reaps it once it has exited
    assert pid not in [p.pid for p in mp.active_children()]


def test_without_fork_the_stages_run_here_once(monkeypatch):
    calls = []

    def counted():
        calls.append(os.getpid())
        yield len(calls)
        yield "next"

    monkeypatch.setattr(forking, "mp_context", lambda: mp.get_context("spawn"))
    with forking.beside(counted) as answer:
        assert answer(0) == 1 and answer(1) == "next" and answer(0) == 1
    assert calls == [os.getpid()]

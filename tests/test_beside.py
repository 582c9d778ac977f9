"""forking.beside: a pure function computed by a forked worker while this process goes on,
with this process taking over whenever the worker fails; and its use by a parallel Kineto
load, which nests the ranges in that worker (importers/kineto_json._ranges_beside)."""
from __future__ import annotations

import multiprocessing as mp
import os
import time

import numpy as np
import pytest

from tracelint import forking

pytestmark = pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="fork: Linux")


def _where_and_arrays():
    return os.getpid(), np.arange(100_000, dtype=np.int64) * 7


def test_the_result_comes_from_a_worker_and_equals_fn():
    with forking.beside(_where_and_arrays) as result:
        pid, arr = result()
        assert result()[0] == pid                         # asked twice: one answer
    assert pid != os.getpid()
    assert np.array_equal(arr, np.arange(100_000) * 7)


def test_a_failing_worker_leaves_fn_to_this_process_and_its_error_is_raised_here():
    parent = os.getpid()

    def dies_in_worker():
        if os.getpid() != parent:
            os._exit(3)
        return "here"

    with forking.beside(dies_in_worker) as result:
        assert result() == "here"

    def fails():
        raise ValueError("bad input, in whichever process")

    with forking.beside(fails) as result:
        with pytest.raises(ValueError, match="bad input"):
            result()


def test_leaving_the_block_ends_a_worker_still_running():
    started = time.perf_counter()
    with forking.beside(lambda: time.sleep(30)):
        pass
    assert time.perf_counter() - started < 10


def test_without_fork_fn_runs_here_once(monkeypatch):
    calls = []
    monkeypatch.setattr(forking, "mp_context", lambda: mp.get_context("spawn"))
    with forking.beside(lambda: calls.append(os.getpid()) or len(calls)) as result:
        assert result() == 1 and result() == 1
    assert calls == [os.getpid()]

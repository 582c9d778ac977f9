"""tracelint.shared_result: a forked worker's numpy arrays reach the parent through an
anonymous memory file, equal and writable, and everything else falls back to the pipe."""
from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from tracelint import shared_result

pytestmark = pytest.mark.skipif(not hasattr(os, "memfd_create") or
                                "fork" not in mp.get_all_start_methods(),
                                reason="memory files and fork: Linux")


def _result(n: int) -> dict:
    a = np.arange(n, dtype=np.int64) * 3
    return {"cols": {"start": a, "name": (a % 7).astype(np.int32), "strided": a[::2],
                     "grid": np.arange(3 * n).reshape(n, 3)[:, 1], "empty": a[:0],
                     "flag": a % 2 == 0},
            "lists": [("x", 1)], "n": n}


def _work(n: int, fd):
    return shared_result.send(_result(n), fd)


def _roundtrip(n: int, fd):
    with ProcessPoolExecutor(1, mp_context=mp.get_context("fork")) as pool:
        message = pool.submit(_work, n, fd).result()
        return message, shared_result.receive(message, fd)


@pytest.mark.parametrize("n", [0, 1, 100_000])
def test_arrays_come_back_equal_through_the_file(n):
    fd = shared_result.open_file()
    assert fd is not None
    try:
        message, got = _roundtrip(n, fd)
    finally:
        shared_result.close(fd)
    want = _result(n)
    strided = want["cols"]["strided"].nbytes + want["cols"]["grid"].nbytes   # pickled in-band
    assert isinstance(message, tuple) and len(message[1]) < strided + 4096   # no other rows
    assert got["lists"] == want["lists"] and got["n"] == n
    for k, v in want["cols"].items():
        assert got["cols"][k].dtype == v.dtype and np.array_equal(got["cols"][k], v), k
    got["cols"]["start"][:1] = -1          # writable: a private copy of the pages
    assert n == 0 or got["cols"]["start"][0] == -1


def test_arrays_outlive_the_descriptor():
    fd = shared_result.open_file()
    _, got = _roundtrip(1000, fd)
    shared_result.close(fd)
    assert int(got["cols"]["start"].sum()) == 3 * sum(range(1000))


def test_without_a_file_the_result_travels_as_it_is():
    message, got = _roundtrip(10, None)
    assert isinstance(message, dict) and got is message
    assert np.array_equal(got["cols"]["start"], _result(10)["cols"]["start"])


def _work_many(sizes, fd):
    put = shared_result.Writer(fd).put
    return {k: put(_result(n)) for k, n in enumerate(sizes)}


@pytest.mark.parametrize("sizes", [[3, 0, 100_000, 1, 777], [0, 0], [5_000]])
def test_results_written_one_at_a_time_come_back_equal(sizes):
    """A worker's Writer puts each result into the file as it is made (page-aligned, after
    the one before); the parent maps the file once and gets every result back, equal."""
    fd = shared_result.open_file()
    try:
        with ProcessPoolExecutor(1, mp_context=mp.get_context("fork")) as pool:
            messages = pool.submit(_work_many, sizes, fd).result()
        got = shared_result.receive_each(messages, fd)
    finally:
        shared_result.close(fd)
    assert sorted(got) == list(range(len(sizes)))
    starts = [m[2][0][0] for m in messages.values() if m[2]]
    assert all(s % 4096 == 0 for s in starts) and starts == sorted(starts)
    for k, n in enumerate(sizes):
        want = _result(n)
        assert got[k]["n"] == n and got[k]["lists"] == want["lists"]
        for c, v in want["cols"].items():
            assert got[k]["cols"][c].dtype == v.dtype and np.array_equal(got[k]["cols"][c], v), (k, c)
    assert shared_result.receive_each({0: {"plain": 1}}, None) == {0: {"plain": 1}}

"""The tracelint command asks numpy's OpenBLAS for one thread (tracelint.cli.blas_threads):
set before numpy loads, never over a count the user chose, and taken back out of the
environment of the user's own programs that `capture` runs."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tracelint.cli import blas_threads, capture


@pytest.fixture
def clean_env(monkeypatch):
    for name in blas_threads.THREAD_COUNT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(blas_threads, "_set_by_us", False)
    return monkeypatch


def test_one_thread_asked_for_when_the_user_chose_none(clean_env):
    blas_threads.limit_to_one()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    assert "OPENBLAS_NUM_THREADS" not in blas_threads.user_environment()


@pytest.mark.parametrize("name", blas_threads.THREAD_COUNT_VARIABLES)
def test_a_count_the_user_chose_is_kept(clean_env, name):
    clean_env.setenv(name, "6")
    blas_threads.limit_to_one()
    assert os.environ.get("OPENBLAS_NUM_THREADS") == ("6" if name == "OPENBLAS_NUM_THREADS" else None)
    env = blas_threads.user_environment()
    assert env[name] == "6" and env == dict(os.environ)


def test_captured_programs_get_the_users_environment(clean_env, tmp_path):
    """Both capture routes start the user's program without our thread limit."""
    blas_threads.limit_to_one()
    seen = []

    def fake_run(argv, env=None, **kw):
        seen.append(env)
        return subprocess.CompletedProcess(argv, 1)
    clean_env.setattr(capture.subprocess, "run", fake_run)
    clean_env.setattr(capture.shutil, "which", lambda name: "/usr/bin/nsys")
    with pytest.raises(Exception):
        capture._run_torch([sys.executable, "train.py"], tmp_path, 1, 0, 0, stack=False)
    with pytest.raises(Exception):
        capture._run_nsys(["./train"], tmp_path, gpu_metrics=False)
    assert len(seen) == 2
    for env in seen:
        assert env is not None and "OPENBLAS_NUM_THREADS" not in env
        assert env["PATH"] == os.environ["PATH"]


PROBE = """
import os, sys
from tracelint.cli import app
def main():
    import numpy
    print(len(os.listdir("/proc/self/task")), os.environ.get("OPENBLAS_NUM_THREADS"))
app.main = main
app.run()
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc")
def test_the_command_starts_numpy_with_one_blas_thread():
    env = {k: v for k, v in os.environ.items() if k not in blas_threads.THREAD_COUNT_VARIABLES}
    plain = subprocess.run([sys.executable, "-c", "import numpy, os; "
                            "print(len(os.listdir('/proc/self/task')))"], env=env,
                           capture_output=True, text=True, check=True).stdout
    if int(plain) == 1:
        pytest.skip("this machine's OpenBLAS starts no threads of its own (one core?)")
    threads, value = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                                    text=True, check=True).stdout.split()
    assert (int(threads), value) == (1, "1")

"""One BLAS thread for the tracelint command.

Why: numpy's bundled OpenBLAS starts one thread per core the moment numpy is imported, and
those threads cost CPU before any work: 0.1 s of a small lint's 0.8 s on two cores, and more
on the many-core machines CI and GPU hosts have. tracelint calls no BLAS routine (no matrix
products), so it needs none of them. OpenBLAS reads its thread count once, when the library
loads, so the command's entry point sets it before numpy is imported, and only where the user
chose no count. The user's own programs that tracelint starts (`capture`) get the user's
environment back through user_environment().
"""
from __future__ import annotations

import os

THREAD_COUNT_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
"""What OpenBLAS reads for its thread count, in its own order of precedence."""

_SET_HERE = "OPENBLAS_NUM_THREADS"
_set_by_us = False


def limit_to_one() -> None:
    """Ask OpenBLAS for one thread, unless the user already asked for a count."""
    global _set_by_us
    if not any(name in os.environ for name in THREAD_COUNT_VARIABLES):
        os.environ[_SET_HERE] = "1"
        _set_by_us = True


def user_environment() -> dict[str, str]:
    """The environment as the user gave it, for programs of theirs that tracelint runs."""
    env = dict(os.environ)
    if _set_by_us and env.get(_SET_HERE) == "1":
        del env[_SET_HERE]
    return env

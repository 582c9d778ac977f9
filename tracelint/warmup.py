"""Work a command will need after the load, done while a parallel load's workers decode.

A large Kineto file is decoded by several processes (importers/kineto_parallel); this process
takes a share of the byte ranges too, so a second of work done here during the decode costs
about half a second of wall time on two processes, where after the load it costs a whole one.
What a command queues must be safe to do early and to skip: importing modules, filling caches
(the rules' modules, the case library). It runs only where the load is parallel; errors are
left to the real call, which makes the same call again.
"""
from __future__ import annotations

from typing import Callable

_pending: list[Callable[[], object]] = []


def later(*work: Callable[[], object]) -> None:
    """Queue work for the next parallel load's decode."""
    _pending.extend(work)


def run_pending() -> None:
    """Run (and forget) the queued work; an error is dropped: the caller meets it again."""
    while _pending:
        work = _pending.pop(0)
        try:
            work()
        except Exception:    # noqa: BLE001 - the real call raises it with its own message
            pass


def forget() -> None:
    """Drop queued work that no parallel load ran (the command does it when it needs it)."""
    _pending.clear()

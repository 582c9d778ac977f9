"""The `tracelint` process ends without tearing the interpreter down.

Why: after a command has written its report, CPython's finalization frees every object and
clears the ~760 modules a lint imports (pandas, numpy, the rules) one by one: 0.15 s of CPU,
about 17 % of a lint of a small nsys export, and 0.14 s of wall time after a lint of the 287 MB
reference, all of it for memory the kernel takes back at once when the process ends.

What is kept: the atexit callbacks run (logging, multiprocessing, temporary folders, coverage)
and stdout and stderr are flushed before the process ends with the command's exit code. The
normal exit is taken instead whenever skipping finalization could lose something: another
non-daemon thread still running, a profiler or tracer attached (they write their results
during finalization), an exit code that is not an integer, or a stream that cannot be flushed.
Only the command's entry point calls this; `main()` called from Python returns as before.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import Callable


def _observed() -> bool:
    """A profiler, tracer or debugger is attached (it may write its results at exit)."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)     # Python 3.12+: cProfile, coverage, pdb
    return monitoring is not None and any(
        monitoring.get_tool(tool) is not None for tool in range(6))


def _other_threads() -> bool:
    main = threading.main_thread()
    return any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate())


def _flushed() -> bool:
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        return True
    except (OSError, ValueError):      # a closed pipe: the normal exit reports it
        return False


def run(main: Callable[[], None]) -> None:
    """main(), then end the process with its exit code, skipping interpreter teardown when
    that is safe (module docstring)."""
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code
    if code is None:
        code = 0
    if not isinstance(code, int) or _observed() or _other_threads() or not _flushed():
        sys.exit(code)
    atexit._run_exitfuncs()
    _flushed()
    os._exit(code & 0xFF)       # as sys.exit(code) would report it

"""Loops that no numpy formulation covers, compiled by numba when it is installed (the `fast`
extra) and the input is big enough to repay the compile.

Why: a few passes are inherently sequential (the what-if replay: each node's time depends on
nodes just before it). As Python loops they cost about 0.25 µs an item: 12-15 s per replay of
a 10 M-kernel export. Compiled, the stages they are in ran 3-20x faster. A loop compiles in
one to a few seconds, once (numba caches it on disk), and loading numba costs 0.25 s and
90 MB, so small inputs keep the plain loop, and a user who only lints small traces never
needs numba.

A `Loop` wraps one plain function written in the subset numba compiles (numpy arrays, ints,
no dicts). The plain path runs the very same function on memoryviews (whose items index as
Python ints, faster than numpy scalars), so the two paths cannot drift apart; the tests run
both on the same inputs. `TRACELINT_JIT=0` turns compiling off, `=1` forces it at any size.
"""
from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable

import numpy as np

_UNSET = object()
_numba = _UNSET


def numba_module():
    """numba, or None when it is not installed or `TRACELINT_JIT=0`."""
    global _numba
    if os.environ.get("TRACELINT_JIT", "") == "0":
        return None
    if _numba is _UNSET:
        try:
            import numba
        except ImportError:     # not installed, or a broken install: the plain loop still works
            numba = None
        _numba = numba
    return _numba


def _plain_arg(a):
    if isinstance(a, np.ndarray):
        return memoryview(np.ascontiguousarray(a))
    return a


def _rebind(fn: Callable, names: dict) -> Callable:
    """fn with some of its global names bound to other objects (the compiled helpers)."""
    return types.FunctionType(fn.__code__, {**fn.__globals__, **names}, fn.__name__,
                              fn.__defaults__, fn.__closure__)


def _njit(nb, fn: Callable):
    """numba's dispatcher for fn, cached on disk where numba finds a writable place (next to
    the module, else its user cache); without one numba refuses to cache, and fn compiles in
    every process instead."""
    try:
        return nb.njit(cache=True, nogil=True)(fn)
    except RuntimeError:             # "cannot cache function ...: no locator available"
        return nb.njit(nogil=True)(fn)


class Loop:
    """`fn` run compiled for `size >= min_size` when numba is available, else as written.

    helpers: global name -> function, for the functions `fn` calls by that name. The compiled
    path binds each name to the helper compiled (helpers listed after the ones they call); the
    plain path keeps the module's own binding, which may be a faster built-in with the same
    meaning (bisect.bisect_left for a binary search written out for numba)."""

    def __init__(self, fn: Callable, min_size: int, helpers: dict[str, Callable] | None = None):
        self.fn = fn
        self.min_size = min_size
        self.helpers = helpers or {}
        self._compiled = None
        self.broken = False       # numba could not compile it: the plain path from then on

    def compiled(self):
        """The numba-compiled function (built on first use, cached on disk), or None."""
        if self._compiled is None:
            nb = numba_module()
            if nb is None:
                return None
            done: dict[str, Callable] = {}
            for name, helper in self.helpers.items():
                done[name] = _njit(nb, _rebind(helper, done))
            self._compiled = _njit(nb, _rebind(self.fn, done))
        return self._compiled

    def use_compiled(self, size: int) -> bool:
        mode = os.environ.get("TRACELINT_JIT", "")
        if mode == "0":
            return False
        return (not self.broken and (mode == "1" or size >= self.min_size)
                and self.compiled() is not None)

    def run_compiled(self, *args):
        """The compiled function on args; on a numba compile error (raised before it runs, so
        nothing is written), say so on stderr once, mark the loop broken and re-raise."""
        try:
            return self.compiled()(*args)
        except Exception as exc:
            if not isinstance(exc, numba_module().core.errors.NumbaError):
                raise
            if not self.broken:
                print(f"tracelint: numba could not compile {self.fn.__name__} "
                      f"({type(exc).__name__}); running it as plain Python", file=sys.stderr)
            self.broken = True
            raise

    def __call__(self, size: int, *args):
        """Run over `args` (numpy arrays are written in place by either path)."""
        if self.use_compiled(size):
            try:
                return self.run_compiled(*args)
            except Exception:
                if not self.broken:
                    raise
        views = [_plain_arg(a) for a in args]
        try:
            return self.fn(*views)
        finally:
            for v in views:
                if isinstance(v, memoryview):
                    v.release()

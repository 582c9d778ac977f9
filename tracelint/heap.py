"""How this process's C heap (glibc malloc) holds freed memory: kept for reuse while a stage
runs, given back to the operating system between stages. (The cyclic garbage collector's
pauses: tracelint.collector.)

Why:
- Every column tracelint builds is a large numpy array. By default glibc maps each one fresh
  from the kernel and unmaps it when freed, so the next array of that size pays a page fault
  per page again, and the kernel zeroes every page. Linting 3 M nsys kernels spent 13.6 s of
  its 48 s of CPU there, as system time. With freed memory kept in the heap
  (`keep_freed_pages`, set by the CLI), the same lint takes 7.3 s of system time, at a peak
  within 2 % (docs/performance-history.md, "Fifth pass").
- Stages give their freed pages back when they end (`trim`): the importers, a long rule, the
  what-if build and each replay. The next stage then does not grow the process on top of
  holes (30 MB of the peak on the 287 MB reference).
- A job's worker process lints rank after rank (`for_trace_after_trace`): there the next
  stage is often the next rank's, which faults every page in again, so it keeps its freed
  pages instead. On 8 ranks of 17 MB: half the page faults and 7-8 % less wall time with one
  worker or two (docs/performance.md, "Twentieth pass"), for a worker peak 12-15 % higher.

Only glibc has the malloc calls; elsewhere `trim` and `keep_freed_pages` do nothing.
"""
from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3     # mallopt parameters (malloc.h)
#: Above this size an allocation still gets its own mapping (and is unmapped when freed).
KEEP_BELOW = 1 << 30


def _libc():
    """glibc, or None. By its usual name first: ctypes.util.find_library runs `ldconfig -p`
    (13 ms of every command's start)."""
    for name in ("libc.so.6", None):
        try:
            if name is None:
                from ctypes.util import find_library
                name = find_library("c") or "libc.so.6"
            libc = ctypes.CDLL(name)
            libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
            libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
            return libc
        except (OSError, AttributeError):    # musl and other C libraries: no malloc_trim
            continue
    return None


_LIBC = _libc() if sys.platform.startswith("linux") else None
_hold = False             # for_trace_after_trace: trim() gives nothing back


def trim() -> None:
    """Return free heap pages to the OS (glibc); a no-op elsewhere, and in a process that
    lints trace after trace (for_trace_after_trace)."""
    if _LIBC is not None and not _hold:
        _LIBC.malloc_trim(0)


def keep_freed_pages() -> bool:
    """Serve arrays below KEEP_BELOW from the heap and keep what they free for the next ones
    (glibc's defaults map and unmap each large array). For the process of a command, which owns
    its heap; a library caller is left with its own malloc settings. True when applied."""
    if _LIBC is None:
        return False
    return bool(_LIBC.mallopt(M_MMAP_THRESHOLD, KEEP_BELOW)
                and _LIBC.mallopt(M_TRIM_THRESHOLD, KEEP_BELOW))


def for_trace_after_trace() -> None:
    """The policy of a process that lints one trace after another and nothing else (a job's
    local pool worker): freed pages are kept for reuse, between stages too, as the next rank
    needs about as many again. Its peak is its largest rank's, plus the holes left between."""
    global _hold
    keep_freed_pages()
    _hold = True

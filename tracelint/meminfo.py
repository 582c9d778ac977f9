"""What the operating system says about memory: this process's resident and peak bytes, the
machine's available bytes (Linux /proc; None where there is none). Read by a job's workers
(their peak, in the job report) and by the choice of a second rule process (room for its
caches, engine/rule_processes)."""
from __future__ import annotations

import os
import resource


def _kib_field(path: str, key: str) -> int | None:
    """Bytes of the `key: N kB` line of a /proc file."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def available_bytes() -> int | None:
    """Memory the machine can give without swapping (MemAvailable)."""
    return _kib_field("/proc/meminfo", "MemAvailable:")


def rss_bytes() -> int | None:
    """This process's resident memory now."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def peak_rss_bytes() -> int:
    """This process's peak resident memory: VmHWM (Linux; reset by exec, unlike ru_maxrss,
    which a fork+exec child inherits from its parent), else ru_maxrss."""
    peak = _kib_field("/proc/self/status", "VmHWM:")
    if peak is not None:
        return peak
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r if os.uname().sysname == "Darwin" else r * 1024)

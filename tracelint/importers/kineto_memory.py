"""torch.profiler memory events (`profile_memory=True`) -> the Timeline's memory table.

Kineto writes one instant event per allocator event of the framework's allocators:

    {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": P, "tid": T, "ts": µs,
     "args": {"Bytes": 4194304, "Total Allocated": 4456448, "Total Reserved": 0,
              "Device Type": 0, "Device Id": -1, "Addr": 94731252775296, ...}}

Bytes is signed (a free is negative); the totals are the allocator's own running figures after
the event (CPU: reserved is 0, the CPU allocator caches nothing; CUDA: the caching allocator's
allocated and reserved bytes). Device Type is c10::DeviceType (0 CPU, 1 CUDA, ...).

The hook is explicit: the Kineto loader hands every decoded chunk to `MemoryColumns.add`, which
keeps the `[memory]` events only (their args are fields of kineto_events.Args, so they are
decoded in the importer's single pass). A loader that skips instant events before decoding them (by
their bytes) must keep the raw events for which `is_memory_raw` is true, or the memory timeline
is lost (tests/test_memory_timeline.py loads a trace with memory events end to end).
"""
from __future__ import annotations

from itertools import compress
from operator import attrgetter
from typing import TYPE_CHECKING, Callable

import numpy as np

from .kineto_values import int_col, us_to_ns

if TYPE_CHECKING:
    import pandas as pd

MEMORY_NAME = "[memory]"
MEMORY_CAT = "cpu_instant_event"
#: Bytes every raw memory event contains (its name, JSON-quoted): see is_memory_raw.
MARKER = b'"[memory]"'
#: c10::DeviceType numbering -> device_type label (ROCm builds report HIP devices as CUDA).
DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps"}


def is_memory_raw(raw) -> bool:
    """True for the raw bytes of a Kineto `[memory]` event (cheap: one substring search)."""
    return MARKER in (raw if isinstance(raw, (bytes, bytearray)) else bytes(raw))


#: Args fields (kineto_events.Args) of a memory row, in row order after ts, pid, tid.
_TS, _ARGS = attrgetter("ts"), attrgetter("args")
_ARG_FIELDS = ("mem_bytes", "total_allocated", "total_reserved", "device_type", "device_id",
               "addr")


def _int(v) -> int:
    if isinstance(v, bool):
        return -1
    if isinstance(v, int):
        return v if -2**63 <= v < 2**63 else -1
    if isinstance(v, (bytes, str)):        # float_hook text, or numeric strings
        try:
            x = float(v)
        except ValueError:
            return -1
        return int(x) if abs(x) < 2**62 else -1
    if isinstance(v, float) and abs(v) < 2**62:
        return int(v)
    return -1


class MemoryColumns:
    """Collects the `[memory]` events of each decoded chunk as column parts, converted where
    they are decoded (in a parallel decode's workers too). Their args are decoded in the
    importer's one pass (kineto_events.Args), never from raw bytes again."""

    def __init__(self):
        self.ts: list[np.ndarray] = []         # per chunk: int64 ns
        self.parts: list[np.ndarray] = []      # per chunk: (8, n) pid, tid, bytes ... addr
        self.bad = 0
        self.seen = 0
        self.notes: list[str] = []
        self._rows: tuple[np.ndarray, np.ndarray] | None = None

    def add(self, events: list) -> None:
        """events: one chunk's decoded instant events (category cpu_instant_event, or "" in
        2021 traces), in file order; keeps the `[memory]` ones."""
        mem = [e for e in events if e.name == MEMORY_NAME and e.cat in (MEMORY_CAT, "")]
        self.seen += len(mem)
        keep = [e for e in mem if e.ts is not None and e.args is not None
                and e.args.mem_bytes is not None]
        ts, ok = us_to_ns(list(map(_TS, keep)))
        keep = list(compress(keep, ok))
        self.bad += len(mem) - len(keep)
        if not keep:
            return
        args = list(map(_ARGS, keep))
        self.ts.append(ts[ok])
        self.parts.append(np.stack([int_col(keep, "pid", _int), int_col(keep, "tid", _int)]
                                   + [int_col(args, f, _int) for f in _ARG_FIELDS]))

    def merge(self, other: "MemoryColumns") -> None:
        """Append another builder's events (a parallel decode's worker), in file order. Copied:
        a worker's arrays may be views of its shared memory (tracelint.shared_result), which
        would stay mapped until the memory table is built, through the load's peak."""
        self.ts += [a.copy() for a in other.ts]
        self.parts += [a.copy() for a in other.parts]
        self.bad += other.bad
        self.seen += other.seen

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(ts, the other columns as rows: pid, tid, bytes ... addr) of every event, by ts;
        concatenated once, the parts dropped (memory peak: one copy of the rows at a time)."""
        if self._rows is None:
            ts = np.concatenate(self.ts) if self.ts else np.zeros(0, np.int64)
            cols = (np.concatenate(self.parts, axis=1) if self.parts
                    else np.zeros((2 + len(_ARG_FIELDS), 0), np.int64))
            self.ts, self.parts = [], []
            if len(ts) > 1 and (ts[1:] < ts[:-1]).any():
                order = np.argsort(ts, kind="stable")
                ts, cols = ts[order], cols[:, order]
            self._rows = ts, cols
        return self._rows

    def owners(self, ranges: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
        """The innermost CPU op or annotation around each row (timeline.memory.
        innermost_owners): the table's op column, computable apart from the table."""
        from ..timeline.memory import innermost_owners
        ts, cols = self.rows()
        return innermost_owners(ranges, cols[0], cols[1], ts)

    def table(self, ranges: pd.DataFrame, owners: Callable[[], tuple] | None = None) -> pd.DataFrame:
        """The memory table, by ts; op: the innermost CPU op or annotation around each event
        (owners: returns owners(ranges), computed elsewhere: asked last, when every other
        column is made). (pandas is imported here, not with the module: a parallel load forks
        its decoding workers before pandas is imported, kineto_parallel.)"""
        import pandas as pd
        from ..timeline.memory import owners_categorical
        from ..timeline.schema import make_table
        ts, cols = self.rows()
        if not len(ts):
            return make_table("memory", {}, 0)
        pid, tid, nbytes, alloc, reserved, dtype, dev, addr = cols
        uniq, inv = np.unique(dtype, return_inverse=True)
        labels = [DEVICE_TYPES.get(int(d), "other") for d in uniq]
        kinds = sorted(set(labels))
        codes = np.array([kinds.index(x) for x in labels], np.int8)[inv.reshape(-1)]
        if "cpu" in kinds:
            dev = np.where(codes == kinds.index("cpu"), -1, dev)
        self._running_totals(kinds, codes, dev, nbytes, alloc)
        op = owners_categorical(*(owners() if owners is not None else self.owners(ranges)))
        n = len(ts)
        return make_table("memory", {
            "device": dev, "device_type": pd.Categorical.from_codes(codes, kinds),
            "ts": ts, "bytes": nbytes, "total_allocated": alloc,
            "total_reserved": reserved, "addr": addr, "pid": pid, "tid": tid,
            "op": op,
            "source": pd.Categorical.from_codes(np.zeros(n, np.int8), ["allocator"])}, n)

    def _running_totals(self, kinds, codes, dev, nbytes, alloc) -> None:
        """Traces without "Total Allocated" (2021 Kineto): the running sum of Bytes per device,
        from the capture start (memory allocated before it is not in it: a lower bound)."""
        key = codes.astype(np.int64) << 32 | (dev & 0xFFFFFFFF)
        for k in np.unique(key):
            on = np.flatnonzero(key == k)
            if (alloc[on] >= 0).any():
                continue
            run = np.cumsum(nbytes[on])
            alloc[on] = run - min(0, int(run.min()))
            self.notes.append(f"{kinds[codes[on[0]]]} {dev[on[0]]}: no Total Allocated in the "
                              "trace; allocated is the running sum of the events' Bytes from the "
                              "capture start")


def attach(tl, mem: MemoryColumns, profile_memory: bool = False,
           owners: Callable[[], tuple] | None = None) -> None:
    """Fill tl.memory from the collected events; note what was dropped and what was captured
    (profile_memory: the trace says memory was profiled, so no rows means no events; owners:
    returns mem.owners(tl.ranges), computed elsewhere)."""
    tl.memory = mem.table(tl.ranges, owners)
    tl.meta.raw_event_counts["memory"] = mem.seen
    if len(tl.memory) or profile_memory:
        tl.meta.captured.add("memory")
    tl.meta.notes.extend(mem.notes)
    if mem.bad:
        tl.meta.notes.append(f"{mem.bad} [memory] events without a numeric ts or Bytes dropped")

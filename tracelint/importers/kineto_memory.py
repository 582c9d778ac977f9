"""torch.profiler memory events (`profile_memory=True`) -> the Timeline's memory table.

Kineto writes one instant event per allocator event of the framework's allocators:

    {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": P, "tid": T, "ts": µs,
     "args": {"Bytes": 4194304, "Total Allocated": 4456448, "Total Reserved": 0,
              "Device Type": 0, "Device Id": -1, "Addr": 94731252775296, ...}}

Bytes is signed (a free is negative); the totals are the allocator's own running figures after
the event (CPU: reserved is 0, the CPU allocator caches nothing; CUDA: the caching allocator's
allocated and reserved bytes). Device Type is c10::DeviceType (0 CPU, 1 CUDA, ...).

The hook is explicit: the Kineto loader hands every decoded chunk to `MemoryColumns.add`, which
keeps the `[memory]` events only. A loader that skips instant events before decoding them (by
their bytes) must keep the raw events for which `is_memory_raw` is true, or the memory timeline
is lost (tests/test_memory_timeline.py loads a trace with memory events end to end).
"""
from __future__ import annotations

from typing import Any, Callable

import msgspec
import numpy as np
import pandas as pd

from ..timeline.memory import enclosing_ops
from ..timeline.schema import make_table

MEMORY_NAME = "[memory]"
MEMORY_CAT = "cpu_instant_event"
#: Bytes every raw memory event contains (its name, JSON-quoted): see is_memory_raw.
MARKER = b'"[memory]"'
#: c10::DeviceType numbering -> device_type label (ROCm builds report HIP devices as CUDA).
DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps"}


def is_memory_raw(raw) -> bool:
    """True for the raw bytes of a Kineto `[memory]` event (cheap: one substring search)."""
    return MARKER in (raw if isinstance(raw, (bytes, bytearray)) else bytes(raw))


class _Args(msgspec.Struct, gc=False):
    nbytes: Any = msgspec.field(default=None, name="Bytes")
    allocated: Any = msgspec.field(default=-1, name="Total Allocated")
    reserved: Any = msgspec.field(default=-1, name="Total Reserved")
    device_type: Any = msgspec.field(default=-1, name="Device Type")
    device_id: Any = msgspec.field(default=-1, name="Device Id")
    addr: Any = msgspec.field(default=-1, name="Addr")


class _Event(msgspec.Struct, gc=False):
    name: str = ""
    pid: Any = -1
    tid: Any = -1
    ts: Any = None
    args: _Args | None = None


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
    """Collects the `[memory]` events of each decoded chunk as plain rows."""

    def __init__(self):
        self._dec = msgspec.json.Decoder(_Event, float_hook=str.encode)
        self.rows: list[tuple] = []     # (ts text/int, pid, tid, bytes, alloc, reserved, dtype, dev, addr)
        self.bad = 0
        self.seen = 0
        self.notes: list[str] = []

    def add(self, events: list, raws: list) -> None:
        """events: the chunk's decoded events (with .cat and .name); raws: their raw bytes."""
        for i, e in enumerate(events):     # index raws only here: a range without a [memory]
            if e.name == MEMORY_NAME and e.cat in (MEMORY_CAT, ""):    # event is never split
                self.add_raw(raws[i])                                    # ("": 2021 traces)

    def merge(self, other: "MemoryColumns") -> None:
        """Append another builder's events (a parallel decode's worker), in file order."""
        self.rows += other.rows
        self.bad += other.bad
        self.seen += other.seen

    def add_raw(self, raw) -> None:
        self.seen += 1
        try:
            e = self._dec.decode(raw)
        except msgspec.DecodeError:
            self.bad += 1
            return
        a = e.args
        if a is None or a.nbytes is None or e.ts is None:
            self.bad += 1
            return
        self.rows.append((e.ts, _int(e.pid), _int(e.tid), _int(a.nbytes), _int(a.allocated),
                          _int(a.reserved), _int(a.device_type), _int(a.device_id), _int(a.addr)))

    def table(self, ranges: pd.DataFrame, us_to_ns: Callable) -> pd.DataFrame:
        """The memory table, by ts; op: the innermost CPU op or annotation around each event."""
        if not self.rows:
            return make_table("memory", {}, 0)
        cols = list(zip(*self.rows))
        ts, ok = us_to_ns(list(cols[0]))
        ints = [np.array(c, np.int64) for c in cols[1:]]
        pid, tid, nbytes, alloc, reserved, dtype, dev, addr = ints
        self.bad += int((~ok).sum())
        order = np.argsort(np.where(ok, ts, np.iinfo(np.int64).max), kind="stable")
        order = order[ok[order]]
        ts, pid, tid = ts[order], pid[order], tid[order]
        uniq, inv = np.unique(dtype[order], return_inverse=True)
        kind = np.array([DEVICE_TYPES.get(int(d), "other") for d in uniq], object)[inv.reshape(-1)]
        dev, nbytes, alloc = np.where(kind == "cpu", -1, dev[order]), nbytes[order], alloc[order]
        self._running_totals(kind, dev, nbytes, alloc)
        return make_table("memory", {
            "device": dev, "device_type": pd.Categorical(kind),
            "ts": ts, "bytes": nbytes, "total_allocated": alloc,
            "total_reserved": reserved[order], "addr": addr[order], "pid": pid, "tid": tid,
            "op": pd.Categorical(enclosing_ops(ranges, pid, tid, ts)),
            "source": pd.Categorical(["allocator"] * len(ts))}, len(ts))


    def _running_totals(self, kind, dev, nbytes, alloc) -> None:
        """Traces without "Total Allocated" (2021 Kineto): the running sum of Bytes per device,
        from the capture start (memory allocated before it is not in it: a lower bound)."""
        for key in {(k, d) for k, d in zip(kind, dev)}:
            on = np.flatnonzero((kind == key[0]) & (dev == key[1]))
            if (alloc[on] >= 0).any():
                continue
            run = np.cumsum(nbytes[on])
            alloc[on] = run - min(0, int(run.min()))
            self.notes.append(f"{key[0]} {key[1]}: no Total Allocated in the trace; allocated is "
                              "the running sum of the events' Bytes from the capture start")


def attach(tl, mem: MemoryColumns, us_to_ns: Callable, profile_memory: bool = False) -> None:
    """Fill tl.memory from the collected events; note what was dropped and what was captured
    (profile_memory: the trace says memory was profiled, so no rows means no events)."""
    tl.memory = mem.table(tl.ranges, us_to_ns)
    tl.meta.raw_event_counts["memory"] = mem.seen
    if len(tl.memory) or profile_memory:
        tl.meta.captured.add("memory")
    tl.meta.notes.extend(mem.notes)
    if mem.bad:
        tl.meta.notes.append(f"{mem.bad} [memory] events without a numeric ts or Bytes dropped")

"""Kineto event chunks -> per-table numpy columns (names as integer codes), plus the few
events that need all their args (metadata, counters) and the flow-based correlation fill."""
from __future__ import annotations

from collections import Counter, defaultdict
from itertools import compress
from operator import attrgetter
from typing import Callable

import msgspec
import numpy as np

from .kineto_events import (COUNTER_CATS, FLOW_CATS, GPU_TABLES, NO_ARGS, RANGE_KIND,
                            TABLE_OF_CAT, Args, Event)
from ..heap import trim
from . import kineto_launch_args as launch_args
from .kineto_memory import MEMORY_CAT, MemoryColumns
from .kineto_values import dim3, int_col, ints, us_to_ns

_PH, _TS, _DUR, _NAME, _ARGS = map(attrgetter, ("ph", "ts", "dur", "name", "args"))
_DIMS, _STACK = attrgetter("input_dims"), attrgetter("call_stack")


class Builder:
    """Turns decoded event chunks into per-table column arrays; names become integer codes."""

    def __init__(self):
        self.parts: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
        self.vocab: dict[str, dict[str, int]] = {}
        self.cat_counts: Counter = Counter()
        self.cat_rank: dict[str, int] = {}     # category -> order of first appearance (ties)
        self.specials: list[msgspec.Raw] = []    # M, C and range-profiler events: need all args
        self.flow_chunks: list[int] = []
        self.bad_ts = self.non_x = self.filled = 0
        self.window: tuple[int, int] | None = None
        self.op_inputs: dict[int, tuple] = {}     # External id -> (name, dims, types, concrete) JSON
        self.call_stacks: list[tuple] = []       # (start, end, pid, tid, text) of legacy stacks
        self.memory = MemoryColumns()            # profile_memory=True [memory] instant events
        self.saw_dims = False                    # an op with "Input Dims" (record_shapes)
        self.launch_facts: list[np.ndarray] = []  # ROCm: grid, block, size on the API call
        self._hip = np.zeros(0, bool)

    def add_chunk(self, lo: int, events: list[Event], raws) -> None:
        """One chunk of events, in file order (chunks too); lo: the index of its first event;
        raws: their raw slices (a sequence aligned with events), read only for the special
        events. The chunks may be of any size: a table's rows end up ordered by start, then
        by the rank of their category, then by file order (kineto_tables.sort_by_start)."""
        buckets: dict[str, list[Event]] = defaultdict(list)
        for e in events:
            buckets[e.cat].append(e)
        if MEMORY_CAT in buckets or "" in buckets:   # explicit hook: kineto_memory keeps [memory]
            self.memory.add(buckets.get(MEMORY_CAT, []) + buckets.get("", []))
        for cat, evs in buckets.items():
            self.cat_counts[cat] += len(evs)
            self.cat_rank.setdefault(cat, len(self.cat_rank))
            if cat in FLOW_CATS:
                self.flow_chunks.append(lo)
                continue
            phs = list(map(_PH, evs))
            n_x = phs.count("X")
            xs = evs if n_x == len(evs) else list(compress(evs, map("X".__eq__, phs)))
            if cat in TABLE_OF_CAT:
                self.non_x += len(evs) - len(xs)
                if xs:
                    self._add(TABLE_OF_CAT[cat], cat, xs)
            elif cat == "Trace" and xs:
                self._window(xs)
            if cat in COUNTER_CATS or (len(xs) < len(evs) and ("M" in phs or "C" in phs)):
                self.specials += [r for r, e in zip(raws, events) if e.cat == cat and (
                    cat in COUNTER_CATS or e.ph in ("M", "C"))]

    def _codes(self, table: str, names: list[str]) -> np.ndarray:
        """Name -> code, numbering new names in order of appearance, in a C-level loop."""
        if table not in self.vocab:
            self.vocab[table] = vocab = defaultdict()
            vocab.default_factory = vocab.__len__
        return np.fromiter(map(self.vocab[table].__getitem__, names), np.int64, len(names))

    def _hip_calls(self) -> np.ndarray:
        """Per API name code: a HIP call (the only runtime whose calls carry launch facts,
        kineto_launch_args). By name, not row by row: a CUDA trace pays nothing."""
        names = self.vocab["api_calls"]
        if len(self._hip) != len(names):
            self._hip = np.fromiter((n.startswith("hip") for n in names), bool, len(names))
        return self._hip

    def _window(self, xs: list[Event]) -> None:
        """The profiler's own window (cat "Trace"), kept in meta.extra."""
        start, ok = us_to_ns([e.ts for e in xs])
        end = start + us_to_ns([e.dur for e in xs])[0]
        if ok.any():
            lo, hi = int(start[ok].min()), int(end[ok].max())
            self.window = (min(lo, self.window[0]), max(hi, self.window[1])) if self.window \
                else (lo, hi)

    def _add(self, table: str, cat: str, xs: list[Event]) -> None:
        start, ok = us_to_ns(list(map(_TS, xs)))
        names = list(map(_NAME, xs))
        c = {"start": start, "end": start + us_to_ns(list(map(_DUR, xs)))[0],
             "pid": int_col(xs, "pid"), "tid": int_col(xs, "tid"),
             "name": self._codes(table, names)}
        args = list(map(_ARGS, xs))
        if None in args:
            args = [a or NO_ARGS for a in args]
        if table in GPU_TABLES or table == "syncs":
            _device_stream(c, args)
            c["correlation"] = int_col(args, "correlation")
        if table in ("copies", "memsets"):
            c["bytes"] = int_col(args, "nbytes")
        elif table == "kernels":
            for axis, dims in (("grid", dim3([a.grid for a in args])),
                               ("block", dim3([a.block for a in args]))):
                for i, xyz in enumerate("xyz"):
                    c[f"{axis}_{xyz}"] = dims[:, i]
            c["registers_per_thread"] = int_col(args, "registers")
            # Kineto records static + dynamic shared memory as one total: kept as static.
            c["static_smem"] = int_col(args, "smem")
        elif table == "api_calls":
            c["correlation"] = int_col(args, "correlation")
            c["external_id"] = _external_ids(args)
            c["api"] = np.full(len(xs), 1 if cat.endswith("driver") else 0, np.int8)
            hip = np.flatnonzero(self._hip_calls()[c["name"]])
            if len(hip):
                facts = launch_args.collect(c["correlation"][hip], [names[i] for i in hip],
                                            [args[i] for i in hip])
                if facts is not None:
                    self.launch_facts.append(facts)
        elif table == "ranges":
            c["external_id"] = _external_ids(args)
            c["kind"] = np.full(len(xs), RANGE_KIND[cat], np.int8)
            ext_ids = c["external_id"]
            for i in compress(range(len(xs)), map(_DIMS, args)):   # rows with "Input Dims"
                self.saw_dims = True
                if ext_ids[i] >= 0:
                    e, a = xs[i], args[i]
                    self.op_inputs[int(ext_ids[i])] = (e.name, bytes(a.input_dims),
                                                       bytes(a.input_type), bytes(a.concrete))
            if cat == "gpu_user_annotation":
                _device_stream(c, args)
            else:     # CPU ops may carry a stream (Triton launches): not device work
                c["device"], c["stream"] = np.full((2, len(xs)), -1, np.int64)
            stacks = list(map(_STACK, args))
            if stacks.count(None) < len(stacks):       # legacy with_stack traces only
                self.call_stacks += [(s, e, p, t, a.call_stack) for s, e, p, t, a, good in zip(
                    c["start"], c["end"], c["pid"], c["tid"], args, ok)
                    if good and isinstance(a.call_stack, str) and a.call_stack]
        # the category's rank (order of first appearance in the file): rows that tie on start
        # are ordered by it, then by file order, however the events were cut into chunks
        c["cat_rank"] = np.full(len(xs), self.cat_rank[cat], np.int32)
        if not ok.all():
            self.bad_ts += int((~ok).sum())
            c = {k: v[ok] for k, v in c.items()}
        for k, v in c.items():
            self.parts[table][k].append(v)

    def columns(self, single_as_is: bool = False,
                only: tuple[str, ...] | None = None) -> dict[str, dict[str, np.ndarray]]:
        """Each column concatenated once; its chunk parts are dropped as it is made, and their
        memory goes back to the OS after each table (tracelint.heap). single_as_is: a column
        of one part is that part, not a copy (one range of a parallel load, merged later).
        only: these tables now (the others stay for a later call)."""
        out = {}
        for t in [t for t in self.parts if only is None or t in only]:
            c = self.parts.pop(t)
            out[t] = {k: np.ascontiguousarray(v[0]) if single_as_is and len(v) == 1
                      else np.concatenate(v) for k, v in ((k, c.pop(k)) for k in list(c))}
            if not single_as_is:
                trim()
        return out

    def decode_specials(self) -> list[dict]:
        dec = msgspec.json.Decoder(float_hook=str.encode)   # exact ts; values converted later
        return [e for e in map(dec.decode, self.specials) if isinstance(e, dict)]

    def fill_correlation_from_flows(self, cols: dict, flow_batches: Callable) -> None:
        """Where GPU rows or API calls lack args.correlation, take the id of the ac2g-style flow
        that starts ("s") at the API call or ends ("f") at the GPU row. Rare: flow_batches()
        decodes the flow events (in lists) on demand."""
        missing = [t for t in GPU_TABLES + ("api_calls",)
                   if t in cols and (cols[t]["correlation"] < 0).any()]
        if not missing:
            return
        lookup: dict[tuple, int] = {}
        for flows in flow_batches():
            ts, ok = us_to_ns([e.ts for e in flows])
            for e, pid, tid, t, i, good in zip(flows, ints([e.pid for e in flows]),
                                               ints([e.tid for e in flows]), ts,
                                               ints([e.id for e in flows]), ok):
                if good and i >= 0:
                    lookup[(e.ph == "s", pid, tid, t)] = i
        for t in missing:
            c, is_api = cols[t], t == "api_calls"
            for row in np.flatnonzero(c["correlation"] < 0):
                i = lookup.get((is_api, c["pid"][row], c["tid"][row], c["start"][row]), -1)
                if i >= 0:
                    c["correlation"][row] = i
                    self.filled += 1


def _device_stream(c: dict, args: list[Args]) -> None:
    """device: args.device else the GPU pid; stream: args.stream else an integer tid."""
    dev, stream = int_col(args, "device"), int_col(args, "stream")
    c["device"] = np.where(dev >= 0, dev, c["pid"])
    c["stream"] = np.where(stream >= 0, stream, c["tid"])


def _external_ids(args: list[Args]) -> np.ndarray:
    ext = int_col(args, "external_id")
    if (ext < 0).any():       # 2021 traces say "external id"
        ext = np.where(ext >= 0, ext, int_col(args, "external_id_2021"))
    return ext

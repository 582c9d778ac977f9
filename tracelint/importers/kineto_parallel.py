"""One large Kineto file decoded by several processes: contiguous groups of byte ranges, one
group per process, merged into one Builder in file order.

Decoding a range and turning its events into columns depend on nothing outside the range
(row order within a table does not depend on how the events were cut into chunks:
kineto_columns.Builder.add_chunk), so each process builds its own columns with its own name
vocabulary; the merge renumbers names and category ranks into the parent's numbering (the
order of first appearance in the file, as one process would have numbered them) and appends
the columns in group order. The parent decodes the first group itself while the workers
(forked where the OS can, so they start with the parent's imports) decode the others; each
worker sends back only its columns and the few lists the Builder keeps, the columns through
shared memory where it can (tracelint.shared_result).

The number of processes: `tracelint.forking.set_load_workers(n)` (the CLI: the usable CPUs,
at most 4, or `--jobs N`); a library call decodes in its own process unless it sets more.
"""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from .. import shared_result
from ..forking import frozen_heap, mp_context
from . import kineto_ranges as kr
from .kineto_columns import Builder

def groups(ranges: list[tuple[int, int]], n: int) -> list[list[tuple[int, int]]]:
    """ranges cut into at most n contiguous groups of about equal bytes (a larger share for the
    parent measured no faster, 1.42 s against 1.37 s, when workers still pickled their
    columns; now they cost the parent 0.02-0.035 s to receive)."""
    total = sum(b - a for a, b in ranges)
    out: list[list[tuple[int, int]]] = [[]]
    done = 0
    for a, b in ranges:
        if out[-1] and done >= total * len(out) / n and len(out) < n:
            out.append([])
        out[-1].append((a, b))
        done += b - a
    return out


def _decode_group(path: str, ranges: list[tuple[int, int]], fd: int | None):
    """In a worker: one group's columns and what the Builder kept, ready to merge (sent
    through the memory file fd where there is one)."""
    build = Builder()
    specials, firsts, shapes = kr.decode_in_ranges(Path(path), ranges, build,
                                                   lambda stage, fraction: None)
    return shared_result.send({
        "cols": build.columns(), "vocab": {t: list(v) for t, v in build.vocab.items()},
        "cats": list(build.cat_rank), "counts": dict(build.cat_counts),
        "specials": specials, "firsts": firsts, "shapes": shapes,
        "flow_chunks": build.flow_chunks, "op_inputs": build.op_inputs,
        "call_stacks": build.call_stacks, "window": build.window,
        "bad_ts": build.bad_ts, "non_x": build.non_x, "memory": build.memory}, fd)


def decode_parallel(path: Path, ranges: list[tuple[int, int]], build: Builder, report, n: int):
    """kineto_ranges.decode_in_ranges over n processes; the same result, merged into build."""
    parts = groups(ranges, n)
    if len(parts) < 2:
        return kr.decode_in_ranges(path, ranges, build, report)
    with frozen_heap():
        return _decode_with(mp_context(), path, parts, build, report)


def _decode_with(ctx, path: Path, parts: list, build: Builder, report):
    fds = [shared_result.open_file() if ctx.get_start_method() == "fork" else None
           for _ in parts[1:]]                      # opened before the workers fork
    try:
        with ProcessPoolExecutor(max_workers=len(parts) - 1, mp_context=ctx) as pool:
            futures = [pool.submit(_decode_group, str(path), g, fd)
                       for g, fd in zip(parts[1:], fds)]
            return _collect(path, parts[0], futures, fds, build, report)
    finally:
        for fd in fds:
            shared_result.close(fd)


def _collect(path: Path, first: list, futures: list, fds: list, build: Builder, report):
    """Decode the first group here, then merge each worker's group in file order."""
    specials, firsts, shapes = kr.decode_in_ranges(path, first, build, report)
    count = sum(build.cat_counts.values())
    for fut, fd in zip(futures, fds):
        got = shared_result.receive(fut.result(), fd)
        specials += got["specials"]
        firsts += [count + f for f in got["firsts"]]
        shapes |= got["shapes"]
        count += _merge(build, got, count)
    return specials, firsts, shapes


def _merge(build: Builder, got: dict, offset: int) -> int:
    """Append one group's result to build, renumbering names and category ranks; returns the
    group's event count."""
    ranks = np.array([build.cat_rank.setdefault(c, len(build.cat_rank)) for c in got["cats"]]
                     or [0], np.int32)
    for cat, k in got["counts"].items():
        build.cat_counts[cat] += k
    for table, cols in got["cols"].items():
        codes = build._codes(table, got["vocab"][table])
        cols["name"] = codes[cols["name"]] if len(codes) else cols["name"]
        cols["cat_rank"] = ranks[cols["cat_rank"]]
        for k, v in cols.items():
            build.parts[table][k].append(v)
    build.flow_chunks += [offset + lo for lo in got["flow_chunks"]]
    build.op_inputs.update(got["op_inputs"])
    build.call_stacks += got["call_stacks"]
    if got["window"]:
        lo, hi = got["window"]
        build.window = (min(lo, build.window[0]), max(hi, build.window[1])) if build.window \
            else (lo, hi)
    build.bad_ts += got["bad_ts"]
    build.non_x += got["non_x"]
    build.memory.merge(got["memory"])        # profile_memory [memory] events, in file order
    return sum(got["counts"].values())

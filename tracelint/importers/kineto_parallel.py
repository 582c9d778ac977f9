"""One large Kineto file decoded by several processes, each taking the next byte range from one
shared counter; the ranges' columns merged into one Builder in file order.

Decoding a range and turning its events into columns depend on nothing outside the range
(row order within a table does not depend on how the events were cut into chunks:
kineto_columns.Builder.add_chunk), so each range gets its own Builder with its own name
vocabulary; the merge renumbers names and category ranks into the parent's numbering (the
order of first appearance in the file, as one process would have numbered them) and appends
the columns in range order. Workers fork (where the OS can: they start with the parent's
imports) and send back their ranges' columns and the few lists a Builder keeps, the columns
through shared memory where it can (tracelint.shared_result).

Why a counter, not fixed shares: the parent has more to do than decode. It imports pandas and
the table builders while the workers start (the command imports nothing heavy before the load,
importers/__init__), and on a shared 2-CPU host one process is often slowed for a while; with
fixed halves the load waited for the slower half. Each process now takes ranges until none
is left, so they finish together. A worker that fails leaves its ranges to the parent.

The number of processes: `tracelint.forking.set_load_workers(n)` (the CLI: the usable CPUs,
at most 4, or `--jobs N`); a library call decodes in its own process unless it sets more.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import shared_result
from ..forking import frozen_heap, mp_context, taken
from . import kineto_ranges as kr
from .kineto_columns import Builder


def decode_parallel(path: Path, ranges: list[tuple[int, int]], build: Builder, report, n: int):
    """kineto_ranges.decode_in_ranges over n processes; the same result, merged into build."""
    n = min(n, len(ranges))
    if n < 2:
        return kr.decode_in_ranges(path, ranges, build, report)
    with frozen_heap():
        return _decode_with(mp_context(), path, ranges, build, report, n)


def _decode_with(ctx, path: Path, ranges: list, build: Builder, report, n: int):
    counter = ctx.Value("i", 0)
    workers = []
    try:
        for _ in range(n - 1):
            fd = shared_result.open_file() if ctx.get_start_method() == "fork" else None
            receive, send = ctx.Pipe(duplex=False)
            w = ctx.Process(target=_worker, args=(str(path), ranges, counter, send, fd),
                            daemon=True)
            w.start()
            send.close()
            workers.append((w, receive, fd))
        _warm_imports()                  # while the workers start decoding
        done = {}
        for i in taken(counter, len(ranges)):
            done[i] = _decode_one(path, ranges[i])
            report("decode", min(1.0, counter.value / len(ranges)))
        for w, receive, fd in workers:
            try:
                done.update(shared_result.receive_each(receive.recv(), fd))
            except (EOFError, OSError):
                pass                     # a worker died: its ranges are decoded below
        for i in range(len(ranges)):
            if i not in done:
                done[i] = _decode_one(path, ranges[i])
    finally:
        for w, receive, fd in workers:
            receive.close()
            if w.is_alive():
                w.terminate()
            w.join()
            shared_result.close(fd)
    return _merge_all(build, [done[i] for i in range(len(ranges))])


def _warm_imports() -> None:
    """The modules that build the Timeline from the columns (pandas among them), and what the
    command queued for after the load (tracelint.warmup): done by this process while the
    workers decode, instead of after. An empty Timeline is made too: its first one costs 7 ms
    (pandas' first frames of each kind), the next ones 1 ms.

    What these imports make (80,000 functions, tuples, dicts ... on the reference) lives as
    long as the process: it joins the frozen heap (frozen_heap: the oldest generation once the
    decode ends). Left young, the first collection after the load walked it all, 23 ms of the
    serial path, freeing nothing of it."""
    import gc
    from . import kineto_cupti, kineto_meta, kineto_tables  # noqa: F401
    from .. import warmup
    from ..timeline import links, memory  # noqa: F401 - the tables' links, the memory owners
    from ..timeline.model import Timeline
    Timeline()
    warmup.run_pending()
    gc.freeze()


def _decode_one(path: Path, rng: tuple[int, int]) -> dict:
    """One range's columns and what its Builder kept, ready to merge."""
    build = Builder()
    specials, _, shapes = kr.decode_in_ranges(path, [rng], build, lambda stage, fraction: None)
    return {"cols": build.columns(single_as_is=True),
            "vocab": {t: list(v) for t, v in build.vocab.items()},
            "cats": list(build.cat_rank), "counts": dict(build.cat_counts),
            "specials": specials, "shapes": shapes,
            "flow_chunks": build.flow_chunks, "op_inputs": build.op_inputs,
            "call_stacks": build.call_stacks, "window": build.window,
            "launch_facts": build.launch_facts,
            "bad_ts": build.bad_ts, "non_x": build.non_x, "memory": build.memory}


def _worker(path: str, ranges: list, counter, send, fd) -> None:
    """In a worker: decode the ranges it takes; send {index: result} (each written into the
    memory file fd as it is decoded, where there is one), or nothing when a range does not
    decode (the parent decodes it and raises the error itself)."""
    try:
        put = shared_result.Writer(fd).put
        out = {i: put(_decode_one(Path(path), ranges[i])) for i in taken(counter, len(ranges))}
        send.send(out)
    except BaseException:   # noqa: BLE001 - the parent decodes whatever did not come back
        pass
    finally:
        send.close()


def _merge_all(build: Builder, parts: list[dict]):
    """Every range's result appended to build in file order: (specials, first event index of
    each range, whether an op had "Input Dims")."""
    specials, firsts, shapes, count = [], [], False, 0
    for got in parts:
        specials += got["specials"]
        firsts.append(count)
        shapes |= got["shapes"]
        count += _merge(build, got, count)
    build.saw_dims = shapes
    return specials, firsts, shapes


def _merge(build: Builder, got: dict, offset: int) -> int:
    """Append one range's result to build, renumbering names and category ranks; returns the
    range's event count."""
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
    build.launch_facts += got["launch_facts"]
    if got["window"]:
        lo, hi = got["window"]
        build.window = (min(lo, build.window[0]), max(hi, build.window[1])) if build.window \
            else (lo, hi)
    build.bad_ts += got["bad_ts"]
    build.non_x += got["non_x"]
    build.memory.merge(got["memory"])        # profile_memory [memory] events, in file order
    return sum(got["counts"].values())

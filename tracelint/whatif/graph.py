"""The run's dependency graph as arrays, built from a Timeline of either format.

Two node sets, each a set of numpy arrays in time order:

* host items: every runtime/driver API call, plus zero-length markers (thread start, thread
  end, iteration boundaries), chained per thread. Each item starts a fixed gap after the item
  before it ends (``after``), or a fixed offset after it starts when it is nested inside it
  (``inside``). The gaps are the host's own work between calls (framework, Python), kept fixed.
* GPU ops: kernels, copies and memsets. An op starts at the latest of: its launch call's start
  plus a launch latency (correlation id), its stream predecessor's end plus a queue gap, and
  the end of an op on another stream it waited for (event record -> stream wait, inferred from
  the timing because neither importer keeps the event's record id).

A host call that returned just after a GPU op it waited for (synchronize calls, blocking
copies, implicit syncs) is ``blocking`` (found in blocking.py): it ends at the later of its own
cost and that op's end plus the return latency seen in the trace. Offsets are chosen so that the binding constraint of
every node reproduces its traced time exactly; the others get a typical value clipped to what
the trace allows, so a replay without edits reproduces the trace and an edit moves only what
really depends on it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from ..timeline.codes import row_codes, stable_order
from ..timeline.model import Timeline
from ..timeline.schema import share_constant_columns, shared_if_constant
from .blocking import blocking_calls
from .indexes import index_dtype, narrow

#: host item kinds
API, MARK = 0, 1
GPU_TABLES = ("kernels", "copies", "memsets")
#: An op waited for another stream's op when it started within this long of that op's end.
XSTREAM_SLACK_NS = 10_000


@dataclass
class RunGraph:
    """Arrays of the graph; see the module docstring for their meaning."""

    span_start: int
    span_end: int
    # host items
    h_thread: np.ndarray
    h_start: np.ndarray
    h_dur: np.ndarray           # traced duration (h_end is start + duration, made on use)
    h_kind: np.ndarray          # int8: API | MARK
    h_name: pd.Categorical      # call name ('' for markers)
    h_role: pd.Categorical      # launch | sync | copy | memset | alloc | other | marker
    # links between nodes (h_prev, h_target, g_row, g_launch, g_spred, g_xpred) are
    # int32 below 2**31 events (index_dtype): 23 M host items and 10 M ops at 10 M kernels
    h_prev: np.ndarray          # previous item on the thread, -1: anchored at its own time
    h_inside: np.ndarray        # bool: offset from prev's start instead of its end
    # offsets and durations (h_gap, g_lat, g_qgap, g_xgap, h_dur, g_dur) are int32 where every
    # value fits (narrow()); an edit writes into an int64 copy (replay.Plan.writable)
    h_gap: np.ndarray           # offset from prev's end (or start when inside)
    h_target: np.ndarray        # GPU op a blocking call waited for, -1 when not blocking
    h_ret: np.ndarray           # return latency after the target's end (narrow(): read only)
    h_extra: dict               # host item -> more GPU ops it waits for (device syncs)
    h_api_row: np.ndarray       # api_calls row, -1 for markers (int32 below 2**31 calls)
    h_step: np.ndarray          # iteration number at step markers, -1 elsewhere (narrow())
    h_step_edge: np.ndarray     # int8: 0 step start marker, 1 step end marker, -1 elsewhere
    h_driving: np.ndarray       # bool: the item's thread launches GPU work or waits for it
    # GPU ops
    g_device: np.ndarray
    g_stream: np.ndarray
    g_start: np.ndarray
    g_end: np.ndarray
    g_name: pd.Categorical
    g_table: pd.Categorical     # kernels | copies | memsets
    g_row: np.ndarray
    g_class: pd.Categorical     # kernel class, "copy" or "memset"
    g_launch: np.ndarray        # host item that launched it, -1 unknown
    g_lat: np.ndarray           # launch latency offset
    g_spred: np.ndarray         # previous op on the stream, -1 none
    g_qgap: np.ndarray          # queue gap after the stream predecessor
    g_xpred: np.ndarray         # op on another stream it waited for, -1 none
    g_xgap: np.ndarray
    g_kind: pd.Categorical      # copy kind (H2D, D2H, ...), '' for other ops
    # host ranges (framework ops, NVTX, steps), for edits of host work
    r_thread: np.ndarray
    r_start: np.ndarray
    r_end: np.ndarray
    r_name: pd.Categorical
    r_step: np.ndarray          # bool: an iteration range
    h_gap_owner: pd.Categorical  # innermost host range around the gap before each item
    # processes: a trace may hold several (ranks or replicas under one nsys session)
    thread_pid: np.ndarray      # pid of each thread number
    g_pid: np.ndarray           # pid of each GPU op (stride 0 for one process)
    meta: dict = field(default_factory=dict)

    @property
    def n_host(self) -> int:
        return len(self.h_start)

    @property
    def h_end(self) -> np.ndarray:
        """Each host item's traced end, made on each use: the graph keeps the durations (read
        only, shared by every replay plan, int32 where they fit) and not the ends too (23 M
        items at 10 M kernels: 184 MB)."""
        return self.h_start + self.h_dur

    def h_end_of(self, items: np.ndarray) -> np.ndarray:
        """The traced end of some host items, without the ends of all."""
        return self.h_start[items] + self.h_dur[items]

    @cached_property
    def g_dur(self) -> np.ndarray:
        """Each GPU op's traced duration, shared the same way."""
        return _read_only(narrow(self.g_end - self.g_start))

    @property
    def n_gpu(self) -> int:
        return len(self.g_start)

    @cached_property
    def g_lanes(self) -> np.ndarray:
        """Each GPU op's (device, stream) as one number: the replay's runs of ops (sweep)."""
        return _read_only(row_codes(self.g_device, self.g_stream)[0])

    @cached_property
    def h_chains(self) -> np.ndarray:
        """Host items by thread, each thread in time order: the runs of calls that the replay
        sums instead of visiting one by one (sweep._runs)."""
        return _read_only(np.argsort(self.h_thread, kind="stable").astype(
            index_dtype(self.n_host), copy=False))


def _thread_pids(threads: pd.DataFrame) -> np.ndarray:
    """pid of each thread number (threads: pid, tid, thread)."""
    out = np.full(len(threads), -1, np.int64)
    out[threads["thread"].to_numpy()] = threads["pid"].to_numpy(np.int64)
    return out


def _read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _thread_bounds(tl: Timeline) -> pd.DataFrame:
    """First start and last end of every host thread over its calls, ranges and frames, by
    (pid, tid) ascending (threads with tid < 0 only when no other has one). Bounds per table
    first, then per thread over the tables' few rows: the tables' columns concatenated were
    four 184 MB copies at 23 M calls, and their thread codes 2 s of a 10 s build."""
    tables = [tl.table(t) for t in ("api_calls", "ranges", "python_frames") if len(tl.table(t))]
    if not tables:
        return pd.DataFrame({"pid": [], "tid": [], "lo": [], "hi": []})
    cols = [tuple(t[c].to_numpy(np.int64) for c in ("pid", "tid", "start", "end")) for t in tables]
    some = any((c[1] >= 0).any() for c in cols)
    parts = []
    for pid, tid, start, end in cols:
        keep = tid >= 0
        if some and not keep.all():
            pid, tid, start, end = pid[keep], tid[keep], start[keep], end[keep]
        parts.append(_bounds(pid, tid, start, end))
    pid, tid, lo, hi = (np.concatenate(c) for c in zip(*parts))
    return pd.DataFrame(dict(zip(("pid", "tid", "lo", "hi"), _bounds(pid, tid, lo, hi))))


def _bounds(pid, tid, start, end) -> tuple[np.ndarray, ...]:
    """(pid, tid, least start, greatest end) of each thread, threads by (pid, tid)."""
    codes, first = row_codes(pid, tid)       # codes in (pid, tid) order, as groupby's
    if len(first) == 1:                      # one thread (its pid and tid often stored once)
        return pid[first], tid[first], np.array([start.min()]), np.array([end.max()])
    lo = np.full(len(first), np.iinfo(np.int64).max)
    hi = np.full(len(first), np.iinfo(np.int64).min)
    np.minimum.at(lo, codes, start)
    np.maximum.at(hi, codes, end)
    return pid[first], tid[first], lo, hi


def categorical(values, extra: tuple[str, ...] = ()) -> pd.Categorical:
    """A column's values as a categorical with str categories, plus the `extra` labels as
    categories: the graph keeps each name as a code into its table's names (a string object
    per row was 8 bytes a row and made every comparison and grouping hash strings)."""
    cat = values.array if isinstance(values, pd.Series) else values
    if not isinstance(cat, pd.Categorical) or \
            cat.categories.inferred_type not in ("string", "empty"):   # computed once per Index
        cat = pd.Categorical(pd.Series(np.asarray(cat, dtype=object), dtype=object).astype(str))
    new = [x for x in extra if x not in cat.categories]
    if not new:
        return cat
    # what add_categories gives, without its check of every category again (0.54 s for the
    # 332,000 range names of a minute of emit_nvtx; the appended index's own check 0.1 s)
    cats = cat.categories.append(pd.Index(new, dtype=cat.categories.dtype))
    return pd.Categorical.from_codes(np.asarray(cat.codes),
                                     dtype=pd.CategoricalDtype(cats, ordered=cat.ordered))


def _host_items(tl: Timeline) -> tuple[pd.DataFrame, pd.DataFrame]:
    """API calls and markers, sorted by thread, then start (markers before calls at a start,
    parents before children), and the threads (pid, tid, thread number). Built one column at
    a time: at 23 M calls a frame of all the parts plus its sorted copy was a 4 GB transient.
    A column with one value throughout is stored once (a trace of one thread: 184 MB each)."""
    api = tl.api_calls
    names = categorical(api["name"], ("",))
    roles = categorical(tl.api_role if len(api) else pd.Categorical([]), ("marker",))
    n = len(api)
    parts = [{"pid": api["pid"].to_numpy(np.int64), "tid": api["tid"].to_numpy(np.int64),
              "start": api["start"].to_numpy(np.int64), "end": api["end"].to_numpy(np.int64),
              "kind": np.full(n, API, np.int8), "name": np.asarray(names.codes),
              "role": np.asarray(roles.codes), "api_row": np.arange(n, dtype=index_dtype(n)),
              "step": np.full(n, -1, np.int64), "edge": np.full(n, -1, np.int8),
              "order": np.full(n, 1, np.int8)}]

    def markers(pid, tid, t, step, edge, order) -> None:
        m = len(t)
        parts.append({"pid": pid, "tid": tid, "start": t, "end": t, "kind": np.full(m, MARK, np.int8),
                      "name": np.full(m, names.categories.get_loc(""), names.codes.dtype),
                      "role": np.full(m, roles.categories.get_loc("marker"), roles.codes.dtype),
                      "api_row": np.full(m, -1, index_dtype(n)), "step": np.broadcast_to(step, m),
                      "edge": np.full(m, edge, np.int8), "order": np.full(m, order, np.int8)})
    bounds = _thread_bounds(tl)
    for col, order in (("lo", 0), ("hi", 3)):
        markers(bounds["pid"].to_numpy(np.int64), bounds["tid"].to_numpy(np.int64),
                bounds[col].to_numpy(np.int64), -1, -1, order)
    r = tl.ranges
    if len(r):
        st = r[(r["kind"] == "step").to_numpy()]
        for col, edge, order in (("start", 0, 0), ("end", 1, 2)):
            markers(st["pid"].to_numpy(np.int64), st["tid"].to_numpy(np.int64),
                    st[col].to_numpy(np.int64), st["step"].to_numpy(np.int64), edge, order)

    def column(name: str) -> np.ndarray:
        return np.concatenate([p[name] for p in parts])
    pid, tid = column("pid"), column("tid")
    codes, first = row_codes(pid, tid)
    renumber = np.empty(len(first), dtype=index_dtype(len(first)))   # in order of appearance
    renumber[np.argsort(first, kind="stable")] = np.arange(len(first))
    threads = pd.DataFrame({"pid": pid[first], "tid": tid[first], "thread": renumber})
    del pid, tid
    thread = renumber[codes]
    del codes
    # parents before children at equal starts (longer first); markers before calls at a start
    order = by_thread_then_start(thread, column("start"), lambda: column("order"),
                                 lambda: column("end"))
    cols = {"thread": thread[order]}
    del thread
    for c in parts[0]:
        cols[c] = column(c)[order]
        if c == "step":                 # -1 but at step markers: int32 where numbers fit
            cols[c] = narrow(cols[c])
    parts.clear()                    # the unsorted columns go before the frame is made
    cols["name"] = pd.Categorical.from_codes(cols["name"], dtype=names.dtype)
    cols["role"] = pd.Categorical.from_codes(cols["role"], dtype=roles.dtype)
    return share_constant_columns(pd.DataFrame(cols, copy=False)), threads


def by_thread_then_start(thread: np.ndarray, start: np.ndarray, kind, end) -> np.ndarray:
    """np.lexsort((-end, kind, start, thread)): the host items by thread, start, kind, longest
    first, ties in row order. Sorted by start alone first (the calls come by start: one long
    run), the rare rows of equal starts then by kind and end among themselves, and the whole
    by thread codes at 8 or 16 bits (stable_order): 23 M items took 1.7-2.2 s as a four-key
    lexsort. kind and end: functions giving the columns, made only when starts tie."""
    order = np.argsort(start, kind="stable")
    s = start[order]
    tied = np.flatnonzero(s[1:] == s[:-1])
    del s
    if len(tied):
        at = np.union1d(tied, tied + 1)              # positions in runs of equal starts
        rows = order[at]
        k, e = kind(), end()
        order[at] = rows[np.lexsort((-e[rows], k[rows], start[rows]))]
        del k, e
    return order[stable_order(thread[order])]


def _chain(thread: np.ndarray, start: np.ndarray, end: np.ndarray):
    """Per thread: the item holding the running maximum end before each item, and whether
    the item starts inside it (nested) or after it. In place where it can: at 23 M host items
    each temporary is 184 MB."""
    n = len(start)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.int64)
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.not_equal(thread[1:], thread[:-1], out=first[1:])
    # running max of end within each thread: offset ends by thread so one accumulate suffices
    big = np.int64(1) << np.int64(62)
    key = thread.astype(np.int64)                  # a copy, whatever thread's dtype
    key *= big // max(int(thread.max()) + 1, 1)
    key += end
    key -= end.min()
    above = key >= np.maximum.accumulate(key)
    del key
    holder = np.arange(n, dtype=index_dtype(n))    # links int32 from the start (build peak)
    holder[~above] = 0
    del above
    np.maximum.accumulate(holder, out=holder)
    prev = np.empty(n, dtype=holder.dtype)
    prev[0] = -1
    prev[1:] = holder[:-1]
    del holder
    prev[first] = -1
    del first
    p = np.maximum(prev, 0)
    gap = end[p]                                   # the holder's end ...
    inside = (prev >= 0) & (start < gap)
    gap[inside] = start[p[inside]]                 # ... or its start when nested
    np.subtract(start, gap, out=gap)
    gap[prev < 0] = 0
    return prev, inside, gap


def _launch_links(tl: Timeline, act: pd.DataFrame, h: pd.DataFrame) -> np.ndarray:
    """Host item that launched each GPU op (the Timeline's one launch link)."""
    out = np.full(len(act), -1, dtype=index_dtype(len(h)))
    if len(tl.api_calls) == 0 or len(act) == 0:
        return out
    item_of_row = np.full(len(tl.api_calls), -1, dtype=np.int64)
    is_api = h["api_row"].to_numpy() >= 0
    item_of_row[h["api_row"].to_numpy()[is_api]] = np.flatnonzero(is_api)
    for t in GPU_TABLES:
        sel = (act["table"] == t).to_numpy()
        if sel.any():
            rows = tl.launch_index(t)[act["row"].to_numpy()[sel]]
            out[sel] = np.where(rows >= 0, item_of_row[np.maximum(rows, 0)], -1)
    return out


def _gpu_ops(tl: Timeline) -> pd.DataFrame:
    """Kernels, copies and memsets by (device, stream, start), with pid, kernel class and table
    code (ties in table order, as a stable sort of tl.gpu_activity gives them)."""
    act = tl.gpu_activity_by(("device", "stream", "start"))
    pid = np.full(len(act), -1, dtype=np.int64)
    kc = categorical(tl.kernel_class if len(tl.kernels) else pd.Categorical([]), ("copy", "memset"))
    cls = np.full(len(act), -1, dtype=np.int64)     # codes into the kernel classes
    table = np.zeros(len(act), dtype=np.int8)       # codes into GPU_TABLES
    for i, t in enumerate(GPU_TABLES):
        sel = (act["table"] == t).to_numpy()
        rows = act["row"].to_numpy()[sel]
        table[sel] = i
        pid[sel] = tl.table(t)["pid"].to_numpy()[rows]
        cls[sel] = np.asarray(kc.codes)[rows] if t == "kernels" else \
            kc.categories.get_loc("copy" if t == "copies" else "memset")
    act["pid"] = pid
    act["cls"] = pd.Categorical.from_codes(cls, dtype=kc.dtype)
    act["table"] = pd.Categorical.from_codes(table, categories=GPU_TABLES)
    return act


def _median_or(values: np.ndarray, default: int) -> int:
    return int(np.median(values)) if len(values) else default


def _gpu_offsets(g: pd.DataFrame, launch: np.ndarray, h_start: np.ndarray):
    """Stream predecessors, cross-stream waits and the offsets that reproduce each start."""
    n = len(g)
    if len(h_start) == 0:              # no host calls: launch is -1 everywhere; index safely
        h_start = np.zeros(1, dtype=np.int64)
    dev, stream = g["device"].to_numpy(), g["stream"].to_numpy()
    start, end = g["start"].to_numpy(np.int64), g["end"].to_numpy(np.int64)
    same = np.r_[False, (dev[1:] == dev[:-1]) & (stream[1:] == stream[:-1])]
    spred = np.where(same, np.arange(-1, n - 1, dtype=index_dtype(n)), -1)
    # latest-ending op on the device that ended at or before this start (another stream when
    # it is not the stream predecessor, whose constraint is then the tighter one)
    xpred = np.full(n, -1, dtype=index_dtype(n))
    for d in np.unique(dev):
        on = np.flatnonzero(dev == d)
        by_end = on[np.argsort(end[on], kind="stable")]
        k = np.searchsorted(end[by_end], start[on], side="right") - 1
        cand = np.where(k >= 0, by_end[np.maximum(k, 0)], -1)
        xpred[on] = np.where((cand >= 0) & (stream[np.maximum(cand, 0)] != stream[on]), cand, -1)
    has_l, has_s, has_x = launch >= 0, spred >= 0, xpred >= 0
    slack_l = np.where(has_l, start - h_start[np.maximum(launch, 0)], 0)
    slack_s = np.where(has_s, start - end[np.maximum(spred, 0)], 0)
    slack_x = np.where(has_x, start - end[np.maximum(xpred, 0)], 0)
    # typical launch latency: ops launched after their stream had drained (nothing else to
    # wait for); typical queue gap: ops launched so early that the latency cannot explain
    # their start (they waited in the queue)
    launched = np.where(has_l, h_start[np.maximum(launch, 0)], 0)
    pred_end = np.where(has_s, end[np.maximum(spred, 0)], 0)
    xwait = has_x & (slack_x <= XSTREAM_SLACK_NS)
    # ops that waited for another stream (a collective launched early behind an event wait)
    # say nothing of the launch latency: left out, or their waits would inflate it
    lat0 = _median_or(slack_l[has_l & ~xwait & (~has_s | (launched >= pred_end))], 5_000)
    q0 = _median_or(slack_s[has_s & has_l & (launched + max(lat0, 0) < pred_end)], 1_000)
    del launched, pred_end, has_x     # temporaries die as soon as they are used: 10 M ops
    lat = np.minimum(slack_l, max(lat0, 0))
    qgap = np.minimum(slack_s, max(q0, 0))
    xgap = np.where(xwait, slack_x, 0)
    del slack_x
    xpred[~xwait] = -1
    neg = np.int64(-(1 << 62))
    t_l = np.where(has_l, start - slack_l + lat, neg)
    t_s = np.where(has_s, start - slack_s + qgap, neg)
    best = np.maximum(t_l, t_s)
    best[xwait] = np.maximum(best[xwait], start[xwait])
    short = best < start           # nothing explains the start exactly: make the nearest exact
    del best
    fix_s = short & has_s & ((t_s >= t_l) | ~has_l)
    del t_l, t_s
    fix_l = short & has_l & ~fix_s
    qgap[fix_s] = slack_s[fix_s]
    lat[fix_l] = slack_l[fix_l]
    anchored = short & ~fix_s & ~fix_l & ~xwait     # no dependency at all: keep its time
    return spred, qgap, xpred, xgap, lat, anchored


def _gap_owners(tl: Timeline, r_thread: np.ndarray, thread: np.ndarray, at: np.ndarray,
                want: np.ndarray) -> np.ndarray:
    """Name of the innermost range (op, NVTX; not a step) on the item's thread around time
    `at`, for the items in `want`; '' elsewhere. Lets the critical path name host work."""
    r = tl.ranges
    names = categorical(r["name"] if len(r) else pd.Categorical([]), ("",))
    out = np.full(len(at), names.categories.get_loc(""), dtype=np.int64)    # codes of names
    ok = (r_thread >= 0) & (r["kind"] != "step").to_numpy() if len(r) else np.zeros(0, bool)
    rows = np.flatnonzero(ok)
    if len(rows) == 0 or not want.any():
        return pd.Categorical.from_codes(out, dtype=names.dtype)
    start, end = r["start"].to_numpy(np.int64), r["end"].to_numpy(np.int64)
    parent = r["parent"].to_numpy(np.int64)
    lo = int(min(start[rows].min(), at[want].min()))
    big = np.int64(1) << np.int64(42)
    rkey = r_thread[rows] * big + np.minimum(start[rows] - lo, big - 1)
    order = np.argsort(rkey, kind="stable")
    q = np.flatnonzero(want)
    qkey = thread[q].astype(np.int64) * big + np.minimum(at[q] - lo, big - 1)
    k = np.searchsorted(rkey[order], qkey, side="right") - 1
    cand = np.where(k >= 0, rows[order[np.maximum(k, 0)]], -1)
    for _ in range(64):                      # climb to the enclosing range while outside
        c = np.maximum(cand, 0)
        outside = (cand >= 0) & ((end[c] <= at[q]) | (r_thread[c] != thread[q]))
        if not outside.any():
            break
        cand = np.where(outside, parent[c], cand)
        cand = np.where((cand >= 0) & ~ok[np.maximum(cand, 0)], -1, cand)
    out[q] = np.where(cand >= 0, np.asarray(names.codes)[np.maximum(cand, 0)], out[q])
    return pd.Categorical.from_codes(out, dtype=names.dtype)


def build(tl: Timeline) -> RunGraph:
    """The dependency graph of one process-level trace (one rank)."""
    h, threads = _host_items(tl)
    thread = h["thread"].to_numpy()                 # int32: thread numbers (index_dtype)
    hs, he = h["start"].to_numpy(np.int64), h["end"].to_numpy(np.int64)
    prev, inside, gap = _chain(thread, hs, he)
    g = _gpu_ops(tl)
    launch = _launch_links(tl, g, h)
    spred, qgap, xpred, xgap, lat, anchored = _gpu_offsets(g, launch, hs)
    launch = np.where(anchored, -1, launch)
    target, ret, extra = blocking_calls(tl, h, g, launch, h["kind"].to_numpy() == API)
    lo, hi = tl.span
    r = tl.ranges
    r_thread = r[["pid", "tid"]].merge(threads, on=["pid", "tid"], how="left")["thread"] \
        .fillna(-1).to_numpy(np.int64)
    p = np.maximum(prev, 0)
    after = (prev >= 0) & ~inside & (gap > 0)
    owners = _gap_owners(tl, r_thread, thread, he[p] + gap // 2, after)
    kinds = categorical(tl.copies["kind"] if len(tl.copies) else pd.Categorical([]), ("",))
    kind = np.full(len(g), kinds.categories.get_loc(""), dtype=np.int64)
    cp = (g["table"] == "copies").to_numpy()
    kind[cp] = np.asarray(kinds.codes)[g["row"].to_numpy()[cp]]
    drives = np.zeros(int(thread.max()) + 1 if len(thread) else 0, bool)
    drives[thread[launch[launch >= 0]]] = True
    drives[thread[target >= 0]] = True
    ix = index_dtype(2 * len(hs) + len(g))     # every event id of a replay fits (replay._order)
    return RunGraph(
        span_start=int(lo), span_end=int(hi),
        h_thread=thread, h_start=hs, h_dur=_read_only(narrow(he - hs)),
        h_kind=h["kind"].to_numpy(),
        h_name=h["name"].array, h_role=h["role"].array,
        h_prev=prev.astype(ix, copy=False), h_inside=inside, h_gap=narrow(gap),
        h_target=target.astype(ix, copy=False),
        h_ret=narrow(ret), h_extra=extra,
        h_api_row=h["api_row"].to_numpy(), h_step=h["step"].to_numpy(),
        h_step_edge=h["edge"].to_numpy(), h_driving=shared_if_constant(drives[thread]),
        g_device=shared_if_constant(g["device"].to_numpy(np.int64)),
        g_stream=shared_if_constant(g["stream"].to_numpy(np.int64)),
        g_start=g["start"].to_numpy(np.int64), g_end=g["end"].to_numpy(np.int64),
        g_name=categorical(g["name"]), g_table=g["table"].array,
        g_row=g["row"].to_numpy(ix), g_class=g["cls"].array,
        g_launch=launch.astype(ix, copy=False), g_lat=narrow(lat),
        g_spred=spred.astype(ix, copy=False), g_qgap=narrow(qgap),
        g_xpred=xpred.astype(ix, copy=False), g_xgap=narrow(xgap),
        g_kind=pd.Categorical.from_codes(kind, dtype=kinds.dtype), r_thread=r_thread,
        r_start=r["start"].to_numpy(np.int64), r_end=r["end"].to_numpy(np.int64),
        r_name=categorical(r["name"] if len(r) else pd.Categorical([])),
        r_step=(r["kind"] == "step").to_numpy(), h_gap_owner=owners,
        thread_pid=_thread_pids(threads), g_pid=shared_if_constant(g["pid"].to_numpy(np.int64)),
        meta={"format": tl.meta.format, "anchored_ops": int(anchored.sum())})

"""Kineto columns -> Timeline tables: sorted by start, names as categoricals, the derived
columns (launch link, copy and memset kinds, sync types, steps, nesting, Python frames) and the
counter samples."""
from __future__ import annotations

import re
from typing import Callable

import numpy as np
import pandas as pd

from ..timeline import classify
from ..timeline.model import Timeline
from ..timeline.nesting import nest
from ..timeline.schema import TABLES, make_table
from . import kineto_launch_args as launch_args
from .kineto_columns import Builder
from .kineto_events import COUNTER_CATS, GPU_TABLES, RANGE_KINDS
from .kineto_values import us_to_ns

_STEP = re.compile(r"^ProfilerStep#(\d{1,15})$")     # longer numbers cannot be an int64 step
_FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$")
_MEMCPY = re.compile(r"Memcpy (\w+)(?: \((\w+) -> (\w+)\))?")
_PAREN = re.compile(r"\((\w+)\)")
_COPY_KIND = {"HtoD": "H2D", "DtoH": "D2H", "DtoD": "D2D", "PtoP": "P2P", "HtoH": "H2H"}
_MEM_KIND = {k: k for k in ("pageable", "pinned", "device", "managed", "array")}


def build_timeline(cols: dict, specials: list[dict], build: Builder,
                   nested: Callable[[], tuple] | None = None) -> Timeline:
    """Sort each table by start, add categoricals and derived columns, build the frames.
    nested: returns the (depth, parent) of cols["ranges"] (sorted already, ranges_work),
    computed elsewhere (a parallel load's worker, kineto_json): the ranges are built last, so
    that it has the longest time."""
    tl = Timeline()
    vocab = {t: list(build.vocab[t]) for t in cols}
    cols = {t: sort_by_start(c) for t, c in cols.items()}
    launch_args.fill(cols, build.launch_facts)       # ROCm: launch facts on the API call
    if "api_calls" in cols:
        c = cols["api_calls"]
        c["api"] = pd.Categorical.from_codes(c["api"], categories=["runtime", "driver"])
        tl.api_calls = _frame("api_calls", c, [classify.strip_api_version(s)
                                               for s in vocab["api_calls"]])
    link = _api_link(tl.api_calls)
    for t in GPU_TABLES:
        if t in cols:     # pid: the launching process (the GPU "pid" is the device)
            cols[t]["pid"], cols[t]["graph_launched"] = link(cols[t]["correlation"])
    if "kernels" in cols:
        tl.kernels = _frame("kernels", cols["kernels"], vocab["kernels"])
    if "copies" in cols:
        kinds = [_copy_kind(s) for s in vocab["copies"]]
        tl.copies = _frame("copies", cols["copies"], vocab["copies"], **{
            k: [x[i] for x in kinds] for i, k in enumerate(("kind", "src_kind", "dst_kind"))})
    if "memsets" in cols:
        tl.memsets = _frame("memsets", cols["memsets"], vocab["memsets"],
                            mem_kind=[_memset_kind(s) for s in vocab["memsets"]])
    if "syncs" in cols:
        tl.syncs = _frame("syncs", cols["syncs"], vocab["syncs"],
                          sync_type=[_sync_type(s) for s in vocab["syncs"]])
    if "python_frames" in cols:
        tl.python_frames = _python_frames(cols["python_frames"], vocab["python_frames"])
    elif build.call_stacks:
        from .call_stacks import frames_from_call_stacks
        cs = build.call_stacks
        tl.python_frames = frames_from_call_stacks(
            *(np.array([c[k] for c in cs], np.int64) for k in range(4)), [c[4] for c in cs])
    tl.metrics = _metrics(specials)
    if "ranges" in cols:
        tl.ranges = _ranges(cols["ranges"], vocab["ranges"], nested() if nested else None)
    return tl


def ranges_work(columns: Callable[[], dict], names: list[str], memory):
    """Yields the (depth, parent) of the sorted ranges columns (columns()), per (pid, tid),
    then the innermost range around each [memory] event (kineto_memory.MemoryColumns.owners):
    the two largest steps after a decode (49 and 45 ms of the 250 ms serial tail on the 287 MB
    reference). Pure: a parallel load runs it in a forked worker (forking.beside) while this
    process builds the other tables, and uses the nesting while the owners are made."""
    c = columns()
    depth, parent = _nest(c)
    yield depth, parent
    events = len(memory.rows()[0])
    yield memory.owners(_ranges(c, names, (depth, parent))) if events else None


def sort_by_start(c: dict) -> dict:
    """Rows by start, then by the rank of their category (order of first appearance in the
    file), then in file order, whatever chunks the events were decoded in; in place: the
    unsorted arrays are dropped one by one (memory peak). Sorted columns (no cat_rank left)
    are returned as they are."""
    if "cat_rank" not in c:
        return c
    rank = c.pop("cat_rank")
    order = (np.argsort(c["start"], kind="stable") if (rank == rank[:1]).all()
             else np.lexsort((rank, c["start"])))
    del rank
    for k in list(c):
        c[k] = c[k][order]
    return c


def _cat(codes: np.ndarray, labels: list[str]) -> pd.Categorical:
    """Categorical of labels[code]; labels may repeat (e.g. after stripping API versions)."""
    uniq, inv = np.unique(np.asarray(labels, dtype=object), return_inverse=True)
    return pd.Categorical.from_codes(inv.reshape(-1)[codes], categories=uniq)


def _frame(table: str, c: dict, names: list[str], **by_name: list[str]) -> pd.DataFrame:
    """The table's columns from c; names and by_name give labels per distinct event name."""
    if "name" in TABLES[table]:
        by_name["name"] = names
    data = {k: v for k, v in c.items() if k in TABLES[table]}
    data.update({k: _cat(c["name"], labels) for k, labels in by_name.items()})
    return make_table(table, data, len(c["start"]))


def _api_link(api: pd.DataFrame) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """correlation -> (pid of the launching API call or -1, launched through a graph?)."""
    corr = api["correlation"].to_numpy()
    keep = corr >= 0
    index = pd.Index(corr[keep])
    first = ~index.duplicated()
    index = index[first]
    pid = api["pid"].to_numpy()[keep][first]
    names = api["name"].cat
    graph = np.array(["GraphLaunch" in str(s) for s in names.categories.tolist()] + [False], bool)
    graph = graph[names.codes.to_numpy()][keep][first]

    def link(c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos = index.get_indexer(c) if len(index) else np.full(len(c), -1)
        hit = (pos >= 0) & (c >= 0)
        safe = np.where(hit, pos, 0)
        return (np.where(hit, pid[safe], -1) if len(pid) else np.full(len(c), -1),
                hit & graph[safe] if len(graph) else hit)
    return link


def _ranges(c: dict, names: list[str], nested: tuple | None = None) -> pd.DataFrame:
    """Ops, annotations, ProfilerStep#N steps and GPU annotations; nested per (pid, tid)
    (nested: their (depth, parent), computed already). c itself is left as it is: a parallel
    load's worker reads the same columns (ranges_work), and this process too if it fails."""
    c = dict(c)
    step = np.array([int(m.group(1)) if (m := _STEP.match(s)) else -1 for s in names])[c["name"]]
    is_step = (step >= 0) & (c["kind"] <= 1)
    c["step"] = np.where(is_step, step, -1)
    c["depth"], c["parent"] = nested or _nest(c)
    c["kind"] = pd.Categorical.from_codes(np.where(is_step, 3, c["kind"]), categories=RANGE_KINDS)
    return _frame("ranges", c, names)


def _python_frames(c: dict, names: list[str]) -> pd.DataFrame:
    """ "path/file.py(123): func" -> file, line, function; "<built-in ...>" keeps its name."""
    parsed = [(m.group(1), int(m.group(2)), m.group(3)) if (m := _FRAME.match(s)) else (s, -1, s)
              for s in names]
    c["line"] = np.array([p[1] for p in parsed], np.int64)[c["name"]]
    c["depth"], c["parent"] = _nest(c)
    return _frame("python_frames", c, names, file=[p[0] for p in parsed],
                  function=[p[2] for p in parsed])


def _nest(c: dict) -> tuple[np.ndarray, np.ndarray]:
    """depth/parent per (pid, tid)."""
    key = (c["pid"] << 32) | (c["tid"] & 0xFFFFFFFF)
    return nest(key, c["start"], c["end"])


def _copy_kind(name: str) -> tuple[str, str, str]:
    """ "Memcpy HtoD (Pageable -> Device)" -> ("H2D", "pageable", "device")."""
    m = _MEMCPY.search(name)
    if not m:
        return "other", "unknown", "unknown"
    src, dst = (m.group(2) or "").lower(), (m.group(3) or "").lower()
    return (_COPY_KIND.get(m.group(1), "other"), _MEM_KIND.get(src, "unknown"),
            _MEM_KIND.get(dst, "unknown"))


def _memset_kind(name: str) -> str:
    m = _PAREN.search(name)
    return _MEM_KIND.get(m.group(1).lower(), "unknown") if m else "unknown"


def _sync_type(name: str) -> str:
    """Kineto cuda_sync names: Stream Sync, Event Sync, Stream Wait Event, Context Sync."""
    n = name.lower()
    for prefix, kind in (("stream wait", "stream_wait_event"), ("stream", "stream"),
                         ("event", "event"), ("context", "device"), ("device", "device")):
        if n.startswith(prefix):
            return kind
    return "unknown"


def _metrics(specials: list[dict]) -> pd.DataFrame:
    """Counter samples: CUPTI range-profiler args (one row per metric) and "C" events."""
    rows = []
    for e in specials:
        args, pid, name = e.get("args"), e.get("pid"), e.get("name") or ""
        per_kernel = e.get("cat") in COUNTER_CATS   # per-kernel: tl.kernel_counters instead
        if not isinstance(args, dict) or per_kernel or e.get("ph") != "C":
            continue
        for key, v in args.items():
            try:
                value = float(v)
            except (TypeError, ValueError):
                continue
            rows.append((pid if per_kernel and isinstance(pid, int) else -1, e.get("ts"),
                         key if per_kernel or not name else f"{name}.{key}", value))
    dev, ts, metric, value = zip(*rows) if rows else ((), (), (), ())
    ns, ok = us_to_ns(list(ts))
    frame = make_table("metrics", {"device": np.array(dev, np.int64), "ts": ns,
                                   "metric": pd.Categorical(metric), "value": np.array(value)},
                       len(rows))
    return frame[ok].reset_index(drop=True)

"""What the host thread did while a device sat idle: the idle windows' time on one host thread,
attributed by exclusive (self) time to the activity that ran it.

Every interval the trace records on the thread takes part: framework ops and NVTX / user
annotation ranges (`ranges`, not iteration or GPU-side ranges), Python frames
(`python_frames`: Kineto `python_function` events with `with_stack`, nsys backtraces) and
CUDA / HIP API calls (`api_calls`). They nest by time (timeline.nesting), so each instant of a
window belongs to the innermost interval covering it: a row's exclusive time in the windows is
its overlap with them minus its children's; nesting is never counted twice. An instant that no
interval covers is *unrecorded* (the host ran code the trace does not show, or nothing).

Each row gets an activity category, from its name (and for Python frames its file):

* context categories, which claim the exclusive time of everything nested in them, named by
  their outermost range of that category: *data_loading* (DataLoader `__next__`, collate,
  `Dataset.__getitem__`, frames in torch/utils/data, so a dataset's own `__getitem__` called
  from there too), *compilation* (Dynamo / Inductor / AOTAutograd
  frames and `dynamo_timed` ranges, the Dynamo cache lookup), *gc* (`Python GC` events from
  `record_python_gc_info`, `gc.collect`), *logging* (`print`, the logging module,
  TensorBoard / wandb / tqdm / mlflow writers);
* *sync*: a host call that blocks until the device finishes (classify.blocks_host), always
  itself, even inside a context;
* otherwise the row's own kind: *cpu_op* (framework ops, `aten::...`), *python* (a Python
  function; library frames count for the innermost user function that called them),
  *annotation* (an NVTX or record_function range's own time), *cuda_api* (any other
  runtime or driver call: launches, allocation, module loading).

Each activity carries the innermost user Python frame around it (file, line, function), when
the trace has stacks: that is the line to change.
"""
from __future__ import annotations

import heapq
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import classify, intervals
from .codes import CodedText, row_codes
from .nesting import nest

CONTEXT = ("data_loading", "compilation", "gc", "logging")
CATEGORIES = CONTEXT + ("sync", "cpu_op", "python", "annotation", "cuda_api", "unrecorded")
#: The attribution works on category codes (indices into CATEGORIES), not strings per row.
_CODE = {c: i for i, c in enumerate(CATEGORIES)}
_IS_CONTEXT = np.isin(np.array(CATEGORIES, dtype=object), CONTEXT)
_SYNC, _PYTHON = _CODE["sync"], _CODE["python"]
#: Rows of a thread tested against the windows at a time (bounds the test's temporaries).
ROWS_AT_ONCE = 1 << 20
LABEL = {
    "data_loading": "data loading", "compilation": "compilation (Dynamo/Inductor)",
    "gc": "Python garbage collection", "logging": "logging/printing",
    "sync": "blocked in a synchronous call", "cpu_op": "CPU ops", "python": "Python code",
    "annotation": "annotated host code", "cuda_api": "CUDA/HIP API calls",
    "unrecorded": "no host activity recorded",
}

#: Names by activity (ranges: the range name; Python frames: "file function").
_DATA = re.compile(r"DataLoader|collate|Dataset\.__getitem__|torch/utils/data/|_next_data", re.I)
_COMPILE = re.compile(r"dynamo_timed|TorchDynamo|torch/_dynamo/|torch/_inductor/|"
                      r"torch/_functorch/(_aot|aot)|compile_fx|inductor_compile|compile_inner|"
                      r"call_user_compiler|aot_autograd|Dynamo Cache Lookup", re.I)
_GC = re.compile(r"^Python GC$|^gc$|^gc\.collect|<built-in function collect>|\bgc\.py\b")
_LOGGING = re.compile(r"<built-in function print>|^print$|/logging/|\blogging\.(info|debug|warning|log)\b|"
                      r"tensorboard|SummaryWriter|wandb|tqdm|mlflow", re.I)


@dataclass
class Activity:
    """One named host activity in the idle windows: ns of exclusive time, where it was."""

    category: str
    name: str
    ns: int
    file: str | None = None
    line: int | None = None
    function: str | None = None
    start: int = -1            # start of its longest contributing range (a time to locate it)

    @property
    def at(self) -> str:
        return f" at {self.file}:{self.line}" if self.file and self.line is not None and self.line >= 0 else ""


@dataclass
class HostIdle:
    """The idle windows' time on one host thread, by activity."""

    pid: int | None
    tid: int | None
    window_ns: int
    by_category: dict = field(default_factory=dict)     # category -> ns (unrecorded included)
    activities: list = field(default_factory=list)      # every Activity, largest first (unrecorded too)
    anchors: dict = field(default_factory=dict)         # (category, name) -> (starts, ends) of its ranges

    @property
    def unrecorded_ns(self) -> int:
        return int(self.by_category.get("unrecorded", 0))

    def top(self) -> Activity | None:
        return self.activities[0] if self.activities else None

    def top_category(self, recorded: bool = False) -> tuple[str, int, Activity | None]:
        """(category, ns, its largest activity) of the category with the most time (recorded:
        leaving out the unrecorded time, e.g. for a thread that is mostly idle)."""
        cats = {c: v for c, v in self.by_category.items() if not (recorded and c == "unrecorded")}
        if not cats:
            return "unrecorded", 0, None
        cat = min(cats, key=lambda c: (-cats[c], c))
        act = next((a for a in self.activities if a.category == cat), None)
        return cat, int(self.by_category[cat]), act

    def headline(self, per: int = 1, recorded: bool = False, site: str | None = None) -> str:
        """The category with the most time and its largest activity: the activity alone when it
        is (nearly) all of the category, else `CPU ops (2.10 ms, 52%), most in `aten::addmm`
        (0.55 ms, 13%) at file:line`."""
        cat, ns, a = self.top_category(recorded)
        if a is None:
            return ""
        if cat == "unrecorded" or a.ns >= 0.9 * ns:
            return self.describe(a, per, site)
        return f"{LABEL[cat]} ({self._amount(ns, per)}), most in {self._named(a, per, site)}"

    def anchors_of(self, category: str) -> tuple[np.ndarray, np.ndarray]:
        """Start and end of every range that names an activity of the category."""
        parts = [v for (c, _), v in self.anchors.items() if c == category]
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return (np.concatenate([p[0] for p in parts]).astype(np.int64),
                np.concatenate([p[1] for p in parts]).astype(np.int64))

    def describe(self, a: Activity | None = None, per: int = 1, site: str | None = None) -> str:
        """`name` (1.90 ms, 83%) at file:line — the activity's time (divided by `per`, e.g. per
        iteration) and its share of the windows. site: the caller's wording of the source
        location instead of the frame's raw file:line (torch.profiler names a frame by the line
        that defines it; engine.location says which kind of line it is)."""
        a = a or self.top()
        if a is None:
            return ""
        if a.category == "unrecorded":
            return f"no host activity recorded ({self._amount(a.ns, per)})"
        return f"{LABEL[a.category]} {self._named(a, per, site)}"

    def _amount(self, ns: int, per: int) -> str:
        share = ns / self.window_ns if self.window_ns else 0.0
        return f"{ns / max(per, 1) / 1e6:.2f} ms{' per iteration' if per > 1 else ''}, {share:.0%}"

    def _named(self, a: Activity, per: int, site: str | None = None) -> str:
        at = "" if a.at and a.at[4:] in a.name else a.at     # a Python function names its line
        if site is not None:
            at = f" {site}" if site else ""
        return f"`{_short(a.name)}` ({self._amount(a.ns, per)}){at}"

    def breakdown(self) -> str:
        cats = sorted(((c, v) for c, v in self.by_category.items() if v >= 0.005 * self.window_ns and v > 0),
                      key=lambda kv: -kv[1])
        return ", ".join(f"{LABEL[c]} {v / 1e6:.2f} ms ({v / max(self.window_ns, 1):.0%})" for c, v in cats)


def _short(name: str) -> str:
    """enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ -> DataLoader __next__ form
    stays recognisable; only very long names are cut."""
    return name if len(name) <= 90 else name[:87] + "..."


def launching_thread(ctx, device: int) -> tuple[int, int] | None:
    """(pid, tid) of the host thread that launched most of the device's work; else the thread
    of the iteration ranges; None when the trace records neither."""
    tl = ctx.tl
    act = tl.gpu_activity
    li = ctx.activity_launch[act["device"].to_numpy() == device]
    li = li[li >= 0]
    a = tl.api_calls
    if len(li):
        pid, tid = a["pid"].to_numpy()[li], a["tid"].to_numpy()[li]
        codes, first = row_codes(pid, tid)     # np.unique(axis=0)'s order, 20-40x faster
        top = first[int(np.argmax(np.bincount(codes)))]
        return int(pid[top]), int(tid[top])
    r = tl.ranges
    st = r[classify.in_labels(r["kind"], ("step",))] if len(r) else r
    if len(st):
        return int(st["pid"].iat[0]), int(st["tid"].iat[0])
    return None


def attribute(ctx, thread: tuple[int, int] | None, starts, ends) -> HostIdle:
    """Attribute the time of windows [starts, ends) on one host thread to activities."""
    ws, we = intervals.merge(np.asarray(starts, np.int64), np.asarray(ends, np.int64))
    window = int((we - ws).sum())
    pid, tid = thread if thread is not None else (None, None)
    out = HostIdle(pid, tid, window)
    # only the rows that overlap the windows are built (the launching thread of a 10 M-kernel
    # export holds tens of millions of calls; the same rows as filtering the whole thread)
    rows = _thread_rows(ctx.tl, pid, tid,
                        lambda s, e: intervals.overlaps_any(s, e, ws, we))
    if rows is None or len(rows["start"]) == 0:
        out.by_category = {"unrecorded": window} if window else {}
        out.activities = [Activity("unrecorded", "", window)] if window else []
        return out
    s, e = rows["start"], rows["end"]
    _, parent = nest(np.zeros(len(s), np.int64), s, e)
    excl = _exclusive_nested(s, e, ws, we, parent)
    if excl is None:                  # partial overlaps or twin rows: the sweep decides
        excl = _exclusive(s, e, ws, we)
    cat, anchor, loc = _categorise(rows, parent)
    ms, me = intervals.merge(s, e)
    unrecorded = window - int(intervals.overlap_each(ws, we, ms, me).sum())
    per_cat = np.zeros(len(CATEGORIES), np.int64)
    np.add.at(per_cat, cat, excl)
    # every category present, even at 0 ns, by its name
    by_cat = {CATEGORIES[c]: int(per_cat[c]) for c in sorted(np.unique(cat).tolist(),
                                                               key=CATEGORIES.__getitem__)}
    if unrecorded > 0:
        by_cat["unrecorded"] = unrecorded
    out.by_category = by_cat
    per_anchor = np.zeros(len(s), np.int64)
    np.add.at(per_anchor, anchor, excl)
    a_rows = np.flatnonzero(per_anchor > 0)
    name_codes = rows["name"].codes[_name_rows(rows, cat, anchor)[a_rows]]
    ns = per_anchor[a_rows]
    acts = []
    for at in _activity_groups(cat[a_rows], name_codes):    # by (category, name)
        best = int(a_rows[at[int(np.argmax(ns[at]))]])
        frame = loc[best]
        c, n = CATEGORIES[cat[a_rows[at[0]]]], str(rows["name"].labels[name_codes[at[0]]])
        out.anchors[(c, n)] = (s[a_rows[at]], e[a_rows[at]])
        acts.append(Activity(c, n, int(ns[at].sum()),
                             *((str(rows["file"][frame]), int(rows["line"][frame]),
                                str(rows["function"][frame])) if frame >= 0 else (None, None, None)),
                             start=int(s[best])))
    if unrecorded > 0:
        acts.append(Activity("unrecorded", "", unrecorded))
    acts.sort(key=lambda a: (-a.ns, a.category, a.name))
    out.activities = acts
    return out


def _activity_groups(cat: np.ndarray, name: np.ndarray) -> list[np.ndarray]:
    """Positions of each distinct (category, name) pair, pairs in order of first appearance
    and positions in order: a pandas group-by over the pairs cost 0.6 ms a group."""
    key = cat.astype(np.int64) * (int(name.max()) + 1 if len(name) else 1) + name
    group, _ = pd.factorize(key)                 # codes in order of first appearance
    order = np.argsort(group, kind="stable")
    return np.split(order, np.flatnonzero(np.diff(group[order])) + 1) if len(order) else []


def other_threads(ctx, thread: tuple[int, int] | None, starts, ends, top: int = 3) -> list[tuple[tuple[int, int], int, "HostIdle"]]:
    """The other host threads that recorded work in the windows: ((pid, tid), ns covered by
    their recorded intervals, their own attribution), busiest first, at most `top`."""
    tl = ctx.tl
    ws, we = intervals.merge(np.asarray(starts, np.int64), np.asarray(ends, np.int64))
    if len(ws) == 0:
        return []
    parts = []
    for t in ("api_calls", "ranges", "python_frames"):     # their rows within the windows' span
        df = tl.table(t)
        if not len(df):
            continue
        pid, tid = df["pid"].to_numpy(), df["tid"].to_numpy()
        if thread is not None and pid.strides == tid.strides == (0,) and \
                (int(pid[0]), int(tid[0])) == tuple(thread):
            continue          # one thread, the launching one: a frame of its 23 M calls was 0.7 GB
        on = (df["end"].to_numpy() > ws[0]) & (df["start"].to_numpy() < we[-1])
        if thread is not None:
            on &= ~((pid == thread[0]) & (tid == thread[1]))
        rows = np.flatnonzero(on)
        parts.append(pd.DataFrame({"pid": pid[rows], "tid": tid[rows],
                                   "start": df["start"].to_numpy()[rows],
                                   "end": df["end"].to_numpy()[rows]}))
    if not parts:
        return []
    allr = pd.concat(parts, ignore_index=True)
    out = []
    for (pid, tid), g in allr.groupby(["pid", "tid"], sort=True):   # loop over threads (few)
        ms, me = intervals.merge(g["start"].to_numpy(np.int64), g["end"].to_numpy(np.int64))
        ns = int(intervals.overlap_each(ws, we, ms, me).sum())
        if ns > 0:
            out.append(((int(pid), int(tid)), ns))
    out.sort(key=lambda x: (-x[1], x[0]))
    return [(t, ns, attribute(ctx, t, ws, we)) for t, ns in out[:top]]


def others_text(others: list, window_ns: int) -> str:
    """' Other host threads in that time: tid 12 1.20 ms (40%), mostly ...' or ''."""
    if not others:
        return ""
    parts = [f"pid {t[0]} tid {t[1]} busy {ns / 1e6:.2f} ms ({ns / max(window_ns, 1):.0%}), mostly {h.headline(recorded=True)}"
             for t, ns, h in others]
    return " Other host threads in that time: " + "; ".join(parts) + "."


def _exclusive_nested(s: np.ndarray, e: np.ndarray, ws: np.ndarray, we: np.ndarray,
                      parent: np.ndarray) -> np.ndarray | None:
    """_exclusive's result without a sweep when the rows nest properly: each row's time in the
    windows minus its children's. None when they do not (a row not inside its parent,
    overlapping siblings, two rows with the same start and end): then only the sweep's
    tie rules decide."""
    has = parent >= 0
    p = parent[has]
    if (s[p] > s[has]).any() or (e[has] > e[p]).any():
        return None
    order = np.lexsort((s, parent))                  # siblings by start, per parent
    same = parent[order][1:] == parent[order][:-1]
    if (e[order][:-1][same] > s[order][1:][same]).any():
        return None
    twin = np.lexsort((e, s))
    if ((s[twin][1:] == s[twin][:-1]) & (e[twin][1:] == e[twin][:-1])).any():
        return None
    cov = intervals.overlap_each(s, e, ws, we)
    owned = cov.copy()
    np.subtract.at(owned, p, cov[has])
    return owned


def _exclusive(s: np.ndarray, e: np.ndarray, ws: np.ndarray, we: np.ndarray) -> np.ndarray:
    """ns of the windows each row owns: every instant goes to the innermost row covering it
    (the latest start; at equal starts the earlier end, then the later row). A sweep, so rows
    that overlap without nesting (partial overlaps in real traces) are never counted twice and
    the total never exceeds the windows."""
    n = len(s)
    owned = np.zeros(n, np.int64)
    if n == 0:
        return owned
    order = np.lexsort((np.arange(n), s))
    pts = np.unique(np.concatenate([s, e]))
    seg_s, seg_e, seg_o = [], [], []
    heap: list = []
    k = 0
    for j in range(len(pts) - 1):       # loop over boundaries: a heap of the open rows
        t = pts[j]
        while k < n and s[order[k]] <= t:
            i = int(order[k])
            heapq.heappush(heap, (-int(s[i]), int(e[i]), -i))
            k += 1
        while heap and heap[0][1] <= t:
            heapq.heappop(heap)
        if heap:
            seg_s.append(t)
            seg_e.append(pts[j + 1])
            seg_o.append(-heap[0][2])
    if seg_s:
        cov = intervals.overlap_each(np.array(seg_s, np.int64), np.array(seg_e, np.int64), ws, we)
        np.add.at(owned, np.array(seg_o, np.int64), cov)
    return owned


def _name_rows(rows: dict, cat: np.ndarray, anchor: np.ndarray) -> np.ndarray:
    """The row that names each anchor: the anchor itself, or, when the anchor is a Python frame
    (`__next__` in dataloader.py), the outermost range of its activity inside it (the
    `enumerate(DataLoader)#...__next__` range), which names the work the same in both formats."""
    name_row = np.arange(len(anchor))
    idx = np.flatnonzero((rows["src"] == 1) & (rows["src"][anchor] == 0) & _IS_CONTEXT[cat])
    idx = idx[np.argsort(rows["start"][idx], kind="stable")][::-1]    # the earliest-starting wins
    name_row[anchor[idx]] = idx
    return name_row


def _thread_rows(tl, pid, tid, keep) -> dict | None:
    """The thread's intervals that keep(start, end) selects, outer sources first (Python
    frames, ranges, API calls), so that at equal bounds the API call nests innermost and a
    range inside its frame."""
    def rows_of(df, m):
        m = np.flatnonzero(m)
        start, end = df["start"].to_numpy(), df["end"].to_numpy()
        # keep() asks row by row: in slices its temporaries stay small (the launching thread
        # of a 3 M-kernel export holds 7 M calls: 480 MiB of them at TL001's peak at once)
        kept = [part[keep(start[part].astype(np.int64), end[part].astype(np.int64))]
                for part in (m[lo:lo + ROWS_AT_ONCE] for lo in range(0, len(m), ROWS_AT_ONCE))]
        return np.concatenate(kept) if len(kept) > 1 else kept[0] if kept else m

    parts = []
    f = tl.python_frames
    if len(f):
        m = rows_of(f, _on(f, pid, tid))
        files = classify.labels_at(f["file"], m)
        func = classify.labels_at(f["function"], m)
        names = np.array([fn if ln < 0 else f"{fn} ({fl}:{ln})"
                          for fn, fl, ln in zip(func, files, f["line"].to_numpy()[m])], dtype=object)
        parts.append(dict(start=f["start"].to_numpy()[m], end=f["end"].to_numpy()[m],
                          name=CodedText.of(names), src=np.zeros(len(m), np.int8),
                          file=CodedText.of(files),
                          line=f["line"].to_numpy()[m], function=CodedText.of(func),
                          kind=CodedText.constant("python", len(m))))
    r = tl.ranges
    if len(r):
        kind = CodedText.categorical(r["kind"], np.arange(len(r)))
        owner = np.isin(kind.labels, ("op", "annotation", "nvtx"))[kind.codes]
        m = rows_of(r, _on(r, pid, tid) & owner)
        n = len(m)
        parts.append(dict(start=r["start"].to_numpy()[m], end=r["end"].to_numpy()[m],
                          name=CodedText.categorical(r["name"], m), src=np.ones(n, np.int8),
                          file=CodedText.constant("", n), line=np.full(n, -1, np.int64),
                          function=CodedText.constant("", n),
                          kind=CodedText(kind.codes[m], kind.labels)))
    a = tl.api_calls
    if len(a):
        m = rows_of(a, _on(a, pid, tid))
        n = len(m)
        parts.append(dict(start=a["start"].to_numpy()[m], end=a["end"].to_numpy()[m],
                          name=CodedText.categorical(a["name"], m), src=np.full(n, 2, np.int8),
                          file=CodedText.constant("", n), line=np.full(n, -1, np.int64),
                          function=CodedText.constant("", n), kind=CodedText.constant("api", n)))
    if not parts:
        return None
    out = {k: CodedText.concat([p[k] for p in parts]) if isinstance(parts[0][k], CodedText)
           else np.concatenate([p[k] for p in parts]) for k in parts[0]}
    out["start"], out["end"] = out["start"].astype(np.int64), out["end"].astype(np.int64)
    return out


def _on(df, pid, tid) -> np.ndarray:
    if pid is None:
        return np.ones(len(df), bool)
    return (df["pid"].to_numpy() == pid) & (df["tid"].to_numpy() == tid)


def own_category(src: int, name: str, file: str, kind: str) -> str:
    """The activity a single interval is, by its source and name (see the module docstring)."""
    text = f"{file} {name}" if src == 0 else name
    if src == 2:
        return "sync" if classify.blocks_host(name) else "cuda_api"
    if _GC.search(name):
        return "gc"
    if src == 1 and classify.dataloader_iter(name) or _DATA.search(text):
        return "data_loading"
    if _COMPILE.search(text):
        return "compilation"
    if _LOGGING.search(text):
        return "logging"
    if src == 0:
        return "python"
    return "cpu_op" if kind == "op" else "annotation"


def _depth(parent: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Nesting depth of each row, as a walk in `order` (start order: parents start no later
    than their children) computes it, depth[i] = depth[parent[i]] + 1: a parent that comes
    later in the order (only possible at equal starts) still counts 0 then. By pointer
    doubling, log2(depth) numpy passes instead of a Python step per row."""
    n = len(parent)
    pos = np.empty(n, np.int64)
    pos[order] = np.arange(n)
    has = parent >= 0
    p = np.maximum(parent, 0)
    up = np.where(has & (pos[p] < pos), parent, -1)     # the links the walk follows
    depth = has.astype(np.int64)
    on = np.flatnonzero(up >= 0)
    while len(on):
        j = up[on]
        depth[on] += depth[j]       # both right-hand sides read before either write
        up[on] = up[j]
        on = on[up[on] >= 0]
    return depth


def _categorise(rows: dict, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: effective category (its code in CATEGORIES), anchor row (the range that names
    the activity) and the
    innermost user Python frame around it (-1: none), top-down over the nesting."""
    n = len(parent)
    # names repeat: each distinct (source, name, file, kind) is classified once, and the rows
    # are mapped to it by codes (a Python step per row was 0.3 s per million rows)
    text = {k: (rows[k].codes, rows[k].labels) for k in ("name", "file", "kind")}
    key, first = row_codes(rows["src"], *(text[k][0] for k in ("name", "file", "kind")))
    own = np.array([_CODE[own_category(int(rows["src"][i]), rows["name"][i], rows["file"][i],
                                       rows["kind"][i])] for i in first.tolist()], np.int64)[key]
    file_code, files = text["file"]
    user_file = np.array([not classify.LIBRARY_CODE.search(str(f)) for f in files], dtype=bool)
    user = (rows["src"] == 0) & (rows["line"] >= 0) & user_file[file_code]
    depth = _depth(parent, np.argsort(rows["start"], kind="stable"))
    cat = own.copy()
    anchor = np.arange(n)
    loc = np.where(user, np.arange(n), -1)
    for d in range(1, int(depth.max()) + 1 if n else 0):    # loop over nesting levels
        i = np.flatnonzero(depth == d)
        p = parent[i]
        pc = cat[p]
        inherit = _IS_CONTEXT[pc] & (own[i] != _SYNC) & (~_IS_CONTEXT[own[i]] | (own[i] == pc))
        cat[i[inherit]] = pc[inherit]
        anchor[i[inherit]] = anchor[p[inherit]]
        loc[i] = np.where(user[i], i, loc[p])
    # library Python (torch/nn/modules/module.py _call_impl, ...) counts for the user function
    # that called it: Python time is named by the user's own functions
    lib = (rows["src"] == 0) & ~user & (cat == _PYTHON) & (loc >= 0)
    lib &= cat[np.maximum(loc, 0)] == _PYTHON
    anchor[lib] = loc[lib]
    return cat, anchor, loc

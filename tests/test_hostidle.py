"""timeline.hostidle: the host thread's time in GPU idle windows, by activity and exclusive
time. Expected values come from the raw files (json.load of the Kineto trace, SQL on the nsys
export) by a different method: a painter's sweep at 1 ns resolution where each instant belongs
to the innermost recorded event (latest start, shortest at equal starts), not the nesting and
subtraction the code uses."""
from __future__ import annotations

import gzip
import json
import sqlite3

import numpy as np
import pytest
from pathlib import Path

from tracelint.api import lint, load
from tracelint.engine.config import Config
from tracelint.engine.context import Context
from tracelint.engine.finding import Layer
from tracelint.synth.builder import TraceBuilder
from tracelint.synth.scenarios import tl013
from tracelint.timeline import hostidle

K = tl013.K
NEXT = tl013.NEXT
STEPS = 4
#: The category each recorded event's own time belongs to, by the test's own knowledge of what
#: the trace planted (aten::stack runs inside the DataLoader, so it is data loading).
CATEGORY = {"aten::stack": "data_loading", NEXT: "data_loading",
            "torch/utils/data/dataloader.py(733): __next__": "data_loading",
            "train.py(42): train": "python", "train.py(44): train": "python",
            "train.py(50): log_metrics": "python", "<built-in function print>": "logging",
            "torch/nn/modules/module.py(1743): _call_impl": "python",
            "Python GC": "gc", "cudaLaunchKernel": "cuda_api", "cudaStreamSynchronize": "sync"}


def _trace() -> tuple[TraceBuilder, list[tuple[int, int, str]]]:
    """Each iteration: 100 µs unrecorded, the DataLoader (400 µs aten::stack + 200 µs of Python
    in dataloader.py), 300 µs of garbage collection and a 170 µs logging frame with a 100 µs
    print and 50 µs of library Python inside, all before its first kernel; then 8 kernels and a sync. Returns the builder
    and the events to add to the Kineto file (GC and print: the builder cannot write them)."""
    b, extra = TraceBuilder(), []
    for s in range(STEPS):
        with b.step(s):
            b.cpu(100_000)
            with b.python("train.py", 42, "train"):
                with b.range(NEXT):
                    with b.python("torch/utils/data/dataloader.py", 733, "__next__"):
                        b.cpu(400_000, name="aten::stack")
                        b.cpu(200_000)
            extra.append((b.cursor, b.cursor + 300_000, "Python GC"))
            b.cpu(300_000)
            with b.python("train.py", 50, "log_metrics"):
                extra.append((b.cursor + 10_000, b.cursor + 110_000, "<built-in function print>"))
                b.cpu(120_000)
                with b.python("torch/nn/modules/module.py", 1743, "_call_impl"):
                    b.cpu(50_000)
            tl013._gpu(b)
            b.sync("cudaStreamSynchronize")
    return b, extra


def _kineto(tmp_path):
    b, extra = _trace()
    path = tmp_path / "t.json.gz"
    b.write_kineto(path)
    d = json.load(gzip.open(path))
    for i, (s, e, name) in enumerate(extra):
        d["traceEvents"].append({"ph": "X", "cat": "python_function", "name": name, "pid": b.pid,
                                 "tid": b.tid, "ts": s / 1000, "dur": (e - s) / 1000,
                                 "args": {"Ev Idx": 90_000 + i}})
    with gzip.open(path, "wt") as f:
        json.dump(d, f)
    return path, d


def _windows(steps, kernels):
    """[step start, first kernel start) of every iteration after the first, in ns."""
    out = []
    for lo, hi in sorted(steps)[1:]:
        first = min(k for k in kernels if k >= lo)
        out.append((lo, first))
    return out


def _paint(windows, events):
    """ns per category over the windows: each instant to the innermost event covering it."""
    lo = min(w[0] for w in windows)
    hi = max(w[1] for w in windows)
    owner = np.full(hi - lo, -1, dtype=np.int64)
    order = sorted(range(len(events)), key=lambda i: (events[i][0], -(events[i][1] - events[i][0])))
    for i in order:       # later starts (and shorter at equal starts) paint over: innermost wins
        s, e, _ = events[i]
        owner[max(s, lo) - lo:max(min(e, hi), lo) - lo] = i
    mask = np.zeros(hi - lo, bool)
    for s, e in windows:
        mask[s - lo:e - lo] = True
    out: dict[str, int] = {}
    vals, counts = np.unique(owner[mask], return_counts=True)
    for v, c in zip(vals, counts):
        cat = "unrecorded" if v < 0 else CATEGORY[events[v][2]]
        out[cat] = out.get(cat, 0) + int(c)
    return out


def _ns(us) -> int:
    return int(round(float(us) * 1000))


def test_kineto_exclusive_time_by_activity(tmp_path):
    path, d = _kineto(tmp_path)
    ev = [e for e in d["traceEvents"] if e.get("ph") == "X"]
    steps = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in ev
             if e["name"].startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation"]
    kernels = [_ns(e["ts"]) for e in ev if e.get("cat") == "kernel"]
    host = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), e["name"]) for e in ev
            if e.get("cat") in ("cpu_op", "user_annotation", "python_function", "cuda_runtime")
            and not e["name"].startswith("ProfilerStep#")]
    win = _windows(steps, kernels)
    want = _paint(win, host)
    assert want["gc"] == 3 * 300_000 and want["logging"] == 3 * 100_000     # the plant, by hand
    assert want["data_loading"] == 3 * 600_000
    tl = load(path)
    ctx = Context(tl)
    thread = hostidle.launching_thread(ctx, 0)
    got = hostidle.attribute(ctx, thread, [w[0] for w in win], [w[1] for w in win])
    assert got.by_category == want
    assert got.window_ns == sum(e - s for s, e in win)
    top = got.top()
    assert (top.category, top.name, top.ns) == ("data_loading", NEXT, want["data_loading"])
    assert (top.file, top.line) == ("train.py", 42)
    names = {(a.category, a.name) for a in got.activities}
    assert ("gc", "Python GC") in names and ("logging", "<built-in function print>") in names
    # library Python counts for the user function that called it: log_metrics' own 20 µs
    # (120 µs less the 100 µs print) plus the 50 µs in module.py, per iteration
    (log,) = [a for a in got.activities if a.name == "log_metrics (train.py:50)"]
    assert (log.category, log.ns) == ("python", 3 * (20_000 + 50_000))


def test_nsys_nvtx_ranges_and_api_calls(tmp_path):
    b, _ = _trace()
    path = tmp_path / "t.sqlite"
    b.write_nsys_sqlite(path)
    db = sqlite3.connect(path)
    steps = db.execute("SELECT start, end FROM NVTX_EVENTS WHERE text LIKE 'ProfilerStep#%'").fetchall()
    kernels = [r[0] for r in db.execute("SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL")]
    host = [(s, e, NEXT) for s, e in db.execute("SELECT start, end FROM NVTX_EVENTS WHERE text = ?", (NEXT,))]
    host += [(s, e, n) for s, e, n in db.execute(
        "SELECT r.start, r.end, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId")]
    win = _windows(steps, kernels)
    want = _paint(win, [(s, e, n.split("_v")[0]) for s, e, n in host])
    assert want["data_loading"] == 3 * 600_000      # nsys records the NVTX range, not the ops
    tl = load(path)
    ctx = Context(tl)
    got = hostidle.attribute(ctx, hostidle.launching_thread(ctx, 0), [w[0] for w in win], [w[1] for w in win])
    assert got.by_category == want
    assert got.top().file is None                   # no Python stacks in this export


def test_no_thread_recorded_is_unrecorded(tmp_path):
    b = TraceBuilder()
    b.launch(K, 10_000)
    b.cpu(500_000)
    b.launch(K, 10_000)
    path = tmp_path / "t.json.gz"
    b.write_kineto(path)
    ctx = Context(load(path))
    got = hostidle.attribute(ctx, (999, 999), [0], [1_000])
    assert got.by_category == {"unrecorded": 1_000} and got.top().category == "unrecorded"


def test_tl001_names_the_activity_with_its_line(tmp_path):
    path, d = _kineto(tmp_path)
    (f,) = [f for f in lint(path, Config(select=["TL001"])).findings if f.severity.value == "warning"]
    # torch.profiler names a frame by its def line: the message says so (engine.location)
    assert f"host thread: data loading `{NEXT}`" in f.message and "defined at train.py:42" in f.message
    facts = f.evidence[Layer.SYSTEM].facts
    assert facts["host_unrecorded_share"].value < 0.2
    assert "Python garbage collection" in f.evidence[Layer.SYSTEM].summary


def test_headline_names_the_category_when_its_time_is_spread():
    """Spread over many ops, the message leads with the category and names its largest op."""
    h = hostidle.HostIdle(1, 1, 1_000_000, by_category={"cpu_op": 600_000, "python": 300_000,
                                                        "unrecorded": 100_000},
                          activities=[hostidle.Activity("python", "f (a.py:3)", 300_000, "a.py", 3, "f"),
                                      hostidle.Activity("cpu_op", "aten::addmm", 200_000, "m.py", 9, "g"),
                                      hostidle.Activity("cpu_op", "aten::relu", 150_000)])
    assert h.headline() == "CPU ops (0.60 ms, 60%), most in `aten::addmm` (0.20 ms, 20%) at m.py:9"
    h.by_category = {"python": 300_000, "unrecorded": 100_000}
    assert h.headline(per=3) == "Python code `f (a.py:3)` (0.10 ms per iteration, 30%)"   # names its line


def test_other_threads_busy_in_the_windows(tmp_path):
    """A second thread (a pin-memory thread) records 200 µs of work inside each window: it is
    listed apart with that time, named by its own activity; the launching thread is unchanged."""
    path, d = _kineto(tmp_path)
    ev = [e for e in d["traceEvents"] if e.get("ph") == "X"]
    steps = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in ev
             if e["name"].startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation"]
    win = _windows(steps, [_ns(e["ts"]) for e in ev if e.get("cat") == "kernel"])
    pid, tid = ev[0]["pid"], 4242
    for lo, _ in win:
        d["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "aten::pin_memory", "pid": pid,
                                 "tid": tid, "ts": (lo + 50_000) / 1000, "dur": 200.0, "args": {}})
    with gzip.open(path, "wt") as f:
        json.dump(d, f)
    ctx = Context(load(path))
    thread = hostidle.launching_thread(ctx, 0)
    assert thread[1] != tid
    (other,) = hostidle.other_threads(ctx, thread, [w[0] for w in win], [w[1] for w in win])
    assert other[0] == (pid, tid) and other[1] == len(win) * 200_000
    assert other[2].headline(recorded=True) == f"CPU ops `aten::pin_memory` (0.60 ms, {0.6e6 / sum(e - s for s, e in win):.0%})"


def test_other_threads_of_a_one_thread_table():
    """API calls of one thread (pid and tid stored once): asked for the launching thread, no
    other thread; asked for another, that one thread with the ns its merged calls cover in
    the windows."""
    from tracelint.timeline.model import Timeline
    from tracelint.timeline.schema import make_table, share_constant_columns
    starts = np.arange(0, 1_000_000, 10_000)
    api = share_constant_columns(make_table("api_calls", {"pid": [7] * 100, "tid": [9] * 100, "start": starts,
                                   "end": starts + 4_000, "name": ["cudaLaunchKernel"] * 100,
                                   "correlation": np.arange(100), "api": ["runtime"] * 100}))
    assert api["pid"].to_numpy().strides == api["tid"].to_numpy().strides == (0,)
    ctx = Context(Timeline(api_calls=api))
    ws, we = [100_000, 500_000], [200_000, 503_000]
    assert hostidle.other_threads(ctx, (7, 9), ws, we) == []
    (other,) = hostidle.other_threads(ctx, (7, 8), ws, we)
    assert other[0] == (7, 9) and other[1] == 10 * 4_000 + 3_000


DATA = Path(__file__).parent / "data"


def _paint_segments(windows, events) -> dict:
    """The painter's rule on elementary segments (long windows): ns per owning event index
    (-1: none), each segment to the covering event painted last (latest start, then shortest)."""
    rank = {i: r for r, i in enumerate(sorted(range(len(events)),
                                              key=lambda i: (events[i][0], -(events[i][1] - events[i][0]))))}
    out: dict = {}
    for lo, hi in windows:
        idx = [i for i, (s, e, _) in enumerate(events) if s < hi and e > lo]
        cuts = sorted({lo, hi} | {t for i in idx for t in events[i][:2] if lo < t < hi})
        for a, b in zip(cuts, cuts[1:]):
            cover = [i for i in idx if events[i][0] <= a and events[i][1] >= b]
            o = max(cover, key=rank.get) if cover else -1
            out[o] = out.get(o, 0) + (b - a)
    return out


@pytest.mark.parametrize("rows_at_once", [hostidle.ROWS_AT_ONCE, 7])
def test_real_cpu_capture_attribution(monkeypatch, rows_at_once):
    """A real torch.profiler CPU capture (tests/data/hostwork_cpu.py: DataLoader with
    num_workers=0, gc.collect(), print each step; record_python_gc_info, with_stack). A CPU
    capture has no GPU idle, so the windows are the host time between one step's optimizer step
    and the next forward's first `aten::linear`. Expected values: the painter's sweep over the
    raw events, each instant's category from the raw events alone (its owner is, or lies inside,
    a `Python GC` / gc.collect event -> gc; a print -> logging; the DataLoader range or a
    torch/utils/data frame -> data loading). The thread's rows are also tested against the
    windows 7 at a time (the slices a 7 M-call thread is read in)."""
    monkeypatch.setattr(hostidle, "ROWS_AT_ONCE", rows_at_once)
    d = json.load(gzip.open(DATA / "hostwork_cpu.json.gz"))
    ev = [e for e in d["traceEvents"] if e.get("ph") == "X"
          and e.get("cat") in ("cpu_op", "user_annotation", "python_function")]
    iv = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), e["name"]) for e in ev]
    steps = sorted(e for s, e, n in iv if n.startswith("Optimizer.step#"))
    linear = sorted(s for s, e, n in iv if n == "aten::linear")
    win = [(a, min(t for t in linear if t > a)) for a in steps if any(t > a for t in linear)]
    assert len(win) >= 4

    def regions(pred):
        return [(s, e) for s, e, n in iv if pred(n)]

    gc_r = regions(lambda n: n in ("Python GC", "<built-in function collect>"))
    log_r = regions(lambda n: n == "<built-in function print>")
    data_r = regions(lambda n: "DataLoader" in n or "torch/utils/data/" in n)

    def inside(ev_i, rs):
        s, e, _ = iv[ev_i]
        return any(a <= s and e <= b for a, b in rs)

    want = {"gc": 0, "logging": 0, "data_loading": 0, "other": 0, "unrecorded": 0}
    for i, ns in _paint_segments(win, iv).items():
        key = ("unrecorded" if i < 0 else "gc" if inside(i, gc_r) else "logging" if inside(i, log_r)
               else "data_loading" if inside(i, data_r) else "other")
        want[key] += ns
    assert want["gc"] > 0 and want["logging"] > 0 and want["data_loading"] > 0

    ctx = Context(load(DATA / "hostwork_cpu.json.gz"))
    pid, tid = ev[0]["pid"], ev[0]["tid"]
    got = hostidle.attribute(ctx, (pid, tid), [w[0] for w in win], [w[1] for w in win])
    cat = got.by_category
    assert cat.get("gc", 0) == want["gc"]
    assert cat.get("logging", 0) == want["logging"]
    assert cat.get("data_loading", 0) == want["data_loading"]
    assert cat.get("unrecorded", 0) == want["unrecorded"]
    assert sum(cat.values()) == got.window_ns == sum(e - s for s, e in win)
    loader = [a for a in got.activities if a.category == "data_loading"][0]
    assert loader.name == "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    assert (Path(loader.file).name, loader.function) == ("hostwork_cpu.py", "<module>")   # the loop


def test_exclusive_by_subtraction_equals_the_sweep_on_nested_rows():
    """The fast path (_exclusive_nested) gives the sweep's result whenever it answers, and
    leaves partial overlaps and twin rows to the sweep."""
    import numpy as np

    from tracelint.timeline import intervals
    from tracelint.timeline.hostidle import _exclusive, _exclusive_nested
    from tracelint.timeline.nesting import nest

    rng = np.random.default_rng(7)
    answered = 0
    for _ in range(400):
        rows: list[tuple[int, int]] = []

        def gen(lo, hi, depth):
            t = lo
            while t < hi and len(rows) < 40:
                a = t + int(rng.integers(0, 5))
                b = min(hi, a + int(rng.integers(0, 40)))
                if a > hi:
                    break
                rows.append((a, b))
                if depth < 3 and b - a > 3 and rng.random() < 0.6:
                    gen(a + int(rng.integers(0, 2)), b - int(rng.integers(0, 2)), depth + 1)
                t = b + int(rng.integers(0, 3))
        gen(0, 200, 0)
        rng.shuffle(rows)
        s = np.array([r[0] for r in rows], np.int64)
        e = np.array([r[1] for r in rows], np.int64)
        w = np.sort(rng.integers(0, 220, 6)).astype(np.int64)
        ws, we = intervals.merge(w[0::2], w[1::2])
        _, parent = nest(np.zeros(len(s), np.int64), s, e)
        fast = _exclusive_nested(s, e, ws, we, parent)
        if fast is not None:
            answered += 1
            assert np.array_equal(fast, _exclusive(s, e, ws, we))
    assert answered > 200
    s, e = np.array([0, 5], np.int64), np.array([10, 15], np.int64)      # a partial overlap
    _, parent = nest(np.zeros(2, np.int64), s, e)
    assert _exclusive_nested(s, e, np.array([0]), np.array([20]), parent) is None
    s, e = np.array([0, 0], np.int64), np.array([10, 10], np.int64)      # twins
    _, parent = nest(np.zeros(2, np.int64), s, e)
    assert _exclusive_nested(s, e, np.array([0]), np.array([20]), parent) is None


def test_depth_by_pointer_doubling_equals_the_walk_in_start_order():
    """hostidle._depth gives what the walk over rows in start order gives, including parents
    that sort after their child (equal starts), on random forests deep and shallow."""
    from tracelint.timeline.hostidle import _depth
    rng = np.random.default_rng(11)
    for trial in range(200):
        n = int(rng.integers(0, 300))
        parent = np.full(n, -1, np.int64)
        for i in range(1, n):                       # a chain-heavy forest: deep and wide
            if rng.random() < 0.9:
                parent[i] = i - 1 if rng.random() < 0.7 else int(rng.integers(0, i))
        start = rng.integers(0, 5 if trial % 2 else 10**6, n)   # many equal starts half the time
        order = np.argsort(start, kind="stable")
        want = np.zeros(n, np.int64)
        for i in order:
            if parent[i] >= 0:
                want[i] = want[parent[i]] + 1
        assert np.array_equal(_depth(parent, order), want)

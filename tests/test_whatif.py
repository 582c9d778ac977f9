"""What-if replay: with no edit it reproduces the trace (both formats); edits move what depends
on them; the critical path covers the replayed span exactly."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tracelint
from tracelint.whatif.critical_path import critical_path
from tracelint.whatif.edits import AsyncCopies, EditSet, Fuse, RemoveSync, Scale
from tracelint.whatif.graph import build
from tracelint.whatif.replay import replay

REPO = Path(__file__).resolve().parents[1]
#: every shared trace where the workplace has them, else the redistributable subset in the repo
SHARED = next((d for d in (REPO / ".." / "shared" / "traces", REPO / "fixtures" / "real")
               if (d / "torch").is_dir()), REPO / "fixtures" / "real")
NSYS = sorted((SHARED / "nsys").glob("*.sqlite"))
KINETO = sorted((SHARED / "torch").glob("*.json.gz"))


def _fidelity(path):
    tl = tracelint.load(path)
    g = build(tl)
    r = replay(g)
    assert abs(r.span_ns - tl.span_ns) <= 0.02 * max(tl.span_ns, 1)
    st = tl.ranges[(tl.ranges["kind"] == "step").to_numpy()]
    its = r.iterations()
    for step, s, e in zip(st["step"], st["start"], st["end"]):
        assert abs(its[int(step)] - (e - s)) <= 0.05 * max(e - s, 1)
    # the masked max of work_end equals the plain one over a copy of the driving items' ends
    plain = [int(a.max()) for a in (r.h_end[np.asarray(g.h_driving)], r.g_end) if len(a)]
    assert r.work_end == (max(plain) if plain else r.end)
    return tl, g, r


@pytest.mark.skipif(not NSYS, reason="shared nsys traces not present")
@pytest.mark.parametrize("path", NSYS, ids=lambda p: p.name[:40])
def test_replay_reproduces_nsys(path):
    _fidelity(path)


@pytest.mark.skipif(not KINETO, reason="shared kineto traces not present")
@pytest.mark.parametrize("path", KINETO, ids=lambda p: p.name[:40])
def test_replay_reproduces_kineto(path):
    _fidelity(path)


@pytest.fixture(scope="module")
def v100():
    path = SHARED / "torch" / "hta_v100_rank0of1.pt.trace.json.gz"
    if not path.exists():
        pytest.skip("shared trace not present")
    return _fidelity(path)


def test_critical_path_covers_the_span(v100):
    tl, g, r = v100
    cp = critical_path(r)
    assert cp.length_ns == r.work_span_ns
    assert sum(cp.breakdown().values()) == r.work_span_ns
    # segments are contiguous and in time order
    assert np.all(cp.start[1:] >= cp.end[:-1] - 0) and cp.end[-1] == r.work_end
    d = cp.to_dict(r.work_span_ns, r.windows())
    assert len(d["iterations"]) == 5
    for it in d["iterations"]:     # each iteration's share of the path fills its window
        assert sum(it["breakdown_ns"].values()) == it["end_ns"] - it["start_ns"] == it["length_ns"]


def test_scaling_the_path_shrinks_it_by_at_most_its_share(v100):
    tl, g, r = v100
    cp = critical_path(r).breakdown()
    gemm = cp.get("gpu:gemm", 0)
    edited = replay(g, EditSet([Scale("gemm|sgemm|cudnn|conv", 0.5)]).plan(g))
    saved = r.work_span_ns - edited.work_span_ns
    # halving GEMMs cannot save more than half their time on the path, and saves something
    assert 0 < saved <= 0.5 * gemm + 1
    # scaling kernels that are not on the trace changes nothing
    same = replay(g, EditSet([Scale("no_such_kernel_xyz", 0.1)]).plan(g))
    assert same.work_span_ns == r.work_span_ns


def test_removing_blocking_syncs_moves_the_host():
    path = SHARED / "nsys" / "nsys2022.4_gpu4-vecadd-4streams_t4.sqlite"
    if not path.exists():
        pytest.skip("shared trace not present")
    tl = tracelint.load(path)
    g = build(tl)
    r = replay(g)
    blocked = (g.h_target >= 0) & (g.h_role == "sync")
    assert blocked.any()
    waited = int(((g.h_end - g.h_start) - g.h_ret)[blocked].sum())
    e = replay(g, EditSet([RemoveSync("Synchronize")]).plan(g))
    saved = r.work_span_ns - e.work_span_ns
    assert 0 < saved <= waited
    for edit in (AsyncCopies(kinds=("H2D", "D2H")), Fuse(".")):
        assert replay(g, EditSet([edit]).plan(g)).work_span_ns <= r.work_span_ns


@pytest.mark.parametrize("path", (NSYS + KINETO)[::3], ids=lambda p: p.name[:40])
def test_fuse_runs_equal_stepping_through_each_run(path):
    """Fuse's runs (first and last op), found with numpy, equal the old construction that
    stepped from each run's first op while the next op continued it; on every kernel, and on
    a sparse selection that leaves runs of one."""
    from tracelint.whatif.edits import _runs
    g = build(tracelint.load(path))
    kernels = np.asarray(g.g_table == "kernels")
    for m in (kernels, kernels & (np.arange(g.n_gpu) % 3 != 0)):
        same = np.r_[False, (g.g_device[1:] == g.g_device[:-1]) & (g.g_stream[1:] == g.g_stream[:-1])]
        cont = m & same & np.r_[False, m[:-1]]
        want = []
        for a in np.flatnonzero(m & ~cont):
            b = a
            while b + 1 < len(m) and cont[b + 1]:
                b += 1
            want.append((int(a), int(b)))
        assert list(zip(*_runs(g, m))) == want



def _fuse_run_by_run(g, p, m, min_run):
    """Fuse.apply as it was: one run at a time (the reference for the version without a loop)."""
    from tracelint.whatif.edits import _runs
    from tracelint.whatif.graph import API
    p.writable("g_dur", "g_launch", "g_xpred", "g_qgap", "h_dur", "h_gap")
    for a, b in zip(*_runs(g, m)):
        if b - a + 1 < min_run:
            continue
        p.g_dur[a] = int(p.g_dur[a:b + 1].sum())
        p.g_dur[a + 1:b + 1] = 0
        p.g_launch[a + 1:b + 1] = -1
        p.g_xpred[a + 1:b + 1] = -1
        p.g_qgap[a + 1:b + 1] = 0
        la, lb = g.g_launch[a], g.g_launch[b]
        if la >= 0 and lb > la and g.h_thread[la] == g.h_thread[lb]:
            span = np.arange(la + 1, lb + 1)
            span = span[g.h_kind[span] == API]
            keep = p.h_target[span] >= 0
            p.h_dur[span[~keep]] = 0
            p.h_gap[span] = np.where(g.h_inside[span], p.h_gap[span], 0)


@pytest.mark.parametrize("path", (NSYS + KINETO)[1::3], ids=lambda p: p.name[:40])
def test_fusing_every_run_at_once_equals_fusing_them_one_by_one(path):
    """Fuse.apply without a loop over runs: the same plan as fusing run after run, on every
    kernel and on random selections, for runs of at least 1, 2 and 5 ops."""
    from tracelint.whatif.edits import Ops
    from tracelint.whatif.replay import Plan
    g = build(tracelint.load(path))
    kernels = np.flatnonzero(np.asarray(g.g_table == "kernels"))
    rows = np.asarray(g.g_row)
    rng = np.random.default_rng(len(kernels))
    for pick in (kernels, kernels[rng.random(len(kernels)) < 0.7], kernels[rng.random(len(kernels)) < 0.2]):
        for min_run in (1, 2, 5):
            m = np.zeros(g.n_gpu, bool)
            m[pick] = True
            edit = Fuse(ops=Ops(kernel_rows=tuple(int(r) for r in rows[pick])), min_run=min_run)
            assert np.array_equal(edit.ops.mask(g), m)
            got, want = Plan.of(g), Plan.of(g)
            edit.apply(g, got)
            _fuse_run_by_run(g, want, m, min_run)
            for name, a in want.__dict__.items():
                if isinstance(a, np.ndarray):
                    assert np.array_equal(getattr(got, name), a), (name, min_run)


def _cli(capsys, *args):
    from tracelint.cli.app import main
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return exc.value.code or 0, out.out, out.err


def test_whatif_cli_json_and_errors(capsys):
    import json
    trace = Path(__file__).resolve().parents[1] / "fixtures" / "examples" / "training_step_antipatterns.json.gz"
    rc, out, err = _cli(capsys, "whatif", str(trace), "--scale", "gemm=0.5", "--remove-syncs", "Synchronize", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["replayed_span_ns"] == d["span_ns"]
    assert d["edited_work_span_ns"] <= d["work_span_ns"]
    assert d["saving_ns"] == d["work_span_ns"] - d["edited_work_span_ns"]
    assert sum(d["critical_path"]["breakdown_ns"].values()) == d["critical_path"]["length_ns"]
    assert all("edited_ns" in it for it in d["iterations"])
    for bad in (["--scale", "gemm"], ["--scale", "gemm=-1"], ["--fuse", "(unclosed"]):
        rc, out, err = _cli(capsys, "whatif", str(trace), *bad)
        assert rc == 2 and "Traceback" not in err and err.strip().count("\n") == 0


def test_plans_copy_only_what_an_edit_writes_and_never_touch_the_graph():
    from tracelint.whatif.replay import Plan
    g = build(tracelint.load(REPO / "fixtures" / "examples" / "training_step_antipatterns.json.gz"))
    before = {k: getattr(g, k).copy() for k in ("h_gap", "h_target", "g_launch", "g_qgap")}
    base = Plan.of(g)
    with pytest.raises(ValueError):         # a write no edit declared fails, not corrupts
        base.h_target[0] = -1
    edits = [Scale("gemm|elementwise", 0.5), RemoveSync("Synchronize"), Fuse(pattern=".")]
    p = EditSet(edits).plan(g)
    assert np.shares_memory(p.h_ret, g.h_ret) and np.shares_memory(p.g_lat, g.g_lat)  # not written
    assert not np.shares_memory(p.h_target, g.h_target)                               # written
    assert (p.h_target != g.h_target).any() and (p.g_dur != g.g_end - g.g_start).any()
    q = p.copy()                            # independent of p: p's own arrays are copied
    q.writable("h_dur").h_dur[0] += 1
    assert q.h_dur[0] == p.h_dur[0] + 1
    assert all((getattr(g, k) == v).all() for k, v in before.items())
    assert (base.h_target == g.h_target).all()
    assert replay(g, p).work_span_ns < replay(g).work_span_ns


@pytest.mark.parametrize("seed", range(20))
def test_copy_kind_rank_equals_unique_of_the_labels(seed):
    import pandas as pd

    from tracelint.whatif.edits import _label_rank
    rng = np.random.default_rng(seed)
    cats = list(rng.choice(["H2D", "D2H", "", "nan", "D2D"], size=rng.integers(1, 6), replace=False))
    vals = [cats[i] if i >= 0 else None for i in rng.integers(-1, len(cats), rng.integers(1, 40))]
    c = pd.Categorical(vals, categories=cats)
    want = np.unique(np.asarray(c, dtype=object).astype(str), return_inverse=True)[1]
    assert _label_rank(c).tolist() == want.tolist()


@pytest.mark.parametrize("name, chunk", [("nsys/nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite", 7),
                                         ("torch/hta_event_sync_a100.json.gz", 7),
                                         ("torch/hta_event_sync_multistream_a100.json.gz", 1)])
def test_blocking_calls_found_in_chunks_equal_one_pass(name, chunk, monkeypatch):
    """The blocking test runs over the calls in chunks, and the device syncs' extra waits over
    the syncs; tiny chunks give the same waits (the multistream trace has extra waits)."""
    import tracelint.whatif.blocking as blocking
    path = SHARED / name
    if not path.exists():
        pytest.skip("shared trace not present")
    tl = tracelint.load(path)
    whole = build(tl)
    assert (whole.h_target >= 0).sum() > 0
    monkeypatch.setattr(blocking, "BLOCK_CHUNK", chunk)
    chunked = build(tl)
    assert np.array_equal(whole.h_target, chunked.h_target)
    assert np.array_equal(whole.h_ret, chunked.h_ret)
    assert whole.h_extra == chunked.h_extra
    assert bool(whole.h_extra) == ("multistream" in name)


def _chain_reference(thread, start, end):
    """The plain numpy version _chain replaced (a temporary per step)."""
    n = len(start)
    idx = np.arange(n)
    first = np.r_[True, thread[1:] != thread[:-1]]
    big = np.int64(1) << np.int64(62)
    key = (end - end.min()) + thread.astype(np.int64) * (big // max(int(thread.max()) + 1, 1))
    cm = np.maximum.accumulate(key)
    holder = np.maximum.accumulate(np.where(key >= cm, idx, 0))
    prev = np.where(first, -1, np.r_[-1, holder[:-1]])
    p = np.maximum(prev, 0)
    inside = (prev >= 0) & (start < end[p])
    gap = np.where(inside, start - start[p], start - end[p])
    return prev, inside, np.where(prev >= 0, gap, 0)


@pytest.mark.parametrize("seed", range(20))
def test_chain_in_place_equals_the_plain_version(seed):
    from tracelint.whatif.graph import _chain
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    thread = np.sort(rng.integers(0, 5, n))
    start = rng.integers(0, 1000, n)
    start = start[np.lexsort((start, thread))]
    end = start + rng.integers(0, 300, n)
    got, want = _chain(thread, start, end), _chain_reference(thread, start, end)
    for a, b in zip(got, want):
        assert np.array_equal(a, b)


def test_event_order_checked_in_chunks_equals_one_pass(monkeypatch):
    """Ordering checks the dependency edges in chunks; tiny chunks give the same order."""
    import tracelint.whatif.replay as rp
    path = SHARED / "nsys" / "nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite"
    if not path.exists():
        pytest.skip("shared trace not present")
    g = build(tracelint.load(path))
    p = rp.Plan.of(g)
    whole = rp._order(g, p)
    monkeypatch.setattr(rp, "EDGE_CHUNK", 5)
    assert np.array_equal(rp._order(g, p), whole)


def _bindings_reference(r):
    """The 3 x n matrix version _bindings replaced."""
    g, p = r.graph, r.plan
    gs, ge, hs = r.g_start, r.g_end, r.h_start
    cand = np.full((3, g.n_gpu), np.int64(-(1 << 62)), dtype=np.int64)
    for k, (pred, src, off) in enumerate(((p.g_launch, hs, p.g_lat), (p.g_spred, ge, p.g_qgap),
                                          (p.g_xpred, ge, p.g_xgap))):
        ok = pred >= 0
        cand[k, ok] = src[pred[ok]] + off[ok]
    gb = 2 - np.argmax(cand[::-1] == gs, axis=0)
    return np.where((cand == gs).any(axis=0), gb, -1)


@pytest.mark.parametrize("name", ["nsys/nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite",
                                  "torch/hta_event_sync_multistream_a100.json.gz",
                                  "torch/hta_v100_rank0of1.pt.trace.json.gz"])
def test_op_bindings_one_constraint_at_a_time_equal_the_matrix(name):
    from tracelint.whatif.critical_path import _bindings
    path = SHARED / name
    if not path.exists():
        pytest.skip("shared trace not present")
    r = replay(build(tracelint.load(path)))
    gb, _ = _bindings(r)
    want = _bindings_reference(r)
    assert np.array_equal(gb, want)
    assert (want >= 0).any()


def test_savings_need_only_the_base_totals_after_its_times_are_released():
    from tracelint.whatif.analysis import WhatIf
    path = SHARED / "nsys" / "nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite"
    if not path.exists():
        pytest.skip("shared trace not present")
    w = WhatIf(tracelint.load(path))
    edits = [RemoveSync(r".*Synchronize")]
    before = w.saving(edits)
    assert before[0] > 0
    w.release_base()
    assert w.base is None and w.saving(edits) == before
    p = build(tracelint.load(path))
    assert not p.h_dur.flags.writeable and np.array_equal(p.h_dur, p.h_end - p.h_start)


def test_dropping_extra_waits_keeps_the_others_in_order():
    """A selected call stops waiting for its extra GPU ops; unselected calls keep theirs, in
    their order (the replay builds its edges from that order)."""
    from types import SimpleNamespace

    from tracelint.whatif.edits import _drop_extra_waits
    p = SimpleNamespace(h_extra={5: [1], 1: [2, 3], 3: [4], 7: [0]})
    m = np.zeros(9, bool)
    m[[1, 4, 7]] = True
    _drop_extra_waits(p, m)
    assert list(p.h_extra.items()) == [(5, [1]), (3, [4])]


def test_critical_path_summed_in_slices_equals_one_slice(v100, monkeypatch):
    """The path is labelled, and its breakdown and top items added up, a bounded slice at a
    time; slices of a few segments (across iteration windows) give the very same path and
    dict as one slice."""
    import tracelint.whatif.critical_path as cpm
    tl, g, r = v100
    cp = critical_path(r)
    whole = cp.to_dict(r.work_span_ns, r.windows())
    monkeypatch.setattr(cpm, "SEGMENT_CHUNK", 7)
    assert len(cp.start) > 7 * 10
    assert cp.to_dict(r.work_span_ns, r.windows()) == whole
    sliced = critical_path(r)          # the segments labelled 7 walk steps at a time
    for a in ("start", "dur", "cls", "item"):
        assert np.array_equal(getattr(sliced, a), getattr(cp, a))
    assert (sliced.classes, sliced.items) == (cp.classes, cp.items)
    assert whole["top_items"] and all(it["top_items"] for it in whole["iterations"])


def test_critical_path_durations_widen_when_one_does_not_fit(v100, monkeypatch):
    """Durations are written as int32 and widened to int64 at the first that does not fit
    (here: a bound below the longest segment, met in a later slice); the path is the same."""
    import tracelint.whatif.critical_path as cpm
    tl, g, r = v100
    cp = critical_path(r)
    assert cp.dur.dtype == np.int32
    monkeypatch.setattr(cpm, "SEGMENT_CHUNK", 7)
    monkeypatch.setattr(cpm, "_I32_MAX", int(np.median(cp.dur)))
    wide = critical_path(r)
    assert wide.dur.dtype == np.int64
    for a in ("start", "dur", "cls", "item"):
        assert np.array_equal(getattr(wide, a), getattr(cp, a))
    assert wide.to_dict(r.work_span_ns, r.windows()) == cp.to_dict(r.work_span_ns, r.windows())


def test_links_stored_int32_replay_as_int64_links_do(v100):
    """The graph keeps its links between nodes as int32 (half the memory); a graph with the
    same links as int64 replays to the same times and critical path."""
    import dataclasses
    from tracelint.whatif.indexes import index_dtype
    tl, g, r = v100
    links = ("h_prev", "h_target", "h_api_row", "g_row", "g_launch", "g_spred", "g_xpred")
    assert all(getattr(g, k).dtype == np.int32 for k in links)
    wide = dataclasses.replace(g, **{k: getattr(g, k).astype(np.int64) for k in links})
    r64 = replay(wide)
    for a in ("h_start", "h_end", "g_start", "g_end"):
        assert np.array_equal(getattr(r64, a), getattr(r, a))
    assert critical_path(r64).to_dict(r64.work_span_ns) == critical_path(r).to_dict(r.work_span_ns)
    assert index_dtype(2**31 - 2) == np.int32 and index_dtype(2**31) == np.int64


def test_times_stored_int32_replay_as_int64_times_do(v100):
    """Offsets and durations are int32 where they fit (half the memory); a graph with them as
    int64 replays to the same times, with and without edits, and an edit that makes a value
    too large for int32 (durations x 10^4) writes it into an int64 copy, not a wrapped one."""
    import dataclasses
    from tracelint.whatif.indexes import narrow
    from tracelint.whatif.replay import Plan
    tl, g, r = v100
    times = ("h_gap", "g_lat", "g_qgap", "g_xgap", "h_dur", "g_dur")
    assert all(getattr(g, k).dtype == np.int32 for k in times)
    wide = dataclasses.replace(g, **{k: getattr(g, k).astype(np.int64) for k in times[:5]})
    wide.__dict__["g_dur"] = g.g_dur.astype(np.int64)      # a cached property: on the instance
    for edits in ([], [Scale(".", 1e4)], [Scale("gemm|elementwise", 0.5), RemoveSync("Synchronize"),
                                          Fuse(pattern=".")]):
        a, b = (replay(x, EditSet(edits).plan(x)) for x in (g, wide))
        for k in ("h_start", "h_end", "g_start", "g_end"):
            assert np.array_equal(getattr(a, k), getattr(b, k)), (edits, k)
    big = EditSet([Scale(".", 1e4)]).plan(g)
    assert big.g_dur.dtype == np.int64 and int(big.g_dur.max()) > np.iinfo(np.int32).max
    assert Plan.of(g).writable("h_gap", "g_launch").h_gap.dtype == np.int64
    assert Plan.of(g).writable("g_launch").g_launch.dtype == np.int32     # links stay narrow
    assert narrow(np.array([0, 2**31], np.int64)).dtype == np.int64


@pytest.mark.parametrize("seed", range(30))
def test_median_by_name_equals_the_groupby_median_transform(seed):
    """The blocking test's typical duration per call name, looked up by code, equals the
    groupby median transform it replaced (missing names: NaN; huge and negative values)."""
    import pandas as pd
    from tracelint.whatif.blocking import _median_by_code
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(0, 400)), int(rng.integers(1, 7))
    names = pd.Categorical.from_codes(rng.integers(-1, k, n), categories=[f"n{i}" for i in range(k)])
    dur = rng.integers(-5, 10 ** int(rng.integers(1, 16)), n).astype(np.int64)
    want = pd.Series(dur).groupby(names, observed=False).transform("median").to_numpy()
    codes, med = _median_by_code(np.asarray(names.codes), dur)
    assert np.array_equal(med[codes], want, equal_nan=True)


@pytest.mark.parametrize("seed", range(12))
def test_rows_by_stream_equal_the_groupby_on_device_and_stream(seed):
    """blocking._by_stream groups ops by (device, stream) with row codes (a one-value column
    is skipped); the groups and their order equal the groupby it replaced."""
    import pandas as pd
    from tracelint.whatif.blocking import _by_stream
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 80))
    dev = rng.integers(0, 3, n) if seed % 3 else np.broadcast_to(np.int64(1), n)
    stream = rng.integers(0, 12, n) if seed % 4 else np.broadcast_to(np.int64(7), n)
    codes = pd.DataFrame({"d": dev, "s": stream}).groupby(["d", "s"], sort=False).ngroup().to_numpy()
    want = sorted((np.flatnonzero(codes == c) for c in np.unique(codes)),
                  key=lambda rows: f"{int(dev[rows[0]])}:{int(stream[rows[0]])}")
    got = list(_by_stream(dev, stream))
    assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))


def _order_all_events(g, p):
    """The event order as it was made before non-blocking ends left the sort: every host end
    got a key, the ones without an event sorted last and were cut off."""
    nh, ng = g.n_host, g.n_gpu
    key = np.empty(2 * nh + ng, dtype=np.int64)
    for part, times, tie in ((key[:nh], g.h_start, 2), (key[nh:2 * nh], g.h_end, 1),
                             (key[2 * nh:], g.g_start, 3)):
        np.multiply(times, 8, out=part)
        part += tie
    key -= key.min() if len(key) else 0
    hi = np.arange(nh)
    has_prev = g.h_prev >= 0
    edges = [(np.where(g.h_inside, g.h_prev, nh + g.h_prev)[has_prev], hi[has_prev]), (hi, nh + hi)]
    t = p.h_target >= 0
    edges.append((2 * nh + p.h_target[t], nh + hi[t]))
    ex = [(2 * nh + j, nh + i) for i, js in p.h_extra.items() for j in js]
    if ex:
        edges.append((np.array([a for a, _ in ex]), np.array([b for _, b in ex])))
    gi = np.arange(ng)
    for pred, off in ((p.g_launch, 0), (p.g_spred, 2 * nh), (p.g_xpred, 2 * nh)):
        m = pred >= 0
        edges.append((off + pred[m], 2 * nh + gi[m]))
    while True:
        moved = False
        for src, dst in edges:
            need = key[src] + 1
            bad = need > key[dst]
            if bad.any():
                np.maximum.at(key, dst[bad], need[bad])
                moved = True
        if not moved:
            break
    drop = p.h_target < 0
    key[nh:2 * nh][drop] = np.iinfo(np.int64).max
    order = np.argsort(key, kind="stable")
    return order[:len(key) - int(drop.sum())]


@pytest.mark.parametrize("name", ["nsys/nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite",
                                  "torch/hta_event_sync_multistream_a100.json.gz",
                                  "torch/hta_v100_rank0of1.pt.trace.json.gz",
                                  "torch/hta_a100_80gb_rank0of16.json.gz"])
def test_event_order_without_nonblocking_ends_equals_the_order_of_all_events(name):
    """Ends of calls that do not block are left out of the sort (their time is set at their
    start); the order of the events that remain is the one sorting all of them gave, with
    and without an edit that stops calls blocking."""
    import tracelint.whatif.replay as rp
    path = SHARED / name
    if not path.exists():
        pytest.skip("shared trace not present")
    g = build(tracelint.load(path))
    plans = [rp.Plan.of(g), EditSet([RemoveSync(".*")]).plan(g)]
    assert (plans[0].h_target >= 0).any() and (plans[0].h_target < 0).any()
    for p in plans:
        assert np.array_equal(rp._order(g, p), _order_all_events(g, p))


def _thread_bounds_by_groupby(tl):
    """The bounds as a frame of the three tables grouped by (pid, tid): the reference."""
    import pandas as pd
    parts = [tl.table(t)[["pid", "tid", "start", "end"]] for t in ("api_calls", "ranges", "python_frames")
             if len(tl.table(t))]
    allp = pd.concat(parts, ignore_index=True)
    allp = allp[allp["tid"] >= 0] if (allp["tid"] >= 0).any() else allp
    g = allp.groupby(["pid", "tid"], sort=True)
    return pd.DataFrame({"lo": g["start"].min(), "hi": g["end"].max()}).reset_index()


def test_thread_bounds_as_a_groupby_of_the_host_tables():
    """Each host thread's first start and last end over its calls, ranges and frames, by
    (pid, tid): equal to a groupby on every real trace, and with threads whose tid is
    negative (dropped unless no thread has another)."""
    import pandas as pd
    from tracelint.timeline.model import Timeline
    from tracelint.timeline.schema import make_table
    from tracelint.whatif.graph import _thread_bounds
    checked = 0
    for path in NSYS + KINETO:
        tl = tracelint.load(path)
        if not (len(tl.api_calls) or len(tl.ranges) or len(tl.python_frames)):
            continue
        got, want = _thread_bounds(tl), _thread_bounds_by_groupby(tl)
        assert got.to_dict("list") == want.to_dict("list")
        checked += 1
    assert checked >= 3
    for tids, threads in (([5, -1, 7, 5], 2), ([-1, -2, -1, -2], 4)):
        tl = Timeline()
        tl.api_calls = make_table("api_calls", {
            "pid": np.array([2, 1, 1, 2]), "tid": np.array(tids), "start": np.array([10, 5, 30, 1]),
            "end": np.array([20, 9, 40, 3]), "name": pd.Categorical(["a"] * 4)}, 4)
        got, want = _thread_bounds(tl), _thread_bounds_by_groupby(tl)
        assert got.to_dict("list") == want.to_dict("list") and len(got) == threads


@pytest.mark.parametrize("threads", [1, 4, 300])
@pytest.mark.parametrize("seed", [0, 1])
def test_host_items_order_equals_the_four_key_lexsort(threads, seed):
    """The host items' order (by thread, start, kind, longest first, ties in row order) equals
    np.lexsort of the four keys: calls by start with markers appended, many equal starts,
    equal ends too, few threads and many."""
    from tracelint.whatif.graph import by_thread_then_start
    rng = np.random.default_rng(seed)
    n, m = 20_000, 300
    start = np.r_[np.sort(rng.integers(0, 3_000, n)), rng.integers(0, 3_000, m)]   # markers last
    end = start + rng.integers(0, 4, n + m)
    kind = np.r_[np.ones(n, np.int8), rng.choice(np.array([0, 2, 3], np.int8), m)]
    thread = rng.integers(0, threads, n + m).astype(np.int32)
    want = np.lexsort((-end, kind, start, thread))
    assert np.array_equal(by_thread_then_start(thread, start, lambda: kind, lambda: end), want)

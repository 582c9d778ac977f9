"""Compiled loops (tracelint.jit): the compiled path of a loop (the replay, the critical path's
walk) gives exactly what its plain Python path gives, on real traces,
on a job with matched collectives and on random inputs; without numba the plain path runs."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import TRACES, needs_shared

import tracelint
from tracelint import jit
from tracelint.whatif import sweep as sweep_mod
from tracelint.whatif.critical_path import critical_path
from tracelint.whatif.edits import EditSet, RemoveSync
from tracelint.whatif.graph import build
from tracelint.whatif.replay import replay

numba = pytest.importorskip("numba", reason="numba (the `fast` extra) not installed")

#: real traces whose graphs have device-wide syncs (blocking calls that wait for several
#: streams' ops: the loop's extra-wait lookup), copies, and several streams
REAL = ["torch/hta_event_sync_multistream_a100.json.gz", "torch/hta_v100_rank0of1.pt.trace.json.gz",
        "nsys/nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite",
        "nsys/nsys2026.2_nsys-ai-pytorch-2gpu-1s-slice_h100.sqlite"]


def _both(monkeypatch, fn):
    """fn() with the loop forced plain, then forced compiled."""
    out = []
    for mode in ("0", "1"):
        monkeypatch.setenv("TRACELINT_JIT", mode)
        out.append(fn())
    return out


@needs_shared()
@pytest.mark.parametrize("name", REAL, ids=lambda n: n.split("/")[-1][:30])
def test_compiled_replay_equals_plain(name, monkeypatch):
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"{name} not present")
    g = build(tracelint.load(path))
    syncs = tuple(np.flatnonzero(g.h_target >= 0))
    plan = EditSet([RemoveSync(host_items=syncs[: len(syncs) // 2])]).plan(g)
    for p in (None, plan):
        plain, compiled = _both(monkeypatch, lambda p=p: replay(g, p))
        for a in ("h_start", "h_end", "g_start", "g_end"):
            np.testing.assert_array_equal(getattr(plain, a), getattr(compiled, a))
        assert plain.work_span_ns == compiled.work_span_ns
        paths = _both(monkeypatch, lambda p=p: critical_path(replay(g, p)))
        for a in ("start", "end", "cls", "item"):
            np.testing.assert_array_equal(getattr(paths[0], a), getattr(paths[1], a))
        assert paths[0].length_ns == plain.work_span_ns


def test_some_real_graph_has_extra_waits():
    """The extra-wait lookup above is exercised: one of the graphs has a blocking call that
    waits for more than one GPU op."""
    found = [n for n in REAL if (TRACES / n).exists() and build(tracelint.load(TRACES / n)).h_extra]
    if not any((TRACES / n).exists() for n in REAL):
        pytest.skip("no trace of REAL present")
    assert found


def test_compiled_job_replay_equals_plain(tmp_path, monkeypatch):
    """Collectives: the synthetic straggler job of test_job_whatif, all its savings."""
    from test_job_whatif import _job, _write

    from tracelint.ranks.job import lint_job
    paths = _write(_job(straggler=1), "kineto", tmp_path / "job")

    def run():
        rep = lint_job([str(p) for p in paths], jobs=0)
        rep.whatif.pop("elapsed_s")
        return rep.whatif, [(f.rule, f.saving_ns) for f in rep.findings]
    plain, compiled = _both(monkeypatch, run)
    assert plain[0].get("matched_calls", 0) > 0
    assert plain == compiled


def test_random_graph_loop_equals_plain(monkeypatch):
    """The loop itself on random inputs (dependencies only on earlier events, extra waits and
    collectives included): both paths write the same arrays."""
    rng = np.random.default_rng(7)
    nh, ng, nc = 400, 300, 20
    ev = rng.permutation(2 * nh + ng)
    pos = np.empty_like(ev)
    pos[ev] = np.arange(len(ev))

    def earlier(of_pos, base, n):   # a random node of [base, base + n) placed before of_pos
        cand = [base + i for i in range(n) if pos[base + i] < of_pos]
        return int(rng.choice(cand)) - base if cand else -1
    h_prev = np.array([earlier(pos[i], 0, nh) for i in range(nh)], np.int64)
    h_prev = np.where(rng.random(nh) < 0.5, h_prev, -1)
    g_launch = np.array([earlier(pos[2 * nh + j], 0, nh) for j in range(ng)], np.int64)
    g_spred = np.array([earlier(pos[2 * nh + j], 2 * nh, ng) for j in range(ng)], np.int64)
    h_tgt = np.array([earlier(pos[nh + i], 2 * nh, ng) if pos[nh + i] > pos[i] else -1
                      for i in range(nh)], np.int64)
    extra = {i: [int(rng.integers(0, ng)) for _ in range(3)] for i in np.flatnonzero(h_tgt >= 0)[::5]}
    members = [rng.choice(ng, size=3, replace=False).astype(np.int64) for _ in range(nc)]
    t_after = [rng.integers(0, 1000, 3) for _ in range(nc)]
    order = np.concatenate([ev, 2 * nh + ng + np.arange(nc)])
    rnd = lambda n: rng.integers(0, 10_000, n).astype(np.int64)
    host = (h_prev, rng.random(nh) < 0.3, rnd(nh), rnd(nh), rnd(nh), h_tgt, rnd(nh))
    gpu = (g_launch, rnd(ng), g_spred, rnd(ng), np.full(ng, -1, np.int64), rnd(ng), rnd(ng), rnd(ng))
    plain, compiled = _both(monkeypatch, lambda: sweep_mod.sweep(
        order, host, gpu, extra, ng, (members, t_after)))
    for a, b in zip(plain, compiled):
        np.testing.assert_array_equal(a, b)
    assert plain[3].any()


def test_plain_path_without_numba(monkeypatch):
    """numba missing (or TRACELINT_JIT=0): the loop runs as written, at any size."""
    calls = []

    def double(a, out):
        calls.append(type(a))
        for i in range(len(a)):
            out[i] = 2 * a[i]
    loop = jit.Loop(double, min_size=0)
    monkeypatch.setattr(jit, "_numba", None)
    out = np.zeros(3, np.int64)
    loop(10**9, np.arange(3), out)
    assert calls == [memoryview] and out.tolist() == [0, 2, 4]
    assert loop.compiled() is None


def test_small_inputs_stay_plain(monkeypatch):
    monkeypatch.delenv("TRACELINT_JIT", raising=False)
    loop = jit.Loop(lambda a: None, min_size=100)
    assert not loop.use_compiled(99)
    assert loop.use_compiled(100)
    monkeypatch.setenv("TRACELINT_JIT", "0")
    assert not loop.use_compiled(10**9)


def _not_compilable(a, out):
    box = {"n": object()}              # numba cannot type an arbitrary Python object
    for i in range(len(a)):
        out[i] = a[i] + len(box)


def test_compile_error_falls_back_to_plain(monkeypatch, capsys):
    """A numba that cannot compile a loop (another numba or numpy version than tested): one
    line on stderr, the plain path's result, and the plain path from then on."""
    monkeypatch.setenv("TRACELINT_JIT", "1")
    loop = jit.Loop(_not_compilable, min_size=0)
    for _ in range(2):
        out = np.zeros(3, np.int64)
        loop(10, np.arange(3), out)
        assert out.tolist() == [1, 2, 3]
    assert loop.broken and not loop.use_compiled(10**9)
    assert capsys.readouterr().err.count("could not compile _not_compilable") == 1


def test_big_plain_walk_counts_then_fills(monkeypatch):
    """Without numba, a graph above PLAIN_WALK_ROOM walks twice (count, then fill) instead of
    holding room for every node: the same path."""
    from tracelint.whatif import critical_path as cp
    path = TRACES / "torch" / "hta_nccl_a100_rank0of2.json.gz"
    r = replay(build(tracelint.load(path)))
    monkeypatch.setenv("TRACELINT_JIT", "0")
    one_pass = critical_path(r)
    monkeypatch.setattr(cp, "PLAIN_WALK_ROOM", 0)
    two_pass = critical_path(r)
    for a in ("start", "end", "cls", "item"):
        np.testing.assert_array_equal(getattr(one_pass, a), getattr(two_pass, a))
    assert len(one_pass.start) > 100


def test_no_writable_cache_still_compiles(monkeypatch):
    """numba refuses cache=True where it finds no writable cache folder (a read-only install
    and home): the loop then compiles uncached and gives the same result."""
    real = numba.njit

    def njit(*a, **k):
        if k.get("cache"):
            raise RuntimeError("cannot cache function 'f': no locator available for file 'x'")
        return real(*a, **k)
    monkeypatch.setattr(numba, "njit", njit)
    monkeypatch.setenv("TRACELINT_JIT", "1")
    loop = jit.Loop(_double, 0)
    out = np.zeros(4, np.int64)
    loop(4, np.arange(4), out)
    assert out.tolist() == [0, 2, 4, 6]
    assert loop.compiled() is not None and not loop.broken
    assert isinstance(loop.compiled(), numba.core.registry.CPUDispatcher)


def _double(a, out):
    for i in range(len(a)):
        out[i] = 2 * a[i]

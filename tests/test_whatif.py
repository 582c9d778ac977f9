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

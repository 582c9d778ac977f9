"""Job-level replay (whatif/job.py, ranks/job_whatif.py): the ranks replayed together through
their matched collectives reproduce every rank and the job, and fixing a straggler projects the
job-level saving that its fixed twin (the same job with no late rank) really shows.

Synthetic job: RANKS ranks, STEPS steps; each step is compute (3 GEMMs) then an all-reduce on
its own stream after a stream wait, then a stream synchronize. The straggler's GEMMs run LATE_NS
longer in all, so every rank's all-reduce ends LATE_NS later: the job is STEPS * LATE_NS longer
than its twin, by construction (expected values from the generator's parameters and from the
written traces' own spans, read back with json / sqlite3)."""
from __future__ import annotations

import gzip
import json
import sqlite3

import pytest
from conftest import TRACES, needs_shared

from tracelint.engine.config import Config
from tracelint.ranks.job import lint_job
from tracelint.synth.builder import TraceBuilder

RANKS, STEPS, LATE_NS, XFER_NS = 3, 5, 1_500_000, 250_000
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"


def _job(straggler: int | None, host: bool = False) -> list[TraceBuilder]:
    """host: the straggler is late on the host (LATE_NS of CPU work, e.g. data loading, before
    it launches the step's GEMMs) instead of on the GPU."""
    bs = [TraceBuilder(pid=3000 + r, start_ns=1_000_000_000) for r in range(RANKS)]
    for r, b in enumerate(bs):
        b.rank(r, RANKS)
    for s in range(STEPS):
        arrive = []
        for r, b in enumerate(bs):
            b._step = b.step(s)
            b._step.__enter__()
            if host and r == straggler:
                b.cpu(LATE_NS, name="dataloader::next")
            for _ in range(3):
                b.launch(GEMM, 500_000 + (LATE_NS // 3 if r == straggler and not host else 0), op="aten::mm")
            b.sync("cudaStreamWaitEvent", stream=20, wait_stream=7)
            arrive.append(max(b.cursor + b.launch_latency_ns, b.gpu_free(20), b.gpu_free(7)))
        end = max(arrive) + XFER_NS
        for r, b in enumerate(bs):
            with b.op("c10d::allreduce_"), b.op("record_param_comms", args={"Collective name": "allreduce"}):
                b.launch(ALLREDUCE, end - arrive[r], stream=20)
            b.sync("cudaStreamSynchronize", stream=20)
            b._step.__exit__(None, None, None)
    return bs


def _write(bs, fmt, d):
    d.mkdir()
    paths = []
    for r, b in enumerate(bs):
        if fmt == "kineto":
            p = d / f"rank{r}.json.gz"
            b.write_kineto(p)
        else:
            p = d / f"rank{r}.sqlite"
            b.write_nsys_sqlite(p, nvtx_ops=True)
        paths.append(p)
    return paths


def _span(path) -> tuple[int, int]:
    """(first start, last end) of a written trace, read back raw (ns)."""
    if path.suffix == ".sqlite":
        con = sqlite3.connect(path)
        tabs = [t for (t,) in con.execute("select name from sqlite_master where type='table'")
                if t.startswith("CUPTI_ACTIVITY_KIND_") or t == "NVTX_EVENTS"]
        lo = min(con.execute(f"select min(start) from {t}").fetchone()[0] or 1 << 62 for t in tabs)
        hi = max(con.execute(f"select max(end) from {t}").fetchone()[0] or 0 for t in tabs)
        return lo, hi
    with gzip.open(path) as fh:
        ev = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    lo = min(e["ts"] for e in ev)
    hi = max(e["ts"] + e.get("dur", 0) for e in ev)
    return round(lo * 1000), round(hi * 1000)


def _job_span(paths) -> int:
    s = [_span(p) for p in paths]
    return max(b for _, b in s) - min(a for a, _ in s)


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_straggler_fix_projects_the_twins_job_saving(fmt, tmp_path):
    late = _write(_job(straggler=1), fmt, tmp_path / "late")
    twin = _write(_job(straggler=None), fmt, tmp_path / "twin")
    rep = lint_job([str(tmp_path / "late")], Config(select=["TL201", "TL202", "TL203", "TL204"]), jobs=0)
    w = rep.whatif
    # no edit: the job replay reproduces every rank and the job (exactly on a generated job)
    assert w["matched_calls"] == STEPS
    for r in w["ranks"]:
        assert r["replayed_span_ns"] == pytest.approx(r["span_ns"], rel=0.02)
    assert w["replayed_job_span_ns"] == pytest.approx(w["job_span_ns"], rel=0.02)
    measured = _job_span(late) - _job_span(twin)
    planted = STEPS * 3 * (LATE_NS // 3)
    assert measured == pytest.approx(planted, rel=0.05)        # the twin pair is what it says
    (f,) = [x for x in rep.findings if x.rule == "TL202"]
    assert f.where.rank == 1
    assert f.saving_ns == pytest.approx(planted, rel=0.2)
    assert f.saving_ns == pytest.approx(measured, rel=0.2)
    assert f.saving_note is None and 0 < f.saving_share < 1
    # all fixes together cannot save more than the twin shows, nor less than the straggler fix
    assert w["saving_all_ns"] == pytest.approx(measured, rel=0.2)
    # every job report shows it
    from tracelint.reporters.job import (
        render_job_json,
        render_job_markdown,
        render_job_text,
    )
    doc = json.loads(render_job_json(rep))
    assert doc["summary"]["saving_all_ns"] == w["saving_all_ns"]
    assert [x["saving_ns"] for x in doc["findings"] if x["rule"] == "TL202"] == [f.saving_ns]
    assert "projected job saving" in render_job_text(rep)
    assert "projected job saving" in render_job_markdown(rep)
    # the twin has nothing to fix
    rep2 = lint_job([str(tmp_path / "twin")], Config(select=["TL202", "TL204"]), jobs=0)
    assert rep2.findings == []


SLOW = 1.25


def _loose_job(slow: int | None) -> list[TraceBuilder]:
    """Ranks with no collective (independent replicas): each step 4 GEMMs and a synchronize;
    the slow rank's GEMMs take SLOW times longer."""
    bs = [TraceBuilder(pid=4000 + r, start_ns=2_000_000_000) for r in range(RANKS)]
    for r, b in enumerate(bs):
        b.rank(r, RANKS)
        for s in range(STEPS):
            with b.step(s):
                for _ in range(4):
                    b.launch(GEMM, int(800_000 * (SLOW if r == slow else 1.0)), op="aten::mm")
                b.sync("cudaStreamSynchronize", stream=7)
                b.cpu(200_000)
    return bs


def test_slow_rank_of_independent_ranks(tmp_path):
    """No collective couples the ranks: they replay one by one, the job ends with the slowest;
    making the slow rank as fast as the others saves what its fixed twin shows."""
    late = _write(_loose_job(slow=2), "kineto", tmp_path / "late")
    twin = _write(_loose_job(slow=None), "kineto", tmp_path / "twin")
    rep = lint_job([str(tmp_path / "late")], Config(select=["TL203", "TL204"]), jobs=0)
    w = rep.whatif
    assert w["matched_calls"] == 0
    assert w["replayed_job_span_ns"] == pytest.approx(w["job_span_ns"], rel=0.02)
    measured = _job_span(late) - _job_span(twin)
    assert measured == pytest.approx(STEPS * 4 * 800_000 * (SLOW - 1), rel=0.05)
    rules = {f.rule: f for f in rep.findings}
    assert set(rules) == {"TL203", "TL204"} and all(f.where.rank == 2 for f in rules.values())
    for f in rules.values():
        assert f.saving_ns == pytest.approx(measured, rel=0.2), f.rule


def test_straggler_late_on_the_host(tmp_path):
    """The straggler's host is busy LATE_NS before it launches each step's work: the fix scales
    its host work before the call too, and the saving matches the twin."""
    late = _write(_job(straggler=0, host=True), "kineto", tmp_path / "late")
    twin = _write(_job(straggler=None), "kineto", tmp_path / "twin")
    rep = lint_job([str(tmp_path / "late")], Config(select=["TL202"]), jobs=0)
    measured = _job_span(late) - _job_span(twin)
    assert measured == pytest.approx(STEPS * LATE_NS, rel=0.05)
    (f,) = rep.findings
    assert f.where.rank == 0 and f.saving_ns == pytest.approx(measured, rel=0.2)


# ----- real shared multi-rank traces -------------------------------------------------------------
@needs_shared()
def test_replay_fidelity_on_real_ranks(tmp_path):
    """The 4-rank job generated from a real NCCL rank (21 matched calls, a planted straggler and
    clock offsets): every rank and the job within 2% with no edit."""
    from tracelint.ranks.synth import RawTrace, make_job
    raw = RawTrace.load(TRACES / "torch" / "hta_nccl_a100_rank0of2.json.gz")
    make_job(raw, tmp_path, ranks=4, straggler=1, delay_us=3000.0, exposed=2,
             clock_offsets_us=[0.0, 1700.0, -900.0, 400.0])
    rep = lint_job([str(tmp_path)], jobs=0)
    w = rep.whatif
    assert w["matched_calls"] == 21
    for r in w["ranks"]:
        assert r["replayed_span_ns"] == pytest.approx(r["span_ns"], rel=0.02)
    assert w["replayed_job_span_ns"] == pytest.approx(w["job_span_ns"], rel=0.02)
    # the generator shifts the waiting ranks' host timeline after each call with no blocking
    # call to say why (host gaps replay as fixed work): fixing the straggler moves the calls,
    # not the job, and the finding says it cannot establish the saving rather than give 0
    (f,) = [x for x in rep.findings if x.rule == "TL202"]
    assert f.saving_ns is None and "records no wait" in f.saving_note
    assert "saving_all_ns" not in w
    # TL201's fix (overlap) is no edit of the recorded work: a statement, no number
    (e,) = [x for x in rep.findings if x.rule == "TL201"]
    assert e.saving_ns is None and e.saving_note.startswith("no saving can be established")


@needs_shared()
def test_unmatched_job_states_why_no_saving(tmp_path):
    """The 128-rank pair recorded different windows: no call matches, so no job saving."""
    for n in ("hta_sampled_rank0of128.json.gz", "hta_sampled_rank1of128.json.gz"):
        (tmp_path / n).symlink_to(TRACES / "torch" / n)
    rep = lint_job([str(tmp_path)], jobs=0)
    assert rep.findings and rep.whatif == {}
    for f in rep.findings:
        assert f.saving_ns is None and "matched" in f.saving_note


@needs_shared()
@pytest.mark.parametrize("sources", [
    ["torch/hta_sampled_rank0of128.json.gz", "torch/hta_sampled_rank1of128.json.gz"],
    ["nsys/nsys2026.2_nsys-ai-pytorch-2gpu-1s-slice_h100.sqlite"]], ids=["128-rank-pair", "nsys-2gpu"])
def test_replay_fidelity_on_real_jobs(sources):
    """The real multi-rank inputs (no call matched on the pair, no collective in the nsys
    slice: the ranks replay side by side): each rank's span and the job span within 2%,
    against spans read from the summaries (the traces' own first/last timestamps)."""
    from tracelint.ranks.job_whatif import JobWhatIf
    rep = lint_job([str(TRACES / s) for s in sources], Config(select=["TL202"]), jobs=0)
    assert not rep.failed and [s.rank for s in rep.ranks] == [0, 1]
    w = JobWhatIf.from_members(rep.ranks, rep.context)
    fid = w.fidelity()
    for s, r in zip(rep.ranks, fid["ranks"]):
        assert r["replayed_span_ns"] == pytest.approx(s.end_ns - s.start_ns, rel=0.02)
    off = rep.context.offsets
    job = max(s.end_ns - off[s.rank] for s in rep.ranks) - min(s.start_ns - off[s.rank] for s in rep.ranks)
    assert fid["replayed_job_span_ns"] == pytest.approx(job, rel=0.02)


@needs_shared()
def test_nsys_process_split_renumbers_range_parents():
    """One nsys file, two processes: each process's ranges point at parents among its own rows
    (the graph's host-work owners and TL032 follow parents; rows of the whole file's table
    indexed out of bounds). Checked against the unsplit table by start/end/name."""
    from tracelint.importers import load
    from tracelint.ranks.processes import split_processes
    tl = load(TRACES / "nsys" / "nsys2026.2_nsys-ai-pytorch-2gpu-1s-slice_h100.sqlite")
    full = tl.ranges
    parts = split_processes(tl)
    assert len(parts) == 2
    for pid, _, _, part in parts:
        r = part.ranges
        par = r["parent"].to_numpy()
        assert ((par >= -1) & (par < len(r))).all()
        mine = full[full["pid"] == pid].reset_index(drop=True)
        fp = mine["parent"].to_numpy()
        for i in range(len(r)):
            if par[i] >= 0:     # the same parent range as in the unsplit table
                assert (r["start"].iat[par[i]], r["name"].iat[par[i]]) == \
                       (full["start"].iat[fp[i]], full["name"].iat[fp[i]])

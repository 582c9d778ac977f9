"""Multi-rank analysis: real ranks of one job, generated jobs with planted skew, local pool vs
Dask, failed ranks, reports. Generated jobs are small (4 copies of a 0.75 MB real rank)."""
from __future__ import annotations

import json
import os
import pickle
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from conftest import TRACES, needs_shared
from tracelint.engine.config import Config
from tracelint.engine.finding import Layer
from tracelint.errors import ConfigError
from tracelint.api import available_rules, lint_job_rules
from tracelint.ranks.job import check_config, discover, group_job, lint_job
from tracelint.reporters.job import (render_job, render_job_html, render_job_json,
                                    render_job_markdown, render_job_text)
from tracelint.engine.job_context import BUSBW_FACTOR
from tracelint.ranks.summary import RankSummary, rank_from_name, summarize_source
from tracelint.timeline.collectives import canonical_collective, dtype_bytes
from tracelint.ranks.synth import RawTrace, make_job

pytestmark = needs_shared()

TORCH = TRACES / "torch"
NSYS = TRACES / "nsys"
NCCL_RANK = TORCH / "hta_nccl_a100_rank0of2.json.gz"          # 21 NCCL kernels, 3 steps
SAMPLED = [TORCH / "hta_sampled_rank0of128.json.gz", TORCH / "hta_sampled_rank1of128.json.gz"]
DELAY_US = 3000.0
OFFSETS_US = [0.0, 1700.0, -900.0, 400.0]


# ----- generated jobs (module scope: built and analysed once) ------------------------------------
@pytest.fixture(scope="module")
def base_raw():
    return RawTrace.load(NCCL_RANK)


@pytest.fixture(scope="module")
def control_dir(tmp_path_factory, base_raw):
    d = tmp_path_factory.mktemp("control")
    make_job(base_raw, d, ranks=4)
    return d


@pytest.fixture(scope="module")
def planted_dir(tmp_path_factory, base_raw):
    d = tmp_path_factory.mktemp("planted")
    make_job(base_raw, d, ranks=4, straggler=1, delay_us=DELAY_US, exposed=2,
             clock_offsets_us=OFFSETS_US)
    return d


@pytest.fixture(scope="module")
def control_report(control_dir):
    return lint_job([str(control_dir)], jobs=0)


@pytest.fixture(scope="module")
def planted_report(planted_dir):
    """The planted job through the real local process pool (2 workers)."""
    return lint_job([str(planted_dir)], jobs=2)


def _cross(report):
    return sorted((f.rule, f.where.rank) for f in report.findings)


# ----- real ranks of one job ---------------------------------------------------------------------
def test_real_ranks_of_one_job_analyse_together(tmp_path):
    """hta_sampled rank0of128 + rank1of128 (one 128-rank job) share a folder with traces of
    other jobs and a non-trace file: the two are one job, the others are left out."""
    for src in [*SAMPLED, NCCL_RANK, TORCH / "hta_cpu_only_rank34of300.json.gz", TORCH / "PROVENANCE.md"]:
        (tmp_path / src.name).symlink_to(src)         # links, never copies
    report = lint_job([str(tmp_path)], jobs=0)
    assert [s.rank for s in report.ranks] == [0, 1]
    assert {s.rank_source for s in report.ranks} == {"distributedInfo"}
    assert report.world_size == 128
    assert {x["label"] for x in report.excluded} == {NCCL_RANK.name, "hta_cpu_only_rank34of300.json.gz"}
    reasons = " ".join(x["reason"] for x in report.excluded)
    assert "world size" in reasons
    ctx = report.context
    assert ctx.matched_by == "step number"
    assert sorted(ctx.iterations["it"].unique()) == [551, 552]
    # NCCL carries every collective of this job in SendRecv kernels: the issuing c10d / nccl op
    # names it (c10d::alltoall_base_, c10d::allreduce_, c10d::_allgather_base_), so they are
    # collectives; the two sampled ranks recorded different windows, so none are matched
    assert set(ctx.collectives["coll"]) == {"AllToAll", "AllReduce", "AllGather"}
    assert set(ctx.collectives["kind"]) == {"collective"}
    assert len(ctx.matched) == 0 and any("do not line up" in n for n in ctx.notes)
    # per-rank findings carry their rank; the report is valid JSON
    assert report.rank_findings() and all(f["where"]["rank"] in (0, 1) for f in report.rank_findings())
    doc = json.loads(render_job_json(report))
    assert doc["kind"] == "job" and doc["summary"]["ranks"] == 2
    # the real job's compute differs between its ranks (embedding shards): TL204 names rank 1
    assert ("TL204", 1) in _cross(report)


def test_nsys_file_with_two_processes_is_two_ranks():
    src = NSYS / "nsys2026.2_nsys-ai-pytorch-2gpu-1s-slice_h100.sqlite"
    out = summarize_source(str(src), run_rules=False)
    assert [(s.process, s.rank_hint, s.rank_source) for s in out] == [
        (111, 0, "nsys device id"), (112, 1, "nsys device id")]
    members, excluded, _ = group_job(out)
    assert [m.rank for m in members] == [0, 1] and not excluded


def test_rank_ids_from_file_names():
    assert rank_from_name("rank3.json") == (3, None)
    assert rank_from_name("trace_8_rank_1.json") == (1, None)
    assert rank_from_name("rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz") == (34, None)
    assert rank_from_name("hta_sampled_rank1of128.json.gz") == (1, 128)
    assert rank_from_name("worker_3of8.json.gz") == (3, 8)
    assert rank_from_name("resnet50.json") == (None, None)
    assert rank_from_name("frank5.json") == (None, None)


def test_collective_names_sizes_and_busbw_factors():
    assert canonical_collective("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long)") == "AllReduce"
    assert canonical_collective("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)") == "SendRecv"
    assert canonical_collective("_allgather_base") == "AllGather"
    assert canonical_collective("reduce_scatter_tensor_coalesced") == "ReduceScatter"
    assert canonical_collective("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)") is None
    assert dtype_bytes("Float") == 4 and dtype_bytes("BFloat16") == 2 and dtype_bytes("Float8_e4m3fn") == 1
    n = 8
    assert BUSBW_FACTOR["AllReduce"](n) == pytest.approx(2 * 7 / 8)
    assert BUSBW_FACTOR["AllGather"](n) == BUSBW_FACTOR["ReduceScatter"](n) == pytest.approx(7 / 8)
    assert BUSBW_FACTOR["Broadcast"](n) == 1.0


def test_sizes_read_from_kernel_args_and_record_param_comms():
    s = summarize_source(str(NCCL_RANK), run_rules=False)[0]
    c = s.collectives
    assert len(c) == 21 and set(c["coll"]) == {"AllReduce", "Broadcast"}
    ar = c[c["coll"] == "AllReduce"].iloc[0]
    assert ar["in_nelems"] == 2049000 and ar["dtype"] == "Float" and ar["bytes"] == 2049000 * 4
    assert ar["group_size"] == 2 and ar["size_source"] == "kernel args" and ar["pg"] == "[0, 1]"
    # MI300X / RCCL: ncclDevKernel_Generic names no collective; record_param_comms does
    m = summarize_source(str(TORCH / "tracelens_mi300x_resnet_actckpt_rank0of8.json.gz"), run_rules=False)[0]
    named = m.collectives[m.collectives["kernel"].astype(str).str.contains("Generic")]
    assert {"AllReduce", "Broadcast"} <= set(named["coll"])


def test_summary_is_compact_and_picklable():
    s = summarize_source(str(NCCL_RANK))[0]
    blob = pickle.dumps(s)
    assert len(blob) < 512 * 1024
    assert isinstance(pickle.loads(blob), RankSummary)
    assert "Timeline" not in repr(type(s).__dict__.get("__annotations__", {}))
    assert s.findings and all(isinstance(f, dict) for f in s.findings)


# ----- generated jobs: control and planted --------------------------------------------------------
def test_control_job_finds_nothing(control_report):
    r = control_report
    assert [s.rank for s in r.ranks] == [0, 1, 2, 3]
    assert r.findings == []
    ctx = r.context
    assert len(ctx.matched) == 21
    assert (ctx.matched["skew_ns"] == 0).all() and (ctx.matched["last_rank"] == -1).all()
    assert set(ctx.offsets.values()) == {0}
    # per-rank findings are the same on every identical rank
    per = [sorted(f["rule"] for f in s.findings) for s in r.ranks]
    assert all(p == per[0] for p in per)


def test_planted_straggler_exposed_rank_and_clock_offsets(planted_report):
    r = planted_report
    assert r.execution["mode"] == "local process pool" and r.execution["workers"] == 2
    assert _cross(r) == [("TL201", 2), ("TL202", 1), ("TL204", 1)]
    ctx = r.context
    # clock offsets recovered (up to the common gauge) from collective end times
    off = np.array([ctx.offsets[k] for k in range(4)], dtype=float)
    planted = np.array(OFFSETS_US) * 1000
    assert np.allclose(off - off[0], planted - planted[0], atol=1000)
    # the straggler is last at every matched call, late by the planted delay
    mt = ctx.matched
    assert len(mt) == 21 and (mt["last_rank"] == 1).all()
    assert np.allclose(mt["skew_ns"], DELAY_US * 1000, rtol=0.01)
    straggler = next(f for f in r.findings if f.rule == "TL202")
    assert straggler.metrics["median_late_ns"].value == pytest.approx(DELAY_US * 1000, rel=0.02)
    assert straggler.evidence[Layer.SYSTEM].status == "measured"
    assert straggler.verdict == "agree"
    # the others show the wait inside their collectives, the straggler none
    rt = ctx.rank_table
    assert rt.at[1, "wait_ns"] == 0
    assert all(rt.at[k, "wait_ns"] == pytest.approx(21 * DELAY_US * 1000, rel=0.01) for k in (0, 2, 3))
    # the unoverlapped all-reduce is found on rank 2, and only there
    exposed = next(f for f in r.findings if f.rule == "TL201")
    assert exposed.where.rank == 2 and "AllReduce" in exposed.where.kernel
    assert exposed.metrics["overlapped_share"].value == 0
    # the imbalance names the straggler (its compute phase is longer)
    imb = next(f for f in r.findings if f.rule == "TL204")
    assert imb.metrics["imbalance"].value > 0.05
    skew = ctx.skew_by_collective.set_index("coll")
    assert set(skew.index) == {"AllReduce", "Broadcast"} and (skew["last_rank"] == 1).all()


def test_collective_bandwidth_needs_a_peak(control_report):
    r = control_report
    assert "TL205" not in {f.rule for f in r.findings}           # peak unknown: table only
    bw = r.context.bandwidth
    one = r.context.matched[r.context.matched["coll"] == "AllReduce"].iloc[0]
    row = bw[bw["key"] == one["key"]].iloc[0]
    n = 4
    expected = one["bytes"] / one["transfer_ns"] * 2 * (n - 1) / n
    assert row["busbw_gbps"] == pytest.approx(expected)
    cfg = Config(options={"TL205": {"link_peak_gbps": 300.0}})
    findings, *_ = lint_job_rules(r.ranks, check_config(cfg))
    tl205 = [f for f in findings if f.rule == "TL205"]
    assert [f.key for f in tl205] == ["AllReduce"]                # Broadcast calls are < 1 MiB
    assert tl205[0].metrics["efficiency"].value < 0.4


def test_slow_rank_without_collectives(tmp_path):
    """Ranks not coupled by collectives (no NCCL): one rank 8 % slower in every iteration."""
    make_job(TORCH / "hta_v100_rank0of1.pt.trace.json.gz", tmp_path, ranks=3, slow_rank=2,
             slowdown=0.08)
    r = lint_job([str(tmp_path)], jobs=0, config=Config(select=["TL2"]))
    assert _cross(r) == [("TL203", 2), ("TL204", 2)]
    slow = next(f for f in r.findings if f.rule == "TL203")
    assert slow.metrics["median_ratio"].value == pytest.approx(1.08, abs=0.01)
    assert all(not s.findings for s in r.ranks)                  # per-rank rules deselected


def test_failed_rank_is_reported_and_the_rest_analysed(tmp_path, control_dir):
    for f in sorted(control_dir.iterdir())[:3]:
        (tmp_path / f.name).symlink_to(f)
    good = (control_dir / "rank3.json.gz").read_bytes()
    (tmp_path / "rank3.json.gz").write_bytes(good[: len(good) // 3])   # truncated gzip
    r = lint_job([str(tmp_path)], jobs=0)
    assert [s.rank for s in r.ranks] == [0, 1, 2]
    assert len(r.failed) == 1 and r.failed[0].label == "rank3.json.gz"
    assert "gzip" in r.failed[0].error or "truncated" in r.failed[0].error
    assert r.findings == []
    assert "rank3.json.gz" in render_job_text(r)
    assert json.loads(render_job_json(r))["failed"][0]["rank"] == 3


# ----- local pool vs Dask ------------------------------------------------------------------------
def _comparable(report):
    d = report.to_dict()
    ranks = [{k: v for k, v in r.items() if k not in ("timing_s", "worker", "worker_peak_rss_bytes",
                                                       "source")} for r in d["ranks"]]
    job = {k: v for k, v in d["job"].items()}
    return d["findings"], ranks, job


def test_local_pool_and_dask_cluster_agree(planted_dir, planted_report):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        # the workers read the traces themselves, here through an fsspec URL
        url = "file://" + str(planted_dir)
        dask_report = lint_job([url], dask_address=cluster.scheduler_address)
    assert dask_report.execution["mode"] == "dask" and dask_report.execution["workers"] == 2
    workers = {s.worker for s in dask_report.ranks}
    assert len(workers) >= 1 and all(w.split(":")[1] != str(os.getpid()) for w in workers)
    f_local, ranks_local, job_local = _comparable(planted_report)
    f_dask, ranks_dask, job_dask = _comparable(dask_report)
    assert f_dask == f_local
    assert ranks_dask == ranks_local
    assert job_dask == job_local


# ----- configuration, discovery, reports ----------------------------------------------------------
def test_one_config_serves_both_scopes():
    cfg = check_config(Config(select=["TL202", "TL001"],
                              options={"TL205": {"link_peak_gbps": 450.0},
                                       "launch-gap": {"min_gap_ns": 1000}}))
    selected = {r.id for r in available_rules(cfg) if cfg.is_selected(r)}
    assert selected == {"TL001", "TL202"}
    with pytest.raises(ConfigError):
        check_config(Config(select=["TL299"]))
    with pytest.raises(ConfigError):
        check_config(Config(options={"TL203": {"no_such_option": 1}}))
    job_rules = [r for r in available_rules() if r.scope == "job"]
    assert [r.id for r in job_rules] == ["TL201", "TL202", "TL203", "TL204", "TL205"]
    for rule in job_rules:
        for section in ("What it detects", "Why it hurts", "Evidence", "Fix",
                        "Counter-example (when it does not apply)"):
            assert rule.section(section), (rule.id, section)


def test_discover_skips_non_traces_and_dedupes(tmp_path):
    (tmp_path / "notes.json").write_text('{"not": "a trace"}')
    (tmp_path / "README.md").write_text("hello")
    (tmp_path / "a.sqlite").symlink_to(NSYS / "nsys2021.2_mordred-hashjoin_quadro-rtx6000.sqlite")
    (tmp_path / "a.qdrep").symlink_to(NSYS / "nsys2021.2_mordred-hashjoin_quadro-rtx6000.qdrep")
    sources, notes = discover([str(tmp_path)])
    assert [Path(s).name for s in sources] == ["a.sqlite"]
    assert any("notes.json" in n for n in notes) and any("a.qdrep" in n for n in notes)


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


def test_reports_render_and_escape(tmp_path, planted_dir, planted_report):
    evil = tmp_path / "rank0_<img src=x onerror=alert(1)>.json.gz"
    evil.symlink_to(planted_dir / "rank0.json.gz")
    for k in (1, 2, 3):
        (tmp_path / f"rank{k}.json.gz").symlink_to(planted_dir / f"rank{k}.json.gz")
    r = lint_job([str(tmp_path)], jobs=0, config=Config(select=["TL2"]))
    html = render_job_html(r)
    p = _Tags()
    p.feed(html)
    assert "script" not in p.tags and "img" not in p.tags
    assert "&lt;img src=x" in html
    assert "rank × iteration" in html and "Collective arrival skew" in html and "<svg" in html
    assert "TL202" in html and "Worst ranks" in html
    text = render_job_text(planted_report)
    assert "TL202" in text and "Collective arrival skew" in text and "rank 1" in text
    md = render_job_markdown(planted_report)
    assert "| warning | TL202" in md
    doc = json.loads(render_job(planted_report, "json"))
    assert doc["schema_version"] == "job-1.0"
    assert {w["rank"] for w in doc["job"]["worst_ranks"][:2]} == {1, 2}
    assert len(doc["job"]["iterations"]["ranks"]) == 4
    assert planted_report.exit_code("warning") == 1 and planted_report.exit_code("never") == 0
    base = tmp_path / "baseline.json"
    n = planted_report.write_baseline(str(base))
    assert n == len(json.loads(base.read_text())["findings"]) > 3


def test_job_report_is_scrubbed_before_rendering(planted_dir):
    from tracelint.ranks.report import scrub_job_report
    r = lint_job([str(planted_dir)], jobs=0, config=Config(select=["TL009", "TL2"]))
    secret = "HF_TOKEN=hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ123456"
    r.ranks[0].findings[0]["message"] += " " + secret
    r.findings[0].message += " " + secret
    r.ranks[0].label = "/home/alice/" + r.ranks[0].label
    fps = [f["fingerprint"] for f in r.rank_findings()]
    scrub_job_report(r, paths=True)
    out = render_job_json(r) + render_job_html(r) + render_job_text(r)
    assert "hf_aBcDeF" not in out and "<redacted>" in render_job_json(r)
    assert "alice" not in r.ranks[0].label
    assert [f["fingerprint"] for f in r.rank_findings()] == fps

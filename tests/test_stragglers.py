"""Collectives are classified by the op that issued them (all_to_all carried by NCCL SendRecv
kernels is a collective, not point-to-point), and TL202 names the rank that is repeatedly last,
with the per-collective arrival skew. A 4-rank synthetic job in both formats; near-miss twin:
the same job with every rank on time."""
from __future__ import annotations

import pytest

from tracelint.engine.config import Config
from tracelint.engine.finding import Layer
from tracelint.ranks.job import lint_job
from tracelint.synth.builder import TraceBuilder

RANKS, STEPS, LATE_NS, XFER_NS = 4, 6, 2_000_000, 300_000
SENDRECV = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"


def _job(straggler: int | None) -> list[TraceBuilder]:
    """Each step: compute on stream 7 (the straggler's runs LATE_NS longer), then all_to_all
    (c10d op around record_param_comms) as a SendRecv kernel on stream 20 after a stream wait;
    every rank's kernel ends together, XFER_NS after the last rank arrives."""
    bs = [TraceBuilder(pid=2000 + r, start_ns=1_000_000_000) for r in range(RANKS)]
    for r, b in enumerate(bs):
        b.rank(r, RANKS)
    for s in range(STEPS):
        arrive = []
        for r, b in enumerate(bs):
            b._step = b.step(s)
            b._step.__enter__()
            for _ in range(3):
                b.launch(GEMM, 400_000 + (LATE_NS // 3 if r == straggler else 0), op="aten::mm")
            b.sync("cudaStreamWaitEvent", stream=20, wait_stream=7)
            arrive.append(max(b.cursor + b.launch_latency_ns, b.gpu_free(20)))
        end = max(arrive) + XFER_NS
        for r, b in enumerate(bs):
            with b.op("c10d::alltoall_"), b.op("record_param_comms", args={"Collective name": "all_to_all"}):
                b.launch(SENDRECV, end - arrive[r], stream=20)
            b.sync("cudaStreamSynchronize", stream=20)
            b._step.__exit__(None, None, None)
    return bs


def _lint(bs, fmt, tmp_path):
    for r, b in enumerate(bs):
        if fmt == "kineto":
            b.write_kineto(tmp_path / f"rank{r}.json.gz")
        else:
            b.write_nsys_sqlite(tmp_path / f"rank{r}.sqlite", nvtx_ops=True)
    rep = lint_job([str(tmp_path)], Config(select=["TL201", "TL202"]), jobs=0)
    return rep, [f for f in rep.findings if f.rule == "TL202"]


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_sendrecv_all_to_all_is_a_collective_and_the_straggler_is_named(fmt, tmp_path):
    rep, found = _lint(_job(straggler=2), fmt, tmp_path)
    coll = rep.context.collectives
    assert set(coll["coll"]) == {"AllToAll"} and set(coll["kind"]) == {"collective"}
    (f,) = [x for x in found if x.key == "rank2"]
    assert f.metrics["last_share"].value == 1.0
    # arrival: the straggler's 3 GEMMs run LATE_NS longer (integer thirds) before each call
    late = 3 * (LATE_NS // 3)
    assert f.metrics["median_late_ns"].value == pytest.approx(late, abs=20_000)
    summary = f.evidence[Layer.SYSTEM].summary
    assert "Largest arrival skews: AllToAll #0" in summary and f"rank 2 {STEPS}/{STEPS}" in summary


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_no_straggler_when_ranks_arrive_together(fmt, tmp_path):
    rep, found = _lint(_job(straggler=None), fmt, tmp_path)
    assert set(rep.context.collectives["coll"]) == {"AllToAll"}
    assert found == []

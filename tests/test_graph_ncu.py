"""The networkx view and Nsight Compute CSV as microarchitecture evidence."""
from __future__ import annotations

import pytest

import tracelint
from conftest import TRACES
from tracelint.engine.config import Config
from tracelint.engine.finding import Layer
from tracelint.api import lint
from tracelint.importers.ncu_csv import load_ncu_csv
from tracelint.errors import TraceFormatError
from tracelint.synth.builder import TraceBuilder


@pytest.mark.parametrize("name", ["torch/hta_event_sync_a100.json.gz",
                                  "nsys/nsys2022.4_gpu4-vecadd-4streams_t4.sqlite"])
def test_graph_edges_match_tables(name):
    path = TRACES / name
    if not path.exists():
        pytest.skip("real trace not present")
    tl = tracelint.load(path)
    g = tl.graph()
    kinds = {}
    for _, _, d in g.edges(data=True):
        kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
    # launch edges: one per GPU activity whose correlation id has a launching call (per process
    # in nsys, whose ids are per process; by id alone in Kineto), computed here with a merge
    keys = ["pid", "correlation"] if tl.meta.format == "nsys-sqlite" else ["correlation"]
    api = tl.api_calls[tl.api_calls["correlation"] >= 0][keys].drop_duplicates()
    linked = sum(len(tl.table(t)[keys].merge(api, on=keys, how="inner"))
                 for t in ("kernels", "copies", "memsets"))
    assert kinds.get("launch", 0) == linked > 0
    # stream order: activities per (device, stream) minus one per stream
    act = tl.gpu_activity
    n_streams = act.groupby(["device", "stream"]).ngroups
    assert kinds.get("stream", 0) == len(act) - n_streams
    # nesting: one edge per range with a parent
    assert kinds.get("nest", 0) == int((tl.ranges["parent"] >= 0).sum())
    for u, v, d in g.edges(data=True):
        if d["kind"] == "launch":
            assert u[0] == "api_calls" and v[0] in ("kernels", "copies", "memsets")


NCU_CSV = '''"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","sm__warps_active.avg.pct_of_peak_sustained_active","launch__registers_per_thread"
"","","","","","","","","","","","%","register/thread"
"0","1","python","h","spill_kernel","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","12.5","255"
"1","1","python","h","spill_kernel","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","13.5","255"
'''


def test_ncu_csv_feeds_microarch_evidence(tmp_path):
    csv = tmp_path / "ncu.csv"
    csv.write_text(NCU_CSV)
    df = load_ncu_csv(csv)
    assert set(df["metric"]) == {"sm__warps_active.avg.pct_of_peak_sustained_active",
                                 "launch__registers_per_thread"}
    b = TraceBuilder()
    for s in range(4):
        with b.step(s):
            for _ in range(5):
                b.launch("spill_kernel", 200_000, registers=255, local_mem=384, block=(128, 1, 1))
    trace = tmp_path / "t.sqlite"
    b.write_nsys_sqlite(trace)
    without = lint(trace, Config(select=["TL007"]))
    with_ncu = lint(trace, Config(select=["TL007"]), ncu=csv)
    assert without.findings and with_ncu.findings
    assert without.findings[0].evidence[Layer.MICROARCH].status == "not_captured"
    micro = with_ncu.findings[0].evidence[Layer.MICROARCH]
    assert micro.status == "measured"
    assert micro.facts["sm__warps_active.avg.pct_of_peak_sustained_active"].value == pytest.approx(13.0)


def test_ncu_csv_rejects_other_csv(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(TraceFormatError):
        load_ncu_csv(p)

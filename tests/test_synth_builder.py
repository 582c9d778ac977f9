"""TraceBuilder (tracelint.synth): both output formats checked with plain json / sqlite3 only,
never through tracelint's importers, and compared with real nsys exports where available."""
from __future__ import annotations

import collections
import gzip
import importlib.util
import json
import re
import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest

from tracelint.synth import TraceBuilder, nsys_api_name
from tracelint.synth import nsys_ddl

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "fixtures" / "examples"


def _shared_nsys_dir() -> Path | None:
    from conftest import TRACES
    return TRACES / "nsys" if (TRACES / "nsys").is_dir() else None


NSYS_DIR = _shared_nsys_dir()
REF_2024 = "nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite"
REF_MEMSET = "nsys2026.2_nsys-ai-pytorch-2gpu-1s-slice_h100.sqlite"
REF_NVTX = "nsys2023.1_memfusion-tensorrt-conv_rtx3090.sqlite"


def _real(name: str) -> sqlite3.Connection:
    if NSYS_DIR is None or not (NSYS_DIR / name).exists():
        pytest.skip(f"real trace not present: {name}")
    return sqlite3.connect(f"file:{NSYS_DIR / name}?mode=ro", uri=True)


PID, TID = 4242, 4243
GEMM = "void gemm_kernel<128, 64>(float const*, float const*, float*, int)"
ELT = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float> >(int)"


def build_everything() -> tuple[TraceBuilder, dict]:
    """A small trace using every builder feature; returns the builder and handles."""
    b = TraceBuilder(device_name="NVIDIA A100-SXM4-80GB", pid=PID, tid=TID,
                     start_ns=5_000_000, correlation_base=(1 << 32) + 7)
    b.rank(3, 8)
    h: dict = {}
    h["orphan"] = b.kernel("cut_off_kernel", 2_000, start_ns=4_990_000)
    with b.python("train.py", 10, "<module>"):
        for n in range(2):
            with b.step(n):
                with b.python("train.py", 20, "train_step"):
                    with b.range("forward"):
                        h.setdefault("gemm", []).append(b.launch(
                            GEMM, 50_000, grid=(108, 2, 1), block=(256, 1, 1), registers=96,
                            static_smem=8_192, dynamic_smem=32_768, op="aten::mm"))
                        h.setdefault("elt", []).append(b.launch(
                            ELT, 2_000, op="aten::add", gap_after_ns=10_000))
                        h.setdefault("spill", []).append(b.launch(
                            "spilly_kernel", 7_000, api="cuLaunchKernel", registers=255,
                            local_mem=512))
                    h.setdefault("h2d", []).append(b.copy("H2D", bytes=1 << 20, dur_ns=80_000))
                    h.setdefault("d2h", []).append(
                        b.copy("D2H", bytes=4, dur_ns=1_500, dst_kind="pinned"))
                    h.setdefault("d2d", []).append(b.copy("D2D", bytes=4096, dur_ns=3_000))
                    h.setdefault("memset", []).append(b.memset(1 << 16, 1_200))
                    h.setdefault("ssync", []).append(b.sync("cudaStreamSynchronize"))
                    b.cpu(3_000, name="aten::empty")
                    b.api("cudaMalloc", 20_000)
                    h.setdefault("side", []).append(b.launch(ELT, 4_000, stream=13))
                    h.setdefault("wait", []).append(
                        b.sync("cudaStreamWaitEvent", stream=7, wait_stream=13))
                    h.setdefault("esync", []).append(b.sync("cudaEventSynchronize", stream=13))
                    h.setdefault("dsync", []).append(b.sync("cudaDeviceSynchronize"))
                    b.api("cudaFree", 6_000, gap_after_ns=1_000)
    b.metrics_over((5_000_000, 5_500_000), {"SMs Active": 20, "DRAM Read Bandwidth": 7.6})
    b.metric("SMs Active", 95, 5_600_000)
    return b, h


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth")
    b, h = build_everything()
    kin = b.write_kineto(d / "t.json.gz")
    db = b.write_nsys_sqlite(d / "t.sqlite")
    raw = gzip.decompress(kin.read_bytes()).decode()
    trace = json.loads(raw, parse_float=Decimal)
    con = sqlite3.connect(db)
    yield b, h, raw, trace, con
    con.close()


def _ns(us: Decimal | int) -> int:
    v = Decimal(us) * 1000
    assert v == v.to_integral_value(), us
    return int(v)


def _by_cat(trace) -> dict[str, list[dict]]:
    out = collections.defaultdict(list)
    for e in trace["traceEvents"]:
        out[e.get("cat")].append(e)
    return out


# ------------------------------------------------------------------------ Kineto


def test_kineto_counts_per_category(written):
    b, h, raw, trace, _ = written
    cats = collections.Counter((e.get("cat"), e["ph"]) for e in trace["traceEvents"])
    steps, rt = 2, b.counts()["runtime"]
    assert cats[("user_annotation", "X")] == steps * 2  # ProfilerStep + "forward"
    assert cats[("python_function", "X")] == 1 + steps
    assert cats[("cpu_op", "X")] == steps * 3  # aten::mm, aten::add, aten::empty
    assert cats[("cuda_driver", "X")] == steps  # cuLaunchKernel
    assert cats[("cuda_runtime", "X")] == rt - steps
    assert cats[("kernel", "X")] == 1 + steps * 4
    assert cats[("gpu_memcpy", "X")] == steps * 3
    assert cats[("gpu_memset", "X")] == steps
    assert cats[("cuda_sync", "X")] == steps * 4
    linked = steps * (4 + 3 + 1 + 4)  # every GPU activity but the orphan kernel
    assert cats[("ac2g", "s")] == cats[("ac2g", "f")] == linked
    assert cats[("gpu_metric", "C")] == 2 * 5 + 1
    assert cats[("gpu_user_annotation", "X")] >= steps
    names = collections.Counter(e["name"] for e in _by_cat(trace)["cuda_sync"])
    assert names == {"Stream Sync": 2, "Stream Wait Event": 2, "Event Sync": 2, "Context Sync": 2}
    rt_names = collections.Counter(e["name"] for e in _by_cat(trace)["cuda_runtime"])
    assert rt_names["cudaEventRecord"] == 4 and rt_names["cudaLaunchKernel"] == 6


def test_kineto_top_level_and_chrome_trace_shape(written):
    b, h, raw, trace, _ = written
    assert trace["schemaVersion"] == 1
    dp = trace["deviceProperties"][0]
    assert dp["name"] == "NVIDIA A100-SXM4-80GB" and dp["numSms"] == 108 and dp["id"] == 0
    assert trace["distributedInfo"] == {"backend": "nccl", "rank": 3, "world_size": 8}
    assert trace["baseTimeNanoseconds"] == b.epoch_ns
    for e in trace["traceEvents"]:  # what chrome://tracing / Perfetto need
        assert e["ph"] in {"X", "s", "f", "M", "i", "C"}
        assert "pid" in e and "tid" in e and "name" in e
        if e["ph"] in ("X", "s", "f", "i", "C"):
            assert isinstance(e["ts"], Decimal) and e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] >= 0
        if e["ph"] in ("s", "f"):
            assert e["cat"] == "ac2g" and isinstance(e["id"], int)
    # strict JSON (no NaN/Infinity), loadable by the plain json module
    json.loads(raw, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))


def test_kineto_times_have_three_decimals(written):
    _, _, raw, _, _ = written
    values = re.findall(r'"(?:ts|dur)": ([^,}]+)', raw)
    assert values and all(re.fullmatch(r"\d+\.\d{3}", v) for v in values), values[:5]


def test_kineto_kernel_times_exact_ns(written):
    b, h, raw, trace, _ = written
    kin = {e["args"]["correlation"]: e for e in _by_cat(trace)["kernel"]}
    for act in [a for a in b.activities if a.kind == "kernel"]:
        e = kin[act.correlation]
        assert (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) == (act.start, act.end)
        assert e["name"] == act.name and e["tid"] == act.stream
    # the builder's own placement rule
    g = h["gemm"][0]
    assert g.start == max(g.api_start + b.launch_latency_ns, 0)


def test_kineto_correlations_and_flows_pair_up(written):
    b, h, raw, trace, _ = written
    cats = _by_cat(trace)
    runtime = {e["args"]["correlation"]: e for e in cats["cuda_runtime"] + cats["cuda_driver"]}
    gpu = [e for c in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync") for e in cats[c]]
    s = {e["id"]: e for e in cats["ac2g"] if e["ph"] == "s"}
    f = {e["id"]: e for e in cats["ac2g"] if e["ph"] == "f"}
    assert set(s) == set(f)
    for e in gpu:
        corr = e["args"]["correlation"]
        assert corr > 2**32  # wide ids survive
        if corr == h["orphan"].correlation:
            assert corr not in runtime and corr not in s and "External id" not in e["args"]
            continue
        rt = runtime[corr]
        assert s[corr]["ts"] == rt["ts"] and (s[corr]["pid"], s[corr]["tid"]) == (PID, TID)
        assert f[corr]["ts"] == e["ts"] and (f[corr]["pid"], f[corr]["tid"]) == (0, e["tid"])
        assert rt["args"].get("External id") == e["args"].get("External id")
    # runtime calls inside an op carry the op's External id
    ops = {e["name"]: e["args"]["External id"] for e in cats["cpu_op"]}
    mm = runtime[h["gemm"][-1].correlation]
    assert mm["args"]["External id"] == ops["aten::mm"]
    # python frames nest by id
    py = {e["args"]["Python id"]: e for e in cats["python_function"]}
    roots = [e for e in py.values() if e["args"]["Python parent id"] is None]
    assert [e["name"] for e in roots] == ["train.py(10): <module>"]
    assert all(e["args"]["Python parent id"] in py for e in py.values() if e not in roots)


def test_kineto_sync_and_memcpy_args(written):
    b, h, raw, trace, _ = written
    cats = _by_cat(trace)
    ev = {e["name"]: e for e in cats["cuda_sync"]}
    assert ev["Context Sync"]["tid"] == -1 and ev["Context Sync"]["args"]["stream"] == -1
    assert ev["Stream Sync"]["args"]["stream"] == 7
    wait = ev["Stream Wait Event"]["args"]
    assert wait["wait_on_stream"] == 13 and wait["stream"] == 7
    rec = {e["args"]["correlation"]: e for e in cats["cuda_runtime"]}
    assert rec[wait["wait_on_cuda_event_record_corr_id"]]["name"] == "cudaEventRecord"
    names = {e["name"] for e in cats["gpu_memcpy"]}
    assert names == {"Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)",
                     "Memcpy DtoD (Device -> Device)"}
    k = next(e for e in cats["kernel"] if e["name"] == GEMM)["args"]
    assert k["grid"] == [108, 2, 1] and k["block"] == [256, 1, 1]
    assert k["registers per thread"] == 96 and k["shared memory"] == 8_192 + 32_768


def test_kineto_output_is_deterministic(tmp_path):
    paths = []
    for i in range(2):
        b, _ = build_everything()
        paths.append(b.write_kineto(tmp_path / str(i) / "t.json.gz"))
    assert paths[0].read_bytes() == paths[1].read_bytes()
    b, _ = build_everything()
    plain = b.write_kineto(tmp_path / "t.json")
    assert plain.read_bytes() == gzip.decompress(paths[0].read_bytes()).replace(
        b'"t.json.gz"', b'"t.json"')


# ------------------------------------------------------------------------ nsys


def _count(con, table) -> int:
    return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_nsys_integrity_and_counts(written):
    b, h, _, _, con = written
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    c = b.counts()
    assert _count(con, "CUPTI_ACTIVITY_KIND_KERNEL") == c["kernel"] == 9
    assert _count(con, "CUPTI_ACTIVITY_KIND_RUNTIME") == c["runtime"]
    assert _count(con, "CUPTI_ACTIVITY_KIND_MEMCPY") == c["memcpy"] == 6
    assert _count(con, "CUPTI_ACTIVITY_KIND_MEMSET") == c["memset"] == 2
    assert _count(con, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION") == c["sync"] == 8
    assert _count(con, "NVTX_EVENTS") == 4  # steps and ranges only; no ops, no Python
    assert _count(con, "GPU_METRICS") == 11
    assert _count(con, "TARGET_INFO_GPU_METRICS") == 2
    assert _count(con, "PROCESSES") == _count(con, "ThreadNames") == 1
    assert _count(con, "TARGET_INFO_GPU") == _count(con, "TARGET_INFO_SESSION_START_TIME") == 1
    meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
    assert meta["EXPORT_PRODUCT_VERSION"] == nsys_ddl.EXPORT_PRODUCT_VERSION
    assert meta["EXPORT_SCHEMA_VERSION"] == nsys_ddl.EXPORT_SCHEMA_VERSION
    env = [v for n, v in con.execute("SELECT name, value FROM META_DATA_CAPTURE")
           if n == "PROCESS_0:ENVIRONMENT_VARIABLE"]
    assert 'RANK="3"' in env and 'WORLD_SIZE="8"' in env


def test_nsys_ids_names_and_correlation_join(written):
    b, h, _, _, con = written
    gpid = (1 << 48) | (PID << 24)
    assert {r[0] for r in con.execute("SELECT globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL")} == {gpid}
    assert {r[0] for r in con.execute("SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME")} == {
        gpid | TID}
    assert con.execute("SELECT globalPid, pid FROM PROCESSES").fetchone() == (gpid, PID)
    names = {r[0] for r in con.execute(
        "SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId")}
    assert {"cudaLaunchKernel_v7000", "cudaMemcpyAsync_v3020", "cudaStreamSynchronize_v3020",
            "cudaDeviceSynchronize_v3020", "cudaEventSynchronize_v3020",
            "cudaStreamWaitEvent_v3020", "cudaEventRecord_v3020", "cudaMalloc_v3020",
            "cudaFree_v3020", "cudaMemsetAsync_v3020", "cuLaunchKernel"} == names
    classes = dict(con.execute(
        "SELECT s.value, r.eventClass FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
        "JOIN StringIds s ON s.id = r.nameId"))
    assert classes["cuLaunchKernel"] == 1 and classes["cudaLaunchKernel_v7000"] == 0
    for table in ("KERNEL", "MEMCPY", "MEMSET", "SYNCHRONIZATION"):
        unmatched = con.execute(
            f"SELECT a.correlationId FROM CUPTI_ACTIVITY_KIND_{table} a "
            "LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = a.correlationId "
            "AND (r.globalTid >> 24) & 16777215 = (a.globalPid >> 24) & 16777215 "
            "WHERE r.correlationId IS NULL").fetchall()
        expected = [(h["orphan"].correlation,)] if table == "KERNEL" else []
        assert unmatched == expected, table
    k = con.execute(
        "SELECT d.value, s.value, registersPerThread, localMemoryPerThread, gridX, gridY, "
        "blockX, staticSharedMemory, dynamicSharedMemory FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN StringIds d ON d.id = k.demangledName JOIN StringIds s ON s.id = k.shortName "
        "WHERE k.correlationId = ?", (h["gemm"][0].correlation,)).fetchone()
    assert k == (GEMM, "gemm_kernel", 96, 0, 108, 2, 256, 8_192, 32_768)
    spill = con.execute("SELECT DISTINCT registersPerThread, localMemoryPerThread FROM "
                        "CUPTI_ACTIVITY_KIND_KERNEL WHERE localMemoryPerThread > 0").fetchall()
    assert spill == [(255, 512)]


def test_nsys_times_exact_and_equal_to_kineto(written):
    b, h, _, trace, con = written
    tables = {"kernel": "KERNEL", "memcpy": "MEMCPY", "memset": "MEMSET",
              "sync": "SYNCHRONIZATION"}
    kin = {e["args"]["correlation"]: e for e in trace["traceEvents"]
           if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync")}
    for a in b.activities:
        row = con.execute(f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_{tables[a.kind]} "
                          "WHERE correlationId = ?", (a.correlation,)).fetchone()
        assert row == (a.start, a.end)
        e = kin[a.correlation]
        assert (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) == row
    rt = dict(con.execute("SELECT correlationId, start FROM CUPTI_ACTIVITY_KIND_RUNTIME"))
    for e in trace["traceEvents"]:
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            assert _ns(e["ts"]) == rt[e["args"]["correlation"]]
    steps = con.execute("SELECT text, start, end, eventType, domainId FROM NVTX_EVENTS "
                        "WHERE text LIKE 'ProfilerStep#%' ORDER BY start").fetchall()
    ann = [e for e in trace["traceEvents"] if e.get("cat") == "user_annotation"
           and e["name"].startswith("ProfilerStep#")]
    assert [(t, s, e) for t, s, e, _, _ in steps] == [
        (a["name"], _ns(a["ts"]), _ns(a["ts"]) + _ns(a["dur"])) for a in ann]
    assert {(r[3], r[4]) for r in steps} == {(59, 0)}


def test_nsys_sync_rows(written):
    b, h, _, _, con = written
    rows = dict(con.execute(
        "SELECT s.value, y.syncType || ':' || y.streamId || ':' || (y.eventId = 4294967295) "
        "FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION y JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = y.correlationId JOIN StringIds s ON s.id = r.nameId"))
    assert rows == {"cudaDeviceSynchronize_v3020": "1:4294967295:1",
                    "cudaEventSynchronize_v3020": "2:4294967295:0",
                    "cudaStreamSynchronize_v3020": "3:7:1",
                    "cudaStreamWaitEvent_v3020": "4:7:0"}


def test_nsys_sync_types_cupti_numbering(tmp_path):
    b = TraceBuilder(sync_types="cupti")
    b.launch("k", 1_000)
    for api in ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize"):
        b.sync(api)
    b.sync("cudaStreamWaitEvent", stream=8, wait_stream=7)
    con = sqlite3.connect(b.write_nsys_sqlite(tmp_path / "c.sqlite"))
    assert [r[0] for r in con.execute("SELECT syncType FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION "
                                      "ORDER BY start")] == [3, 4, 1, 2]


def test_nsys_metrics_resolve_by_name(written):
    _, _, _, trace, con = written
    rows = con.execute(
        "SELECT t.metricName, g.timestamp, g.value FROM GPU_METRICS g JOIN "
        "TARGET_INFO_GPU_METRICS t ON t.typeId = g.typeId AND t.metricId = g.metricId "
        "ORDER BY g.timestamp, t.metricName").fetchall()
    assert rows[:2] == [("DRAM Read Bandwidth", 5_000_000, 8), ("SMs Active", 5_000_000, 20)]
    assert rows[-1] == ("SMs Active", 5_600_000, 95)
    kin = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    assert {e["name"] for e in kin} == {"SMs Active", "DRAM Read Bandwidth"}
    assert all(set(e["args"]) == {e["name"]} for e in kin)


@pytest.mark.parametrize("table", [
    "StringIds", "ThreadNames", "PROCESSES", "TARGET_INFO_SESSION_START_TIME",
    "META_DATA_EXPORT", "META_DATA_CAPTURE", "TARGET_INFO_GPU", "ENUM_CUDA_MEMCPY_OPER",
    "ENUM_CUDA_MEM_KIND", "ENUM_NSYS_EVENT_CLASS", "ENUM_NSYS_EVENT_TYPE", "ENUM_CUPTI_SYNC_TYPE",
    "ENUM_CUDA_KERNEL_LAUNCH_TYPE", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"])
def test_nsys_columns_match_real_2024_export(written, table):
    _, _, _, _, con = written
    _check_columns(con, _real(REF_2024), table)


def test_nsys_memset_and_nvtx_columns_match_real_exports(written):
    _, _, _, _, con = written
    _check_columns(con, _real(REF_MEMSET), "CUPTI_ACTIVITY_KIND_MEMSET")
    _check_columns(con, _real(REF_NVTX), "NVTX_EVENTS")


def _check_columns(mine: sqlite3.Connection, real: sqlite3.Connection, table: str) -> None:
    info = lambda c: [r[1:4] for r in c.execute(f"PRAGMA table_info({table})")]  # noqa: E731
    assert info(mine) == info(real), table  # names, declared types, NOT NULL, in order


def test_nsys_enum_rows_match_real_export(written):
    _, _, _, _, con = written
    real = _real(REF_2024)
    for table in nsys_ddl.ENUM_ROWS:
        q = f"SELECT id, name, label FROM {table} ORDER BY id"
        assert con.execute(q).fetchall() == real.execute(q).fetchall(), table


def test_nsys_lazy_tables(tmp_path):
    b = TraceBuilder()
    b.launch("k", 1_000)
    lazy = sqlite3.connect(b.write_nsys_sqlite(tmp_path / "lazy.sqlite"))
    tables = {r[0] for r in lazy.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "CUPTI_ACTIVITY_KIND_KERNEL" in tables and "CUPTI_ACTIVITY_KIND_MEMSET" not in tables
    assert "GPU_METRICS" not in tables and "ENUM_CUDA_MEM_KIND" in tables
    full = sqlite3.connect(b.write_nsys_sqlite(tmp_path / "full.sqlite", lazy=False))
    tables = {r[0] for r in full.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == set(nsys_ddl.DDL)
    nvtx_ops = TraceBuilder()
    nvtx_ops.launch("k", 1_000, op="aten::relu")
    con = sqlite3.connect(nvtx_ops.write_nsys_sqlite(tmp_path / "ops.sqlite", nvtx_ops=True))
    assert con.execute("SELECT text FROM NVTX_EVENTS").fetchall() == [("aten::relu, op_id = 1",)]


# ------------------------------------------------------------------------ timing rules


def test_launch_queues_behind_stream_and_gap_after():
    b = TraceBuilder(start_ns=0, launch_latency_ns=3_000)
    k1 = b.launch("a", 100_000, api_dur_ns=5_000, gap_after_ns=1_000)
    assert (k1.start, k1.end, b.cursor) == (3_000, 103_000, 6_000)
    k2 = b.launch("b", 10_000)  # stream busy: queued
    assert k2.start == 103_000 and b.gpu_free(7) == 113_000
    k3 = b.launch("c", 10_000, stream=8)  # other stream: not queued
    assert k3.start == b.cursor - 5_000 + 3_000


def test_copy_blocking_rules():
    b = TraceBuilder(start_ns=0, launch_latency_ns=1_000)
    pageable = b.copy("H2D", bytes=1 << 20, dur_ns=50_000)
    assert pageable.api_end == pageable.end + 1_000 == b.cursor
    pinned = b.copy("H2D", bytes=1 << 20, dur_ns=50_000, src_kind="pinned", api_dur_ns=4_000)
    assert pinned.api_end == pinned.api_start + 4_000 < pinned.end
    sync_api = b.copy("D2D", bytes=1, dur_ns=10_000, api="cudaMemcpy")
    assert sync_api.api_end == sync_api.end + 1_000


def test_sync_waits_for_drain():
    b = TraceBuilder(start_ns=0, launch_latency_ns=1_000)
    b.launch("long", 500_000, stream=7)
    b.launch("short", 1_000, stream=9)
    s = b.sync("cudaStreamSynchronize", stream=9)
    assert s.api_end - s.api_start == 2_000  # stream 9 already done
    d = b.sync("cudaDeviceSynchronize")
    assert d.end == b.gpu_free(7) and d.api_end == d.end + 500 == b.cursor
    b.launch("x", 100_000, stream=7)
    w = b.sync("cudaStreamWaitEvent", stream=9, wait_stream=7)
    assert w.api_end - w.api_start == 3_000 and b.gpu_free(9) == b.gpu_free(7)
    e = b.sync("cudaEventSynchronize", stream=9)
    assert e.end == b.gpu_free(9) and e.stream == -1 and e.wait_stream == 9


def test_orphan_kernel_and_cursor_rules():
    b = TraceBuilder(start_ns=1_000_000)
    k = b.kernel("before_window", 5_000, start_ns=10)
    assert (k.start, k.end, k.api_start) == (10, 5_010, None)
    g = b.launch("graph_head", 1_000, api="cudaGraphLaunch", op="aten::replay")
    more = b.kernel("graph_node", 2_000, correlation=g.correlation)
    assert more.external_id == g.external_id is not None and more.start == g.end
    b.set_cursor(2_000_000)
    with pytest.raises(ValueError):
        b.set_cursor(1_000)
    with pytest.raises(TypeError):
        b.launch("k", 1.5)
    with pytest.raises(ValueError):
        b.sync("cudaStreamWaitEvent")
    ctx = b.step(0)
    ctx.__enter__()
    with pytest.raises(RuntimeError):
        b.write_kineto("/nonexistent/never-written.json")


def test_package_doctest():
    import doctest

    import tracelint.synth

    assert doctest.testmod(tracelint.synth).failed == 0


def test_nsys_api_name():
    assert nsys_api_name("cudaLaunchKernel") == "cudaLaunchKernel_v7000"
    assert nsys_api_name("cudaMemcpyAsync") == "cudaMemcpyAsync_v3020"
    assert nsys_api_name("cuLaunchKernel") == "cuLaunchKernel"
    assert nsys_api_name("cudaLaunchKernelExC_v11060") == "cudaLaunchKernelExC_v11060"


# ------------------------------------------------------------------------ bundled example


def _load_make_examples():
    spec = importlib.util.spec_from_file_location("make_examples",
                                                  EXAMPLES / "make_examples.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bundled_example_is_current_and_small(tmp_path):
    kin = EXAMPLES / "training_step_antipatterns.json.gz"
    db = EXAMPLES / "training_step_antipatterns.sqlite"
    if not kin.exists() or not db.exists():
        pytest.skip("bundled examples not generated")
    assert kin.stat().st_size < 200_000 and db.stat().st_size < 1_000_000
    new_kin, new_db = _load_make_examples().main(tmp_path)
    assert gzip.decompress(new_kin.read_bytes()) == gzip.decompress(kin.read_bytes()), \
        "rerun fixtures/examples/make_examples.py"
    dump = lambda p: list(sqlite3.connect(p).iterdump())  # noqa: E731
    assert dump(new_db) == dump(db), "rerun fixtures/examples/make_examples.py"


def test_bundled_example_has_planted_patterns():
    b = _load_make_examples().training_step_antipatterns()
    kernels = [a for a in b.activities if a.kind == "kernel"]
    steps = [e for e in b.host_events if e.kind == "step"]
    assert len(steps) == 5
    assert any(e.kind == "python" for e in b.host_events)
    for s in steps:
        inside = [a for a in b.activities if s.start <= (a.api_start or -1) <= s.end]
        names = [a.short_name or a.name for a in inside]
        syncs = [a for a in inside if a.kind == "sync" and a.api == "cudaStreamSynchronize"]
        assert len(syncs) == 1 and syncs[0].api_end - syncs[0].api_start > 100_000
        h2d = [a for a in inside if a.kind == "memcpy" and a.copy_kind == "H2D"]
        assert h2d and h2d[0].src_kind == "pageable"
        assert not any(k.start < h2d[0].end and k.end > h2d[0].start for k in kernels)
        tiny = [a for a in inside if a.kind == "kernel" and a.dur < 5_000]
        assert len(tiny) >= 30
        gemm_idx = [i for i, n in enumerate(names) if n.startswith("sm90_xmma_gemm") and
                    i > 0 and names[i - 1] == "dequantize_int4_to_bf16_kernel"]
        assert len(gemm_idx) == 4
        assert names.count("elementwise_kernel") == 12  # transpose + contiguous copies
    spills = {a.name for a in kernels if a.local_mem > 0}
    assert len(spills) == 1

"""Nsight Systems SQLite importer: every real export in ../shared, bad input, synthetic forms."""
from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import tracelint
from tracelint.errors import TraceFormatError
from tracelint.importers import nsys_db
from tracelint.importers.nsys_sqlite import load_nsys_sqlite

from conftest import NSYS_TRACES as FILES, TRACES, needs_shared

NSYS_DIR = TRACES / "nsys"
needs_traces = needs_shared()

#: Files where fewer than 95% of kernels can link to an API call, and why (PROVENANCE.md).
LOW_LINKAGE = {"nsys2026.2_nsys-ai-pytorch-2gpu-1s-slice_h100.sqlite":
               "derived 1 s slice: only 1,632 of 3,442 kernels have their runtime row"}


def _sql(path: Path, sql: str):
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(sql).fetchone()[0]
    except sqlite3.OperationalError:      # table absent == empty
        return 0
    finally:
        con.close()


def _columns(path: Path, table: str) -> set[str]:
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
    finally:
        con.close()


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def loaded():
    cache = {}

    def get(path: Path):
        if path not in cache:
            cache[path] = tracelint.load(path)
        return cache[path]
    return get


# ----- every real export ------------------------------------------------------------------
@needs_traces
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_real_export_counts_match_sql(path):
    before = _md5(path)
    tl = tracelint.load(path)
    assert _md5(path) == before, "loading must never modify the trace"
    assert tl.meta.format == "nsys-sqlite"
    assert tl.meta.producer.startswith("Nsight Systems")
    k = "CUPTI_ACTIVITY_KIND_"
    assert len(tl.kernels) == _sql(path, f"SELECT COUNT(*) FROM {k}KERNEL")
    assert len(tl.copies) == _sql(path, f"SELECT COUNT(*) FROM {k}MEMCPY")
    assert len(tl.memsets) == _sql(path, f"SELECT COUNT(*) FROM {k}MEMSET")
    assert len(tl.syncs) == _sql(path, f"SELECT COUNT(*) FROM {k}SYNCHRONIZATION")
    has_class = "eventClass" in _columns(path, f"{k}RUNTIME")
    where = " WHERE eventClass IN (0, 1)" if has_class else ""
    assert len(tl.api_calls) == _sql(path, f"SELECT COUNT(*) FROM {k}RUNTIME{where}")
    assert len(tl.ranges) == _sql(path, "SELECT COUNT(*) FROM NVTX_EVENTS WHERE end IS NOT NULL "
                                        "AND eventType IN (59, 60)")
    kernel_ns = int((tl.kernels["end"] - tl.kernels["start"]).sum())
    assert kernel_ns == (_sql(path, f'SELECT SUM("end" - start) FROM {k}KERNEL') or 0)
    assert tl.meta.raw_event_counts.get("kernels", 0) == len(tl.kernels)
    assert tl.kernels["name"].isna().sum() == 0
    assert tl.api_calls["name"].isna().sum() == 0


@needs_traces
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:40])
def test_real_export_kernels_link_to_api_calls(path, loaded):
    tl = loaded(path)
    if not _sql(path, "SELECT COUNT(*) FROM sqlite_master WHERE name = "
                      "'CUPTI_ACTIVITY_KIND_RUNTIME'") or len(tl.kernels) == 0:
        pytest.skip("no CUDA API table or no kernels")
    frac = tl.correlation_resolved_fraction()
    expected = _sql(path, """
        SELECT AVG(EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r
                           WHERE r.correlationId = k.correlationId AND r.eventClass IN (0, 1)
                             AND (r.globalTid >> 24) & 16777215 = (k.globalPid >> 24) & 16777215))
        FROM CUPTI_ACTIVITY_KIND_KERNEL k""")
    print(f"{path.name}: correlation-resolved fraction {frac:.4f}")
    assert frac == pytest.approx(expected)
    if path.name in LOW_LINKAGE:
        assert any("link to a CUDA API call" in n for n in tl.meta.notes)
    else:
        assert frac >= 0.95


@needs_traces
def test_cpu_only_export_has_no_gpu_activity():
    tl = load_nsys_sqlite(NSYS_DIR / "nsys2022.4_local-cpu-nvtx-osrt_nogpu.sqlite")
    assert len(tl.kernels) == 0 and not tl.has_gpu_activity
    assert tl.meta.devices == []
    assert "nvtx" in tl.meta.captured and "cuda" not in tl.meta.captured
    assert len(tl.ranges) == 26                      # 25 push/pop + 1 start/end; marks skipped
    assert set(tl.ranges["kind"]) == {"nvtx"}
    assert (tl.ranges["depth"] >= 0).all() and (tl.ranges["depth"] > 0).any()
    parent, start = tl.ranges["parent"].to_numpy(), tl.ranges["start"].to_numpy()
    child = np.flatnonzero(parent >= 0)
    assert (start[parent[child]] <= start[child]).all()


@needs_traces
def test_devices_from_target_info_gpu():
    tl = load_nsys_sqlite(NSYS_DIR / "nsys2026.1_nsys-ai-mock-pytorch_rtx3080.sqlite")
    dev = tl.meta.device(0)
    assert dev.name == "NVIDIA GeForce RTX 3080" and dev.vendor == "nvidia"
    assert dev.sm_count == 68 and dev.compute_capability == "8.6"
    assert dev.memory_bandwidth_bps == 760080000000 and dev.clock_hz == 1710000000
    assert dev.memory_bytes > 0
    for path in FILES:
        n = _sql(path, "SELECT COUNT(DISTINCT id) FROM TARGET_INFO_GPU")
        if n:
            assert len(load_nsys_sqlite(path).meta.devices) == n, path.name


@needs_traces
def test_devices_inferred_when_target_info_gpu_missing():
    tl = load_nsys_sqlite(NSYS_DIR / "nsys2026.2_nsys-ai-pytorch-2gpu-1s-slice_h100.sqlite")
    assert [d.id for d in tl.meta.devices] == [0, 1]
    assert all(d.name is None for d in tl.meta.devices)
    assert any("devices inferred" in n for n in tl.meta.notes)
    assert tl.meta.format_version == "2026.2.1.210"
    assert tl.meta.extra["session_start_utc_ns"] == 1779630014975716426
    assert set(tl.syncs["sync_type"]) == {"stream", "stream_wait_event"}


@needs_traces
def test_meta_versions_and_captured():
    old = load_nsys_sqlite(NSYS_DIR / "nsys2021.2_mordred-hashjoin_quadro-rtx6000.sqlite")
    assert old.meta.format_version == "unknown (pre-2022 export)"
    assert "session_start_utc_ns" not in old.meta.extra
    assert {"cuda", "osrt"} <= old.meta.captured
    assert any("inferred" in n for n in old.meta.notes)
    new = load_nsys_sqlite(NSYS_DIR / "nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite")
    assert new.meta.format_version == "2024.5.1.113"
    assert new.meta.producer == "Nsight Systems 2024.5.1"
    assert {"cuda", "nvtx", "osrt"} <= new.meta.captured      # from META_DATA_CAPTURE
    assert new.meta.raw_event_counts["api_calls"] == 3048
    assert new.meta.rank is None


@needs_traces
def test_copies_syncs_and_api_names():
    tl = load_nsys_sqlite(NSYS_DIR / "nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite")
    c = tl.copies
    h2d = c[c["kind"] == "H2D"]
    assert len(h2d) == 254 and len(c[c["kind"] == "D2H"]) == 25
    assert set(h2d["name"]) == {"Memcpy HtoD (Pageable -> Device)"}
    assert set(h2d["src_kind"]) == {"pageable"} and set(h2d["dst_kind"]) == {"device"}
    assert set(tl.syncs["sync_type"]) == {"device"}           # syncType 1 pre-2025 = device
    assert set(tl.syncs["name"]) == {"cudaDeviceSynchronize"}
    assert (tl.syncs["tid"] >= 0).all()
    names = set(tl.api_calls["name"])
    assert "cudaLaunchKernel" in names and not any("_v" in n for n in names if n.startswith("cuda"))
    assert set(tl.api_calls["api"]) == {"runtime", "driver"}
    old = load_nsys_sqlite(NSYS_DIR / "nsys2021.2_mordred-hashjoin_quadro-rtx6000.sqlite")
    counts = old.syncs["sync_type"].value_counts()
    assert counts["device"] == 12 and counts["event"] == 6
    assert set(old.memsets["mem_kind"]) == {"device"}


@needs_traces
def test_backtrace_rows_dropped_and_mpi_rank():
    tl = load_nsys_sqlite(NSYS_DIR / "nsys2022.2_pipit-saxpy-mpi-cuda_a100.sqlite")
    assert len(tl.api_calls) == 57                            # 95 rows, 38 backtrace (67)
    assert tl.meta.raw_event_counts["api_calls"] == 95
    assert tl.meta.rank == 0
    assert "saxpy" in set(tl.ranges["name"])                  # inline text and textId mixed


@needs_traces
def test_readonly_and_odd_path(tmp_path):
    src = NSYS_DIR / "nsys2026.1_nsys-ai-mock-pytorch_rtx3080.sqlite"
    odd = tmp_path / "a b#c%d?e.sqlite"
    shutil.copyfile(src, odd)
    before, listing = _md5(odd), sorted(p.name for p in tmp_path.iterdir())
    calls = []
    tl = load_nsys_sqlite(odd, progress=lambda stage, frac: calls.append((stage, frac)))
    assert len(tl.kernels) == 2
    assert _md5(odd) == before and sorted(p.name for p in tmp_path.iterdir()) == listing
    assert calls and calls[-1][1] == 1.0


@needs_traces
def test_chunked_scans_match_single_scan(monkeypatch):
    path = NSYS_DIR / "nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite"
    whole = load_nsys_sqlite(path)
    monkeypatch.setattr(nsys_db, "CHUNK_ROWS", 97)   # rowid ranges of 97 rows
    chunked = load_nsys_sqlite(path)
    for table in ("kernels", "copies", "api_calls", "syncs"):
        a, b = whole.table(table), chunked.table(table)
        assert a.astype(str).equals(b.astype(str)), table


# ----- bad input --------------------------------------------------------------------------
def _assert_one_line_error(path: Path, match: str):
    with pytest.raises(TraceFormatError, match=match) as err:
        load_nsys_sqlite(path)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


@needs_traces
def test_truncated_file(tmp_path):
    bad = tmp_path / "truncated.sqlite"
    bad.write_bytes((NSYS_DIR / "nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite").read_bytes()[:4096])
    _assert_one_line_error(bad, "truncated")
    with pytest.raises(TraceFormatError):
        tracelint.load(bad)


def test_garbage_with_sqlite_header(tmp_path):
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 256, 20000, dtype=np.uint8).tobytes()
    bad = tmp_path / "garbage.sqlite"
    bad.write_bytes(b"SQLite format 3\x00" + noise)
    _assert_one_line_error(bad, "SQLite")
    plausible = tmp_path / "plausible.sqlite"          # valid page size, garbage after it
    plausible.write_bytes(b"SQLite format 3\x00\x10\x00" + noise)
    _assert_one_line_error(plausible, "SQLite")


@needs_traces
def test_corrupt_page_in_real_file(tmp_path):
    data = bytearray((NSYS_DIR / "nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite").read_bytes())
    data[200_000:200_000 + 65536] = b"\xff" * 65536   # hits the schema b-tree of this file
    bad = tmp_path / "corrupt.sqlite"
    bad.write_bytes(bytes(data))
    _assert_one_line_error(bad, "malformed")


def test_empty_database(tmp_path):
    empty = tmp_path / "empty.sqlite"
    con = sqlite3.connect(empty)
    con.execute("PRAGMA user_version = 1")       # forces a real header, no tables
    con.commit()
    con.close()
    _assert_one_line_error(empty, "not an Nsight Systems export")
    zero = tmp_path / "zero.sqlite"
    zero.write_bytes(b"")
    _assert_one_line_error(zero, "not a SQLite database")


def test_unrelated_database(tmp_path):
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    con.execute("INSERT INTO users VALUES (1, 'a')")
    con.commit()
    con.close()
    _assert_one_line_error(other, "not an Nsight Systems export")
    # rocmProfileData's tables (rpd_tracer; rocpd_op/rocpd_api, not rocprofv3's rocpd_region)
    rpd = tmp_path / "trace.rpd"
    con = sqlite3.connect(rpd)
    con.executescript("CREATE TABLE rocpd_string (id integer PRIMARY KEY, string varchar(4096));"
                      "CREATE TABLE rocpd_op (id integer PRIMARY KEY, gpuId integer, queueId integer,"
                      " start integer, end integer, description_id integer, opType_id integer);"
                      "CREATE TABLE rocpd_api (id integer PRIMARY KEY, pid integer, tid integer,"
                      " start integer, end integer, apiName_id integer, args_id integer);")
    con.close()
    _assert_one_line_error(rpd, r"rocmProfileData \(RPD\) database")


# ----- synthetic forms (no real sample exists) --------------------------------------------
def _make_db(path: Path, script: str, rows: dict[str, list[tuple]]) -> Path:
    con = sqlite3.connect(path)
    con.executescript(script)
    for table, values in rows.items():
        con.executemany(f"INSERT INTO {table} VALUES ({','.join('?' * len(values[0]))})", values)
    con.commit()
    con.close()
    return path


def test_gpu_metrics_table(tmp_path):
    base = 0x1000100000000                           # typeId low byte = Perfworks GPU id
    path = _make_db(tmp_path / "metrics.sqlite", """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE TARGET_INFO_GPU (id INTEGER, pwGpuId INTEGER, name TEXT, smCount INTEGER);
        CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INTEGER NOT NULL, sourceId INTEGER NOT NULL,
            typeName TEXT NOT NULL, metricId INTEGER NOT NULL, metricName TEXT NOT NULL);
        CREATE TABLE GPU_METRICS (rawTimestamp INTEGER NOT NULL, timestamp INTEGER NOT NULL,
            typeId INTEGER NOT NULL, metricId INTEGER NOT NULL, value INTEGER NOT NULL);
    """, {
        "TARGET_INFO_GPU": [(0, 1, "GPU A", 132), (1, 0, "GPU B", 132)],
        "TARGET_INFO_GPU_METRICS": [(base + pw, base, "GH100", m, n) for pw in (0, 1)
                                    for m, n in ((3, "SMs Active [Throughput %]"),
                                                 (5, "DRAM Read Bandwidth [Throughput %]"))],
        "GPU_METRICS": [(t, 1000 * t, base + pw, m, 10 * t + m) for t in range(4)
                        for pw in (0, 1) for m in (3, 5)],
    })
    tl = load_nsys_sqlite(path)
    m = tl.metrics
    assert len(m) == 16 and "gpu_metrics" in tl.meta.captured
    assert set(m["metric"]) == {"SMs Active [Throughput %]", "DRAM Read Bandwidth [Throughput %]"}
    # rows go (t, pw, metric): the first two are pwGpuId 0, which is TARGET_INFO_GPU id 1
    assert sorted(set(m["device"])) == [0, 1] and set(m["device"].to_numpy()[:2]) == {1}
    assert m["ts"].tolist()[:2] == [0, 0] and m["ts"].max() == 3000
    sm = m[m["metric"] == "SMs Active [Throughput %]"]
    assert sm["value"].tolist() == [3.0, 3.0, 13.0, 13.0, 23.0, 23.0, 33.0, 33.0]
    assert tl.meta.raw_event_counts["metrics"] == 16
    assert not tl.has_gpu_activity


def test_gpu_metrics_generic_events_json(tmp_path):
    path = _make_db(tmp_path / "generic.sqlite", """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE GENERIC_EVENTS (genericEventId INTEGER PRIMARY KEY, rawTimestamp INTEGER,
            timestamp INTEGER, typeId INTEGER, globalTid INTEGER, data TEXT);
    """, {"GENERIC_EVENTS": [
        (1, 1, 100, 7, None, '{"SM Active": "52", "SM Issue": "10", "DRAM Read Throughput": "0"}'),
        (2, 2, 200, 7, None, '{"SM Active": "60", "SM Issue": "12", "DRAM Read Throughput": "3"}'),
        (3, 3, 250, 9, None, '{"event": "unrelated", "count": "4"}'),
        (4, 4, 300, 7, None, "not json"),
    ]})
    tl = load_nsys_sqlite(path)
    m = tl.metrics
    assert len(m) == 6 and set(m["metric"]) == {"SM Active", "SM Issue", "DRAM Read Throughput"}
    assert m.loc[m["metric"] == "SM Active", "value"].tolist() == [52.0, 60.0]
    assert (m["device"] == -1).all()


def test_nvtx_steps_nesting_and_minimal_schema(tmp_path):
    gtid = (1 << 48) | (42 << 24) | 42
    path = _make_db(tmp_path / "nvtx.sqlite", """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
            text TEXT, globalTid INTEGER, textId INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER PRIMARY KEY, end INTEGER,
            deviceId INTEGER) WITHOUT ROWID;
    """, {
        "StringIds": [(1, "ProfilerStep#3"), (2, "forward")],
        "NVTX_EVENTS": [(0, 100, 59, None, gtid, 1), (10, 50, 59, None, gtid, 2),
                        (20, 30, 59, "iter_7", gtid, None), (60, None, 34, "mark", gtid, None),
                        (5, 500, 60, "Step 9", gtid, None), (0, None, 75, "domain", gtid, None)],
        "CUPTI_ACTIVITY_KIND_KERNEL": [(5, 9, 0), (10, 20, None)],
    })
    tl = load_nsys_sqlite(path)
    r = tl.ranges
    assert r["name"].tolist() == ["ProfilerStep#3", "forward", "iter_7", "Step 9"]
    assert r["kind"].tolist() == ["step", "nvtx", "step", "step"]
    assert r["step"].tolist() == [3, -1, 7, 9]
    assert r["depth"].tolist() == [0, 1, 2, 0] and r["parent"].tolist() == [-1, 0, 1, -1]
    assert (r["pid"] == 42).all() and (r["tid"] == 42).all()
    k = tl.kernels                     # WITHOUT ROWID, columns absent -> -1 / "unknown"
    assert len(k) == 2 and k["device"].tolist() == [0, -1] and set(k["name"]) == {"unknown"}
    assert k["correlation"].tolist() == [-1, -1] and [d.id for d in tl.meta.devices] == [0]


def test_2020_layout_devices_and_missing_tables(tmp_path):
    """nsys 2020.5: GPU properties in TARGET_INFO_CUDA_GPU; no metadata, no NVTX, no SYNC."""
    path = _make_db(tmp_path / "old.sqlite", """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, deviceId INTEGER, name TEXT,
            busLocation TEXT, isDiscrete INTEGER);
        CREATE TABLE TARGET_INFO_CUDA_GPU (deviceId INTEGER, name TEXT, numMultiprocessors INTEGER,
            globalMemoryBandwidth INTEGER, coreClockRate INTEGER, computeCapabilityMajor INTEGER,
            computeCapabilityMinor INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, globalTid INTEGER,
            correlationId INTEGER, nameId INTEGER);
    """, {
        "StringIds": [(1, "cudaLaunchKernel_v7000"), (2, "cuStreamSynchronize")],
        "TARGET_INFO_GPU": [(0, 0, "Tesla V100-SXM2-16GB", "0000:06:00.0", 1)],
        "TARGET_INFO_CUDA_GPU": [(0, "Tesla V100-SXM2-16GB", 80, 898048000000, 1530000000, 7, 0)],
        "CUPTI_ACTIVITY_KIND_RUNTIME": [(1, 2, (7 << 24) | 8, 1, 1), (3, 4, (7 << 24) | 8, 2, 2)],
    })
    tl = load_nsys_sqlite(path)
    (dev,) = tl.meta.devices
    assert (dev.id, dev.name, dev.sm_count, dev.compute_capability) == (
        0, "Tesla V100-SXM2-16GB", 80, "7.0")
    assert dev.memory_bandwidth_bps == 898048000000 and dev.clock_hz == 1530000000
    assert tl.meta.format_version == "unknown (pre-2022 export)"
    a = tl.api_calls                                   # no eventClass column: all rows, by name
    assert a["name"].tolist() == ["cudaLaunchKernel", "cuStreamSynchronize"]
    assert a["api"].tolist() == ["runtime", "driver"]
    assert a["pid"].tolist() == [7, 7] and a["tid"].tolist() == [8, 8]
    assert len(tl.syncs) == len(tl.ranges) == len(tl.kernels) == 0
    assert tl.meta.captured == {"cuda"}


def test_range_names_not_utf8_are_read_with_replacement_characters(tmp_path):
    """Inline NVTX text and StringIds values are decoded by SQLite (Db.text_query); one that
    is not UTF-8 sends the query through as_text, which replaces the bad bytes."""
    src = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "nsys" / \
        "nsys2022.4_local-cpu-nvtx-osrt_nogpu.sqlite"
    dst = tmp_path / "bad_utf8.sqlite"
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    rowid, text_id = con.execute('SELECT rowid, textId FROM NVTX_EVENTS WHERE eventType = 59 '
                                 'AND "end" IS NOT NULL AND textId IS NOT NULL LIMIT 1').fetchone()
    other = con.execute('SELECT textId FROM NVTX_EVENTS WHERE eventType = 59 AND "end" IS NOT '
                        'NULL AND textId NOT IN (?) LIMIT 1', (text_id,)).fetchone()[0]
    con.execute("UPDATE NVTX_EVENTS SET text = CAST(x'61ff62' AS TEXT) WHERE rowid = ?", (rowid,))
    con.execute("UPDATE StringIds SET value = CAST(x'63ff64' AS TEXT) WHERE id = ?", (other,))
    con.commit()
    con.close()
    names = set(tracelint.load(dst).ranges["name"].astype(str))
    before = set(tracelint.load(src).ranges["name"].astype(str))
    assert {"a\ufffdb", "c\ufffdd"} <= names
    assert len(names - before) == 2 and len(before - names) <= 2

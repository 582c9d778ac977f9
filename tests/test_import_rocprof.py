"""rocprofv3 JSON and rocpd SQLite: counts and links against an independent reading of the raw
file (json / sqlite3), the planted-pattern cases that rocprofv3 can show, and one-line errors.

The files are written by tracelint.synth.rocprof_writer from rocprofiler-sdk's documented
layout (no public rocprofv3 output was found to copy): format conformance rests on that
documentation, not on a file from a real run."""
from __future__ import annotations

import json
import shutil
import sqlite3
from functools import partial

import pytest

import tracelint
from tracelint.api import lint
from tracelint.importers import sniff
from tracelint.synth.scenarios import all_scenarios, evaluate, scenario_config
from tracelint.synth.rocprof_writer import write_rocpd, write_rocprof_json

from conftest import run_cli

WRITERS = {"rocprofv3-json": (write_rocprof_json, "results.json"),
           "rocpd-sqlite": (write_rocpd, "results.db")}
#: the same formats plus rocpd's newer layout (lanes in rocpd_track, times in rocpd_timestamp)
LAYOUTS = {**WRITERS, "rocpd-tracks": (partial(write_rocpd, layout="tracks"), "results.db")}
#: Planted cases rocprofv3 cannot show: NVIDIA's register/tensor-core models, and evidence it
#: does not record (host memory kind of a copy; Python stacks and CPU ops are Kineto-only cases).
NOT_APPLICABLE = {"TL007-positive-register-cap": "NVIDIA register-file model",
                  "TL011-positive-sgemm-on-h100": "NVIDIA tensor-core kernels",
                  "TL011-near-miss-bf16-autocast": "NVIDIA tensor-core kernels",
                  "TL011-near-miss-small-share": "NVIDIA tensor-core kernels",
                  "TL011-near-miss-pascal": "NVIDIA tensor-core kernels",
                  "TL021-positive-sm75-on-h100": "NVIDIA architecture tags and compute capability",
                  "TL030-positive-foreach-off-and-zero-grad": "PyTorch CPU ops (rocprofv3 sees none)",
                  "TL033-positive": "PyTorch CPU ops (rocprofv3 sees none)",
                  "TL033-positive-arange": "PyTorch CPU ops (rocprofv3 sees none)",
                  "TL032-near-miss-constant-is-tl033": "PyTorch CPU ops (rocprofv3 sees none)",
                  "TL007-positive-registers-bind": "NVIDIA register-file model",
                  "TL007-positive-trace-register-file": "NVIDIA register-file model",
                  "TL034-positive-conv-bias-then-batchnorm": "PyTorch CPU ops and shapes (rocprofv3 sees none)",
                  "TL035-positive-two-gpus": "PyTorch autograd Function ranges (rocprofv3 sees none)",
                  "TL036-positive-shape-changes-every-step": "PyTorch CPU ops (rocprofv3 sees none)",
                  "TL037-positive-recompile": "torch.compile ranges (rocprofv3 sees none)",
                  "TL037-positive-recompile-no-ids": "torch.compile ranges (rocprofv3 sees none)",
                  "TL037-positive-graph-break": "torch.compile ranges (rocprofv3 sees none)",
                  "TL039-positive-empty-cache-every-step": "memory-usage events (not read from rocprofv3)",
                  "TL040-positive-peak-in-iteration-2": "memory-usage events (not read from rocprofv3)"}
#: expectations on what rocprofv3 records differently: host memory kind (not recorded), copy
#: names (its own operation names, MEMORY_COPY_DEVICE_TO_DEVICE)
NOT_RECORDED = ("metrics.pageable_copies",)
OWN_NAMES = {"TL012-positive-clone-d2d": "where.kernel"}
CASES = [s for s in all_scenarios() if "nsys" in s.formats and s.id not in NOT_APPLICABLE]


def _workload():
    sc = next(s for s in all_scenarios() if s.id == "TL004-positive-pageable")
    return sc.build()


@pytest.fixture(scope="module", params=sorted(LAYOUTS))
def written(request, tmp_path_factory):
    write, name = LAYOUTS[request.param]
    path = write(_workload(), tmp_path_factory.mktemp(request.param) / name)
    return request.param, path


def _raw_counts(fmt, path) -> dict:
    """Counts and links read straight from the file, without tracelint."""
    if fmt == "rocprofv3-json":
        proc = json.loads(path.read_text())["rocprofiler-sdk-tool"][0]
        rec = proc["buffer_records"]
        api_corr = {r["correlation_id"]["internal"] for r in rec["hip_api"]}
        return {"kernels": len(rec["kernel_dispatch"]), "copies": len(rec["memory_copy"]),
                "api_calls": len(rec["hip_api"]),
                "ranges": sum(r["end_timestamp"] > r["start_timestamp"] for r in rec["marker_api"]),
                "kernel_ns": sum(r["end_timestamp"] - r["start_timestamp"] for r in rec["kernel_dispatch"]),
                "copy_bytes": sum(r["bytes"] for r in rec["memory_copy"]),
                "linked": sum(r["correlation_id"]["internal"] in api_corr for r in rec["kernel_dispatch"])}
    con = sqlite3.connect(path)
    one = lambda q: con.execute(q).fetchone()[0]  # noqa: E731
    tracks = fmt == "rocpd-tracks"
    t = lambda a, c: (f"(SELECT value FROM rocpd_timestamp WHERE id = {a}.{c}_id)" if tracks  # noqa: E731
                      else f'{a}."{c}"')
    cat = "(SELECT s.string FROM rocpd_string s JOIN rocpd_event e ON e.category_id = s.id WHERE e.id = r.event_id)"
    out = {"kernels": one("SELECT count(*) FROM rocpd_kernel_dispatch"),
           "copies": one("SELECT count(*) FROM rocpd_memory_copy"),
           "api_calls": one(f"SELECT count(*) FROM rocpd_region r WHERE {cat} LIKE 'HIP_%'"),
           "ranges": one(f"SELECT count(*) FROM rocpd_region r WHERE {cat} LIKE 'MARKER_%' "
                         f"AND {t('r', 'end')} > {t('r', 'start')}"),
           "kernel_ns": one(f"SELECT sum({t('k', 'end')} - {t('k', 'start')}) FROM rocpd_kernel_dispatch k"),
           "copy_bytes": one("SELECT sum(size) FROM rocpd_memory_copy"),
           "linked": one("SELECT count(*) FROM rocpd_kernel_dispatch k JOIN rocpd_event ke ON ke.id = k.event_id "
                         f"WHERE ke.correlation_id IN (SELECT e.correlation_id FROM rocpd_region r JOIN rocpd_event e "
                         f"ON e.id = r.event_id WHERE {cat} LIKE 'HIP_%')")}
    con.close()
    return out


def test_counts_and_links_match_the_raw_file(written):
    fmt, path = written
    assert sniff(path) == fmt.replace("rocpd-tracks", "rocpd-sqlite")
    tl, raw = tracelint.load(path), _raw_counts(fmt, path)
    assert tl.meta.format == sniff(path)   # the sniffer and the importer name it alike
    got = tl.counts()
    for table in ("kernels", "copies", "api_calls", "ranges"):
        assert got[table] == raw[table], table
    assert raw["kernels"] == 12 and raw["copies"] == 3 and raw["api_calls"] > raw["kernels"]
    assert int((tl.kernels["end"] - tl.kernels["start"]).sum()) == raw["kernel_ns"]
    assert int(tl.copies["bytes"].sum()) == raw["copy_bytes"]
    assert tl.correlation_resolved_fraction() == raw["linked"] / raw["kernels"] == 1.0
    assert set(tl.api_calls["name"].astype(str)) >= {"hipLaunchKernel", "hipMemcpyAsync"}
    assert set(tl.copies["kind"].astype(str)) == {"H2D"}
    assert {d.vendor for d in tl.meta.devices} == {"amd"}
    assert (tl.ranges["kind"] == "step").sum() == 3          # roctx "ProfilerStep#N" ranges


def test_info_reports_format_and_producer(written, cli):
    fmt, path = written
    res = cli("info", "--json", path)
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["format"] in ("rocprofv3-json", "rocpd-sqlite") and "rocprofv3" in info["producer"]
    assert info["format_version"]                       # rocprofiler-sdk version / rocpd schema


@pytest.mark.parametrize("fmt", sorted(WRITERS))
@pytest.mark.parametrize("scenario", CASES, ids=[s.id for s in CASES])
def test_planted_cases_in_rocprof_formats(scenario, fmt, tmp_path):
    write, name = WRITERS[fmt]
    path = write(scenario.build(), tmp_path / name)
    report = lint(path, scenario_config(scenario))
    expect = {k: v for k, v in scenario.expect.items()
              if k not in NOT_RECORDED and k != OWN_NAMES.get(scenario.id)}
    ok, why = evaluate(type(scenario)(**{**scenario.__dict__, "expect": expect}), report.findings)
    assert ok, why


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9])
def test_truncated_files_give_one_line_error(written, tmp_path, cut):
    fmt, path = written
    data = path.read_bytes()
    bad = tmp_path / path.name
    bad.write_bytes(data[: int(len(data) * cut)])
    res = run_cli("lint", bad)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_json_without_records_is_rejected(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"rocprofiler-sdk-tool": [{"buffer_records": {"hip_api": [{"kind": 5}]}}]}))
    res = run_cli("lint", bad)
    assert res.returncode == 2 and "malformed rocprofv3 record" in res.stderr


def test_json_record_variants_read_as_the_raw_file_says(tmp_path):
    """Records are decoded into typed structs: a stream_id wins over the dispatch's queue_id
    and an empty one reads as absent, numbers written as text are read, and a marker that is
    not a range needs no thread id; a record without a required field is one line."""
    path = write_rocprof_json(_workload(), tmp_path / "results.json")
    doc = json.loads(path.read_text())
    rec = doc["rocprofiler-sdk-tool"][0]["buffer_records"]
    k0, k1 = rec["kernel_dispatch"][:2]
    k0["stream_id"], k1["stream_id"] = {"handle": 42}, {}
    rec["hip_api"][0]["start_timestamp"] = str(rec["hip_api"][0]["start_timestamp"])
    mark = dict(rec["marker_api"][0], end_timestamp=rec["marker_api"][0]["start_timestamp"])
    del mark["thread_id"]
    rec["marker_api"].append(mark)
    path.write_text(json.dumps(doc))
    tl = tracelint.load(path)
    by_corr = tl.kernels.set_index("correlation")["stream"]
    assert by_corr[k0["correlation_id"]["internal"]] == 42
    assert by_corr[k1["correlation_id"]["internal"]] == k1["dispatch_info"]["queue_id"]["handle"]
    assert int(rec["hip_api"][0]["start_timestamp"]) in set(tl.api_calls["start"])
    assert len(tl.ranges) == len(rec["marker_api"]) - 1
    del rec["hip_api"][3]["correlation_id"]
    path.write_text(json.dumps(doc))
    res = run_cli("lint", path)
    assert res.returncode == 2 and "malformed rocprofv3 record" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("layout", ["columns", "tracks"])
def test_rocpd_rows_read_as_the_raw_file_says(layout, tmp_path):
    """rocpd rows are read as integer columns and their ids looked up in the tables beside
    them (the SQL's sub-selects as arrays): NULLs read as unknown where the row may lack a
    value, names of kernels without a symbol as "unknown"; a row without its times, or text
    where an id or a size belongs, is one line and exit code 2, not a traceback."""
    path = write_rocpd(_workload(), tmp_path / "results.db", layout=layout)
    con = sqlite3.connect(path)

    def table(base):            # the uuid-suffixed table under the view of the plain name
        return con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ?",
                           (base + "_%",)).fetchone()[0]
    kd, ev_table = table("rocpd_kernel_dispatch"), table("rocpd_event")
    k0, k1 = con.execute(f'SELECT min(id), max(id) FROM "{kd}"').fetchone()
    con.execute(f'UPDATE "{kd}" SET kernel_id = 999999 WHERE id = ?', (k0,))
    con.execute(f'UPDATE "{kd}" SET private_segment_size = NULL, group_segment_size = NULL '
                "WHERE id = ?", (k1,))
    ev = con.execute(f'SELECT event_id FROM "{kd}" WHERE id = ?', (k1,)).fetchone()[0]
    con.execute(f'UPDATE "{ev_table}" SET correlation_id = NULL WHERE id = ?', (ev,))
    con.commit()
    tl = tracelint.load(path)
    assert (tl.kernels["name"] == "unknown").sum() == 1
    last = tl.kernels.sort_values("start").iloc[-1]
    assert (last["local_mem_per_thread"], last["correlation"]) == (-1, -1)
    assert last["dynamic_smem"] == 0 and last["static_smem"] >= 0
    assert len(tl.kernels) == 12
    times = "end_id" if layout == "tracks" else "end"
    for bad in (f'UPDATE "{kd}" SET {times} = NULL WHERE id = {k0}',
                f"UPDATE \"{kd}\" SET grid_size_x = 'wide' WHERE id = {k0}"):
        broken = tmp_path / "broken.db"
        shutil.copy(path, broken)
        c = sqlite3.connect(broken)
        c.execute(bad)
        c.commit()
        c.close()
        res = run_cli("lint", broken)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1 and "rocpd" in res.stderr
    con.close()


def test_rocpd_tables_are_read_never_views(tmp_path):
    """A view in an untrusted file can run any query: the plain-named views rocprofv3 writes
    are `SELECT *` of the session's tables, so the tables are read. Here the views never end
    (a recursive query) and the lint does not notice them; a second session is named."""
    path = write_rocpd(_workload(), tmp_path / "results.db", layout="tracks")
    want = tracelint.load(path).counts()
    con = sqlite3.connect(path)
    views = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'view'")]
    assert "rocpd_region" in views and "rocpd_kernel_dispatch" in views
    for view in views:
        con.execute(f'DROP VIEW "{view}"')
        con.execute(f'CREATE VIEW "{view}" AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL '
                    "SELECT x + 1 FROM c) SELECT x AS id FROM c")
    con.commit()
    con.close()
    res = run_cli("info", "--json", path, timeout=60)
    assert res.returncode == 0, res.stderr
    assert {k: v for k, v in json.loads(res.stdout)["counts"].items() if k in want} == want
    # a second session's tables beside the first: the first is read, and the note says so
    con = sqlite3.connect(path)
    kd = con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE "
                     "'rocpd_kernel_dispatch_%'").fetchone()[0]
    con.execute(f'CREATE TABLE "{kd}zz" AS SELECT * FROM "{kd}"')
    con.commit()
    con.close()
    tl = tracelint.load(path)
    assert tl.counts()["kernels"] == want["kernels"]
    assert any("2 rocpd sessions" in n for n in tl.meta.notes), tl.meta.notes

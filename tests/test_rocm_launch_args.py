"""ROCm Kineto traces write a kernel's grid and block and a copy's size on the runtime call, not
on the GPU row (importers/kineto_launch_args): the importer takes them from the call of the
same correlation id, checked here against the raw JSON of two real AMD traces."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tracelint
from tracelint.importers import kineto_launch_args as launch_args

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "torch"
MI250 = REAL / "hta_mi250_minitoy_rocm62.json.gz"
MI300 = REAL / "tracelens_mi300x_resnet_actckpt_rank0of8.json.gz"


def _runtime_args(path: Path) -> dict[int, tuple[str, dict]]:
    events = json.load(gzip.open(path))["traceEvents"]
    return {e["args"]["correlation"]: (e["name"], e["args"]) for e in events
            if e.get("cat") == "cuda_runtime" and "correlation" in (e.get("args") or {})}


@pytest.mark.parametrize("path", [MI250, MI300], ids=["rocm6.2-size", "rocm6.4-bytes"])
def test_copy_bytes_come_from_the_runtime_call(path):
    calls = _runtime_args(path)
    c = tracelint.load(path).copies
    launched = c["correlation"].isin(list(calls)).to_numpy()
    assert launched.any()
    for corr, nbytes in zip(c["correlation"][launched], c["bytes"][launched]):
        args = calls[int(corr)][1]
        assert nbytes == int(args.get("size", args.get("bytes")))


def test_mi250_copies_had_no_bytes_of_their_own():
    """The premise: without the runtime call, these copies' sizes are unknown."""
    events = json.load(gzip.open(MI250))["traceEvents"]
    gpu = [e for e in events if e.get("cat") == "gpu_memcpy"]
    assert gpu and all("bytes" not in e["args"] for e in gpu)


@pytest.mark.parametrize("path", [MI250, MI300], ids=["mi250", "mi300x"])
def test_kernel_grid_is_in_blocks_for_every_launch_call(path):
    calls = _runtime_args(path)
    k = tracelint.load(path).kernels
    checked = {"hipLaunchKernel": 0, "hipExtModuleLaunchKernel": 0}
    for row in k.itertuples():
        name, args = calls.get(int(row.correlation), ("", {}))
        if name not in checked:
            continue
        grid, block = args["grid"], args["block"]
        if name == "hipExtModuleLaunchKernel":          # global work size in work-items
            grid = [-(-g // b) if g >= b else g for g, b in zip(grid, block)]
        assert [row.grid_x, row.grid_y, row.grid_z] == grid
        assert [row.block_x, row.block_y, row.block_z] == block
        checked[name] += 1
    assert all(checked.values()), checked


def _facts(rows: list[tuple]) -> np.ndarray:
    """Facts blocks as collect() makes them: corr, grid xyz, block xyz, smem, bytes, in_items."""
    return np.array(rows, dtype=np.int64).T


def test_fill_keeps_known_values_and_skips_shared_correlation_ids():
    cols = {"copies": {"correlation": np.array([1, 2, 3]), "bytes": np.array([-1, 64, -1])},
            "kernels": {"correlation": np.array([4, 5]),
                        **{f"{a}_{x}": np.full(2, -1) for a in ("grid", "block") for x in "xyz"},
                        "static_smem": np.full(2, -1)}}
    facts = _facts([(1, -1, -1, -1, -1, -1, -1, -1, 100, 0),
                    (2, -1, -1, -1, -1, -1, -1, -1, 999, 0),     # the row's own 64 stays
                    (3, -1, -1, -1, -1, -1, -1, -1, 7, 0),
                    (3, -1, -1, -1, -1, -1, -1, -1, 8, 0),       # two calls claim id 3
                    (4, 512, 8, 1, 256, 1, 1, 0, -1, 1),          # work-items: 2 x 8 blocks
                    (5, 2, 1, 1, 256, 1, 1, 16, -1, 1)])          # already blocks (2 < 256)
    launch_args.fill(cols, [facts])
    assert cols["copies"]["bytes"].tolist() == [100, 64, -1]
    k = cols["kernels"]
    assert [k["grid_x"].tolist(), k["grid_y"].tolist()] == [[2, 2], [8, 1]]
    assert k["block_x"].tolist() == [256, 256] and k["static_smem"].tolist() == [0, 16]


def test_a_kernel_row_already_in_blocks_is_not_divided_again():
    """A producer that wrote blocks on the GPU row and work-items on the call: the row differs
    from the call's grid, so it is left as it is."""
    cols = {"kernels": {"correlation": np.array([7]), "grid_x": np.array([2]),
                        "grid_y": np.array([1]), "grid_z": np.array([1]),
                        "block_x": np.array([256]), "block_y": np.array([1]),
                        "block_z": np.array([1]), "static_smem": np.array([0])}}
    launch_args.fill(cols, [_facts([(7, 512, 1, 1, 256, 1, 1, 0, -1, 1)])])
    assert cols["kernels"]["grid_x"].tolist() == [2]


def test_tl033_reports_the_copies_bytes_on_amd():
    from tracelint.api import lint
    from tracelint.engine.config import Config
    from tracelint.engine.finding import Layer
    (f,) = lint(MI250, Config(select=["TL033"])).findings
    kernel = f.evidence[Layer.KERNEL]
    assert kernel.status == "measured"
    assert kernel.facts["bytes"].value == 2 * 2560       # the two hipMemcpyWithStream sizes


def test_tl033_says_not_captured_when_no_copy_records_its_size():
    from tracelint.rules.tl033_cpu_tensor_moved_each_step import CpuTensorMovedEachStep
    g = pd.DataFrame({"bytes": [-1, -1], "start": [0, 100], "end": [40, 150]})
    ev = CpuTensorMovedEachStep._copy_evidence(g, 0, "hint")
    assert ev.status == "not_captured" and not ev.facts and "0 bytes" not in ev.summary
    g.loc[0, "bytes"] = 4096
    ev = CpuTensorMovedEachStep._copy_evidence(g, 0, "hint")
    assert ev.facts["bytes"].value == 4096 and "1 of 2 copies" in ev.summary


def test_ranges_decoded_by_two_processes_keep_the_launch_facts(tmp_path, monkeypatch):
    """A large plain-JSON AMD trace is decoded range by range in two processes: each range's
    launch facts travel back with its columns (kineto_parallel._merge), so the Timeline is
    the whole-buffer one."""
    from tracelint import forking
    from tracelint.importers import kineto_json as kj
    from tracelint.importers import kineto_ranges as kr
    path = tmp_path / "mi300x.json"
    path.write_bytes(gzip.decompress(MI300.read_bytes()))
    monkeypatch.setattr(kr, "RANGE_BYTES", 100_000)
    monkeypatch.setattr(kr, "STREAM_MIN", 0)
    monkeypatch.setattr(forking, "_LOAD_WORKERS", 2)
    by_ranges = kj._load_in_ranges(path, lambda stage, fraction: None)
    assert by_ranges is not None and len(kr.plan(path, path.stat().st_size)[1]) > 3
    monkeypatch.setattr(kr, "STREAM_MIN", 1 << 62)
    monkeypatch.setattr(forking, "_LOAD_WORKERS", 1)
    whole = kj.load_kineto(path)
    for t in ("kernels", "copies"):
        pd.testing.assert_frame_equal(getattr(by_ranges, t), getattr(whole, t))
    assert (whole.kernels["grid_x"] >= 0).sum() > 2000 and (whole.copies["bytes"] >= 0).sum() > 300

"""TL007 register-spill: small hand-built Timelines with occupancy recomputed by hand, and a
real-trace check against the SQL launch configuration."""
from __future__ import annotations

import sqlite3

import pytest

from conftest import needs_shared
from mini_tables import RELU, US, _kernels, _run, _timeline
from raw_traces import NSYS
from tracelint.engine.finding import Layer


FUSED = "triton_per_fused_add_gelu_native_layer_norm_0"


def _reg_occupancy(regs, threads, max_warps=64, regs_sm=65536, max_blocks=32):
    """Written out from the CUDA occupancy calculator: per-warp allocation in 256s."""
    warps = -(-threads // 32)
    per_warp = -(-regs * 32 // 256) * 256
    blocks = min((regs_sm // per_warp) // warps, max_warps // warps, max_blocks)
    return blocks * warps / max_warps


def _spill_trace(regs, local, block=256, name=FUSED, cc="8.0", fused_ns=300 * US):
    rows, cols = [], {"registers_per_thread": [], "local_mem_per_thread": [], "block_x": []}
    for i in range(4):
        t = 1_000_000 + i * 1_000 * US
        rows.append((name, t, t + fused_ns, -1, 7))
        rows.append((RELU, t + fused_ns, t + fused_ns + 200 * US, -1, 7))
        cols["registers_per_thread"] += [regs, 24]
        cols["local_mem_per_thread"] += [local, 0]
        cols["block_x"] += [block, 128]
    n = len(rows)
    return _timeline(cc=cc, kernels=_kernels(rows, block_y=[1] * n, block_z=[1] * n, **cols))


def test_tl007_register_cap():
    tl = _spill_trace(regs=255, local=0)
    (f,) = _run(tl, "TL007")
    occ = _reg_occupancy(255, 256)
    assert occ == 0.125
    assert f.metrics["theoretical_occupancy"].value == occ
    assert f.impact_ns == 4 * 300 * US and f.occurrences == 4
    assert f.where.kernel == FUSED and f.key == f"regcap|{FUSED}"
    k = f.evidence[Layer.KERNEL]
    assert k.facts["registers_per_thread"].value == 255 and k.facts["threads_per_block"].value == 256


def test_tl007_turing_limits_and_unknown_gpu():
    # cc 7.5: 32 warps per SM; 200 regs x 256 threads: 10 warps by registers = 1 block = 25 %
    assert _run(_spill_trace(regs=200, local=0, cc="7.5"), "TL007") == []
    (f,) = _run(_spill_trace(regs=200, local=0, cc="7.5"), "TL007", max_occupancy=0.3)
    assert f.metrics["theoretical_occupancy"].value == _reg_occupancy(200, 256, max_warps=32, max_blocks=16)
    (g,) = _run(_spill_trace(regs=255, local=0, cc=None), "TL007")
    assert "assumed 65536 registers" in g.evidence[Layer.KERNEL].summary


def test_tl007_spill_and_not_captured_launch_config():
    (f,) = _run(_spill_trace(regs=128, local=96), "TL007")
    assert f.key == f"spill|{FUSED}" and f.metrics["local_mem_per_thread"].value == 96
    (g,) = _run(_spill_trace(regs=-1, local=32), "TL007")
    assert g.evidence[Layer.KERNEL].status == "not_captured"


def test_tl007_near_misses():
    assert _run(_spill_trace(regs=40, local=0), "TL007") == []            # full occupancy
    assert _run(_spill_trace(regs=128, local=-1), "TL007") == []          # 25 %: not below
    assert _run(_spill_trace(regs=-1, local=-1), "TL007") == []           # nothing captured
    gemm = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
    assert _run(_spill_trace(regs=255, local=0, name=gemm), "TL007") == []  # by design
    assert _run(_spill_trace(regs=128, local=64, fused_ns=2 * US), "TL007") == []  # 1 % share
    # the class exemption is an option
    assert len(_run(_spill_trace(regs=255, local=0, name=gemm), "TL007", regcap_skip_classes=())) == 1


@needs_shared()
def test_real_tl007_register_cap_vs_sql():
    """TensorRT convolutions on an RTX 3090 (cc 8.6): which kernels registers cap below 25 %,
    recomputed per launch from the SQL rows (GEMM exemption off). Registers must be the one
    binding limit: a tie with shared memory (one block either way) is not a register cap."""
    import tracelint
    path = NSYS / "nsys2023.1_memfusion-tensorrt-conv_rtx3090.sqlite"
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT s.value, k.end - k.start, k.registersPerThread, k.blockX * k.blockY * k.blockZ, "
        "k.staticSharedMemory + k.dynamicSharedMemory, k.localMemoryPerThread "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName").fetchall()
    con.close()
    total = sum(r[1] for r in rows)
    expected: dict[str, list] = {}
    ties = set()
    for name, dur, regs, threads, smem, local in rows:
        # cc 8.6: 48 warps, 16 blocks, 100 KiB shared memory per SM (+1 KiB reserved per block)
        warps = -(-threads // 32)
        by_regs = (65536 // (-(-regs * 32 // 256) * 256)) // warps
        other = min(48 // warps, 16, (100 * 1024) // (smem + 1024) if smem else 10**9)
        occ = min(by_regs, other) * warps / 48
        if local > 0 or (by_regs < other and occ < 0.25):
            expected.setdefault(name, []).append((dur, occ, regs))
        elif by_regs == other and occ < 0.25:
            ties.add(name)
    expected = {n: v for n, v in expected.items() if sum(d for d, _, _ in v) >= 0.02 * total}
    tl = tracelint.load(path)
    assert _run(tl, "TL007") == []               # tensor-core convolutions: low occupancy by design
    found = {f.where.kernel: f for f in _run(tl, "TL007", regcap_skip_classes=())}
    assert set(found) == set(expected) and ties and not ties & set(found)
    for name, launches in expected.items():
        f = found[name]
        assert f.impact_ns == sum(d for d, _, _ in launches) and f.occurrences == len(launches)
        assert f.metrics["registers_per_thread"].value == launches[0][2]
        assert f.metrics["theoretical_occupancy"].value == pytest.approx(launches[0][1], abs=1e-4)


@needs_shared()
def test_occupancy_once_per_launch_configuration():
    """Occupancy is worked out once per distinct (device, block shape, registers, shared
    memory) of the SQL rows, and each launch maps to its own configuration."""
    import tracelint
    from tracelint.timeline.occupancy import occupancy
    path = NSYS / "nsys2023.1_memfusion-tensorrt-conv_rtx3090.sqlite"
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    (configs,) = con.execute(
        "SELECT COUNT(*) FROM (SELECT DISTINCT deviceId, blockX, blockY, blockZ, registersPerThread, "
        "staticSharedMemory + dynamicSharedMemory FROM CUPTI_ACTIVITY_KIND_KERNEL)").fetchone()
    con.close()
    k = tracelint.load(path).kernels
    occ = occupancy(k, None)
    assert 1 < configs < len(k) and len(occ["threads"]) == configs
    threads = (k["block_x"] * k["block_y"] * k["block_z"]).to_numpy()
    assert (occ["threads"][occ["config"]] == threads).all()

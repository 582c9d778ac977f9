"""The device table: every row is complete and sourced, names match, unknown devices say so."""
from __future__ import annotations

import pytest

from tracelint.efficiency.devices import all_devices, device_limits, match_device

REQUIRED = ["V100-SXM2", "V100-PCIE", "T4", "A10", "A100-SXM4-40GB", "A100-SXM4-80GB",
            "A100-PCIE-40GB", "A100-PCIE-80GB", "L4", "L40S", "H100-SXM", "H100-PCIE",
            "H200-SXM", "B200", "GB200", "RTX-3090", "RTX-4090", "RTX-2080-TI",
            "QUADRO-RTX-6000", "RTX-3080", "MI250X-GCD", "MI300X", "MI325X"]


def test_every_required_row_is_complete_and_sourced():
    rows = {d.key: d for d in all_devices()}
    assert set(REQUIRED) <= set(rows)
    for d in rows.values():
        assert d.source and d.interconnect and d.sm_count > 0 and d.memory_bps > 1e11
        assert d.peak("fp32") and d.peak("fp16")           # every row has both
        for k in ("regs_per_sm", "smem_per_sm", "max_threads_per_sm", "max_blocks_per_sm"):
            assert d.limits[k] > 0
        # dense tensor-core FP16 beats CUDA-core FP32 on every listed part
        assert d.peak("fp16") > d.peak("fp32")


@pytest.mark.parametrize("name,memory,sms,key", [
    ("NVIDIA H100 80GB HBM3", None, 132, "H100-SXM"),          # shared tracelens traces
    ("NVIDIA A100-SXM4-80GB", 84990623744, 108, "A100-SXM4-80GB"),
    ("NVIDIA A100-PG509-200", 42297524224, 108, "A100-SXM4-40GB"),   # HTA traces
    ("Tesla V100-SXM2-32GB", None, 80, "V100-SXM2"),
    ("Tesla V100-DGXS-32GB", None, 80, "V100-SXM2"),
    ("NVIDIA GeForce RTX 2080 Ti", None, 68, "RTX-2080-TI"),
    ("Quadro RTX 6000", None, 72, "QUADRO-RTX-6000"),
    ("NVIDIA GeForce RTX 3080", None, 68, "RTX-3080"),
    ("NVIDIA GeForce RTX 3090", None, 82, "RTX-3090"),
    ("Tesla T4", None, 40, "T4"),
    ("NVIDIA A10", None, 72, "A10"),
    ("NVIDIA H100 PCIe", None, 114, "H100-PCIE"),
    ("AMD Instinct MI300X", None, 304, "MI300X"),
    ("AMD Instinct MI250X / MI250", None, 110, "MI250X-GCD"),
])
def test_real_names_match(name, memory, sms, key):
    m = match_device(name, memory, sms)
    assert m.known and m.spec.key == key, m.reason
    assert m.spec.sm_count == sms


def test_unknown_and_ambiguous_devices_say_so():
    m = match_device("AMD Radeon Graphics")        # the shared MI250 trace's name: no guess
    assert not m.known and "unknown device" in m.reason
    assert not match_device(None).known and "no device name" in match_device(None).reason
    amb = match_device("NVIDIA A100-PG509-200")     # 40 or 80 GB: memory not given
    assert not amb.known and "ambiguous" in amb.reason and len(amb.candidates) == 2


def test_device_limits_for_occupancy():
    lim = device_limits("NVIDIA H100 80GB HBM3")
    assert lim["regs_per_sm"] == 65536 and lim["max_threads_per_sm"] == 2048
    assert lim["smem_per_sm"] == 228 * 1024 and lim["sm_count"] == 132
    assert device_limits("NVIDIA GeForce RTX 2080 Ti")["max_threads_per_sm"] == 1024
    assert device_limits("some unknown accelerator") is None


def test_ridge_point_h100_bf16():
    h100 = match_device("NVIDIA H100 80GB HBM3").spec
    assert h100.ridge("bf16") == pytest.approx(989.4e12 / 3350e9)

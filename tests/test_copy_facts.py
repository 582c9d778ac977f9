"""TL004's facts and fix text follow what was measured: pinned-memory advice only when copies
are pageable, no host-link peak guessed when the trace does not name the GPU, and how much of
the copy time compute could hide at all. Synthetic traces in both formats, with twins."""
from __future__ import annotations

import pytest

from tracelint.engine.config import Config
from tracelint.engine.finding import Layer
from tracelint.api import lint
from tracelint.synth.builder import TraceBuilder

GEMM = "sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32"
MB64 = 64 << 20


def _trace(src_kind="pinned", device="NVIDIA A100-SXM4-80GB", copy_ns=5_000_000, gemm_ns=1_000_000):
    b = TraceBuilder(device)
    for s in range(3):
        with b.step(s):
            b.copy("H2D", MB64, copy_ns, src_kind=src_kind)
            for _ in range(4):
                b.launch(GEMM, gemm_ns)
            b.sync("cudaStreamSynchronize")
    return b


def _finding(b, fmt, tmp_path):
    path = tmp_path / ("t.json.gz" if fmt == "kineto" else "t.sqlite")
    (b.write_kineto if fmt == "kineto" else b.write_nsys_sqlite)(path)
    (f,) = lint(path, Config(select=["TL004"])).findings
    return f


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_no_pinned_memory_advice_when_nothing_is_pageable(fmt, tmp_path):
    f = _finding(_trace("pinned"), fmt, tmp_path)
    assert f.metrics["pageable_copies"].value == 0
    assert "pin" not in f.fix.lower() and "side stream" in f.fix
    # the copies' own stream is the reason given, not where the fix puts them
    assert "3 of the copies share the compute stream: issue them" in f.fix
    assert "on the compute stream with non_blocking" not in f.fix
    g = _finding(_trace("pageable"), fmt, tmp_path)           # twin: pageable copies
    assert g.metrics["pageable_copies"].value == 3 and "pin_memory" in g.fix


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_no_link_peak_guessed_without_a_gpu_name(fmt, tmp_path):
    f = _finding(_trace(device=""), fmt, tmp_path)
    k = f.evidence[Layer.KERNEL]
    assert "link_peak_gbps" not in k.facts and "Gen" not in k.summary and "no peak is assumed" in k.summary
    # the achieved bandwidth is still measured: 3 x 64 MiB in 3 x 5 ms
    assert k.facts["achieved_gbps"].value == round(3 * MB64 / (3 * 5_000_000), 2)
    g = _finding(_trace(), fmt, tmp_path)                      # twin: the trace names an A100
    assert g.evidence[Layer.KERNEL].facts["link_peak_gbps"].value == 25.0


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_how_much_compute_could_hide_the_copies(fmt, tmp_path):
    # 5 ms copies, 4 x 0.25 ms of compute per step: at most 1 ms per step can be hidden
    f = _finding(_trace(gemm_ns=250_000), fmt, tmp_path)
    hide = f.evidence[Layer.SYSTEM].facts["hideable_ns"].value
    assert hide == 3 * 4 * 250_000
    assert f"at most {hide / 1e6:.2f} ms" in f.message and "move fewer bytes" in f.fix
    g = _finding(_trace(gemm_ns=2_000_000), fmt, tmp_path)     # twin: ample compute
    assert "at most" not in g.message and "fewer bytes" not in g.fix

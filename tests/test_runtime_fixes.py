"""Advice in the program's own terms: a trace of a PyTorch program gets PyTorch's knobs, one of
a CUDA C, OpenMP or Fortran program the GPU runtime's calls (TL005, TL032). Real traces."""
from __future__ import annotations

import pytest

import tracelint
from conftest import REPO, TRACES, trace_or_skip
from tracelint.api import lint
from tracelint.engine.config import Config
from tracelint.timeline import classify

NSYS = TRACES / "nsys"


def _fixes(path, rule):
    return [f.fix for f in lint(trace_or_skip(path), Config(select=[rule])).findings]


def test_native_copy_gets_async_copy_advice_not_pytorch():
    (fix,) = _fixes(NSYS / "nsys2022.2_pipit-saxpy-mpi-cuda_a100.sqlite", "TL005")
    assert "cudaMemcpyAsync" in fix and "pinned" in fix
    assert ".item()" not in fix and "torch" not in fix


def test_native_device_sync_gets_event_advice():
    (fix,) = _fixes(NSYS / "nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite", "TL005")
    assert fix.startswith("Drop `cudaDeviceSynchronize`") and "cudaEventSynchronize" in fix


def test_pytorch_program_keeps_pytorch_advice():
    (fix,) = _fixes(REPO / "fixtures" / "examples" / "training_step_antipatterns.sqlite", "TL005")
    assert ".item()" in fix


@pytest.mark.parametrize("name, pytorch", [
    ("nsys2026.1_nsys-ai-mock-pytorch_rtx3080.sqlite", True),      # ATen kernels, no ranges
    ("nsys2026.2_nsys-ai-pytorch-2gpu-1s-slice_h100.sqlite", True),  # aten:: op ranges
    ("nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite", False),       # CUDA C++
    ("nsys2023.3_sc23-openmp-offload_t4.sqlite", False),           # OpenMP offload
])
def test_which_traces_are_pytorch_programs(name, pytorch):
    tl = tracelint.load(trace_or_skip(NSYS / name))
    assert classify.is_pytorch_trace(tl.ranges["name"].unique(), tl.kernels["name"].unique()) is pytorch


def test_native_unoverlapped_copies_get_runtime_advice():
    fixes = _fixes(NSYS / "nsys2022.2_pipit-saxpy-mpi-cuda_a100.sqlite", "TL004")
    assert fixes and all("cudaMallocHost / cudaHostRegister" in f and "cudaMemcpyAsync" in f
                         and "DataLoader" not in f and "non_blocking" not in f for f in fixes)


def test_launch_gaps_of_a_native_program_get_runtime_advice():
    fixes = _fixes(NSYS / "nsys2024.5_pipit-cloverleaf-cuda_a100.sqlite", "TL001")
    assert any("cudaStreamBeginCapture" in f for f in fixes)
    assert any("cudaProfilerStart" in f for f in fixes)            # the warm-up finding
    assert not any("torch" in f or "DataLoader" in f for f in fixes)
    torch_fixes = _fixes(REPO / "fixtures" / "examples" / "training_step_antipatterns.sqlite", "TL001")
    assert any("torch.compile" in f for f in torch_fixes)


# ----- JAX programs: JAX's knobs, not PyTorch's or the CUDA runtime's ----------------------
def _jax_fixes(scenario_id: str, tmp_path) -> list:
    from tracelint.synth.jax_writer import write_jax_trace
    from tracelint.synth.scenarios import all_scenarios
    sc = next(s for s in all_scenarios() if s.id == scenario_id)
    path = write_jax_trace(sc.build(), tmp_path / f"{scenario_id}.trace.json.gz")
    return [f.fix for f in lint(path, Config(select=[sc.rule])).findings]


@pytest.mark.parametrize("scenario, words", [
    ("TL001-positive-host-bound-any-format", ("jax.jit", "lax.scan")),
    ("TL001-positive-blocked-in-blocking-copy", ("jax.device_get", "block_until_ready")),
    ("TL005-positive", ("jax.device_get", "lax.cond")),
    ("TL005-positive-free-mid-step", ("XLA_PYTHON_CLIENT_PREALLOCATE",)),
    ("TL004-positive-pageable", ("jax.device_put",)),
    ("TL032-positive-pageable", ("jax.device_put",)),
])
def test_jax_programs_get_jax_advice(scenario, words, tmp_path):
    """The synthetic jax.profiler traces keep the scenarios' ATen kernel names: the importer's
    word (meta.extra["framework"]) decides, not the names."""
    fixes = _jax_fixes(scenario, tmp_path)
    assert fixes and any(all(w in f for w in words) for f in fixes), fixes
    assert not any(k in f for f in fixes for k in ("torch", ".item()`", "DataLoader", "pin_memory",
                                                   "cudaStreamBeginCapture", "cudaMemcpyAsync"))


def test_xla_module_ranges_make_an_nsys_trace_a_jax_program():
    """An nsys capture of a JAX program names XLA's modules in NVTX ranges."""
    import pandas as pd
    from tracelint.timeline.model import Timeline
    tl = Timeline()
    tl.ranges = pd.DataFrame({"name": ["XlaModule:#hlo_module=jit_train_step,program_id=3#"]})
    assert classify.trace_framework(tl) == "jax"
    tl.ranges = pd.DataFrame({"name": ["aten::mm", "jit_helper"]})      # PyTorch's names win
    assert classify.trace_framework(tl) == "pytorch"
    tl.ranges = pd.DataFrame({"name": ["solver loop"]})
    assert classify.trace_framework(tl) == "native"

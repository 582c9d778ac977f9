"""TL011 fp32-gemm on real traces: the FP32 GEMM share recomputed from the raw JSON."""
from __future__ import annotations

import gzip
import json
from decimal import Decimal

import pytest

import tracelint
from conftest import TRACES
from tracelint.engine.config import Config
from tracelint.api import lint


@pytest.mark.parametrize("name", ["hta_alexnet_a100.json.gz", "kineto_tbplugin_resnet50_v100_2021-06.pt.trace.json.gz"])
def test_fp32_gemm_share_matches_raw_json(name):
    path = TRACES / "torch" / name
    if not path.exists():
        pytest.skip("real trace not present")
    (f,) = lint(tracelint.load(path), Config(select=["TL011"])).findings
    raw = json.load(gzip.open(path), parse_float=Decimal)["traceEvents"]
    kernels = [e for e in raw if e.get("cat") in ("kernel", "Kernel") and e.get("ph") == "X"
               and e.get("args", {}).get("device", e.get("pid")) == f.where.device]
    ns = [(e["name"], int(Decimal(str(e["dur"])) * 1000)) for e in kernels]
    # FP32 CUDA-core math: cuBLAS/cuDNN sgemm and scudnn kernels, and cuDNN's FP32 conv engines
    # (dgrad_engine<float, wgrad_alg0_engine<float: a third of ResNet-50's V100 time).
    fp32 = sum(d for n, d in ns if ("sgemm" in n or "scudnn" in n or "_engine<float," in n))
    assert f.impact_ns == fp32
    assert f.metrics["fp32_gemm_share"].value == pytest.approx(round(fp32 / sum(d for _, d in ns), 4))


def test_tensor_core_generation_from_device():
    from tracelint.rules.tl011_fp32_gemm import tensor_core_support
    assert tensor_core_support("NVIDIA A100-SXM4-80GB", None) == "tf32"
    assert tensor_core_support("Tesla V100-SXM2-32GB", None) == "fp16"
    assert tensor_core_support(None, "9.0") == "tf32" and tensor_core_support(None, "6.1") is None

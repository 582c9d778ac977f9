"""TL011's fix follows the GPU's tensor cores: on Volta and Turing (FP16 tensor cores only) the
TF32 and BF16 settings change nothing, so the fix is FP16 autocast; from Ampere on it is TF32
first. Real traces, one of each."""
from __future__ import annotations

from conftest import TRACES, trace_or_skip
from tracelint.api import lint
from tracelint.engine.config import Config


def _fix(name: str) -> str:
    (f,) = lint(trace_or_skip(TRACES / "torch" / name), Config(select=["TL011"])).findings
    return f.fix


def test_volta_gets_fp16_autocast_not_tf32():
    fix = _fix("hta_v100_rank0of1.pt.trace.json.gz")
    assert "dtype=torch.float16" in fix and "GradScaler" in fix
    assert "set_float32_matmul_precision" not in fix and "bfloat16" not in fix


def test_ampere_gets_tf32_first():
    fix = _fix("hta_alexnet_a100.json.gz")
    assert fix.startswith("allow TF32") and "set_float32_matmul_precision" in fix

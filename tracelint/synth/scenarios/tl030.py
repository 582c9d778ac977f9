"""TL030 per-parameter-optimizer: AdamW with foreach=False (five one-tensor ops per parameter)
and zero_grad(set_to_none=False) over 48 parameters; near-misses: the fused optimizer and
set_to_none=True, and a small model whose loop stays under the threshold. The nsys form carries
the ops as emit_nvtx ranges (without them nsys cannot see framework ops)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"
ELT = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >"
FUSED = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>"


def _forward_backward(b: TraceBuilder) -> None:
    for _ in range(6):
        b.launch(GEMM, 200_000)


def per_parameter(params: int = 48) -> TraceBuilder:
    b = TraceBuilder()
    for s in range(4):
        with b.step(s):
            _forward_backward(b)
            with b.range("Optimizer.step#AdamW.step"):
                for _ in range(params):
                    for op in ("aten::mul_", "aten::add_", "aten::addcmul_", "aten::sqrt", "aten::addcdiv_"):
                        with b.op(op):
                            b.launch(ELT, 3_000)
            with b.range("Optimizer.zero_grad#AdamW.zero_grad"):
                for _ in range(params):
                    with b.op("aten::zero_"):
                        b.memset(bytes=1 << 20, dur_ns=2_000)
    return b


def fused() -> TraceBuilder:
    b = TraceBuilder()
    for s in range(4):
        with b.step(s):
            _forward_backward(b)
            with b.range("Optimizer.step#AdamW.step"):
                with b.op("aten::_fused_adamw_"):
                    b.launch(FUSED, 60_000)
            with b.range("Optimizer.zero_grad#AdamW.zero_grad"):
                b.cpu(5_000)
    return b


def clip(params: int = 48, foreach: bool = False) -> TraceBuilder:
    """clip_grad_norm_ records no range: its Python frame (with stacks) is the region."""
    b = TraceBuilder()
    for s in range(4):
        with b.step(s):
            _forward_backward(b)
            with b.python("train.py", 10, "train_step"), \
                    b.python("torch/nn/utils/clip_grad.py", 39, "_no_grad_wrapper"), \
                    b.python("torch/nn/utils/clip_grad.py", 184, "clip_grad_norm_"):
                ops = (("aten::_foreach_norm", "aten::_foreach_mul_") if foreach else
                       ["aten::linalg_vector_norm"] * params + ["aten::mul_"] * params)
                for op in ops:
                    with b.op(op):
                        b.launch(ELT, 3_000)
    return b


SCENARIOS = [
    Scenario("TL030", "positive-foreach-off-and-zero-grad", per_parameter, True,
             expect={"occurrences": 4, "key": "step"}, nvtx_ops=True),
    Scenario("TL030", "near-miss-fused-set-to-none", fused, False, nvtx_ops=True),
    Scenario("TL030", "near-miss-few-parameters", lambda: per_parameter(params=4), False,
             nvtx_ops=True),
    Scenario("TL030", "positive-clip-per-parameter-frame", clip, True,
             expect={"occurrences": 4, "key": "clip", "where.function": "train_step"}, formats=("kineto",)),
    Scenario("TL030", "near-miss-clip-foreach", lambda: clip(foreach=True), False, formats=("kineto",)),
]

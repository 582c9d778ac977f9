"""TL034 conv-bias-before-batchnorm: three Conv2d(bias=True) -> BatchNorm2d blocks per training
forward, with shapes recorded (Kineto Input Dims; nsys emit_nvtx "sizes = [...]"); on CUDA the
bias is a separate add kernel inside the convolution. Near-misses: the same model with
bias=False, a convolution with a bias followed by ReLU (no BatchNorm), and the anti-pattern
captured without shapes (the bias cannot be seen: the rule is skipped, it does not guess)."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

CONV = "sm80_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nchwkcrs_nchw_tilesize128x128x16_stage4"
BIAS_ADD = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::CUDAFunctor_add<float> > >"
BN = "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>"
RELU = "void at::native::vectorized_elementwise_kernel<4, at::native::clamp_min_scalar_kernel_impl<float> >"
#: (c_in, c_out, spatial) per block; batch 32
BLOCKS = ((3, 64, 56), (64, 128, 28), (128, 256, 14))
N = 32
CONV_TAIL = [[], [], [], []]     # stride, padding, dilation, groups: lists/scalars, no tensor


def _args(dims: list, types: list) -> dict:
    return {"Input Dims": dims, "Input type": types}


def _conv(b: TraceBuilder, c_in: int, c_out: int, hw: int, bias: bool, shapes: bool) -> None:
    dims = [[N, c_in, hw, hw], [c_out, c_in, 3, 3], [c_out] if bias else []] + CONV_TAIL
    types = ["float", "float", "float" if bias else "", "ScalarList", "ScalarList", "ScalarList", "Scalar"]
    with b.op("aten::conv2d", _args(dims, types) if shapes else None):
        with b.op("aten::convolution"):
            with b.op("aten::_convolution"):
                with b.op("aten::cudnn_convolution"):
                    b.launch(CONV, 120_000)
                if bias:
                    with b.op("aten::add_"):
                        b.launch(BIAS_ADD, 9_000)


def _bn(b: TraceBuilder, c: int, hw: int, shapes: bool) -> None:
    with b.op("aten::add_", _args([[], [], []], ["long int", "Scalar", "Scalar"]) if shapes else None):
        b.cpu(4_000)              # num_batches_tracked.add_(1): a 0-d tensor
    dims = [[N, c, hw, hw], [c], [c], [c], [c], [], [], [], []]
    with b.op("aten::batch_norm", _args(dims, ["float"] * 5 + ["Scalar"] * 4) if shapes else None):
        with b.op("aten::cudnn_batch_norm"):
            b.launch(BN, 15_000)


def _relu(b: TraceBuilder, c: int, hw: int, shapes: bool) -> None:
    with b.op("aten::relu", _args([[N, c, hw, hw]], ["float"]) if shapes else None):
        b.launch(RELU, 6_000)


def model(bias: bool = True, norm: bool = True, shapes: bool = True, steps: int = 4) -> TraceBuilder:
    b = TraceBuilder()
    for s in range(steps):
        with b.step(s):
            with b.python("train.py", 41, "forward"):
                for c_in, c_out, hw in BLOCKS:
                    _conv(b, c_in, c_out, hw, bias, shapes)
                    if norm:
                        _bn(b, c_out, hw, shapes)
                    _relu(b, c_out, hw, shapes)
            b.cpu(200_000)
    return b


SCENARIOS = [
    Scenario("TL034", "positive-conv-bias-then-batchnorm", model, True,
             expect={"occurrences": 12, "key": "conv_bias_bn", "metrics.per_iteration": 3,
                     "metrics.bias_elements": 64 + 128 + 256}, nvtx_ops=True),
    Scenario("TL034", "near-miss-bias-false", lambda: model(bias=False), False, nvtx_ops=True),
    Scenario("TL034", "near-miss-bias-then-relu", lambda: model(norm=False), False, nvtx_ops=True),
    Scenario("TL034", "near-miss-shapes-not-recorded", lambda: model(shapes=False), False,
             nvtx_ops=True),
]

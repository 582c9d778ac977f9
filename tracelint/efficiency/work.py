"""Work models: FLOPs and minimum bytes moved by one op, from its recorded input shapes.

Input: an op name and the torch.profiler `record_shapes=True` args (Input Dims, Input type,
Concrete Inputs). Each model returns a Work with the formula it used and its inputs, so a
report can show how an estimate was made. FLOPs count a multiply-add as 2. Minimum bytes are
each input read once and each output written once (what a perfectly fused kernel moves); real
kernels move at least this much, so achieved bandwidth from them is a lower bound.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

#: Input type text (as PyTorch records it) -> (math type, bytes per element).
DTYPES: dict[str, tuple[str, int]] = {
    "float": ("fp32", 4), "double": ("fp64", 8), "c10::Half": ("fp16", 2),
    "c10::BFloat16": ("bf16", 2), "c10::Float8_e4m3fn": ("fp8", 1), "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1), "c10::Float8_e5m2fnuz": ("fp8", 1),
    "c10::Float4_e2m1fn_x2": ("fp4", 1), "long int": ("int64", 8), "long": ("int64", 8),
    "int": ("int32", 4), "short int": ("int16", 2), "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1), "bool": ("bool", 1), "c10::complex<float>": ("fp32", 8),
}


@dataclass(frozen=True)
class Work:
    flops: float
    bytes: float
    dtype: str                     # math type of the inputs: bf16, fp16, fp32, fp8, ...
    kind: str                      # gemm | conv | attention | norm | softmax | elementwise | ...
    formula: str
    inputs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OpArgs:
    """One op's recorded inputs: dims per argument, type text per argument, concrete values."""

    dims: list
    types: list
    concrete: list

    def tensors(self) -> list[tuple[list[int], str]]:
        """(shape, dtype) of the tensor arguments (shape non-empty, known element type)."""
        out = []
        for i, d in enumerate(self.dims):
            t = self.types[i] if i < len(self.types) else ""
            if isinstance(d, list) and d and _is_shape(d) and t in DTYPES:
                out.append((d, t))
        return out

    def dim(self, i: int) -> list[int] | None:
        d = self.dims[i] if i < len(self.dims) else None
        return d if isinstance(d, list) and d and _is_shape(d) else None

    def value(self, i: int) -> str | None:
        c = self.concrete[i] if self.concrete and i < len(self.concrete) else None
        return c if isinstance(c, str) and c != "" else None

    def ints(self, i: int) -> list[int] | None:
        v = self.value(i)
        if v is None:
            return None
        try:
            x = [int(s) for s in v.strip("[]").split(",") if s.strip()]
        except ValueError:
            return None
        return x or None

    def flag(self, i: int) -> bool | None:
        v = self.value(i)
        return {"True": True, "False": False, "1": True, "0": False}.get(v) if v else None


def _is_shape(d: list) -> bool:
    """A recorded tensor shape: non-negative integers (not bools, not strings)."""
    return all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in d)


def numel(shape) -> int:
    return math.prod(shape) if shape else 1


def _dt(t: str) -> tuple[str, int]:
    return DTYPES.get(t, ("unknown", 0))


# ----- GEMMs -------------------------------------------------------------------------------------
def _gemm(m, n, k, batch, dt, bias=0) -> Work:
    name, b = _dt(dt)
    flops = 2.0 * batch * m * n * k
    nbytes = b * (batch * (m * k + k * n + m * n) + bias)
    return Work(flops, nbytes, name, "gemm", "2·B·M·N·K FLOPs; bytes = B·(M·K + K·N + M·N)·elem",
                {"B": batch, "M": m, "N": n, "K": k, "dtype": name})


def mm(a: OpArgs) -> Work | None:
    x, w = a.dim(0), a.dim(1)
    if not (x and w and len(x) == 2 and len(w) == 2):
        return None
    return _gemm(x[0], w[1], x[1], 1, a.types[0])


def addmm(a: OpArgs) -> Work | None:
    bias, x, w = a.dim(0), a.dim(1), a.dim(2)
    if not (x and w and len(x) == 2 and len(w) == 2):
        return None
    return _gemm(x[0], w[1], x[1], 1, a.types[1], numel(bias) if bias else 0)


def bmm(a: OpArgs, first: int = 0) -> Work | None:
    x, w = a.dim(first), a.dim(first + 1)
    if not (x and w and len(x) == 3 and len(w) == 3):
        return None
    return _gemm(x[1], w[2], x[2], x[0], a.types[first])


def linear(a: OpArgs) -> Work | None:
    x, w = a.dim(0), a.dim(1)
    if not (x and w and len(w) == 2):
        return None
    bias = a.dim(2)
    return _gemm(numel(x[:-1]), w[0], x[-1], 1, a.types[0], numel(bias) if bias else 0)


# ----- convolutions ------------------------------------------------------------------------------
#: op -> positions of (stride, padding, dilation) in its arguments.
_CONV_ARGS = {"aten::cudnn_convolution": (3, 2, 4), "aten::miopen_convolution": (4, 3, 5),
              "aten::convolution": (3, 4, 5), "aten::_convolution": (3, 4, 5),
              "aten::conv2d": (3, 4, 5), "aten::conv1d": (3, 4, 5), "aten::conv3d": (3, 4, 5)}


def _conv_work(kind, out_numel, weight, dt, in_numel, out_bytes_numel, extra) -> Work:
    name, b = _dt(dt)
    flops = 2.0 * out_numel * weight[1] * numel(weight[2:])
    nbytes = b * (in_numel + numel(weight) + out_bytes_numel)
    return Work(flops, nbytes, name, "conv",
                "2·numel(output)·(C_in/groups)·prod(kernel) FLOPs; bytes = input + weight + output",
                {"pass": kind, "weight": weight, "dtype": name, **extra})


def conv_forward(op: str, a: OpArgs) -> Work | None:
    x, w = a.dim(0), a.dim(1)
    pos = _CONV_ARGS.get(op)
    if not (x and w and pos) or len(x) != len(w):
        return None
    if op in ("aten::convolution", "aten::_convolution") and a.flag(6):
        return None                      # transposed: the output size follows another formula
    nsp = len(x) - 2
    stride, pad, dil = (a.ints(p) for p in pos)
    if stride is None or pad is None:
        return None                      # PyTorch < 1.13 records no Concrete Inputs
    dil = dil or [1]
    pick = lambda v, i: v[i] if len(v) > i else v[0]   # noqa: E731 - [1] means 1 per dim
    out_sp = [(x[2 + i] + 2 * pick(pad, i) - pick(dil, i) * (w[2 + i] - 1) - 1) // pick(stride, i) + 1
              for i in range(nsp)]
    if min(out_sp) <= 0:
        return None
    out = [x[0], w[0], *out_sp]
    return _conv_work("fwd", numel(out), w, a.types[0], numel(x), numel(out),
                      {"input": x, "output": out, "stride": stride, "padding": pad})


def conv_backward_input(a: OpArgs) -> Work | None:
    """cudnn_convolution_backward_input(input_size, grad_output, weight, ...)."""
    go, w = a.dim(1), a.dim(2)
    if not (go and w):
        return None
    in_numel = numel(go) // max(go[1], 1) * w[1]      # grad_input ~ grad_output with C_in channels
    return _conv_work("dgrad", numel(go), w, a.types[1], numel(go), in_numel,
                      {"grad_output": go})


def conv_backward_weight(a: OpArgs) -> Work | None:
    """cudnn_convolution_backward_weight(weight_size, grad_output, input, ...)."""
    go, x = a.dim(1), a.dim(2)
    wsize = a.ints(0)
    if not (go and x and wsize):
        return None        # weight size not recorded: a 3x3 and a 1x1 look alike, no guess
    w = wsize
    return _conv_work("wgrad", numel(go), w, a.types[1], numel(x), numel(go),
                      {"grad_output": go, "input": x})


def convolution_backward(a: OpArgs) -> Work | None:
    """convolution_backward(grad_output, input, weight, ..., output_mask): dgrad + wgrad."""
    go, x, w = a.dim(0), a.dim(1), a.dim(2)
    if not (go and x and w):
        return None
    mask = [s.strip() == "True" for s in (a.value(10) or "[True, True, False]").strip("[]").split(",")]
    passes = [p for p, on in zip(("dgrad", "wgrad"), mask) if on]
    if not passes:
        return None
    name, b = _dt(a.types[0])
    flops = 2.0 * numel(go) * w[1] * numel(w[2:]) * len(passes)
    nbytes = b * (numel(go) + numel(x) + numel(w) + (numel(x) if "dgrad" in passes else 0)
                  + (numel(w) if "wgrad" in passes else 0))
    return Work(flops, nbytes, name, "conv",
                "2·numel(grad_output)·(C_in/groups)·prod(kernel) FLOPs per pass (dgrad, wgrad)",
                {"passes": passes, "grad_output": go, "input": x, "weight": w, "dtype": name})


# ----- attention ---------------------------------------------------------------------------------
#: op -> (layout of q/k/v: "bshd" or "bhsd", position of is_causal, backward?)
_ATTN = {"aten::_flash_attention_forward": ("bshd", 8, False),
         "aten::_scaled_dot_product_flash_attention": ("bhsd", 4, False),
         "aten::_scaled_dot_product_efficient_attention": ("bhsd", 6, False),
         "aten::_scaled_dot_product_cudnn_attention": ("bhsd", 6, False),
         "aten::_efficient_attention_forward": ("bshd", 9, False),     # custom_mask_type
         "aten::_flash_attention_backward": ("bshd", 11, True),
         "aten::_scaled_dot_product_flash_attention_backward": ("bhsd", 11, True)}


def causal_pairs(sq: int, sk: int) -> int:
    """Query-key pairs a causal mask keeps, aligned to the bottom right (flash attention):
    query i sees keys j <= i + (Sk - Sq). Sq == Sk gives S·(S+1)/2."""
    if sk >= sq:
        return sq * (sq + 1) // 2 + sq * (sk - sq)
    return sk * (sk + 1) // 2


def attention(op: str, a: OpArgs) -> Work | None:
    layout, causal_at, backward = _ATTN[op]
    off = 1 if backward else 0                       # backward ops start with grad_out
    q, k = a.dim(off), a.dim(off + 1)
    if not (q and k and len(q) == 4 and len(k) == 4):
        return None
    if layout == "bshd":
        b, sq, h, d = q
        sk = k[1]
    else:
        b, h, sq, d = q
        sk = k[2]
    if op == "aten::_efficient_attention_forward":     # custom_mask_type: 0 none, 1/2 causal
        causal = a.value(causal_at) in ("1", "2")
    else:
        causal = bool(a.flag(causal_at))
    # score pairs: all Sq·Sk, or for causal masking (aligned to the bottom right as flash
    # attention does) the pairs j <= i + (Sk - Sq)
    pairs = causal_pairs(sq, sk) if causal else sq * sk
    mult = 10.0 if backward else 4.0            # fwd: QK^T + PV (2 GEMMs); bwd: 5 GEMMs
    name, eb = _dt(a.types[off])
    flops = mult * b * h * d * pairs
    io = b * h * d * (2 * sq + 2 * sk)              # q, o (Sq rows) and k, v (Sk rows)
    nbytes = eb * io * (2 if backward else 1)
    return Work(flops, nbytes, name, "attention",
                f"{int(mult)}·B·H·D·pairs FLOPs (pairs = Sq·Sk{', causal: lower triangle' if causal else ''}); "
                "bytes = Q + K + V + O",
                {"B": b, "H": h, "Sq": sq, "Sk": sk, "D": d, "causal": causal,
                 "pass": "bwd" if backward else "fwd", "dtype": name})


# ----- memory-bound ops --------------------------------------------------------------------------
def _has_out_arg(a: OpArgs) -> bool:
    """`op.out(self, scalar..., out)`: a last tensor after a scalar argument, shaped like the
    first tensor, is the output (written, not read): clamp_min(x, 0, out=x) under relu_."""
    tensor_pos = [i for i, d in enumerate(a.dims) if isinstance(d, list) and d]
    if len(tensor_pos) < 2:
        return False
    last = tensor_pos[-1]
    scalar_before = any(not (isinstance(a.dims[i], list) and a.dims[i]) for i in range(tensor_pos[0], last))
    return scalar_before and a.dims[last] == a.dims[tensor_pos[0]]


def _streaming(kind: str, flops_per_elem: float, passes_out: float = 1.0) -> Callable:
    """Ops that read their tensor inputs and write an output the size of the largest input."""
    def model(a: OpArgs) -> Work | None:
        ts = a.tensors()
        if not ts:
            return None
        big, dt = max(ts, key=lambda t: numel(t[0]))
        name, b = _dt(dt)
        n = numel(big)
        reads = ts[:-1] if _has_out_arg(a) else ts
        read = sum(numel(s) * _dt(t)[1] for s, t in reads)
        nbytes = read + passes_out * n * b
        return Work(flops_per_elem * n, nbytes, name, kind,
                    f"{flops_per_elem:g} FLOP/element; bytes = inputs read once + output written once",
                    {"elements": n, "shape": big, "dtype": name})
    return model


def _reduction(a: OpArgs) -> Work | None:
    ts = a.tensors()
    if not ts:
        return None
    s, dt = ts[0]
    name, b = _dt(dt)
    return Work(float(numel(s)), numel(s) * b, name, "reduction",
                "1 FLOP/element read; bytes = input read once (the reduced output is small)",
                {"elements": numel(s), "shape": s, "dtype": name})


def _gather(a: OpArgs) -> Work | None:
    """embedding(weight, indices) / index_select(self, dim, index): rows gathered and written."""
    ts = a.tensors()
    if len(ts) < 2:
        return None
    (w, dt), (idx, it) = ts[0], ts[-1]
    name, b = _dt(dt)
    row = numel(w[1:]) if len(w) > 1 else 1
    out = numel(idx) * row
    return Work(0.0, 2 * out * b + numel(idx) * _dt(it)[1], name, "embedding",
                "0 FLOPs; bytes = gathered rows read + written, indices read",
                {"rows": numel(idx), "row_elements": row, "dtype": name})


def _copy(a: OpArgs) -> Work | None:
    ts = a.tensors()
    if not ts:
        return None
    if len(ts) >= 2 and numel(ts[0][0]) == numel(ts[1][0]):      # copy_(dst, src)
        (d, dt), (s, st) = ts[0], ts[1]
        nbytes = numel(d) * _dt(dt)[1] + numel(s) * _dt(st)[1]
    else:                                                          # cat / clone / contiguous
        nbytes = 2 * sum(numel(s) * _dt(t)[1] for s, t in ts)
    name = _dt(ts[0][1])[0]
    return Work(0.0, nbytes, name, "copy", "0 FLOPs; bytes = source read + destination written",
                {"elements": numel(ts[0][0]), "dtype": name})


_ELEMENTWISE = ("add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "gelu", "silu",
                "relu", "relu_", "sigmoid", "tanh", "clamp_min", "clamp_min_", "threshold_backward",
                "gelu_backward", "silu_backward", "neg", "exp", "pow", "rsqrt", "where",
                "masked_fill_", "eq", "ne", "lt", "gt", "le", "ge", "fill_", "zero_",
                "addcmul_", "addcdiv_", "lerp_", "sqrt", "abs", "sign", "hardtanh",
                "sigmoid_backward", "tanh_backward", "_foreach_add_", "_foreach_mul_")
_NORM = ("native_layer_norm", "layer_norm", "native_batch_norm", "cudnn_batch_norm",
         "miopen_batch_norm", "_batch_norm_impl_index", "group_norm", "native_group_norm",
         "rms_norm", "_fused_rms_norm")
_NORM_BWD = ("native_layer_norm_backward", "native_batch_norm_backward",
             "cudnn_batch_norm_backward", "miopen_batch_norm_backward", "_fused_rms_norm_backward")

MODELS: dict[str, Callable[[str, OpArgs], Work | None]] = {
    "aten::mm": lambda op, a: mm(a), "aten::addmm": lambda op, a: addmm(a),
    "aten::bmm": lambda op, a: bmm(a), "aten::baddbmm": lambda op, a: bmm(a, 1),
    "aten::linear": lambda op, a: linear(a),
    "aten::cudnn_convolution_backward_input": lambda op, a: conv_backward_input(a),
    "aten::cudnn_convolution_backward_weight": lambda op, a: conv_backward_weight(a),
    "aten::convolution_backward": lambda op, a: convolution_backward(a),
    **{op: conv_forward for op in _CONV_ARGS},
    **{op: attention for op in _ATTN},
    "aten::_softmax": lambda op, a: _streaming("softmax", 5)(a),
    "aten::_log_softmax": lambda op, a: _streaming("softmax", 5)(a),
    "aten::_softmax_backward_data": lambda op, a: _streaming("softmax", 3)(a),
    **{f"aten::{n}": (lambda op, a: _streaming("norm", 5)(a)) for n in _NORM},
    **{f"aten::{n}": (lambda op, a: _streaming("norm", 8, 1.0)(a)) for n in _NORM_BWD},
    **{f"aten::{n}": (lambda op, a: _streaming("elementwise", 1)(a)) for n in _ELEMENTWISE},
    **{f"aten::{n}": (lambda op, a: _reduction(a)) for n in
       ("sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "linalg_vector_norm",
        "norm", "all", "any")},
    "aten::embedding": lambda op, a: _gather(a),
    # index_select(self, dim, index): rows only when dim is recorded as 0
    "aten::index_select": lambda op, a: _gather(a) if a.value(1) == "0" else None,
    **{f"aten::{n}": (lambda op, a: _copy(a)) for n in
       ("copy_", "_to_copy", "clone", "contiguous", "cat", "_cat", "stack")},
}


def op_work(op: str, dims: Any, types: Any, concrete: Any = None) -> Work | None:
    """The work of one op call, or None when no model covers it or its shapes do not fit."""
    model = MODELS.get(op)
    if model is None or not isinstance(dims, list):
        return None
    args = OpArgs(dims, [str(t) for t in types] if isinstance(types, list) else [],
                  concrete if isinstance(concrete, list) else [])
    try:
        return model(op, args)
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError, AttributeError):
        return None          # a shape the model does not understand: no estimate, not a crash

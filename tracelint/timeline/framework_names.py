"""Framework (PyTorch) names: optimizer work, iteration and emit_nvtx ranges, device moves and
factory ops, model-structure ops (convolution + BatchNorm, DataParallel).

Part of the name classification (`timeline.classify` re-exports every public name): rules ask
these functions instead of matching raw op names themselves.
"""
from __future__ import annotations

import re

# ----- optimizer work (per-parameter loops vs foreach / fused) --------------------------------
_OPT_REGION = (("zero_grad", re.compile(r"zero_grad", re.I)),
               ("clip", re.compile(r"clip_grad_(norm|value)_", re.I)),
               ("step", re.compile(r"^Optimizer\.step#|optimizer\.step|#\w+\.step$|\bstep#", re.I)))
_PER_TENSOR = re.compile(r"^aten::(add_?|mul_?|addcdiv_|addcmul_|lerp_|sqrt_?|div_?|zero_|copy_|"
                         r"norm|linalg_vector_norm|clamp_?|maximum|sub_?)(,|$)")
_MULTI_TENSOR = re.compile(r"^aten::_(foreach|fused)_")


def optimizer_region(name: str) -> str | None:
    """step | zero_grad | clip for the ranges PyTorch records around optimizer work
    (`Optimizer.step#AdamW.step`, `Optimizer.zero_grad#AdamW.zero_grad`, clip_grad_norm_)."""
    for kind, pat in _OPT_REGION:
        if pat.search(name):
            return kind
    return None


def op_tensor_scope(name: str) -> str | None:
    """per_tensor for one-tensor updates (aten::add_, mul_, addcdiv_, zero_, norm, ...),
    multi_tensor for aten::_foreach_* / aten::_fused_* (one launch for many tensors)."""
    if _MULTI_TENSOR.search(name):
        return "multi_tensor"
    if _PER_TENSOR.search(name):
        return "per_tensor"
    return None


def dataloader_iter(name: str) -> str | None:
    """main_process for `enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`
    (num_workers=0: loading runs on the training thread), workers for the multi-process one."""
    if "DataLoader" not in name or "__next__" not in name:
        return None
    return "main_process" if "SingleProcess" in name else "workers"


# ----- range names: iterations and emit_nvtx operator ranges ------------------------------
#: torch.autograd.profiler.emit_nvtx names NVTX ranges "aten::mul, seq = 3, op_id = 12": ops.
_EMIT_NVTX = re.compile(r"^([^,\s]+), (?:seq|op_id|sizes|stashed seq) = ")
_EMIT_NVTX_IDS = re.compile(r", (op_id|seq) = \d+")


def is_profiler_step(name: str) -> bool:
    """True for torch.profiler's iteration range `ProfilerStep#N`."""
    return name.startswith("ProfilerStep#")


def emit_nvtx_op(name: str) -> str | None:
    """The operator of an emit_nvtx range ("aten::mul, seq = 3, op_id = 12" -> "aten::mul"),
    None for any other range."""
    m = _EMIT_NVTX.match(name)
    return m.group(1) if m else None


def has_emit_nvtx_ids(name: str) -> bool:
    """True for a range name carrying emit_nvtx's `, op_id = N` / `, seq = N`: an operator
    range, not a phase of the program."""
    return bool(_EMIT_NVTX_IDS.search(name))


#: Framework ops that move a tensor to another device (`.to(device)`, `.cuda()`, `copy_` into a
#: device tensor); the copy itself is the runtime call inside them. Names may carry the
#: `, seq = N` / `, op_id = N` suffix of torch.autograd.profiler.emit_nvtx ranges.
DEVICE_MOVE_OPS = re.compile(r"^aten::(to|_to_copy|copy_|_copy_from|_copy_from_and_resize|cuda)(?=$|,)")
#: Framework ops that create a tensor and compute its values from their arguments alone
#: (constants, ranges, random numbers): made on the CPU and moved right after, the same tensor
#: could be built on the device. Not `aten::empty` / `lift_fresh`: `torch.tensor(data)` records
#: those, and a trace cannot tell a constant from fresh host data.
FACTORY_OPS = re.compile(r"^aten::(zeros|ones|full|arange|range|linspace|logspace|eye|scalar_tensor|"
                         r"rand|randn|randint|randperm|normal|(zeros|ones|full|rand|randn)_like)(?=$|,)")


def device_move_op(name: str) -> bool:
    return bool(DEVICE_MOVE_OPS.match(name))


def factory_op(name: str) -> bool:
    return bool(FACTORY_OPS.match(name))
# ----- model structure: convolution + BatchNorm, DataParallel, cuDNN (TL034-TL036) -----------
#: emit_nvtx writes ops as "aten::conv2d, seq = 36, op_id = 4, sizes = [[16, 3, 32, 32], ...],
#: input_op_ids = [(3,0)]" (torch/csrc/profiler/util.cpp getNvtxStr); Kineto as the bare name.
_NVTX_OP_TAIL = re.compile(r",\s*(?:seq|op_id|sizes|input_op_ids)\s*=.*$", re.S)
_NVTX_SIZES = re.compile(r",\s*sizes\s*=\s*(\[.*?\]\])(?:,\s*input_op_ids\s*=|$)", re.S)
_CONV_OP = re.compile(r"^aten::(conv[123]d|convolution|_convolution|conv_transpose[123]d|"
                      r"cudnn_convolution(_transpose)?|miopen_convolution(_transpose)?|"
                      r"mkldnn_convolution)$")
_BN_OP = re.compile(r"^aten::(batch_norm|native_batch_norm|_native_batch_norm_legit\w*|"
                    r"cudnn_batch_norm|miopen_batch_norm|_batch_norm_impl_index)$")
_ADD_OP = re.compile(r"^aten::add_?$")
_CONV_BWD_OP = re.compile(r"^aten::(convolution_backward|cudnn_convolution_backward\w*|"
                          r"cudnn_convolution_transpose_backward\w*|miopen_convolution_backward\w*)$")
#: torch.nn.DataParallel: its autograd Functions are recorded by class name (THPFunction_apply),
#: their backward nodes as <Name>Backward; its Python files under torch/nn/parallel/.
_DP_OP = re.compile(r"^(?:autograd::engine::evaluate_function: )?(Broadcast|Scatter|Gather|"
                    r"ReduceAddCoalesced)(Backward)?$")
_DP_FILE = re.compile(r"torch/nn/parallel/(data_parallel|replicate|scatter_gather|parallel_apply)\.py$")


def framework_op_name(name: str) -> str:
    """The op name of a framework-op range: emit_nvtx's ", seq = ..., sizes = ..." tail cut."""
    return _NVTX_OP_TAIL.sub("", name)


def nvtx_op_sizes(name: str) -> list | None:
    """The input sizes emit_nvtx(record_shapes=True) appends to an op's NVTX text, or None."""
    m = _NVTX_SIZES.search(name)
    if not m:
        return None
    try:
        return [[int(x) for x in part.split(",") if x.strip()]
                for part in re.findall(r"\[([^\[\]]*)\]", m.group(1))]
    except ValueError:
        return None


def model_op(name: str) -> str | None:
    """conv | conv_backward | batch_norm | add for the framework ops TL034 and TL036 read
    (Kineto or emit_nvtx names)."""
    base = framework_op_name(name)
    if _CONV_OP.match(base):
        return "conv"
    if _CONV_BWD_OP.match(base):
        return "conv_backward"
    if _BN_OP.match(base):
        return "batch_norm"
    if _ADD_OP.match(base):
        return "add"
    return None


def data_parallel_op(name: str) -> str | None:
    """replicate | scatter | gather | reduce (backward of replicate) for torch.nn.DataParallel's
    autograd Functions (`Broadcast`, `Scatter`, `Gather`, `ReduceAddCoalesced`, ...Backward)."""
    m = _DP_OP.match(framework_op_name(name))
    if not m:
        return None
    fn, backward = m.group(1), bool(m.group(2))
    kind = {"Broadcast": "replicate", "Scatter": "scatter", "Gather": "gather",
            "ReduceAddCoalesced": "reduce"}[fn]
    if backward:   # Broadcast's backward reduces gradients, Gather's scatters them; Scatter's
        # gathers input gradients, which a one-GPU DataParallel does too: counted as scatter
        kind = {"replicate": "reduce", "scatter": "scatter", "gather": "scatter", "reduce": "replicate"}[kind]
    return kind


def is_data_parallel_file(file: str) -> bool:
    """A Python frame in torch.nn.DataParallel's own modules."""
    return bool(_DP_FILE.search(file.replace("\\", "/")))


#: Names only PyTorch records (its ops, steps, autograd and optimizer ranges, module frames):
#: a trace with any is a PyTorch program, so advice may name PyTorch's knobs.
_PYTORCH_NAME = re.compile(r"^(aten::|ProfilerStep#|autograd::|Optimizer\.|nn\.Module:|c10d::)|torch/")


def is_pytorch_name(name: str) -> bool:
    return bool(_PYTORCH_NAME.search(name))


#: ATen's own kernels: a trace of them is a PyTorch program's even without op ranges (an nsys
#: capture without NVTX).
_ATEN_KERNEL = re.compile(r"\bat::(native|cuda)::")


#: Names only JAX / XLA record: the NVTX ranges XLA's GPU runtime opens per compiled module
#: (an nsys capture of a JAX program) and jit-compiled function names.
_JAX_NAME = re.compile(r"^(XlaModule|jit_\w|pjit_\w|PjitFunction)|\bXlaModule:")


def trace_framework(tl) -> str:
    """pytorch, jax or native (CUDA C, HIP, OpenMP, Fortran): whose knobs a fix may name. The
    importer says so where its format does (a jax.profiler trace); else the names decide."""
    said = tl.meta.extra.get("framework")
    if said in ("pytorch", "jax"):
        return said
    ranges, kernels = tl.ranges["name"].unique(), tl.kernels["name"].unique()
    if is_pytorch_trace(ranges, kernels):         # PyTorch's own names are unambiguous
        return "pytorch"
    return "jax" if any(_JAX_NAME.search(str(n)) for n in ranges) else "native"


def is_pytorch_trace(range_names, kernel_names) -> bool:
    """Whether a trace is a PyTorch program's, from its distinct range and kernel names: then
    advice may name PyTorch's knobs, and a CUDA C, OpenMP or Fortran program gets the
    runtime's own words instead."""
    return any(is_pytorch_name(str(n)) for n in range_names) or \
        any(_ATEN_KERNEL.search(str(n)) for n in kernel_names)

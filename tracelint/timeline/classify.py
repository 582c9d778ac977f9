"""Name classification, done once here so rules never regex raw names themselves.

Kernel classes and API roles are documented, ordered pattern lists: the first match wins.
They cover CUDA and ROCm/HIP names, NCCL and RCCL, and common serving-engine kernels.
Classification runs over the distinct names of a categorical column only, so a million
kernels with a thousand names cost a thousand regex matches.
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

#: (class, pattern) in priority order. Patterns are case-insensitive regexes over the full
#: (demangled) kernel name.
KERNEL_CLASSES: Sequence[tuple[str, str]] = (
    ("communication", r"nccl|rccl|all_?reduce|allgather|all_gather|reduce_?scatter|alltoall|"
                      r"all_to_all|cross_device_reduce|multimem|nvls|deep_?ep|dispatch_kernel|"
                      r"combine_kernel|custom_ar|one_shot_all|two_shot_all|msccl|"
                      # expert-parallel dispatch/combine (DeepEP's dpsk::ep) and NVSHMEM kernels
                      r"dpsk::ep|4dpsk2ep|nvshmem"),
    # Fused low-bit GEMMs dequantise inside the GEMM: they are GEMM time, not overhead.
    # Tensor-core GEMM libraries whose names carry no "gemm", or carry element types (E2m1,
    # E4m3, fp4) that the dequant entry would take: cuBLAS nvjet (Hopper/Blackwell), xmma
    # GEMMs, TensorRT-LLM grouped/MoE `bmm_*`, Tensile/hipBLASLt `Cijk_*`, Triton mm templates.
    ("gemm", r"marlin|machete|awq_gemm|gptq_gemm|w4a16_?gemm|fp8_gemm|scaled_mm|"
             r"mxfp4.*(?:matmul|gemm)|(?:matmul|gemm).*mxfp4|^nvjet|sm\d+_xmma_gemm|"
             r"(?:^|_|::|\s)bmm_|Cijk_|hipblaslt|triton_tem_\w*mm|fused_moe_kernel|"
             r"group(?:ed)?_gemm|moe_?gemm"),
    ("dequant", r"dequant|quantize|unpack_?int|int4|w4a16|awq|gptq|fp8_?cast|"
                r"scaled_fp8|cast_fp8|_quant_|quant_kernel|fp4"),
    ("attention", r"flash|fmha|attention|attn|sdpa|paged_?kv|mha_|softmax_?warp"),
    ("layout", r"transpose|permute|contiguous|nchwToNhwc|nhwcToNchw|im2col|col2im|"
               r"CatArrayBatchedCopy|batched_transpose"),
    # Normalisation and pooling from cuDNN / TensorRT libraries, before their library prefix
    # would call them convolutions.
    ("reduction", r"\bbn_(?:fw|bw)|batch_?norm|xmma_pooling|_pooling_|pooling_fw|pooling_bw"),
    ("gemm", r"(?<!fb)gemm|matmul|sgemm|hgemm|dgemm|igemm|cutlass|cublas|xmma|wgmma|mma_|"
             r"Cijk_|hipblaslt|rocblas|ampere_.*(?:gemm|nn|nt|tn|tt)|volta_.*(?:gemm|nn|nt|tn)|"
             r"turing_.*(?:gemm|nn|nt|tn)|sm\d+_xmma|implicit_gemm|conv|cudnn|winograd|"
             r"fprop|dgrad|wgrad|miopen"),
    ("layout", r"copy_kernel|pad_kernel|direct_copy_kernel|unrolled_elementwise_kernel.*copy"),
    ("reduction", r"reduce_kernel|reduction|layer_?norm|rms_?norm|batch_?norm|group_?norm|"
                  r"softmax|argmax|topk|sort|scan|cumsum|welford"),
    ("memory", r"^memcpy|^memset|fill_kernel|FillFunctor|zero_"),
    ("elementwise", r"elementwise|vectorized|unrolled|pointwise|triton_poi|activation|gelu|"
                    r"relu|silu|add_kernel|mul_kernel|index_|scatter|gather|embedding"),
)

KERNEL_CLASS_NAMES = tuple(dict.fromkeys(c for c, _ in KERNEL_CLASSES)) + ("other",)

_KERNEL_RES = [(c, re.compile(p, re.IGNORECASE)) for c, p in KERNEL_CLASSES]

#: Host API roles. Names are matched after version suffixes are stripped.
API_ROLES: Sequence[tuple[str, str]] = (
    ("launch", r"^(cuda|hip)(Launch(Kernel|Cooperative|HostFunc)\w*|ExtLaunch\w*|"
               r"ModuleLaunch\w*|ExtModuleLaunch\w*|GraphLaunch\w*)$|^cuLaunch\w*$|"
               r"^cuGraphLaunch\w*$|^hipExtModuleLaunchKernel$|^hipModuleLaunchKernel$"),
    ("sync", r"Synchronize|^(cuda|hip)StreamWaitEvent$|^cuStreamWaitEvent$|"
             r"^(cuda|hip)StreamQuery$|^(cuda|hip)EventQuery$"),
    ("copy", r"^(cuda|hip)Memcpy\w*|^cuMemcpy\w*|^hipMemcpyWithStream$"),
    ("memset", r"^(cuda|hip)Memset\w*|^cuMemset\w*"),
    ("load", r"^cu(Module|Library)(Load|GetFunction|GetKernel)\w*|^hipModule(Load|GetFunction)\w*|"
             r"^(cuda|hip)GetFuncBySymbol$|^cudaFuncGetAttributes$|^cuKernelGetFunction$"),
    ("alloc", r"^(cuda|hip)(Malloc|Free|HostAlloc|HostRegister|MallocAsync|FreeAsync|"
              r"MallocHost|FreeHost|MallocManaged)\w*$|^cuMem(Alloc|Free|HostAlloc|Create|"
              r"Release|Map|Unmap|AddressReserve)\w*$"),
)

_API_RES = [(c, re.compile(p)) for c, p in API_ROLES]

#: Framework ops that read a device value back to the host (`.item()`, `.cpu()`, `.tolist()`,
#: `torch.nonzero`, data-dependent shapes): on a GPU each blocks the host until the device drains.
HOST_READBACK_OPS = re.compile(r"^aten::(item|_local_scalar_dense|nonzero|nonzero_static|is_nonzero|"
                               r"cpu|masked_select|unique\w*|tolist|repeat_interleave|bincount|"
                               r"histc|allclose|equal)$")

#: GEMM / convolution kernels doing FP32 math on the CUDA cores (FFMA), by library naming:
#: cuBLAS/cuDNN `*_sgemm_*` and `scudnn`, xmma `f32f32_f32f32_f32` with an `ffma` mainloop,
#: cutlass SIMT sgemm, FP32 GEMV, and cuDNN's FP32 convolution engines (`dgrad_engine<float`,
#: `wgrad_alg0_engine<float`, `implicit_convolve_sgemm<float`, implicit-GEMM float engines).
FP32_CUDA_CORE_GEMM = re.compile(
    r"sgemm|scudnn|f32f32_f32f32_f32.*ffma|gemv2?T?_kernel<[^>]*float|"
    r"(?:dgrad|wgrad|fprop|conv)\w*_engine<float\b|convolve_\w*<float\b|"
    r"implicit_?gemm\w*<float\b", re.IGNORECASE)
#: Tensor-core kernels name their type (TF32, FP16, BF16, HMMA/WGMMA shapes): never FP32 SIMT.
TENSOR_CORE_NAME = re.compile(r"tf32|s1688|s16816|h884|h1688|h16816|bf16|f16|hmma|wgmma|i8816|xf32",
                              re.IGNORECASE)


def is_fp32_cuda_core_gemm(name: str) -> bool:
    """True for a GEMM / convolution kernel whose name shows FP32 math on the CUDA cores."""
    return bool(FP32_CUDA_CORE_GEMM.search(name)) and not TENSOR_CORE_NAME.search(name.split("(")[0])


#: Python files that are library code, not the user's: findings point at the innermost frame
#: outside these.
LIBRARY_CODE = re.compile(
    r"(site-packages|dist-packages|/lib/python\d|^<|torch/|/torch/|threading\.py|runpy\.py|"
    r"contextlib\.py|built-in|importlib)")
_VERSION_SUFFIX = re.compile(r"_v\d+$")


def strip_api_version(name: str) -> str:
    """cudaLaunchKernel_v7000 -> cudaLaunchKernel; driver names keep their _v2 (they have none)."""
    return _VERSION_SUFFIX.sub("", name) if name.startswith(("cuda", "hip")) else name


def kernel_function_name(name: str) -> str:
    """The kernel's qualified name without its parameter list, so parameter types such as
    `cublasTransposeParams` do not decide the class."""
    base = name.replace("(anonymous namespace)", "")
    cut = base.find("(")
    return base[:cut] if cut > 0 else base


#: Mangled names (`_Z...`) carry template arguments such as cutlass's `Permute` layouts inside
#: GEMM kernels, so for them the early layout entry (before GEMM) is skipped.
_MANGLED_RES = [(c, rx) for i, (c, rx) in enumerate(_KERNEL_RES)
                if not (c == "layout" and i < [c for c, _ in KERNEL_CLASSES].index("gemm", 2))]


def kernel_class(name: str) -> str:
    fn = kernel_function_name(name)
    for cls, rx in (_MANGLED_RES if fn.startswith("_Z") else _KERNEL_RES):
        if rx.search(fn):
            return cls
    return "other"


def api_role(name: str) -> str:
    for role, rx in _API_RES:
        if rx.search(name):
            return role
    return "other"


def sync_kind(name: str) -> str:
    """Kind of a host sync call, by API name (reliable across nsys versions, unlike syncType)."""
    n = name.lower()
    if "devicesynchronize" in n or "ctxsynchronize" in n:
        return "device"
    if "streamsynchronize" in n:
        return "stream"
    if "streamwaitevent" in n:
        return "stream_wait_event"
    if "eventsynchronize" in n:
        return "event"
    if "query" in n:
        return "query"
    return "other"


#: Kernels that copy a tensor unchanged (`copy_`, `clone`, `_to_copy`, Inductor's fused clones):
#: device-to-device copies done on the SMs. Strided copies that change layout (`contiguous()` of
#: a permuted tensor) are also classed `layout` by KERNEL_CLASSES.
COPY_KERNEL = re.compile(r"direct_copy|copy_kernel|triton_\w*_clone|clone_kernel|_to_copy|"
                         r"(?:^|::|\s)copy_\b", re.IGNORECASE)


def is_copy_kernel(name: str) -> bool:
    return bool(COPY_KERNEL.search(kernel_function_name(name)))


def blocks_host(name: str) -> bool:
    """True for a host API call that returns only when device work has finished: a sync that
    waits (not a query, not cudaStreamWaitEvent, which orders streams on the device), and any
    copy or memset without `Async` in its name (cudaMemcpy, hipMemcpy, hipMemcpyWithStream,
    cuMemcpyDtoH). Async copies from pageable memory block too; that needs the copy's memory
    kind (see timeline.gaps)."""
    role = api_role(name)
    if role == "sync":
        return sync_kind(name) not in ("stream_wait_event", "query")
    return role in ("copy", "memset") and "async" not in name.lower()


def classify_categorical(values: pd.Series | pd.Categorical, fn) -> pd.Categorical:
    """Apply fn to each distinct category of a categorical, mapping codes back vectorised."""
    cat = values.array if isinstance(values, pd.Series) else values
    if not isinstance(cat, pd.Categorical):
        cat = pd.Categorical(cat)
    labels = np.array([fn(str(c)) for c in cat.categories], dtype=object)
    if len(labels) == 0:
        return pd.Categorical(np.array([], dtype=object))
    codes = cat.codes
    out = labels[np.where(codes >= 0, codes, 0)]
    return pd.Categorical(out)


def is_communication(names: Iterable[str]) -> np.ndarray:
    return np.array([kernel_class(n) == "communication" for n in names], dtype=bool)


# ----- the trace as a whole: what kind of workload, whose hardware ---------------------------
_TRAINING = re.compile(r"backward|Backward|autograd::engine|optimizer\.step|Optimizer\.step|"
                       r"zero_grad|wgrad|dgrad|bn_bw|_bw_|adam|Adam|sgd|SGD|lamb_", re.S)
_SERVING = re.compile(r"vllm|sglang|tensorrt_llm|paged_?attention|reshape_and_cache|kv_?cache|"
                      r"prefill|decode_attention|flash_fwd_splitkv|generate\(", re.I)
_FRAMEWORK_OP = re.compile(r"^(aten::|ProfilerStep|nn\.Module|torch|jax|xla|tf\.)", re.I)
_AMD = re.compile(r"\b(AMD|Instinct|Radeon|MI\d{3})|^Cijk_|hipMemcpy|hipLaunch", re.I)
_NVIDIA = re.compile(r"\b(NVIDIA|Tesla|GeForce|Quadro|RTX|A100|H100|H200|B200|V100|T4|L4|L40)\b|"
                     r"^cuda[A-Z]|^cu[A-Z]", re.I)


def workload_kind(names: Iterable[str]) -> str:
    """training (backward / optimizer work), serving (LLM serving engines, KV caches),
    inference (framework ops without either), or other (no framework: HPC, CUDA C++)."""
    names = [str(n) for n in names]
    if any(_TRAINING.search(n) for n in names):
        return "training"
    if any(_SERVING.search(n) for n in names):
        return "serving"
    if any(_FRAMEWORK_OP.search(n) for n in names):
        return "inference"
    return "other"


def vendor(names: Iterable[str]) -> str:
    """nvidia, amd or unknown, from device, kernel and API names."""
    names = [str(n) for n in names]
    if any(_AMD.search(n) for n in names):
        return "amd"
    if any(_NVIDIA.search(n) for n in names):
        return "nvidia"
    return "unknown"


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


# ----- which GPU architecture a kernel was built for --------------------------------------
#: Architecture tags in kernel names: CUTLASS `cutlass_75_*`, xmma/cuBLASLt `sm75_*`,
#: CUTLASS 3 `arch::Sm80`, cuBLAS `volta_* / turing_* / ampere_*`.
ARCH_TAG = re.compile(r"cutlass_(\d)(\d)_|\bsm_?(\d)(\d)_|arch::Sm(\d)(\d)\b|\b(volta|turing|ampere|hopper)_",
                      re.IGNORECASE)
_NAMED = {"volta": (7, 0), "turing": (7, 5), "ampere": (8, 0), "hopper": (9, 0)}
#: Tensor-core kernels only: an old SIMT kernel (pooling, sgemm) is no tensor-core fallback.
TENSOR_OP = re.compile(r"tensorop|h884|h1688|h16816|s1688|s16816|i8816|hmma|wgmma|imma|tensor\d+x\d+x\d+",
                       re.IGNORECASE)


def arch_of(name: str) -> tuple[int, int] | None:
    """(major, minor) the kernel was built for, from its name; None when untagged."""
    m = ARCH_TAG.search(name)
    if not m:
        return None
    g = m.groups()
    if g[6]:
        return _NAMED[g[6].lower()]
    digits = next((g[i:i + 2] for i in (0, 2, 4) if g[i]), None)
    return (int(digits[0]), int(digits[1])) if digits else None


def is_old(kernel_cc: tuple[int, int], device_cc: tuple[int, int]) -> bool:
    """Two major generations behind (sm75 on sm90), or Volta/Turing tensor cores on Ampere or
    newer. One generation behind (sm80 kernels on an H100: FlashAttention-2, CUTLASS 2) is
    common and runs the same mma.sync instructions, so it is not reported."""
    return device_cc[0] - kernel_cc[0] >= 2 or (kernel_cc[0] == 7 and device_cc[0] >= 8)


# ----- torch.compile: Dynamo / AOTAutograd / Inductor ranges ---------------------------------
#: `Torch-Compiled Region: 0/2` (torch >= 2.1; the compile id suffix since 2.5): one call of a
#: Dynamo-transformed frame, with what runs eagerly inside it (graph breaks) and any region of a
#: resume function nested in it. The id is frame_id/frame_compile_id, `_N` a restart attempt,
#: `!A/` a compiled-autograd prefix.
_COMPILED_REGION = re.compile(r"^Torch-Compiled Region(?::\s*(.+))?$")
_COMPILE_ID = re.compile(r"^(?:!\d+/)?(\d+)/(\d+)(?:_\d+)?$")
#: Compilation work: dynamo_timed ranges (`dynamo`, `entire_frame_compile`, `backend_compile`,
#: `inductor_compile`, `<fn> (dynamo_timed)`, torch 2.1-2.4 `_compile.<locals>.compile_inner`...).
_COMPILING = re.compile(r" \(dynamo_timed\)$|^(?:dynamo|entire_frame_compile|backend_compile|"
                        r"inductor_compile|compile_attempt_\d+|bytecode_tracing|build_guards|"
                        r"create_aot_dispatcher_function|_compile\.(?:<locals>\.)?compile_inner|"
                        r"OutputGraph\.call_user_compiler|compile_fx_inner|fx_codegen_and_compile|"
                        r"async_compile\.wait|code_gen)$")
#: `dynamo_data: compile_id=0/2` and `<stage>_data: fn_name=..., compile_id=0/2` annotations.
_COMPILE_DATA = re.compile(r"^[\w.<>]+_data: (?:.*, )?compile_id=([^,\s]+)")
#: A compiled graph running: Inductor's `## Call CompiledFxGraph <key> ##`, AOTAutograd's
#: autograd.Function `CompiledFunction` / `CompiledFunctionBackward` (training).
_GRAPH_CALL = re.compile(r"^## Call CompiledFxGraph \w+ ##$|^CompiledFunction(?:Backward)?$")
#: Python frame of the code Dynamo resumes after a graph break: `torch_dynamo_resume_in_<fn>_at_<line>`.
_RESUME_FRAME = re.compile(r"^torch_dynamo_resume_in_(\w+?)_at_(\d+)$")


#: What torch.autograd.profiler.emit_nvtx appends to a range's name in NVTX.
_NVTX_OP_SUFFIX = re.compile(r",\s*(?:seq|op_id|sizes|input_op_ids)\s*=.*$")


def torch_compile_role(name: str) -> str | None:
    """region | cache_lookup | compile | compile_data | graph_call for the ranges torch.compile
    records (see the patterns above; emit_nvtx's `, seq = N` suffixes allowed); None otherwise."""
    name = _NVTX_OP_SUFFIX.sub("", name)
    if _COMPILED_REGION.match(name):
        return "region"
    if name == "TorchDynamo Cache Lookup":
        return "cache_lookup"
    if _COMPILE_DATA.match(name):
        return "compile_data"
    if _COMPILING.search(name):
        return "compile"
    if _GRAPH_CALL.match(name):
        return "graph_call"
    return None


#: Dynamo / AOTAutograd runtime wrappers around a compiled graph's call (not eager user ops).
_DYNAMO_WRAPPER = re.compile(r"^(?:Pregraph bytecode|AOTDispatcher Runtime Wrapper (?:Prologue|Epilogue))$")


def is_dynamo_wrapper(name: str) -> bool:
    return bool(_DYNAMO_WRAPPER.match(_NVTX_OP_SUFFIX.sub("", name)))


def compile_id(name: str) -> tuple[int, int] | None:
    """(frame_id, frame_compile_id) named by a `Torch-Compiled Region: F/C` range or a
    `..._data: compile_id=F/C` annotation; None when the name carries none (torch < 2.5)."""
    name = _NVTX_OP_SUFFIX.sub("", name)
    m = _COMPILED_REGION.match(name)
    raw = m.group(1) if m else None
    if raw is None:
        d = _COMPILE_DATA.match(name)
        raw = d.group(1) if d else None
    ids = _COMPILE_ID.match(raw.strip()) if raw else None
    return (int(ids.group(1)), int(ids.group(2))) if ids else None


def dynamo_resume(function: str) -> tuple[str, int] | None:
    """(original function, line of the graph break) for a Dynamo resume function's frame."""
    m = _RESUME_FRAME.match(function)
    return (m.group(1), int(m.group(2))) if m else None


# ----- CUDA / HIP graphs --------------------------------------------------------------------
_GRAPH_API = (
    ("launch", re.compile(r"^(?:cuda|hip|cu)GraphLaunch\w*$")),
    ("capture_begin", re.compile(r"^(?:cuda|hip|cu)StreamBeginCapture\w*$")),
    ("capture_end", re.compile(r"^(?:cuda|hip|cu)StreamEndCapture\w*$")),
    ("instantiate", re.compile(r"^(?:cuda|hip|cu)GraphInstantiate\w*$")),
    ("update", re.compile(r"^(?:cuda|hip|cu)GraphExecUpdate\w*$|^(?:cuda|hip|cu)GraphUpload\w*$")),
)


def graph_api(name: str) -> str | None:
    """launch (cudaGraphLaunch: a replay), capture_begin / capture_end (cudaStreamBeginCapture,
    cudaStreamEndCapture),
    instantiate (cudaGraphInstantiate*), update (cudaGraphExecUpdate, cudaGraphUpload) for
    the CUDA / HIP / driver graph API calls (version suffixes allowed); None otherwise."""
    n = strip_api_version(name)
    for kind, rx in _GRAPH_API:
        if rx.match(n):
            return kind
    return None

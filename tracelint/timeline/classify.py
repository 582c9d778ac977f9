"""Name classification, done once here so rules never regex raw names themselves.

Kernel classes and API roles are documented, ordered pattern lists: the first match wins.
They cover CUDA and ROCm/HIP names, NCCL and RCCL, and common serving-engine kernels.
Classification runs over the distinct names of a categorical column only, so a million
kernels with a thousand names cost a thousand regex matches (and range names that differ only
in emit_nvtx's op ids share one answer: name_groups.py).
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from .name_groups import per_category, representatives

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

#: Host API roles. Names are matched after version suffixes are stripped. CUDA (runtime and
#: driver), HIP, and Intel's Unified Runtime (ur*) and Level Zero (ze*) calls, which Kineto
#: records under xpu_runtime / xpu_driver.
API_ROLES: Sequence[tuple[str, str]] = (
    ("launch", r"^(cuda|hip)(Launch(Kernel|Cooperative|HostFunc)\w*|ExtLaunch\w*|"
               r"ModuleLaunch\w*|ExtModuleLaunch\w*|GraphLaunch\w*)$|^cuLaunch\w*$|"
               r"^cuGraphLaunch\w*$|^hipExtModuleLaunchKernel$|^hipModuleLaunchKernel$|"
               r"^urEnqueueKernelLaunch\w*$|^zeCommandListAppendLaunch\w*$|"
               r"^urCommandBufferEnqueueExp$"),
    ("sync", r"Synchronize|^(cuda|hip)StreamWaitEvent$|^cuStreamWaitEvent$|"
             r"^(cuda|hip)StreamQuery$|^(cuda|hip)EventQuery$|^urQueueFinish$|^urEventWait$"),
    ("copy", r"^(cuda|hip)Memcpy\w*|^cuMemcpy\w*|^hipMemcpyWithStream$|^urEnqueueUSMMemcpy\w*$|"
             r"^urEnqueueMemBuffer(Read|Write|Copy)\w*$|^zeCommandListAppendMemoryCopy\w*$"),
    ("memset", r"^(cuda|hip)Memset\w*|^cuMemset\w*|^urEnqueueUSMFill\w*$|^urEnqueueMemBufferFill$|"
               r"^zeCommandListAppendMemoryFill$"),
    ("load", r"^cu(Module|Library)(Load|GetFunction|GetKernel)\w*|^hipModule(Load|GetFunction)\w*|"
             r"^(cuda|hip)GetFuncBySymbol$|^cudaFuncGetAttributes$|^cuKernelGetFunction$|"
             r"^urProgram(Build|Create)\w*$|^urKernelCreate$|^ze(Module|Kernel)Create$"),
    ("alloc", r"^(cuda|hip)(Malloc|Free|HostAlloc|HostRegister|MallocAsync|FreeAsync|"
              r"MallocHost|FreeHost|MallocManaged)\w*$|^cuMem(Alloc|Free|HostAlloc|Create|"
              r"Release|Map|Unmap|AddressReserve)\w*$|^urUSM(Device|Host|Shared)?(Alloc|Free)$|"
              r"^zeMem(Alloc|Free)\w*$"),
)

_API_RES = [(c, re.compile(p)) for c, p in API_ROLES]

#: Launch APIs that replay a captured CUDA / HIP graph (cudaGraphLaunch, cuGraphLaunch,
#: hipGraphLaunch and their _ptsz / version variants).
GRAPH_LAUNCH = re.compile(r"GraphLaunch", re.I)
#: Stream-ordered API variants (cudaMallocAsync, cudaMemcpyAsync, ...): they do not block the host.
ASYNC_API = re.compile(r"Async", re.I)


def is_graph_launch(name: str) -> bool:
    """True for an API call that launches a captured CUDA / HIP graph."""
    return bool(GRAPH_LAUNCH.search(name))


def is_async_api(name: str) -> bool:
    """True for the stream-ordered (`*Async`) variant of an API call."""
    return bool(ASYNC_API.search(name))

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


def is_host_readback_op(name: str) -> bool:
    """True for a framework op that reads a device value back to the host (HOST_READBACK_OPS)."""
    return bool(HOST_READBACK_OPS.match(name))


def is_fp32_cuda_core_gemm(name: str) -> bool:
    """True for a GEMM / convolution kernel whose name shows FP32 math on the CUDA cores."""
    return bool(FP32_CUDA_CORE_GEMM.search(name)) and not TENSOR_CORE_NAME.search(name.split("(")[0])


#: Python files that are library code, not the user's: findings point at the innermost frame
#: outside these. torch.compile's generated modules live in TorchInductor's cache
#: (`/tmp/torchinductor_USER/xx/cxx….py` by default) and Triton's (`~/.triton/cache`).
LIBRARY_CODE = re.compile(
    r"(site-packages|dist-packages|/lib/python\d|^<|torch/|/torch/|threading\.py|runpy\.py|"
    r"contextlib\.py|built-in|importlib|torchinductor_[^/]*/|/\.triton/cache/)")
_VERSION_SUFFIX = re.compile(r"_v\d+$")


def is_library_code(file: str) -> bool:
    """True for a Python file that is library code (LIBRARY_CODE), not the user's."""
    return bool(LIBRARY_CODE.search(file))


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


#: Library names that contain "gemm" without being GEMMs (fbgemm_gpu quantize / embedding
#: kernels): removed before classifying, so `fbgemm_gpu::..._FP8_quantize` is a dequant kernel.
_LIBRARY_PREFIX = re.compile(r"fbgemm", re.I)
#: A "dequant"-class name that is itself a GEMM (a fused dequant-GEMM such as Marlin,
#: AWQ/GPTQ GEMM, machete, W4A16 GEMM): its time is GEMM time, not overhead.
FUSED_DEQUANT_GEMM = re.compile(r"gemm|matmul|marlin|machete|_mm_|wgmma|mma_|cutlass", re.I)


def kernel_class_without_library(name: str) -> str:
    """kernel_class of the name with library prefixes that fake a class (fbgemm) removed."""
    return kernel_class(_LIBRARY_PREFIX.sub("", name))


def is_fused_dequant_gemm(name: str) -> bool:
    """True when a kernel name (library prefixes removed) says GEMM: for a `dequant`-class
    kernel, a fused dequant-GEMM whose time is GEMM time."""
    return bool(FUSED_DEQUANT_GEMM.search(_LIBRARY_PREFIX.sub("", name)))


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
    if "streamsynchronize" in n or n == "urqueuefinish" or "commandqueuesynchronize" in n:
        return "stream"
    if "streamwaitevent" in n:
        return "stream_wait_event"
    if "eventsynchronize" in n or n == "ureventwait" or "eventhostsynchronize" in n:
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


def name_labels(values: pd.Series | pd.Categorical, fn) -> np.ndarray:
    """fn(name) per row of a name column as an object array, '' where fn says None; evaluated
    once per distinct name (classify_categorical)."""
    return np.asarray(classify_categorical(values, lambda n: fn(n) or ""), dtype=object)


def name_mask(values: pd.Series | pd.Categorical, fn) -> np.ndarray:
    """fn(name) -> bool per row of a name column, evaluated once per distinct name (a row
    without a name is False)."""
    cat = values.array if isinstance(values, pd.Series) else values
    if not isinstance(cat, pd.Categorical):
        cat = pd.Categorical(cat)
    hit = np.array([bool(x) for x in per_category(cat.categories, fn)] + [False], dtype=bool)
    return hit[cat.codes]


def classify_categorical(values: pd.Series | pd.Categorical, fn) -> pd.Categorical:
    """Apply fn to each distinct category of a categorical, mapping codes back vectorised; the
    result has only the labels that occur. Those are found by counting the codes, not with
    remove_unused_categories, which sorts every row's code (2.4 s at 23 M API calls, 0.17 s
    counted). The helpers here read the categories as a list (`tolist`): iterating a pandas
    Index of strings boxes each one through pandas, 8x slower (16,600 NVTX names: 10 ms
    against 1.2 ms, once per rule that classifies them)."""
    cat = values.array if isinstance(values, pd.Series) else values
    if not isinstance(cat, pd.Categorical):
        cat = pd.Categorical(cat)
    labels = np.array(per_category(cat.categories, fn), dtype=object)
    if len(labels) == 0:
        return pd.Categorical(np.array([], dtype=object))
    inv, uniq = pd.factorize(labels, sort=True)    # per category, not per row; hashed, not
    uniq = np.asarray(uniq, dtype=object)           # sorted by Python comparisons (332,000)
    codes = np.asarray(cat.codes)
    rows = np.where(codes >= 0, codes, 0)
    used = np.zeros(len(uniq), bool)
    used[inv[np.bincount(rows, minlength=len(labels)) > 0]] = True
    renumber = np.cumsum(used) - 1
    return pd.Categorical.from_codes(renumber[inv][rows], uniq[used])


def label_mask(values: pd.Series | pd.Categorical, pred, missing: bool = False) -> np.ndarray:
    """Rows of a categorical whose label satisfies pred, decided once per category (a missing
    label: `missing`). An object array of the rows' labels is 8 bytes a row and a Python
    comparison per row; at 23 M API calls that is 184 MB and seconds. Every category is asked
    on its own (exact names, user regexes); name_mask groups names by their op (name_groups)."""
    cat = values.array if isinstance(values, pd.Series) else values
    if not isinstance(cat, pd.Categorical):
        cat = pd.Categorical(cat)
    hit = np.array([bool(pred(c)) for c in cat.categories.tolist()] + [missing], dtype=bool)
    codes = np.asarray(cat.codes)
    return hit[np.where(codes >= 0, codes, len(hit) - 1)]


def labels_at(values: pd.Series | pd.Categorical, rows) -> np.ndarray:
    """values.astype(str).to_numpy()[rows] (NaN where a label is missing) without a string per
    row of the whole column: a categorical is read through its codes. At 23 M API calls the
    whole column is 184 MB of pointers and 0.1 s, for the few rows a rule reads."""
    cat = values.array if isinstance(values, pd.Series) else values
    if not isinstance(cat, pd.Categorical):
        return pd.Series(np.asarray(cat, dtype=object)[rows], dtype=object).astype(str).to_numpy()
    labels = np.array([str(c) for c in cat.categories.tolist()] + [np.nan], dtype=object)
    codes = np.asarray(cat.codes)[rows]
    return labels[np.where(codes >= 0, codes, len(labels) - 1)]


class RowLabels:
    """The label of one row at a time, as str ('nan' where missing), read through a
    categorical's codes: for loops that look up a few rows of a column of millions."""

    def __init__(self, values: pd.Series | pd.Categorical):
        cat = values.array if isinstance(values, pd.Series) else values
        if not isinstance(cat, pd.Categorical):
            cat = pd.Categorical(np.asarray(cat, dtype=object))
        self.labels = [str(c) for c in cat.categories.tolist()] + ["nan"]
        self.codes = memoryview(np.where(np.asarray(cat.codes) >= 0, np.asarray(cat.codes),
                                         len(self.labels) - 1).astype(np.int64))

    def __getitem__(self, row) -> str:
        return self.labels[self.codes[int(row)]]


def in_labels(values: pd.Series | pd.Categorical, labels) -> np.ndarray:
    """Rows of a categorical whose label is one of labels (label_mask)."""
    wanted = set(labels)
    return label_mask(values, wanted.__contains__)


def is_communication(names: Iterable[str]) -> np.ndarray:
    return np.array([kernel_class(n) == "communication" for n in names], dtype=bool)


# ----- the trace as a whole: what kind of workload, whose hardware ---------------------------
_TRAINING = re.compile(r"backward|Backward|autograd::engine|optimizer\.step|Optimizer\.step|"
                       r"zero_grad|wgrad|dgrad|bn_bw|_bw_|adam|Adam|sgd|SGD|lamb_", re.S)
_SERVING = re.compile(r"vllm|sglang|tensorrt_llm|paged_?attention|reshape_and_cache|kv_?cache|"
                      r"prefill|decode_attention|flash_fwd_splitkv|generate\(", re.I)
_FRAMEWORK_OP = re.compile(r"^(aten::|ProfilerStep|nn\.Module|torch|jax|xla|tf\.)", re.I)
_AMD = re.compile(r"\b(AMD|Instinct|Radeon|MI\d{3})|^Cijk_|hipMemcpy|hipLaunch", re.I)
#: Intel GPUs: device names, and the Unified Runtime / Level Zero calls Kineto records for them.
_INTEL = re.compile(r"\bIntel\(R\) (Data Center GPU|Arc|Iris)|^ur(Enqueue|Queue|USM)\w+$|"
                    r"^zeCommand\w+$")
_NVIDIA = re.compile(r"\b(NVIDIA|Tesla|GeForce|Quadro|RTX|A100|H100|H200|B200|V100|T4|L4|L40)\b|"
                     r"^cuda[A-Z]|^cu[A-Z]", re.I)


#: Text that every match of _TRAINING, _SERVING and _AMD contains, lowercased: literals, and a
#: pattern for what is no literal (_AMD's MI\d{3}). Names that hold none of it anywhere need no
#: search name by name. Why: 16,600 distinct NVTX range names (an nsys export of PyTorch) took
#: 0.3 s through the patterns, the case-insensitive ones above all; substring tests over all
#: the names at once take a few ms.
_NEEDLES: dict[re.Pattern, tuple[tuple[str, ...], re.Pattern | None]] = {
    _TRAINING: (("backward", "autograd::engine", "optimizer.step", "zero_grad", "wgrad", "dgrad",
                 "bn_bw", "_bw_", "adam", "sgd", "lamb_"), None),
    _SERVING: (("vllm", "sglang", "tensorrt_llm", "paged", "reshape_and_cache", "kv", "prefill",
                "decode_attention", "flash_fwd_splitkv", "generate("), None),
    _AMD: (("amd", "instinct", "radeon", "cijk_", "hipmemcpy", "hiplaunch"), re.compile(r"mi\d")),
}


def _any_search(pattern: re.Pattern, names: list[str], lowered: str | None) -> bool:
    """any(pattern.search(n) for n in names). lowered: the names joined and lowercased, when
    they are all ASCII (there, a case-insensitive match is an ASCII one, so the needles are
    exact); None skips the shortcut."""
    if lowered is not None and pattern in _NEEDLES:
        literals, rest = _NEEDLES[pattern]
        if not any(n in lowered for n in literals) and not (rest and rest.search(lowered)):
            return False
    return any(pattern.search(n) for n in names)


def _lowered(names: list[str]) -> str | None:
    text = "\n".join(names)
    return text.lower() if text.isascii() else None


def workload_kind(names: Iterable[str]) -> str:
    """training (backward / optimizer work), serving (LLM serving engines, KV caches),
    inference (framework ops without either), or other (no framework: HPC, CUDA C++)."""
    names = [str(n) for n in names]
    lowered = _lowered(names)
    if _any_search(_TRAINING, names, lowered):
        return "training"
    if _any_search(_SERVING, names, lowered):
        return "serving"
    if any(_FRAMEWORK_OP.search(n) for n in names):
        return "inference"
    return "other"


def distinct_names(tl) -> list[str]:
    """Each distinct API, kernel and range name of a Timeline once, what says its vendor and
    workload kind; of names equal but for emit_nvtx's op ids, one (name_groups: no pattern
    here reads the ids)."""
    names: list[str] = []
    for table in ("api_calls", "kernels", "ranges"):
        df = tl.table(table)
        if len(df) and "name" in df:
            col = df["name"]
            names += (representatives(col.cat.categories) if hasattr(col, "cat")
                      else [str(x) for x in col.unique()])
    return names


def trace_vendor(tl, names: list[str] | None = None) -> str:
    """nvidia, amd or unknown for a whole Timeline, from its devices' names and its
    distinct_names (passed in where the caller has them already)."""
    devices = [d.name for d in tl.meta.devices if d.name]
    return vendor(devices + (distinct_names(tl) if names is None else names))


def vendor(names: Iterable[str]) -> str:
    """nvidia, amd, intel or unknown, from device, kernel and API names."""
    names = [str(n) for n in names]
    if _any_search(_AMD, names, _lowered(names)):
        return "amd"
    if any(_NVIDIA.search(n) for n in names):
        return "nvidia"
    if any(_INTEL.search(n) for n in names):
        return "intel"
    return "unknown"


# ----- framework op names and GPU names live in their own modules; re-exported here --------
from .framework_names import *  # noqa: E402,F401,F403
from .gpu_names import *  # noqa: E402,F401,F403

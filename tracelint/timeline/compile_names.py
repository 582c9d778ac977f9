"""Names that torch.compile (Dynamo, AOTAutograd, Inductor) and CUDA / HIP graphs leave in a
trace, classified once here so rules never match them themselves (re-exported by classify).

Checked against torch 2.13 CPU captures (examples/compile_recompile.py) and the PyTorch sources
that record them (torch/_dynamo/convert_frame.py, torch/_inductor/output_code.py, dynamo_timed).
"""
from __future__ import annotations

import re

_VERSION_SUFFIX = re.compile(r"_v\d+$")
#: Range kinds that hold torch.compile's host-side records (TL037, TL008).
HOST_KINDS = ("op", "annotation", "nvtx")


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
    n = _VERSION_SUFFIX.sub("", name) if name.startswith(("cuda", "hip")) else name
    for kind, rx in _GRAPH_API:
        if rx.match(n):
            return kind
    return None

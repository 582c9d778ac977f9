"""Source locations from Python stacks: which line a finding points at, and what that line is.

Why it is built this way:
- torch.profiler's Python tracer names a frame by `co_firstlineno`: the line is where the
  function is *defined*, not the call being made. Frames already running when profiling
  started carry the line they stood on at that moment instead. Printing either as "the call
  site" points the reader at the wrong line, so a SourceSite says which kind of line it holds
  (`line_kind`: call | def | start) and reporters word it accordingly.
- The frame directly inside the chosen user frame names the callee (`<built-in method item of
  Tensor ...>` -> `item`). When the user's source file can be read (source roots, the trace's
  folder, the working directory) and the function body calls that name on exactly one line,
  the site is narrowed to that line. Two or more candidates: the definition line stays.
  When the callee is a decorator's wrapper that the body never names (`opt.step()` arrives
  as `wrapper` -> `_use_grad` -> `step`, `zero_grad` as `inner` -> `_fn` -> `zero_grad`), the
  next frames down (at most _MAX_WRAPPERS) are tried in order: the first name the body calls on
  exactly one line narrows the site. A module call (`_call_impl`) is never looked through.
- The first *user* frame is chosen, not a site-packages one; when there is none, the innermost
  library frame is returned marked `library=True`. `nn.Module: Linear_4` frames are not code
  locations: they become the module path.
- Legacy Kineto `args["Call stack"]` and other sources that record the line being executed
  give `line_kind="call"` directly (Timeline.meta.extra["python_frame_lines"] == "call").
"""
from __future__ import annotations

import ast
import importlib.util
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from ..timeline import classify

_BUILTIN = re.compile(r"^<built-in (?:method|function) ([\w.]+)")
_MODULE_FRAME = "nn.Module: "
_OURS = re.compile(r"tracelint[/\\]capture[/\\]")      # the capture runner's own frames
_MODULE_CALL = {"_call_impl", "_wrapped_call_impl", "__call__"}
#: how late after the trace's first frame a thread's stack may still have been open at start
_START_SLACK_NS = 1_000_000
#: the tracer records the stack open at start one frame after another, microseconds apart
#: (0.5-6 us a frame on the traces we have); a call made after the start comes later
_OPEN_STEP_NS = 50_000
#: the profiler's own Python frames: the thread that started profiling has them innermost in
#: its open stack (`start_trace`, `_start_trace`), and what they call next is a new call
_PROFILER_START = re.compile(r"torch[/\\](profiler[/\\]|autograd[/\\]profiler)")
#: how many frames below an unnamed callee (a decorator's wrapper) narrowing may look through
_MAX_WRAPPERS = 2


@dataclass(frozen=True)
class SourceSite:
    """Where in the source a host-side event happened (hashable: rules group by it)."""

    file: str
    line: int | None
    function: str
    line_kind: str | None = None      # call | def | start | None (unknown)
    callee: str | None = None         # what the frame was calling, when the stack names it
    library: bool = False             # no user frame on the stack: this is library code
    module_path: tuple[str, ...] = field(default=())
    inner: tuple[str, ...] = field(default=())   # callees of the frames below `callee`, in order

    def apply(self, where) -> None:
        """Copy onto a Where (finding.Where)."""
        where.file, where.line, where.function = self.file, self.line, self.function
        where.line_kind, where.callee = self.line_kind, self.callee
        where.library = True if self.library else None
        where.module_path = list(self.module_path)


#: Top-level packages that are third-party code wherever they appear: torch strips the
#: site-packages prefix, so `transformers/models/bert/modeling_bert.py` arrives bare.
KNOWN_LIBRARIES = frozenset((
    "accelerate apex datasets deepspeed diffusers einops fairscale flash_attn huggingface_hub "
    "jax lightning megatron numpy pandas peft pytorch_lightning safetensors scipy sklearn "
    "tensorrt timm tokenizers torchvision torchaudio transformers triton vllm xformers").split())


def is_library(file: str) -> bool:
    """Library code by its path: site-packages, the standard library, torch, known packages,
    or a top-level package this Python installs into site-packages."""
    if classify.LIBRARY_CODE.search(file) or _OURS.search(file):
        return True
    top = file.replace("\\", "/").split("/", 1)
    return len(top) == 2 and (top[0] in KNOWN_LIBRARIES or _installed(top[0]))


@lru_cache(maxsize=1024)
def _installed(name: str) -> bool:
    if not name.isidentifier():
        return False
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    origin = (spec.origin or "") if spec else ""
    return "site-packages" in origin or "dist-packages" in origin


def callee_name(function: str) -> str | None:
    """`<built-in method item of Tensor object at 0x..>` -> item; a Python function's name."""
    m = _BUILTIN.match(function)
    if m:
        return m.group(1).rsplit(".", 1)[-1]
    name = function.strip()
    return name if name.isidentifier() and name not in _MODULE_CALL else None


class SourceIndex:
    """Finds the user's source files: explicit roots first, then the given fallbacks."""

    def __init__(self, roots: list[str | Path] = (), path_map: list[tuple[str, str]] = ()):
        self.roots = [Path(r).expanduser() for r in roots]
        self.path_map = list(path_map)

    def mapped(self, file: str) -> str:
        """The trace's path with --path-map prefixes rewritten (first match wins)."""
        for old, new in self.path_map:
            if old and file.startswith(old):
                return new + file[len(old):]
        return file

    def resolve(self, file: str, extra_roots: tuple[Path, ...] = ()) -> Path | None:
        f = self.mapped(file)
        if not f or f.startswith("<"):
            return None
        p = Path(f)
        if p.is_absolute():
            return p if p.is_file() else None
        for root in (*self.roots, *extra_roots):
            cand = root / p
            if cand.is_file():
                return cand
        return None

    def display(self, file: str) -> str:
        """The path as a reviewer's tree names it: relative to the first source root that holds
        it, else the mapped path."""
        f = self.mapped(file)
        p = Path(f)
        if p.is_absolute():
            for root in self.roots:
                try:
                    return p.resolve().relative_to(root.resolve()).as_posix()
                except (ValueError, OSError):
                    continue
        return f


@lru_cache(maxsize=256)
def _parse(path: str, mtime: float) -> ast.Module | None:
    try:
        return ast.parse(Path(path).read_text(errors="replace"), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None


def _tree(path: Path) -> ast.Module | None:
    try:
        return _parse(str(path), os.stat(path).st_mtime)
    except OSError:
        return None


def _first_line(fn: ast.AST) -> int:
    decos = getattr(fn, "decorator_list", [])
    return min([fn.lineno, *(d.lineno for d in decos)])


def _scope(tree: ast.Module, function: str, line: int | None, kind: str | None) -> ast.AST | None:
    """The AST node whose body the frame ran: the module, or the function defined at `line`
    (def frames) / containing `line` (frames open when profiling started)."""
    if function == "<module>":
        return tree
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
            if line is None:
                best = node if best is None else best
            elif kind == "def" and (_first_line(node) == line or node.lineno == line):
                return node
            elif kind != "def" and _first_line(node) <= line <= (node.end_lineno or line):
                if best is None or node.lineno > best.lineno:
                    best = node      # innermost definition containing the line
    return best


def _calls(scope: ast.AST, callee: str) -> list[int]:
    """Lines in scope's own body (not nested defs) that call `callee` by name or attribute."""
    lines: set[int] = set()
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else None
            if name == callee:
                lines.add(fn.end_lineno if isinstance(fn, ast.Attribute) else node.lineno)
        stack.extend(ast.iter_child_nodes(node))
    return sorted(lines)


def narrow(site: SourceSite, path: Path | None) -> SourceSite:
    """Narrow a def/start line to the call, using the source file when it can be read."""
    if path is None or site.line_kind == "call":
        return site
    tree = _tree(path)
    if tree is None:
        return site
    scope = _scope(tree, site.function, site.line, site.line_kind)
    if scope is None:
        return site
    if site.callee:
        lines = _calls(scope, site.callee)
        if len(lines) == 1:
            return replace_site(site, line=lines[0], line_kind="call", inner=())
        for name in (() if lines else site.inner):   # the callee is a wrapper the body never names
            found = _calls(scope, name)
            if found:
                if len(found) == 1:
                    return replace_site(site, line=found[0], line_kind="call", callee=name, inner=())
                break
    if site.line_kind == "start":     # the line running when profiling began says nothing
        if isinstance(scope, ast.Module):
            return replace_site(site, line=None, line_kind=None)
        return replace_site(site, line=_first_line(scope), line_kind="def")
    return site


def replace_site(site: SourceSite, **kw) -> SourceSite:
    return SourceSite(**{**site.__dict__, **kw})


def open_at_start(frames: pd.DataFrame, window: tuple[int, int]) -> frozenset:
    """Index labels of one thread's frames that were open when profiling began (window: the
    trace's first frame start and last frame end). They hold that moment's line, not their
    definition.

    Not "frames spanning the window": in a 2 ms capture a call made mid-way spans it within any
    slack. The tracer writes the open stack first, outermost down, each frame nested in the one
    before and microseconds after it; the chain ends at the first frame that is not. Its
    outermost frame (the module, a thread's bootstrap) is open from the first moment to the
    last: a first frame that returns early was a call. On the thread that started profiling
    the open stack ends in the profiler's own frames, so the chain is cut after them: what
    they call next (perf_counter_ns) is a new call however soon it comes. Another thread's
    chain is taken whole: its open frames may return at any time (a monitor's `wait`), and a
    call made microseconds after its stack was written can pass for part of it (vLLM's
    `clone`, 0.5 us after; library code there, which a site does not point at)."""
    if len(frames) == 0:
        return frozenset()
    f = frames.sort_values(["start", "depth"], kind="stable")
    start, end, depth = (f[c].to_numpy(np.int64) for c in ("start", "end", "depth"))
    if start[0] > window[0] + _START_SLACK_NS or end[0] < window[1] - _START_SLACK_NS:
        return frozenset()              # a thread that began after profiling did, or a call
    n = 1
    while n < len(f) and depth[n] == depth[n - 1] + 1 and end[n] <= end[n - 1] \
            and start[n] - start[n - 1] <= _OPEN_STEP_NS:
        n += 1
    files = f["file"].iloc[:n].astype(str).tolist()
    profiler = [i for i, file in enumerate(files) if _PROFILER_START.search(file)]
    if profiler:
        n = profiler[-1] + 1
    return frozenset(f.index[:n].tolist())


def site_in_stack(enc: pd.DataFrame, opened: frozenset | tuple = (),
                  lines: str = "def", in_tree=None) -> SourceSite | None:
    """The source site from the frames enclosing a time point, innermost first.

    opened: index labels of the frames open when profiling began (open_at_start).
    lines: "def" (torch.profiler Python tracer) or "call" (stacks that record the current line).
    in_tree: file -> bool, whether the file is found in the user's source tree. torch strips
    the sys.path prefix from frame paths (`transformers/pipelines/base.py`, no site-packages),
    so when some frame is found there, frames that are not count as library code too. Library
    frames never count as found: tracelint's own capture runner, say, which is in the tree when
    tracelint runs from its checkout, would make every frame of the user's program library.
    """
    if lines == "native":
        return _native_site(enc)
    files, fns = enc["file"].astype(str).tolist(), enc["function"].astype(str).tolist()
    line_vals = enc["line"].tolist()
    module_path = tuple(reversed([f[len(_MODULE_FRAME):] for f in files if f.startswith(_MODULE_FRAME)]))
    code = [i for i, f in enumerate(files) if not f.startswith(_MODULE_FRAME)]
    chosen, library = None, False
    real = [i for i in code if not f_builtin(files[i]) and line_vals[i] >= 0]
    found = {i for i in real if in_tree is not None and not is_library(files[i]) and in_tree(files[i])}
    for i in real:
        if not is_library(files[i]) and (not found or i in found):
            chosen = i
            break
    if chosen is None:
        chosen = real[0] if real else None
        library = chosen is not None
    if chosen is None:
        return None
    pos = code.index(chosen)
    callee = callee_name(fns[code[pos - 1]]) if pos > 0 else None
    inner: list[str] = []
    for j in range(pos - 2, max(pos - 2 - _MAX_WRAPPERS, -1), -1):   # the frames below, outer first
        name = callee_name(fns[code[j]]) if callee else None
        if name is None or f_builtin(files[code[j]]):
            break
        inner.append(name)
    kind = "start" if lines == "def" and enc.index[chosen] in opened else lines
    return SourceSite(files[chosen], int(line_vals[chosen]), fns[chosen], kind, callee, library,
                      module_path, tuple(inner))


def f_builtin(file: str) -> bool:
    return file.startswith("<")


#: Native frames that are not the user's code: the CUDA driver/runtime/profiler libraries, the
#: C/C++ runtime, the loader, Python and framework libraries.
NATIVE_LIBRARY = re.compile(
    r"(^|/)(lib(cuda|cudart|cupti|nvidia[\w-]*|c|m|dl|rt|pthread|stdc\+\+|gcc_s|torch\w*|c10\w*|"
    r"python[\d.]*|nccl|rccl|cublas\w*|cudnn\w*|nvrtc\w*|amdhip64|mpi\w*|ucp|ucs|gomp|omp)"
    r"[.-][^/]*|ld-linux[^/]*|python[\d.]*)$|site-packages|dist-packages|^/usr/lib|^/lib")
#: CUDA runtime API templates inlined into the user's binary (`cudaMalloc<double>`).
_CUDA_WRAPPER = re.compile(r"(^|\s)cu(da)?[A-Z]\w*\s*[<(]|^cu(da)?[A-Z]\w*$")


def _native_site(enc: pd.DataFrame) -> SourceSite | None:
    """The innermost native frame in the user's own binaries (nsys --cudabacktrace)."""
    files, fns = enc["file"].astype(str).tolist(), enc["function"].astype(str).tolist()
    frames = list(zip(files, fns))
    chosen = next(((f, fn) for f, fn in frames
                   if not NATIVE_LIBRARY.search(f) and not _CUDA_WRAPPER.search(fn)
                   and not fn.startswith("0x")), None)
    library = chosen is None
    if chosen is None:
        chosen = next(((f, fn) for f, fn in frames if not fn.startswith("0x")), None)
    if chosen is None:
        return None
    callee = next((fn for f, fn in reversed(frames[:frames.index(chosen)])
                   if not fn.startswith("0x")), None)
    name = re.sub(r"\(.*\)\s*$", "", chosen[1]).strip()
    name = name.split()[-1] if " " in name and "<" not in name else name
    return SourceSite(chosen[0].rsplit("/", 1)[-1], None, name, "native",
                      re.sub(r"\(.*$", "", callee).split()[-1] if callee else None, library)

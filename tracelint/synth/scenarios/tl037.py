"""TL037 torch-compile-recompile: a compiled forward that Dynamo recompiles in every iteration
after the first (compile ids 0/1, 0/2, 0/3), and one with a graph break (a second compiled
region, the resume function, nested in each call, eager ops between the graphs); near-misses:
the one warm-up compilation in the first iteration (with and without compile ids, as torch
< 2.5 records them), and two compiled functions called one after the other (two regions per
iteration, neither nested: no break). Dynamo's ranges reach nsys as NVTX under emit_nvtx."""
from __future__ import annotations

from ..builder import TraceBuilder
from . import Scenario

STEPS = 4
COMPILE_NS = 40_000_000          # one (re)compilation: dynamo -> backend_compile -> inductor
LOOKUP_NS = 30_000               # TorchDynamo Cache Lookup per call
ITEM_NS, MUL_API_NS = 20_000, 5_000
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
FUSED = "triton_poi_fused_gelu_mul_0"
BREAK_LINE = 30


def _compile(b: TraceBuilder, cid: str | None) -> None:
    """A Dynamo compilation as torch 2.x records it: nested dynamo_timed ranges."""
    with b.op("dynamo"):                      # lasts exactly COMPILE_NS
        if cid is not None:
            with b.range(f"dynamo_data: compile_id={cid}"):
                b.advance(10_000)
        else:
            b.advance(10_000)
        with b.op("entire_frame_compile"):
            b.cpu(2_000_000, name="bytecode_tracing")
            with b.op("backend_compile"):
                b.cpu(COMPILE_NS - 2_030_000, name="inductor_compile")
            b.cpu(10_000, name="build_guards")
        b.advance(10_000)


def _call(b: TraceBuilder, region: str, frame: tuple | None = ("train.py", 12, "forward")) -> None:
    b.cpu(LOOKUP_NS, name="TorchDynamo Cache Lookup")
    with b.op(region):
        if frame:
            with b.python(*frame):
                _graph(b)
        else:
            _graph(b)


def _graph(b: TraceBuilder) -> None:
    b.cpu(8_000, name="Pregraph bytecode")
    with b.range("## Call CompiledFxGraph fabc123 ##"):
        b.launch(GEMM, 300_000, op="aten::mm")
        b.launch(FUSED, 40_000)


def recompiling(ids: bool = True) -> TraceBuilder:
    """Iteration 0 compiles (warm-up); iterations 1..3 compile frame 0 again (a new shape)."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s), b.python("train.py", 40, "<module>"):
            _compile(b, f"0/{s}" if ids else None)
            _call(b, f"Torch-Compiled Region: 0/{s}" if ids else "Torch-Compiled Region")
            b.sync("cudaStreamSynchronize")
    return b


def warmup_only(ids: bool = True) -> TraceBuilder:
    """Only the first iteration compiles; the others look the graph up and run it."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s), b.python("train.py", 40, "<module>"):
            if s == 0:
                _compile(b, "0/0" if ids else None)
            _call(b, "Torch-Compiled Region: 0/0" if ids else "Torch-Compiled Region")
            b.sync("cudaStreamSynchronize")
    return b


def graph_break() -> TraceBuilder:
    """forward() breaks at line 30 (`.item()`): graph 1, eager item + mul, then the resume
    function's region nested in the first one, running graph 2."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s), b.python("train.py", 40, "<module>"):
            b.cpu(LOOKUP_NS, name="TorchDynamo Cache Lookup")
            with b.op("Torch-Compiled Region: 0/0"), b.python("train.py", 12, "forward"):
                _graph(b)
                b.cpu(ITEM_NS, name="aten::item")                           # eager, between graphs
                b.launch("vectorized_elementwise_kernel<4, MulFunctor<float>>", 3_000,
                         api_dur_ns=MUL_API_NS, op="aten::mul")              # eager, between graphs
                _call(b, "Torch-Compiled Region: 1/0",
                      ("train.py", BREAK_LINE, f"torch_dynamo_resume_in_forward_at_{BREAK_LINE}"))
            b.sync("cudaStreamSynchronize")
    return b


def two_functions() -> TraceBuilder:
    """Two compiled functions called one after the other: two regions per iteration, side by
    side (not nested): no graph break."""
    b = TraceBuilder()
    for s in range(STEPS):
        with b.step(s), b.python("train.py", 40, "<module>"):
            _call(b, "Torch-Compiled Region: 0/0", ("train.py", 12, "encoder"))
            b.cpu(ITEM_NS, name="aten::add")
            _call(b, "Torch-Compiled Region: 1/0", ("train.py", 20, "decoder"))
            b.sync("cudaStreamSynchronize")
    return b


SCENARIOS = [
    Scenario("TL037", "positive-recompile", recompiling, True, nvtx_ops=True,
             expect={"key": "recompile", "impact_ns": (STEPS - 1) * COMPILE_NS,
                     "occurrences": STEPS - 1, "metrics.recompilations": STEPS - 1}),
    Scenario("TL037", "positive-recompile-source-line", recompiling, True, formats=("kineto",),
             expect={"key": "recompile", "where.file": "train.py", "where.line": 12,
                     "where.function": "forward"}),
    Scenario("TL037", "positive-recompile-no-ids", lambda: recompiling(ids=False), True, nvtx_ops=True,
             expect={"key": "recompile", "impact_ns": (STEPS - 1) * COMPILE_NS,
                     "metrics.recompilations": 0}),
    Scenario("TL037", "positive-graph-break", graph_break, True, nvtx_ops=True,
             expect={"key": "graph-break", "occurrences": STEPS,
                     "impact_ns": STEPS * (ITEM_NS + MUL_API_NS)}),
    Scenario("TL037", "positive-graph-break-source-line", graph_break, True, formats=("kineto",),
             expect={"key": "graph-break", "where.file": "train.py", "where.line": BREAK_LINE,
                     "where.function": "forward"}),
    Scenario("TL037", "near-miss-warmup-compile", warmup_only, False, nvtx_ops=True),
    Scenario("TL037", "near-miss-warmup-compile-no-ids", lambda: warmup_only(ids=False), False, nvtx_ops=True),
    Scenario("TL037", "near-miss-two-functions", two_functions, False, nvtx_ops=True),
]

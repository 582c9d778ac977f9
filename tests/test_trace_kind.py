"""The trace's workload kind and vendor (timeline.classify.workload_kind / vendor, the case
library's trace context): the substring shortcut over all names at once answers what the
patterns answer name by name, on every real trace's names and on names built to sit at the
shortcut's edges (case, non-ASCII text, a needle without a match)."""
from __future__ import annotations

import pytest
from conftest import ALL_TRACES, needs_shared

import tracelint
from tracelint.cases.match import trace_context
from tracelint.timeline import classify


def _plain_workload(names):
    names = [str(n) for n in names]
    for label, pattern in (("training", classify._TRAINING), ("serving", classify._SERVING),
                           ("inference", classify._FRAMEWORK_OP)):
        if any(pattern.search(n) for n in names):
            return label
    return "other"


def _plain_vendor(names):
    names = [str(n) for n in names]
    if any(classify._AMD.search(n) for n in names):
        return "amd"
    if any(classify._NVIDIA.search(n) for n in names):
        return "nvidia"
    return "unknown"


EDGES = [
    [], [""], ["gemm_kernel", "memcpy"],
    ["VLLM::paged_attention_v1"], ["vLLM step"], ["KV_Cache write"], ["kvcache"], ["kv only"],
    ["Prefill"], ["my_generate(x)"], ["generate"],
    ["AdamW step"], ["adam"], ["SGD"], ["sgd_update"], ["Backward"], ["_bw_"],
    ["Instinct MI300X"], ["amd gpu"], ["radeon"], ["gfx942 MI250"], ["mi25"], ["Cijk_Ailk"],
    ["xCijk_"], ["hipMemcpyAsync"], ["HIPLAUNCHKERNEL"], ["military"],
    ["NVIDIA H100"], ["cudaLaunchKernel"], ["cuLaunchKernel"], ["H200"], ["kernel_T4"],
    ["ǅ prefill", "x"], ["İnstinct"], ["ſglang"], ["\u212aV_cache"], ["ᴍɪ300"],
    ["aten::mm", "backward"], ["torch.nn"], ["line\nCijk_x"], ["foo\ncudaMalloc"],
]


@pytest.mark.parametrize("names", EDGES, ids=range(len(EDGES)))
def test_edges_answer_as_name_by_name(names):
    assert classify.workload_kind(names) == _plain_workload(names)
    assert classify.vendor(names) == _plain_vendor(names)


def test_edges_reach_every_answer():
    """The edge names above are not all one answer."""
    assert {classify.workload_kind(n) for n in EDGES} == {"training", "serving", "inference", "other"}
    assert {classify.vendor(n) for n in EDGES} == {"amd", "nvidia", "unknown"}


@needs_shared()
@pytest.mark.parametrize("path", ALL_TRACES, ids=lambda p: p.name[:40])
def test_real_traces_answer_as_name_by_name(path):
    tl = tracelint.load(path)
    names = [str(x) for t in ("api_calls", "kernels", "ranges") for x in
             (tl.table(t)["name"].cat.categories if len(tl.table(t)) else [])]
    devices = [d.name for d in tl.meta.devices if d.name]
    ctx = trace_context(tl)
    assert ctx["workload"] == _plain_workload(names)
    assert ctx["vendor"] == _plain_vendor(devices + names)

"""Fixes in a GPU runtime's own calls, for a program that is not PyTorch's (CUDA C, OpenMP,
HIP, Fortran): the rules' own fixes name PyTorch's knobs (`.item()`, `torch.compile`,
DataLoader workers), which such a program does not have. A rule asks `Context.is_pytorch`
and takes its fix from here when the answer is no.
"""
from __future__ import annotations

#: TL001's causes whose fix names PyTorch's knobs, in the runtime's terms.
LAUNCH_GAP_FIX = {
    "late": ("Take host work off the launch path: capture the launch-bound loop in a CUDA graph "
             "(cudaStreamBeginCapture ... cudaGraphLaunch; hipGraph on ROCm), fuse small kernels into "
             "larger ones, and prepare the next launch's inputs on another thread or before the GPU "
             "finishes the current work."),
    "blocked": ("Remove the synchronous call from the loop: a blocking copy (cudaMemcpy, hipMemcpy, "
                "cuMemcpyDtoH, any copy to or from pageable memory) waits for the device like a sync; "
                "copy with cudaMemcpyAsync from pinned memory (cudaMallocHost) and synchronise once per "
                "step at most, on an event where only one result is needed (see TL005)."),
    "no_launch": ("Nothing was launched while the GPU idled: the host was doing other work (see the host "
                  "activity named in the evidence). Overlap it with GPU work: launch the next kernels "
                  "before the host work and wait for them after it, move that work to the GPU, or run "
                  "it on another thread."),
}
def past_warmup(is_pytorch: bool, vendor: str) -> str:
    """TL001's warm-up finding: how to profile past the warm-up, with the tools of the program
    (PyTorch or not) and of the GPU's vendor."""
    if is_pytorch:
        return "torch.profiler schedule with wait/warmup steps" + (
            "" if vendor == "amd" else ", nsys --capture-range")
    if vendor == "amd":
        return ("rocprofv3 --collection-period START:DURATION:REPEAT, or roctracer_start/stop "
                "around the steady-state loop")
    return "nsys --capture-range=cudaProfilerApi, with cudaProfilerStart/Stop around the steady-state loop"


def first_call_libraries(vendor: str) -> str:
    """The libraries whose first calls tune or load kernels, on this vendor's GPUs."""
    return "MIOpen/rocBLAS/hipBLASLt tuning" if vendor == "amd" else "cuDNN/cuBLAS autotuning"


def hidden_sync_fix(kind: str, api: str) -> str:
    """TL005's fix for one call site: kind is alloc, sync, copy or read; api the call's name."""
    rt = "hip" if api.lower().startswith("hip") else "cuda"
    if kind == "alloc":
        return (f"Allocate once, outside the loop, and reuse the buffers, or use the stream-ordered "
                f"allocator ({rt}MallocAsync / {rt}FreeAsync), whose frees do not synchronise the "
                "device.")
    if kind == "sync":
        return (f"Drop `{api}` where stream order already orders the work; where the host needs a "
                f"result, record an event after that work and wait for it ({rt}EventSynchronize) "
                "instead of for the whole device or stream, so the GPU keeps work queued.")
    return (f"Replace the synchronous `{api}` with {rt}MemcpyAsync into pinned host memory "
            f"({rt}HostAlloc or {rt}HostRegister) on a stream, and wait ({rt}StreamSynchronize or an "
            "event) only where the host reads the result.")

"""Fixes in a program's own terms where it is not PyTorch's: a GPU runtime's calls for a CUDA
C, OpenMP, HIP or Fortran program, JAX's for a JAX one. The rules' own fixes name PyTorch's
knobs (`.item()`, `torch.compile`, DataLoader workers), which such a program does not have. A
rule asks `Context.framework` (pytorch, jax or native) and takes its fix from here when it is
not pytorch.
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
    "late_long": ("The gaps are long ({facts}), and a launch costs microseconds, so a CUDA graph or "
                  "fused kernels would not close them: between launches the host does other work (the host "
                  "activity named in the evidence; where the trace records none, profile the host: nsys -t "
                  "osrt --sample=cpu, perf). Overlap it with GPU work: launch the next kernels before it and "
                  "synchronise after it, move it to the GPU, or run it on another thread."),
    "no_launch": ("Nothing was launched while the GPU idled: the host was doing other work (see the host "
                  "activity named in the evidence). Overlap it with GPU work: launch the next kernels "
                  "before the host work and wait for them after it, move that work to the GPU, or run "
                  "it on another thread."),
}


def past_warmup(framework: str, vendor: str) -> str:
    """TL001's warm-up finding: how to profile past the warm-up, with the tools of the program
    (PyTorch, JAX or neither) and of the GPU's vendor."""
    if framework == "jax":
        return ("jax.profiler.start_trace / stop_trace around steps after the first, which "
                "compile")
    if framework == "pytorch":
        return "torch.profiler schedule with wait/warmup steps" + (
            "" if vendor in ("amd", "intel") else ", nsys --capture-range")
    if vendor == "amd":
        return ("rocprofv3 --collection-period START:DURATION:REPEAT, or roctracer_start/stop "
                "around the steady-state loop")
    if vendor == "intel":
        return "vtune -start-paused, with __itt_resume/__itt_pause around the steady-state loop"
    return "nsys --capture-range=cudaProfilerApi, with cudaProfilerStart/Stop around the steady-state loop"


def first_call_libraries(vendor: str) -> str:
    """The libraries whose first calls tune or load kernels, on this vendor's GPUs."""
    return {"amd": "MIOpen/rocBLAS/hipBLASLt tuning", "intel": "oneDNN/oneMKL kernel JIT and tuning"
            }.get(vendor, "cuDNN/cuBLAS autotuning")


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


#: The same causes in a JAX program's terms: jit, on-device loops, asynchronous dispatch.
JAX_LAUNCH_GAP_FIX = {
    "late": ("Take host work off the dispatch path: jit the whole step (jax.jit) so XLA fuses it "
             "into few kernels, loop on the device (jax.lax.scan / fori_loop) rather than in Python, "
             "and let XLA replay the step's kernels as a CUDA graph (its command buffers, "
             "--xla_gpu_enable_command_buffer). JAX dispatches asynchronously: keep Python work "
             "between steps short and free of host reads."),
    "late_long": ("The gaps are long ({facts}), and a dispatch costs microseconds, so jit or "
                  "command buffers would not close them: between steps the host does other work (data "
                  "loading, Python; profile it with py-spy, or nsys -t osrt --sample=cpu). Prefetch batches "
                  "to the device in a background thread (jax.device_put, flax.jax_utils.prefetch_to_device) "
                  "and dispatch the next step before the host work: dispatch is asynchronous."),
    "blocked": ("Remove the host reads from the loop: float(x), x.item(), np.asarray(x), "
                "jax.device_get, print of a jax.Array and block_until_ready wait for the device; "
                "keep values on the device and read metrics once every N steps."),
    "no_launch": ("Nothing was dispatched while the GPU idled: the host was busy (data loading, "
                  "Python). Prefetch the next batches to the device in a background thread "
                  "(jax.device_put, flax.jax_utils.prefetch_to_device) and dispatch the next step "
                  "before the host work: dispatch is asynchronous."),
}


def jax_hidden_sync_fix(kind: str) -> str:
    """TL005 in a JAX program, for a call of kind alloc, sync, copy or read."""
    if kind == "alloc":
        return ("Device memory is allocated or freed mid-step, and the free synchronises the "
                "device: let XLA's allocator keep its pool (XLA_PYTHON_CLIENT_PREALLOCATE=true, "
                "the default, with XLA_PYTHON_CLIENT_MEM_FRACTION sized to the job) instead of "
                "allocating on demand (XLA_PYTHON_CLIENT_ALLOCATOR=platform).")
    return ("A host read of a device value waits for the GPU: float(x), x.item(), np.asarray(x), "
            "jax.device_get, printing a jax.Array, or Python control flow on it outside jit. Keep "
            "the value on the device (jnp.where or lax.cond inside jit instead of a Python if), "
            "and read metrics once every N steps.")


#: TL004 and TL032 in a JAX program: inputs staged to the device ahead of use.
JAX_COPY_FIX = ("Put the inputs on the device ahead of use: jax.device_put the next batch while "
                "the current step runs (a prefetch thread, flax.jax_utils.prefetch_to_device, or "
                "a grain / tf.data pipeline that prefetches to the device), keep arrays on the "
                "device between steps (donate_argnums for buffers the step overwrites), and read "
                "results back once every N steps.")


#: TL013 in a JAX program: host work between steps holds back the next step's dispatch.
JAX_ITERATION_START_FIX = (
    "Dispatch the next step before the host work between steps: JAX dispatches asynchronously, "
    "so a step issued before the Python work (logging, metrics, preparing the next batch) runs "
    "while it does, unless a host read in between (float(x), x.item(), np.asarray(x), printing a "
    "jax.Array) waits for the device first: read metrics once every N steps and prefetch batches "
    "to the device in a background thread (jax.device_put, flax.jax_utils.prefetch_to_device).")


def iteration_start_fix(framework: str, pytorch_fix: str) -> str:
    """TL013's fix (pytorch_fix: the rule's own, for the host activity it found)."""
    return JAX_ITERATION_START_FIX if framework == "jax" else pytorch_fix


def launch_gap_fix(cause: str, framework: str, pytorch_fix: str) -> str:
    """TL001's fix for a cause, in the program's terms (pytorch_fix: the rule's own)."""
    if framework == "jax":
        return JAX_LAUNCH_GAP_FIX.get(cause, pytorch_fix)
    return pytorch_fix if framework == "pytorch" else LAUNCH_GAP_FIX.get(cause, pytorch_fix)

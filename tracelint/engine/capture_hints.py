"""How to capture each missing source, quoted in "not captured" evidence, for the GPU vendor
the trace was recorded on: an AMD trace told to run `nsys` or `ncu` gets advice it cannot
follow. The vendor comes from the trace (timeline.classify.trace_vendor): nvidia, amd or intel;
unknown gets the NVIDIA tools, the most common case.

tracelint reads hardware counters from NVIDIA's tools only (nsys GPU metrics, Nsight Compute
CSV, the CUPTI range profiler in Kineto): the AMD hint says how to record them and that they
are compared by hand, rather than promising a layer tracelint would not fill.
"""
from __future__ import annotations

CAPTURE_HINTS = {
    "gpu_metrics": ("nsys profile --gpu-metrics-devices=all (Turing or newer), or Nsight Compute: "
                    "ncu --set full -k regex:{kernel} -o report; then pass --ncu report.csv "
                    "(ncu --csv --page raw -i report.ncu-rep > report.csv)"),
    "copy_metrics": ("nsys profile --gpu-metrics-devices=all (Turing or newer) samples SM activity "
                     "and PCIe read/write throughput"),
    "python_stacks": ("torch.profiler.profile(with_stack=True) (tracelint capture does this), "
                      "or nsys profile --python-backtrace=cuda"),
    "launch_config": ("a CUDA kernel trace with launch configuration: nsys profile -t cuda, or "
                      "torch.profiler with ProfilerActivity.CUDA"),
    "copy_sizes": ("nsys profile -t cuda (CUPTI memcpy records carry bytes), or torch.profiler "
                   "with ProfilerActivity.CUDA"),
    "cuda": "nsys profile -t cuda,nvtx, or torch.profiler with ProfilerActivity.CUDA",
    "nvtx": "annotate phases with torch.profiler.record_function / nvtx.annotate",
}

#: The same sources on AMD GPUs (ROCm): rocprofv3 and torch.profiler's HIP activity.
AMD_HINTS = {
    "gpu_metrics": ("rocprofv3 --pmc SQ_WAVES,SQ_BUSY_CYCLES,GRBM_GUI_ACTIVE "
                    "--kernel-include-regex '{kernel}' -- <your program> (or rocprof-compute "
                    "profile for the full analysis); tracelint reads NVIDIA counters only, so "
                    "compare these by hand"),
    "copy_metrics": ("rocprofv3 --pmc with the TCC/TCP read and write counters around the copy "
                     "(rocprof-compute profile groups them); tracelint reads NVIDIA counters only"),
    "python_stacks": "torch.profiler.profile(with_stack=True) (tracelint capture does this)",
    "launch_config": ("torch.profiler with ProfilerActivity.CUDA on ROCm (HIP launch calls carry "
                      "grid and block), or rocprofv3 --kernel-trace"),
    "copy_sizes": ("torch.profiler with ProfilerActivity.CUDA on ROCm (HIP copy calls carry their "
                   "size), or rocprofv3 --memory-copy-trace"),
    "cuda": "torch.profiler with ProfilerActivity.CUDA on ROCm, or rocprofv3 --runtime-trace",
    "nvtx": "annotate phases with torch.profiler.record_function / roctx ranges (roctxRangePush)",
}

#: ... and on Intel GPUs (PyTorch's XPU backend): torch.profiler's XPU activity, VTune, unitrace.
INTEL_HINTS = {
    "gpu_metrics": ("vtune -collect gpu-hotspots -- <your program> (kernel '{kernel}'), or "
                    "unitrace with its metric queries (intel/pti-gpu); tracelint reads NVIDIA "
                    "counters only, so compare these by hand"),
    "copy_metrics": ("vtune -collect gpu-hotspots samples the GPU's memory and link throughput; "
                     "tracelint reads NVIDIA counters only"),
    "python_stacks": "torch.profiler.profile(with_stack=True) (tracelint capture does this)",
    "launch_config": "torch.profiler with ProfilerActivity.XPU, or unitrace --chrome-kernel-logging",
    "copy_sizes": "torch.profiler with ProfilerActivity.XPU, or unitrace --chrome-kernel-logging",
    "cuda": "torch.profiler with ProfilerActivity.XPU, or unitrace --chrome-call-logging",
    "nvtx": "annotate phases with torch.profiler.record_function / ITT (torch.profiler.itt)",
}

HINTS_BY_VENDOR = {"amd": AMD_HINTS, "intel": INTEL_HINTS}


def capture_hint(key: str, vendor: str = "unknown", **fmt: str) -> str:
    """The hint for one missing source on this vendor's GPUs; fmt fills its {fields}."""
    text = HINTS_BY_VENDOR.get(vendor, CAPTURE_HINTS)[key]
    return text.format(**fmt) if fmt else text

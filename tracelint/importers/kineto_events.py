"""The Kineto event schema: which categories feed which Timeline table, and the slim msgspec
Structs that declare only the fields the importer reads (the decoder skips all others).

2021 categories (Kernel, Runtime, Operator, ...) and ROCm traces (HIP calls under
cuda_runtime) map to the same tables as current CUDA traces, and so do the runtime calls of
Kineto's other backends: Intel GPUs (xpu_runtime / xpu_driver: Unified Runtime and Level Zero
calls), out-of-tree devices (privateuse1_*), MTIA and Cambricon MLU (mlu_*). Without them a
trace of those devices had kernels but no launch calls: every gap's cause "unlinked".
"""
from __future__ import annotations

from typing import Any, Union

import msgspec

#: Kineto category (current and 2021 names) -> Timeline table.
TABLE_OF_CAT = {
    "kernel": "kernels", "Kernel": "kernels",
    "gpu_memcpy": "copies", "Memcpy": "copies",
    "gpu_memset": "memsets", "Memset": "memsets",
    "cuda_runtime": "api_calls", "cuda_driver": "api_calls", "Runtime": "api_calls",
    "xpu_runtime": "api_calls", "xpu_driver": "api_calls", "privateuse1_runtime": "api_calls",
    "privateuse1_driver": "api_calls", "mtia_runtime": "api_calls", "mlu_runtime": "api_calls",
    "mlu_memcpy": "copies", "mlu_memset": "memsets",
    "cpu_op": "ranges", "Operator": "ranges", "user_annotation": "ranges",
    "gpu_user_annotation": "ranges",
    "cuda_sync": "syncs",
    "python_function": "python_frames",
}
RANGE_KINDS = ["op", "annotation", "gpu_annotation", "step"]
RANGE_KIND = {"cpu_op": 0, "Operator": 0, "user_annotation": 1, "gpu_user_annotation": 2}
FLOW_CATS = {"ac2g", "async_cpu_to_gpu", "async"}     # CPU launch -> GPU activity flows
COUNTER_CATS = {"cuda_profiler_range"}                # CUPTI range-profiler metrics per kernel
GPU_TABLES = ("kernels", "copies", "memsets")

VERSION_KEYS = ("cupti_version", "cuda_runtime_version", "cuda_driver_version",
                "hip_runtime_version", "hip_driver_version", "roctracer_version")
FLAG_KEYS = ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")


class Args(msgspec.Struct, gc=False):
    """The args read here; the decoder skips all others. Any: producers disagree on types
    (ROCm runtime rows say "stream": "0x0", "bytes": "9216")."""

    correlation: Any = -1
    external_id: Any = msgspec.field(default=-1, name="External id")
    external_id_2021: Any = msgspec.field(default=-1, name="external id")
    device: Any = -1
    stream: Any = -1
    grid: Any = None
    block: Any = None
    registers: Any = msgspec.field(default=-1, name="registers per thread")
    smem: Any = msgspec.field(default=-1, name="shared memory")
    nbytes: Any = msgspec.field(default=-1, name="bytes")
    size: Any = -1         # ROCm runtime copy calls: the bytes their GPU copy rows lack
    # record_shapes=True: op inputs, kept per External id for the efficiency work models.
    # Raw: left undecoded (a byte copy is kept), decoded only when an efficiency model asks.
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    concrete: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Concrete Inputs")
    call_stack: Any = msgspec.field(default=None, name="Call stack")   # legacy with_stack
    # profile_memory=True `[memory]` instants (kineto_memory): read in the same decode pass
    mem_bytes: Any = msgspec.field(default=None, name="Bytes")
    total_allocated: Any = msgspec.field(default=-1, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=-1, name="Total Reserved")
    device_type: Any = msgspec.field(default=-1, name="Device Type")
    device_id: Any = msgspec.field(default=-1, name="Device Id")
    addr: Any = msgspec.field(default=-1, name="Addr")


NO_ARGS = Args()


class _Fields(msgspec.Struct, gc=False):
    cat: str = ""
    name: str = ""
    pid: Any = -1          # int, or a label such as "Spans" / "Traces"
    tid: Any = -1          # int, "stream 7" (2021 GPU rows) or "25738" (2021 CPU rows)
    ts: Any = None         # int, or decimal text (bytes) via float_hook
    dur: Any = 0
    id: Any = -1           # flow id
    args: Args | None = None


class Event(_Fields, gc=False):
    ph: str = ""


# The large-file path (kineto_ranges) decodes events by their phase: a flow event ("s", "t",
# "f": half the events of a trace with ac2g flows) becomes a struct with its category (and its
# phase, a class attribute) only, since flows are read again from the file only when a
# correlation id is missing; the Builder counts them like any event. Every other phase gets
# all the fields. An event without "ph" or with a phase outside the Chrome trace
# format fails the decode, and the whole-buffer path (Event) takes the file.
FLOW_PHASES = ("s", "t", "f")
PHASES = ("X", "B", "E", "i", "I", "C", "M", "b", "n", "e", "P", "N", "O", "D", "R", "c",
          "(", ")", "V", "v", "T", "p", "S", "F")


class PhasedEvent(_Fields, gc=False, tag_field="ph"):
    """An event of one phase; `ph` is a class attribute of each subclass."""


class FlowEvent(msgspec.Struct, gc=False, tag_field="ph"):
    """A flow event: its category only; the other fields read as absent."""

    cat: str = ""
    name = ""                  # class attributes, not decoded
    args = None
    ts = None


_TAGGED = tuple(msgspec.defstruct(f"Event_{i}", [], bases=(PhasedEvent,), tag=ph,
                                  namespace={"ph": ph}) for i, ph in enumerate(PHASES))
_FLOWS = tuple(msgspec.defstruct(f"Flow_{ph}", [], bases=(FlowEvent,), tag=ph,
                                 namespace={"ph": ph}) for ph in FLOW_PHASES)
#: Decode type of one event of the large-file path.
TaggedEvent = Union[_TAGGED + _FLOWS]  # noqa: UP007 - a runtime union of many classes


#: Top-level keys read; metadata (TraceLens runs) may hold environment secrets: only the
#: torch version is taken from it.
Top = msgspec.defstruct("_Top", [
    ("traceEvents", list[msgspec.Raw] | None, None), ("metadata", msgspec.Raw, msgspec.Raw()),
    *[(k, Any, None) for k in ("deviceProperties", "distributedInfo", "schemaVersion",
                               "traceName", "displayTimeUnit", "baseTimeNanoseconds", "trace_id",
                               *VERSION_KEYS, *FLAG_KEYS)]])

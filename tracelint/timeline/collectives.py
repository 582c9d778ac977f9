"""What a collective is, once for the per-trace rules and the job view: the canonical name
from a kernel name or a `Collective name` argument, whether it is point-to-point, the
collective op that issued a kernel (NCCL runs all_to_all on SendRecv kernels and all_gather on
Broadcast ones on some versions, so the kernel name alone would call a collective
point-to-point), and the element size of the dtypes PyTorch records in collective args."""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from . import intervals
from .classify import labels_at, name_mask

#: Canonical collective names, from kernel names or `Collective name` args (first match wins).
COLLECTIVES: tuple[tuple[str, str], ...] = (
    ("AllReduce", r"all_?reduce|allreduce|cross_device_reduce|one_shot_all|two_shot_all|custom_ar|"
                  r"multimem|nvls"),
    ("ReduceScatter", r"reduce_?scatter"),
    ("AllGather", r"all_?gather"),
    ("AllToAll", r"all_?to_?all|alltoall|dispatch_kernel|combine_kernel|deep_?ep"),
    ("Broadcast", r"broadcast|bcast"),
    ("SendRecv", r"sendrecv|send_?recv"),
    ("Send", r"(?:^|[^a-z])send"),
    ("Recv", r"recv"),
    ("Barrier", r"barrier"),
    ("Reduce", r"reduce"),
    ("Gather", r"gather"),
    ("Scatter", r"scatter"),
)
_COLL_RES = [(c, re.compile(p, re.I)) for c, p in COLLECTIVES]
#: Point-to-point operations: only two ranks take part, so cross-rank arrival skew does not apply.
P2P = frozenset({"SendRecv", "Send", "Recv"})

#: Bytes per element of the dtype names PyTorch writes in `dtype` (lower-cased).
DTYPE_BYTES = {
    "float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2,
    "bfloat16": 2, "int": 4, "int32": 4, "long": 8, "int64": 8, "short": 2, "int16": 2,
    "char": 1, "int8": 1, "byte": 1, "uint8": 1, "bool": 1, "complexhalf": 4,
    "complexfloat": 8, "complexdouble": 16, "uint16": 2, "uint32": 4, "uint64": 8,
}

def canonical_collective(name: str | None) -> str | None:
    """AllReduce, AllGather, ... from a kernel name or a `Collective name` arg; None if unknown."""
    if not name:
        return None
    for canon, rx in _COLL_RES:
        if rx.search(name):
            return canon
    return None


def collective_kind(coll: str) -> str:
    return "p2p" if coll in P2P else "unknown" if coll == "Generic" else "collective"


def dtype_bytes(dtype: Any) -> int:
    if not isinstance(dtype, str):
        return -1
    d = dtype.strip().lower().removeprefix("torch.")
    if d.startswith("float8") or d.startswith("fp8"):
        return 1
    return DTYPE_BYTES.get(d, -1)


def collective_label(name: str) -> str:
    """The canonical collective of a kernel name, else the name up to its arguments
    (`ncclDevKernel_Generic(...)` -> `ncclDevKernel_Generic`: NCCL 2.19+ generic kernels do not
    name the collective)."""
    return canonical_collective(name) or name.split("(", 1)[0].strip()[:80] or "communication"


#: CPU ops / NVTX ranges that issue a collective and name it: c10d ops (`c10d::alltoall_`,
#: `c10d::_allgather_base_`), ProcessGroupNCCL's `nccl:all_to_all`, DeepSpeed/Megatron wrappers.
_ISSUING_OP = re.compile(r"^(?:c10d::|c10d_functional::|_c10d_functional::|nccl:|gloo:|ProcessGroup\w*::)", re.I)


def issuing_collective(tl, launch: np.ndarray, t: np.ndarray, canon) -> list[str | None]:
    """Per communication kernel (its launch row and launch time), the collective named by the
    innermost enclosing c10d / nccl op or range on the launching thread (canon maps a name to
    AllReduce, AllToAll, ...), or None."""
    out: list[str | None] = [None] * len(launch)
    r = tl.ranges
    if len(r) == 0 or not (launch >= 0).any():
        return out
    sel = np.flatnonzero(name_mask(r["name"], _ISSUING_OP.match))
    o_coll = [canon(str(n).split(",")[0].split("::")[-1]) for n in labels_at(r["name"], sel)]
    named = [i for i, c in enumerate(o_coll) if c]
    if not named:
        return out
    rows = sel[named]
    api = tl.api_calls
    q = np.flatnonzero(launch >= 0)
    a = launch[q]
    best = intervals.best_enclosing(
        api["pid"].to_numpy()[a] * 1_000_003 + api["tid"].to_numpy()[a], t[q],
        r["pid"].to_numpy()[rows] * 1_000_003 + r["tid"].to_numpy()[rows],
        r["start"].to_numpy()[rows], r["end"].to_numpy()[rows], r["depth"].to_numpy()[rows])
    for i, b in zip(q[best >= 0], best[best >= 0]):  # loop over kernels with an issuing op
        out[i] = o_coll[named[b]]
    return out


def kernel_collectives(tl, rows: np.ndarray) -> np.ndarray:
    """The collective of each communication kernel (rows of tl.kernels): the op that issued it
    (c10d / nccl ops), else its kernel name (collective_label)."""
    names = labels_at(tl.kernels["name"], rows)
    labels = {n: collective_label(n) for n in set(names)}
    launch = tl.launch_index("kernels")[rows]
    t = tl.api_calls["start"].to_numpy()[np.clip(launch, 0, None)] if len(tl.api_calls) else launch
    by_op = issuing_collective(tl, launch, t, canonical_collective)
    return np.array([op or labels[n] for op, n in zip(by_op, names)], dtype=object)


def next_compute_after(tl, device: int, t: int, bs: np.ndarray) -> tuple[str, int] | None:
    """The compute kernel that waited for a collective ending at t: (name, start) of the first
    kernel on the device that starts the next compute block (bs: the starts of the device's
    merged compute kernels), None when no compute follows."""
    j = np.searchsorted(bs, t, side="left")
    if j >= len(bs):
        return None
    k = tl.kernels
    on = (k["device"].to_numpy() == device) & (k["start"].to_numpy() == bs[j])
    return (str(labels_at(k["name"], np.flatnonzero(on)[:1])[0]) if on.any() else "?"), int(bs[j])

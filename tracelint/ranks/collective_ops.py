"""The collective op that issued a communication kernel: NCCL implements all_to_all with
SendRecv kernels and all_gather with Broadcast ones on some versions, so the kernel name alone
would call a collective point-to-point and leave it out of cross-rank matching."""
from __future__ import annotations

import re

import numpy as np

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
    names = r["name"].astype(str)
    sel = names.str.match(_ISSUING_OP.pattern, case=False).to_numpy()
    if not sel.any():
        return out
    ops = r[sel]
    o_key = ops["pid"].to_numpy() * 1_000_003 + ops["tid"].to_numpy()
    o_s, o_e, o_d = ops["start"].to_numpy(), ops["end"].to_numpy(), ops["depth"].to_numpy()
    o_coll = [canon(n.split(",")[0].split("::")[-1]) for n in ops["name"].astype(str)]
    api = tl.api_calls
    a_key = api["pid"].to_numpy() * 1_000_003 + api["tid"].to_numpy()
    for i in np.flatnonzero(launch >= 0):  # loop over communication kernels
        hit = np.flatnonzero((o_key == a_key[launch[i]]) & (o_s <= t[i]) & (o_e >= t[i]))
        hit = [h for h in hit[np.argsort(-o_d[hit], kind="stable")] if o_coll[h]]
        if hit:
            out[i] = o_coll[hit[0]]
    return out

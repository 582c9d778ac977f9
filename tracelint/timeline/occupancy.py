"""Theoretical occupancy per kernel launch, with every per-SM limit together (registers,
shared memory, threads, resident blocks), so a rule can tell which one binds.

Per-SM limits come from the trace's device record when it has them (Kineto
`deviceProperties`, nsys `TARGET_INFO_GPU`), else from the small per-compute-capability
table below. When the GPU is unknown, registers count as binding only if they bind on every
architecture in the table: a register cap is never reported on a guess.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .codes import row_codes

#: Per compute capability: (max resident warps per SM, max resident blocks per SM, max shared
#: memory per SM in KiB), from the CUDA programming guide's compute-capability table. Registers
#: per SM are 64 Ki on every listed architecture; allocation is per warp in units of 256
#: registers; from 8.0 on the driver reserves 1 KiB of shared memory per block.
SM_LIMITS = {
    "5.0": (64, 32, 64), "5.2": (64, 32, 96), "5.3": (64, 32, 64), "6.0": (64, 32, 64),
    "6.1": (64, 32, 96), "6.2": (64, 32, 64), "7.0": (64, 32, 96), "7.2": (64, 32, 96),
    "7.5": (32, 16, 64), "8.0": (64, 32, 164), "8.6": (48, 16, 100), "8.7": (48, 16, 164),
    "8.9": (48, 24, 100), "9.0": (64, 32, 228), "10.0": (64, 32, 228), "10.3": (64, 32, 228),
    "11.0": (48, 32, 228), "12.0": (48, 32, 100), "12.1": (48, 32, 100),
}
DEFAULT_LIMITS = (64, 32)      # warps, blocks per SM assumed (and said) for an unknown GPU
REGS_PER_SM = 65536
REG_ALLOC_UNIT = 256
WARP = 32
_BIG = np.iinfo(np.int64).max


def sm_limits(meta, device: int) -> list[tuple[int, int, int, int, int, str]]:
    """Candidate (registers, warps, blocks, shared memory bytes (0: unknown), reserved smem per
    block, source) per SM for a device: one entry when the GPU is known, one per table
    architecture when not, none for AMD (the NVIDIA register model does not apply)."""
    d = meta.device(int(device)) if meta is not None else None
    if d is not None and d.vendor == "amd":
        return []
    cc = d.compute_capability if d is not None else None
    reserved = 1024 if cc and _cc_at_least(cc, 8) else 0
    rec = dict(getattr(d, "sm_limits", None) or {}) if d is not None else {}
    if cc in SM_LIMITS or rec:
        w, b, smem_kib = SM_LIMITS.get(cc, (*DEFAULT_LIMITS, 0))
        regs = int(rec.get("registers", REGS_PER_SM))
        w, b = int(rec.get("warps", w)), int(rec.get("blocks", b))
        smem = int(rec.get("shared_memory", smem_kib * 1024))
        src = "the trace's per-SM limits" if rec else f"compute capability {cc} limits"
        return [(regs, w, b, smem, reserved, src)]
    note = ("GPU model unknown: assumed 65536 registers, 64 warps and 32 blocks per SM; "
            "registers count as the limit only where they are on every architecture")
    return [(REGS_PER_SM, w, b, s * 1024, 1024 if _cc_at_least(c, 8) else 0, note)
            for c, (w, b, s) in SM_LIMITS.items()]


def _cc_at_least(cc: str, major: int) -> bool:
    try:
        return int(str(cc).split(".")[0]) >= major
    except ValueError:
        return False


def occupancy(k: pd.DataFrame, meta) -> dict[str, np.ndarray]:
    """Register-limited and theoretical occupancy per launch configuration, vectorised.

    Computed once per distinct configuration (device, block shape, registers, shared memory),
    not per launch: 10 M launches hold a few hundred, and a dozen per-launch temporaries were
    1.4 GB of TL007's peak. "config" maps each kernel row to its configuration; every other
    array has one value per configuration.

    reg_binding is True where registers alone set the theoretical occupancy: fewer registers
    would let more blocks reside (a tie with shared memory, threads or the block limit is not
    binding). Rows without registers or block size get occupancy 1 and reg_binding False.
    """
    smem = np.maximum(k["static_smem"].to_numpy(), 0) + np.maximum(k["dynamic_smem"].to_numpy(), 0)
    columns = (k["device"].to_numpy(), k["block_x"].to_numpy(), k["block_y"].to_numpy(),
               k["block_z"].to_numpy(), k["registers_per_thread"].to_numpy(), smem)
    config, first = row_codes(*columns)
    dev, bx, by, bz, regs, smem = (np.asarray(c)[first] for c in columns)
    n = len(first)
    valid_block = (bx > 0) & (by > 0) & (bz > 0)
    threads = np.where(valid_block, bx * by * bz, 0)
    warps = np.maximum(-(-threads // WARP), 1)
    reg_occ, theo = np.ones(n), np.ones(n)
    binding = np.zeros(n, dtype=bool)
    src = np.full(n, "", dtype=object)
    for d in np.unique(dev):  # loop over devices
        sel = dev == d
        cands = sm_limits(meta, int(d))
        if not cands:
            src[sel] = "AMD GPU: the NVIDIA register model does not apply"
            continue
        binds_all = np.ones(int(sel.sum()), dtype=bool)
        for rs, w, b, sm, res, _ in cands:  # loop over candidate architectures
            binds_all &= _one(threads[sel], warps[sel], regs[sel], smem[sel], valid_block[sel],
                              rs, w, b, sm, res)[2]
        # The figures shown: the known GPU's, else the assumed defaults without shared memory.
        rs, w, b, sm, res, note = cands[0] if len(cands) == 1 else (REGS_PER_SM, *DEFAULT_LIMITS, 0, 0,
                                                                     cands[0][5])
        reg_occ[sel], theo[sel], _ = _one(threads[sel], warps[sel], regs[sel], smem[sel],
                                          valid_block[sel], rs, w, b, sm, res)
        src[sel] = note
        binding[sel] = binds_all
    return {"config": config, "threads": threads, "reg_occupancy": reg_occ, "theoretical": theo,
            "reg_binding": binding, "limits_source": src}


def _one(threads, warps, regs, smem, valid_block, regs_sm, max_w, max_b, smem_sm, reserved):
    known = valid_block & (regs > 0) & (max_w > 0)
    regs_warp = -(-np.maximum(regs, 0) * WARP // REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    by_regs = np.where(known, (regs_sm // np.maximum(regs_warp, 1)) // warps, 0)
    by_warps = max(max_w, 1) // warps
    by_smem = np.where((smem_sm > 0) & (smem > 0), smem_sm // np.maximum(smem + reserved, 1), _BIG)
    other = np.minimum(np.minimum(by_warps, max_b), by_smem)
    active = np.minimum(by_regs, other)
    mw = max(max_w, 1)
    reg_occ = np.where(known, np.minimum(by_regs * warps, mw) / mw, 1.0)
    theo = np.where(known, active * warps / mw, 1.0)
    return reg_occ, theo, known & (by_regs < other)

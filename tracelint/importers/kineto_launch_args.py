"""Launch facts that ROCm traces write on the runtime call instead of the GPU row: a kernel's
grid, block and shared memory, a copy's size. Kineto's roctracer logger puts them in the args
of hipLaunchKernel / hipMemcpy* (the GPU rows have only device, stream and correlation), so
without this an AMD trace's kernels have no launch configuration and its copies no bytes
("0 bytes copied", no bandwidth). CUDA traces carry them on the GPU rows: their calls are not
even read (kineto_columns reads HIP calls only, chosen by name).

hipExtModuleLaunchKernel and hipHccModuleLaunchKernel take the global work size in work-items
(HIP's signature: globalWorkSizeX, ..., localWorkSizeX, ...), and the logger writes it as the
"grid": divided here by the block, as rocprofiler does for its dispatch records, so that grid
means blocks for every row. A value already smaller than its block is left as it is.
"""
from __future__ import annotations

from operator import attrgetter

import numpy as np

from .kineto_values import dim3, int_col

_GRID, _SIZE, _BYTES = attrgetter("grid"), attrgetter("size"), attrgetter("nbytes")
#: Runtime calls whose "grid" is a global work size in work-items, not a block count.
WORK_ITEM_GRID = ("hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel")
#: Rows of a facts block: correlation, grid x y z (as the call wrote it), block x y z, shared
#: memory, bytes, and 1 where the grid is in work-items.
GRID, BLOCK, SMEM, BYTES, IN_ITEMS = 1, 4, 7, 8, 9


def collect(correlation: np.ndarray, names: list[str], args: list) -> np.ndarray | None:
    """The facts of the HIP calls (kineto_columns picks them by name) that carry a grid or a
    size, or None. ROCm 6.2 writes a copy's size as "size", 6.4 as "bytes"."""
    grids, sizes, nbytes = (list(map(f, args)) for f in (_GRID, _SIZE, _BYTES))
    n = len(args)
    if grids.count(None) == n and sizes.count(-1) == n and nbytes.count(-1) == n:
        return None
    keep = np.flatnonzero([g is not None or s != -1 or b != -1
                           for g, s, b in zip(grids, sizes, nbytes)])
    kept = [args[i] for i in keep]
    size = int_col(kept, "size")
    size = np.where(size >= 0, size, int_col(kept, "nbytes"))
    in_items = np.isin(np.asarray([names[i] for i in keep], dtype=object), WORK_ITEM_GRID)
    return np.vstack([correlation[keep], dim3([a.grid for a in kept]).T,
                      dim3([a.block for a in kept]).T, int_col(kept, "smem"), size, in_items])


def fill(cols: dict, blocks: list[np.ndarray]) -> None:
    """Kernels' launch configuration and copies' bytes, where their own rows lack them, from
    the runtime call of the same correlation id (one that no other call shares); a grid in
    work-items (the call's, or the same value copied onto the kernel row) becomes blocks."""
    if not blocks:
        return
    facts = np.hstack(blocks)
    corr = facts[0]
    order = np.argsort(corr, kind="stable")
    facts, corr = facts[:, order], corr[order]
    unique = np.ones(len(corr), bool)
    unique[1:] = corr[1:] != corr[:-1]
    unique[:-1] &= corr[:-1] != corr[1:]
    facts, corr = facts[:, unique], corr[unique]
    if not len(corr):
        return
    for table in ("kernels", "copies"):
        c = cols.get(table)
        if c is None:
            continue
        k = np.minimum(np.searchsorted(corr, c["correlation"]), len(corr) - 1)
        found = corr[k] == c["correlation"]
        f = facts[:, k]
        if table == "copies":
            _take(c, "bytes", f[BYTES], found)
            continue
        dims = [f"{a}_{x}" for a in ("grid", "block") for x in "xyz"]
        for j, col in enumerate(dims + ["static_smem"]):
            _take(c, col, f[GRID + j], found)
        raw = found & (f[IN_ITEMS] == 1)
        for j, x in enumerate("xyz"):
            g, b = c[f"grid_{x}"], c[f"block_{x}"]
            raw &= (g == f[GRID + j]) & (b > 0) & (g >= b)
        for x in "xyz" if raw.any() else ():
            g, b = c[f"grid_{x}"], c[f"block_{x}"]
            c[f"grid_{x}"] = np.where(raw, -(-g // np.maximum(b, 1)), g)


def _take(c: dict, col: str, value: np.ndarray, found: np.ndarray) -> None:
    """c[col] from value where the row lacks it (< 0) and the call has it."""
    if col in c:
        take = found & (c[col] < 0) & (value >= 0)
        if take.any():
            c[col] = np.where(take, value, c[col])

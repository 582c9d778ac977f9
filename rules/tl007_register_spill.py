"""TL007 register-spill."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelint.engine.context import CAPTURE_HINTS
from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.rule import Rule, option



@dataclass(frozen=True)
class Options:
    max_occupancy: float = option(0.25, "Report kernels whose registers cap theoretical occupancy below this fraction of the SM's warps.")
    min_share: float = option(0.02, "Only kernels taking at least this share of total kernel time are reported.")
    regcap_skip_classes: tuple = option(("gemm", "attention", "communication"),
                                        "Kernel classes tuned for low occupancy (tensor-core GEMMs, flash attention, "
                                        "collectives): a register cap alone is not reported for them; spills still are.")


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
DEFAULT_LIMITS = (64, 32, 0)   # 0: shared memory per SM unknown, not used as a limit
REGS_PER_SM = 65536
REG_ALLOC_UNIT = 256
WARP = 32


class RegisterSpill(Rule):
    """Kernels that spill registers to local memory, or whose register use caps occupancy.

    What it detects: kernels taking at least `min_share` of total kernel time that either spill
    (local memory per thread > 0, recorded by Nsight Systems) or whose registers per thread ×
    threads per block leave room for so few resident warps that theoretical occupancy falls below
    `max_occupancy`, with registers as the binding limit (not threads, blocks or shared memory).
    Occupancy follows the CUDA occupancy calculator: registers are allocated per warp in units of
    256, from 64 Ki registers per SM, against the architecture's resident-warp and resident-block
    limits (by compute capability; 64 warps and 32 blocks per SM are assumed, and said, when the
    trace does not name the GPU). Kernel classes tuned for low occupancy (`regcap_skip_classes`:
    tensor-core GEMMs, flash attention, collectives) are reported only when they spill.
    Why it hurts: over-fusion raises register pressure. Past the register budget the compiler
    spills to local memory, which lives in DRAM behind the L1/L2 caches, so a fused kernel that
    was meant to save memory traffic adds its own; short of spilling, a high register count cuts
    the number of resident warps, so the SM cannot hide memory latency and bandwidth-bound code
    slows down. The test of a fusion is whether it removed expensive data movement.
    Evidence: kernel: registers per thread, threads per block, local memory per thread, shared
    memory, register-limited and theoretical occupancy, the kernel's time and share (launch
    configuration "not captured" when the trace lacks it, e.g. AMD Kineto traces);
    microarch: achieved occupancy / warps in flight from GPU metrics or Nsight Compute, which
    should be low; system: the kernel's share of GPU time and launch count.
    Fix: split the fused kernel where its intermediate does not need to stay on chip, cap
    registers (`__launch_bounds__`, `-maxrregcount`, Triton `num_warps`/`num_stages`, smaller tile
    or block sizes), move large per-thread arrays to shared memory, and re-check with Nsight
    Compute (`launch__registers_per_thread`, `sm__warps_active`, local load/store traffic) that
    the change removed spills without losing the fusion's data-movement saving.
    Counter-example (when it does not apply): kernels designed for low occupancy with high
    instruction-level parallelism (cuBLAS / CUTLASS tensor-core GEMMs, flash attention) run well
    at 12–25 % occupancy; local memory used for an indexed per-thread array rather than spills;
    a kernel too small in share for its occupancy to matter end to end.
    """

    id = "TL007"
    slug = "register-spill"
    title = "Register spills or register-capped occupancy"
    severity = Severity.WARNING
    groups = frozenset({"kernel", "fusion"})
    layers = frozenset({Layer.KERNEL, Layer.MICROARCH, Layer.SYSTEM})
    needs = frozenset({"kernels"})
    Options = Options

    def fix_edits(self, finding, ctx):
        return None, "the speed-up of a kernel without spills is not in the trace; try `tracelint whatif --scale KERNEL=0.8`"

    def check(self, ctx):
        tl, opt = ctx.tl, self.options
        k = tl.kernels
        if len(k) == 0:
            return
        dur = (k["end"] - k["start"]).to_numpy()
        total = int(dur.sum())
        if total <= 0:
            return
        occ = occupancy(k, tl.meta)
        regs = k["registers_per_thread"].to_numpy()
        local = k["local_mem_per_thread"].to_numpy()
        spill = local > 0
        cls = np.asarray(tl.kernel_class, dtype=object)
        skip = np.isin(cls, list(opt.regcap_skip_classes))
        regcap = occ["reg_binding"] & (occ["theoretical"] < opt.max_occupancy) & ~skip
        flagged = spill | regcap
        if not flagged.any():
            return
        df = pd.DataFrame({"name": k["name"].astype(str).to_numpy(), "dur": dur, "flag": flagged,
                           "spill": spill, "regcap": regcap})
        by = df[df["flag"]].groupby("name", sort=False)["dur"].sum()
        by = by[by >= opt.min_share * total].sort_values(ascending=False)
        local_captured = bool((local >= 0).any())
        for name, flagged_ns in by.items():  # loop over reported kernel names
            rows = np.flatnonzero((df["name"].to_numpy() == name) & flagged)
            yield self._finding(ctx, name, rows, int(flagged_ns), total, dur, occ, regs, local,
                                spill, local_captured)

    def _finding(self, ctx, name, rows, flagged_ns, total, dur, occ, regs, local, spill, local_captured):
        tl = ctx.tl
        k = tl.kernels
        rep = int(rows[np.argmax(dur[rows])])
        is_spill = bool(spill[rows].any())
        n = len(rows)
        dev = int(k["device"].iat[rep])
        li = ctx.launch_index("kernels")[rep]
        where = ctx.where_for_api(int(li)) if li >= 0 else Where(rank=tl.meta.rank)
        where.device, where.stream, where.kernel = dev, int(k["stream"].iat[rep]), str(name)
        where.start_ns, where.end_ns = int(k["start"].iat[rep]), int(k["end"].iat[rep])
        threads = int(occ["threads"][rep])
        r, lm = int(regs[rep]), int(local[rep])
        smem = int(max(k["static_smem"].iat[rep], 0) + max(k["dynamic_smem"].iat[rep], 0))
        reg_occ, theo = float(occ["reg_occupancy"][rep]), float(occ["theoretical"][rep])
        limits_note = str(occ["limits_source"][rep])
        share = flagged_ns / total
        facts = dict(registers_per_thread=Measure(r, "count"), threads_per_block=Measure(threads, "count"),
                     shared_mem_per_block=Measure(smem, "bytes"),
                     register_limited_occupancy=Measure(round(reg_occ, 4), "ratio"),
                     theoretical_occupancy=Measure(round(theo, 4), "ratio"),
                     kernel_time_ns=Measure(flagged_ns, "ns"), share=Measure(round(share, 4), "ratio"))
        if lm >= 0:
            facts["local_mem_per_thread"] = Measure(lm, "bytes")
        spill_txt = (f"{lm} B of local memory per thread (spills)" if lm > 0 else
                     "no local memory" if lm == 0 else
                     "local memory per thread not recorded by this trace format (nsys records it)")
        if r < 0:
            kernel = Evidence.not_captured(
                f"`{name}` spills ({lm} B local memory per thread) but the trace has no register "
                "count or launch configuration for it.", CAPTURE_HINTS["launch_config"])
        else:
            kernel = Evidence.measured(
                f"{r} registers/thread × {threads} threads/block: registers alone allow "
                f"{reg_occ:.1%} occupancy, theoretical {theo:.1%} ({limits_note}); {spill_txt}; "
                f"{smem} B shared memory per block.", **facts)
        system = Evidence.measured(
            f"{n} launches of `{name}` take {flagged_ns / 1e6:.3f} ms, {share:.1%} of all kernel time.",
            launches=Measure(n, "count"), kernel_time_ns=Measure(flagged_ns, "ns"),
            share=Measure(round(share, 4), "ratio"))
        micro = ctx.microarch(dev, int(k["start"].iat[rep]), int(k["end"].iat[rep]), kernels=[str(name)],
                              expect={r"occupancy|warps.?active|warps? in flight|Warp Occupancy": "low"})
        what = (f"spills {lm} B/thread to local memory" if is_spill and lm > 0 else "spills to local memory") \
            if is_spill else f"is register-capped at {theo:.1%} occupancy ({r} regs/thread)"
        if is_spill and r >= 0:
            what += f" ({r} regs/thread, {theo:.1%} theoretical occupancy)"
        return self.finding(
            ctx,
            message=f"`{name}` {what}; it takes {share:.1%} of kernel time ({flagged_ns / 1e6:.2f} ms)",
            impact_ns=flagged_ns, where=where, occurrences=n,
            windows=[(int(k["start"].iat[i]), int(k["end"].iat[i]))
                     for i in rows[np.argsort(-dur[rows], kind="stable")[:5]]],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            metrics={"kernel_time_ns": Measure(flagged_ns, "ns"),
                     "theoretical_occupancy": Measure(round(theo, 4), "ratio"),
                     "registers_per_thread": Measure(r, "count"),
                     "local_mem_per_thread": Measure(lm, "bytes")},
            key=f"{'spill' if is_spill else 'regcap'}|{name}")


def sm_limits(meta, device: int) -> tuple[int, int, int, int, int, str]:
    """(registers per SM, max warps per SM, max blocks per SM, shared memory per SM in bytes
    (0: unknown), shared memory reserved per block, where the limits came from)."""
    d = meta.device(int(device)) if meta is not None else None
    if d is not None and d.vendor == "amd":
        return -1, -1, -1, 0, 0, "AMD GPU: the NVIDIA register model does not apply"
    cc = d.compute_capability if d is not None else None
    if cc and cc in SM_LIMITS:
        w, b, smem_kib = SM_LIMITS[cc]
        reserved = 1024 if float(cc) >= 8.0 else 0
        return REGS_PER_SM, w, b, smem_kib * 1024, reserved, f"compute capability {cc} limits"
    w, b, _ = DEFAULT_LIMITS
    return (REGS_PER_SM, w, b, 0, 0,
            "GPU model unknown: assumed 65536 registers, 64 warps and 32 blocks per SM")


def occupancy(k: pd.DataFrame, meta) -> dict[str, np.ndarray]:
    """Register-limited and theoretical occupancy per kernel row, vectorised.

    reg_binding is True where registers are (one of) the limits that set the theoretical
    occupancy; rows without registers or block size get occupancy 1 and reg_binding False.
    """
    n = len(k)
    threads = (k["block_x"].to_numpy() * k["block_y"].to_numpy() * k["block_z"].to_numpy())
    valid_block = (k["block_x"].to_numpy() > 0) & (k["block_y"].to_numpy() > 0) & (k["block_z"].to_numpy() > 0)
    threads = np.where(valid_block, threads, 0)
    regs = k["registers_per_thread"].to_numpy()
    dev = k["device"].to_numpy()
    regs_sm = np.full(n, REGS_PER_SM, dtype=np.int64)
    max_w = np.full(n, DEFAULT_LIMITS[0], dtype=np.int64)
    max_b = np.full(n, DEFAULT_LIMITS[1], dtype=np.int64)
    smem_sm = np.zeros(n, dtype=np.int64)
    reserved = np.zeros(n, dtype=np.int64)
    src = np.full(n, "", dtype=object)
    for d in np.unique(dev):  # loop over devices
        rs, w, b, sm, res, note = sm_limits(meta, int(d))
        sel = dev == d
        regs_sm[sel], max_w[sel], max_b[sel], src[sel] = rs, w, b, note
        smem_sm[sel], reserved[sel] = sm, res
    known = valid_block & (regs > 0) & (max_w > 0)
    warps = np.maximum(-(-threads // WARP), 1)
    regs_warp = -(-np.maximum(regs, 0) * WARP // REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    by_regs = np.where(known, (regs_sm // np.maximum(regs_warp, 1)) // warps, 0)
    by_warps = np.maximum(max_w, 1) // warps
    smem = np.maximum(k["static_smem"].to_numpy(), 0) + np.maximum(k["dynamic_smem"].to_numpy(), 0)
    by_smem = np.where((smem_sm > 0) & (smem > 0), smem_sm // np.maximum(smem + reserved, 1),
                       np.iinfo(np.int64).max)
    other = np.minimum(np.minimum(by_warps, max_b), by_smem)
    active = np.minimum(by_regs, other)
    mw = np.maximum(max_w, 1)
    reg_occ = np.where(known, np.minimum(by_regs * warps, mw) / mw, 1.0)
    theo = np.where(known, active * warps / mw, 1.0)
    return {"threads": threads, "reg_occupancy": reg_occ, "theoretical": theo,
            "reg_binding": known & (by_regs <= other), "limits_source": src}

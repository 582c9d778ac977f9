"""TL007 register-spill."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelint.engine.finding import Evidence, Layer, Measure, Severity
from tracelint.engine.rule import Rule, option
from tracelint.timeline import classify
from tracelint.timeline.codes import largest_first
from tracelint.timeline.occupancy import occupancy


@dataclass(frozen=True)
class Options:
    max_occupancy: float = option(0.25, "Report kernels whose registers cap theoretical occupancy below this fraction of the SM's warps.")
    min_share: float = option(0.02, "Only kernels taking at least this share of total kernel time are reported.")
    regcap_skip_classes: tuple = option(("gemm", "attention", "communication"),
                                        "Kernel classes tuned for low occupancy (tensor-core GEMMs, flash attention, "
                                        "collectives): a register cap alone is not reported for them; spills still are.")


class RegisterSpill(Rule):
    """Kernels that spill registers to local memory, or whose register use caps occupancy.

    What it detects: kernels taking at least `min_share` of total kernel time that either spill
    (local memory per thread > 0, recorded by Nsight Systems) or whose registers per thread ×
    threads per block leave room for so few resident warps that theoretical occupancy falls below
    `max_occupancy`, with registers as the binding limit: fewer registers would let more blocks
    reside, which a tie with shared memory, threads or the resident-block limit rules out.
    Occupancy follows the CUDA occupancy calculator: registers are allocated per warp in units of
    256, against the per-SM registers, warps, blocks and shared memory the trace records, else
    the limits of its compute capability; when the trace does not name the GPU, registers must
    bind on every architecture (tracelint.timeline.occupancy). Kernel classes tuned for low occupancy (`regcap_skip_classes`:
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
        skip = classify.in_labels(tl.kernel_class, opt.regcap_skip_classes)
        capped = occ["reg_binding"] & (occ["theoretical"] < opt.max_occupancy)   # per config
        regcap = capped[occ["config"]] & ~skip
        codes, labels = np.asarray(k["name"].cat.codes), k["name"].cat.categories
        flagged = (spill | regcap) & (codes >= 0)
        if not flagged.any():
            return
        # flagged time per kernel name, names in order of first flagged launch (a groupby
        # without sorting), on the name codes: no string per launch
        f_codes = codes[flagged]
        uniq, first = np.unique(f_codes, return_index=True)
        ns = np.zeros(len(labels), np.int64)
        np.add.at(ns, f_codes, dur[flagged])
        order = uniq[np.argsort(first, kind="stable")]
        by = pd.Series(ns[order], index=pd.Index(np.asarray(labels, dtype=object)[order]))
        by = by[by >= opt.min_share * total].sort_values(ascending=False)
        for name, flagged_ns in by.items():  # loop over reported kernel names
            rows = np.flatnonzero((codes == labels.get_loc(name)) & flagged)
            yield self._finding(ctx, name, rows, int(flagged_ns), total, dur, occ, regs, local, spill)

    def _finding(self, ctx, name, rows, flagged_ns, total, dur, occ, regs, local, spill):
        k = ctx.tl.kernels
        rep = int(rows[np.argmax(dur[rows])])
        is_spill = bool(spill[rows].any())
        n = len(rows)
        where = ctx.where_for_kernel(rep)
        c = int(occ["config"][rep])                  # the launch's configuration
        threads = int(occ["threads"][c])
        r, lm = int(regs[rep]), int(local[rep])
        smem = int(max(k["static_smem"].iat[rep], 0) + max(k["dynamic_smem"].iat[rep], 0))
        reg_occ, theo = float(occ["reg_occupancy"][c]), float(occ["theoretical"][c])
        limits_note = str(occ["limits_source"][c])
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
                "count or launch configuration for it.", ctx.capture_hint("launch_config"))
        else:
            kernel = Evidence.measured(
                f"{r} registers/thread × {threads} threads/block: registers alone allow "
                f"{reg_occ:.1%} occupancy, theoretical {theo:.1%} ({limits_note}); {spill_txt}; "
                f"{smem} B shared memory per block.", **facts)
        system = Evidence.measured(
            f"{n} launches of `{name}` take {flagged_ns / 1e6:.3f} ms, {share:.1%} of all kernel time.",
            launches=Measure(n, "count"), kernel_time_ns=Measure(flagged_ns, "ns"),
            share=Measure(round(share, 4), "ratio"))
        micro = ctx.microarch(where.device, where.start_ns, where.end_ns, kernels=[str(name)],
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
                     for i in rows[largest_first(dur[rows], 5)]],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            metrics={"kernel_time_ns": Measure(flagged_ns, "ns"),
                     "theoretical_occupancy": Measure(round(theo, 4), "ratio"),
                     "registers_per_thread": Measure(r, "count"),
                     "local_mem_per_thread": Measure(lm, "bytes")},
            key=f"{'spill' if is_spill else 'regcap'}|{name}")

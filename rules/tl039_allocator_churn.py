"""TL039 allocator-churn."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelint.engine.finding import Evidence, Layer, Measure, Severity
from tracelint.engine.rule import Rule, option
from tracelint.timeline import classify
from tracelint.timeline.memory import DeviceMemory, device_memory

MIB = 1 << 20


@dataclass(frozen=True)
class Options:
    min_iterations: int = option(2, "Iterations the trace must have: with fewer nothing repeats, so no pattern 'every iteration' can be seen.")
    min_step_share: float = option(0.8, "Report a pattern only when it repeats in at least this share of the iterations.")
    min_release_bytes: int = option(64 * MIB, "Reserved memory given back to the driver and taken again within one iteration, at least this many bytes (per iteration, median).")
    min_transient_bytes: int = option(16 * MIB, "Uncached allocator (CPU): bytes one call site allocates and frees again within each iteration, at least this many (median over iterations).")
    top: int = option(3, "Report at most this many call sites per device.")
    sample: int = option(2000, "Python lines are looked up for at most this many allocations per call site (evenly sampled).")


class AllocatorChurn(Rule):
    """Memory given back and taken again every iteration: `empty_cache()` in the loop, or large temporaries re-allocated each step.

    What it detects: from the memory timeline (torch.profiler `profile_memory=True` `[memory]`
    events, or nsys `--cuda-memory-usage=true` driver-level events), per device and iteration:
    (1) *release*: reserved memory handed back to the driver and obtained again inside the same
    iteration, in at least `min_step_share` of the iterations and at least `min_release_bytes`
    per iteration (median) — `torch.cuda.empty_cache()` or a memory-pressure cycle in the loop;
    (2) *transient*: on an allocator without a cache (the CPU allocator: its reserved total is
    always 0), one call site (CPU op and Python line) that allocates and frees at least
    `min_transient_bytes` within each iteration — temporaries of the same shapes made anew
    every step. A caching allocator (CUDA) serves such temporaries from its cache without a
    driver call, so on a GPU only the release pattern is reported.
    Why it hurts: giving reserved memory back means cudaFree (which synchronises the device)
    and cudaMalloc again before the next allocation can be served, every step; fragments of
    the freed segments are lost to other sizes. An uncached allocator maps, faults in and
    zeroes fresh pages for each large temporary and unmaps them again when it is freed.
    Evidence: system: iterations, bytes released and re-obtained (or allocated and freed by the
    call site) per iteration, allocations per iteration; kernel: the allocator API calls inside
    the iterations and their host time when the trace has them (their GPU idle is TL005's
    allocator finding: not counted again here); microarch: not captured (allocator time, page
    faults: `perf stat -e page-faults`, or nsys `--cuda-memory-usage=true` with `--trace=osrt`).
    Fix: remove `torch.cuda.empty_cache()` from the loop (call it between phases if at all);
    bucket variable shapes and warm the allocator up with the largest one;
    `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` against fragmentation. For temporaries:
    allocate the buffers once outside the loop and write into them (`out=` arguments, in-place
    ops such as `mul_`, `add_`, `copy_`), or let `torch.compile` fuse the chain.
    Counter-example (when it does not apply): memory given back once between phases (after
    evaluation, before another model loads); allocations during warm-up, outside iterations;
    temporaries on a caching allocator whose reserved memory stays flat (cheap re-use); a trace
    with fewer than `min_iterations` iterations (nothing repeats to compare).
    """

    id = "TL039"
    slug = "allocator-churn"
    title = "Allocator churn every iteration"
    severity = Severity.WARNING
    groups = frozenset({"memory", "framework", "host"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    needs = frozenset({"memory"})
    uses_kernel_times = False
    Options = Options

    def check(self, ctx):
        tl = ctx.tl
        steps = _steps(tl)
        if len(steps) < max(self.options.min_iterations, 1):
            return
        iters = [int(s) for s in steps["step"]]
        for dm in device_memory(tl, steps):
            if dm.source == "driver" or dm.peak_reserved:
                f = self._release(ctx, dm, iters)
                if f is not None:
                    yield f
            elif dm.device_type == "cpu":        # no cache: every allocation is a fresh one
                yield from self._transient(ctx, dm, iters, steps)

    # ----- reserved memory released and re-obtained ------------------------------------------
    def _release(self, ctx, dm: DeviceMemory, iters: list[int]):
        opt = self.options
        by_step = {s.step: s for s in dm.steps}
        cycled = [by_step[i] for i in iters if i in by_step and by_step[i].reserved_released > 0
                  and by_step[i].reserved_grown > 0]
        released = np.array([min(s.reserved_released, s.reserved_grown) for s in cycled] +
                            [0] * (len(iters) - len(cycled)), np.int64)
        if len(cycled) < opt.min_step_share * len(iters) or np.median(released) < opt.min_release_bytes:
            return None
        m = ctx.tl.memory
        on = _device_rows(m, dm)
        rel = m[on & (m["bytes"] < 0)] if dm.source == "driver" else _drops(m[on])
        first = rel.iloc[0] if len(rel) else m[on].iloc[0]
        api_ns, api_n, api_names, free_row = _allocator_calls(ctx, iters)
        if free_row >= 0:        # the call that gave the memory back (empty_cache's cudaFree)
            where = ctx.where_for_api(free_row)
        else:
            where = ctx.where_for_host(int(first["pid"]), int(first["tid"]), int(first["ts"]))
        where.device = dm.device if dm.device >= 0 else None
        med = int(np.median(released))
        allocs = int(np.median([s.allocs for s in dm.steps])) if dm.steps else 0
        src = ("driver-level memory events (nsys)" if dm.source == "driver"
               else "the caching allocator's Total Reserved")
        system = Evidence.measured(
            f"In {len(cycled)} of {len(iters)} iterations {dm.label} gives reserved memory back "
            f"to the driver and obtains it again: {med / MIB:.1f} MiB per iteration (median), "
            f"from {src}; {allocs} allocations per iteration (median).",
            iterations=Measure(len(cycled), "count"), iterations_total=Measure(len(iters), "count"),
            released_per_iteration=Measure(med, "bytes"),
            allocations_per_iteration=Measure(allocs, "count"))
        if api_n:
            kernel = Evidence.measured(
                f"{api_n} allocator calls ({', '.join(api_names)}) inside the iterations hold the "
                f"host {api_ns / 1e6:.3f} ms; the GPU idle they cause is TL005's allocator finding "
                "and is not counted here.",
                calls=Measure(api_n, "count"), host_time_ns=Measure(api_ns, "ns"))
        else:
            kernel = Evidence.not_captured(
                "The trace has no allocator API calls (cudaMalloc / cudaFree) to time.",
                "torch.profiler with ProfilerActivity.CUDA, or nsys profile -t cuda")
        micro = Evidence.not_captured(
            "Time inside the driver's allocation and the device synchronisation of cudaFree are "
            "not in the trace.", "nsys profile -t cuda,osrt --cuda-memory-usage=true")
        op = str(first["op"]) or "(no op recorded)"
        return self.finding(
            ctx, message=(f"{dm.label}: reserved memory is released and re-obtained in "
                          f"{len(cycled)} of {len(iters)} iterations ({med / MIB:.1f} MiB per "
                          f"iteration{', near `' + op + '`' if str(first['op']) else ''}): "
                          "`empty_cache()` or allocator thrash in the loop"),
            impact_ns=api_ns, where=where, occurrences=len(cycled),
            windows=[(int(first["ts"]), int(first["ts"]))],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            fix=self.section("Fix").split(" For temporaries:")[0],
            metrics={"released_per_iteration": Measure(med, "bytes"),
                     "iterations": Measure(len(cycled), "count")},
            key=f"release|{dm.device_type}|{dm.device}")

    # ----- large temporaries on an uncached allocator -----------------------------------------
    def _transient(self, ctx, dm: DeviceMemory, iters: list[int], steps: pd.DataFrame):
        opt = self.options
        m = ctx.tl.memory
        pairs = _transient_pairs(m[_device_rows(m, dm)], steps)
        if len(pairs) == 0:
            return
        pairs["site"] = _sites(ctx, pairs, opt.sample)
        per = pairs.groupby(["site", "step"], sort=False)["bytes"].agg(["sum", "count"])
        found = []
        for site, g in per.groupby(level=0, sort=False):
            b = g["sum"].droplevel(0).reindex(iters, fill_value=0).to_numpy()
            n = g["count"].droplevel(0).reindex(iters, fill_value=0).to_numpy()
            if (b > 0).sum() < opt.min_step_share * len(iters) or np.median(b) < opt.min_transient_bytes:
                continue
            found.append((int(np.median(b)), site, int(np.median(n)), int((b > 0).sum())))
        for med, site, count, hit in sorted(found, key=lambda x: (-x[0], x[1]))[:opt.top]:
            rows = pairs[pairs["site"] == site]
            rep = rows.loc[rows["bytes"].idxmax()]
            ops = rows.groupby(rows["op"].astype(str))["bytes"].sum().sort_values(ascending=False)
            yield self._transient_finding(ctx, dm, rep, med, count, hit, len(iters), site,
                                          [o for o in ops.index[:4] if o])

    def _transient_finding(self, ctx, dm, rep, med, count, hit, n_iters, site, ops):
        where = ctx.where_for_host(int(rep["pid"]), int(rep["tid"]), int(rep["ts"]))
        at = f" {where.source_text()}" if where.file else ""
        via = f" in {', '.join(f'`{o}`' for o in ops)}" if ops else ""
        system = Evidence.measured(
            f"In {hit} of {n_iters} iterations the call site{via}{at} allocates and frees "
            f"{med / MIB:.1f} MiB within the iteration ({count} allocation(s), median per "
            f"iteration); the {dm.label} allocator caches nothing (its reserved total is 0), so "
            f"each is a fresh allocation"
            f"{'' if ctx.has_stacks else '; no Python stacks in the trace to name the line'}.",
            iterations=Measure(hit, "count"), iterations_total=Measure(n_iters, "count"),
            transient_bytes_per_iteration=Measure(med, "bytes"),
            allocations_per_iteration=Measure(count, "count"),
            largest_allocation=Measure(int(rep["bytes"]), "bytes"))
        kernel = Evidence.not_applicable(f"{dm.label} memory: no GPU work is involved")
        micro = Evidence.not_captured(
            "The time spent allocating, faulting in and zeroing the pages is not in the trace.",
            "perf stat -e page-faults,dTLB-load-misses -- python script.py")
        return self.finding(
            ctx, message=(f"{med / MIB:.1f} MiB of temporaries allocated and freed every "
                          f"iteration{via}{at} ({count} allocation(s) per iteration, {dm.label}); "
                          "allocate once outside the loop and write in place"),
            impact_ns=0, where=where, occurrences=hit, windows=[(int(rep["ts"]), int(rep["free_ts"]))],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            fix="Allocate" + self.section("Fix").split(" For temporaries: allocate", 1)[-1],
            metrics={"transient_bytes_per_iteration": Measure(med, "bytes"),
                     "allocations_per_iteration": Measure(count, "count")},
            key=f"transient|{dm.device_type}|{site}")

    def fix_edits(self, finding, ctx):
        if finding.key.startswith("release"):
            return None, ("no saving of its own: the allocator calls' GPU idle is TL005's "
                          "allocator finding (its projected saving), not counted twice")
        return None, ("none can be established: the trace records what was allocated, not what "
                      "allocating cost (page faults, zeroing)")


def _steps(tl) -> pd.DataFrame:
    r = tl.ranges
    return r[r["kind"] == "step"].sort_values("start") if len(r) else r


def _device_rows(m: pd.DataFrame, dm: DeviceMemory) -> np.ndarray:
    return ((m["device"].to_numpy() == dm.device)
            & (m["device_type"].astype(str).to_numpy() == dm.device_type))


def _drops(m: pd.DataFrame) -> pd.DataFrame:
    """Allocator events at which the reserved total is lower than at the event before."""
    res = m["total_reserved"].to_numpy()
    drop = np.r_[False, (res[1:] < res[:-1]) & (res[:-1] >= 0) & (res[1:] >= 0)]
    return m[drop]


def _transient_pairs(m: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Allocations freed again in the same iteration: alloc rows with the free's ts and step."""
    if len(m) == 0:
        return m.assign(step=[], free_ts=[])
    ts = m["ts"].to_numpy()
    ss, se = steps["start"].to_numpy(), steps["end"].to_numpy()
    i = np.searchsorted(ss, ts, side="right") - 1
    ok = (i >= 0) & (ts < se[np.clip(i, 0, None)])
    step = np.where(ok, steps["step"].to_numpy()[np.clip(i, 0, None)], -1)
    d = m.assign(step=step).sort_values(["addr", "ts"], kind="stable")
    nxt = d.shift(-1)
    pair = ((d["bytes"] > 0) & (nxt["bytes"] == -d["bytes"]) & (nxt["addr"] == d["addr"])
            & (d["step"] >= 0) & (nxt["step"] == d["step"]) & (d["addr"] >= 0))
    return d[pair.to_numpy()].assign(free_ts=nxt["ts"][pair].astype(np.int64).to_numpy())


def _sites(ctx, pairs: pd.DataFrame, sample: int) -> np.ndarray:
    """Call site per allocation: the Python line that issued it, else its op (the line is
    looked up for an even sample of each op's allocations; the rest take their op's most
    common line). One line is one place to fix, whatever ops it runs."""
    site = np.empty(len(pairs), dtype=object)
    ops = pairs["op"].astype(str).to_numpy()
    # plain ints from the columns (a row through .iloc built a Series per allocation)
    pid, tid, ts = (pairs[c].to_numpy(np.int64).tolist() for c in ("pid", "tid", "ts"))
    for op in pd.unique(ops):
        idx = np.flatnonzero(ops == op)
        pick = idx if len(idx) <= sample else idx[np.linspace(0, len(idx) - 1, sample).astype(int)]
        lines = {}
        for k in pick.tolist():
            f = ctx.python_frame_at(pid[k], tid[k], ts[k])
            lines[k] = f"{f[0]}:{f[1]}" if f else f"op {op}"
        common = pd.Series(list(lines.values())).mode().iat[0]
        site[idx] = [lines.get(k, common) for k in idx]
    return site


def _allocator_calls(ctx, iters: list[int]) -> tuple[int, int, list[str], int]:
    """(host ns, count, names, row of the first free call or -1) of synchronous allocator API
    calls inside iterations."""
    tl = ctx.tl
    api = tl.api_calls
    if len(api) == 0:
        return 0, 0, [], -1
    sel = classify.in_labels(tl.api_role, ("alloc",)) & ~classify.label_mask(
        api["name"], lambda n: "Async" in str(n))
    steps = _steps(tl)
    st = api["start"].to_numpy()
    i = np.searchsorted(steps["start"].to_numpy(), st, side="right") - 1
    inside = (i >= 0) & (st < steps["end"].to_numpy()[np.clip(i, 0, None)])
    sel &= inside
    dur = (api["end"].to_numpy() - st)[sel]
    frees = np.flatnonzero(sel & classify.label_mask(api["name"], lambda n: "Free" in str(n)))
    first_free = int(frees[np.argmin(st[frees])]) if len(frees) else -1
    names = set(api["name"].iloc[np.flatnonzero(sel)].astype(str))
    return int(dur.sum()), int(sel.sum()), sorted(names)[:4], first_free

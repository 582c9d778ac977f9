"""TL032 blocking-or-pageable-h2d."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelint.engine.finding import Evidence, Layer, Measure, Severity
from tracelint.engine.rule import Rule, duration_text, option
from tracelint.engine.runtime_advice import JAX_COPY_FIX
from tracelint.whatif.edits import NonBlocking
from tracelint.whatif.pinned import at_link_rate, pageable_caveat


@dataclass(frozen=True)
class Options:
    min_ns: int = option(100_000, "Report a call site when the host waits at least this long (ns) in its copies.")
    min_share: float = option(0.005, "... and at least this share of the trace span.")
    min_count: int = option(2, "Call sites with fewer blocking copies than this are one-offs and ignored.")
    top: int = option(5, "How many of the longest waits to list as windows.")
    link_gbps: float = option(0.0, "Peak host-link bandwidth (GB/s) pinned copies could reach, for the upper "
                                   "end of the fix's saving; 0: infer from the GPU name, else no upper end.")


class BlockingOrPageableH2D(Rule):
    """The host waits in host-to-device copies inside the step: pageable memory or non_blocking=False.

    What it detects: host-to-device copies issued inside iterations (ProfilerStep or NVTX step
    ranges; without iteration marks, those issued after the device's first kernel) during which
    the launching thread is blocked: in the copy call itself (a synchronous `cudaMemcpy`, or a
    `cudaMemcpyAsync` from pageable memory, which the driver stages through a bounce buffer and
    returns from only when most of the data has crossed) or in a stream / device synchronisation
    issued right after it on the same thread (`.to(device)` with non_blocking=False copies, then
    synchronises the stream). Grouped by device and call site (the Python line of the `.to()`
    when the trace has stacks, else the framework op that moved the tensor); one finding per
    site whose host wait reaches `min_ns` and `min_share` of the span. It names the cause per
    copy: pageable source memory (`pin_memory=False`, an unpinned tensor), `non_blocking=False`
    (a stream sync inside the moving op, or right after the copy call when the trace records no
    ops), an explicit synchronize call after the copy (a device sync, or a sync after the op), or
    a synchronous copy API. Tensors a factory op (`torch.zeros`, `arange`, ...) created on the
    CPU just before the move are left to TL033, whose fix removes the copy altogether.
    Relation to TL004 (unoverlapped-copy): TL004 measures the device side, copy time no compute
    overlaps, and its fix moves copies to a side stream and prefetches them. This rule measures
    the host side, time the launching thread cannot queue work because it waits for a copy, and
    names the host-side cause; its fix only lets the host run on (pinned + non_blocking), the
    copy keeps its place in stream order. A pageable copy on the compute stream usually shows in
    both; the report's combined saving (saving_all_ns) replays both fixes together, so the time
    they share is counted once. TL005 may report the stream synchronisation of a
    non_blocking=False copy as a hidden sync too; the combined replay counts that once as well.
    Why it hurts: while the thread waits it launches nothing, so the GPU drains its queue and
    idles after the copy until the host catches up; a stream synchronisation also waits for
    every kernel queued before the copy. Pageable copies run at a fraction of the link speed.
    Evidence: system: blocking copies, host time blocked in them (the copy calls that waited
    and the synchronisations after them), its share of the span, iterations affected, and per
    cause how many copies are pageable, followed by a sync, or synchronous by API; kernel: bytes
    moved, copy time on the GPU and achieved GB/s; microarch: not applicable (the cost is the
    host waiting, not the copy engine).
    Fix: follows what was measured: pageable source -> pin it (`DataLoader(...,
    pin_memory=True)`, or `tensor.pin_memory()` once for a data set kept in memory; outside
    PyTorch `cudaHostAlloc` / `cudaHostRegister`): from
    pageable memory even non_blocking=True stays synchronous; non_blocking=False -> `x.to(device,
    non_blocking=True)` (the kernels that use x still wait for the copy in stream order, the host
    does not); an explicit synchronize after the copy -> drop it (stream order already makes
    the consumers wait); a synchronous `cudaMemcpy` -> `cudaMemcpyAsync` on a stream from pinned memory. To
    also hide the copy under compute, prefetch the next batch on a side stream (TL004). The
    projected saving replays the copy calls and their syncs as asynchronous calls costing a
    typical launch; pinned copies are also faster on the bus, which is not counted.
    Counter-example (when it does not apply): copies outside the iterations (loading weights or
    a data set at start-up); non_blocking copies from pinned memory (the call returns at once);
    a copy whose result the host needs at once anyway (rare for host-to-device); sites that
    block the host for less than `min_ns`.
    """

    id = "TL032"
    slug = "blocking-or-pageable-h2d"
    title = "Host blocked in host-to-device copies (pageable memory, non_blocking=False)"
    severity = Severity.WARNING
    groups = frozenset({"framework", "copy", "host", "input"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL})
    needs = frozenset({"copies"})
    Options = Options

    def fix_edits(self, finding, ctx):
        """Fix: pinned source + non_blocking=True: the calls return at once, nothing waits."""
        u = self.once_per_context(ctx, self._candidates)
        rows = _site_rows(ctx, u, finding.key)
        if not rows:
            return None, "the copies of this finding were not found again"
        copies = u.loc[u["key"] == finding.key, "copy"].to_numpy(np.int64)
        return ([NonBlocking(api_rows=tuple(rows), cost_ns=ctx.launch_cost_ns)], pageable_caveat(finding),
                at_link_rate(ctx.tl, finding.where.device, copies, self.options.link_gbps))

    def check(self, ctx):
        u = self.once_per_context(ctx, self._candidates)
        if len(u) == 0:
            return
        span = max(ctx.span_ns, 1)
        for key, g in u.groupby("key", sort=True):
            blocked = int(g["blocked_ns"].sum())
            if len(g) < self.options.min_count or blocked < self.options.min_ns or \
                    blocked < self.options.min_share * span:
                continue
            yield self._finding(ctx, key, g, blocked, span)

    def _candidates(self, ctx):
        """Blocking uploads in scope, not TL033's, with their grouping key (once per context:
        check, then fix_edits per finding)."""
        tl = ctx.tl
        u = ctx.uploads
        if len(u) == 0:
            return u
        u = u[(u["blocked_ns"] > 0) & (u["factory"] < 0)]
        has_steps = bool(len(tl.ranges)) and bool((tl.ranges["kind"] == "step").any())
        if has_steps:
            u = u[u["in_step"].to_numpy()]
        else:      # no iteration marks: uploads before the device's first kernel are set-up
            k = tl.kernels
            first = k.groupby("device")["start"].min() if len(k) else None
            after = [first is not None and d in first.index and cs >= first[d]
                     for d, cs in zip(u["device"], u["call_start"])]
            u = u[np.asarray(after, dtype=bool)]
        if len(u) == 0:
            return u
        r = tl.ranges
        keys = []
        for pid, tid, t, mover, api_name in zip(u["pid"], u["tid"], u["call_start"], u["mover"], u["api_name"]):
            op = str(r["name"].iat[int(mover)]).split(",")[0] if mover >= 0 else str(api_name)
            keys.append(ctx.site_key(int(pid), int(tid), int(t), op))
        return u.assign(key=[f"device{d}/{k}" for d, k in zip(u["device"], keys)])

    def _finding(self, ctx, key, g, blocked, span):
        tl, opt = ctx.tl, self.options
        d = int(g["device"].iat[0])
        pageable = g["src_kind"].to_numpy() == "pageable"
        synced = g["sync"].to_numpy() >= 0
        # a sync inside the moving op is PyTorch's non_blocking=False; a device sync, or one after
        # a recorded op, is the program's own synchronize call
        device_sync = np.array([n.lower().find("devicesynchronize") >= 0 or n.lower().find("ctxsynchronize") >= 0
                                for n in g["sync_name"]], dtype=bool)
        explicit = synced & (device_sync | ((g["mover"].to_numpy() >= 0) & ~g["sync_in_op"].to_numpy()))
        nb_false = synced & ~explicit
        sync_api = np.array(["async" not in n.lower() for n in g["api_name"]], dtype=bool)
        steps = g.loc[g["step"] >= 0, "step"].nunique()
        worst = int(np.argmax(g["blocked_ns"].to_numpy()))
        row = g.iloc[worst]
        end = int(max(row["call_end"], row["sync_end"]))
        where = ctx.where_for_api(int(row["api"]), start_ns=int(row["call_start"]), end_ns=end)
        where.device, where.stream, where.kernel = d, int(row["stream"]), str(tl.copies["name"].iat[int(row["copy"])])
        # copies issued inside a framework op (`aten::to`) are PyTorch's: name its knobs; a
        # CUDA C / OpenMP / Fortran program gets the runtime's own words
        torch = ctx.framework != "jax" and (bool((g["mover"].to_numpy() >= 0).any()) or ctx.is_pytorch)
        causes = []
        if pageable.any():
            how = ("not pinned: pin_memory=False" if torch else "staged by the driver" if ctx.framework == "jax"
                   else "not from cudaMallocHost / cudaHostRegister")
            causes.append(f"{int(pageable.sum())} from pageable host memory ({how})")
        if nb_false.any():
            causes.append(f"{int(nb_false.sum())} followed by a stream sync"
                          + (" (non_blocking=False)" if torch else ""))
        if explicit.any():
            causes.append(f"{int(explicit.sum())} followed by an explicit synchronize call")
        if sync_api.any():
            causes.append(f"{int(sync_api.sum())} by a synchronous copy API")
        cause_txt = "; ".join(causes)
        # part of the wait before each copy even started: work queued ahead of it on the stream
        block_end = np.maximum(g["call_end"].to_numpy(), g["sync_end"].to_numpy())
        queued = int(np.clip(np.minimum(g["start"].to_numpy(), block_end) - g["call_start"].to_numpy(),
                             0, g["blocked_ns"].to_numpy()).sum())
        it_txt = f" in {steps} iterations" if steps else ""
        system = Evidence.measured(
            f"{len(g)} host-to-device copies{it_txt} block the launching thread for "
            f"{blocked / 1e6:.3f} ms ({blocked / span:.1%} of the span), {queued / 1e6:.3f} ms of it before "
            f"the copies started (work queued ahead of them on the stream): {cause_txt}.",
            queued_wait_ns=Measure(queued, "ns"),
            copies=Measure(len(g), "count"), blocked_ns=Measure(blocked, "ns"),
            blocked_share=Measure(round(blocked / span, 4), "ratio"),
            iterations=Measure(int(steps), "count"),
            pageable_copies=Measure(int(pageable.sum()), "count"),
            synced_copies=Measure(int(synced.sum()), "count"),
            explicit_sync_copies=Measure(int(explicit.sum()), "count"),
            sync_api_copies=Measure(int(sync_api.sum()), "count"))
        nbytes = g["bytes"].to_numpy()
        dur = (g["end"] - g["start"]).to_numpy()
        known = (nbytes >= 0) & (dur > 0)
        if known.any():
            gbps = float(nbytes[known].sum() / dur[known].sum())   # bytes/ns == GB/s
            kernel = Evidence.measured(
                f"{nbytes[known].sum() / 1e6:.2f} MB moved in {dur.sum() / 1e6:.3f} ms of copy time "
                f"({gbps:.1f} GB/s).",
                bytes=Measure(int(nbytes[known].sum()), "bytes"), copy_ns=Measure(int(dur.sum()), "ns"),
                achieved_gbps=Measure(round(gbps, 2), "GB/s"))
        else:
            kernel = Evidence.not_captured(
                "The trace does not record copy sizes, so bandwidth cannot be computed.",
                ctx.capture_hint("copy_sizes"))
        b, e = g["call_start"].to_numpy(), np.maximum(g["call_end"].to_numpy(), g["sync_end"].to_numpy())
        order = np.argsort(-g["blocked_ns"].to_numpy(), kind="stable")[: opt.top]
        site = key.split("/", 1)[1]
        return self.finding(
            ctx, message=(f"GPU {d}: the host waits {duration_text(blocked)} ({blocked / span:.1%} of the span) "
                          f"in {len(g)} host-to-device copies at {site}: {cause_txt}"),
            fix=JAX_COPY_FIX if ctx.framework == "jax" else _fix(
                bool(pageable.any()), bool(nb_false.any()), bool(sync_api.any()), bool(explicit.any()), torch=torch),
            impact_ns=blocked, where=where, occurrences=len(g),
            windows=[(int(b[i]), int(e[i])) for i in order],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel,
                      Layer.MICROARCH: Evidence.not_applicable("the cost is the host waiting, not the copy engine")},
            metrics={"blocked_ns": Measure(blocked, "ns"), "copies": Measure(len(g), "count"),
                     "pageable_copies": Measure(int(pageable.sum()), "count"),
                     "synced_copies": Measure(int(synced.sum()), "count")},
            key=key)


def _site_rows(ctx, u, key) -> list[int]:
    """The api rows (copy calls that waited, and their syncs) of one finding's copies."""
    if len(u) == 0:
        return []
    g = u[u["key"] == key]
    rows = list(g.loc[g["call_blocks"], "api"].astype(int))
    rows += [int(s) for s in g["sync"] if s >= 0]
    return sorted(set(rows))


def _fix(pageable: bool, synced: bool, sync_api: bool, explicit: bool = False, *,
         torch: bool = True) -> str:
    parts = []
    if pageable and torch:
        parts.append("Pin the source memory: DataLoader(..., pin_memory=True), or tensor.pin_memory() once "
                     "for a data set kept in memory; from pageable memory even non_blocking=True stays "
                     "synchronous (the driver stages the copy).")
    elif pageable:
        parts.append("Pin the source memory: allocate it with cudaMallocHost / cudaHostAlloc, or "
                     "cudaHostRegister an existing buffer (OpenMP / OpenACC runtimes have a pinned-allocation "
                     "option); from pageable memory even an async copy stays synchronous (the driver stages it).")
    if (synced or pageable) and torch:
        parts.append("Copy with x.to(device, non_blocking=True): the kernels that use x still wait for the "
                     "copy in stream order, the host does not.")
    elif (synced or pageable) and not sync_api:
        parts.append("Copy with cudaMemcpyAsync on a stream and synchronise only where the host needs the "
                     "result: the kernels that use the data still wait for it in stream order.")
    if explicit:
        parts.append("Drop the synchronize call after the copy: stream order already makes the kernels that "
                     "use the data wait for it.")
    if sync_api:
        parts.append("Replace the synchronous cudaMemcpy with cudaMemcpyAsync on a stream from pinned memory.")
    parts.append("To also hide the copy under compute, prefetch the next batch on a side stream (TL004).")
    return " ".join(parts)

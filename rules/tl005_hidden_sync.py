"""TL005 hidden-sync."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelint.engine.finding import Evidence, Layer, Measure, Severity
from tracelint.engine.rule import Rule, duration_text, option
from tracelint.engine.runtime_advice import hidden_sync_fix, jax_hidden_sync_fix
from tracelint.timeline import classify, intervals
from tracelint.timeline.codes import (compact_row_codes, distinct_labels, largest_first,
                                      mode_label, row_codes, stable_order)
from tracelint.timeline.codes import thread_codes as _thread_codes
from tracelint.timeline.host_scope import host_context, nearest_on_thread
from tracelint.timeline.row_subset import RowSubset
from tracelint.timeline.schema import rows_where, take_rows
from tracelint.whatif.edits import RemoveSync


@dataclass(frozen=True)
class Options:
    min_count: int = option(2, "Call sites with fewer calls (in scope) than this are one-offs and ignored.")
    min_idle_share: float = option(0.005, "Report a call site when the GPU idle it causes is at least this share of the trace span.")
    include_step_end: bool = option(False, "Also report call sites whose every call is the last GPU-facing call of its iteration even when they cost almost no GPU idle.")
    step_end_max_idle_share: float = option(0.02, "A call site whose every call ends its iteration (a loss logged once per step) is exempt only while the GPU idle after it stays below this share of the span.")
    top: int = option(5, "How many of the largest idle windows to list.")


#: Host-blocking sync kinds (classify.sync_kind); stream_wait_event is GPU-side ordering and
#: queries (cudaStreamQuery / cudaEventQuery) return at once.
BLOCKING_SYNC = ("device", "stream", "event", "other")


class HiddenSync(Rule):
    """Host-blocking synchronisation inside iterations: syncs, device-to-host reads, allocator calls.

    What it detects: calls inside iterations (ProfilerStep ranges; the whole trace when it has no
    iterations) that block the host thread until the GPU drains: device / stream / event
    synchronisation of the CUDA runtime, the CUDA driver and HIP (`cudaDeviceSynchronize`,
    `cuStreamSynchronize`, `hipEventSynchronize`, ...), synchronous device-to-host copies
    (`cudaMemcpy` or a copy into pageable memory), the syncs that `.item()`, `.cpu()`, `.tolist()`
    and `torch.nonzero` issue (named by their enclosing `aten::` op), and allocator calls
    (`cudaMalloc`, `cudaFree`, `cuMemAlloc`, `hipMalloc`, ...) in the middle of an iteration.
    Calls are grouped by call site: the API, the Python file:line when the trace has stacks, the
    enclosing op and the NVTX / annotation path; one finding per call site with at least
    `min_count` calls whose caused GPU idle reaches `min_idle_share` of the span.
    `cudaStreamWaitEvent` orders streams on the GPU without blocking the host and is not reported.
    Why it hurts: a host-blocking call empties the GPU's queue. When it returns, the GPU has
    nothing to run until the host launches again, so every such call costs at least one launch
    latency of GPU idle, and the host loses its lead over the GPU for the rest of the iteration.
    `cudaFree` and many allocations synchronise the device too; mid-iteration they mean the
    caching allocator is growing or churning.
    Evidence: system: calls, iterations affected, host time blocked, GPU idle caused (GPU idle from
    the call's start to the first GPU activity after it returns, each idle ns counted once, and
    at most the time the call blocked: without the wait the host would have been that much further
    ahead) and its share of the span; kernel: the GPU work the call waited for and the work that ended the idle;
    microarch: SM activity in the largest idle window (GPU metrics or Nsight Compute), which
    should be low.
    Fix: remove the sync from the loop: keep values on the GPU (accumulate losses as tensors,
    log every N steps), replace `.item()`/`.cpu()` in control flow with tensor ops
    (`torch.where`, masks instead of `nonzero`), use `non_blocking=True` copies into pinned
    memory with an event, and give the caching allocator a stable working set (warm-up
    iterations, fixed shapes or bucketing, `expandable_segments`, stream-ordered
    `cudaMallocAsync`). A program that is not PyTorch's gets the runtime's calls instead:
    `cudaMemcpyAsync` into pinned memory, an event instead of a device-wide sync, stream-ordered
    allocation.
    Counter-example (when it does not apply): one sync at the end of an iteration or epoch to log
    a metric that costs almost no GPU idle (calls that are the last GPU-facing call of their
    iteration are skipped while their idle stays below `step_end_max_idle_share` of the span;
    one followed by host work that leaves the GPU idle is reported); syncs in a benchmark's timing code; allocations during warm-up, outside
    iterations; a sync whose GPU was kept busy by other streams (no idle, no finding); calls on
    a thread that issues no GPU work (a pin-memory thread) are not counted.
    """

    id = "TL005"
    slug = "hidden-sync"
    title = "Host-blocking sync inside the iteration"
    severity = Severity.WARNING
    groups = frozenset({"sync", "host", "latency"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    needs = frozenset({"api_calls"})
    Options = Options

    def fix_edits(self, finding, ctx):
        """Fix: the blocking call no longer waits (removed, or moved out of the loop)."""
        kind, api, op = (finding.key.split("|") + ["", "", ""])[:3]
        if op and op != "nan":      # every blocking call inside the op (the read's copy and sync)
            return [RemoveSync(within=f"^{re.escape(op)}(?![\\w:])")], ""
        return [RemoveSync(f"^{re.escape(api)}$")], ""

    def check(self, ctx):
        tl, opt = ctx.tl, self.options
        api = tl.api_calls
        if len(api) == 0:
            return
        cand, names = _candidates(ctx)
        if len(cand["row"]) == 0:
            return
        thread = compact_row_codes(api["pid"].to_numpy(), api["tid"].to_numpy())  # per call
        cand = _in_scope(ctx, cand, thread)
        if len(cand["row"]) == 0:
            return
        _attach_call_site(ctx, cand, names)
        _attach_idle(ctx, cand, names, thread)
        span = max(tl.span_ns, 1)
        for rows in _call_sites(cand, opt.min_count):
            g = RowSubset(cand, rows)        # a column at a time; views where rows are one run
            idle = int(g.take("idle").sum())
            if (not opt.include_step_end and g.take("step_end").all()
                    and (g.take("step") >= 0).all()
                    and idle < opt.step_end_max_idle_share * span):
                continue
            if idle < opt.min_idle_share * span:
                continue
            yield self._finding(ctx, g, names, idle, span)

    def _finding(self, ctx, g: RowSubset, names: dict, idle: int, span: int):
        """g: one call site's calls (candidate columns, names as codes into names)."""
        opt = self.options
        fig = _site_figures(g, opt.top)
        rep = fig["rep"]
        row = int(g.at("row", rep))
        where = ctx.where_for_api(row)
        device = int(g.at("device", rep))
        where.device = device if device >= 0 else None
        where.start_ns, where.end_ns = int(g.at("win_start", rep)), int(g.at("win_end", rep))
        api_name, op = str(names["api"][g.at("api", rep)]), str(names["op"][g.at("op", rep)])
        kind = str(KINDS[g.at("kind", rep)])
        blocked, n, iters = fig["blocked"], len(g), fig["iterations"]
        label = {"read": "device-to-host read", "sync": "synchronisation",
                 "copy": "synchronous device-to-host copy", "alloc": "allocator call"}[kind]
        via = f" in `{op}`" if op else ""
        at = f" {where.source_text()}" if where.file else ""
        dev = f"GPU {device}" if device >= 0 else "the GPU"
        system = Evidence.measured(
            f"{n} `{api_name}` calls{via} ({label}) "
            f"{f'in {iters} iteration(s)' if iters else '(the trace has no iterations: all calls count)'} block the host "
            f"{blocked / 1e6:.3f} ms in all; afterwards {dev} idles {idle / 1e6:.3f} ms "
            f"({idle / span:.2%} of the span) until the host launches again"
            f"{'' if ctx.has_stacks else '; no Python stacks in the trace to name the line'}.",
            calls=Measure(n, "count"), iterations=Measure(iters, "count"),
            host_blocked_ns=Measure(blocked, "ns"), gpu_idle_after_ns=Measure(idle, "ns"),
            idle_share=Measure(round(idle / span, 4), "ratio"),
            median_idle_ns=Measure(fig["median_idle"], "ns"),
            median_call_ns=Measure(fig["median_call"], "ns"))
        w_name, n_name = (mode_label(names["act"], g.take("waited")),
                          mode_label(names["act"], g.take("next")))
        if w_name is not None or n_name is not None:
            kernel = Evidence.measured(
                f"Most often the call waited for `{w_name or 'nothing'}` to finish, and the GPU "
                f"resumed with `{n_name or 'nothing'}`; the largest idle after one call is "
                f"{duration_text(fig['largest_idle'])}.",
                largest_idle_ns=Measure(int(fig["largest_idle"]), "ns"),
                calls_with_idle=Measure(fig["with_idle"], "count"))
            where.kernel = w_name
        else:
            kernel = Evidence.not_captured(
                "No GPU activity could be tied to these calls' device.", ctx.capture_hint("cuda"))
        micro = ctx.microarch(device if device >= 0 else None, where.start_ns, where.end_ns,
                              expect={r"SM.?Active|SMs Active|sm__throughput": "low"})
        windows = [(int(g.at("win_start", i)), int(g.at("win_end", i))) for i in fig["top"]]
        file = names["file"][g.at("file", rep)]
        key = "|".join([kind, api_name, op, str(file or ""), str(g.at("line", rep)),
                        str(names["path"][g.at("path", rep)])])
        return self.finding(
            ctx,
            message=(f"`{api_name}`{via}{at} blocks the host {n}× ({blocked / 1e6:.2f} ms); {dev} idles "
                     f"{idle / 1e6:.2f} ms before work resumes ({idle / span:.1%} of the span)"),
            impact_ns=idle, where=where, occurrences=n, windows=windows,
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            metrics={"gpu_idle_after_ns": Measure(idle, "ns"), "host_blocked_ns": Measure(blocked, "ns"),
                     "calls": Measure(n, "count")},
            key=key, **({} if ctx.is_pytorch else {"fix": jax_hidden_sync_fix(kind) if ctx.framework == "jax"
                                                    else hidden_sync_fix(kind, api_name)}))


def _site_figures(g: RowSubset, top: int) -> dict:
    """What a finding reports of its call site's calls, taken a column at a time: each copy is
    freed before the next is taken (a site of 10 M calls: 80 MB per column)."""
    idle = g.take("idle")
    fig = {"rep": int(idle.argmax()), "largest_idle": idle.max(), "with_idle": int((idle > 0).sum()),
           "median_idle": float(np.median(idle)), "top": largest_first(idle, top)}
    del idle
    host_ns = g.take("end") - g.take("start")
    fig["blocked"], fig["median_call"] = int(host_ns.sum()), float(np.median(host_ns))
    del host_ns
    step = g.take("step")
    fig["iterations"] = len(np.unique(step[step >= 0]))
    return fig


# -------------------------------------------------------------------------------------------
# candidates


#: A candidate's kind, by code (the finding reads the label).
KINDS = np.array(["", "sync", "copy", "alloc", "read"], dtype=object)
SYNC, COPY, ALLOC, READ = 1, 2, 3, 4


def _labels_codes(names: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(labels, codes) of a name column: labels[codes] is each row's name, "" for a missing one
    (the last label). Rows are then tested and named through their codes: at 23 M API rows an
    object array of names is 184 MB, a string array of kinds more."""
    cat = names.array if isinstance(names.dtype, pd.CategoricalDtype) else pd.Categorical(
        names.astype(str))
    labels = np.append(np.asarray(cat.categories, dtype=object), "")
    codes = np.asarray(cat.codes)
    return labels, np.where(codes >= 0, codes, len(labels) - 1)


def _candidates(ctx) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Host-blocking api_calls rows (blocking syncs, synchronous D2H copies, allocator calls) as
    columns, names as codes; and the label arrays those codes index."""
    tl = ctx.tl
    api = tl.api_calls
    labels, codes = _labels_codes(api["name"])      # decided per distinct name, not per row
    blocking = np.array([classify.sync_kind(str(c)) in BLOCKING_SYNC for c in labels[:-1]]
                        + [False], dtype=bool)
    is_sync = classify.in_labels(tl.api_role, ("sync",)) & blocking[codes]
    async_name = np.array([classify.is_async_api(str(c)) for c in labels[:-1]] + [False], bool)
    is_async = async_name[codes]
    is_alloc = classify.in_labels(tl.api_role, ("alloc",)) & ~is_async
    # Synchronous device-to-host copies: the API row that launched a D2H copy, when the API is
    # synchronous or the destination is pageable host memory.
    is_copy = np.zeros(len(api), dtype=bool)
    copies = tl.copies
    if len(copies):
        li = ctx.launch_index("copies")
        d2h = (copies["kind"].astype(str).to_numpy() == "D2H") & (li >= 0)
        pageable = copies["dst_kind"].astype(str).to_numpy() == "pageable"
        rows = li[d2h]
        sync_copy = (~is_async[rows]) | pageable[d2h]
        is_copy[rows[sync_copy]] = True
    kind = np.where(is_sync, SYNC, np.where(is_copy, COPY, np.where(is_alloc, ALLOC, 0))) \
        .astype(np.int8)
    sel = np.flatnonzero(kind)
    api_code, api_names = distinct_labels(labels)
    return {"row": sel, "api": api_code[codes[sel]], "kind": kind[sel],
            **{c: take_rows(api[c].to_numpy(), sel) for c in ("pid", "tid", "start", "end")}}, \
        {"api": api_names}


def _in_scope(ctx, cand: dict, thread: np.ndarray) -> dict:
    """The candidates in scope, with their iteration and end-of-iteration flag: inside an
    iteration (without iterations: every sync, no allocation), on a thread that issues GPU
    work. thread: the thread code of every API call. Takes cand's columns (cand is left
    empty): each is freed once its rows in scope are copied."""
    tl = ctx.tl
    t = cand["start"]
    n = len(t)
    r = tl.ranges
    # iterations
    steps = r[r["kind"] == "step"].sort_values("start") if len(r) else r
    step_no = np.full(n, -1, dtype=np.int64)
    step_end = np.zeros(n, dtype=np.int64)
    if len(steps):
        ss, se = steps["start"].to_numpy(), steps["end"].to_numpy()
        i = np.searchsorted(ss, t, side="right") - 1
        ok = (i >= 0) & (t < se[np.clip(i, 0, None)])
        step_no = np.where(ok, steps["step"].to_numpy()[np.clip(i, 0, None)], -1)
        step_end = np.where(ok, se[np.clip(i, 0, None)], 0)
    # Without iterations every sync is in scope; allocations only inside iterations.
    in_scope = step_no >= 0 if len(steps) else cand["kind"] != ALLOC
    # Last GPU-facing call of its iteration on this thread?
    api = tl.api_calls
    lsel = classify.in_labels(tl.api_role, ("launch", "copy", "memset"))
    cthr, lthr = thread[cand["row"]], thread[lsel]
    lt = api["start"].to_numpy()[lsel]
    nxt = nearest_on_thread(cthr, cand["end"], lthr, lt, after=True)
    nxt = np.where(nxt >= 0, lt[nxt], -1)
    # A thread that never issues GPU work (a pin-memory or logging thread) cannot starve the GPU.
    keep = np.flatnonzero(in_scope & np.isin(cthr, lthr))
    out = {k: take_rows(cand.pop(k), keep) for k in list(cand)}   # freed once copied
    out["step"] = step_no[keep]
    out["step_end"] = (step_no[keep] >= 0) & ((nxt[keep] < 0) | (nxt[keep] >= step_end[keep]))
    return out


def _attach_call_site(ctx, cand: dict, names: dict) -> None:
    """Per candidate: Python line (innermost user frame), op, NVTX path; copies and syncs
    issued by a host-read op become device-to-host reads."""
    tl = ctx.tl
    cand["file"], names["file"], cand["line"] = _user_frames(tl, cand)
    cand["op"], names["op"], cand["path"], names["path"] = host_context(
        tl, cand["start"], cand["pid"], cand["tid"])
    # CPU ops whose presence around a sync means "the host reads a device value".
    read = np.array([classify.is_host_readback_op(str(o)) for o in names["op"]], dtype=bool)
    cand["kind"] = np.where(read[cand["op"]] & (cand["kind"] != ALLOC), READ, cand["kind"])


def _call_sites(cand: dict, min_count: int):
    """Rows of each call site (API, op, file, line, NVTX path, kind) with at least min_count
    calls, ascending; sites in the order of their first call (a groupby without sorting)."""
    key, first = row_codes(*(cand[k] for k in ("api", "op", "file", "line", "path", "kind")))
    by = stable_order(key)
    bounds = np.searchsorted(key[by], np.arange(len(first) + 1))
    for k in np.argsort(first, kind="stable"):
        if bounds[k + 1] - bounds[k] >= min_count:
            yield by[bounds[k]:bounds[k + 1]]


def _user_frames(tl, cand) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Innermost user-code Python frame enclosing each candidate's start: (file code, the
    files, line); code of "" and line -1 where there is none."""
    n = len(cand["start"])
    none = (np.zeros(n, dtype=np.int64), np.array([""], dtype=object),
            np.full(n, -1, dtype=np.int64))
    f = tl.python_frames
    if len(f) == 0:
        return none
    fcat = pd.Categorical(f["file"].astype(str))
    user = np.array([not classify.is_library_code(c) for c in fcat.categories.tolist()], dtype=bool)
    keep = user[fcat.codes] if len(user) else np.zeros(len(f), bool)
    keep &= (f["end"] > f["start"]).to_numpy()  # zero-length frames enclose nothing
    fu = f[keep]
    if len(fu) == 0:
        return none
    cthr, fthr = _thread_codes((cand["pid"], cand["tid"]),
                               (fu["pid"].to_numpy(), fu["tid"].to_numpy()))
    idx = intervals.innermost_enclosing(cand["start"], cthr, fu["start"].to_numpy(),
                                        fu["end"].to_numpy() + 1, fthr, fu["depth"].to_numpy())
    hit = idx >= 0
    files = np.full(n, "", dtype=object)
    lines = np.full(n, -1, dtype=np.int64)
    files[hit] = classify.labels_at(fu["file"], idx[hit])
    lines[hit] = fu["line"].to_numpy()[idx[hit]]
    code, uniq = distinct_labels(files)
    return code, uniq, lines


# -------------------------------------------------------------------------------------------
# GPU idle caused


def _attach_idle(ctx, cand: dict, names: dict, thread: np.ndarray) -> None:
    """Device, caused GPU idle window, the work waited for and the work that ended the idle
    (as codes of GPU activity names, names["act"])."""
    tl = ctx.tl
    n = len(cand["row"])
    device = _devices(ctx, cand, thread)
    cand["device"] = device
    idle = np.zeros(n, dtype=np.int64)
    win_s = cand["start"].copy()
    win_e = cand["end"].copy()
    act = tl.gpu_activity
    labels, codes = _labels_codes(act["name"])      # names looked up only for the answers
    names["act"] = labels
    waited = np.full(n, len(labels) - 1, dtype=np.int64)      # the last label is ""
    nxt_name = np.full(n, len(labels) - 1, dtype=np.int64)
    for dev in np.unique(device):  # loop over devices
        if dev < 0:
            continue
        on, sel = rows_where(device == dev), rows_where(act["device"].to_numpy() == dev)
        a_s, a_e = act["start"].to_numpy()[sel], act["end"].to_numpy()[sel]
        a_c = codes[sel]
        bs, be = tl.busy_intervals(int(dev))       # made once per device for every rule
        if len(bs) == 0:
            continue
        cs, ce = cand["start"][on], cand["end"][on]
        # First GPU activity start after the call returns; 0 idle when the GPU is busy then.
        # (each temporary is dropped once used: 10 M candidates make each 80 MB)
        i = np.searchsorted(bs, ce, side="right")
        before = be[np.clip(i - 1, 0, None)]           # end of the last interval starting <= ce
        busy_at_end = (i > 0) & (before > ce)
        has_next = i < len(bs)
        nb = np.where(busy_at_end, ce, np.where(has_next, bs[np.clip(i, 0, len(bs) - 1)], ce))
        # Each idle ns is charged once: a window starts no earlier than the previous one ends.
        order = np.argsort(cs, kind="stable")
        prev_end = np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(nb[order])[:-1]]
        eff = np.empty_like(cs)
        eff[order] = np.maximum(cs[order], prev_end)
        del order, prev_end
        hi = np.maximum(nb, eff)                         # hi - eff: the window's length
        del nb
        busy = tl.busy_in(int(dev), eff, hi)
        # Capped at the time the call blocked: without the wait the host would have run that
        # much further ahead, so at most that much of the idle is the call's doing (a long host
        # pause after a short sync is a launch gap, TL001, not a hidden sync).
        idle[on] = np.minimum(np.where(has_next | busy_at_end, hi - eff - busy, 0), ce - cs)
        del busy, has_next
        # Shown window: from the GPU going idle (not before the call) to the GPU resuming.
        win_s[on] = np.where(busy_at_end, eff, np.clip(np.where(i > 0, before, eff), eff, hi))
        win_e[on] = hi
        del i, before, busy_at_end, eff, hi
        # The work the call waited for: the last activity ending at or before the call's end.
        eo = np.argsort(a_e, kind="stable")
        k = np.searchsorted(a_e[eo], ce, side="right") - 1
        waited[on] = np.where(k >= 0, a_c[eo][np.clip(k, 0, None)], len(labels) - 1)
        # the device's activity is in start order already (gpu_activity: by device, start)
        k2 = np.searchsorted(a_s, ce, side="left")
        nxt_name[on] = np.where(k2 < len(a_s), a_c[np.clip(k2, 0, len(a_s) - 1)],
                                len(labels) - 1)
    cand["idle"] = np.maximum(idle, 0)
    cand["win_start"], cand["win_end"] = win_s, win_e
    cand["waited"], cand["next"] = waited, nxt_name


def _devices(ctx, cand: dict, thread: np.ndarray) -> np.ndarray:
    """Device per candidate: its sync/copy record, else the device the thread last launched
    on, else the only device in use; -1 when unknown."""
    tl = ctx.tl
    n = len(cand["row"])
    device = np.full(n, -1, dtype=np.int64)
    api = tl.api_calls
    rows = cand["row"]
    # sync records carry the device; join on correlation (and pid for nsys). Keys only at the
    # candidates' rows, and every temporary dropped once used: at 23 M API calls each
    # full-length int64 column is 184 MB, and this is the rule's peak
    sy = tl.syncs
    if len(sy):
        use_pid = tl.meta.format == "nsys-sqlite"
        s_corr = sy["correlation"].to_numpy()
        s_key = (sy["pid"].to_numpy() << 32) ^ s_corr if use_pid else s_corr
        a_corr = api["correlation"].to_numpy()[rows]
        a_key = (api["pid"].to_numpy()[rows] << 32) ^ a_corr if use_pid else a_corr
        good = (s_corr >= 0) & (sy["device"].to_numpy() >= 0)
        m = pd.Series(sy["device"].to_numpy()[good], index=s_key[good])
        m = m[~m.index.duplicated()]
        hit = np.where(a_corr >= 0, pd.Series(a_key).map(m).to_numpy(), np.nan)
        del a_key, a_corr
        device = np.where(np.isnan(hit), -1, np.nan_to_num(hit, nan=-1)).astype(np.int64)
    in_use = tl.devices_in_use()
    if len(in_use) == 1:   # every launch is on it: what a thread launched says nothing more
        return np.where(device >= 0, device, in_use[0])
    # api row -> device of the GPU activity it launched (copies, kernels, memsets)
    act = tl.gpu_activity
    api_dev = np.full(len(api), -1, dtype=np.int64)
    la = ctx.activity_launch
    ok = la >= 0
    api_dev[la[ok]] = act["device"].to_numpy()[ok]
    del ok
    device = np.where(device >= 0, device, api_dev[rows])
    # the device this thread last launched on
    has = api_dev >= 0
    if has.any() and (device < 0).any():
        ld = api_dev[has]
        del api_dev
        last = nearest_on_thread(thread[rows], cand["start"], thread[has],
                                 api["start"].to_numpy()[has], after=False)
        device = np.where(device >= 0, device, np.where(last >= 0, ld[last], -1))
    return device

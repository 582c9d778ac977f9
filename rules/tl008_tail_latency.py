"""TL008 tail-latency."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.rule import Rule, option
from tracelint.timeline import classify, compile_names, intervals
from tracelint.timeline.summary import percentile

#: The fix when torch.compile compiling again is most of the slow iterations' excess.
RECOMPILE_TAIL_FIX = ("The slow iterations are torch.compile compiling again (TL037 names each "
                      "compilation and its cause): give the compiled code inputs of stable shape (pad "
                      "or bucket the batch), or mark the varying dimension dynamic "
                      "(torch._dynamo.mark_dynamic, torch.compile(dynamic=True)); then set a "
                      "regression gate on P99.")


@dataclass(frozen=True)
class Options:
    ratio: float = option(1.5, "Report iterations when steady-state P99 / P50 is at least this.")
    range_ratio: float = option(2.0, "Report a named range when its steady-state P99 / P50 is at least this.")
    min_iterations: int = option(4, "Iterations needed (after cold start) to judge a distribution.")
    min_count: int = option(8, "Instances a named NVTX / annotation range needs to be judged.")
    min_range_share: float = option(0.01, "Report a named range only when its tail excess is at least this share of the span.")
    cold_window: int = option(3, "How many leading instances may be cold start (JIT, autotuning, caches).")
    truncation_tol_ns: int = option(1_000, "A last iteration ending this close to the trace end, and shorter than the median, is treated as cut by the profiler.")


class TailLatency(Rule):
    """Iterations or named ranges whose P99 is far above their P50; cold start kept apart.

    What it detects: the distribution of iteration times (ProfilerStep / NVTX iteration ranges)
    and of every NVTX / annotation range name with at least `min_count` instances. Up to
    `cold_window` leading instances slower than `ratio` × the steady-state P50 are cold start:
    reported apart (info) and left out of the steady state. A steady-state P99 / P50 of at least
    `ratio` (iterations) or `range_ratio` (ranges) is a tail. A last iteration that ends at the
    trace end and is shorter than the median was cut by the profiler window: it is excluded and
    the finding says so and names the window used. Percentiles use the one definition of
    `tracelint.timeline.summary.percentile` (linear interpolation, type 7).
    Why it hurts: users and synchronous training feel the tail, not the mean: a step that is slow
    one time in fifty stalls every rank of a data-parallel job, and a request at P99 sets the SLO.
    A mean hides it, and cold start (compilation, autotuning, cache warm-up) mixed into the steady
    state makes a stable workload look noisy, or a noisy one look stable.
    Evidence: system: count, P50 / P90 / P99 and P99/P50 of the steady state, the tail instances
    and the window used (with cold start and a cut last iteration named), and the host time
    torch.compile spends compiling in the tail iterations (when it is at least half their
    excess, the message names it and the fix is TL037's: stable shapes); kernel: for the tail
    instances against typical ones, how much of the extra time was GPU busy (more or slower
    kernels, with the kernels that grew most) and how much GPU idle (host, data loading, syncs);
    microarch: GPU metrics over the slowest instance when captured.
    Fix: break the tail down by what differs: input length / batch shape (bucket or pad to fixed
    shapes), data loading (more workers, pinned memory, prefetch), garbage collection or logging
    every N steps (spread or move off the critical path), recompilation on new shapes
    (`torch.compile(dynamic=True)`, mark dynamic dims); then set a regression gate on P99.
    Counter-example (when it does not apply): periodic work that is meant to be there (an
    evaluation or checkpoint every N steps, gradient accumulation boundaries) when it is
    accounted for separately; cold start itself, which is reported as info; a handful of
    iterations, too few for a P99 to mean anything.
    """

    id = "TL008"
    slug = "tail-latency"
    title = "Tail latency: P99 far above P50"
    severity = Severity.WARNING
    groups = frozenset({"latency", "serving"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    needs = frozenset({"ranges"})
    Options = Options

    def fix_edits(self, finding, ctx):
        return None, "which iterations a fix would shorten is not in the trace"

    def check(self, ctx):
        tl, opt = ctx.tl, self.options
        r = tl.ranges
        if len(r) == 0:
            return
        steps = r[classify.in_labels(r["kind"], ("step",))].sort_values(["start", "step"], kind="stable")
        if len(steps):
            yield from self._iterations(ctx, steps)
        rsel = classify.in_labels(r["kind"], ("annotation", "nvtx")) & ~classify.name_mask(r["name"], classify.is_profiler_step)
        rr = r[rsel]
        if len(rr) == 0:
            return
        for name, rows in _frequent_names(rr["name"], opt.min_count):  # loop over range names
            f = self._ranges(ctx, name, rr.iloc[rows].sort_values("start", kind="stable"))
            if f is not None:
                yield f

    # --------------------------------------------------------------------------------------
    def _iterations(self, ctx, steps: pd.DataFrame):
        tl, opt = ctx.tl, self.options
        s, e = steps["start"].to_numpy(), steps["end"].to_numpy()
        num = steps["step"].to_numpy()
        d = e - s
        notes = []
        keep = np.ones(len(d), dtype=bool)
        bad = e < s
        if bad.any():
            keep &= ~bad
            notes.append(f"{int(bad.sum())} iteration(s) without a valid end excluded")
        last = int(np.flatnonzero(keep)[-1]) if keep.any() else -1
        if last >= 1:
            others = d[keep][:-1]
            if e[last] >= tl.span[1] - opt.truncation_tol_ns and d[last] < np.median(others):
                keep[last] = False
                notes.append(f"last iteration #{num[last]} ends at the trace end and is shorter than the "
                             f"median: cut by the profiler window, excluded")
        idx = np.flatnonzero(keep)
        if len(idx) < opt.min_iterations:
            return
        cold, steady = split_cold(d[idx], opt.ratio, opt.cold_window, opt.min_iterations)
        dd = d[idx][steady]
        sidx = idx[steady]
        p50, p90, p99 = (percentile(dd, q) for q in (50, 90, 99))
        window = (int(s[sidx].min()), int(e[sidx].max()))
        win_txt = (f"iterations #{num[sidx[0]]}–#{num[sidx[-1]]} ({len(dd)} of {len(d)}; "
                   f"window {window[0]}–{window[1]} ns)")
        if len(cold):
            ci = idx[cold]
            excess = int((d[ci] - p50).sum())
            yield self.finding(
                ctx, severity=Severity.INFO,
                message=(f"Cold start: the first {len(ci)} iteration(s) take "
                         f"{d[ci].max() / 1e6:.2f} ms at worst, {d[ci].max() / p50:.1f}× the steady P50 "
                         f"{p50 / 1e6:.2f} ms; kept out of the steady-state distribution"),
                impact_ns=max(excess, 0),
                where=Where(rank=tl.meta.rank, iteration=int(num[ci[0]]), start_ns=int(s[ci[0]]),
                            end_ns=int(e[ci[-1]]), pid=int(steps["pid"].iat[ci[0]]),
                            tid=int(steps["tid"].iat[ci[0]])),
                occurrences=len(ci), windows=[(int(s[i]), int(e[i])) for i in ci],
                evidence={Layer.SYSTEM: Evidence.measured(
                    f"Iterations {', '.join('#' + str(num[i]) for i in ci)} last "
                    f"{', '.join(f'{d[i] / 1e6:.2f}' for i in ci)} ms against a steady P50 of "
                    f"{p50 / 1e6:.2f} ms ({win_txt}).",
                    cold_iterations=Measure(len(ci), "count"), steady_p50_ns=Measure(p50, "ns"),
                    cold_excess_ns=Measure(max(excess, 0), "ns"))},
                metrics={"cold_iterations": Measure(len(ci), "count"),
                         "cold_excess_ns": Measure(max(excess, 0), "ns")},
                key="cold-start|iterations",
                fix=("Record cold start and steady state separately (warm-up iterations before the "
                     "profiler's active window); cache compiled kernels and autotuning results."),
                counter_example="A cold start is expected once per process; report it, do not fight it.")
        if p50 <= 0 or p99 / p50 < opt.ratio:
            return
        tail = dd >= opt.ratio * p50
        tidx = sidx[tail]
        impact = int((d[tidx] - p50).sum())
        worst = int(sidx[np.argmax(dd)])
        compiling = int(_compile_ns(tl, s[tidx], e[tidx]).sum())
        by_compile = impact > 0 and compiling >= impact / 2
        system = Evidence.measured(
            f"{len(dd)} steady iterations: P50 {p50 / 1e6:.3f} ms, {_upper(dd, p50, p90, p99)}; "
            f"{len(tidx)} iteration(s) at "
            f"≥ {opt.ratio:g}× P50 lose {impact / 1e6:.3f} ms over P50; {win_txt}"
            + (f"; cold start excluded: {len(cold)} iteration(s)" if len(cold) else "")
            + (f"; torch.compile compiles {compiling / 1e6:.3f} ms of host time in them"
               if compiling else "")
            + ("; " + "; ".join(notes) if notes else "") + ".",
            compile_ns=Measure(compiling, "ns"),
            iterations=Measure(len(dd), "count"), p50_ns=Measure(p50, "ns"),
            p90_ns=Measure(p90, "ns"), p99_ns=Measure(p99, "ns"),
            p99_over_p50=Measure(round(p99 / p50, 3), "ratio"),
            tail_iterations=Measure(len(tidx), "count"),
            excluded_iterations=Measure(int(len(d) - len(dd)), "count"),
            window_start_ns=Measure(window[0], "ns"), window_end_ns=Measure(window[1], "ns"))
        typical = sidx[~tail]
        kernel = _busy_evidence(ctx, s, e, tidx, typical, by_iteration=True)
        where = Where(rank=tl.meta.rank, iteration=int(num[worst]), start_ns=int(s[worst]),
                      end_ns=int(e[worst]), pid=int(steps["pid"].iat[worst]),
                      tid=int(steps["tid"].iat[worst]))
        micro = ctx.microarch(_main_device(tl), int(s[worst]), int(e[worst]))
        yield self.finding(
            ctx,
            message=(f"Iteration {_tail_label(dd)} {_tail_value(dd, p99) / 1e6:.2f} ms is "
                     f"{_tail_value(dd, p99) / p50:.1f}× P50 {p50 / 1e6:.2f} ms (n={len(dd)}); "
                     f"{len(tidx)} slow iteration(s) (worst #{num[worst]}, {d[worst] / 1e6:.2f} ms) "
                     f"lose {impact / 1e6:.2f} ms"
                     + (f", {compiling / 1e6:.2f} ms of it torch.compile compiling again (TL037)"
                        if by_compile else "")),
            impact_ns=impact, where=where, occurrences=len(tidx),
            windows=_worst_windows(s, e, d, tidx),
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            metrics=_tail_metrics(p50, p99, len(tidx)),
            key="iterations", **({"fix": RECOMPILE_TAIL_FIX} if by_compile else {}))

    # --------------------------------------------------------------------------------------
    def _ranges(self, ctx, name: str, g: pd.DataFrame):
        tl, opt = ctx.tl, self.options
        s, e = g["start"].to_numpy(), g["end"].to_numpy()
        ok = e >= s
        s, e = s[ok], e[ok]
        d = e - s
        if len(d) < opt.min_count:
            return None
        cold, steady = split_cold(d, opt.range_ratio, opt.cold_window, opt.min_count)
        dd = d[steady]
        sidx = np.flatnonzero(steady)
        p50, p90, p99 = (percentile(dd, q) for q in (50, 90, 99))
        if p50 <= 0 or p99 / p50 < opt.range_ratio:
            return None
        tail = dd >= opt.range_ratio * p50
        tidx = sidx[tail]
        impact = int((d[tidx] - p50).sum())
        if impact < opt.min_range_share * max(tl.span_ns, 1):
            return None
        worst = int(sidx[np.argmax(dd)])
        gpid, gtid = g["pid"].to_numpy()[ok], g["tid"].to_numpy()[ok]
        where = ctx.where_for_host(int(gpid[worst]), int(gtid[worst]), int(s[worst]))
        where.start_ns, where.end_ns = int(s[worst]), int(e[worst])
        system = Evidence.measured(
            f"`{name}`: {len(dd)} steady instances, P50 {p50 / 1e6:.3f} ms, {_upper(dd, p50, p90, p99)}; "
            f"{len(tidx)} instance(s) at "
            f"≥ {opt.range_ratio:g}× P50 add {impact / 1e6:.3f} ms"
            + (f"; {len(cold)} cold-start instance(s) excluded" if len(cold) else "") + ".",
            instances=Measure(len(dd), "count"), p50_ns=Measure(p50, "ns"), p90_ns=Measure(p90, "ns"),
            p99_ns=Measure(p99, "ns"), p99_over_p50=Measure(round(p99 / p50, 3), "ratio"),
            tail_instances=Measure(len(tidx), "count"),
            cold_instances=Measure(int(len(cold)), "count"))
        kernel = _busy_evidence(ctx, s, e, tidx, sidx[~tail], by_iteration=False)
        micro = ctx.microarch(_main_device(tl), int(s[worst]), int(e[worst]))
        return self.finding(
            ctx,
            message=(f"`{name}` {_tail_label(dd)} {_tail_value(dd, p99) / 1e6:.2f} ms is "
                     f"{_tail_value(dd, p99) / p50:.1f}× its P50 {p50 / 1e6:.2f} ms (n={len(dd)}); "
                     f"{len(tidx)} slow instance(s) add {impact / 1e6:.2f} ms"),
            impact_ns=impact, where=where, occurrences=len(tidx),
            windows=_worst_windows(s, e, d, tidx),
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            metrics=_tail_metrics(p50, p99, len(tidx)),
            key=f"range|{name}")


def _compile_ns(tl, qs: np.ndarray, qe: np.ndarray) -> np.ndarray:
    """Per window: the host time torch.compile spends compiling in it (Dynamo's and Inductor's
    ranges, as TL037 reads them), on any thread."""
    r = tl.ranges
    if len(r) == 0 or len(qs) == 0:
        return np.zeros(len(qs), np.int64)
    comp = classify.in_labels(r["kind"], compile_names.HOST_KINDS) & classify.name_mask(
        r["name"], lambda n: compile_names.torch_compile_role(n) == "compile")
    ms, me = intervals.merge(r["start"].to_numpy()[comp], r["end"].to_numpy()[comp])
    return intervals.overlap_each(qs, qe, ms, me)


def split_cold(d: np.ndarray, ratio: float, window: int, min_steady: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices of cold-start instances, boolean steady mask). Cold start: the leading run of
    the first `window` instances each slower than `ratio` × the P50 of the instances after the
    window; only judged when enough instances remain after the window."""
    n = len(d)
    steady = np.ones(n, dtype=bool)
    w = min(window, n - min_steady)
    if w <= 0:
        return np.zeros(0, dtype=np.int64), steady
    ref = percentile(d[w:], 50)
    slow = d[:w] > ratio * ref
    k = int(np.argmin(slow)) if not slow.all() else w  # length of the leading slow run
    steady[:k] = False
    return np.arange(k), steady


def _main_device(tl) -> int | None:
    devs = tl.devices_in_use()
    if not devs:
        return None
    act = tl.gpu_activity
    busy = (act["end"] - act["start"]).groupby(act["device"]).sum()
    return int(busy.idxmax())


def _busy_evidence(ctx, s, e, tail_idx, typical_idx, by_iteration: bool) -> Evidence:
    """GPU busy vs idle inside the tail instances against typical ones, and the kernels that grew."""
    tl = ctx.tl
    devs = tl.devices_in_use()
    if not devs:
        return Evidence.not_captured("No GPU activity in the trace: cannot split the tail into GPU "
                                     "work and GPU idle.", ctx.capture_hint("cuda"))
    if len(typical_idx) == 0 or len(tail_idx) == 0:
        return Evidence.not_applicable("No typical instances to compare the tail with.")
    busy = np.zeros(len(s), dtype=np.int64)
    for dev in devs:  # loop over devices: the busiest device per window
        busy = np.maximum(busy, ctx.busy_in(dev, s, e))
    dur = e - s
    t_busy, n_busy = float(busy[tail_idx].mean()), float(busy[typical_idx].mean())
    t_dur, n_dur = float(dur[tail_idx].mean()), float(dur[typical_idx].mean())
    d_busy, d_idle = t_busy - n_busy, (t_dur - t_busy) - (n_dur - n_busy)
    grew = ""
    k = tl.kernels
    if len(k):
        # Kernels by instance window: launch time when linked, else kernel start.
        li = ctx.launch_index("kernels")
        a_start = tl.api_calls["start"].to_numpy()
        t = np.where(li >= 0, a_start[np.clip(li, 0, None)] if len(a_start) else 0, k["start"].to_numpy())
        order = np.argsort(s, kind="stable")
        pos = np.searchsorted(s[order], t, side="right") - 1
        inside = (pos >= 0) & (t < e[order][np.clip(pos, 0, None)])
        inst = np.where(inside, order[np.clip(pos, 0, None)], -1)
        is_tail = np.isin(inst, tail_idx)
        is_typ = np.isin(inst, typical_idx)
        kd = (k["end"] - k["start"]).to_numpy()
        names = k["name"].astype(str).to_numpy()
        df = pd.DataFrame({"name": names, "tail": np.where(is_tail, kd, 0), "typ": np.where(is_typ, kd, 0)})
        agg = df.groupby("name", sort=False)[["tail", "typ"]].sum()
        growth = agg["tail"] / len(tail_idx) - agg["typ"] / len(typical_idx)
        growth = growth[growth > 0].sort_values(ascending=False).head(3)
        if len(growth):
            grew = "; kernels that grew most per instance: " + ", ".join(
                f"`{n}` +{v / 1e3:.1f} µs" for n, v in growth.items())
    unit = "iteration" if by_iteration else "instance"
    verdict = ("mostly GPU idle (host, data loading or syncs)" if d_idle >= d_busy
               else "mostly more GPU work (more or slower kernels)")
    return Evidence.measured(
        f"A tail {unit} has {d_busy / 1e6:+.3f} ms GPU busy and {d_idle / 1e6:+.3f} ms GPU idle "
        f"against a typical one: the extra time is {verdict}{grew}.",
        tail_gpu_busy_delta_ns=Measure(round(d_busy), "ns"),
        tail_gpu_idle_delta_ns=Measure(round(d_idle), "ns"),
        typical_gpu_busy_ns=Measure(round(n_busy), "ns"))


#: Fewer samples than this and a "P99" is only an interpolation near the maximum: say max.
P99_MIN_SAMPLES = 100


def _tail_label(dd: np.ndarray) -> str:
    return "P99" if len(dd) >= P99_MIN_SAMPLES else "max"


def _tail_value(dd: np.ndarray, p99: float) -> float:
    return p99 if len(dd) >= P99_MIN_SAMPLES else float(np.max(dd))


def _upper(dd: np.ndarray, p50: float, p90: float, p99: float) -> str:
    """The upper statistics the sample size supports: P90 from 10, P99 from 100, else max."""
    parts = [f"P90 {p90 / 1e6:.3f} ms"] if len(dd) >= 10 else []
    label, value = _tail_label(dd), _tail_value(dd, p99)
    parts.append(f"{label} {value / 1e6:.3f} ms ({label}/P50 {value / p50:.2f})")
    return ", ".join(parts)


def _tail_metrics(p50: float, p99: float, tail_count: int) -> dict[str, Measure]:
    """The headline numbers of a tail finding, the same for iterations and named ranges."""
    return {"p50_ns": Measure(p50, "ns"), "p99_ns": Measure(p99, "ns"),
            "p99_over_p50": Measure(round(p99 / p50, 3), "ratio"),
            "tail_count": Measure(tail_count, "count")}


def _worst_windows(s: np.ndarray, e: np.ndarray, d: np.ndarray, tidx: np.ndarray, top: int = 5):
    """Windows of the slowest tail instances, slowest first."""
    order = tidx[np.argsort(-d[tidx], kind="stable")][:top]
    return [(int(s[i]), int(e[i])) for i in order]


def _frequent_names(names: pd.Series, at_least: int):
    """(name, its rows ascending) of each name at least `at_least` rows hold, in the order of
    their first row, as a groupby of the names as str gives them (rows without a name left
    out): counted on the column's codes, not a str per row hashed (340,000 emit_nvtx range
    names, nearly all held once)."""
    cat = names.array
    if not isinstance(cat, pd.Categorical):
        cat = pd.Categorical(names.astype(str))
    codes = np.asarray(cat.codes, dtype=np.int64)
    count = np.bincount(codes + 1, minlength=len(cat.categories) + 1)         # [0]: no name
    keep = np.flatnonzero((codes >= 0) & (count[codes + 1] >= at_least))
    by = keep[np.argsort(codes[keep], kind="stable")]
    starts = np.flatnonzero(np.r_[True, codes[by][1:] != codes[by][:-1]]) if len(by) else by
    bounds = np.r_[starts, len(by)]
    labels = cat.categories
    for k in np.argsort(by[starts], kind="stable"):     # groups by their first row
        yield str(labels[codes[by[starts[k]]]]), by[bounds[k]:bounds[k + 1]]

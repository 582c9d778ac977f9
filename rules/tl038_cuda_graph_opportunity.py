"""TL038 cuda-graph-opportunity."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.rule import Rule, option
from tracelint.timeline import classify, compile_names, intervals
from tracelint.whatif.edits import Fuse, Ops

#: Device time a graph still spends between two of its kernels (order of 1 µs on recent GPUs):
#: what the projected saving, which runs the region's kernels back to back, leaves out.
GRAPH_NODE_NS = 1_000


@dataclass(frozen=True)
class Options:
    min_steps: int = option(3, "Fewest iterations that must repeat a region's kernel sequence.")
    min_repeat_share: float = option(0.8, "... and the share of the iterations that must repeat it.")
    min_kernels: int = option(8, "Fewest kernels in a region worth capturing as a graph.")
    max_gap_ns: int = option(100_000, "A GPU gap longer than this between two kernels of a region is host "
                                      "work a graph does not remove (data preparation, CPU compute): it is "
                                      "not counted, and the region's graph-able runs split there.")
    min_idle_share: float = option(0.3, "A region is launch-bound when the GPU idles in its short gaps at "
                                        "least this share of its runs' time (first to last kernel of each run).")
    min_device_share: float = option(0.02, "Report when the idle inside launch-bound regions is at least this "
                                           "share of the device's active window ...")
    min_idle_ns: int = option(50_000, "... and at least this much time (ns).")
    min_rerecord_share: float = option(0.5, "Report graph re-recording when at least this share of the "
                                            "iterations after the first captures or instantiates a graph.")


class CudaGraphOpportunity(Rule):
    """A launch-bound kernel sequence repeats every iteration without a CUDA graph, or graphs are re-recorded.

    What it detects: two findings. *Opportunity* (one per device): in each iteration
    (ProfilerStep) the kernels launched one by one (not from a graph) on a stream, split into
    regions at blocking host calls (a synchronisation or blocking copy cannot be captured);
    a region whose kernel sequence (names, grid and block sizes) is identical in at least
    `min_steps` iterations and `min_repeat_share` of them, has at least `min_kernels` kernels,
    and leaves the GPU idle in the short gaps between its kernels (each at most `max_gap_ns`:
    launch overhead and the Python that issues the ops) for `min_idle_share` of its time is
    launch-bound and repeatable: the shape of work a CUDA graph replays with one launch. Longer
    gaps are host work a graph does not remove (data preparation, CPU compute): they are not
    counted and the region's graph-able runs split there. Reported when the short-gap idle is
    at least `min_device_share` of the device's active window. *Re-recording*: graph capture
    (cudaStreamBeginCapture) or instantiation (cudaGraphInstantiate*) inside at least
    `min_rerecord_share` of the iterations after the first, with two or more graphs built
    (captures or instantiations, whichever are more): the graph is rebuilt instead of replayed.
    Both findings state how graphs are used: cudaGraphLaunch replays versus plain launches,
    kernels replayed from graphs.
    Why it hurts: each launch costs the host several µs and the device a gap; when the host
    launches slower than the GPU runs the kernels, the GPU waits between them in every
    iteration. A graph replays the whole captured sequence with one call and the device runs
    it back to back. Re-capturing and instantiating a graph costs far more than the launches
    it saves (instantiation takes ms for large graphs), so a graph rebuilt every iteration is
    slower than no graph.
    Evidence: system: GPU idle in the short gaps of the repeating regions and its share of the device's
    active window, regions and iterations, graph replays versus plain launches; for
    re-recording: captures and instantiations per iteration and their host time; kernel:
    kernels per region, median kernel versus launch-call time, the most frequent names, the
    graph's own per-kernel cost left out of the projection (estimated); microarch: SM activity
    during the worst region (GPU metrics or Nsight Compute).
    Fix: capture the steady-state step: `torch.compile(model, mode="reduce-overhead")`, or
    `g = torch.cuda.CUDAGraph(); with torch.cuda.graph(g): out = step(static_in)` then copy new
    inputs into the static tensors and `g.replay()` (`torch.cuda.make_graphed_callables` for
    modules); keep shapes static (pad / bucket) so one graph serves every iteration; move
    syncs and host reads out of the captured part. For re-recording: capture once per shape
    and reuse the graph (`cudaGraphExecUpdate` instead of a new instantiate), limit distinct
    shapes with bucketing; under torch.compile check `TORCH_LOGS=cudagraphs` for the reason.
    Counter-example (when it does not apply): kernels already replayed from a graph (counted
    as replays, never as an opportunity); sequences that change every iteration (dynamic shapes,
    data-dependent control flow) where a graph would be re-captured; GPU-bound regions (the
    host runs ahead, no idle between kernels); a first capture in the first recorded iteration;
    one graph built once (one capture and its instantiation, which may fall in two iterations).
    TL002 small-op-storm reports the same idle from the kernel-size side: when both fire, their
    fixes are replayed together once in the report's combined saving.
    """

    id = "TL038"
    slug = "cuda-graph-opportunity"
    title = "Repeating launch-bound region not captured as a CUDA graph"
    severity = Severity.WARNING
    groups = frozenset({"latency", "host", "launch"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    needs = frozenset({"kernels"})
    Options = Options

    # ----- shared facts ---------------------------------------------------------------------
    def _steps(self, ctx) -> pd.DataFrame:
        r = ctx.tl.ranges
        return r[classify.in_labels(r["kind"], ("step",))].sort_values("start") if len(r) else r

    def _graph_use(self, ctx) -> dict:
        """Graph API roles of the calls (a categorical, one byte a call), whether each is a graph
        replay, and the counts of replays and plain launches: made once per check and passed
        along, never kept on self (the runner keeps rule instances through the what-if's
        memory peak: tests/test_rule_instances_memory.py)."""
        api = ctx.tl.api_calls
        role = (classify.classify_categorical(api["name"], lambda n: compile_names.graph_api(n) or "")
                if len(api) else pd.Categorical([]))
        replay = np.asarray(role == "launch", bool)
        plain = classify.in_labels(ctx.tl.api_role, ("launch",)) & ~replay
        return {"role": role, "replay": replay, "replays": int(replay.sum()), "plain": int(plain.sum())}

    def _regions(self, ctx, use: dict) -> pd.DataFrame:
        """One row per (step, device, stream, segment) of plain launches: signature, rows."""
        tl = ctx.tl
        k, api, steps = tl.kernels, tl.api_calls, self._steps(ctx)
        if len(k) == 0 or len(steps) == 0:
            return pd.DataFrame()
        li = ctx.launch_index("kernels")
        linked = li >= 0
        a_start = api["start"].to_numpy() if len(api) else np.zeros(0, np.int64)
        t = np.where(linked, a_start[np.maximum(li, 0)] if len(api) else 0, k["start"].to_numpy())
        by_graph = linked & use["replay"][np.maximum(li, 0)] if len(api) else np.zeros(len(k), bool)
        plain = ~(k["graph_launched"].to_numpy(dtype=bool) | by_graph)
        ss, se = steps["start"].to_numpy(), steps["end"].to_numpy()
        pos = np.searchsorted(ss, t, side="right") - 1
        pos = np.where((pos >= 0) & (t < se[np.maximum(pos, 0)]), pos, -1)
        blk_t = np.sort(a_start[np.asarray(classify.classify_categorical(api["name"], classify.blocks_host),
                                           dtype=bool)]) if len(api) else np.zeros(0, np.int64)
        seg = np.searchsorted(blk_t, t) - np.searchsorted(blk_t, ss[np.maximum(pos, 0)])
        keep = plain & (pos >= 0)
        sig_cols = ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
        df = pd.DataFrame({"row": np.flatnonzero(keep), "pos": pos[keep], "seg": seg[keep],
                           "device": k["device"].to_numpy()[keep], "stream": k["stream"].to_numpy()[keep],
                           "start": k["start"].to_numpy()[keep], "end": k["end"].to_numpy()[keep],
                           "name": k["name"].cat.codes.to_numpy()[keep] if hasattr(k["name"], "cat")
                           else pd.factorize(k["name"])[0][keep]})
        for c in sig_cols:
            df[c] = k[c].to_numpy()[keep]
        df = df.sort_values(["device", "stream", "pos", "seg", "start"])
        # each (device, stream, pos, seg) is one run of the sorted rows: sliced, not grouped
        key = df[["device", "stream", "pos", "seg"]].to_numpy(np.int64)
        cut = np.flatnonzero((key[1:] != key[:-1]).any(axis=1)) + 1
        sigs = df[["name"] + sig_cols].to_numpy(np.int64)
        row, start, end = (df[c].to_numpy() for c in ("row", "start", "end"))
        out = []
        for lo, hi in zip(np.r_[0, cut], np.r_[cut, len(df)]) if len(df) else ():
            d, s, p, g = key[lo].tolist()
            out.append({"device": d, "stream": s, "pos": p, "seg": g,
                        "sig": sigs[lo:hi].tobytes(),        # exact, no hash collisions
                        "n": int(hi - lo), "start": int(start[lo:hi].min()),
                        "end": int(end[lo:hi].max()), "rows": tuple(row[lo:hi].tolist())})
        return pd.DataFrame(out)

    def _candidates(self, ctx, use: dict) -> pd.DataFrame:
        """Region instances that repeat, are big enough and launch-bound, with their idle."""
        opt = self.options
        reg = self._regions(ctx, use)
        n_steps = len(self._steps(ctx))
        if len(reg) == 0:
            return reg
        keep = []
        for _, grp in reg.groupby(["device", "stream", "seg"], sort=False):
            sig, count = Counter(grp["sig"]).most_common(1)[0]
            if count < opt.min_steps or count < opt.min_repeat_share * n_steps:
                continue
            same = grp[(grp["sig"] == sig) & (grp["n"] >= opt.min_kernels)]
            keep.append(same)
        if not keep:
            return reg.iloc[:0]
        c = pd.concat(keep)
        k = ctx.tl.kernels
        ks, ke = k["start"].to_numpy(), k["end"].to_numpy()
        devices = c["device"].to_numpy()
        window, runs, gaps = [], [], []
        for i, rows in enumerate(c["rows"]):
            r = np.asarray(rows, dtype=np.int64)          # in start order (see _regions)
            lo, hi = ke[r[:-1]], ks[r[1:]]                # the gap before each next kernel
            big = (hi - lo) > opt.max_gap_ns              # host work a graph would not remove
            small = ~big & (hi > lo)
            gaps.append((lo[small], hi[small]))
            # the runs between big gaps, of two kernels or more: [a, b) of r
            bounds = np.r_[0, np.flatnonzero(big) + 1, len(r)]
            long = np.flatnonzero(np.diff(bounds) >= 2)
            a, b = bounds[long], bounds[long + 1]
            window.append(int((np.maximum.reduceat(ke[r], bounds[:-1])[long] - ks[r[a]]).sum()))
            listed = r.tolist()
            runs.append(tuple(tuple(listed[x:y]) for x, y in zip(a.tolist(), b.tolist())))
        idle = _idle_in_gaps(ctx, devices, gaps)
        c = c.assign(idle=idle, window=np.asarray(window, np.int64), runs=runs)
        return c[(c["idle"] > 0) & (c["idle"] >= opt.min_idle_share * np.maximum(c["window"], 1))]

    # ----- the rule -------------------------------------------------------------------------
    def check(self, ctx):
        tl, opt = ctx.tl, self.options
        use = self._graph_use(ctx)
        c = self._candidates(ctx, use)
        self._checked = (ctx, c)          # fix_edits reads the same regions (0.2 s to redo)
        for d in sorted(c["device"].unique()) if len(c) else []:
            cd = c[c["device"] == d]
            idle = int(cd["idle"].sum())
            bs, be = tl.busy_intervals(int(d))
            active = int(be[-1] - bs[0]) if len(bs) else 0
            if active <= 0 or idle < opt.min_idle_ns or idle < opt.min_device_share * active:
                continue
            yield self._opportunity(ctx, int(d), cd, idle, active, use)
        hit = self._rerecord(ctx, use)
        if hit is not None:
            yield hit

    def fix_edits(self, finding, ctx):
        """Opportunity: each repeating region runs as one launch (a graph replay): Fuse of its
        kernels. Re-recording: no edit (see the saving note)."""
        if not finding.key.startswith("device"):
            return None, ("which launches a re-capture records is not in the trace, so the replay cannot "
                          "remove them; the capture and instantiation time is in the evidence")
        checked = getattr(self, "_checked", None)
        c = (checked[1] if checked is not None and checked[0] is ctx
             else self._candidates(ctx, self._graph_use(ctx)))
        c = c[c["device"] == finding.where.device] if len(c) else c
        if not len(c):
            return None, "no repeating region left"
        # Fuse joins consecutive selected kernels on a stream, and the runs of successive
        # iterations are consecutive when nothing else runs between them: alternate the runs of
        # each stream between two edits so that no fused run spans two of them (two iterations,
        # both sides of a sync or of a long host gap): the same as one edit per run.
        runs = pd.DataFrame([(d, st, run[0], run) for d, st, rr in zip(c["device"], c["stream"], c["runs"])
                             for run in rr], columns=["device", "stream", "first", "run"])
        if not len(runs):
            return None, "no repeating region left"
        runs["start"] = ctx.tl.kernels["start"].to_numpy()[runs["first"].to_numpy()]
        runs = runs.sort_values(["device", "stream", "start"])
        color = runs.groupby(["device", "stream"]).cumcount().to_numpy() % 2
        edits = [Fuse(ops=Ops(kernel_rows=tuple(i for run in runs["run"].to_numpy()[color == k] for i in run)),
                      min_run=2) for k in (0, 1) if (color == k).any()]
        return edits, ""

    def _opportunity(self, ctx, d, cd, idle, active, use):
        tl = ctx.tl
        k = tl.kernels
        rows = np.sort(np.concatenate([np.asarray(rs, np.int64) for rs in cd["rows"]]))
        dur = (k["end"] - k["start"]).to_numpy()[rows]
        li = ctx.launch_index("kernels")[rows]
        api = tl.api_calls
        ldur = (api["end"] - api["start"]).to_numpy()[li[li >= 0]] if len(api) else np.zeros(0)
        n_regions = len(cd.groupby(["stream", "seg"]))
        n_steps = int(cd["pos"].nunique())
        window = int(cd["window"].sum())
        worst = cd.iloc[int(np.argmax(cd["idle"].to_numpy()))]
        r0 = int(worst["rows"][0])
        l0 = int(ctx.launch_index("kernels")[r0])
        where = ctx.where_for_api(l0) if l0 >= 0 else Where(rank=tl.meta.rank)
        where.device, where.stream = d, int(worst["stream"])
        where.start_ns, where.end_ns = int(worst["start"]), int(worst["end"])
        names = Counter(map(str, k["name"].iloc[list(worst["rows"])])).most_common(3)
        where.kernel = names[0][0]
        per_region = float(np.median(cd["n"]))
        node_cost = len(rows) * GRAPH_NODE_NS
        system = Evidence.measured(
            f"{n_regions} kernel sequence(s) repeat identically in {n_steps} iterations; the GPU idles "
            f"{idle / 1e6:.3f} ms in gaps of at most {self.options.max_gap_ns / 1e3:.0f} µs between their kernels ({idle / max(window, 1):.0%} of their time, {idle / active:.1%} "
            f"of the device's active window). Graphs in the trace: {use['replays']} cudaGraphLaunch "
            f"replay(s) vs {use['plain']} plain launches.",
            region_idle_ns=Measure(idle, "ns"), regions=Measure(n_regions, "count"),
            iterations=Measure(n_steps, "count"), region_idle_share=Measure(round(idle / max(window, 1), 4), "ratio"),
            device_idle_share=Measure(round(idle / active, 4), "ratio"),
            graph_launches=Measure(use["replays"], "count"), plain_launches=Measure(use["plain"], "count"))
        med_l = float(np.median(ldur)) if len(ldur) else None
        kernel = Evidence.measured(
            f"{len(rows)} kernels in the repeating regions ({per_region:.0f} per region), median kernel "
            f"{np.median(dur) / 1e3:.1f} µs vs median launch call "
            + (f"{med_l / 1e3:.1f} µs" if med_l is not None else "unknown (launches not linked)")
            + "; most frequent in the worst region: " + ", ".join(f"`{n[:80]}` ×{c}" for n, c in names)
            + f". A graph still spends about {GRAPH_NODE_NS / 1e3:.0f} µs per kernel on the device "
            f"(~{node_cost / 1e6:.3f} ms here), which the projected saving does not subtract.",
            region_kernels=Measure(len(rows), "count"), kernels_per_region=Measure(per_region, "count"),
            median_kernel_ns=Measure(float(np.median(dur)), "ns"),
            **({"median_launch_ns": Measure(med_l, "ns")} if med_l is not None else {}),
            graph_node_cost_estimate_ns=Measure(node_cost, "ns"))
        micro = ctx.microarch(d, int(worst["start"]), int(worst["end"]), kernels=[n for n, _ in names],
                              expect={r"SM.?Active|SMs Active|sm__throughput": "low"})
        return self.finding(
            ctx, message=(f"GPU {d}: {n_regions} launch-bound kernel sequence(s) repeat in {n_steps} iterations "
                          f"without a CUDA graph; the GPU idles {idle / 1e6:.2f} ms between their kernels"),
            impact_ns=idle, where=where, occurrences=len(cd),
            windows=[(int(s), int(e)) for s, e in zip(cd["start"], cd["end"])][:5],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            metrics={"region_idle_ns": Measure(idle, "ns"), "regions": Measure(n_regions, "count"),
                     "region_kernels": Measure(len(rows), "count"),
                     "graph_launches": Measure(use["replays"], "count")},
            key=f"device{d}")

    def _rerecord(self, ctx, use):
        tl, opt = ctx.tl, self.options
        api, steps = tl.api_calls, self._steps(ctx)
        if len(api) == 0 or len(steps) < 2:
            return None
        role = use["role"]
        a_s, a_e = api["start"].to_numpy(), api["end"].to_numpy()
        ss, se = steps["start"].to_numpy(), steps["end"].to_numpy()
        pos = np.searchsorted(ss, a_s, side="right") - 1
        pos = np.where((pos >= 0) & (a_s < se[np.maximum(pos, 0)]), pos, -1)
        build = classify.in_labels(role, ("capture_begin", "instantiate")) & (pos >= 1)
        later = len(steps) - 1
        in_steps = sorted(set(pos[build].tolist()))
        built = max(int(((role == "capture_begin") & (pos >= 1)).sum()),
                    int(((role == "instantiate") & (pos >= 1)).sum()))   # graphs, not calls
        if not build.any() or len(in_steps) < max(1, opt.min_rerecord_share * later) or built < 2:
            return None
        # host time rebuilding: capture windows (begin .. matching end) and instantiate / update calls
        iv_s, iv_e = [], []
        tids = api["tid"].to_numpy()
        begins = (role == "capture_begin") & (pos >= 1)      # every call's mask, made once
        capture_end = role == "capture_end"
        for tid in np.unique(tids[begins]):
            ends = np.flatnonzero(capture_end & (tids == tid))
            ends = ends[np.argsort(a_s[ends], kind="stable")]
            for i in np.flatnonzero(begins & (tids == tid)):
                k = np.searchsorted(a_s[ends], a_e[i])      # the first EndCapture after it
                iv_s.append(a_s[i])
                iv_e.append(a_e[ends[k]] if k < len(ends) else a_e[i])
        other = classify.in_labels(role, ("instantiate", "update")) & (pos >= 1)
        iv_s += a_s[other].tolist()
        iv_e += a_e[other].tolist()
        ms, me = intervals.merge(np.asarray(iv_s, np.int64), np.asarray(iv_e, np.int64))
        cost = int((me - ms).sum())
        n_cap = int(begins.sum())
        n_inst = int(((role == "instantiate") & (pos >= 1)).sum())
        first = int(np.flatnonzero(build)[0])
        where = ctx.where_for_api(first, start_ns=int(a_s[first]), end_ns=int(a_e[first]))
        facts = {"rerecord_ns": Measure(cost, "ns"), "captures": Measure(n_cap, "count"),
                 "instantiations": Measure(n_inst, "count"),
                 "iterations_rebuilding": Measure(len(in_steps), "count"),
                 "graph_launches": Measure(use["replays"], "count"),
                 "plain_launches": Measure(use["plain"], "count")}
        system = Evidence.measured(
            f"{n_cap} capture(s) and {n_inst} instantiation(s) in {len(in_steps)} of the {later} iterations after "
            f"the first take {cost / 1e6:.3f} ms of host time; {use['replays']} cudaGraphLaunch replay(s) vs "
            f"{use['plain']} plain launches.", **facts)
        kernel = Evidence.not_applicable("graph construction is host-side work")
        return self.finding(
            ctx, message=(f"CUDA graphs are re-recorded inside the loop: {n_cap} capture(s), {n_inst} "
                          f"instantiation(s) in {len(in_steps)} iterations, {cost / 1e6:.2f} ms of host time"),
            impact_ns=cost, where=where, occurrences=n_cap + n_inst,
            windows=[(int(s), int(e)) for s, e in zip(ms, me)][:5],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel,
                      Layer.MICROARCH: Evidence.not_applicable("graph construction is host-side work")},
            metrics=facts, key="graph-rerecord")


def _idle_in_gaps(ctx, devices: np.ndarray, gaps: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Per region: the ns of its small gaps [lo, hi) in which its device is idle (the gaps'
    length minus the device's busy time in them). One busy-time query per device for all
    its regions' gaps, summed back per region."""
    out = np.zeros(len(gaps), np.int64)
    for d in np.unique(devices).tolist():
        mine = np.flatnonzero(devices == d)
        lo = np.concatenate([gaps[i][0] for i in mine])
        hi = np.concatenate([gaps[i][1] for i in mine])
        free = (hi - lo) - ctx.busy_in(int(d), lo, hi)
        owner = np.repeat(mine, [len(gaps[i][0]) for i in mine])
        np.add.at(out, owner, free.astype(np.int64))
    return out

"""TL037 torch-compile-recompile."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelint.engine.finding import Evidence, Layer, Measure, Severity
from tracelint.engine.location import is_library
from tracelint.engine.rule import Rule, option
from tracelint.timeline import classify, compile_names, intervals
from tracelint.whatif.edits import RemoveHostWork


@dataclass(frozen=True)
class Options:
    min_compile_ns: int = option(10_000_000, "Report compilation inside iterations from this much host time (ns).")
    min_compile_share: float = option(0.01, "... and from this share of the trace's span.")
    min_break_share: float = option(0.5, "Report graph breaks when at least this share of the iterations "
                                         "(of the compiled calls, without iterations) has one.")
    min_breaks: int = option(2, "... and at least this many graph breaks in the trace.")


class TorchCompileRecompile(Rule):
    """torch.compile recompiling inside the training loop, and graph breaks in compiled code.

    What it detects: two findings from the ranges torch.compile records (Kineto, or NVTX under
    emit_nvtx). *Recompilation*: Dynamo/Inductor compile ranges (`dynamo`,
    `entire_frame_compile`, `backend_compile`, `inductor_compile`, `... (dynamo_timed)`) inside
    an iteration after the first recorded one, or whose compile id (`dynamo_data:
    compile_id=F/C`, `Torch-Compiled Region: F/C`) has C > 0, i.e. frame F compiled again
    because a guard failed (new shape, dtype, Python value). A first compilation in the first
    recorded iteration is warm-up and not reported. *Graph breaks*: a `Torch-Compiled Region`
    with other regions nested in it: Dynamo stopped the graph, ran code eagerly and resumed in a
    new frame (`torch_dynamo_resume_in_<fn>_at_<line>`), in at least `min_break_share` of the
    iterations.
    Why it hurts: a recompilation is seconds of host time inside the step, during which no GPU
    work is launched, and it repeats for every new shape until `recompile_limit` is hit and
    Dynamo falls back to eager for that frame. A graph break splits the graph: nothing is
    fused or overlapped across it, the eager code between graphs launches its own kernels, and
    a break caused by `.item()` / a branch on a tensor value also waits for the device.
    Evidence: system: compile time inside iterations and its share of the span, compilations,
    recompilations, distinct compile ids and frames, TorchDynamo cache-lookup time per
    iteration; for breaks: breaks per iteration, compiled regions per iteration, eager host time
    between the graphs; kernel: GPU idle during the compilations, launch and blocking calls
    issued by the eager code between graphs (when the trace has GPU activity); microarch: not
    applicable (host-side).
    Fix: find the cause with `TORCH_LOGS=recompiles,graph_breaks python train.py` or
    `torch._dynamo.explain(fn)(*args)`; for shape recompiles mark the varying dimension
    dynamic (`torch._dynamo.mark_dynamic(x, 0)`, `torch.compile(dynamic=True)`) or pad/bucket
    the shapes; keep Python scalars that change per step out of the graph (pass them as
    tensors); remove breaks (`.item()`, `print`, data-dependent branches -> `torch.where`,
    `torch._check`, `capture_scalar_outputs`) and check with `torch.compile(fullgraph=True)`.
    Counter-example (when it does not apply): the one compilation of each frame at the start
    (warm-up, not reported); a deliberate break around unsupported code that costs little next
    to the graphs; a short benchmark that profiles only the first iterations.
    """

    id = "TL037"
    slug = "torch-compile-recompile"
    title = "torch.compile recompiles in the loop / graph breaks"
    severity = Severity.WARNING
    groups = frozenset({"framework", "host", "compile"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL})
    needs = frozenset({"ranges"})
    frameworks = frozenset({"pytorch"})
    Options = Options

    # ----- shared facts ---------------------------------------------------------------------
    def _facts(self, ctx) -> dict | None:
        r = ctx.tl.ranges
        if len(r) == 0:
            return None
        role = np.asarray(classify.classify_categorical(r["name"], lambda n: compile_names.torch_compile_role(n) or ""),
                          dtype=object)
        host = classify.in_labels(r["kind"], compile_names.HOST_KINDS)
        if not ((role != "") & host).any():
            return None
        cid = classify.classify_categorical(r["name"], lambda n: "{}/{}".format(*compile_names.compile_id(n))
                                            if compile_names.compile_id(n) else "")
        steps = r[r["kind"].astype(str).to_numpy() == "step"].sort_values("start")
        return {"r": r, "role": role, "host": host, "cid": np.asarray(cid, dtype=object), "steps": steps}

    def _compiles(self, ctx, f) -> pd.DataFrame:
        """One row per compilation (merged compile ranges on a thread): start, end, pid, tid,
        compile id (or ''), recompile flag, step position (-1 outside steps), flagged, rows."""
        r, role, host, cid = f["r"], f["role"], f["host"], f["cid"]
        out = []
        comp = host & (role == "compile")
        for (pid, tid), g in r[comp].groupby(["pid", "tid"], observed=True):
            ms, me = intervals.merge(g["start"].to_numpy(), g["end"].to_numpy())
            on = (r["pid"].to_numpy() == pid) & (r["tid"].to_numpy() == tid)
            for s, e in zip(ms, me):
                inside = on & (r["start"].to_numpy() >= s) & (r["start"].to_numpy() < e)
                ids = [c for c in cid[inside & (role == "compile_data")] if c]
                out.append({"pid": int(pid), "tid": int(tid), "start": int(s), "end": int(e),
                            "cid": ids[0] if ids else "",
                            "rows": tuple(np.flatnonzero(inside & comp).tolist())})
        c = pd.DataFrame(out, columns=["pid", "tid", "start", "end", "cid", "rows"])
        st = f["steps"]
        ss, se = st["start"].to_numpy(), st["end"].to_numpy()
        pos = np.searchsorted(ss, c["start"].to_numpy(), side="right") - 1
        ok = (pos >= 0) & (c["start"].to_numpy() < se[np.maximum(pos, 0)]) if len(ss) else np.zeros(len(c), bool)
        c["step_pos"] = np.where(ok, pos, -1)
        c["recompile"] = [bool(x) and int(x.split("/")[1]) > 0 for x in c["cid"]]
        c["flagged"] = c["recompile"] | (c["step_pos"] >= 1)
        return c

    # ----- the rule -------------------------------------------------------------------------
    def check(self, ctx):
        f = self._facts(ctx)
        if f is None:
            return
        c = self._compiles(ctx, f)
        hit = self._recompile_finding(ctx, f, c)
        if hit is not None:
            yield hit
        hit = self._break_finding(ctx, f)
        if hit is not None:
            yield hit

    def fix_edits(self, finding, ctx):
        """Recompiles: the host work of the flagged compilations disappears (the fix compiles
        once, before the loop). Graph breaks: no edit (see the saving note)."""
        if finding.key != "recompile":
            return None, ("a graph break costs the fusion and overlap lost across it and the eager "
                          "code's launches; the replay cannot model the joined graph, so no saving "
                          "is projected (the eager time between graphs is in the evidence)")
        f = self._facts(ctx)
        c = self._compiles(ctx, f) if f is not None else pd.DataFrame()
        rows = tuple(sorted({i for rs in c[c["flagged"]]["rows"] for i in rs})) if len(c) else ()
        return ([RemoveHostWork(rows=rows)], "") if rows else (None, "no compilation inside the loop")

    def _recompile_finding(self, ctx, f, c):
        tl, opt = ctx.tl, self.options
        if len(c) == 0:
            return None
        flagged = c[c["flagged"]]
        dur = (flagged["end"] - flagged["start"]).to_numpy()
        total = int(dur.sum())
        span = max(tl.span_ns, 1)
        if total < opt.min_compile_ns or total < opt.min_compile_share * span:
            return None
        role, cid = f["role"], f["cid"]
        ids = sorted({x for x in cid[(role == "region") | (role == "compile_data")] if x})
        frames = sorted({x.split("/")[0] for x in ids})
        n_re = int(flagged["recompile"].sum())
        steps = f["steps"]
        in_steps = sorted({int(steps["step"].iat[p]) for p in flagged["step_pos"] if p >= 0})
        lookup = self._lookup_per_step(f)
        # point at the frame compiled most often in the loop (then: longest), at its longest compile
        frame = np.array([x.split("/")[0] if x else "?" for x in flagged["cid"]], dtype=object)
        per_frame = {fr: int(dur[frame == fr].sum()) for fr in set(frame)}
        top = max(per_frame, key=lambda k: (k != "?", int((frame == k).sum()), per_frame[k]))
        pick = np.flatnonzero(frame == top)
        worst = flagged.iloc[int(pick[np.argmax(dur[pick])])]
        where = ctx.where_for_host(worst["pid"], worst["tid"], int(worst["start"]),
                                   start_ns=int(worst["start"]), end_ns=int(worst["end"]))
        self._compiled_function(ctx, f, worst, where)
        facts = {"compile_in_loop_ns": Measure(total, "ns"), "compilations": Measure(len(flagged), "count"),
                 "recompilations": Measure(n_re, "count"),
                 "compile_share": Measure(round(total / span, 4), "ratio"),
                 "distinct_compile_ids": Measure(len(ids), "count"), "frames": Measure(len(frames), "count"),
                 "iterations_with_compile": Measure(len(in_steps), "count")}
        if lookup is not None:
            facts["cache_lookup_per_iteration_ns"] = Measure(lookup, "ns")
        id_txt = f" (compile ids {', '.join(ids[:8])})" if ids else ""
        if top != "?":
            id_txt += (f"; frame {top} compiles most: {len(pick)}× for {per_frame[top] / 1e6:.1f} ms"
                       + (f" ({where.function}, {where.file}:{where.line})" if where.file else ""))
        system = Evidence.measured(
            f"{len(flagged)} compilation(s) inside the loop take {total / 1e6:.1f} ms of host time "
            f"({total / span:.1%} of the span), {n_re} of them recompilations (compile id F/C with "
            f"C > 0){id_txt}; iterations with a compilation: {in_steps or 'none recorded'}"
            + (f"; TorchDynamo cache lookup {lookup / 1e3:.1f} µs per iteration (median)." if lookup is not None
               else "."), **facts)
        kernel = self._gpu_idle_evidence(ctx, flagged)
        return self.finding(
            ctx, message=(f"torch.compile compiles {len(flagged)}× inside the loop ({n_re} recompilation(s)), "
                          f"{total / 1e6:.1f} ms of host time ({total / span:.1%} of the span)"),
            impact_ns=total, where=where, occurrences=len(flagged),
            windows=[(int(s), int(e)) for s, e in zip(flagged["start"], flagged["end"])][:5],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel,
                      Layer.MICROARCH: Evidence.not_applicable("compilation runs on the host")},
            metrics=facts, key="recompile")

    def _lookup_per_step(self, f) -> float | None:
        r, role, steps = f["r"], f["role"], f["steps"]
        cl = r[(role == "cache_lookup") & f["host"]]
        if len(cl) == 0 or len(steps) == 0:
            return None
        s = cl["start"].to_numpy()
        per = [int((cl["end"] - cl["start"]).to_numpy()[(s >= a) & (s < b)].sum())
               for a, b in zip(steps["start"], steps["end"])]
        return float(np.median(per))

    def _compiled_function(self, ctx, f, comp, where) -> None:
        """Point at the compiled function: the first user frame inside the Torch-Compiled
        Region that ran the compilation's code (same compile id, else the next region)."""
        r, role, cid = f["r"], f["role"], f["cid"]
        reg = (role == "region") & (r["pid"].to_numpy() == comp["pid"]) & (r["tid"].to_numpy() == comp["tid"]) \
            & (r["start"].to_numpy() >= comp["end"])
        same = reg & (cid == comp["cid"]) if comp["cid"] else reg
        cand = np.flatnonzero(same if same.any() else reg)
        if len(cand) == 0:
            return
        i = cand[np.argmin(r["start"].to_numpy()[cand])]
        fr = ctx.tl.python_frames
        if len(fr) == 0:
            return
        s, e = int(r["start"].iat[i]), int(r["end"].iat[i])
        inner = fr[(fr["pid"] == comp["pid"]) & (fr["tid"] == comp["tid"]) & (fr["start"] >= s) & (fr["end"] <= e)]
        inner = inner[[not is_library(str(x)) for x in inner["file"]]].sort_values("start")
        if len(inner):
            row = inner.iloc[0]
            where.file, where.line, where.function = str(row["file"]), int(row["line"]), str(row["function"])
            where.line_kind, where.callee, where.library = "def", None, None
            resume = compile_names.dynamo_resume(where.function)
            if resume is not None:    # the code after a graph break: name the break's line
                where.function, where.line, where.line_kind = resume[0], resume[1], "call"

    def _gpu_idle_evidence(self, ctx, flagged) -> Evidence:
        tl = ctx.tl
        if not tl.has_gpu_activity:
            return Evidence.not_captured("no GPU activity in the trace: how long the GPU waited for the "
                                         "compilations is not measured", ctx.capture_hint("cuda"))
        s, e = flagged["start"].to_numpy(), flagged["end"].to_numpy()
        idle = np.full(len(s), np.iinfo(np.int64).max, dtype=np.int64)
        for d in tl.devices_in_use():
            idle = np.minimum(idle, (e - s) - ctx.busy_in(d, s, e))
        idle_ns = int(idle.sum())
        return Evidence.measured(f"the GPU is idle {idle_ns / 1e6:.1f} ms during the compilations inside the loop.",
                                 gpu_idle_ns=Measure(idle_ns, "ns"))

    # ----- graph breaks ---------------------------------------------------------------------
    def _break_finding(self, ctx, f):
        opt = self.options
        r, role = f["r"], f["role"]
        reg = np.flatnonzero((role == "region") & f["host"])
        if len(reg) < 2:
            return None
        rs, re_ = r["start"].to_numpy(), r["end"].to_numpy()
        pid, tid = r["pid"].to_numpy(), r["tid"].to_numpy()
        outer, nested = [], {}
        # per thread, in (start, longest first) order: a region inside the current outermost
        # one is nested in it (one pass, no pairwise comparison)
        for i in reg[np.lexsort((-re_[reg], rs[reg], tid[reg], pid[reg]))]:
            top = outer[-1] if outer else None
            if top is not None and (pid[top], tid[top]) == (pid[i], tid[i]) and re_[i] <= re_[top]:
                nested.setdefault(top, []).append(i)
            else:
                outer.append(i)
        broken = [i for i in outer if nested.get(i)]
        n_breaks = sum(len(nested[i]) for i in broken)
        if n_breaks < opt.min_breaks:
            return None
        steps = f["steps"]
        ss, se = steps["start"].to_numpy(), steps["end"].to_numpy()
        if len(steps):
            with_break = {p for i in broken for p in np.flatnonzero((ss <= rs[i]) & (rs[i] < se))}
            share, unit = len(with_break) / len(steps), "iterations"
        else:
            with_break, share, unit = set(), len(broken) / max(len(outer), 1), "compiled calls"
        if share < opt.min_break_share:
            return None
        eager_ns, eager_iv = self._eager_between(f, broken, nested)
        regions_per_step = (len(reg) / len(steps)) if len(steps) else None
        sites = Counter(self._break_sites(ctx, r, broken, nested))
        top = sites.most_common(1)[0][0] if sites else None
        i0 = broken[0]
        where = ctx.where_for_host(int(pid[i0]), int(tid[i0]), int(rs[nested[i0][0]]),
                                   start_ns=int(rs[i0]), end_ns=int(re_[i0]))
        if top is not None:
            where.file, where.line, where.function = top
            where.line_kind, where.callee, where.library = "call", None, None
        facts = {"graph_breaks": Measure(n_breaks, "count"),
                 "broken_calls": Measure(len(broken), "count"),
                 "break_share": Measure(round(share, 4), "ratio"),
                 "eager_between_graphs_ns": Measure(eager_ns, "ns")}
        if regions_per_step is not None:
            facts["regions_per_iteration"] = Measure(round(regions_per_step, 2), "count")
        site_txt = ", ".join(f"{fl}:{ln} ({fn}) ×{k}" for (fl, ln, fn), k in sites.most_common(3))
        system = Evidence.measured(
            f"{n_breaks} graph break(s): {len(broken)} compiled call(s) ran a second graph nested in the first "
            f"({share:.0%} of the {unit}); {eager_ns / 1e6:.3f} ms of eager host work between the graphs"
            + (f"; {regions_per_step:.1f} Torch-Compiled Regions per iteration" if regions_per_step else "")
            + (f". Break sites (Dynamo resume functions): {site_txt}." if site_txt else "."), **facts)
        kernel = self._eager_gpu_evidence(ctx, eager_iv)
        return self.finding(
            ctx, message=(f"torch.compile graph breaks: {n_breaks} break(s) in {len(broken)} compiled call(s) "
                          f"({share:.0%} of the {unit}), {eager_ns / 1e6:.3f} ms eager between graphs"),
            impact_ns=eager_ns, where=where, occurrences=n_breaks,
            windows=[(int(rs[i]), int(re_[i])) for i in broken[:5]],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel,
                      Layer.MICROARCH: Evidence.not_applicable("a graph break is a host-side property of the program")},
            metrics=facts, key="graph-break")

    def _eager_between(self, f, broken, nested) -> tuple[int, list]:
        """Host time of eager framework ops inside a broken region, outside its graphs, nested
        regions, cache lookups and compilations; (ns, [(thread, starts, ends)])."""
        r, role = f["r"], f["role"]
        rs, re_ = r["start"].to_numpy(), r["end"].to_numpy()
        kind = r["kind"].astype(str).to_numpy()
        pid, tid = r["pid"].to_numpy(), r["tid"].to_numpy()
        excl_m = np.isin(role, ("graph_call", "region", "cache_lookup", "compile"))
        op_m = np.isin(kind, ("op", "nvtx")) & (role == "") & ~np.asarray(
            classify.classify_categorical(r["name"], compile_names.is_dynamo_wrapper), dtype=bool)
        order = np.argsort(rs, kind="stable")
        sorted_s = rs[order]
        total, out = 0, []
        for i in broken:
            near = order[np.searchsorted(sorted_s, rs[i]):np.searchsorted(sorted_s, re_[i], side="left")]
            near = near[(pid[near] == pid[i]) & (tid[near] == tid[i]) & (re_[near] <= re_[i]) & (near != i)]
            excl = near[excl_m[near]]
            xs, xe = intervals.merge(rs[excl], re_[excl])
            cand = near[op_m[near]]
            cand = cand[intervals.overlap_each(rs[cand], re_[cand], xs, xe) == 0]
            es, ee = intervals.merge(rs[cand], re_[cand])
            total += int((ee - es).sum())
            out.append(((int(pid[i]), int(tid[i])), es, ee))
        return total, out

    def _break_sites(self, ctx, r, broken, nested):
        """(file, line, function) of each break, from the resume function's Python frame."""
        fr = ctx.tl.python_frames
        if len(fr) == 0:
            return []
        fr = fr.sort_values("start", kind="stable")
        f_start = fr["start"].to_numpy()
        out = []
        for i in broken:
            for j in nested[i]:
                s, e = int(r["start"].iat[j]), int(r["end"].iat[j])
                inner = fr.iloc[np.searchsorted(f_start, s):np.searchsorted(f_start, e)]
                inner = inner[(inner["pid"] == r["pid"].iat[j]) & (inner["tid"] == r["tid"].iat[j])
                              & (inner["end"] <= e)]
                for file, fn in zip(inner["file"], inner["function"]):
                    res = compile_names.dynamo_resume(str(fn))
                    if res is not None:
                        out.append((str(file), res[1], res[0]))
                        break
        return out

    def _eager_gpu_evidence(self, ctx, eager_iv) -> Evidence:
        tl = ctx.tl
        api = tl.api_calls
        if not tl.has_gpu_activity or len(api) == 0:
            return Evidence.not_captured("no CUDA API calls in the trace: the launches and waits of the eager "
                                         "code between graphs are not measured", ctx.capture_hint("cuda"))
        names = api["name"].astype(str).to_numpy()
        a_s = api["start"].to_numpy()
        launches = blocking = 0
        for (pid, tid), es, ee in eager_iv:
            on = np.flatnonzero((api["pid"].to_numpy() == pid) & (api["tid"].to_numpy() == tid))
            k = np.searchsorted(es, a_s[on], side="right") - 1
            ins = on[(k >= 0) & (a_s[on] < ee[np.maximum(k, 0)])] if len(es) else on[:0]
            launches += sum(classify.api_role(classify.strip_api_version(n)) == "launch" for n in names[ins])
            blocking += sum(classify.blocks_host(classify.strip_api_version(n)) for n in names[ins])
        return Evidence.measured(
            f"the eager code between graphs issues {launches} kernel launch(es) and {blocking} blocking "
            f"call(s) (a read-back such as .item() waits for the device).",
            eager_launches=Measure(launches, "count"), eager_blocking_calls=Measure(blocking, "count"))

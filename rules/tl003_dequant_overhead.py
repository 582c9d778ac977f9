"""TL003 dequant-overhead."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelint.engine.finding import Evidence, Layer, Measure, Severity, Where
from tracelint.engine.rule import Rule, option
from tracelint.timeline import classify, intervals
from tracelint.timeline.nesting import nest
from tracelint.whatif.edits import Ops, Scale


RANGE_KINDS = ("annotation", "nvtx")


def _classes(k: pd.DataFrame) -> np.ndarray:
    """Kernel classes (classify.kernel_class) with library prefixes that fake a class removed."""
    cats = k["name"].cat.categories
    labels = np.array([classify.kernel_class_without_library(str(n)) for n in cats], dtype=object)
    if len(labels) == 0:
        return np.zeros(len(k), dtype=object)
    return labels[np.maximum(k["name"].cat.codes.to_numpy(), 0)]


@dataclass(frozen=True)
class Options:
    min_share: float = option(0.10, "Report when dequant/conversion kernels take at least this share "
                                    "of GEMM + dequant time in some bucket.")
    adjacency: int = option(2, "A dequant or conversion kernel counts when a GEMM runs within this "
                               "many kernels before or after it on the same stream.")
    include_layout: bool = option(True, "Also count layout-conversion kernels that sit between a dequant "
                                        "kernel and a GEMM (within `adjacency` kernels of both).")
    min_bucket_ns: int = option(50_000, "Buckets with less GEMM + dequant time than this (ns) are ignored.")
    top: int = option(5, "How many buckets and kernel names to list.")


class DequantOverhead(Rule):
    """Dequantisation and layout-conversion kernels around GEMMs eat the low-bit saving.

    What it detects: kernels classified `dequant` (dequantize / quantize / unpack-int4 / fp8
    cast ...) within `adjacency` kernels of a GEMM on the same stream, and layout-conversion
    kernels within `adjacency` kernels of both a dequant kernel and a GEMM (the low-bit chain);
    their share of GEMM + dequant time, per bucket. A bucket is the NVTX / record_function range
    that encloses the launch call (the shallowest nesting level whose names tell buckets apart,
    e.g. prefill vs decode; emit_nvtx operator ranges are not buckets), else the iteration, else
    the whole trace. Reported when some bucket's share reaches `min_share`; the worst and the
    best bucket are named. Fused dequant-GEMM kernels (Marlin, AWQ/GPTQ GEMM, machete, Triton
    mxfp4 matmul) count as GEMM time.
    Why it hurts: low-bit weights halve memory but add a dequant / conversion pass around every
    linear layer. In long, bandwidth-bound decode the saved bytes amortise it; at small batch and
    in short prefill the extra launches and passes dominate, tensor cores idle, and TTFT rises
    (the W4A16 case: memory halved, TTFT 820 ms -> 1.25 s, TPOT of long outputs slightly better).
    Evidence: system: per-bucket latency (mean range or iteration duration) of the worst and best
    bucket; kernel: dequant time and share per bucket, kernel counts, the heaviest dequant kernels
    and the GEMMs they feed; microarch: tensor-pipe activity in the worst bucket (GPU metrics or
    Nsight Compute) — low tensor activity at small batch confirms the GEMMs starve.
    Fix: enable quantisation per request bucket: long context / high concurrency on the low-bit
    path, short requests on FP8/FP16 or a mature fused W8A8 path; prefer a fused dequant-GEMM
    kernel (Marlin, machete, hipBLASLt / CK on ROCm) over a separate dequant pass; put TTFT,
    TPOT, memory watermark and quality loss in one acceptance table.
    Counter-example (when it does not apply): long outputs, high concurrency, bandwidth-bound
    decode and a runtime with a mature fused dequant-GEMM, where low-bit saves memory and raises
    throughput; a one-off weight conversion at load time (outside the measured iterations).
    """

    id = "TL003"
    slug = "dequant-overhead"
    title = "Dequant / conversion kernels around GEMMs take a large share"
    severity = Severity.WARNING
    groups = frozenset({"quantization", "serving", "kernel"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL, Layer.MICROARCH})
    needs = frozenset({"kernels"})
    Options = Options

    def fix_edits(self, finding, ctx):
        """Fix: dequantisation fused into the GEMM (its separate kernels disappear)."""
        return [Scale(None, 0.0, ops=Ops(classes=("dequant",), devices=(finding.where.device,)), with_launch=True)], ""

    def check(self, ctx):
        tl, opt = ctx.tl, self.options
        k = tl.kernels
        if len(k) == 0:
            return
        cls = _classes(k)
        is_deq = cls == "dequant"
        if not is_deq.any():
            return
        cats = k["name"].cat.categories
        fused_cat = np.asarray(cats.map(lambda n: classify.is_fused_dequant_gemm(str(n))), dtype=bool)
        fused = is_deq & fused_cat[np.maximum(k["name"].cat.codes.to_numpy(), 0)]
        is_layout = np.asarray(tl.kernel_class) == "layout"
        is_gemm = ((cls == "gemm") & ~is_layout) | fused
        is_deq &= ~fused
        device, stream = k["device"].to_numpy(), k["stream"].to_numpy()
        start, end = k["start"].to_numpy(), k["end"].to_numpy()
        dur = end - start
        near_gemm = _near(device, stream, start, is_gemm, opt.adjacency)
        # a conversion counts only inside a low-bit chain: next to a dequant kernel and a GEMM
        is_conv = (is_layout & _near(device, stream, start, is_deq, opt.adjacency) if opt.include_layout
                   else np.zeros(len(k), bool))
        overhead = (is_deq | is_conv) & near_gemm
        if not overhead.any():
            return
        launch = ctx.launch_index("kernels")
        weight = np.where(overhead | is_gemm, dur, 0)
        bucket, bucket_kind, bucket_latency = self._buckets(ctx, launch, start, weight)
        for d in np.unique(device[overhead]):
            on = device == d
            yield from self._device(ctx, int(d), on, overhead, is_gemm, fused, is_conv, dur, start, end,
                                    bucket, bucket_kind, bucket_latency, launch)

    # ----- buckets ---------------------------------------------------------------------------
    def _buckets(self, ctx, launch, kstart, weight):
        """Per kernel a bucket label (None: not in any bucket), the kind of bucket, and
        label -> (mean latency ns, count). A bucketing is used when it covers at least half of
        the weighted (GEMM + dequant) time."""
        tl = ctx.tl
        api = tl.api_calls
        linked = launch >= 0
        li = np.clip(launch, 0, None)
        r = tl.ranges
        host_t = api["start"].to_numpy()[li] if len(api) else np.zeros(len(launch), np.int64)
        total = weight.sum()

        def covers(lab):
            return total > 0 and weight[pd.notna(lab)].sum() >= 0.5 * total

        if len(r) and len(api):
            cats = r["name"].cat.categories
            phase = np.asarray(cats.map(lambda n: not (classify.is_profiler_step(str(n))
                                                      or classify.has_emit_nvtx_ids(str(n)))), dtype=bool)
            keep = r["kind"].isin(RANGE_KINDS).to_numpy() & phase[np.maximum(r["name"].cat.codes.to_numpy(), 0)]
            rs = r[keep]
            if len(rs):
                lab, lat = _range_labels(rs, api["pid"].to_numpy()[li], api["tid"].to_numpy()[li], host_t, linked)
                if covers(lab):
                    return lab, "range", lat
        steps = r[r["kind"] == "step"].sort_values("start") if len(r) else r
        if len(steps):
            ss, se = steps["start"].to_numpy(), steps["end"].to_numpy()
            snames = np.array([f"iteration {int(x)}" for x in steps["step"]], dtype=object)  # per step
            # iteration by the launch time where linked, else by the kernel's own start
            t = np.where(linked, host_t, kstart)
            pos = np.searchsorted(ss, t, side="right") - 1
            ok = (pos >= 0) & (t < se[np.clip(pos, 0, None)])
            lab = np.where(ok, snames[np.clip(pos, 0, None)], None)
            if covers(lab):
                durs = pd.Series(se - ss).groupby(snames).agg(["mean", "size"])
                lat = {str(n): (float(m), int(c)) for n, m, c in zip(durs.index, durs["mean"], durs["size"])}
                return lab, "iteration", lat
        return np.full(len(launch), "whole trace", dtype=object), "trace", {}

    # ----- one device --------------------------------------------------------------------------
    def _device(self, ctx, d, on, overhead, is_gemm, fused, is_conv, dur, start, end, bucket, bucket_kind,
                bucket_latency, launch):
        tl, opt = ctx.tl, self.options
        k = tl.kernels
        rel = on & (overhead | is_gemm) & pd.notna(bucket)
        df = pd.DataFrame({"bucket": bucket[rel], "over": np.where(overhead[rel], dur[rel], 0),
                           "gemm": np.where(is_gemm[rel], dur[rel], 0),
                           "n_over": overhead[rel].astype(np.int64), "n_gemm": is_gemm[rel].astype(np.int64)})
        if len(df) == 0:
            return
        agg = df.groupby("bucket", sort=True).sum()
        agg["total"] = agg["over"] + agg["gemm"]
        agg = agg[agg["total"] >= opt.min_bucket_ns]
        if len(agg) == 0:
            return
        agg["share"] = agg["over"] / agg["total"]
        agg = agg.sort_values(["share", "total"], ascending=[False, False], kind="stable")
        hot = agg[agg["share"] >= opt.min_share]
        if len(hot) == 0:
            return
        worst, best = str(agg.index[0]), str(agg.index[-1])
        w = agg.loc[worst]
        impact = int(hot["over"].sum())
        in_worst = on & overhead & (bucket == worst)
        # The heaviest overhead kernel of the worst bucket anchors `where`.
        idx = np.flatnonzero(in_worst)
        top_row = int(idx[np.argmax(dur[idx])])
        lrow = int(launch[top_row])
        where = ctx.where_for_api(lrow) if lrow >= 0 else Where(rank=tl.meta.rank)
        where.device, where.stream = d, int(k["stream"].iat[top_row])
        ws, we = int(start[idx].min()), int(end[idx].max())
        where.start_ns, where.end_ns = ws, we
        if bucket_kind == "range" and worst not in where.nvtx_path:
            where.nvtx_path = [worst]
        if bucket_kind == "iteration":
            where.iteration = int(worst.split()[-1])
        kn = pd.DataFrame({"name": k["name"].to_numpy()[on & overhead], "dur": dur[on & overhead]})
        top_over = kn.groupby("name", observed=True)["dur"].sum().sort_values(ascending=False).head(opt.top)
        where.kernel = str(top_over.index[0])
        gn = pd.DataFrame({"name": k["name"].to_numpy()[on & is_gemm & (bucket == worst)],
                           "dur": dur[on & is_gemm & (bucket == worst)]})
        top_gemm = gn.groupby("name", observed=True)["dur"].sum().sort_values(ascending=False).head(3)
        b = agg.loc[best]
        lat_w, lat_b = bucket_latency.get(worst), bucket_latency.get(best)
        label = {"range": "range", "iteration": "iteration", "trace": ""}[bucket_kind]
        lat_txt = ""
        if lat_w and lat_b and worst != best:
            lat_txt = (f" Mean {label} duration: `{worst}` {lat_w[0] / 1e6:.3f} ms (×{lat_w[1]}), "
                       f"`{best}` {lat_b[0] / 1e6:.3f} ms (×{lat_b[1]}).")
        outside = int(dur[on & (overhead | is_gemm) & pd.isna(bucket)].sum())
        facts = {"buckets": Measure(len(agg), "count"), "hot_buckets": Measure(len(hot), "count"),
                 "outside_buckets_ns": Measure(outside, "ns")}
        if lat_w:
            facts["worst_bucket_latency_ns"] = Measure(round(lat_w[0]), "ns")
        if lat_b:
            facts["best_bucket_latency_ns"] = Measure(round(lat_b[0]), "ns")
        by = {"range": "NVTX / annotation range", "iteration": "iteration", "trace": "the whole trace"}[bucket_kind]
        system = Evidence.measured(
            f"Bucketed by {by}: {len(hot)} of {len(agg)} bucket(s) spend ≥ {opt.min_share:.0%} of GEMM + "
            f"dequant time in dequant/conversion kernels.{lat_txt}"
            + (f" {outside / 1e6:.3f} ms of GEMM + dequant time fell outside any bucket and is not counted."
               if outside else ""), **facts)
        kernel = Evidence.measured(
            f"Worst bucket `{worst}`: dequant/conversion {w['over'] / 1e6:.3f} ms = {w['share']:.1%} of "
            f"GEMM + dequant time ({int(w['n_over'])} kernels vs {int(w['n_gemm'])} GEMMs); best bucket "
            f"`{best}`: {b['share']:.1%}. Heaviest: " + ", ".join(f"`{_short(n)}`" for n in top_over.index[:3])
            + ("; feeding " + ", ".join(f"`{_short(n)}`" for n in top_gemm.index) if len(top_gemm) else "") + ".",
            worst_share=Measure(round(float(w["share"]), 4), "ratio"),
            best_share=Measure(round(float(b["share"]), 4), "ratio"),
            worst_dequant_ns=Measure(int(w["over"]), "ns"), worst_gemm_ns=Measure(int(w["gemm"]), "ns"),
            dequant_kernels=Measure(int((on & overhead).sum()), "count"),
            conversion_kernels=Measure(int((on & overhead & is_conv).sum()), "count"),
            fused_dequant_gemm_kernels=Measure(int((on & fused).sum()), "count"))
        micro = ctx.microarch(d, ws, we, kernels=[str(n) for n in top_gemm.index] or [where.kernel],
                              expect={r"tensor": "low"})
        yield self.finding(
            ctx,
            message=(f"GPU {d}: dequant/conversion kernels take {w['share']:.1%} of GEMM + dequant time in "
                     f"`{worst}` (best bucket `{best}`: {b['share']:.1%}); {impact / 1e6:.2f} ms in "
                     f"{len(hot)} bucket(s) at or above {opt.min_share:.0%}"),
            impact_ns=impact, where=where, occurrences=int(hot["n_over"].sum()),
            windows=[(ws, we)],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel, Layer.MICROARCH: micro},
            metrics={"dequant_ns": Measure(impact, "ns"),
                     "worst_share": Measure(round(float(w["share"]), 4), "ratio"),
                     "best_share": Measure(round(float(b["share"]), 4), "ratio")},
            key=f"device{d}")


def _short(name, n: int = 100) -> str:
    name = str(name)
    return name if len(name) <= n else name[: n - 1] + "…"


def _near(device, stream, start, flag, hops: int) -> np.ndarray:
    """True where a flagged kernel runs within `hops` kernels before/after on the same stream."""
    n = len(start)
    order = np.lexsort((start, stream, device))
    f = flag[order]
    dv, st = device[order], stream[order]
    near = np.zeros(n, dtype=bool)
    for h in range(1, max(hops, 0) + 1):  # a handful of shifts, each vectorised
        same = (dv[h:] == dv[:-h]) & (st[h:] == st[:-h])
        near[h:] |= f[:-h] & same     # a flagged kernel h before
        near[:-h] |= f[h:] & same     # a flagged kernel h after
    out = np.zeros(n, dtype=bool)
    out[order] = near
    return out


def _range_labels(rs: pd.DataFrame, pid, tid, t, linked):
    """Label each launch by its enclosing range at the shallowest nesting level whose names
    tell launches apart (prefill vs decode); launches in no range get None.

    Returns (labels per kernel, {label: (mean range duration ns, count)}).
    """
    thread = pd.MultiIndex.from_arrays([rs["pid"].to_numpy(), rs["tid"].to_numpy()])
    codes, uniq = pd.factorize(thread)
    codes = codes.astype(np.int64)
    rstart, rend = rs["start"].to_numpy(), rs["end"].to_numpy()
    depth, parent = nest(codes, rstart, rend)
    qcode = uniq.get_indexer(pd.MultiIndex.from_arrays([pid, tid]))
    inner = intervals.innermost_enclosing(t, qcode, rstart, rend, codes, depth)
    inner = np.where(linked & (qcode >= 0), inner, -1)
    rnames = rs["name"].astype(str).to_numpy()
    at = inner
    for level in range(int(depth.max()) + 1 if len(depth) else 0):  # a handful of levels
        cur = inner.copy()
        while True:  # walk up to `level` (bounded by the nesting depth)
            up = (cur >= 0) & (depth[np.clip(cur, 0, None)] > level)
            if not up.any():
                break
            cur = np.where(up, parent[np.clip(cur, 0, None)], cur)
        if len(np.unique(rnames[cur[cur >= 0]])) >= 2:
            at = cur
            break
    lab = np.where(at >= 0, rnames[np.clip(at, 0, None)], None).astype(object)
    used = np.unique(at[at >= 0])
    durs = pd.DataFrame({"name": rnames[used], "dur": (rend - rstart)[used]})
    durs = durs.groupby("name")["dur"].agg(["mean", "size"])
    lat = {str(n): (float(m), int(c)) for n, m, c in zip(durs.index, durs["mean"], durs["size"])}
    return lab, lat

"""Kernel calls paired across runs: the gate's signal that one kernel class got slower.

Why: the GPU time of a class per iteration moves with what the iteration does. Two ranks of
one job look up other embeddings, and two days of one training run see other batches. Between
runs that time differs by far more than any 10 % slowdown, so `gpu_time[<class>]` can only judge
a change with many runs (docs/statistics.md). A kernel launched with the same grid and block
does the same work, though. So the i-th call of (kernel, grid, block) in one run, against the
i-th call in the other, is a controlled A/B pair. The class's change is the median of the paired
duration ratios. Its interval is the exact, distribution-free interval of that median: the sign
test's interval, i.e. order statistics of the paired log ratios.

Communication kernels are left out: their duration includes the wait for other ranks.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..timeline.model import Timeline
from .names import exact_kernel_name
from .stats import (
    Comparison,
    GatePolicy,
    _verdict,
    min_samples,
    quantile_interval,
    runs_needed,
    t_quantile,
)

PREFIX = "kernel_calls"
#: Calls kept per (kernel, grid, block): the first ones from the first steady iteration on.
MAX_CALLS = 256
#: Keys kept per class: those with the most time.
MAX_KEYS = 64
#: Classes whose call duration is not the kernel's own work.
EXCLUDED = frozenset({"communication"})
#: Below this share of the baseline's call time paired with current calls: not gated.
MIN_PAIRED = 0.5
_DIMS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")


def kernel_calls(tl: Timeline, since_ns: int | None = None) -> dict[str, dict[str, np.ndarray]]:
    """{class: {"kernel|grid|block": call durations (ns) in start order}} of the kernels that
    start at or after since_ns (the first steady iteration; None: all)."""
    k = tl.kernels
    if not len(k):
        return {}
    start = k["start"].to_numpy()
    keep = np.ones(len(k), bool) if since_ns is None else start >= since_ns
    cls = np.asarray(tl.kernel_class, dtype=object)
    keep &= ~np.isin(cls, list(EXCLUDED))
    if not keep.any():
        return {}
    cat = pd.Categorical(k["name"].array)
    exact = np.array([exact_kernel_name(c) for c in cat.categories.tolist()] + ["?"], dtype=object)
    codes = np.asarray(cat.codes)
    df = pd.DataFrame({"name": np.where(codes >= 0, codes, len(exact) - 1),
                       **{d: k[d].to_numpy() if d in k else -1 for d in _DIMS},
                       "cls": cls, "start": start,
                       "dur": k["end"].to_numpy() - start})[keep]
    df = df.sort_values("start", kind="stable")
    out: dict[str, dict[str, np.ndarray]] = {}
    for c, part in df.groupby("cls", sort=True):
        groups = part.groupby(["name", *_DIMS], sort=False)["dur"]
        total = groups.sum().sort_values(ascending=False, kind="stable")
        calls = {}
        for key in total.index[:MAX_KEYS]:
            name, gx, gy, gz, bx, by, bz = key
            label = f"{exact[name]}|grid={gx}x{gy}x{gz}|block={bx}x{by}x{bz}"
            calls[label] = groups.get_group(key).to_numpy()[:MAX_CALLS].astype(np.int64)
        out[str(c)] = calls
    return out


def metric(calls: dict[str, np.ndarray]) -> dict[str, Any]:
    """The key metric of one class (perf_baseline.key_metrics): its calls, and all their
    durations as samples (the median call, shown per run)."""
    samples = np.concatenate(list(calls.values())).astype(float) if calls else np.zeros(0)
    return {"q": 50, "samples": samples, "calls": calls, "unit": "ns", "better": "lower",
            "scope": "calls"}


def _reference(a_runs: Sequence[dict[str, Sequence[float]]]) -> dict[str, np.ndarray]:
    """The baseline's calls, call by call the median over its runs (one run: that run)."""
    ref = {}
    for key in dict.fromkeys(k for r in a_runs for k in r):
        seqs = [np.asarray(r[key], dtype=float) for r in a_runs if len(r.get(key, ()))]
        n = min(len(x) for x in seqs)
        ref[key] = np.median(np.stack([x[:n] for x in seqs]), axis=0)
    return ref


def _pair(ref: dict[str, np.ndarray], run: dict[str, Sequence[float]]
          ) -> tuple[np.ndarray, float, float, float]:
    """(log ratios of run's calls to ref's, paired time of ref, of run, ref's total time)."""
    logs, pa, pb, total = [], 0.0, 0.0, 0.0
    for key, x in ref.items():
        total += float(x.sum())
        if not len(run.get(key, ())):
            continue
        n = min(len(x), len(run[key]))
        xa, y = x[:n], np.asarray(run[key][:n], dtype=float)
        ok = (xa > 0) & (y > 0)
        logs.append(np.log(y[ok] / xa[ok]))
        pa, pb = pa + float(xa[ok].sum()), pb + float(y[ok].sum())
    return (np.sort(np.concatenate(logs)) if logs else np.zeros(0)), pa, pb, total


def compare_calls(a_runs: Sequence[dict[str, Sequence[float]]],
                  b_runs: Sequence[dict[str, Sequence[float]]],
                  policy: GatePolicy | None = None) -> Comparison:
    """B's calls against A's, each run paired call by call with the reference (the median
    of A's runs, _reference). One run on each side: the median paired ratio and its
    order-statistic interval (the spread from call to call). Repeated runs: the run is the
    unit. Each run's value is its median paired log ratio, and the change gets the Student-t
    interval of the runs' values, as stats.compare does for other metrics, widened to hold
    the call-to-call interval too (runs whose calls tie exactly would give zero width)."""
    policy = policy or GatePolicy()
    a_runs, b_runs = [r for r in a_runs if r], [r for r in b_runs if r]
    if not a_runs or not b_runs:
        why = ("no calls of this class in the current run(s)" if a_runs else
               "no calls of this class in the baseline")
        return Comparison(float("nan"), float("nan"), None, None, None, "not gated",
                          "paired calls", why=why)
    ref = _reference(a_runs)
    b_pairs = [_pair(ref, r) for r in b_runs]
    logs = np.sort(np.concatenate([x[0] for x in b_pairs]))
    a = float(np.mean([x[1] for x in b_pairs]))
    b = float(np.mean([x[2] for x in b_pairs]))
    share = min(x[1] / x[3] if x[3] else 0.0 for x in b_pairs)
    change = math.expm1(float(np.median(logs))) if len(logs) else None
    if share < MIN_PAIRED:
        why = (f"only {share:.0%} of the baseline's call time pairs with calls of the same kernel "
               "and launch configuration (renamed kernels or other shapes)")
        return Comparison(a, b, change, None, None, "not gated", "paired calls", why=why)
    need = min_samples(0.5, policy.confidence)
    if min(len(x[0]) for x in b_pairs) < need:
        return Comparison(a, b, change, None, None, "not gated", "paired calls",
                          why=(f"the median of paired calls needs >= {need} samples for a "
                               f"{policy.confidence:.0%} interval (have "
                               f"{min(len(x[0]) for x in b_pairs)})"))
    if len(a_runs) == 1 and len(b_runs) == 1:
        lo, hi = quantile_interval(logs, 0.5, policy.confidence)
        c = Comparison(a, b, change, math.expm1(lo), math.expm1(hi), "", "paired calls")
    else:          # never narrower than the call-to-call interval (2 runs can agree exactly)
        c = _between_runs(ref, a_runs, b_pairs, policy)
        lo, hi = quantile_interval(logs, 0.5, policy.confidence)
        c.a, c.b = a, b
        c.low, c.high = min(c.low, math.expm1(lo)), max(c.high, math.expm1(hi))
    c.verdict = _verdict(c.change, c.low, c.high, policy.floor, "lower")
    c.why = f"{len(logs)} calls paired ({share:.0%} of the baseline's call time)"
    if c.verdict == "uncertain":
        c.why += f"; interval {c.low:+.1%}..{c.high:+.1%} crosses ±{policy.floor:.0%}" + (
            f"; {c.runs_needed} runs per side would resolve it" if c.runs_needed else "")
    return c


def _between_runs(ref, a_runs, b_pairs, policy: GatePolicy) -> Comparison:
    """Repeated runs: per-run median log ratios to ref, Student-t interval of the difference."""
    va = [float(np.median(_pair(ref, r)[0])) for r in a_runs]
    vb = [float(np.median(x[0])) for x in b_pairs]
    sides = [v for v in (va, vb) if len(v) >= 2]
    df = sum(len(v) - 1 for v in sides)
    sd = math.sqrt(sum(float(np.var(v, ddof=1)) * (len(v) - 1) for v in sides) / df)
    d = float(np.mean(vb) - np.mean(va))
    half = t_quantile(df, policy.confidence) * sd * math.sqrt(1 / len(va) + 1 / len(vb))
    return Comparison(0.0, 0.0, math.expm1(d), math.expm1(d - half), math.expm1(d + half), "",
                      "paired calls, runs", [math.expm1(v) for v in va],
                      [math.expm1(v) for v in vb], sd,
                      runs_needed(sd, policy.floor, policy.confidence))

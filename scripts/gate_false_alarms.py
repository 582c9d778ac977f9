"""False alarms and caught slowdowns of `tracelint gate` on the shared same-workload traces.

    .venv/bin/python scripts/gate_false_alarms.py [--traces DIR]   # DIR: nsys/ and torch/

DIR defaults to $TRACELINT_TRACES, else ../shared/traces, else fixtures/real (as the tests).

For every group of runs of one workload: (1) every ordered pair, baseline from one run, gate
the other, default settings; (2) a baseline from all runs, gate each run; (3) a 10 % slowdown
injected into each kernel class with >= 1 % of GPU time of one run, gated against the
baseline of all (original) runs and against a one-run baseline of the other run. Prints
Markdown tables (docs/statistics.md).

Column "iterations pooled": what the gate would decide if every steady iteration of every run
were one sample of its side (the runs merged) and the interval came from the spread of those
samples alone: percentile bootstrap of the ratio of medians, 20000 resamples, seed 0. The gate
does NOT do this (the ranks of a job differ run to run by more than their iterations do within
a run); the column is printed to show why, and lists the metrics it would call worse."""
from __future__ import annotations

import argparse
import itertools
import os
from pathlib import Path

import numpy as np

from tracelint import load
from tracelint.analysis.buckets import profile
from tracelint.analysis.gate import run_gate
from tracelint.analysis.inject import slow_down
from tracelint.analysis.perf_baseline import key_metrics, make_baseline
from tracelint.analysis.stats import _verdict

GROUPS = {
    "128-rank job, ranks 0 and 1 (Kineto)": ["torch/hta_sampled_rank0of128.json.gz",
                                             "torch/hta_sampled_rank1of128.json.gz"],
    "one nsys capture, two exports (2021.2, 2022.4)": [
        "nsys/nsys2021.2_mordred-hashjoin_quadro-rtx6000.sqlite",
        "nsys/nsys2021.2-capture_reexported-by-2022.4_mordred-hashjoin_quadro-rtx6000.sqlite"],
}


def _prof(tl, name):
    p = profile(tl, findings=True)
    p.source = name
    return p


def _fmt(res, metric=None):
    if metric:
        return f"{res.status}; {_verdict_of(res, metric)}"
    return res.status


def _verdict_of(res, metric):
    c = res.metrics.get(metric)
    if c is None:
        return f"{metric} absent"
    iv = f" [{c.low:+.1%}, {c.high:+.1%}]" if c.low is not None else ""
    return f"{metric} {c.verdict}{iv}"


def _fmt_injected(res, cls):
    """Gate status, what it names, and the class's two metrics."""
    named = ", ".join(res.regressions) or "nothing"
    return (f"**{res.status}** (regressions: {named}); {_verdict_of(res, f'gpu_time[{cls}]')}; "
            f"{_verdict_of(res, f'kernel_calls[{cls}]')}")


def _pooled(bases, cur, metric=None, floor=0.02, n=20000):
    """Metrics a pooled-iterations bootstrap would call worse, or the verdict on `metric`
    (see the module docstring)."""
    rng = np.random.default_rng(0)
    ms = [key_metrics(p, max_buckets=10**6, min_class_share=0.0) for p in bases]
    mc = key_metrics(cur, max_buckets=10**6, min_class_share=0.0)
    out = {}
    for k in sorted(mc) if metric is None else [metric]:
        if k not in mc or not all(k in m for m in ms) or mc[k]["q"] != 50 or "calls" in mc[k]:
            continue
        a = np.concatenate([m[k]["samples"] for m in ms])
        b = np.asarray(mc[k]["samples"], dtype=float)
        if len(a) + len(b) < 3 or np.median(a) <= 0:
            continue
        ra = np.median(a[rng.integers(0, len(a), (n, len(a)))], axis=1)
        rb = np.median(b[rng.integers(0, len(b), (n, len(b)))], axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            lo, hi = np.quantile(rb / ra - 1, [0.025, 0.975])
        change = float(np.median(b) / np.median(a) - 1)
        verdict = _verdict(change, float(lo), float(hi), floor, "lower")
        if verdict == "worse" or metric:
            out[k] = f"{k} {verdict} {change:+.1%} [{lo:+.1%}, {hi:+.1%}]"
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    repo = Path(__file__).resolve().parents[1]
    shared = repo.parent / "shared" / "traces"
    default = os.environ.get("TRACELINT_TRACES") or (shared if shared.is_dir() else repo / "fixtures" / "real")
    ap.add_argument("--traces", default=str(default))
    root = Path(ap.parse_args().traces)
    print("| workload | baseline | gated run(s) | result | iterations pooled: metrics called worse |"
          "\n|---|---|---|---|---|")
    inject_rows = []
    for group, files in GROUPS.items():
        tls = {Path(f).name: load(root / f) for f in files}
        profs = {n: _prof(tl, n) for n, tl in tls.items()}
        names = list(tls)
        for a, b in itertools.permutations(names, 2):
            res = run_gate(make_baseline([profs[a]]), [profs[b]])
            pooled = "; ".join(_pooled([profs[a]], profs[b]).values()) or "none"
            print(f"| {group} | {a} | {b} | {_fmt(res)}: {'; '.join(res.reasons()) or 'no regression'}"
                  f" | {pooled} |")
        all_base = make_baseline([profs[n] for n in names])
        for b in names:
            res = run_gate(all_base, [profs[b]])
            pooled = "; ".join(_pooled([profs[n] for n in names], profs[b]).values()) or "none"
            print(f"| {group} | all {len(names)} runs | {b} | {_fmt(res)}: "
                  f"{'; '.join(res.reasons()) or 'no regression'} | {pooled} |")
        first = names[0]
        gpu = sum(profs[first].class_ns.values()) or 1
        for cls, ns in sorted(profs[first].class_ns.items(), key=lambda kv: -kv[1]):
            if ns / gpu < 0.01 or cls in ("copy", "memset"):      # only kernels can be slowed
                continue
            slow = _prof(slow_down(tls[first], cls, 1.10), first + f" ({cls} +10%)")
            metric = f"gpu_time[{cls}]"
            both = run_gate(all_base, [slow])
            one = run_gate(make_baseline([profs[names[1]]]), [slow])
            pooled = _pooled([profs[n] for n in names], slow, metric).get(metric, "metric absent")
            inject_rows.append(f"| {group} | {cls} ({ns / gpu:.0%}) | {_fmt_injected(both, cls)} | "
                               f"{_fmt_injected(one, cls)} | {pooled} |")
    print("\n| workload | class slowed 10 % (share of GPU time) | baseline of all runs | "
          "one-run baseline (other run) | iterations pooled, baseline of all runs |"
          "\n|---|---|---|---|---|")
    print("\n".join(inject_rows))


if __name__ == "__main__":
    main()

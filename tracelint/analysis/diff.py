"""A/B comparison of runs: bucket by bucket, kernel by kernel, distributions not means.

``diff_profiles(A_runs, B_runs)`` compares one or more runs of A with one or more runs of B.
Every compared number is a percentile of each run's samples (steady instances of a bucket,
instances of a kernel, per-iteration GPU time of a class); the change is judged by its
confidence interval (:mod:`tracelint.analysis.stats`): a change whose interval reaches inside
±floor is not "slower", a percentile with too few samples is "not gated". Findings are matched
by what they are (rule, key without device indices, annotation path, code location).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..timeline.summary import percentile
from .buckets import QUANTILES, TraceProfile, short_kernel_name
from .kernel_calls import compare_calls
from .stats import FORMULA, Comparison, GatePolicy, clean_json, compare, median

TIME_WORDS = {"worse": "slower", "better": "faster", "no change": "no change",
              "missing": "missing", "uncertain": "uncertain", "not gated": "no change"}
COUNT_WORDS = {"worse": "more", "better": "fewer", "no change": "no change", "missing": "missing",
               "uncertain": "uncertain", "not gated": "no change"}


@dataclass
class Row:
    """One compared item (a bucket, a kernel, a class, a sync)."""

    section: str                 # bucket | kernel | class | sync | total
    key: str
    label: str
    status: str                  # slower | faster | no change | appeared | disappeared | more | fewer
    metrics: dict[str, Comparison] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def changed(self) -> list[str]:
        """Metrics whose change is beyond the gate."""
        return [k for k, c in self.metrics.items() if c.verdict in ("worse", "better")]

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "status": self.status,
                "changed": self.changed,
                "metrics": {k: c.to_dict() for k, c in self.metrics.items()}, **self.info}


@dataclass
class DiffResult:
    a_sources: list[str]
    b_sources: list[str]
    policy: GatePolicy
    buckets: list[Row]
    kernels: list[Row]
    classes: list[Row]
    totals: list[Row]
    syncs: list[Row]
    findings_gained: list[dict[str, Any]]
    findings_lost: list[dict[str, Any]]
    findings_unstable: int
    findings_checked: bool
    notes: list[str] = field(default_factory=list)
    waterfall: list[dict[str, Any]] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        rows = self.buckets + self.totals
        if any(r.status == "slower" for r in rows):
            return "slower"
        if any(r.status == "faster" for r in rows):
            return "faster"
        return "no change"

    def changes(self) -> list[tuple[str, str, str]]:
        """(section, key, status) of everything that is not "no change"."""
        out = []
        for rows in (self.buckets, self.totals, self.classes, self.kernels, self.syncs):
            out += [(r.section, r.key, r.status) for r in rows if r.status != "no change"]
        out += [("finding", f["identity"], "gained") for f in self.findings_gained]
        out += [("finding", f["identity"], "lost") for f in self.findings_lost]
        return out

    def summary(self) -> dict[str, Any]:
        def count(rows):
            c: dict[str, int] = {}
            for r in rows:
                c[r.status] = c.get(r.status, 0) + 1
            return c
        return {"verdict": self.verdict, "buckets": count(self.buckets),
                "kernels": count(self.kernels), "classes": count(self.classes),
                "syncs": count(self.syncs),
                "findings": {"gained": len(self.findings_gained), "lost": len(self.findings_lost),
                             "unstable": self.findings_unstable, "checked": self.findings_checked}}

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "tracelint-diff/2",
            "a": {"sources": self.a_sources, "runs": len(self.a_sources)},
            "b": {"sources": self.b_sources, "runs": len(self.b_sources)},
            "method": {**self.policy.to_dict(), "formula": FORMULA,
                       "percentile": "linear interpolation (numpy default, Hyndman-Fan type 7)"},
            "summary": self.summary(),
            "totals": [r.to_dict() for r in self.totals],
            "buckets": [r.to_dict() for r in self.buckets],
            "classes": [r.to_dict() for r in self.classes],
            "kernels": [r.to_dict() for r in self.kernels],
            "syncs": [r.to_dict() for r in self.syncs],
            "findings": {"checked": self.findings_checked, "gained": self.findings_gained,
                         "lost": self.findings_lost, "unstable": self.findings_unstable},
            "waterfall": self.waterfall,
            "notes": self.notes,
        }

    def to_json(self) -> str:
        return json.dumps(clean_json(self.to_dict()), indent=1, allow_nan=False)


# ----- comparing -------------------------------------------------------------------------------

def _status(metrics: dict[str, Comparison], words=TIME_WORDS) -> str:
    """slower when any percentile is worse; faster when P50 is better and none is worse;
    uncertain when a change may be there but its interval crosses the floor."""
    v = [c.verdict for c in metrics.values()]
    if "worse" in v:
        return words["worse"]
    if metrics.get("p50") is not None and metrics["p50"].verdict == "better":
        return words["better"]
    return "uncertain" if "uncertain" in v else "no change"


def _quantile_metrics(a_runs: list[np.ndarray], b_runs: list[np.ndarray], policy: GatePolicy
                      ) -> dict[str, Comparison]:
    """Every percentile of QUANTILES; one without enough samples is kept as "not gated" only
    up to P99 (P99.9 of a short run is just its maximum: left out)."""
    out = {}
    for name, q in QUANTILES:
        c = compare(a_runs, b_runs, q, policy)
        if c.verdict == "not gated" and name == "p999":
            continue
        out[name] = c
    return out


def _side_stats(runs: list[np.ndarray]) -> dict[str, Any]:
    runs = [v for v in runs if len(v)]
    if not runs:
        return {"count": 0}
    d: dict[str, Any] = {"count": median([len(v) for v in runs])}
    for name, q in QUANTILES:
        d[f"{name}_ns"] = median([percentile(v, q) for v in runs])
    return d


def _bucket_rows(A: Sequence[TraceProfile], B: Sequence[TraceProfile], policy: GatePolicy) -> list[Row]:
    keys: list[str] = []
    for p in list(A) + list(B):
        keys += [k for k in p.buckets if k not in keys]
    rows = []
    for k in keys:
        ab = [p.buckets.get(k) for p in A]
        bb = [p.buckets.get(k) for p in B]
        a_has = [b for b in ab if b is not None and b.count]
        b_has = [b for b in bb if b is not None and b.count]
        kind = (a_has or b_has or [b for b in ab + bb if b is not None])[0].kind
        info: dict[str, Any] = {"kind": kind,
                                "a": _side_stats([b.steady for b in a_has]),
                                "b": _side_stats([b.steady for b in b_has]),
                                "cold_a": [int(b.cold) for b in a_has],
                                "cold_b": [int(b.cold) for b in b_has]}
        for side, has in (("a", a_has), ("b", b_has)):
            busy = [b.stats().get("gpu_busy_pct") for b in has]
            busy = [x for x in busy if x is not None]
            if busy:
                info[side]["gpu_busy_pct"] = median(busy)
        if not a_has and not b_has:
            continue
        if not a_has:
            rows.append(Row("bucket", k, k, "appeared", {}, info))
            continue
        if not b_has:
            rows.append(Row("bucket", k, k, "disappeared", {}, info))
            continue
        m = _quantile_metrics([b.steady for b in a_has], [b.steady for b in b_has], policy)
        status = _status(m)
        if all(b.gpu_ns is not None and len(b.steady) for b in a_has + b_has):
            m["gpu_time"] = compare([b.gpu_ns[b.cold:] for b in a_has],
                                    [b.gpu_ns[b.cold:] for b in b_has], 50, policy)
        rows.append(Row("bucket", k, k, status, m, info))
    return rows


def _kernel_rows(A: Sequence[TraceProfile], B: Sequence[TraceProfile], policy: GatePolicy) -> list[Row]:
    a_names = set().union(*[p.kernels.keys() for p in A]) if A else set()
    b_names = set().union(*[p.kernels.keys() for p in B]) if B else set()
    groups: list[tuple[str, list[str], list[str]]] = []     # (key, a names, b names)
    for n in sorted(a_names & b_names):
        groups.append((n, [n], [n]))
    only_a, only_b = a_names - b_names, b_names - a_names

    def key_of(n, side):
        for p in side:
            if n in p.kernels:
                return p.kernels[n].key
        return n
    ka: dict[str, list[str]] = {}
    kb: dict[str, list[str]] = {}
    for n in only_a:
        ka.setdefault(key_of(n, A), []).append(n)
    for n in only_b:
        kb.setdefault(key_of(n, B), []).append(n)
    for key in sorted(set(ka) | set(kb)):
        if key in ka and key in kb:          # template arguments (etc.) differ: pool them
            groups.append((key, sorted(ka[key]), sorted(kb[key])))
        else:                                # one side only: one row per exact name
            groups += [(n, [n], []) for n in sorted(ka.get(key, []))]
            groups += [(n, [], [n]) for n in sorted(kb.get(key, []))]
    rows = []
    for key, an, bn in groups:
        def runs(side, names):
            out = []
            for p in side:
                parts = [p.kernels[n].durations for n in names if n in p.kernels]
                if parts:
                    out.append(np.concatenate(parts))
            return out
        ar, br = runs(A, an), runs(B, bn)
        ref = next((p.kernels[n] for p in list(A) + list(B) for n in an + bn if n in p.kernels))
        exact = an == bn or not an or not bn
        label = short_kernel_name(ref.name) if exact else ref.key + " (template args differ)"
        info = {"name": ref.name if exact else None, "normalised": ref.key, "class": ref.cls,
                "a_names": an if not exact else None, "b_names": bn if not exact else None,
                "a": {"count": median([len(v) for v in ar]) if ar else 0,
                      "total_ns": median([float(v.sum()) for v in ar]) if ar else 0.0},
                "b": {"count": median([len(v) for v in br]) if br else 0,
                      "total_ns": median([float(v.sum()) for v in br]) if br else 0.0}}
        info = {k: v for k, v in info.items() if v is not None}
        if not ar:
            rows.append(Row("kernel", key if not exact else ref.name, label, "appeared", {}, info))
            continue
        if not br:
            rows.append(Row("kernel", key if not exact else ref.name, label, "disappeared", {}, info))
            continue
        m = {name: compare(ar, br, q, policy) for name, q in (("p50", 50.0), ("p99", 99.0))}
        info["a"].update(p50_ns=m["p50"].a, p99_ns=m["p99"].a)
        info["b"].update(p50_ns=m["p50"].b, p99_ns=m["p99"].b)
        rows.append(Row("kernel", key if not exact else ref.name, label, _status(m), m, info))
    order = {"slower": 0, "appeared": 1, "disappeared": 2, "faster": 3, "uncertain": 4,
             "no change": 5}
    rows.sort(key=lambda r: (order.get(r.status, 5),
                             -abs(r.info["b"]["total_ns"] - r.info["a"]["total_ns"])))
    return rows


def _per_iteration(p: TraceProfile, scoped: bool) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(GPU time, GPU busy, GPU time by class) samples of one run: one per steady iteration
    when scoped, else one whole-trace value each."""
    it = p.iteration
    if scoped and it is not None and it.gpu_ns is not None:
        c = it.cold
        busy = it.busy_ns[c:] if it.busy_ns is not None else np.array([float(p.gpu_busy_ns)])
        return (it.gpu_ns[c:].astype(float), np.asarray(busy, float),
                {k: v[c:].astype(float) for k, v in it.class_ns.items()})
    return (np.array([float(p.gpu_total_ns)]), np.array([float(p.gpu_busy_ns)]),
            {k: np.array([float(v)]) for k, v in p.class_ns.items()})


def _class_rows(A, B, policy) -> tuple[list[Row], list[Row], list[str]]:
    notes = []
    scoped = all(p.iteration is not None and p.iteration.gpu_ns is not None for p in list(A) + list(B))
    if not scoped:
        notes.append("GPU time compared over whole traces (one value per run: judged only with "
                     "repeated runs): not every run has iterations")
    va, vb = [_per_iteration(p, scoped) for p in A], [_per_iteration(p, scoped) for p in B]
    scope = "per_iteration" if scoped else "trace"
    totals = []
    for i, key, label in ((0, "gpu_time", "GPU time"), (1, "gpu_busy", "GPU busy time")):
        m = {key: compare([v[i] for v in va], [v[i] for v in vb], 50, policy)}
        totals.append(Row("total", key, f"{label} ({'median per iteration' if scoped else 'whole trace'})",
                          _single_status(m[key]), m, {"scope": scope}))
    classes = sorted(set().union(*[v[2].keys() for v in va + vb]))
    rows = []
    for c in classes:
        ar = [v[2][c] for v in va if c in v[2] and v[2][c].sum() > 0]
        br = [v[2][c] for v in vb if c in v[2] and v[2][c].sum() > 0]
        info = {"scope": scope, "a": {"ns": median([percentile(x, 50) for x in ar])},
                "b": {"ns": median([percentile(x, 50) for x in br])}}
        if not ar and not br:
            continue
        if not ar:
            rows.append(Row("class", c, c, "appeared", {}, info))
        elif not br:
            rows.append(Row("class", c, c, "disappeared", {}, info))
        else:
            cm = {"time": compare(ar, br, 50, policy)}
            a_calls, b_calls = [p.calls.get(c, {}) for p in A], [p.calls.get(c, {}) for p in B]
            if any(a_calls) and any(b_calls):     # the same kernels, call by call
                cm["calls"] = compare_calls(a_calls, b_calls, policy)
            rows.append(Row("class", c, c, _class_status(cm), cm, info))
    return totals, rows, notes


def _class_status(cm: dict[str, Comparison]) -> str:
    """slower when the class's time per iteration or its calls are slower; faster when its
    time is faster and its calls are not slower (fewer calls, same speed, count as faster)."""
    v = [x.verdict for x in cm.values()]
    if "worse" in v:
        return TIME_WORDS["worse"]
    if cm["time"].verdict == "better":
        return TIME_WORDS["better"]
    return "uncertain" if "uncertain" in v else "no change"


def _single_status(c: Comparison, words=TIME_WORDS) -> str:
    return words.get(c.verdict, c.verdict)


def _sync_rows(A, B, policy) -> list[Row]:
    names = sorted(set().union(*[p.syncs.keys() for p in list(A) + list(B)]))
    rows = []
    for n in names:
        ac = [len(p.syncs.get(n, ())) for p in A]
        bc = [len(p.syncs.get(n, ())) for p in B]
        at = [float(np.sum(p.syncs.get(n, np.zeros(0)))) for p in A]
        bt = [float(np.sum(p.syncs.get(n, np.zeros(0)))) for p in B]
        info = {"a": {"count": median(ac), "total_ns": median(at)},
                "b": {"count": median(bc), "total_ns": median(bt)}}
        if max(ac or [0]) == 0:
            rows.append(Row("sync", n, n, "appeared", {}, info))
        elif max(bc or [0]) == 0:
            rows.append(Row("sync", n, n, "disappeared", {}, info))
        else:
            m = {"count": compare([[x] for x in ac], [[x] for x in bc], 50, policy),
                 "time": compare([[x] for x in at], [[x] for x in bt], 50, policy)}
            rows.append(Row("sync", n, n, _single_status(m["count"], COUNT_WORDS), m, info))
    return rows


def _findings(A, B) -> tuple[list, list, int, bool, list[str]]:
    notes = []
    if any(p.lint is None for p in list(A) + list(B)):
        errs = [p.lint_error for p in list(A) + list(B) if p.lint_error]
        if errs:
            notes.append(f"findings not compared: {errs[0]}")
        return [], [], 0, False, notes
    inter = lambda side: set.intersection(*[set(p.lint) for p in side]) if side else set()  # noqa: E731
    union = lambda side: set.union(*[set(p.lint) for p in side]) if side else set()  # noqa: E731
    info = {}
    for p in list(A) + list(B):
        info.update(p.lint)
    gained = sorted(inter(B) - union(A))
    lost = sorted(inter(A) - union(B))
    unstable = len((union(A) | union(B)) - (inter(A) & inter(B))) - len(gained) - len(lost)
    fmt = lambda i: {"identity": i, **info[i]}  # noqa: E731
    return [fmt(f) for f in gained], [fmt(f) for f in lost], max(unstable, 0), True, notes


def diff_profiles(A: Sequence[TraceProfile], B: Sequence[TraceProfile],
                  policy: GatePolicy | None = None) -> DiffResult:
    """Compare runs A (baseline side) with runs B (candidate side)."""
    if not A or not B:
        raise ValueError("diff needs at least one run on each side")
    policy = (policy or GatePolicy()).validate()
    totals, classes, notes = _class_rows(A, B, policy)
    gained, lost, unstable, checked, fnotes = _findings(A, B)
    hw_a = sorted({d for p in A for d in p.meta.get("devices", [])})
    hw_b = sorted({d for p in B for d in p.meta.get("devices", [])})
    if hw_a and hw_b and hw_a != hw_b:
        notes.append(f"hardware differs: A {hw_a}, B {hw_b}")
    from ..efficiency.coverage import coverage_warnings, merge_summaries
    notes += coverage_warnings(merge_summaries(p.meta.get("shapes") for p in A),
                               merge_summaries(p.meta.get("shapes") for p in B))
    if len(A) == 1 and len(B) == 1:
        notes.append("single runs: intervals from the spread within each run (iterations, "
                     "kernel instances); run-to-run noise is not measured (repeat runs: "
                     "`tracelint diff A1 A2 ... -- B1 B2 ...`)")
    from .waterfall import waterfall
    return DiffResult(a_sources=[p.source for p in A], b_sources=[p.source for p in B],
                      policy=policy, buckets=_bucket_rows(A, B, policy),
                      kernels=_kernel_rows(A, B, policy), classes=classes, totals=totals,
                      syncs=_sync_rows(A, B, policy), findings_gained=gained,
                      findings_lost=lost, findings_unstable=unstable, findings_checked=checked,
                      notes=notes + fnotes, waterfall=waterfall(A, B, gained))



"""A/B comparison of runs: bucket by bucket, kernel by kernel, distributions not means.

``diff_profiles(A_runs, B_runs)`` compares one or more runs of A with one or more runs of B.
Every compared number is a per-run value (a percentile of that run's steady-state instances);
a side's value is the median of its runs and the change is judged against the gate of
:mod:`tracelint.analysis.gate` (noise band from repeats, or the default gate). A change inside
the gate is "no change", never a regression.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..timeline.summary import percentile
from .buckets import QUANTILES, TraceProfile, short_kernel_name
from .gate import FORMULA, Comparison, GatePolicy, compare, median

#: Percentiles whose change decides a bucket's / kernel's status. p999 takes part only when
#: both sides have at least P999_MIN steady instances per run (below, it is just the max).
STATUS_QUANTILES = ("p50", "p90", "p99")
P999_MIN = 1000

TIME_WORDS = {"worse": "slower", "better": "faster", "no change": "no change",
              "missing": "missing"}
COUNT_WORDS = {"worse": "more", "better": "fewer", "no change": "no change", "missing": "missing"}


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
        out += [("finding", f["fingerprint"], "gained") for f in self.findings_gained]
        out += [("finding", f["fingerprint"], "lost") for f in self.findings_lost]
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
            "schema": "tracelint-diff/1",
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
            "notes": self.notes,
        }

    def to_json(self) -> str:
        return json.dumps(_clean(self.to_dict()), indent=1, allow_nan=False)


def _clean(x):
    """NaN / inf -> None / "inf" so the JSON is strict."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, (float, np.floating)):
        x = float(x)
        if x != x:
            return None
        if x in (float("inf"), float("-inf")):
            return "inf" if x > 0 else "-inf"
        return x
    if isinstance(x, np.integer):
        return int(x)
    return x


# ----- comparing -------------------------------------------------------------------------------

def _status(metrics: dict[str, Comparison], words=TIME_WORDS) -> str:
    """slower when any percentile is worse; faster only when p50 and p99 are both better."""
    if any(c.verdict == "worse" for c in metrics.values()):
        return words["worse"]
    if all(metrics.get(q) is not None and metrics[q].verdict == "better" for q in ("p50", "p99")):
        return words["better"]
    return "no change"


def _quantile_metrics(a_runs: list[np.ndarray], b_runs: list[np.ndarray], policy: GatePolicy
                      ) -> dict[str, Comparison]:
    a_runs = [v for v in a_runs if len(v)]
    b_runs = [v for v in b_runs if len(v)]
    out = {}
    for name, q in QUANTILES:
        if name not in STATUS_QUANTILES:
            if min([len(v) for v in a_runs + b_runs] or [0]) < P999_MIN:
                continue
        out[name] = compare([percentile(v, q) for v in a_runs], [percentile(v, q) for v in b_runs],
                            policy)
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
            m["gpu_time"] = compare([float(b.gpu_ns[b.cold:].mean()) for b in a_has],
                                    [float(b.gpu_ns[b.cold:].mean()) for b in b_has], policy)
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
        m = {}
        for name, q in (("p50", 50.0), ("p99", 99.0)):
            m[name] = compare([percentile(v, q) for v in ar], [percentile(v, q) for v in br], policy)
        info["a"].update(p50_ns=m["p50"].a, p99_ns=m["p99"].a)
        info["b"].update(p50_ns=m["p50"].b, p99_ns=m["p99"].b)
        rows.append(Row("kernel", key if not exact else ref.name, label, _status(m), m, info))
    order = {"slower": 0, "appeared": 1, "disappeared": 2, "faster": 3, "no change": 4}
    rows.sort(key=lambda r: (order.get(r.status, 5),
                             -abs(r.info["b"]["total_ns"] - r.info["a"]["total_ns"])))
    return rows


def _class_rows(A, B, policy) -> tuple[list[Row], list[Row], list[str]]:
    notes = []
    scopes_a = {p.gpu_scope()[0] for p in A}
    scopes_b = {p.gpu_scope()[0] for p in B}
    scoped = len(scopes_a | scopes_b) == 1
    if not scoped:
        notes.append("GPU time compared over whole traces: not every run has iterations")

    def vals(side):
        if scoped:
            return [p.gpu_scope() for p in side]
        return [("trace", float(p.gpu_total_ns), {c: float(v) for c, v in p.class_ns.items()})
                for p in side]
    va, vb = vals(A), vals(B)
    scope = va[0][0] if va else "trace"
    totals = []
    m = {"gpu_time": compare([v[1] for v in va], [v[1] for v in vb], policy)}
    totals.append(Row("total", "gpu_time", f"GPU time ({scope.replace('_', ' ')})",
                      _single_status(m["gpu_time"]), m, {"scope": scope}))
    m = {"gpu_busy": compare([float(p.gpu_busy_ns) for p in A], [float(p.gpu_busy_ns) for p in B],
                             policy)}
    totals.append(Row("total", "gpu_busy", "GPU busy time (whole trace)",
                      _single_status(m["gpu_busy"]), m, {"scope": "trace"}))
    classes = sorted(set().union(*[v[2].keys() for v in va + vb]))
    rows = []
    for c in classes:
        ar = [v[2][c] for v in va if c in v[2]]
        br = [v[2][c] for v in vb if c in v[2]]
        info = {"scope": scope, "a": {"ns": median(ar) if ar else 0.0},
                "b": {"ns": median(br) if br else 0.0}}
        if not ar:
            rows.append(Row("class", c, c, "appeared", {}, info))
        elif not br:
            rows.append(Row("class", c, c, "disappeared", {}, info))
        else:
            cm = {"time": compare(ar, br, policy)}
            rows.append(Row("class", c, c, _single_status(cm["time"]), cm, info))
    return totals, rows, notes


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
            m = {"count": compare(ac, bc, policy), "time": compare(at, bt, policy)}
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
    fmt = lambda fp: {"fingerprint": fp, **info[fp]}  # noqa: E731
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
    if len(A) == 1 and len(B) == 1:
        notes.append(f"single runs: no noise band measured, default gate {policy.default_gate:.0%} "
                     "applies (repeat runs: `tracelint diff A1 A2 ... -- B1 B2 ...`)")
    return DiffResult(a_sources=[p.source for p in A], b_sources=[p.source for p in B],
                      policy=policy, buckets=_bucket_rows(A, B, policy),
                      kernels=_kernel_rows(A, B, policy), classes=classes, totals=totals,
                      syncs=_sync_rows(A, B, policy), findings_gained=gained,
                      findings_lost=lost, findings_unstable=unstable, findings_checked=checked,
                      notes=notes + fnotes)


# ----- rendering ---------------------------------------------------------------------------------

def fmt_ns(ns) -> str:
    """Human time: 1.23 s, 4.56 ms, 7.8 µs, 90 ns ('–' for none)."""
    if ns is None or (isinstance(ns, float) and np.isnan(ns)):
        return "–"
    ns = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            v = ns / scale
            return f"{v:.3g} {unit}" if abs(v) < 100 else f"{v:.0f} {unit}"
    return f"{ns:.0f} ns"


def fmt_change(c: Comparison | None, unit: str = "ns") -> str:
    if c is None:
        return "–"
    f = fmt_ns if unit == "ns" else (lambda x: f"{x:g}")
    if c.change is None:
        return f"{f(c.a)} → {f(c.b)}"
    mark = "" if c.verdict == "no change" else (" ▲" if c.change > 0 else " ▼")
    ch = "∞" if not np.isfinite(c.change) else f"{c.change:+.1%}"
    return f"{f(c.a)} → {f(c.b)} ({ch}{mark})"


def _gate_text(r: DiffResult) -> str:
    p = r.policy
    return (f"gate = max({p.floor:.0%}, {p.factor:g} × noise band) with repeats, "
            f"{p.default_gate:.0%} without; changes inside the gate are 'no change'")


def _table_rows(r: DiffResult, max_kernels: int = 20) -> list[tuple[str, list[str], list[list[str]], str]]:
    """(title, header, rows, footnote) for every section; shared by every text renderer."""
    out = []
    out.append(("Totals", ["metric", "A → B", "status"],
                [[row.label, fmt_change(next(iter(row.metrics.values()))), row.status]
                 for row in r.totals], ""))
    brows = []
    for row in r.buckets:
        a, b = row.info["a"], row.info["b"]
        cold = ""
        if any(row.info.get("cold_a", [])) or any(row.info.get("cold_b", [])):
            cold = f"{sum(row.info.get('cold_a', []))}/{sum(row.info.get('cold_b', []))}"
        busy = ""
        if "gpu_busy_pct" in a or "gpu_busy_pct" in b:
            busy = (f"{a.get('gpu_busy_pct', float('nan')):.0f}% → "
                    f"{b.get('gpu_busy_pct', float('nan')):.0f}%")
        brows.append([row.key, row.info["kind"], f"{a.get('count', 0):g} → {b.get('count', 0):g}",
                      cold, fmt_change(row.metrics.get("p50")), fmt_change(row.metrics.get("p90")),
                      fmt_change(row.metrics.get("p99")), fmt_change(row.metrics.get("gpu_time")),
                      busy, row.status])
    out.append(("Buckets (steady state)", ["bucket", "kind", "steady n", "cold A/B", "P50", "P90",
                                           "P99", "GPU time / instance", "GPU busy", "status"],
                brows, "" if brows else "no buckets (no iterations, annotations or --bucket matches)"))
    out.append(("GPU time by kernel class", ["class", "A → B", "status"],
                [[row.key, fmt_change(row.metrics.get("time")) if row.metrics else
                  f"{fmt_ns(row.info['a']['ns'])} → {fmt_ns(row.info['b']['ns'])}", row.status]
                 for row in r.classes], ""))
    changed = [k for k in r.kernels if k.status != "no change"]
    krows = [[k.label, k.info.get("class", ""),
              f"{k.info['a']['count']:g} → {k.info['b']['count']:g}",
              fmt_change(k.metrics.get("p50")) if k.metrics else "–",
              fmt_change(k.metrics.get("p99")) if k.metrics else "–",
              f"{fmt_ns(k.info['a']['total_ns'])} → {fmt_ns(k.info['b']['total_ns'])}", k.status]
             for k in changed[:max_kernels]]
    foot = f"{len(r.kernels) - len(changed)} kernel(s) unchanged"
    if len(changed) > max_kernels:
        foot += f"; {len(changed) - max_kernels} more changed (see JSON)"
    out.append(("Kernels (changed)", ["kernel", "class", "count", "P50", "P99", "total", "status"],
                krows, foot))
    srows = [[s.key, f"{s.info['a']['count']:g} → {s.info['b']['count']:g}",
              f"{fmt_ns(s.info['a']['total_ns'])} → {fmt_ns(s.info['b']['total_ns'])}", s.status]
             for s in r.syncs if s.status != "no change"]
    out.append(("Synchronisation (changed)", ["sync", "count", "time", "status"], srows,
                f"{sum(1 for s in r.syncs if s.status == 'no change')} sync kind(s) unchanged"))
    frows = [[f["rule"], f.get("title", ""), f.get("key", ""), "gained"] for f in r.findings_gained]
    frows += [[f["rule"], f.get("title", ""), f.get("key", ""), "lost"] for f in r.findings_lost]
    ffoot = ("" if r.findings_checked else "findings not compared") if not frows else ""
    if r.findings_unstable:
        ffoot += f"{r.findings_unstable} finding(s) present in some runs only (unstable)"
    out.append(("Findings", ["rule", "title", "key", "status"], frows, ffoot))
    return out


def render_terminal(r: DiffResult, console) -> None:
    from rich.table import Table
    from rich.text import Text
    colour = {"slower": "red", "faster": "green", "appeared": "yellow", "disappeared": "cyan",
              "more": "red", "fewer": "green", "gained": "red", "lost": "green"}
    console.print(Text(f"A: {', '.join(r.a_sources)}", style="bold"))
    console.print(Text(f"B: {', '.join(r.b_sources)}", style="bold"))
    v = r.verdict
    console.print(Text(f"verdict: {v}", style=f"bold {colour.get(v, 'white')}"))
    console.print(Text(_gate_text(r), style="dim"))
    for title, header, rows, foot in _table_rows(r):
        if not rows and not foot:
            continue
        t = Table(title=Text(title), title_justify="left", show_lines=False)
        for h in header:
            t.add_column(Text(h), overflow="fold")
        for row in rows:
            t.add_row(*[Text(str(c)) for c in row[:-1]],
                      Text(row[-1], style=colour.get(row[-1], "")))
        if rows:
            console.print(t)
        else:
            console.print(Text(title, style="bold"))
        if foot:
            console.print(Text(f"  {foot}", style="dim"))
    for n in r.notes:
        console.print(Text(f"note: {n}", style="dim"))


def _md_cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def render_markdown(r: DiffResult) -> str:
    lines = ["## tracelint diff", "",
             f"**Verdict: {r.verdict}**", "",
             f"- A ({len(r.a_sources)} run(s)): " + ", ".join(f"`{s}`" for s in r.a_sources),
             f"- B ({len(r.b_sources)} run(s)): " + ", ".join(f"`{s}`" for s in r.b_sources),
             f"- {_gate_text(r)}", ""]
    for title, header, rows, foot in _table_rows(r):
        lines.append(f"### {title}")
        lines.append("")
        if rows:
            lines.append("| " + " | ".join(header) + " |")
            lines.append("|" + "---|" * len(header))
            for row in rows:
                lines.append("| " + " | ".join(_md_cell(c) for c in row) + " |")
            lines.append("")
        if foot:
            lines += [f"_{foot}_", ""]
        elif not rows:
            lines += ["_none_", ""]
    for n in r.notes:
        lines.append(f"> note: {n}")
    return "\n".join(lines).rstrip() + "\n"


_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tracelint diff</title>
<style>
body{font:14px system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}.slower,.more,.gained{color:#b00}.faster,.fewer,.lost{color:#070}
.appeared{color:#a60}.disappeared{color:#06a}.dim{color:#777}
</style></head><body>
<h1>tracelint diff</h1>
<p><b>Verdict: <span class="{{ verdict|replace(' ', '-') }}">{{ verdict }}</span></b></p>
<p>A ({{ a|length }} run(s)): {% for s in a %}<code>{{ s }}</code> {% endfor %}<br>
B ({{ b|length }} run(s)): {% for s in b %}<code>{{ s }}</code> {% endfor %}</p>
<p class="dim">{{ gate }}</p>
{% for title, header, rows, foot in sections %}
<h2>{{ title }}</h2>
{% if rows %}<table><tr>{% for h in header %}<th>{{ h }}</th>{% endfor %}</tr>
{% for row in rows %}<tr>{% for c in row[:-1] %}<td>{{ c }}</td>{% endfor %}
<td class="{{ row[-1]|replace(' ', '-') }}">{{ row[-1] }}</td></tr>
{% endfor %}</table>{% endif %}
{% if foot %}<p class="dim">{{ foot }}</p>{% elif not rows %}<p class="dim">none</p>{% endif %}
{% endfor %}
{% for n in notes %}<p class="dim">note: {{ n }}</p>{% endfor %}
</body></html>
"""


def render_html(r: DiffResult) -> str:
    """A small self-contained page (jinja2, autoescaped: names come from traces)."""
    import jinja2
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(_HTML).render(
        verdict=r.verdict, a=r.a_sources, b=r.b_sources, gate=_gate_text(r),
        sections=_table_rows(r, max_kernels=100), notes=r.notes)

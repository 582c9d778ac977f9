"""Noise band, gate and baselines: is a change real, or inside the run-to-run noise?

For one metric with per-run values x_1..x_n on a side (A = baseline, B = candidate):

* value of the side   v = median(x)
* noise band of a side, n >= 2:   band = max_i |x_i - v| / v        (the "±" spread)
* band of a comparison  = the larger band of the sides that have >= 2 runs
* gate                  = max(floor, factor x band)    when some side has repeats
                          default_gate                  when neither side has repeats
* change                = v_B / v_A - 1
* verdict: |change| <= gate -> "no change"; else worse / better by the metric's direction.

Defaults: factor 1.5, floor 2 %, default gate 5 % (so ±3 % noise gives a 4.5 % gate, and a
single run against a single run needs a 5 % change). See docs/statistics.md.
"""
from __future__ import annotations

import json
import math
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Optional, Sequence

import msgspec

import numpy as np

from .. import __version__
from ..errors import TracelintError
from ..io import write_atomic
from .buckets import ITERATION, TraceProfile

from ..engine.baseline import BASELINE_VERSION, PERF_KIND as BASELINE_KIND


@dataclass
class GatePolicy:
    floor: float = 0.02          # smallest gate, as a fraction
    default_gate: float = 0.05   # gate without repeated runs
    factor: float = 1.5          # gate = factor x noise band

    def validate(self) -> "GatePolicy":
        for name in ("floor", "default_gate", "factor"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise TracelintError(f"{name} must be a finite number >= 0, got {v!r}")
        return self

    def to_dict(self) -> dict[str, float]:
        return {"floor": self.floor, "default_gate": self.default_gate, "factor": self.factor}


def median(values: Sequence[float]) -> float:
    v = np.asarray([x for x in values if x is not None and not _isnan(x)], dtype=float)
    return float(np.median(v)) if len(v) else float("nan")


def _isnan(x) -> bool:
    try:
        return math.isnan(x)
    except TypeError:
        return False


def noise_band(values: Sequence[float]) -> float | None:
    """Largest relative deviation of a run from the median of the runs; None for < 2 runs."""
    v = np.asarray([x for x in values if x is not None and not _isnan(x)], dtype=float)
    if len(v) < 2:
        return None
    m = float(np.median(v))
    if m == 0:
        return 0.0 if np.all(v == 0) else float("inf")
    return float(np.max(np.abs(v - m)) / abs(m))


@dataclass
class Comparison:
    a: float
    b: float
    change: float | None        # relative, b/a - 1 (None when a side is missing)
    band: float | None          # measured noise band (None: no repeats)
    gate: float                 # threshold applied to |change|
    verdict: str                # no change | worse | better | missing
    regression: bool
    a_runs: list[float] = field(default_factory=list)
    b_runs: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"a": _num(self.a), "b": _num(self.b), "change": _num(self.change),
                "band": _num(self.band), "gate": _num(self.gate), "verdict": self.verdict,
                "regression": self.regression, "a_runs": [_num(x) for x in self.a_runs],
                "b_runs": [_num(x) for x in self.b_runs]}


def _num(x):
    if x is None:
        return None
    x = float(x)
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return round(x, 6) if abs(x) < 1e6 else round(x, 1)


def compare(a_runs: Sequence[float], b_runs: Sequence[float], policy: GatePolicy | None = None,
            better: str = "lower") -> Comparison:
    """Compare one metric's per-run values; better: 'lower' (times) or 'higher'."""
    policy = policy or GatePolicy()
    a_runs = [float(x) for x in a_runs if x is not None and not _isnan(x)]
    b_runs = [float(x) for x in b_runs if x is not None and not _isnan(x)]
    a, b = median(a_runs), median(b_runs)
    bands = [x for x in (noise_band(a_runs), noise_band(b_runs)) if x is not None]
    band = max(bands) if bands else None
    gate = max(policy.floor, policy.factor * band) if band is not None else policy.default_gate
    if not a_runs or not b_runs:
        return Comparison(a, b, None, band, gate, "missing", False, a_runs, b_runs)
    if a == 0:
        change = 0.0 if b == 0 else math.copysign(float("inf"), b)
    else:
        change = b / a - 1.0
    if abs(change) <= gate:
        verdict = "no change"
    elif (change > 0) == (better == "lower"):
        verdict = "worse"
    else:
        verdict = "better"
    return Comparison(a, b, change, band, gate, verdict, verdict == "worse", a_runs, b_runs)


# ----- metrics kept in a baseline --------------------------------------------------------------

def key_metrics(p: TraceProfile, *, max_buckets: int = 16, min_class_share: float = 0.01
                ) -> dict[str, dict[str, Any]]:
    """The few key metrics of one run: {name: {value, unit, better, scope}}.

    * ``iteration.p50`` / ``iteration.p99``: steady-state iteration time;
    * ``bucket[<key>].p50`` / ``.p99``: the other buckets with >= 2 steady instances (the
      ``max_buckets`` longest in total; TTFT/TPOT and --bucket patterns always);
    * ``gpu_time``: GPU time per steady iteration (or for the whole trace without iterations);
    * ``gpu_time[<class>]``: the same per kernel class, classes with >= 1 % of GPU time.
    """
    out: dict[str, dict[str, Any]] = {}
    buckets = [b for b in p.buckets.values() if len(b.steady) >= (1 if b.key == ITERATION else 2)]
    fixed = [b for b in buckets if b.kind in ("iteration", "pattern", "serving")]
    rest = sorted((b for b in buckets if b.kind == "range"), key=lambda b: -float(b.steady.sum()))
    for b in fixed + rest[: max(0, max_buckets - len(fixed))]:
        st = b.stats()
        name = "iteration" if b.kind == "iteration" else f"bucket[{b.key}]"
        for q in ("p50", "p99"):
            out[f"{name}.{q}"] = {"value": st[f"{q}_ns"], "unit": "ns", "better": "lower",
                                  "scope": "steady"}
    scope, gpu, cls = p.gpu_scope()
    out["gpu_time"] = {"value": gpu, "unit": "ns", "better": "lower", "scope": scope}
    for c, v in sorted(cls.items()):
        if gpu > 0 and v / gpu >= min_class_share:
            out[f"gpu_time[{c}]"] = {"value": v, "unit": "ns", "better": "lower", "scope": scope}
    return out


def git_commit(cwd: str | Path | None = None) -> dict[str, Any] | None:
    """HEAD commit (and whether the tree is dirty) when cwd is in a git repo, else None."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=10)
        return {"commit": head.stdout.strip(),
                "dirty": bool(dirty.stdout.strip()) if dirty.returncode == 0 else None}
    except (OSError, subprocess.SubprocessError):
        return None


def _findings_union(profiles: Sequence[TraceProfile]) -> tuple[list[dict[str, Any]], bool]:
    seen: dict[str, dict[str, Any]] = {}
    ran = any(p.lint is not None for p in profiles)
    for p in profiles:
        for fp, info in (p.lint or {}).items():
            e = seen.setdefault(fp, {"fingerprint": fp, "rule": info.get("rule", ""),
                                     "key": info.get("key", ""), "runs": 0})
            e["runs"] += 1
    return sorted(seen.values(), key=lambda e: (e["rule"], e["fingerprint"])), ran


def make_baseline(profiles: Sequence[TraceProfile], *, patterns: Sequence[str] = (),
                  policy: GatePolicy | None = None, cwd: str | Path | None = None,
                  max_buckets: int = 16) -> dict[str, Any]:
    """The baseline document for one or more runs of the same workload."""
    policy = (policy or GatePolicy()).validate()
    per_run = [key_metrics(p, max_buckets=max_buckets) for p in profiles]
    names = [k for k in per_run[0]] if per_run else []
    for m in per_run[1:]:                      # keep first-run order, add what later runs add
        names += [k for k in m if k not in names]
    metrics = {}
    for k in names:
        runs = [m[k]["value"] if k in m else None for m in per_run]
        ref = next(m[k] for m in per_run if k in m)
        vals = [v for v in runs if v is not None]
        metrics[k] = {"unit": ref["unit"], "better": ref["better"], "scope": ref["scope"],
                      "median": _num(median(vals)), "band": _num(noise_band(vals)),
                      "runs": [_num(v) for v in runs]}
    findings, ran = _findings_union(profiles)
    first = profiles[0].meta if profiles else {}
    return {
        "kind": BASELINE_KIND, "version": BASELINE_VERSION,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "tracelint": __version__,
        "git": git_commit(cwd),
        "hardware": {"devices": first.get("devices", [])},
        "versions": first.get("versions", {}),
        "sources": [p.source for p in profiles], "runs": len(profiles),
        "options": {"buckets": list(patterns), **policy.to_dict(), "max_buckets": max_buckets},
        "metrics": metrics,
        "findings_checked": ran,
        "findings": findings,
    }


def save_baseline(path: str | Path, doc: dict[str, Any]) -> None:
    from .diff import _clean
    write_atomic(path, json.dumps(_clean(doc), indent=1, allow_nan=False) + "\n")


class _Metric(msgspec.Struct, forbid_unknown_fields=False):
    runs: list[Optional[float]]
    unit: str = "ns"
    better: Literal["lower", "higher"] = "lower"
    scope: Optional[str] = None
    median: Optional[float] = None


class _PerfBaseline(msgspec.Struct, forbid_unknown_fields=False):
    kind: Literal["tracelint-perf-baseline", "tracelint-metrics-baseline"]
    metrics: dict[str, _Metric]
    version: int = 1
    runs: int = 1
    options: dict[str, Any] = {}
    findings: list[dict[str, Any]] = []


def read_metrics_baseline(path: str | Path) -> dict[str, Any]:
    """A performance baseline, checked field by field (one-line error naming the field)."""
    from ..engine.baseline import decode_typed, read_bytes
    data = read_bytes(path)
    decode_typed(path, data, BASELINE_KIND, _PerfBaseline)
    return json.loads(data)


# ----- the gate ------------------------------------------------------------------------------------

@dataclass
class GateResult:
    baseline: dict[str, Any]
    sources: list[str]
    metrics: dict[str, Comparison]
    missing: list[str]                       # in the baseline, not in the current runs
    not_comparable: dict[str, str]           # metric -> why (scope differs)
    new_findings: list[dict[str, Any]]
    fixed_findings: list[dict[str, Any]]
    findings_checked: bool
    warnings: list[str]
    policy: GatePolicy
    fail_on_findings: bool = False

    @property
    def regressions(self) -> list[str]:
        return [k for k, c in self.metrics.items() if c.regression]

    @property
    def failed(self) -> bool:
        return bool(self.regressions) or (self.fail_on_findings and bool(self.new_findings))

    def to_dict(self) -> dict[str, Any]:
        b = self.baseline
        return {
            "schema": "tracelint-gate/1", "passed": not self.failed,
            "regressions": self.regressions,
            "baseline": {"git": b.get("git"), "created": b.get("created"), "runs": b.get("runs"),
                         "hardware": b.get("hardware"), "versions": b.get("versions")},
            "sources": self.sources, "method": {**self.policy.to_dict(), "formula": FORMULA},
            "metrics": {k: {**c.to_dict(), "unit": b["metrics"][k].get("unit", "ns")}
                        for k, c in self.metrics.items()},
            "missing": self.missing, "not_comparable": self.not_comparable,
            "findings_checked": self.findings_checked,
            "new_findings": self.new_findings, "fixed_findings": self.fixed_findings,
            "warnings": self.warnings,
        }


FORMULA = ("gate = max(floor, factor x band), band = max over sides with >= 2 runs of "
           "max_i |x_i - median(x)| / median(x); without repeats gate = default_gate; "
           "regression when median(B)/median(A) - 1 > gate (for lower-is-better metrics)")


def run_gate(baseline: dict[str, Any], profiles: Sequence[TraceProfile], *,
             policy: GatePolicy | None = None, fail_on_findings: bool = False) -> GateResult:
    """Compare current runs against a baseline document."""
    opts = baseline.get("options", {})
    policy = policy or GatePolicy(floor=opts.get("floor", 0.02),
                                  default_gate=opts.get("default_gate", 0.05),
                                  factor=opts.get("factor", 1.5))
    policy.validate()
    per_run = [key_metrics(p, max_buckets=10**6) for p in profiles]
    metrics: dict[str, Comparison] = {}
    missing: list[str] = []
    not_comparable: dict[str, str] = {}
    for k, spec in baseline["metrics"].items():
        have = [m[k] for m in per_run if k in m]
        if not have:
            missing.append(k)
            continue
        if spec.get("scope") and have[0].get("scope") != spec.get("scope"):
            not_comparable[k] = (f"baseline measured {spec.get('scope')}, current run "
                                 f"{have[0].get('scope')}")
            continue
        a_runs = [v for v in spec.get("runs", []) if v is not None]
        if not a_runs and spec.get("median") is not None:
            a_runs = [spec["median"]]
        metrics[k] = compare(a_runs, [h["value"] for h in have], policy, spec.get("better", "lower"))
    warnings = []
    cur = profiles[0].meta if profiles else {}
    bdev = baseline.get("hardware", {}).get("devices", [])
    if bdev and cur.get("devices") and sorted(bdev) != sorted(cur.get("devices", [])):
        warnings.append(f"hardware differs: baseline {sorted(set(bdev))}, "
                        f"current {sorted(set(cur['devices']))}")
    bver = baseline.get("versions", {}).get("producer")
    if bver and cur.get("versions", {}).get("producer") and bver != cur["versions"]["producer"]:
        warnings.append(f"producer differs: baseline {bver!r}, current "
                        f"{cur['versions']['producer']!r}")
    base_fp = {e["fingerprint"]: e for e in baseline.get("findings", [])}
    checked = bool(baseline.get("findings_checked")) and all(p.lint is not None for p in profiles)
    new, fixed = [], []
    if checked:
        always = set.intersection(*[set(p.lint) for p in profiles]) if profiles else set()
        anyrun = set.union(*[set(p.lint) for p in profiles]) if profiles else set()
        for fp in sorted(always - set(base_fp)):
            info = next(p.lint[fp] for p in profiles)
            new.append({"fingerprint": fp, **info})
        runs = baseline.get("runs", 1)
        for fp, e in sorted(base_fp.items()):
            if e.get("runs", runs) >= runs and fp not in anyrun:
                fixed.append({k: e[k] for k in ("fingerprint", "rule", "key") if k in e})
    else:
        for p in profiles:
            if p.lint_error:
                warnings.append(f"{p.source}: findings not compared ({p.lint_error})")
                break
    return GateResult(baseline=baseline, sources=[p.source for p in profiles], metrics=metrics,
                      missing=missing, not_comparable=not_comparable, new_findings=new,
                      fixed_findings=fixed, findings_checked=checked, warnings=warnings,
                      policy=policy, fail_on_findings=fail_on_findings)


# ----- rendering ---------------------------------------------------------------------------------

_GATE_WORDS = {"worse": "REGRESSION", "better": "improved", "no change": "no change"}


def _gate_rows(res: GateResult) -> list[list[str]]:
    from .diff import fmt_change
    rows = []
    for k, c in res.metrics.items():
        unit = res.baseline["metrics"][k].get("unit", "ns")
        band = "–" if c.band is None else f"±{c.band:.1%}"
        rows.append([k, fmt_change(c, unit), band, f"{c.gate:.1%}", _GATE_WORDS.get(c.verdict, c.verdict)])
    return rows


def _gate_header(res: GateResult) -> list[str]:
    b = res.baseline
    git = (b.get("git") or {}).get("commit")
    lines = [f"baseline: {b.get('runs', 1)} run(s)" + (f", commit {git[:12]}" if git else "")
             + (f", {', '.join(sorted(set(b.get('hardware', {}).get('devices', []))))}"
                if b.get("hardware", {}).get("devices") else ""),
             f"current: {', '.join(res.sources)}",
             f"gate = max({res.policy.floor:.0%}, {res.policy.factor:g} × noise band) with repeats, "
             f"{res.policy.default_gate:.0%} without"]
    return lines


def _gate_tail(res: GateResult) -> list[str]:
    out = []
    for k in res.missing:
        out.append(f"missing in the current run(s): {k}")
    for k, why in res.not_comparable.items():
        out.append(f"not compared: {k} ({why})")
    for f in res.new_findings:
        out.append(f"new finding: {f.get('rule')} {f.get('title', '')} [{f.get('key', '')}]")
    for f in res.fixed_findings:
        out.append(f"finding gone: {f.get('rule')} [{f.get('key', '')}]")
    out += [f"warning: {w}" for w in res.warnings]
    return out


def render_gate_terminal(res: GateResult, console) -> None:
    from rich.table import Table
    from rich.text import Text
    for line in _gate_header(res):
        console.print(Text(line, style="dim"))
    t = Table(title="Gate", title_justify="left")
    for h in ("metric", "baseline → current", "noise band", "gate", "verdict"):
        t.add_column(h, overflow="fold")
    for row in _gate_rows(res):
        style = "bold red" if row[-1] == "REGRESSION" else ("green" if row[-1] == "improved" else "")
        t.add_row(*[Text(str(c)) for c in row[:-1]], Text(row[-1], style=style))
    console.print(t)
    for line in _gate_tail(res):
        console.print(Text(line, style="yellow" if line.startswith(("new", "warning")) else "dim"))
    if res.failed:
        why = ", ".join(res.regressions) or "new findings"
        console.print(Text(f"FAILED: {why}", style="bold red"))
    else:
        console.print(Text("passed", style="bold green"))


def render_gate_markdown(res: GateResult) -> str:
    lines = ["## tracelint gate: " + ("FAILED" if res.failed else "passed"), ""]
    lines += [f"- {line}" for line in _gate_header(res)] + [""]
    lines.append("| metric | baseline → current | noise band | gate | verdict |")
    lines.append("|---|---|---|---|---|")
    for row in _gate_rows(res):
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |")
    tail = _gate_tail(res)
    if tail:
        lines += [""] + [f"- {t}" for t in tail]
    return "\n".join(lines) + "\n"

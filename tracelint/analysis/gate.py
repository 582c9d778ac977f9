"""The regression gate: current runs against a performance baseline.

Before any number is compared the gate checks that it compares like with like: the
workload's fingerprint (hardware, producer, bucket names, kernel mix) and the coverage of the
baseline's metrics. A different workload is *not comparable* (exit 2), a baseline metric the
current runs lack (a renamed annotation) is a failure, never a silent pass. Each metric is then
judged by its confidence interval (:mod:`tracelint.analysis.stats`): only an interval wholly
above +floor is a regression; a metric with too few samples is *not gated*, and says why.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from .buckets import TraceProfile
from .kernel_calls import PREFIX as CALLS
from .kernel_calls import compare_calls
from .perf_baseline import comparability, fingerprint, key_metrics
from .stats import FORMULA, Comparison, GatePolicy, compare
from ..reporters.escape import clean

#: Below this share of the baseline's metrics present in the current runs: not comparable.
MIN_COVERAGE = 0.5

@dataclass
class GateResult:
    baseline: dict[str, Any]
    sources: list[str]
    metrics: dict[str, Comparison]
    missing: list[str]                       # in the baseline, not in the current runs
    not_comparable: list[str]                # why the workload differs (empty: comparable)
    new_findings: list[dict[str, Any]]
    fixed_findings: list[dict[str, Any]]
    findings_checked: bool
    warnings: list[str]
    policy: GatePolicy
    fail_on_findings: bool = False
    coverage: float = 1.0
    scope_changed: dict[str, str] = field(default_factory=dict)

    @property
    def regressions(self) -> list[str]:
        return [k for k, c in self.metrics.items() if c.regression]

    @property
    def gated(self) -> list[str]:
        return [k for k, c in self.metrics.items() if c.verdict in ("worse", "better", "no change")]

    @property
    def status(self) -> str:
        """passed | failed | not comparable | inconclusive."""
        if self.not_comparable:
            return "not comparable"
        if self.regressions or self.missing or (self.fail_on_findings and self.new_findings):
            return "failed"
        if not self.gated:
            return "inconclusive"
        return "passed"

    @property
    def failed(self) -> bool:
        return self.status != "passed"

    @property
    def exit_code(self) -> int:
        return {"passed": 0, "failed": 1}.get(self.status, 2)

    def reasons(self) -> list[str]:
        """One line per reason the gate did not pass."""
        out = list(self.not_comparable)
        out += [f"regression: {k} {_pct(self.metrics[k])}" for k in self.regressions]
        if self.missing:
            out.append(f"{len(self.missing)} baseline metric(s) missing in the current run(s): "
                       + ", ".join(self.missing[:6]) + (" ..." if len(self.missing) > 6 else ""))
        if self.fail_on_findings and self.new_findings:
            out.append(f"{len(self.new_findings)} new finding(s)")
        if self.status == "inconclusive":
            whys = sorted({c.why for c in self.metrics.values() if c.why})
            out.append("no metric could be gated" + (f": {whys[0]}" if whys else ""))
        return out

    def runs_advice(self) -> str:
        """How many runs would make the gate reliable at the chosen floor."""
        judged = [c for c in self.metrics.values()
                  if c.method in ("runs", "paired calls, runs") and c.verdict != "not gated"]
        if not judged:
            return ("single-run baseline: intervals come from the spread of iterations (and of "
                    "paired kernel calls) within the run; save the baseline from >= 3 runs to "
                    "measure run-to-run noise")
        need = [c.runs_needed for c in judged if c.runs_needed]
        noisy = [k for k, c in self.metrics.items() if c in judged and c.runs_needed is None]
        out = (f"at the measured run-to-run noise, {max(need)} runs per side make every interval "
               f"narrower than ±{self.policy.floor:.0%}" if need else "")
        if noisy:
            out += ("; " if out else "") + (f"{len(noisy)} metric(s) too noisy to resolve "
                                            f"±{self.policy.floor:.0%} with any practical number "
                                            f"of runs ({', '.join(noisy[:3])})")
        return out

    def to_dict(self) -> dict[str, Any]:
        b = self.baseline
        return {
            "schema": "tracelint-gate/2", "status": self.status, "passed": not self.failed,
            "reasons": self.reasons(), "regressions": self.regressions,
            "baseline": {"git": b.get("git"), "created": b.get("created"), "runs": b.get("runs"),
                         "hardware": b.get("hardware"), "versions": b.get("versions"),
                         "fingerprint": b.get("fingerprint")},
            "sources": self.sources, "method": {**self.policy.to_dict(), "formula": FORMULA},
            "coverage": round(self.coverage, 4),
            "metrics": {k: {**c.to_dict(), "unit": b["metrics"][k].get("unit", "ns")}
                        for k, c in self.metrics.items()},
            "missing": self.missing, "not_comparable": self.not_comparable,
            "scope_changed": self.scope_changed, "runs_advice": self.runs_advice(),
            "findings_checked": self.findings_checked,
            "new_findings": self.new_findings, "fixed_findings": self.fixed_findings,
            "warnings": self.warnings,
        }


def _pct(c: Comparison) -> str:
    if c.change is None:
        return ""
    iv = f" [{c.low:+.1%}, {c.high:+.1%}]" if c.low is not None else ""
    return f"{c.change:+.1%}{iv}"


def run_gate(baseline: dict[str, Any], profiles: Sequence[TraceProfile], *,
             policy: GatePolicy | None = None, fail_on_findings: bool = False) -> GateResult:
    """Compare current runs against a baseline document."""
    opts = baseline.get("options", {})
    policy = (policy or GatePolicy(floor=opts.get("floor", 0.02),
                                   confidence=opts.get("confidence", 0.95))).validate()
    per_run = [key_metrics(p, max_buckets=10**6, min_class_share=0.0) for p in profiles]
    metrics: dict[str, Comparison] = {}
    missing: list[str] = []
    scope_changed: dict[str, str] = {}
    for k, spec in baseline["metrics"].items():
        if k.startswith(CALLS + "["):       # paired call by call; a vanished class is not gated
            metrics[k] = compare_calls(spec.get("calls") or [],
                                       [m[k]["calls"] if k in m else {} for m in per_run], policy)
            continue
        have = [m[k] for m in per_run if k in m]
        if not have and k.startswith("gpu_time[") and all("gpu_time" in m for m in per_run):
            have = [{**m["gpu_time"], "samples": m["gpu_time"]["samples"] * 0} for m in per_run]
        if not have:                     # (a kernel class that vanished took 0 ns: a value)
            missing.append(k)
            continue
        if spec.get("scope") and have[0].get("scope") != spec.get("scope"):
            scope_changed[k] = (f"baseline measured {spec.get('scope')}, current run "
                                f"{have[0].get('scope')}")
            missing.append(k)
            continue
        a = [s for s in spec.get("samples") or [] if s] or [[v] for v in spec["runs"] if v is not None]
        metrics[k] = compare(a, [h["samples"] for h in have], spec.get("q", 50), policy,
                             spec.get("better", "lower"))
    total = len(baseline["metrics"]) or 1
    coverage = (total - len(missing)) / total
    why = comparability(baseline.get("fingerprint") or {}, fingerprint(profiles[0])) if profiles else []
    if coverage < MIN_COVERAGE:
        why.append(f"only {total - len(missing)} of {total} baseline metrics are present in the "
                   f"current run(s) (missing: {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''})")
    warnings = []
    cur = profiles[0].meta.get("versions", {}) if profiles else {}
    bver = baseline.get("versions", {}).get("producer")
    if bver and cur.get("producer") and bver != cur["producer"]:
        warnings.append(f"producer version differs: baseline {bver!r}, current {cur['producer']!r}")
    from ..efficiency.coverage import coverage_warnings, merge_summaries
    warnings += coverage_warnings(baseline.get("shapes") or {},
                                  merge_summaries(p.meta.get("shapes") for p in profiles))
    new, fixed, checked = _findings(baseline, profiles, warnings)
    return GateResult(baseline=baseline, sources=[p.source for p in profiles], metrics=metrics,
                      missing=missing, not_comparable=why, new_findings=new,
                      fixed_findings=fixed, findings_checked=checked, warnings=warnings,
                      policy=policy, fail_on_findings=fail_on_findings, coverage=coverage,
                      scope_changed=scope_changed)


def _findings(baseline, profiles, warnings) -> tuple[list, list, bool]:
    """New findings (in every current run, not in the baseline) and fixed ones, by identity."""
    base = {e.get("identity") or e.get("fingerprint"): e for e in baseline.get("findings", [])}
    checked = bool(baseline.get("findings_checked")) and bool(profiles) and all(
        p.lint is not None for p in profiles)
    if not checked:
        err = next((p.lint_error for p in profiles if p.lint_error), None)
        if err:
            warnings.append(f"findings not compared ({err})")
        return [], [], False
    always = set.intersection(*[set(p.lint) for p in profiles])
    anyrun = set.union(*[set(p.lint) for p in profiles])
    new = [{"identity": i, **next(p.lint[i] for p in profiles)} for i in sorted(always - set(base))]
    runs = baseline.get("runs", 1)
    fixed = [{k: e[k] for k in ("identity", "rule", "key") if k in e}
             for i, e in sorted(base.items()) if e.get("runs", runs) >= runs and i not in anyrun]
    return new, fixed, True


# ----- rendering ---------------------------------------------------------------------------------

_WORDS = {"worse": "REGRESSION", "better": "improved", "no change": "no change",
          "uncertain": "uncertain", "not gated": "not gated"}


def _rows(res: GateResult) -> list[list[str]]:
    from .fmt import fmt_change, fmt_interval
    rows = []
    for k, c in res.metrics.items():
        unit = res.baseline["metrics"][k].get("unit", "ns")
        how = {"runs": "runs", "instances": "iterations"}.get(c.method, c.method) + (
            f", noise ±{c.noise:.1%}" if c.noise is not None else "")
        rows.append([k, fmt_change(c, unit), fmt_interval(c), how, _WORDS.get(c.verdict, c.verdict)])
    return rows


def _header(res: GateResult) -> list[str]:
    b = res.baseline
    git = (b.get("git") or {}).get("commit")
    fp = b.get("fingerprint") or {}
    return [f"baseline: {b.get('runs', 1)} run(s)" + (f", commit {git[:12]}" if git else "")
            + (f", {', '.join(fp.get('devices', []))}" if fp.get("devices") else ""),
            f"current: {len(res.sources)} run(s): {', '.join(res.sources)}",
            "workload: " + ("same fingerprint" if not res.not_comparable else "DIFFERENT")
            + f"; {res.coverage:.0%} of the baseline's metrics present",
            f"regression = the {res.policy.confidence:.0%} interval of the change lies wholly "
            f"above +{res.policy.floor:.0%}; {res.runs_advice()}"]


def _tail(res: GateResult) -> list[str]:
    out = [f"missing in the current run(s): {k}" + (f" ({res.scope_changed[k]})"
                                                    if k in res.scope_changed else "")
           for k in res.missing]
    whys: dict[str, list[str]] = {}
    for k, c in res.metrics.items():
        if c.verdict == "not gated":
            whys.setdefault(c.why, []).append(k)
    out += [f"not gated: {', '.join(ks[:4])}{f' and {len(ks) - 4} more' if len(ks) > 4 else ''} "
            f"({why})" for why, ks in whys.items()]
    out += [f"{k}: {c.why}" for k, c in res.metrics.items() if c.why and c.verdict != "not gated"]
    out += [f"new finding: {f.get('rule')} {f.get('title', '')} [{f.get('key', '')}]"
            for f in res.new_findings]
    out += [f"finding gone: {f.get('rule')} [{f.get('key', '')}]" for f in res.fixed_findings]
    return out + [f"warning: {w}" for w in res.warnings]


HEADER = ("metric", "baseline → current", "interval", "noise from", "verdict")


def render_gate_terminal(res: GateResult, console) -> None:
    from rich.table import Table
    from rich.text import Text
    for line in _header(res):
        console.print(Text(clean(line), style="dim"))
    t = Table(title="Gate", title_justify="left")
    for h in HEADER:
        t.add_column(h, overflow="fold")
    for row in _rows(res):
        style = {"REGRESSION": "bold red", "improved": "green", "uncertain": "yellow"}.get(row[-1], "")
        t.add_row(*[Text(clean(c)) for c in row[:-1]], Text(row[-1], style=style))
    console.print(t)
    for line in _tail(res):
        console.print(Text(clean(line), style="yellow" if line.startswith(("new", "warning", "missing"))
                           else "dim"))
    colour = {"passed": "bold green", "failed": "bold red"}.get(res.status, "bold yellow")
    console.print(Text(res.status.upper() if res.failed else "passed", style=colour))
    for r in res.reasons():
        console.print(Text(clean(f"  {r}"), style=colour))


def render_gate_markdown(res: GateResult) -> str:
    from .fmt import md_cell
    lines = [f"## tracelint gate: {res.status.upper() if res.failed else 'passed'}", ""]
    lines += [f"- {md_cell(r)}" for r in res.reasons()] + ([""] if res.reasons() else [])
    lines += [f"- {md_cell(line)}" for line in _header(res)] + [""]
    lines.append("| " + " | ".join(HEADER) + " |")
    lines.append("|" + "---|" * len(HEADER))
    for row in _rows(res):
        lines.append("| " + " | ".join(md_cell(c) for c in row) + " |")
    tail = _tail(res)
    if tail:
        lines += [""] + [f"- {md_cell(t)}" for t in tail]
    return "\n".join(lines) + "\n"

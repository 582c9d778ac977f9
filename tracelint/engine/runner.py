"""Run the selected rules over a Timeline and collect a Report."""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from ..errors import TracelintError
from ..timeline.model import Timeline
from .baseline import apply_baseline, read_baseline
from .config import Config
from .context import Context
from .finding import Finding
from .registry import all_rules
from .report import Report, RuleInfo
from .rule import Rule


def rule_info(rule: type[Rule]) -> RuleInfo:
    return RuleInfo(id=rule.id, slug=rule.slug, title=rule.title, severity=rule.severity.value,
                    summary=rule.summary(), doc=rule.doc(),
                    layers=sorted(layer.value for layer in rule.layers),
                    fix=rule.section("Fix"),
                    counter_example=rule.section("Counter-example (when it does not apply)"))


def applicable(rule: type[Rule], tl: Timeline) -> str | None:
    """None when the rule can run, else why not (in words a user can act on)."""
    if not rule.needs:
        return None
    if any(len(tl.table(t)) for t in rule.needs):
        return None
    missing = ", ".join(sorted(rule.needs))
    if not tl.has_gpu_activity and rule.needs & {"kernels", "copies", "memsets"}:
        return "no GPU activity in the trace"
    return f"the trace has no {missing} events"


def run_rules(tl: Timeline, config: Config | None = None, ncu: pd.DataFrame | None = None,
              rules: list[type[Rule]] | None = None) -> Report:
    config = config or Config()
    available = rules if rules is not None else all_rules(config.rules_dirs)
    config.validate(available)
    selected = [r for r in available if config.is_selected(r)]
    ctx = Context(tl, config, ncu)
    findings: list[Finding] = []
    skipped: dict[str, str] = {}
    elapsed: dict[str, float] = {}
    for rule_cls in selected:
        why = applicable(rule_cls, tl)
        if why:
            skipped[rule_cls.id] = why
            continue
        t0 = time.perf_counter()
        rule = rule_cls(config.options_for(rule_cls))
        found = list(rule.check(ctx))
        elapsed[rule_cls.id] = time.perf_counter() - t0
        findings += found
    suppressed = 0
    if config.baseline:
        findings, suppressed = apply_baseline(findings, read_baseline(config.baseline))
    from ..cases.library import default_libraries, match_findings
    match_findings(findings, default_libraries(config.case_libraries), timeline=tl)
    return Report(source=tl.meta.source, timeline=tl, findings=findings,
                  rules=[rule_info(r) for r in selected], skipped=skipped,
                  suppressed=suppressed, elapsed_s=elapsed)


def lint(source: str | Path | Timeline, config: Config | None = None,
         ncu: str | Path | None = None, progress=None) -> Report:
    """Python API: lint a trace path or an already loaded Timeline."""
    from ..importers import load
    from ..importers.ncu_csv import load_ncu_csv
    t0 = time.perf_counter()
    tl = source if isinstance(source, Timeline) else load(source, progress=progress)
    t_load = time.perf_counter() - t0
    ncu_df = load_ncu_csv(ncu) if ncu else None
    t1 = time.perf_counter()
    report = run_rules(tl, config, ncu_df)
    report.elapsed_s = {"load": t_load, "rules": time.perf_counter() - t1, **report.elapsed_s}
    return report


__all__ = ["lint", "run_rules", "TracelintError"]

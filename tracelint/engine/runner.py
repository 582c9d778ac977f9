"""Run rules over a Timeline (trace scope) or a job's rank summaries (job scope).

Pure: it is given its rules and a loaded Timeline; loading files, choosing the built-in rules,
matching the case library and writing output belong to tracelint.api and above.
"""
from __future__ import annotations

import time

import pandas as pd

from ..forking import load_workers
from ..heap import trim
from ..timeline.model import Timeline
from .baseline import apply_baseline, read_baseline
from .config import Config
from .context import Context
from .finding import Finding
from .job_context import JobContext
from . import rule_processes
from .report import Report, RuleInfo
from .rule import Rule
from .rule_processes import Checked


def rule_info(rule: type[Rule]) -> RuleInfo:
    return RuleInfo(id=rule.id, slug=rule.slug, title=rule.title, severity=rule.severity.value,
                    summary=rule.summary(), doc=rule.doc(),
                    layers=sorted(layer.value for layer in rule.layers),
                    fix=rule.section("Fix"),
                    counter_example=rule.section("Counter-example (when it does not apply)"))


def applicable(rule: type[Rule], tl: Timeline) -> str | None:
    """None when the rule can run, else why not (in words a user can act on)."""
    framework = tl.meta.extra.get("framework")
    if rule.frameworks and framework and framework not in rule.frameworks:
        return (f"reads {'/'.join(sorted(rule.frameworks))} operator names; this is a "
                f"{framework} trace")
    if not rule.needs:
        return None
    if (rule.uses_kernel_times and rule.needs & {"kernels", "copies", "memsets", "api_calls"}
            and tl.meta.extra.get("kernel_timing") == "synthetic"):
        return ("kernel times in this trace are synthetic (CUPTI range profiler), and this "
                "rule measures time")
    if any(len(tl.table(t)) for t in rule.needs):
        return None
    missing = ", ".join(sorted(rule.needs))
    if not tl.has_gpu_activity and rule.needs & {"kernels", "copies", "memsets"}:
        return "no GPU activity in the trace"
    if rule.needs == {"memory"}:
        return ("the trace has no memory events (record them: tracelint capture "
                "--profile-memory, torch.profiler profile_memory=True, nsys --cuda-memory-usage=true)")
    return f"the trace has no {missing} events"


def _accepted(findings: list[Finding], config: Config) -> tuple[list[Finding], int]:
    """Findings not accepted in the configured findings baseline, and how many were."""
    if config.baseline and findings:
        return apply_baseline(findings, read_baseline(config.baseline))
    return findings, 0


#: A rule that ran this long worked on large arrays: its freed heap memory is given back
#: (tracelint.heap). After a short one it is left for the next rule (a trim costs refaults).
TRIM_AFTER_S = 0.25


def run_rules(tl: Timeline, rules: list[type[Rule]], config: Config | None = None,
              ncu: pd.DataFrame | None = None) -> Report:
    """The trace-scope rules among `rules` that the config selects, over one Timeline; on a
    large trace, checked by two processes where the CLI allows it (engine/rule_processes)."""
    config = config or Config()
    config.validate(rules)
    selected = [r for r in rules if r.scope == "trace" and config.is_selected(r)]
    ctx = Context(tl, config, ncu)

    def check_one(rule_cls: type[Rule], ctx: Context) -> Checked:
        why = applicable(rule_cls, tl)
        if why:
            return Checked(skipped=why)
        t0 = time.perf_counter()
        rule = rule_cls(config.options_for(rule_cls))
        why = rule.applicable(ctx)
        if why:
            return Checked(skipped=why)
        found = list(rule.check(ctx))
        elapsed = time.perf_counter() - t0
        if elapsed > TRIM_AFTER_S:
            trim()           # a long rule's freed memory goes back to the OS before the next
        return Checked(found, None, elapsed, rule)

    built: list = []                 # the base what-if, when built beside the worker's rules
    two = rule_processes.wanted(tl, load_workers())
    if two:
        # the worker starts on the rules while this process builds the base what-if
        outcomes = rule_processes.check_in_two(
            ctx, selected, check_one, lambda: built.append(base_whatif(tl, ctx, path=False)))
        ctx.release_rule_caches()    # this process's rule caches, before the replays' peak
    else:
        outcomes = [check_one(r, ctx) for r in selected]
    findings: list[Finding] = []
    skipped: dict[str, str] = {}
    elapsed: dict[str, float] = {}
    instances: dict[str, object] = {}
    for rule_cls, c in zip(selected, outcomes):
        if c.skipped:
            skipped[rule_cls.id] = c.skipped
            continue
        findings += c.findings
        instances[rule_cls.id] = c.fixes
        elapsed[rule_cls.id] = c.elapsed_s
    findings, suppressed = _accepted(findings, config)
    t0 = time.perf_counter()
    projected = project(tl, findings, instances, ctx, built[0] if built else NOT_BUILT, two)
    elapsed["savings"] = time.perf_counter() - t0
    return Report(source=tl.meta.source, timeline=tl, findings=findings,
                  rules=[rule_info(r) for r in selected], skipped=skipped,
                  suppressed=suppressed, elapsed_s=elapsed, **projected)


#: project() builds the base what-if itself unless it was built already.
NOT_BUILT = object()


def base_whatif(tl: Timeline, ctx: Context, path: bool = True):
    """(the what-if graph, its base replay's critical path) (None for a trace without GPU
    work or runtime calls: nothing to replay); built after the rules in one process, and
    while the worker starts on them in two. path=False (two processes): the path is left for
    later (None here) and the base replay kept for it; project() takes it beside the fixes'
    replays, where the second round of replays leaves a process idle."""
    ctx.release_rule_caches()        # the report makes them again, after the what-if's peak
    if not tl.has_gpu_activity and not len(tl.api_calls):
        return None
    from ..whatif.analysis import WhatIf
    w = WhatIf(tl)
    if not path:
        return w, None
    taken = w.critical_path_dict()
    w.release_base()                 # the replays with edits then run without its times
    return w, taken


def project(tl: Timeline, findings: list[Finding], instances: dict, ctx: Context,
            base=NOT_BUILT, two_processes: bool = False) -> dict:
    """Critical path and projected savings (engine/savings.py) for the report; base: what
    base_whatif returned, when it ran already; two_processes: the fixes' replays (and a path
    base_whatif left) dealt to two processes."""
    from .savings import explain_no_replay, project_savings
    if base is NOT_BUILT:
        base = base_whatif(tl, ctx)
    if base is None:
        explain_no_replay(findings, instances, ctx)
        return {}
    w, path = base
    saving_all, later = project_savings(w, findings, instances, ctx, two_processes,
                                        side_task=w.critical_path_dict if path is None else None)
    w.release_base()
    return {"saving_all_ns": saving_all, "critical_path": later if path is None else path}


#: Cross-rank findings get their saving from the job replay (ranks/job_whatif.py, run by
#: lint_job); called without it, they say so.
JOB_SAVING_NOTE = ("no job-level replay was run: the saving of a cross-rank fix comes from "
                   "replaying the ranks together through their matched collectives (lint_job)")


def run_job_rules(members: list, rules: list[type[Rule]], config: Config | None = None):
    """(findings, rule infos, skipped, suppressed, JobContext) of the job-scope rules among
    `rules` over the job's rank summaries (members)."""
    config = config or Config()
    selected = [r for r in rules if r.scope == "job" and config.is_selected(r)]
    ctx = JobContext(members, config) if members else None
    findings: list[Finding] = []
    skipped: dict[str, str] = {}
    for rule_cls in selected:
        rule = rule_cls(config.options_for(rule_cls))
        why = "no rank could be analysed" if ctx is None else rule.applicable(ctx)
        if why:
            skipped[rule_cls.id] = why
            continue
        findings += list(rule.check(ctx))
    findings, suppressed = _accepted(findings, config)
    for f in findings:
        f.saving_note = f.saving_note or JOB_SAVING_NOTE
    return findings, [rule_info(r) for r in selected], skipped, suppressed, ctx


__all__ = ["run_rules", "run_job_rules", "rule_info", "applicable"]

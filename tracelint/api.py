"""The lint workflow, once: load -> rules -> accepted-findings baseline -> case library.

Every entry point calls these functions: the CLI's `lint`, `capture`, `case add/check`, the
per-rank step of a job, the diff's finding comparison and the notebook API
(`tracelint.lint(...)`). The engine below runs rules it is given; this layer chooses them
(built-in table + configured rule folders) and adds the case library. Output (rendering,
scrubbing, writing) belongs to the layers above.

    import tracelint
    tl = tracelint.load("trace.json.gz")            # Timeline
    report = tracelint.lint("trace.json.gz")        # Report: .findings, .to_dict(), .to_pandas()
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from .engine.config import Config
    from .engine.report import Report
    from .engine.rule import Rule
    from .timeline.model import Timeline

Progress = Callable[[str, float], None]


def load(source: str | Path, progress: Progress | None = None) -> "Timeline":
    """Load a trace file (format sniffed from its content) into a Timeline. A numeric column
    that holds one value throughout is a read-only view (timeline.schema.share_constant_columns):
    `.copy()` a table before writing into it in place."""
    from .importers import load as load_trace
    from .pandas_text import python_text
    with python_text():
        return load_trace(source, progress=progress)


def available_rules(config: "Config | None" = None) -> list[type["Rule"]]:
    """The built-in rules (tracelint.rules.TABLE) and those of the configured rule folders,
    checked for well-formed, unique ids and slugs; both scopes (trace and job)."""
    from .engine.registry import checked, rules_from_dir
    from .rules import builtin_rules
    found = builtin_rules()
    for folder in (config.rules_dirs if config is not None else []):
        found += rules_from_dir(folder)
    return checked(found)


def lint(source: "str | Path | Timeline", config: "Config | None" = None,
         ncu: str | Path | None = None, progress: Progress | None = None,
         match_cases: bool = True) -> "Report":
    """Lint one trace (a path or a loaded Timeline): the trace-scope rules the config selects,
    minus the findings accepted in its baseline, each finding with the library cases it
    resembles (match_cases=False skips that, e.g. in a job's per-rank step). pandas keeps
    text as Python objects meanwhile (tracelint.pandas_text)."""
    from .pandas_text import python_text
    with python_text():
        return _lint(source, config, ncu, progress, match_cases)


def _lint(source, config, ncu, progress, match_cases) -> "Report":
    from .engine.config import Config
    from .engine.runner import run_rules
    from .timeline.model import Timeline
    config = config or Config()
    tl = source if isinstance(source, Timeline) else load(source, progress=progress)
    t_load = tl.meta.load_s          # timed by the importer, also when the caller loaded it
    ncu_df = None
    if ncu:
        from .importers.ncu_csv import load_ncu_csv
        ncu_df = load_ncu_csv(ncu)
    t1 = time.perf_counter()
    report = run_rules(tl, available_rules(config), config, ncu_df)
    if match_cases:
        from .cases.library import default_libraries
        from .cases.match import match_findings
        match_findings(report.findings, default_libraries(config.case_libraries), timeline=tl)
    report.elapsed_s = {"load": t_load, "rules": time.perf_counter() - t1, **report.elapsed_s}
    from .efficiency.roofline import cached_efficiency
    report.sections["efficiency"] = lambda: cached_efficiency(tl).to_dict(ncu=ncu_df)
    if len(tl.memory):            # the memory timeline (timeline/memory.py), when recorded
        from .timeline.memory import memory_summary
        report.sections["memory"] = lambda: memory_summary(tl, points=400)
    return report


def lint_job_rules(members: list, config: "Config | None" = None):
    """The job-scope rules over a job's rank summaries: (findings, rule infos, skipped,
    suppressed, JobContext)."""
    from .engine.runner import run_job_rules
    return run_job_rules(members, available_rules(config), config)


__all__ = ["load", "lint", "available_rules", "lint_job_rules"]

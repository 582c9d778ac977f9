"""`tracelint lint TRACE`: run the rules, render a report, exit 0 / 1 (findings) / 2 (error)."""
from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer
from ..engine.config import Config, load_config
from .. import warmup
from ..errors import TracelintError
from ..io import check_output
from .app import app
from .common import emit, load_trace, note, sink


class Format(str, Enum):
    terminal = "terminal"
    json = "json"
    html = "html"
    sarif = "sarif"
    markdown = "markdown"


def build_config(config: str | None, select: list[str] | None, ignore: list[str] | None,
                 rules_dir: list[str] | None, fail_on: str | None, baseline: str | None,
                 source_root: list[str] | None = None, path_map: list[str] | None = None) -> Config:
    """Defaults < config file < CLI flags."""
    cfg = load_config(config)
    cfg.source_roots = list(source_root or []) + cfg.source_roots
    cfg.path_map = list(path_map or []) + cfg.path_map
    if select:
        cfg.select = [s for item in select for s in item.split(",") if s]
    if ignore:
        cfg.ignore = cfg.ignore + [s for item in ignore for s in item.split(",") if s]
    if rules_dir:
        cfg.rules_dirs = cfg.rules_dirs + list(rules_dir)
    if fail_on:
        cfg.fail_on = fail_on
    if baseline:
        cfg.baseline = baseline
    return cfg


@app.command()
def lint(
    traces: Annotated[list[str], typer.Argument(help="Trace file, or several files / a folder / a glob / an fsspec URL of one job's ranks (nsys .sqlite, Kineto .json/.json.gz, .nsys-rep)")],
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Report format.")] = Format.terminal,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Write the report to this file (atomically).")] = None,
    select: Annotated[Optional[list[str]], typer.Option("--select", help="Rules to run: ids, prefixes, slugs, groups, ALL.")] = None,
    ignore: Annotated[Optional[list[str]], typer.Option("--ignore", help="Rules to skip.")] = None,
    config: Annotated[Optional[str], typer.Option("--config", help="tracelint.toml or pyproject.toml to read.")] = None,
    rules_dir: Annotated[Optional[list[str]], typer.Option("--rules-dir", help="Extra folder of rule files.")] = None,
    fail_on: Annotated[Optional[str], typer.Option("--fail-on", help="Exit 1 at or above: error, warning, info, never.")] = None,
    baseline: Annotated[Optional[str], typer.Option("--baseline", help="Hide findings accepted in this baseline file.")] = None,
    write_baseline: Annotated[Optional[str], typer.Option("--write-baseline", help="Accept all current findings into this baseline file.")] = None,
    ncu: Annotated[Optional[str], typer.Option("--ncu", help="Nsight Compute CSV (ncu --csv --page raw) for microarchitecture evidence.")] = None,
    annotate: Annotated[Optional[str], typer.Option("--annotate", help="Write the trace with a tracelint findings track (Chrome trace JSON).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Summary and one line per finding.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Full evidence and capture hints.")] = False,
    no_scrub: Annotated[bool, typer.Option("--no-scrub", help="Keep secrets in the report (by default tokens, passwords and keys in names and messages become <redacted>).")] = False,
    scrub_paths: Annotated[bool, typer.Option("--scrub-paths", help="Also anonymise home directories, user and host names in the report.")] = False,
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", help="Worker processes for a multi-rank job (default: min(CPUs, ranks)); for one large trace, processes that decode it by byte range (plain Kineto JSON of 1 MiB or more, gzip of 64 MiB or more once decompressed to a temporary file; default: the usable CPUs, at most 4) and, from 200,000 rows to 4 M, two that check its rules and replay its fixes (1: one process).")] = None,
    dask: Annotated[Optional[str], typer.Option("--dask", help="Run the per-rank work on this Dask scheduler (tcp://host:8786); the workers read the traces (shared path or fsspec URL).")] = None,
    source_root: Annotated[Optional[list[str]], typer.Option("--source-root", help="Folder the profiled code lives in (repeatable): source lines are narrowed to the call and SARIF paths made relative to it.")] = None,
    path_map: Annotated[Optional[list[str]], typer.Option("--path-map", help="Rewrite a path prefix recorded in the trace: OLD=NEW (NEW may be empty to strip), e.g. /workspace/=.")] = None,
):
    """Lint a trace for performance anti-patterns."""
    if quiet and verbose:
        raise TracelintError("-q/--quiet and -v/--verbose contradict each other: give one")
    cfg = build_config(config, select, ignore, rules_dir, fail_on, baseline, source_root, path_map)
    raise typer.Exit(lint_and_report(
        traces, cfg, fmt, output=output, write_baseline=write_baseline, ncu=ncu, annotate=annotate,
        quiet=quiet, verbose=verbose, no_scrub=no_scrub, scrub_paths=scrub_paths, jobs=jobs, dask=dask))


def lint_and_report(traces: list[str], cfg: Config, fmt: Format = Format.terminal, *,
                    output: str | None = None, write_baseline: str | None = None,
                    ncu: str | None = None, annotate: str | None = None, quiet: bool = False,
                    verbose: bool = False, no_scrub: bool = False, scrub_paths: bool = False,
                    jobs: int | None = None, dask: str | None = None) -> int:
    """What `tracelint lint` does after reading its options (also run by `capture`): lint,
    accept findings into a baseline, scrub, render, write; returns the exit code."""
    sk = sink(traces, enabled=not no_scrub, paths=scrub_paths)   # the one output sink
    report = _run(traces, cfg, fmt, ncu=ncu, annotate=annotate, quiet=quiet, jobs=jobs, dask=dask)
    srcs = [str(x) for x in (getattr(report, "sources", None) or traces)]
    sk.learn(srcs, getattr(report, "scanned", None))   # a job's workers scanned their ranks
    ins = [*srcs, *([ncu] if ncu else [])]
    for out in (output, write_baseline, annotate):
        if out:
            check_output(out, ins)
    if write_baseline:
        from ..secrets.sink import scrub_committed   # keys are names: never commit a secret
        n = report.write_baseline(write_baseline, scrub=scrub_committed)
        note(f"baseline: {n} finding(s) accepted into {write_baseline}")
    if not no_scrub:
        from ..ranks.report import JobReport, scrub_job_report
        from ..secrets import scrub_report
        (scrub_job_report if isinstance(report, JobReport) else scrub_report)(report, paths=scrub_paths)
    from ..reporters import render, render_text
    text = render(report, fmt, verbose=verbose, quiet=quiet)
    if text is not None:
        emit(text, output, markup=fmt in (Format.html, Format.markdown), inputs=ins)
    elif output:
        emit(render_text(report, verbose=verbose, quiet=quiet), output, inputs=ins)
    if annotate:
        from ..reporters.annotate import write_annotated_trace
        write_annotated_trace(report, annotate)
    return report.exit_code(cfg.fail_on)


def _run(traces: list[str], cfg: Config, fmt: Format, ncu: str | None, annotate: str | None,
         quiet: bool, jobs: int | None, dask: str | None):
    """One trace -> its Report; several ranks of a job -> the JobReport."""
    from ..ranks.inputs import is_job_input
    progress = not quiet       # on stderr, and only when stderr is a terminal
    if dask or is_job_input(traces):
        from ..ranks.job import lint_job
        if ncu or annotate:
            raise TracelintError("--ncu and --annotate apply to one trace; lint the rank's file alone")
        from .common import stderr_may_be_terminal
        # no TTY: the bar's rich modules are not imported at all (45 ms before the workers start)
        report = lint_job(traces, cfg, jobs=jobs, dask_address=dask,
                          progress=progress and stderr_may_be_terminal())
        if not report.ranks:
            why = "; ".join(f"{s.label}: {s.error}" for s in report.failed[:3])
            raise TracelintError(f"no rank could be analysed ({why})" if why else "no rank could be analysed")
        return report
    from ..api import lint as run_lint
    from ..secrets.sink import current_sink
    # while a large trace decodes: the sink's scan of it, the rules' modules, the case library
    warmup.later(current_sink().ready, lambda: _rules_and_cases(cfg))
    report = run_lint(load_trace(traces[0], progress=progress, workers=jobs), cfg, ncu=ncu)
    report.source = traces[0]
    return report


def _rules_and_cases(cfg: Config) -> None:
    """What the lint reads after the load: the built-in rules' modules and the case library
    (about 0.09 s), read while a large trace decodes (tracelint.warmup). Rule folders of the
    config are left to the lint: their files are the user's code, imported once."""
    from ..cases.library import default_libraries, load_libraries
    from ..rules import builtin_rules
    builtin_rules()
    load_libraries(default_libraries(cfg.case_libraries))

"""`tracelint lint TRACE`: run the rules, render a report, exit 0 / 1 (findings) / 2 (error)."""
from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer
from rich.console import Console

from ..engine.config import Config, load_config
from ..engine.finding import Severity
from .app import app
from .common import emit, load_trace, stderr


class Format(str, Enum):
    terminal = "terminal"
    json = "json"
    html = "html"
    sarif = "sarif"
    markdown = "markdown"


def build_config(config: str | None, select: list[str] | None, ignore: list[str] | None,
                 rules_dir: list[str] | None, fail_on: str | None, baseline: str | None) -> Config:
    """Defaults < config file < CLI flags."""
    cfg = load_config(config)
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


def exit_code(findings, fail_on: str) -> int:
    if fail_on == "never":
        return 0
    threshold = Severity(fail_on).rank
    return 1 if any(f.severity.rank >= threshold for f in findings) else 0


def render(report, fmt: Format, verbose: bool = False, quiet: bool = False) -> str | None:
    """Render to text; terminal output goes straight to the console (returns None)."""
    if fmt is Format.terminal:
        from ..reporters.terminal import render_terminal
        render_terminal(report, Console(), verbose=verbose, quiet=quiet)
        return None
    if fmt is Format.json:
        from ..reporters.json_report import render_json
        return render_json(report)
    if fmt is Format.html:
        from ..reporters.html import render_html
        return render_html(report)
    if fmt is Format.sarif:
        import json
        from ..reporters.sarif import render_sarif
        return json.dumps(render_sarif(report), indent=1)
    from ..reporters.markdown import render_markdown
    return render_markdown(report)


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
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", help="Worker processes for a multi-rank job (default: min(CPUs, ranks)).")] = None,
    dask: Annotated[Optional[str], typer.Option("--dask", help="Run the per-rank work on this Dask scheduler (tcp://host:8786); the workers read the traces (shared path or fsspec URL).")] = None,
):
    """Lint a trace for performance anti-patterns."""
    from ..engine.baseline import write_baseline as save_baseline
    from ..engine.runner import lint as run_lint
    cfg = build_config(config, select, ignore, rules_dir, fail_on, baseline)
    from ..ranks.job import is_job_input, lint_job_command
    if dask or is_job_input(traces):
        raise typer.Exit(lint_job_command(
            traces, cfg, fmt.value, output=output, jobs=jobs, dask=dask, write_baseline=write_baseline,
            ncu=ncu, annotate=annotate, quiet=quiet, verbose=verbose, no_scrub=no_scrub,
            scrub_paths=scrub_paths))
    trace = traces[0]
    tl = load_trace(trace, progress=fmt is Format.terminal and not quiet)
    report = run_lint(tl, cfg, ncu=ncu)
    report.source = trace
    if write_baseline:
        save_baseline(write_baseline, report.findings)
        stderr.print(f"baseline: {len(report.findings)} finding(s) accepted into {write_baseline}")
    if not no_scrub:
        from ..secrets import scrub_report
        scrub_report(report, paths=scrub_paths)
    text = render(report, fmt, verbose=verbose, quiet=quiet)
    if text is not None:
        emit(text, output)
    elif output:
        from ..reporters.terminal import render_terminal
        rec = Console(record=True, width=120, color_system=None, file=open("/dev/null", "w"))
        render_terminal(report, rec, verbose=verbose, quiet=quiet)
        emit(rec.export_text(), output)
    if annotate:
        from ..reporters.annotate import write_annotated_trace
        write_annotated_trace(report, annotate)
    raise typer.Exit(exit_code(report.findings, cfg.fail_on))

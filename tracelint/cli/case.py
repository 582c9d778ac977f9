"""`tracelint case add|list|show|check|render|match`: the case library of performance failures.

    tracelint case add run.sqlite --finding 0 --id my-case --symptom "..." --fix "..."
    tracelint case add trace.json.gz --rule TL003 --window 1000:2000000 --library perf-cases
    tracelint case check                      # replay every case of the built-in library
    tracelint case check perf-cases           # exit 1 when a case no longer reproduces
    tracelint case render -o docs/cases       # default folder: ./tracelint-cases
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from ..errors import TracelintError
from ..reporters.escape import rich_text
from .app import app, fail

case_app = typer.Typer(name="case", no_args_is_help=True, add_completion=False,
                       help="The case library: performance failures with evidence, fix, "
                            "counter-example and rollback trigger, replayed from trace excerpts.")
app.add_typer(case_app, name="case")

_ROLLBACK = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*(>=|<=|>|<)\s*([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")
_METRIC = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*=\s*(?:([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*->\s*)?"
                     r"([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")


# ----- helpers --------------------------------------------------------------------------------
def _config(config: str | None):
    from ..engine.config import load_config
    return load_config(config)


def _libraries(extra: list[str] | None, config: str | None = None) -> list[Path]:
    """The built-in library, the configured ones (`case-libraries`, once wired), then --library."""
    from ..cases.library import default_libraries
    configured = list(getattr(_config(config), "case_libraries", None) or [])
    return default_libraries(configured + list(extra or []))


def _parse_window(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d[\d_]*)\s*:\s*(\d[\d_]*)\s*", text or "")
    if not m:
        raise fail(f"--window {text!r}: expected START:END in ns, e.g. 1200000:1450000")
    a, b = int(m.group(1).replace("_", "")), int(m.group(2).replace("_", ""))
    if b < a:
        raise fail(f"--window {text!r}: END is before START")
    return a, b


def _parse_rollback(text: str, note: str | None):
    from ..cases.model import Rollback
    m = _ROLLBACK.match(text or "")
    if not m:
        raise fail(f"--rollback {text!r}: expected METRIC>VALUE[UNIT] or METRIC<VALUE[UNIT], "
                   "e.g. 'ttft_p50>1.0 s'")
    name, op, value, unit = m.groups()
    return Rollback(metric=name, threshold=float(value), direction="above" if op.startswith(">") else "below",
                    unit=unit or "", note=note or "")


def _parse_metric(text: str):
    from ..cases.model import Metric
    m = _METRIC.match(text or "")
    if not m:
        raise fail(f"--metric {text!r}: expected NAME=VALUE[UNIT] or NAME=BEFORE->AFTER[UNIT], "
                   "e.g. 'ttft_p50=0.82->1.25 s'")
    name, before, value, unit = m.groups()
    return Metric(name=name, value=float(value), unit=unit or "", source="reported",
                  baseline=float(before) if before is not None else None)


def _parse_tags(items: list[str] | None) -> dict[str, str]:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise fail(f"--tag {item!r}: expected KEY=VALUE, e.g. hardware=H100")
        k, v = item.split("=", 1)
        if not k.strip():
            raise fail(f"--tag {item!r}: empty key")
        out[k.strip()] = v.strip()
    return out


def _kib(n: int) -> str:
    return f"{n / 1024:.0f} KiB"


# ----- add ------------------------------------------------------------------------------------
@case_app.command("add")
def add(
    trace: Annotated[str, typer.Argument(help="The trace to cut the excerpt from (nsys .sqlite or Kineto .json/.json.gz).")],
    finding: Annotated[Optional[int], typer.Option("--finding", help="Index N in the sorted findings of `tracelint lint TRACE --format json`.")] = None,
    rule: Annotated[Optional[str], typer.Option("--rule", help="The rule the case judges (with --window).")] = None,
    window: Annotated[Optional[str], typer.Option("--window", help="START:END in ns (the trace's time base) to cut around (with --rule).")] = None,
    context_ns: Annotated[Optional[int], typer.Option("--context-ns", min=0, help="Extra time kept on both sides of the window (ns); default: the window's length, at least 200 µs. Shrunk to fit the size limit.")] = None,
    case_id: Annotated[Optional[str], typer.Option("--id", help="Case id (a slug); default from the rule and the trace name.")] = None,
    title: Annotated[Optional[str], typer.Option("--title", help="One-line title.")] = None,
    library: Annotated[Optional[str], typer.Option("--library", help="Library folder to add the case to; default: the first `case-libraries` entry of tracelint.toml.")] = None,
    symptom: Annotated[Optional[str], typer.Option("--symptom", help="What users saw.")] = None,
    observation: Annotated[Optional[str], typer.Option("--observation", help="What the trace shows (default: the finding's measured evidence).")] = None,
    judgement: Annotated[Optional[str], typer.Option("--judgement", help="Why it happened.")] = None,
    fix: Annotated[Optional[str], typer.Option("--fix", help="What fixed it.")] = None,
    counter_example: Annotated[Optional[str], typer.Option("--counter-example", help="When the same change is right.")] = None,
    rollback: Annotated[Optional[str], typer.Option("--rollback", help="Rollback trigger METRIC>VALUE[UNIT] or METRIC<VALUE[UNIT].")] = None,
    rollback_note: Annotated[Optional[str], typer.Option("--rollback-note", help="Where the rollback metric is measured.")] = None,
    metric: Annotated[Optional[list[str]], typer.Option("--metric", help="Extra reported key metric NAME=VALUE[UNIT] or NAME=BEFORE->AFTER[UNIT] (repeatable).")] = None,
    tag: Annotated[Optional[list[str]], typer.Option("--tag", help="Tag KEY=VALUE: hardware, framework, model, workload, or your own (repeatable).")] = None,
    config: Annotated[Optional[str], typer.Option("--config", help="tracelint.toml or pyproject.toml (as for lint).")] = None,
    rules_dir: Annotated[Optional[list[str]], typer.Option("--rules-dir", help="Extra folder of rule files.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing case with the same --id.")] = False,
    edit: Annotated[bool, typer.Option("--edit", help="Open case.yaml in $EDITOR afterwards.")] = False,
):
    """Cut an excerpt that reproduces a finding and add it to a library as a new case."""
    from ..cases.add import create_case
    from ..cases.model import load_case
    from ..api import available_rules
    from ..engine.config import Config
    if (finding is None) == (rule is None):
        raise fail("give either --finding N, or --rule ID with --window START:END")
    if finding is not None and window is not None:
        raise fail("--window goes with --rule; --finding cuts around the finding's own window")
    if rule is not None and window is None:
        raise fail("--rule needs --window START:END (ns)")
    fields = {k: v for k, v in dict(symptom=symptom, observation=observation, judgement=judgement,
                                     fix=fix, counter_example=counter_example).items() if v}
    rb = _parse_rollback(rollback, rollback_note) if rollback else None
    metrics = [_parse_metric(m) for m in metric or []]
    tags = _parse_tags(tag)
    f = tl = None
    win = None
    if finding is not None:
        from ..api import lint as run_lint
        from .common import load_trace
        from .lint import build_config
        cfg = build_config(config, None, None, rules_dir, None, None)
        tl = load_trace(trace, progress=False)
        report = run_lint(tl, cfg)
        found = report.sorted_findings()
        if not 0 <= finding < len(found):
            raise fail(f"--finding {finding}: {trace} has {len(found)} finding(s)"
                       + (f" (0..{len(found) - 1})" if found else "")
                       + "; see `tracelint lint TRACE --format json`")
        f = found[finding]
    else:
        rule = rule.upper()
        known = {r.id for r in available_rules(Config(rules_dirs=list(rules_dir or [])))}
        if rule not in known:
            raise fail(f"--rule {rule}: unknown rule (see `tracelint rules`)")
        win = _parse_window(window)
    if library is None:      # never a folder of whatever directory the user stands in
        configured = list(getattr(_config(config), "case_libraries", None) or [])
        if not configured:
            raise fail("--library DIR: which case library to add to (or set case-libraries "
                       "in tracelint.toml)")
        library = configured[0]
    added = create_case(trace, Path(library), finding=f, timeline=tl, rule=rule, window=win,
                        context_ns=context_ns, case_id=case_id, title=title, fields=fields,
                        tags=tags, extra_metrics=metrics, rollback=rb,
                        rules_dirs=list(rules_dir or []), force=force)
    case = added.case
    out = Console(highlight=False)
    out.print(f"added case [bold]{case.id}[/] in {case.folder} — {case.excerpt.file} "
              f"{_kib(added.stored_bytes)} stored (limit 256 KiB), context {added.context_ns} ns; "
              f"{case.rules[0]} fires on the excerpt", soft_wrap=True)
    if added.personal_hits:
        out.print(f"[yellow]note:[/] the excerpt holds {added.personal_hits} personal-data value(s) "
                  "(user / host names, paths) from the source trace; review before committing it, "
                  "or add the case from `tracelint redact TRACE -o CLEAN --paths`")
    if edit:
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if not editor:
            raise fail("--edit: set $EDITOR (or $VISUAL)")
        subprocess.call([*shlex.split(editor), str(case.folder / "case.yaml")])
        case = load_case(case.folder)
    todo = case.todos()
    if todo:
        out.print(f"to fill in: {', '.join(todo)} (edit {case.folder / 'case.yaml'}, then "
                  f"`tracelint case check {library}`)", soft_wrap=True)


# ----- list / show ----------------------------------------------------------------------------
@case_app.command("list")
def list_cases(
    library: Annotated[Optional[list[str]], typer.Option("--library", help="Extra library folder (repeatable); the built-in one is always listed.")] = None,
    config: Annotated[Optional[str], typer.Option("--config", help="tracelint.toml or pyproject.toml.")] = None,
):
    """List the cases of the built-in and configured libraries."""
    from ..cases.library import load_library
    from ..cases.match import gpu_family
    libs = _libraries(library, config)
    table = Table(show_lines=False, header_style="bold")
    table.add_column("id", no_wrap=True)
    table.add_column("rules", no_wrap=True)
    table.add_column("hardware", no_wrap=True)
    table.add_column("title", overflow="fold", ratio=3)
    table.add_column("workload", overflow="fold", ratio=1)
    table.add_column("evidence", overflow="fold", ratio=1)
    if len(libs) > 1:
        table.add_column("library", overflow="fold")
    n = 0
    for lib in libs:
        for c in load_library(lib):
            hw = c.tags.get("hardware", "")
            row = [c.id, ",".join(c.rules), gpu_family(hw) or hw, c.title, c.tags.get("workload", ""),
                   c.label]
            table.add_row(*(rich_text(x) for x in row + ([str(lib)] if len(libs) > 1 else [])))
            n += 1
    out = Console(highlight=False)
    if not out.is_terminal:              # piped: do not fold ids and titles at 80 columns
        out = Console(highlight=False, width=220)
    out.print(table)
    out.print(f"{n} case(s)")


@case_app.command("show")
def show(
    case_id: Annotated[str, typer.Argument(metavar="ID", help="Case id.")],
    library: Annotated[Optional[list[str]], typer.Option("--library", help="Extra library folder (repeatable).")] = None,
    config: Annotated[Optional[str], typer.Option("--config", help="tracelint.toml or pyproject.toml.")] = None,
):
    """Show one case: symptom, metrics, observation, judgement, fix, counter-example, rollback."""
    from rich.markdown import Markdown

    from ..cases.excerpt import stored_size
    from ..cases.library import find_case
    from ..cases.render import render_case
    case = find_case(_libraries(library, config), case_id)
    size = stored_size(case.excerpt_path) if case.excerpt_path.is_file() else None
    Console().print(Markdown(render_case(case, excerpt_bytes=size, excerpt_link=str(case.excerpt_path))))


# ----- check ----------------------------------------------------------------------------------
@case_app.command("check")
def check(
    directory: Annotated[Optional[str], typer.Argument(metavar="[DIR]", help="Library folder (or one case folder); default: the built-in and configured libraries.")] = None,
    rules_dir: Annotated[Optional[list[str]], typer.Option("--rules-dir", help="Extra folder of rule files (for cases judged by your own rules).")] = None,
    config: Annotated[Optional[str], typer.Option("--config", help="tracelint.toml or pyproject.toml.")] = None,
):
    """Replay every case: its excerpt must still produce its judged findings. Exit 1 on any
    failure (one line per case), 2 when a library cannot be read."""
    from ..cases.check import check_case
    from ..cases.library import load_library
    libs = [Path(directory)] if directory else _libraries(None, config)
    try:
        cases = [c for lib in libs for c in load_library(lib)]
    except TracelintError as exc:
        raise fail(str(exc)) from None
    if not cases:
        raise fail(f"no cases in {', '.join(map(str, libs))} (a case is a folder with a case.yaml)")
    failed = 0
    for c in cases:
        res = check_case(c, list(rules_dir or []))
        if res.ok:
            typer.echo(f"ok    {c.id} ({', '.join(c.rules)}; {_kib(res.stored_bytes)})")
        else:
            failed += 1
            typer.echo(f"FAIL  {c.id}: {res.reason}")
    typer.echo(f"{len(cases) - failed} of {len(cases)} case(s) reproduce"
               + (f"; {failed} failed" if failed else ""))
    raise typer.Exit(1 if failed else 0)


# ----- render ---------------------------------------------------------------------------------
@case_app.command("render")
def render(
    directory: Annotated[Optional[str], typer.Argument(metavar="[DIR]", help="Library folder; default: the built-in library.")] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="Folder for <id>.md pages and index.md (created).")] = "tracelint-cases",
):
    """Write one Markdown page per case and an index."""
    from ..cases.library import builtin_library, load_library
    from ..cases.render import render_library
    cases = load_library(Path(directory) if directory else builtin_library())
    written = render_library(cases, output)
    typer.echo(f"wrote {len(written) - 1} case page(s) and {Path(output) / 'index.md'}")


# ----- match ----------------------------------------------------------------------------------
@case_app.command("match")
def match(
    trace: Annotated[str, typer.Argument(help="Trace to lint.")],
    library: Annotated[Optional[list[str]], typer.Option("--library", help="Extra library folder (repeatable).")] = None,
    config: Annotated[Optional[str], typer.Option("--config", help="tracelint.toml or pyproject.toml.")] = None,
):
    """Lint a trace and name, per finding, the library cases it resembles."""
    from ..cases.match import match_findings
    from ..api import lint as run_lint
    from .common import fmt_ns, load_trace
    from .lint import build_config
    cfg = build_config(config, None, None, None, None, None)
    tl = load_trace(trace, progress=False)
    report = run_lint(tl, cfg)
    findings = report.sorted_findings()
    match_findings(findings, _libraries(library, config), timeline=tl)
    out = Console(highlight=False)
    for i, f in enumerate(findings):
        out.print(f"#{i} {f.rule} {f.slug} {fmt_ns(f.impact_ns)} ({f.impact_share:.1%})", markup=False)
        for c in f.cases:
            out.print(f"    {c['similarity']:.2f}  {c['id']} — {c['title']}", markup=False, soft_wrap=True)
        if not f.cases:
            out.print("    no similar case", markup=False)
    if not findings:
        out.print("no findings")

"""Terminal report (rich): what a user reads first, so the summary and the worst finding lead.

Every string that came from a trace (kernel, NVTX, file names, and the finding texts that quote
them) is cleaned of control characters and markup-escaped; emoji codes are off, so a name like
`:fire:` prints as written. Colour comes from rich's own TTY detection, never forced here.
"""
from __future__ import annotations

import os
from collections import OrderedDict

from rich.console import Console
from rich.markup import escape

from ..engine.finding import LAYERS, VERDICT_ADVICE, Finding
from ..engine.report import Report
from .fmt import (STATUS_MARK, STATUS_WORDS, clean, fmt_measure, fmt_ns, fmt_share,
                  trace_origin, where_parts)

SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
STATUS_STYLE = {"measured": "green", "not_captured": "red", "not_applicable": "dim",
                "estimated": "yellow"}
VERDICT_STYLE = {"agree": "green", "conflict": "bold magenta", "partial": "yellow"}
MAX_FULL = 30        # findings printed as full blocks without -v
MAX_LINES = 300      # further findings printed as one line each without -v


def _e(text, limit: int | None = None) -> str:
    """Clean and markup-escape one untrusted string."""
    return escape(clean(text, limit))


def _print(console: Console, markup: str = "") -> None:
    """Print markup lines in one call. Unwrapped consoles get the text as is; a console that
    wraps gets each line as an indented block, so continuation lines stay under their text
    instead of falling back to column 0."""
    if console.width >= NO_WRAP:
        console.print(markup, emoji=False, highlight=False, soft_wrap=True)
        return
    from rich.console import Group
    from rich.padding import Padding
    from rich.text import Text
    blocks = []
    for line in markup.split("\n"):
        body = line.lstrip(" ")
        indent = len(line) - len(body)
        text = Text.from_markup(body, emoji=False)
        blocks.append(Padding(text, (0, 0, 0, indent)) if indent else text)
    console.print(Group(*blocks), highlight=False)


#: Width given to a console that is not a terminal and has no COLUMNS: lines are not wrapped.
NO_WRAP = 10_000


def stdout_console() -> Console:
    """The console for the report on stdout: a terminal wraps at its width; a pipe, a file or
    CI honours COLUMNS when set and otherwise never hard-wraps (rich's default is 80)."""
    probe = Console()
    if probe.is_terminal:
        return probe
    cols = os.environ.get("COLUMNS", "")
    return Console(width=int(cols) if cols.isdigit() and int(cols) > 20 else NO_WRAP)


def summary_lines(report: Report) -> list[str]:
    """The summary block as rich markup: trace, span, GPU busy per device, findings by severity."""
    s = report.summary()
    fmt = s["format"] or "unknown format"
    if s["format_version"]:
        fmt += f" {s['format_version']}"
    lines = [f"[bold]tracelint[/] {_e(report.source, 160)}  [dim]({_e(fmt)})[/]"]
    facts = [f"span {fmt_ns(s['span_ns'])}"]
    if s["rank"] is not None:
        facts.append(f"rank {s['rank']}" + (f"/{s['world_size']}" if s["world_size"] else ""))
    counts = s["counts"]
    facts.append(f"{counts['kernels']:,} kernels, {counts['copies']:,} copies, "
                 f"{counts['api_calls']:,} API calls")
    lines.append(" · ".join(facts))
    if not s["has_gpu_activity"]:
        lines.append("[yellow]no GPU activity in this trace[/] (no kernels, copies or memsets): "
                     "GPU rules did not run")
    else:
        busy = []
        for d in s["devices"]:
            name = f" {_e(d['name'], 40)}" if d["name"] else ""
            busy.append(f"GPU {d['id']}{name} busy [bold]{fmt_share(d['busy_share'])}[/]")
        lines.append(" · ".join(busy))
    by_sev = s["findings_by_severity"]
    sev_txt = []
    for sev in ("error", "warning", "info"):
        n = by_sev.get(sev, 0)
        style = SEV_STYLE[sev] if n else "dim"
        sev_txt.append(f"[{style}]{n} {sev}[/]")
    total = len(report.findings)
    extra = f" · {report.suppressed} suppressed by baseline" if report.suppressed else ""
    lines.append(f"findings: [bold]{total}[/] ({', '.join(sev_txt)}){extra}")
    return lines


def group_by_rule(findings: list[Finding]) -> list[tuple[str, list[Finding]]]:
    """Findings grouped by rule, most projected saving (then impact) first within a group.
    Groups lead with the most severe, then the most total saving and impact, so errors never
    hide below a long list of notes."""
    groups: "OrderedDict[str, list[Finding]]" = OrderedDict()
    for f in sorted(findings, key=lambda f: (-(f.saving_ns or 0), -f.impact_ns, f.rule)):
        groups.setdefault(f.rule, []).append(f)
    return sorted(groups.items(), key=lambda kv: (-max(f.severity.rank for f in kv[1]),
                                                  -sum(f.saving_ns or 0 for f in kv[1]),
                                                  -sum(f.impact_ns for f in kv[1]), kv[0]))


def _where_lines(f: Finding, origin: int, verbose: bool) -> list[str]:
    """'at ...' (device, stream, window, iteration, thread, NVTX, source), then the kernel."""
    parts = where_parts(f.where, origin, name_limit=None if verbose else 100,
                        nvtx_depth=None if verbose else 3)
    at = " · ".join(escape(t) for k, t in parts if k not in ("kernel", "source", "module"))
    out = [f"    at {at}"] if at else []
    out += [f"    {k} [bold]{escape(t)}[/]" for k, t in parts if k in ("source", "module")]
    out += [f"    kernel [bold]{escape(t)}[/]" for k, t in parts if k == "kernel"]
    return out


def _evidence_lines(f: Finding, verbose: bool) -> list[str]:
    out = []
    for layer in LAYERS:
        ev = f.evidence.get(layer)
        if ev is None:
            continue
        mark = STATUS_MARK.get(ev.status, "?")
        style = STATUS_STYLE.get(ev.status, "")
        if ev.status == "measured" and ev.supports is False:
            style, mark = "magenta", "≠"
        head = f"    [{style}]{mark} {layer.value:<9}[/] "
        if ev.status in ("measured", "estimated"):
            text = _e(ev.summary, None if verbose else 200)
            out.append(head + ("[yellow]estimated:[/] " if ev.status == "estimated" else "") + text)
            if verbose and ev.facts:
                facts = ", ".join(f"{escape(clean(k))}={escape(fmt_measure(m))}"
                                  for k, m in ev.facts.items())
                out.append(f"      [dim]{facts}[/]")
        else:
            word = STATUS_WORDS.get(ev.status, ev.status)
            summary = f": {_e(ev.summary, None if verbose else 120)}" if ev.summary else ""
            out.append(head + f"[{style}]{word}[/]{summary}")
            if verbose and ev.capture_hint:
                out.append(f"      [dim]capture: {_e(ev.capture_hint)}[/]")
    return out


def verdict_line(f: Finding) -> str:
    """The verdict in one short line: which layers the finding rests on, what is missing."""
    missing = [layer.value for layer in LAYERS
               if f.evidence.get(layer) is not None and f.evidence[layer].status == "not_captured"]
    against = [layer.value for layer in LAYERS if f.evidence.get(layer) is not None
               and f.evidence[layer].status == "measured" and f.evidence[layer].supports is False]
    if f.verdict == "conflict":
        return f"the {', '.join(against)} layer contradicts it: measure before acting"
    if f.verdict == "partial":
        return f"{', '.join(missing)} not captured"
    return "the measured layers agree"


def _finding_block(n: int, f: Finding, origin: int, verbose: bool) -> list[str]:
    sev = f.severity.value
    lines = [f"  [bold]#{n}[/] [{SEV_STYLE[sev]}]{sev}[/] {_e(f.message, None if verbose else 240)}",
             "    " + (f"projected saving [bold]{fmt_ns(f.saving_ns)}[/] ({fmt_share(f.saving_share)})"
                    + (f" up to [bold]{fmt_ns(f.saving_upper_ns)}[/]" if f.saving_upper_ns is not None else "")
                    + " · " if f.saving_ns is not None else "")
             + f"{'impact' if f.saving_ns is None else 'time touched'} "
             f"[bold]{fmt_ns(f.impact_ns)}[/] ({fmt_share(f.impact_share)} of span)"
             + (f" · {f.occurrences:,} occurrences" if f.occurrences > 1 else "")]
    if f.saving_note:      # why there is no saving, or what the projected one leaves out
        lines.append(f"    [dim]{'saving' if f.saving_ns is not None else 'no saving projected'}: "
                     f"{_e(f.saving_note, None if verbose else 160)}[/]")
    lines += _where_lines(f, origin, verbose)
    if verbose and len(f.windows) > 1:
        wins = ", ".join(f"+{(s - origin) / 1e6:,.3f} ms ({fmt_ns(e - s)})"
                         for s, e in f.windows[:5])
        lines.append(f"    [dim]windows: {wins}[/]")
    lines += _evidence_lines(f, verbose)
    verdict = f.verdict
    v = f"    verdict [{VERDICT_STYLE.get(verdict, '')}]{verdict}[/] [dim]— {escape(verdict_line(f))}[/]"
    if verbose:
        v += f"\n      [dim]{escape(VERDICT_ADVICE[verdict])}[/]"
    lines.append(v)
    if f.fix:
        lines.append(f"    [bold]fix:[/] {_e(f.fix, None if verbose else 300)}")
    if verbose and f.counter_example:
        lines.append(f"    [dim]not when: {_e(f.counter_example)}[/]")
    if f.cases:
        cases = ", ".join(_e(c.get("id", "?")) + (f" ({float(c['similarity']):.0%}"
                          + (f", {_e(c['label'])}" if c.get("label") else "") + ")"
                          if isinstance(c.get("similarity"), (int, float)) else "")
                          for c in f.cases[:3])
        lines.append(f"    [dim]similar cases: {cases}[/]")
    return lines


#: Rules whose findings are privacy notes about the trace file, not performance: one summary
#: line per trace unless -v asks for each.
PRIVACY_RULES = ("TL100", "TL101")


def privacy_line(fs: list[Finding]) -> str:
    kinds = sorted({clean(f.message.split(" in ", 1)[0], 60) for f in fs})
    rules = ", ".join(sorted({f.rule for f in fs}))
    return (f"[dim]privacy ({rules}):[/] {escape('; '.join(kinds))} in the trace file "
            f"[dim]— `tracelint redact` before sharing it; -v lists each[/]")


def _quiet_line(n: int, f: Finding, origin: int) -> str:
    parts = where_parts(f.where, origin, name_limit=50)
    loc = " ".join(escape(t) for k, t in parts if k in ("device", "stream", "source"))
    return (f"#{n} [{SEV_STYLE[f.severity.value]}]{f.severity.value:<7}[/] {escape(f.rule)} "
            f"{_e(f.slug)} {fmt_ns(f.impact_ns)} ({fmt_share(f.impact_share)}) {loc} "
            f"— {_e(f.message, 160)}")


def render_terminal(report: Report, console: Console, verbose: bool = False,
                    quiet: bool = False, max_full: int = MAX_FULL,
                    max_lines: int = MAX_LINES) -> None:
    """Print the report. quiet: summary plus one line per finding; verbose: hints, facts, fix.

    Without verbose, the first max_full findings (by severity, then impact) get a full block,
    the next ones a single line, up to max_lines of them; the rest are counted, not printed
    (the JSON and HTML reports have them). Lines are printed in one batch: rich costs about
    a millisecond per print call, which thousands of findings would turn into seconds.
    """
    out = summary_lines(report)
    ordered = report.sorted_findings()
    number = {id(f): i for i, f in enumerate(ordered, 1)}   # same #N as HTML/JSON/Markdown
    origin = trace_origin(report)
    if quiet:
        out += [_quiet_line(n, f, origin) for n, f in enumerate(ordered, 1)]
        _print(console, "\n".join(out))
        return
    if not report.findings:
        out += ["", "[green]No findings.[/]"]
    short = hidden = 0
    privacy = [f for f in report.findings if f.rule in PRIVACY_RULES and f.severity.value == "info"]
    shown = report.findings if verbose else [f for f in report.findings if f not in privacy]
    for rule, fs in group_by_rule(shown):
        f0 = fs[0]
        total = sum(f.impact_ns for f in fs)
        out += ["", f"[bold]{escape(rule)} {_e(f0.slug)}[/] — {_e(f0.title)} "
                    f"[dim]({len(fs)} finding{'s' if len(fs) != 1 else ''}, "
                    f"{fmt_ns(total)} total)[/]"]
        fix_of: dict[str, int] = {}
        for f in fs:
            n = number[id(f)]
            if verbose or n <= max_full:
                block = _finding_block(n, f, origin, verbose)
                if f.fix and f.fix in fix_of and not verbose:     # same advice: say so once
                    block = [ln if not ln.startswith("    [bold]fix:[/]") else
                             f"    [bold]fix:[/] as for #{fix_of[f.fix]}" for ln in block]
                fix_of.setdefault(f.fix, n)
                out += block
            elif short < max_lines:
                out.append("  " + _quiet_line(n, f, origin))
                short += 1
            else:
                hidden += 1
    if privacy and not verbose:
        out += ["", privacy_line(privacy)]
    if hidden:
        out += ["", f"[dim]… {hidden:,} more findings not shown; --format json or html lists "
                    f"all, -v prints all here[/]"]
    if report.skipped:
        out.append("")
        if verbose:
            out.append("[dim]rules not run:[/]")
            out += [f"  [dim]{escape(rid)}: {_e(why)}[/]" for rid, why in sorted(report.skipped.items())]
        else:
            out.append(f"[dim]{len(report.skipped)} rules not run "
                       f"({escape(', '.join(sorted(report.skipped)))}); -v says why[/]")
    if not verbose and any(e.status == "not_captured" for f in report.findings
                           for e in f.evidence.values()):
        out.append("[dim]✗ = evidence layer not captured; -v shows how to capture it[/]")
    _print(console, "\n".join(out))


__all__ = ["render_terminal", "summary_lines", "group_by_rule"]

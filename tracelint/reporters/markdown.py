"""Markdown for a pull-request comment: a summary, a table of the top findings, short details.

Review systems cap comment size (GitHub: 65,536 characters), so the output is built to stay
under `max_chars`: table rows first, then details, then a note saying what was left out.
Trace names are untrusted: Markdown and HTML specials are escaped, and `@` cannot become a
mention that pings someone.
"""
from __future__ import annotations


from ..engine.finding import LAYERS, VERDICT_ADVICE, Finding
from ..engine.report import Report
from .escape import md_escape
from .fmt import (STATUS_MARK, STATUS_WORDS, fmt_ms, fmt_share, severity_counts_text,
                  trace_origin, where_parts)

SEV_ICON = {"error": "🔴", "warning": "🟠", "info": "🔵"}
FOOTER_RESERVE = 400          # characters kept free for the truncation note


def anchor(n: int) -> str:
    return f"tl-finding-{n}"


def _where_short(f: Finding, origin: int) -> str:
    keep = ("device", "stream", "iteration", "source", "kernel", "nvtx")
    parts = [md_escape(t, 60) for k, t in where_parts(f.where, origin, name_limit=60) if k in keep]
    return " · ".join(parts) or "—"


def _row(n: int, f: Finding, origin: int, linked: bool) -> str:
    num = f"[{n}](#{anchor(n)})" if linked else str(n)
    sev = f.severity.value
    return (f"| {num} | {md_escape(f.rule)} {md_escape(f.slug)} | {SEV_ICON[sev]} {sev} | "
            f"{fmt_ms(f.impact_ns)} ({fmt_share(f.impact_share)}) | {_where_short(f, origin)} |")


def _details(n: int, f: Finding, origin: int) -> str:
    lines = [f'<a id="{anchor(n)}"></a>',
             f"#### {n}. {md_escape(f.rule)} {md_escape(f.slug)}: {md_escape(f.title)}", "",
             md_escape(f.message, 500), ""]
    if f.saving_ns is not None:
        upper = f" (up to {fmt_ms(f.saving_upper_ns)})" if f.saving_upper_ns is not None else ""
        lines.append(f"- **Projected saving**: {fmt_ms(f.saving_ns)} ({fmt_share(f.saving_share)} of the span){upper}, "
                     "the fix replayed on the run's dependency graph"
                     + (f"; {md_escape(f.saving_note, 300)}" if f.saving_note else ""))
    elif f.saving_note:
        lines.append(f"- **No saving projected**: {md_escape(f.saving_note, 300)}")
    lines.append(f"- **Impact**: {fmt_ms(f.impact_ns)} ({fmt_share(f.impact_share)} of the span)"
                 + (f", {f.occurrences:,} occurrences" if f.occurrences > 1 else ""))
    where = where_parts(f.where, origin, name_limit=120)
    if where:
        lines.append("- **Where**: " + " · ".join(md_escape(t) for _, t in where))
    ev = []
    for layer in LAYERS:
        e = f.evidence.get(layer)
        if e is None:
            continue
        word = STATUS_WORDS.get(e.status, e.status)
        if e.status == "measured" and e.supports is False:
            word = "measured, contradicts"
        ev.append(f"{layer.value} {STATUS_MARK.get(e.status, '?')} {word}")
    if ev:
        lines.append("- **Evidence**: " + " · ".join(ev))
    for layer in LAYERS:
        e = f.evidence.get(layer)
        if e is not None and e.status in ("measured", "estimated") and e.summary:
            est = "estimated: " if e.status == "estimated" else ""
            lines.append(f"  - {layer.value}: {est}{md_escape(e.summary, 300)}")
        elif e is not None and e.status == "not_captured" and e.capture_hint:
            lines.append(f"  - {layer.value}: not captured; capture with "
                         f"{md_escape(e.capture_hint, 200)}")
    lines.append(f"- **Verdict**: {f.verdict}: {md_escape(VERDICT_ADVICE[f.verdict])}")
    if f.fix:
        lines.append(f"- **Fix**: {md_escape(f.fix, 600)}")
    if f.cases:
        ids = ", ".join(md_escape(c.get("id", "?")) + (f" ({md_escape(c['label'])})" if c.get("label") else "")
                        for c in f.cases[:3])
        lines.append(f"- **Similar cases**: {ids}")
    return "\n".join(lines) + "\n"


def _header(report: Report) -> str:
    s = report.summary()
    n = len(report.findings)
    head = (f"### tracelint: {n} finding{'s' if n != 1 else ''} "
            f"({severity_counts_text(s['findings_by_severity'])}) in "
            f"{md_escape(report.source, 120)}\n\n")
    facts = [f"span {fmt_ms(s['span_ns'])}"]
    if not s["has_gpu_activity"]:
        facts.append("**no GPU activity in this trace**")
    for d in s["devices"]:
        facts.append(f"GPU {d['id']} busy {fmt_share(d['busy_share'])}")
    if report.suppressed:
        facts.append(f"{report.suppressed} suppressed by baseline")
    return head + " · ".join(facts) + "\n"


def render_markdown(report: Report, max_chars: int = 60000, max_rows: int = 50) -> str:
    """A review comment of at most max_chars characters (best effort below ~1,000), listing at
    most max_rows findings: a reviewer reads the top of the list, the full report has the rest."""
    ordered = report.sorted_findings()
    origin = trace_origin(report)
    header = _header(report)
    if not ordered:
        return header + "\nNo findings.\n"
    table_head = ("\n| # | Rule | Severity | Impact | Where |\n"
                  "|---:|---|---|---|---|\n")
    budget = max_chars - len(header) - len(table_head) - FOOTER_RESERVE
    # Rows first (cheap, the overview), then details for as many of those rows as still fit.
    rows_n = 0
    used = 0
    for n, f in enumerate(ordered, 1):
        cost = len(_row(n, f, origin, True)) + 1
        if rows_n >= max_rows or (used + cost > budget * 0.5 and rows_n >= 1):
            break
        used += cost
        rows_n += 1
    details: list[str] = []
    for n, f in enumerate(ordered[:rows_n], 1):
        d = _details(n, f, origin)
        if used + len(d) + 1 > budget:
            break
        details.append(d)
        used += len(d) + 1
    rows = [_row(n, f, origin, n <= len(details)) for n, f in enumerate(ordered[:rows_n], 1)]
    out = header + table_head + "\n".join(rows) + "\n"
    if details:
        out += "\n<details open><summary>Details of the top findings</summary>\n\n"
        out += "\n".join(details) + "\n</details>\n"
    dropped_rows = len(ordered) - rows_n
    dropped_details = rows_n - len(details)
    if dropped_rows or dropped_details:
        out += (f"\n_Truncated to stay under {max_chars:,} characters and {max_rows} rows: "
                f"{rows_n} of {len(ordered)} findings listed, details for {len(details)}. "
                f"The HTML or JSON report has all of them._\n")
    return out

"""Rendering a DiffResult: terminal (rich), Markdown (a PR comment) and a self-contained HTML
page. Every name comes from a trace: Markdown cells are escaped, HTML is autoescaped."""
from __future__ import annotations

import re



from .. import __version__
from .diff import DiffResult
from .fmt import fmt_change, fmt_interval, fmt_ns, md_cell  # noqa: F401  (re-exported)
from .stats import Comparison
from .waterfall import waterfall_lines
from ..reporters.escape import clean



def _gate_text(r: DiffResult) -> str:
    p = r.policy
    return (f"a change counts when its {p.confidence:.0%} interval lies wholly beyond "
            f"±{p.floor:.0%}; percentiles with too few samples are not gated")


def _cell_change(m: dict[str, Comparison], key: str) -> str:
    c = m.get(key)
    if c is None:
        return "–"
    if c.verdict == "not gated":
        return f"{fmt_ns(c.a)} → {fmt_ns(c.b)} (n too small)"
    return fmt_change(c)


def _calls_cell(c: Comparison | None) -> str:
    """The class's calls paired with the same kernel and launch configuration (kernel_calls)."""
    if c is None:
        return "–"
    if c.verdict == "not gated":       # the full reason is in the JSON report
        m = re.search(r"needs >= (\d+)", c.why)
        return (f"not gated: < {m.group(1)} paired calls" if m else
                "not gated: few calls pair" if "pairs with" in c.why else "not gated")
    return f"{c.change:+.1%} {fmt_interval(c)}" if c.change is not None else fmt_interval(c)


def table_rows(r: DiffResult, max_kernels: int = 20) -> list[tuple[str, list[str], list[list[str]], str]]:
    """(title, header, rows, footnote) for every section; shared by every renderer."""
    out = []
    out.append(("Totals", ["metric", "A → B", "interval", "status"],
                [[row.label, fmt_change(next(iter(row.metrics.values()))),
                  fmt_interval(next(iter(row.metrics.values()))), row.status] for row in r.totals], ""))
    brows = []
    for row in r.buckets:
        a, b = row.info["a"], row.info["b"]
        cold = ""
        if any(row.info.get("cold_a", [])) or any(row.info.get("cold_b", [])):
            cold = f"{sum(row.info.get('cold_a', []))}/{sum(row.info.get('cold_b', []))}"
        busy = ""
        if "gpu_busy_pct" in a or "gpu_busy_pct" in b:
            busy = (f"{a.get('gpu_busy_pct', float('nan')):.0f}% → "
                    f"{b.get('gpu_busy_pct', float('nan')):.0f}%")
        m = row.metrics
        brows.append([row.key, row.info["kind"], f"{a.get('count', 0):g} → {b.get('count', 0):g}",
                      cold, _cell_change(m, "p50"), fmt_interval(m.get("p50")),
                      _cell_change(m, "p90"), _cell_change(m, "p99"),
                      _cell_change(m, "gpu_time"), busy, row.status])
    out.append(("Buckets (steady state)", ["bucket", "kind", "steady n", "cold A/B", "P50",
                                           "P50 interval", "P90", "P99", "GPU time / instance",
                                           "GPU busy", "status"],
                brows, "" if brows else "no buckets (no iterations, annotations or --bucket matches)"))
    out.append(("GPU time by kernel class", ["class", "A → B", "interval",
                                             "same calls (change, interval)", "status"],
                [[row.key, fmt_change(row.metrics.get("time")) if row.metrics else
                  f"{fmt_ns(row.info['a']['ns'])} → {fmt_ns(row.info['b']['ns'])}",
                  fmt_interval(row.metrics.get("time")), _calls_cell(row.metrics.get("calls")),
                  row.status] for row in r.classes], ""))
    changed = [k for k in r.kernels if k.status != "no change"]
    krows = [[k.label, k.info.get("class", ""),
              f"{k.info['a']['count']:g} → {k.info['b']['count']:g}",
              _cell_change(k.metrics, "p50") if k.metrics else "–",
              fmt_interval(k.metrics.get("p50")) if k.metrics else "–",
              _cell_change(k.metrics, "p99") if k.metrics else "–",
              f"{fmt_ns(k.info['a']['total_ns'])} → {fmt_ns(k.info['b']['total_ns'])}", k.status]
             for k in changed[:max_kernels]]
    foot = f"{len(r.kernels) - len(changed)} kernel(s) unchanged"
    if len(changed) > max_kernels:
        foot += f"; {len(changed) - max_kernels} more changed (see JSON)"
    out.append(("Kernels (changed)", ["kernel", "class", "count", "P50", "P50 interval", "P99",
                                      "total", "status"], krows, foot))
    srows = [[s.key, f"{s.info['a']['count']:g} → {s.info['b']['count']:g}",
              f"{fmt_ns(s.info['a']['total_ns'])} → {fmt_ns(s.info['b']['total_ns'])}", s.status]
             for s in r.syncs if s.status != "no change"]
    out.append(("Synchronisation (changed)", ["sync", "count", "time", "status"], srows,
                f"{sum(1 for s in r.syncs if s.status == 'no change')} sync kind(s) unchanged"))
    frows = [[f["rule"], f.get("title", ""), f.get("key", ""), "gained"] for f in r.findings_gained]
    frows += [[f["rule"], f.get("title", ""), f.get("key", ""), "lost"] for f in r.findings_lost]
    ffoot = "" if r.findings_checked else "findings not compared"
    if r.findings_unstable:
        ffoot += f"{r.findings_unstable} finding(s) present in some runs only (unstable)"
    out.append(("Findings (matched by rule, key, annotation and code location)",
                ["rule", "title", "key", "status"], frows, ffoot))
    return out


def _waterfall_section(r: DiffResult) -> list[tuple[str, list[str], list[list[str]], str]]:
    if not r.waterfall:
        return []
    rows = [list(x[:3]) for x in waterfall_lines(r.waterfall[0], fmt_ns)]
    return [("Why: where the time went (A → B)", ["part", "A → B", "Δ"], rows,
             "busy = Σ class time − overlap of concurrent work; wall = busy + idle")]


def render_terminal(r: DiffResult, console) -> None:
    from rich.table import Table
    from rich.text import Text
    colour = {"slower": "red", "faster": "green", "appeared": "yellow", "disappeared": "cyan",
              "more": "red", "fewer": "green", "gained": "red", "lost": "green", "uncertain": "yellow"}
    console.print(Text(clean(f"A: {', '.join(r.a_sources)}"), style="bold"))
    console.print(Text(clean(f"B: {', '.join(r.b_sources)}"), style="bold"))
    v = r.verdict
    console.print(Text(f"verdict: {v}", style=f"bold {colour.get(v, 'white')}"))
    console.print(Text(_gate_text(r), style="dim"))
    for title, header, rows, foot in _waterfall_section(r) + table_rows(r):
        if not rows and not foot:
            continue
        t = Table(title=Text(title), title_justify="left", show_lines=False)
        for h in header:
            t.add_column(Text(h), overflow="fold")
        for row in rows:
            t.add_row(*[Text(clean(c)) for c in row[:-1]],
                      Text(row[-1], style=colour.get(row[-1], "")))
        if rows:
            console.print(t)
        else:
            console.print(Text(title, style="bold"))
        if foot:
            console.print(Text(clean(f"  {foot}"), style="dim"))
    for n in r.notes:
        console.print(Text(clean(f"note: {n}"), style="dim"))


def render_markdown(r: DiffResult) -> str:
    lines = ["## tracelint diff", "", f"**Verdict: {r.verdict}**", "",
             f"- A ({len(r.a_sources)} run(s)): " + ", ".join(md_cell(s) for s in r.a_sources),
             f"- B ({len(r.b_sources)} run(s)): " + ", ".join(md_cell(s) for s in r.b_sources),
             f"- {_gate_text(r)}", ""]
    for title, header, rows, foot in _waterfall_section(r) + table_rows(r):
        lines += [f"### {title}", ""]
        if rows:
            lines.append("| " + " | ".join(header) + " |")
            lines.append("|" + "---|" * len(header))
            lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
            lines.append("")
        if foot:
            lines += [f"_{md_cell(foot)}_", ""]
        elif not rows:
            lines += ["_none_", ""]
    lines += [f"> note: {md_cell(n)}" for n in r.notes]
    return "\n".join(lines).rstrip() + "\n"


def render_html(r: DiffResult) -> str:
    """A self-contained page (no scripts, CSP forbids loading anything; autoescaped)."""
    from ..reporters.templating import environment
    w = r.waterfall[0] if r.waterfall else None
    lines = waterfall_lines(w, fmt_ns) if w else []
    span = max([abs(x[3]) for x in lines if x[3] is not None] or [1.0]) or 1.0
    bars = [(label, ab, d, 0.0 if v is None else 100 * abs(v) / span, v is not None and v >= 0)
            for label, ab, d, v in lines]
    return environment().get_template("diff.html.j2").render(
        r=r, version=__version__, gate=_gate_text(r), summary=r.summary(), waterfall=bars,
        wscope=w["scope"] if w else "", sections=table_rows(r, max_kernels=200))

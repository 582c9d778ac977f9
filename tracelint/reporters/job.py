"""Rendering a job's report: terminal (rich), JSON, one self-contained HTML page (inline CSS
and SVG, no scripts, the shared autoescaped jinja2 environment) and Markdown. Every string that
came from a trace is cleaned of control characters and escaped for its target."""
from __future__ import annotations

import json
import math
from typing import Any


from .. import __version__
from ..engine.finding import LAYERS, Finding
from ..ranks.report import JobReport
from .fmt import STATUS_MARK, clean, fmt_bytes, fmt_ns
from .templating import environment


# ----- JSON ----------------------------------------------------------------------------------
def render_job_json(report: JobReport) -> str:
    return json.dumps(report.to_dict(), indent=1, ensure_ascii=False, allow_nan=False)


# ----- terminal --------------------------------------------------------------------------------
SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def render_job_terminal(report: JobReport, console=None, verbose: bool = False,
                        quiet: bool = False) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    console = console or Console()

    def e(x, limit=None):
        return escape(clean(x, limit))

    def p(markup=""):
        console.print(markup, emoji=False, highlight=False, soft_wrap=False)

    s = report.summary()
    gpus = ", ".join(e(g, 40) for g in s["gpus"]) or "GPU model not recorded"
    world = f" of world size {s['world_size']}" if s["world_size"] else ""
    p(f"[bold]tracelint job[/] {len(report.ranks)} rank(s){world} from {len(report.sources)} "
      f"source(s) · {', '.join(s['formats']) or 'no trace read'} · {gpus}")
    ex = report.execution
    if ex:
        p(f"[dim]executed on {e(ex.get('mode'))} ({ex.get('workers')} worker(s)) in "
          f"{report.elapsed_s.get('total', 0):.1f} s[/]")
    ctx = report.context
    if ctx is not None and report.ranks:
        p(f"iterations matched by {ctx.matched_by} ({s['iterations_matched']}); collectives matched by "
          f"{ctx.coll_matched_by} ({s['collective_calls_matched']} calls); largest clock offset "
          f"{fmt_ns(max((abs(v) for v in ctx.offsets.values()), default=0))}")
    bs, br = s["findings_by_severity"], s["per_rank_findings_by_severity"]
    cross = ", ".join(f"[{SEV_STYLE[k]}]{v} {k}[/]" for k, v in bs.items() if v) or "[green]none[/]"
    per = ", ".join(f"{v} {k}" for k, v in br.items() if v) or "none"
    p(f"cross-rank findings: {cross} · per-rank findings: {per}")
    if s.get("saving_all_ns") is not None:
        p(f"projected job saving of all cross-rank fixes (ranks replayed together): "
          f"[bold]{fmt_ns(s['saving_all_ns'])}[/]")
    if report.failed:
        p(f"[bold red]{len(report.failed)} rank(s) failed[/] (listed below); the others were analysed")
    p()
    if ctx is not None and len(ctx.rank_table) and not quiet:
        rt = ctx.rank_table
        t = Table(title="Ranks", title_justify="left", show_edge=False, pad_edge=False)
        for col, j in (("rank", "right"), ("trace", "left"), ("iters", "right"), ("step (median)", "right"),
                       ("compute/iter", "right"), ("exposed comm", "right"), ("of it waiting", "right"),
                       ("last / matched", "right"), ("late (median)", "right"),
                       ("clock offset", "right"), ("findings", "right")):
            t.add_column(col, justify=j)
        rows = list(rt.itertuples())
        if len(rows) > 64 and not verbose:
            rows = rows[:32] + rows[-32:]
        for r in rows:
            t.add_row(str(r.Index), e(r.label, 40), str(r.iterations), fmt_ns(r.step_median_ns),
                      fmt_ns(r.compute_median_ns), fmt_ns(r.exposed_comm_ns), fmt_ns(r.exposed_wait_ns),
                      f"{r.last_arrivals}/{r.matched}", fmt_ns(r.median_late_ns),
                      fmt_ns(r.clock_offset_ns), str(r.findings))
        console.print(t)
        p()
        sk = ctx.skew_by_collective
        if len(sk):
            t = Table(title="Collective arrival skew", title_justify="left", show_edge=False, pad_edge=False)
            for col in ("collective", "calls", "median skew", "p90", "max", "last rank (share)"):
                t.add_column(col, justify="left" if col == "collective" else "right")
            for r in sk.itertuples():
                t.add_row(e(r.coll), str(r.calls), fmt_ns(r.median_skew_ns), fmt_ns(r.p90_skew_ns),
                          fmt_ns(r.max_skew_ns), f"{r.last_rank} ({r.last_share:.0%})" if r.last_rank >= 0 else "– (ties)")
            console.print(t)
            p()
        bw = ctx.bandwidth_by_collective
        if len(bw):
            t = Table(title="Collective bandwidth (NCCL busbw convention)", title_justify="left",
                      show_edge=False, pad_edge=False)
            for col in ("collective", "calls", "median size", "median time", "algbw", "busbw", "n", "timed by"):
                t.add_column(col, justify="left" if col in ("collective", "timed by") else "right")
            for r in bw.itertuples():
                t.add_row(e(r.coll), str(r.calls), fmt_bytes(r.median_bytes), fmt_ns(r.median_time_ns),
                          f"{r.median_algbw_gbps:.1f} GB/s", f"{r.median_busbw_gbps:.1f} GB/s",
                          str(r.n), e(r.timed_by))
            console.print(t)
            p()
    findings = report.sorted_findings()
    if findings:
        p("[bold]Cross-rank findings[/]")
        for f in findings:
            who = f"rank {f.where.rank}" if f.where.rank is not None else "job"
            p(f"[{SEV_STYLE[f.severity.value]}]{f.severity.value.upper()}[/] [bold]{f.rule}[/] "
              f"{f.slug} · {who} · " + (f"projected job saving [bold]{fmt_ns(f.saving_ns)}[/] · time touched "
                                         if f.saving_ns is not None else "impact ") + fmt_ns(f.impact_ns))
            p(f"  {e(f.message)}")
            if quiet:
                continue
            if f.saving_ns is None and f.saving_note:
                p(f"  [dim]saving:[/] {e(f.saving_note, None if verbose else 300)}")
            for layer in LAYERS:
                ev = f.evidence.get(layer)
                if ev is None or (ev.status == "not_applicable" and not verbose):
                    continue
                mark = STATUS_MARK.get(ev.status, "?")
                p(f"  [dim]{layer.value}[/] {mark} {e(ev.summary)}")
                if verbose and ev.capture_hint:
                    p(f"    [dim]capture: {e(ev.capture_hint)}[/]")
            p(f"  [dim]fix:[/] {e(f.fix, None if verbose else 300)}")
        p()
    elif report.ranks:
        p("[green]No cross-rank finding.[/]")
        p()
    if report.ranks and not quiet:
        p("[bold]Per-rank findings[/]" + ("" if verbose else " [dim](top 3 per rank; -v for all)[/]"))
        for s in report.ranks:
            fs = s.findings if verbose else s.findings[:3]
            if not s.findings:
                p(f"  rank {s.rank}: [green]none[/]")
                continue
            for f in fs:
                p(f"  rank {s.rank}: [{SEV_STYLE[f['severity']]}]{f['severity']}[/] {f['rule']} "
                  f"{e(f['message'], 160)}")
            if len(s.findings) > len(fs):
                p(f"  rank {s.rank}: [dim]… {len(s.findings) - len(fs)} more[/]")
        p()
    if report.failed:
        p("[bold red]Failed ranks[/]")
        for s in report.failed:
            p(f"  {e(s.label, 80)}: {e(s.error, 300)}")
        p()
    if report.excluded:
        p("[bold]Not part of this job[/]")
        for x in report.excluded:
            p(f"  {e(x['label'], 80)}: {e(x['reason'], 300)}")
        p()
    notes = list(report.notes) + (list(ctx.notes) if ctx is not None else [])
    if notes and not quiet:
        p("[dim]notes:[/]")
        for n in notes:
            p(f"  [dim]- {e(n, 400)}[/]")


def render_job_text(report: JobReport, verbose: bool = False, quiet: bool = False, width: int = 140) -> str:
    """The terminal report as plain text (for --output)."""
    import io
    from rich.console import Console
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, record=False, force_terminal=False)
    render_job_terminal(report, console, verbose=verbose, quiet=quiet)
    return buf.getvalue()


# ----- HTML ----------------------------------------------------------------------------------
def _heat_color(ratio: float) -> str:
    """White at the iteration's median; red when slower, blue when faster (±20 % saturates)."""
    if ratio is None or math.isnan(ratio):
        return "#eeeeee"
    x = max(-1.0, min(1.0, (ratio - 1.0) / 0.2))
    if x >= 0:
        g = int(255 - 180 * x)
        return f"#ff{g:02x}{g:02x}"
    g = int(255 - 150 * -x)
    return f"#{g:02x}{g:02x}ff"


def heatmap(report: JobReport, metric: str = "dur_ns", max_ranks: int = 256,
            max_iters: int = 200) -> dict[str, Any] | None:
    """Geometry of a rank x iteration heatmap (iteration time or compute time), coloured by the
    ratio to that iteration's median over ranks."""
    ctx = report.context
    if ctx is None:
        return None
    full = ctx.iteration_matrix[metric]
    if full.empty:
        return None
    mx = full.iloc[:max_ranks, :max_iters]
    med = mx.median(axis=0)
    cell_w = max(6, min(64, 800 // max(mx.shape[1], 1)))
    cell_h = max(3, min(22, 600 // max(mx.shape[0], 1)))
    left, top = 70, 24
    show_text = cell_w >= 48 and cell_h >= 14
    cells = []
    for i, r in enumerate(mx.index):
        for j, it in enumerate(mx.columns):
            v = mx.iat[i, j]
            ratio = float(v / med.iat[j]) if med.iat[j] and not math.isnan(v) else float("nan")
            cells.append({"x": left + j * cell_w, "y": top + i * cell_h, "w": cell_w - 1, "h": cell_h - 1,
                          "fill": _heat_color(ratio), "text": fmt_ns(v) if show_text else "",
                          "title": f"rank {r}, iteration {it}: {fmt_ns(v)} "
                                   f"({'n/a' if math.isnan(ratio) else f'{ratio:.3f}'} × median)"})
    label_every = max(1, int(math.ceil(12 / cell_h)))
    rows = [{"y": top + i * cell_h + min(cell_h, 14) - 2, "text": f"rank {r}"}
            for i, r in enumerate(mx.index) if i % label_every == 0]
    col_every = max(1, int(math.ceil(30 / cell_w)))
    cols = [{"x": left + j * cell_w + 2, "text": str(it)} for j, it in enumerate(mx.columns) if j % col_every == 0]
    return {"cells": cells, "rows": rows, "cols": cols,
            "width": left + mx.shape[1] * cell_w + 10, "height": top + mx.shape[0] * cell_h + 10,
            "truncated": mx.shape != full.shape,
            "title": {"dur_ns": "Iteration time", "compute_ns": "Compute time per iteration"}.get(metric, metric)}


def skew_chart(report: JobReport) -> dict[str, Any] | None:
    ctx = report.context
    if ctx is None or not len(ctx.skew_by_collective):
        return None
    sk = ctx.skew_by_collective.head(30)
    vmax = float(sk["max_skew_ns"].max()) or 1.0
    left, width, bar_h = 130, 560, 18
    bars = []
    for i, r in enumerate(sk.itertuples()):
        y = 10 + i * (bar_h + 8)
        bars.append({"y": y, "label": clean(r.coll, 20), "h": bar_h,
                     "w_max": max(1.0, width * r.max_skew_ns / vmax),
                     "w_p90": max(1.0, width * r.p90_skew_ns / vmax),
                     "w_med": max(1.0, width * r.median_skew_ns / vmax),
                     "text": f"median {fmt_ns(r.median_skew_ns)} · max {fmt_ns(r.max_skew_ns)} · " +
                             (f"last: rank {r.last_rank} ({r.last_share:.0%} of {r.calls})"
                              if r.last_rank >= 0 else "no rank last (ties)")})
    return {"bars": bars, "left": left, "height": 20 + len(bars) * (bar_h + 8), "width": left + width + 330}


def exposed_chart(report: JobReport, max_ranks: int = 128) -> dict[str, Any] | None:
    ctx = report.context
    if ctx is None or not len(ctx.rank_table) or int(ctx.rank_table["comm_ns"].sum()) == 0:
        return None
    rt = ctx.rank_table.head(max_ranks)
    vmax = float((rt["comm_ns"]).max()) or 1.0
    left, width, bar_h = 70, 600, 14
    bars = []
    for i, (r, row) in enumerate(rt.iterrows()):
        y = 10 + i * (bar_h + 4)
        wait = float(row["exposed_wait_ns"])
        exposed_other = max(float(row["exposed_comm_ns"]) - wait, 0.0)
        hidden = max(float(row["comm_ns"]) - float(row["exposed_comm_ns"]), 0.0)
        bars.append({"y": y, "label": f"rank {r}", "h": bar_h,
                     "w_wait": width * wait / vmax, "w_exp": width * exposed_other / vmax,
                     "w_hid": width * hidden / vmax,
                     "title": f"rank {r}: communication {fmt_ns(row['comm_ns'])}, exposed "
                              f"{fmt_ns(row['exposed_comm_ns'])} (waiting {fmt_ns(wait)}), hidden under "
                              f"compute {fmt_ns(hidden)}"})
    return {"bars": bars, "left": left, "height": 20 + len(bars) * (bar_h + 4), "width": left + width + 20}


def _finding_card(f: Finding) -> dict[str, Any]:
    return {"rule": f.rule, "slug": f.slug, "title": f.title, "severity": f.severity.value,
            "message": f.message, "impact": fmt_ns(f.impact_ns),
            "saving": fmt_ns(f.saving_ns) if f.saving_ns is not None else "",
            "saving_note": f.saving_note or "",
            "who": f"rank {f.where.rank}" if f.where.rank is not None else "whole job",
            "evidence": [{"layer": layer.value, "status": f.evidence[layer].status,
                          "summary": f.evidence[layer].summary,
                          "hint": f.evidence[layer].capture_hint or ""}
                         for layer in LAYERS if layer in f.evidence],
            "verdict": f.verdict, "fix": f.fix, "counter_example": f.counter_example}


def render_job_html(report: JobReport, max_rank_findings: int = 2000) -> str:
    ctx = report.context
    s = report.summary()
    rank_rows = []
    if ctx is not None and len(ctx.rank_table):
        for r, row in ctx.rank_table.iterrows():
            rank_rows.append({"rank": int(r), "label": row["label"], "iterations": int(row["iterations"]),
                              "step": fmt_ns(row["step_median_ns"]), "compute": fmt_ns(row["compute_median_ns"]),
                              "exposed": fmt_ns(row["exposed_comm_ns"]), "wait": fmt_ns(row["exposed_wait_ns"]),
                              "last": f"{int(row['last_arrivals'])}/{int(row['matched'])}",
                              "late": fmt_ns(row["median_late_ns"]), "offset": fmt_ns(row["clock_offset_ns"]),
                              "findings": int(row["findings"])})
    per_rank = []
    for rs in report.ranks:
        for f in rs.findings:
            per_rank.append({"rank": rs.rank, "rule": f["rule"], "severity": f["severity"],
                             "message": f["message"], "impact": fmt_ns(f["impact_ns"])})
    skew_rows = [] if ctx is None else [
        {"coll": r.coll, "calls": r.calls, "median": fmt_ns(r.median_skew_ns), "p90": fmt_ns(r.p90_skew_ns),
         "max": fmt_ns(r.max_skew_ns),
         "last": f"rank {r.last_rank} ({r.last_share:.0%})" if r.last_rank >= 0 else "– (ties)"}
        for r in ctx.skew_by_collective.itertuples()]
    bw_rows = [] if ctx is None else [
        {"coll": r.coll, "calls": r.calls, "size": fmt_bytes(r.median_bytes), "time": fmt_ns(r.median_time_ns),
         "algbw": f"{r.median_algbw_gbps:.1f}", "busbw": f"{r.median_busbw_gbps:.1f}", "n": r.n,
         "timed_by": r.timed_by} for r in ctx.bandwidth_by_collective.itertuples()]
    worst = [{**w, "step": fmt_ns(w["step_median_ns"]), "compute": fmt_ns(w["compute_median_ns"]),
              "late": fmt_ns(w["median_late_ns"]), "exposed": fmt_ns(w["exposed_comm_ns"]),
              "impact": fmt_ns(w["impact_ns"]), "rules": ", ".join(w["rules"]) or "–"}
             for w in report.worst_ranks()]
    notes = list(report.notes) + (list(ctx.notes) if ctx is not None else [])
    return environment().get_template("job.html.j2").render(
        version=__version__, summary=s, sources=report.sources, execution=report.execution,
        elapsed=report.elapsed_s.get("total", 0.0),
        findings=[_finding_card(f) for f in report.sorted_findings()],
        ranks=rank_rows, heats=[h for h in (heatmap(report), heatmap(report, "compute_ns")) if h], skew=skew_chart(report), exposed=exposed_chart(report),
        skew_rows=skew_rows, bw_rows=bw_rows, worst=worst,
        per_rank=per_rank[:max_rank_findings], per_rank_total=len(per_rank),
        failed=[{"label": f.label, "error": f.error} for f in report.failed],
        excluded=report.excluded, notes=notes,
        offsets_max=fmt_ns(max((abs(v) for v in ctx.offsets.values()), default=0)) if ctx else "n/a",
        matched_by=ctx.matched_by if ctx else "", coll_matched_by=ctx.coll_matched_by if ctx else "")


def render_job_markdown(report: JobReport) -> str:
    s = report.summary()
    lines = ["# tracelint job report", "",
             f"{len(report.ranks)} rank(s)" + (f" of world size {s['world_size']}" if s["world_size"] else "")
             + f" · cross-rank findings: {sum(s['findings_by_severity'].values())} · per-rank findings: "
             f"{sum(s['per_rank_findings_by_severity'].values())}", ""]

    from .markdown import md_escape as md      # names are untrusted: one Markdown escaper
    if report.findings:
        lines += ["## Cross-rank findings", "", "| severity | rule | who | projected job saving | message |",
                  "|---|---|---|---:|---|"]
        for f in report.sorted_findings():
            who = f"rank {f.where.rank}" if f.where.rank is not None else "job"
            saving = fmt_ns(f.saving_ns) if f.saving_ns is not None else "n/a"
            lines.append(f"| {f.severity.value} | {f.rule} {f.slug} | {who} | {saving} | {md(f.message)} |")
        lines.append("")
    ctx = report.context
    if ctx is not None and len(ctx.rank_table):
        lines += ["## Ranks", "", "| rank | trace | step (median) | compute/iter | exposed comm | late (median) | findings |",
                  "|---:|---|---:|---:|---:|---:|---:|"]
        for r, row in ctx.rank_table.iterrows():
            lines.append(f"| {r} | {md(row['label'])} | {fmt_ns(row['step_median_ns'])} | "
                         f"{fmt_ns(row['compute_median_ns'])} | {fmt_ns(row['exposed_comm_ns'])} | "
                         f"{fmt_ns(row['median_late_ns'])} | {row['findings']} |")
        lines.append("")
    if report.failed:
        lines += ["## Failed ranks", ""] + [f"- {md(f.label)}: {md(f.error)}" for f in report.failed] + [""]
    return "\n".join(lines)


def render_job(report: JobReport, fmt: str, verbose: bool = False, quiet: bool = False,
               console=None) -> str | None:
    """Render in a lint --format: terminal prints (returns None); json, html, markdown return text."""
    fmt = getattr(fmt, "value", fmt)
    if fmt == "terminal":
        render_job_terminal(report, console, verbose=verbose, quiet=quiet)
        return None
    if fmt == "json":
        return render_job_json(report)
    if fmt == "html":
        return render_job_html(report)
    if fmt == "markdown":
        return render_job_markdown(report)
    if fmt == "sarif":
        from .sarif_job import render_job_sarif
        return json.dumps(render_job_sarif(report), indent=1, ensure_ascii=False)
    from ..errors import TracelintError
    raise TracelintError(f"--format {fmt} is per trace; for a job use terminal, json, html or markdown")

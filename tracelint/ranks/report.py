"""A job's report: per-rank summaries and findings, cross-rank findings and the job view.

JobReport.to_dict() is the JSON form (schema "job-1.0"); render_job_terminal (rich) and
render_job_html (one self-contained page: inline CSS and SVG, no scripts, autoescaped jinja2)
render from the same object. Every string that came from a trace is cleaned of control
characters and escaped for its target (rich markup, HTML).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import __version__
from ..engine.finding import LAYERS, Finding, Severity
from ..engine.report import RuleInfo
from ..reporters.fmt import clean, fmt_bytes, fmt_ns
from .summary import RankSummary

JOB_SCHEMA_VERSION = "job-1.0"
TEMPLATES = Path(__file__).parent / "templates"
SEV_ORDER = {"error": 2, "warning": 1, "info": 0}


def _plain(x: Any) -> Any:
    """JSON-safe: numpy scalars to Python, NaN/inf to None."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def _records(df: pd.DataFrame, limit: int | None = None) -> list[dict[str, Any]]:
    if df is None or not len(df):
        return []
    d = df.reset_index() if df.index.name else df
    if limit is not None:
        d = d.head(limit)
    return [_plain(r) for r in d.to_dict(orient="records")]


@dataclass
class JobReport:
    sources: list[str]
    ranks: list[RankSummary]                      # the analysed job, sorted by rank
    findings: list[Finding]                       # cross-rank findings
    rules: list[RuleInfo]
    failed: list[RankSummary] = field(default_factory=list)
    excluded: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    suppressed: int = 0
    world_size: int | None = None
    notes: list[str] = field(default_factory=list)
    execution: dict[str, Any] = field(default_factory=dict)
    elapsed_s: dict[str, float] = field(default_factory=dict)
    context: Any = None                           # JobContext (not serialised)

    # ----- views -----------------------------------------------------------------------------
    def sorted_findings(self) -> list[Finding]:
        return sorted(self.findings, key=lambda f: (-f.severity.rank, -f.impact_ns, f.rule))

    def rank_findings(self) -> list[dict[str, Any]]:
        """Every per-rank finding (dicts), each with where.rank set."""
        out = []
        for s in self.ranks:
            out += s.findings
        return out

    def findings_by_severity(self, per_rank: bool = False) -> dict[str, int]:
        by = {s.value: 0 for s in Severity}
        if per_rank:
            for f in self.rank_findings():
                by[f["severity"]] += 1
        else:
            for f in self.findings:
                by[f.severity.value] += 1
        return by

    def exit_code(self, fail_on: str) -> int:
        """0, or 1 when a cross-rank or per-rank finding is at or above `fail_on`; 2 when no
        rank could be analysed."""
        if not self.ranks:
            return 2
        if fail_on == "never":
            return 0
        threshold = Severity(fail_on).rank
        sev = [f.severity.rank for f in self.findings] + \
              [SEV_ORDER[f["severity"]] for f in self.rank_findings()]
        return 1 if any(s >= threshold for s in sev) else 0

    def gpu_names(self) -> list[str]:
        names = []
        for s in self.ranks:
            for d in s.devices:
                if d.get("name") and d["name"] not in names:
                    names.append(d["name"])
        return names

    def summary(self) -> dict[str, Any]:
        ctx = self.context
        return {
            "ranks": len(self.ranks), "world_size": self.world_size,
            "rank_ids": [s.rank for s in self.ranks],
            "failed": len(self.failed), "excluded": len(self.excluded),
            "formats": sorted({s.format for s in self.ranks}),
            "gpus": self.gpu_names(),
            "iterations_matched_by": ctx.matched_by if ctx else None,
            "iterations_matched": int(ctx.iterations["it"].nunique()) if ctx is not None and len(ctx.iterations) else 0,
            "collectives_matched_by": ctx.coll_matched_by if ctx else None,
            "collective_calls_matched": int(len(ctx.matched)) if ctx is not None else 0,
            "window_ns": int(ctx.window_ns) if ctx is not None else 0,
            "findings_by_severity": self.findings_by_severity(),
            "per_rank_findings_by_severity": self.findings_by_severity(per_rank=True),
        }

    def job_tables(self) -> dict[str, Any]:
        ctx = self.context
        if ctx is None:
            return {}
        it = ctx.iteration_matrix
        steps = [int(c) for c in it["dur_ns"].columns] if not it["dur_ns"].empty else []
        iters = {"matched_by": ctx.matched_by, "iterations": steps, "ranks": []}
        for r in (it["dur_ns"].index if not it["dur_ns"].empty else []):
            iters["ranks"].append({"rank": int(r),
                                   "dur_ns": _plain(it["dur_ns"].loc[r].tolist()),
                                   "compute_ns": _plain(it["compute_ns"].loc[r].tolist()),
                                   "exposed_comm_ns": _plain(it["exposed_comm_ns"].loc[r].tolist())})
        rt = ctx.rank_table
        exposed = {"total_ns": int(rt["exposed_comm_ns"].sum()) if len(rt) else 0,
                   "wait_ns": int(rt["exposed_wait_ns"].sum()) if len(rt) else 0,
                   "transfer_ns": int(rt["exposed_transfer_ns"].sum()) if len(rt) else 0}
        return {
            "iterations": iters,
            "ranks": _records(rt.drop(columns=["label"]) if len(rt) else rt),
            "collective_skew": _records(ctx.skew_by_collective),
            "collective_bandwidth": _records(ctx.bandwidth_by_collective),
            "collective_calls": _records(ctx.matched.drop(columns=["kernel"]) if len(ctx.matched) else ctx.matched, 5000),
            "clock_offsets_ns": [{"rank": int(r), "offset_ns": int(o)} for r, o in sorted(ctx.offsets.items())],
            "exposed_communication": exposed,
            "worst_ranks": self.worst_ranks(),
            "notes": list(ctx.notes),
        }

    def worst_ranks(self, n: int = 5) -> list[dict[str, Any]]:
        """Ranks named by cross-rank findings first (by impact), then by median iteration time."""
        ctx = self.context
        if ctx is None or not len(ctx.rank_table):
            return []
        rt = ctx.rank_table
        named: dict[int, list[str]] = {}
        impact: dict[int, int] = {}
        for f in self.sorted_findings():
            if f.where.rank is not None:
                named.setdefault(f.where.rank, []).append(f.rule)
                impact[f.where.rank] = impact.get(f.where.rank, 0) + int(f.impact_ns)
        order = sorted(rt.index, key=lambda r: (-impact.get(r, 0), -(rt.at[r, "step_median_ns"]
                                                                     if not math.isnan(rt.at[r, "step_median_ns"]) else 0)))
        out = []
        for r in order[:n]:
            out.append(_plain({"rank": int(r), "rules": named.get(r, []), "impact_ns": impact.get(r, 0),
                               "step_median_ns": rt.at[r, "step_median_ns"],
                               "compute_median_ns": rt.at[r, "compute_median_ns"],
                               "median_late_ns": rt.at[r, "median_late_ns"],
                               "exposed_comm_ns": rt.at[r, "exposed_comm_ns"],
                               "label": rt.at[r, "label"]}))
        return out

    def to_dict(self) -> dict[str, Any]:
        ranks = []
        for s in self.ranks:
            ranks.append(_plain({
                "rank": s.rank, "source": s.source, "label": s.label, "rank_source": s.rank_source,
                "process": s.process, "format": s.format, "producer": s.producer,
                "world_size": s.world_size, "devices": s.devices,
                "epoch_start_ns": s.epoch_start_ns, "span_ns": s.end_ns - s.start_ns,
                "iterations": s.steps, "totals": s.totals,
                "findings_by_severity": s.findings_by_severity(),
                "findings": s.findings, "skipped_rules": s.skipped,
                "suppressed_by_baseline": s.suppressed,
                "notes": s.notes, "timing_s": {k: round(v, 4) for k, v in s.timing_s.items()},
                "worker": s.worker, "worker_peak_rss_bytes": s.worker_peak_rss_bytes,
            }))
        return {
            "schema_version": JOB_SCHEMA_VERSION,
            "kind": "job",
            "tool": {"name": "tracelint", "version": __version__},
            "sources": list(self.sources),
            "summary": _plain(self.summary()),
            "findings": [f.to_dict() for f in self.sorted_findings()],
            "ranks": ranks,
            "failed": [{"source": s.source, "label": s.label, "rank": s.rank_hint, "error": s.error}
                       for s in self.failed],
            "excluded": _plain(self.excluded),
            "job": self.job_tables(),
            "rules": [r.to_dict() for r in self.rules],
            "skipped_rules": dict(self.skipped),
            "suppressed_by_baseline": self.suppressed,
            "notes": list(self.notes),
            "execution": _plain(self.execution),
            "timing_s": {k: round(v, 4) for k, v in self.elapsed_s.items()},
        }

    def write_baseline(self, path: str) -> int:
        """Accept every current finding (per rank and cross-rank) into a baseline file."""
        from ..engine.baseline import BASELINE_VERSION
        from ..io import write_atomic
        entries = {(f.fingerprint(), f.rule, f.key) for f in self.findings}
        entries |= {(f["fingerprint"], f["rule"], f.get("key", "")) for f in self.rank_findings()}
        doc = {"version": BASELINE_VERSION,
               "findings": [{"fingerprint": a, "rule": b, "key": c} for a, b, c in sorted(entries)]}
        write_atomic(path, json.dumps(doc, indent=1) + "\n")
        return len(entries)


# ----- scrubbing ---------------------------------------------------------------------------------
_KEEP = frozenset({"fingerprint", "key", "rule", "slug", "severity", "verdict", "unit", "status"})


def scrub_job_report(report: JobReport, paths: bool = False) -> None:
    """Scrub, in place, every string a job renderer may print (the job-mode counterpart of
    tracelint.secrets.scrub_report): finding texts, per-rank finding dicts, kernel and device
    names, sources and labels (with paths=True also home directories, user and host names),
    notes, errors and exclusion reasons. Fingerprints and keys are kept so baselines match."""
    from ..secrets import scrub_text

    def f(x):
        return scrub_text(x, paths=paths) if isinstance(x, str) else x

    def deep(x, key=None):
        if isinstance(x, dict):
            return {k: (v if k in _KEEP else deep(v, k)) for k, v in x.items()}
        if isinstance(x, list):
            return [deep(v) for v in x]
        return f(x)
    report.sources = [f(x) for x in report.sources]
    report.notes = [f(x) for x in report.notes]
    report.skipped = {k: f(v) for k, v in report.skipped.items()}
    report.excluded = deep(report.excluded)
    for fd in report.findings:
        fd.message, fd.title, fd.fix = f(fd.message), f(fd.title), f(fd.fix)
        fd.counter_example = f(fd.counter_example)
        w = fd.where
        w.file, w.function, w.kernel = f(w.file), f(w.function), f(w.kernel)
        w.nvtx_path = [f(p) for p in w.nvtx_path]
        for ev in fd.evidence.values():
            ev.summary, ev.capture_hint = f(ev.summary), f(ev.capture_hint)
    for s in [*report.ranks, *report.failed]:
        s.source, s.label, s.error = f(s.source), f(s.label), f(s.error)
        s.notes = [f(x) for x in s.notes]
        s.findings = deep(s.findings)
        s.skipped = {k: f(v) for k, v in s.skipped.items()}
        s.top_kernels = [(f(n), t, c) for n, t, c in s.top_kernels]
        s.devices = deep(s.devices)
        if isinstance(s.collectives, pd.DataFrame) and "kernel" in s.collectives:
            s.collectives["kernel"] = s.collectives["kernel"].astype(str).map(f)
    ctx = report.context
    if ctx is not None:
        ctx.notes = [f(x) for x in ctx.notes]
        if len(ctx.collectives) and "kernel" in ctx.collectives:
            ctx.collectives["kernel"] = ctx.collectives["kernel"].astype(str).map(f)
        if len(ctx.matched) and "kernel" in ctx.matched:
            ctx.matched["kernel"] = ctx.matched["kernel"].astype(str).map(f)
        if len(ctx.rank_table):
            ctx.rank_table["label"] = ctx.rank_table["label"].map(f)


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
              f"{f.slug} · {who} · impact {fmt_ns(f.impact_ns)}")
            p(f"  {e(f.message)}")
            if quiet:
                continue
            for layer in LAYERS:
                ev = f.evidence.get(layer)
                if ev is None or (ev.status == "not_applicable" and not verbose):
                    continue
                mark = {"measured": "✓", "not_captured": "✗", "not_applicable": "–"}[ev.status]
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
_env = None


def _environment():
    global _env
    if _env is None:
        import jinja2
        _env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                                  trim_blocks=True, lstrip_blocks=True,
                                  undefined=jinja2.StrictUndefined)
        _env.filters["ns"] = fmt_ns
        _env.filters["bytes"] = fmt_bytes
        _env.filters["clean"] = clean
    return _env


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
    return _environment().get_template("job.html.j2").render(
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
    lines = [f"# tracelint job report", "",
             f"{len(report.ranks)} rank(s)" + (f" of world size {s['world_size']}" if s["world_size"] else "")
             + f" · cross-rank findings: {sum(s['findings_by_severity'].values())} · per-rank findings: "
             f"{sum(s['per_rank_findings_by_severity'].values())}", ""]

    def md(x):
        return clean(x).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    if report.findings:
        lines += ["## Cross-rank findings", "", "| severity | rule | who | message |", "|---|---|---|---|"]
        for f in report.sorted_findings():
            who = f"rank {f.where.rank}" if f.where.rank is not None else "job"
            lines.append(f"| {f.severity.value} | {f.rule} {f.slug} | {who} | {md(f.message)} |")
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
    from ..errors import TracelintError
    raise TracelintError(f"--format {fmt} is per trace; for a job use terminal, json, html or markdown")

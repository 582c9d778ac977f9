"""Self-contained HTML report: one file a user can mail or attach to a ticket.

Everything the page needs is inline (CSS, SVG plots); it has no scripts at all and a
Content-Security-Policy that forbids loading anything, so opening it never touches the network.
The template autoescapes every value; the only unescaped strings are the SVGs from svg.py,
which escapes every text it writes. Plots are downsampled with numpy here, so a trace with a
million events and thousands of findings still renders to a page a browser opens quickly.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from markupsafe import Markup

from .. import __version__
from ..engine.finding import LAYERS, VERDICT_ADVICE, Finding
from ..engine.report import Report
from ..timeline import intervals
from . import svg
from .efficiency_html import efficiency_section
from .memory_svg import memory_plots
from .fmt import (STATUS_MARK, STATUS_WORDS, clean, fact_label, finding_windows, fmt_count,
                  fmt_measure, fmt_ms, fmt_ns, fmt_share, trace_origin, where_parts)
from .templating import environment

MAX_CARDS = 200          # findings rendered as full cards; the rest go to a compact table
MAX_ROWS = 5000          # compact-table rows; beyond that the JSON report has them
MAX_MARKS = 400          # finding windows drawn per device strip
COLUMNS = 1000           # pixel columns of a device strip

def busy_columns(tl, device: int, t0: int, t1: int, columns: int = COLUMNS) -> np.ndarray:
    """Busy share of each of `columns` equal slices of [t0, t1] on one device (vectorised).

    Uses the prefix sum of merged busy time: busy(slice) = covered(right) - covered(left).
    """
    bs, be = tl.busy_intervals(device)
    if t1 <= t0 or len(bs) == 0:
        return np.zeros(columns if t1 > t0 else 0)
    edges = np.linspace(t0, t1, columns + 1).round().astype(np.int64)
    cum = np.r_[0, np.cumsum(be - bs)]
    covered = intervals.covered_before(edges, bs, be, cum)
    width = np.diff(edges).astype(np.float64)
    return np.divide(np.diff(covered), width, out=np.zeros(columns), where=width > 0)


def _strip_marks(findings: list[tuple[int, Finding]], device: int) -> list[tuple]:
    marks = []
    for n, f in findings:
        if f.where.device is not None and f.where.device != device:
            continue
        for s, e in finding_windows(f)[:5]:
            marks.append((s, e, f.severity.value, f"#finding-{n}",
                          f"#{n} {f.rule} {clean(f.slug)}: {fmt_ns(e - s)} — {clean(f.message, 200)}"))
            if len(marks) >= MAX_MARKS:
                return marks
    return marks


def _devices(report: Report, numbered: list[tuple[int, Finding]]) -> list[dict[str, Any]]:
    tl = report.timeline
    t0, t1 = (int(x) for x in tl.span)
    out = []
    for d in report.summary()["devices"]:
        label = f"GPU {d['id']}" + (f" · {clean(d['name'], 60)}" if d["name"] else "")
        label += f" · busy {fmt_share(d['busy_share'])} of its active window"
        frac = busy_columns(tl, d["id"], t0, t1)
        strip = svg.busy_strip(frac, t0, t1, label, _strip_marks(numbered, d["id"]))
        out.append({"id": d["id"], "name": d["name"], "busy": fmt_share(d["busy_share"]),
                    "svg": Markup(strip)})
    return out


def _plots(report: Report) -> list[dict[str, Any]]:
    """Gap and kernel-duration histograms, iteration times, top kernels: whichever apply."""
    tl = report.timeline
    plots = []
    k = tl.kernels
    dur = (k["end"].to_numpy() - k["start"].to_numpy()) if len(k) else np.zeros(0)
    if tl.has_gpu_activity:
        gaps = []
        for d in tl.devices_in_use():
            bs, be = tl.busy_intervals(d)
            if len(bs) > 1:
                gaps.append(bs[1:] - be[:-1])
        g = np.concatenate(gaps) if gaps else np.zeros(0, dtype=np.int64)
        plots.append(svg.log_histogram(g, "Idle gaps between GPU activities (all devices)",
                                       "gap length (log scale)", "gaps", what="gaps"))
        plots.append(svg.log_histogram(dur, "Kernel durations", "kernel duration (log scale)",
                                       "kernels", what="kernels"))
    steps = tl.ranges[tl.ranges["kind"].astype(str) == "step"] if len(tl.ranges) else tl.ranges
    if len(steps):
        steps = steps.sort_values("start", kind="stable")
        sd = (steps["end"] - steps["start"]).to_numpy()
        num = steps["step"].to_numpy()
        x = num if (num >= 0).all() else np.arange(len(sd))
        p50, p99 = np.percentile(sd, [50, 99])
        plots.append(svg.series_plot(x, sd, "Iteration time", "iteration", "time (ms)",
                                     {"P50": float(p50), "P99": float(p99)}))
    if len(k):
        codes, cats = pd.factorize(k["name"])      # categorical or object names alike
        cats = [str(c) for c in cats]
        ok = codes >= 0
        tot = np.bincount(codes[ok], weights=dur[ok], minlength=len(cats))
        cnt = np.bincount(codes[ok], minlength=len(cats))
        top = np.argsort(-tot, kind="stable")[:10]
        top = top[tot[top] > 0]
        all_t = float(tot.sum()) or 1.0
        plots.append(svg.hbar_chart(
            [clean(cats[i]) for i in top], [float(tot[i]) for i in top],
            [f"{int(cnt[i]):,}× · {fmt_share(tot[i] / all_t)}" for i in top],
            "Top kernels by total GPU time",
            "bar: total time per kernel name · calls · share of all kernel time"))
    # The kernel bar chart (last, when present) spans the full width: its labels are long.
    return [{"svg": Markup(p), "wide": p.startswith('<svg class="plot hbar"')} for p in plots]


def _evidence(f: Finding) -> list[dict[str, Any]]:
    out = []
    for layer in LAYERS:
        ev = f.evidence.get(layer)
        if ev is None:
            out.append({"layer": layer.value, "status": "not_applicable", "mark": "–",
                        "word": "not reported", "summary": "This rule does not use this layer.",
                        "facts": [], "hint": None, "conflict": False})
            continue
        conflict = ev.status == "measured" and ev.supports is False
        out.append({"layer": layer.value, "status": ev.status,
                    "mark": "≠" if conflict else STATUS_MARK.get(ev.status, "?"),
                    "word": "contradicts" if conflict else STATUS_WORDS.get(ev.status, ev.status),
                    "summary": clean(ev.summary),
                    "facts": [(fact_label(clean(k)), fmt_measure(m)) for k, m in ev.facts.items()],
                    "hint": clean(ev.capture_hint) if ev.capture_hint else None,
                    "conflict": conflict})
    return out


def _cases(f: Finding) -> list[dict[str, str]]:
    out = []
    for c in f.cases or []:
        sim = c.get("similarity")
        out.append({"id": clean(c.get("id", "")), "title": clean(c.get("title", "")),
                    "fix": clean(c.get("fix", "")), "label": clean(c.get("label", "")),
                    "why": clean("; ".join(c.get("why") or [])),
                    "similarity": fmt_share(sim) if isinstance(sim, (int, float)) else ""})
    return out


def _card(n: int, f: Finding, origin: int) -> dict[str, Any]:
    return {
        "n": n, "sev": f.severity.value, "rule": clean(f.rule), "slug": clean(f.slug),
        "title": clean(f.title), "message": clean(f.message),
        "impact": fmt_ms(f.impact_ns), "share": fmt_share(f.impact_share),
        "saving": (fmt_ms(f.saving_ns) + (f" – {fmt_ms(f.saving_upper_ns)}" if f.saving_upper_ns is not None else "")
                   if f.saving_ns is not None else "n/a"),
        "saving_note": clean(f.saving_note),
        "occurrences": fmt_count(f.occurrences),
        "where": where_parts(f.where, origin, name_limit=None),
        "windows": [f"+{(s - origin) / 1e6:,.3f} ms, lasting {fmt_ns(e - s)}"
                    for s, e in f.windows[:8]],
        "more_windows": max(len(f.windows) - 8, 0),
        "metrics": [(fact_label(clean(k)), fmt_measure(m)) for k, m in f.metrics.items()],
        "evidence": _evidence(f), "verdict": f.verdict, "advice": VERDICT_ADVICE[f.verdict],
        "fix": clean(f.fix), "counter_example": clean(f.counter_example), "cases": _cases(f),
        "fingerprint": f.fingerprint(),
    }


def _row(n: int, f: Finding, origin: int) -> dict[str, Any]:
    where = " · ".join(t for k, t in where_parts(f.where, origin, name_limit=60)
                       if k in ("device", "stream", "iteration", "source", "kernel"))
    return {"n": n, "sev": f.severity.value, "rule": clean(f.rule), "slug": clean(f.slug),
            "impact": fmt_ms(f.impact_ns), "share": fmt_share(f.impact_share),
            "where": where, "message": clean(f.message, 240), "verdict": f.verdict}


def _critical_path(report: Report) -> dict[str, Any] | None:
    """Stacked bar per iteration (or one for the trace) and the top items on the path."""
    cp = report.critical_path
    if not cp or not cp.get("length_ns"):
        return None
    rows = [(f"step {it['step']}", it["breakdown_ns"]) for it in cp.get("iterations", [])[:40]]
    rows = rows or [("trace", cp["breakdown_ns"])]
    bar = svg.stacked_bars(rows, "Critical path by class" + (" per iteration" if len(rows) > 1 or rows[0][0] != "trace" else ""))
    items = [{"name": clean(it["name"], 160), "cls": clean(it["class"]), "ns": fmt_ns(it["ns"]),
              "count": fmt_count(it["count"])} for it in cp["top_items"]]
    return {"svg": Markup(bar), "length": fmt_ns(cp["length_ns"]), "top": items,
            "saving_all": fmt_ms(report.saving_all_ns) if report.saving_all_ns is not None else None}


def _facts(report: Report) -> list[tuple[str, str]]:
    s = report.summary()
    tl = report.timeline
    fmt = " ".join(x for x in (s["format"], s["format_version"]) if x) or "unknown"
    facts = [("format", fmt)]
    if tl.meta.producer:
        facts.append(("producer", clean(tl.meta.producer)))
    facts.append(("span", fmt_ms(s["span_ns"])))
    if s["rank"] is not None:
        facts.append(("rank", f"{s['rank']}" + (f" of {s['world_size']}" if s["world_size"] else "")))
    c = s["counts"]
    facts.append(("events", f"{c['kernels']:,} kernels · {c['copies']:,} copies · "
                            f"{c['memsets']:,} memsets · {c['api_calls']:,} API calls · "
                            f"{c['ranges']:,} ranges"))
    facts.append(("devices", " · ".join(
        f"GPU {d['id']}" + (f" {clean(d['name'], 40)}" if d["name"] else "")
        + f" busy {fmt_share(d['busy_share'])}" for d in s["devices"]) or "none"))
    facts.append(("rules", f"{len(report.rules) - len(report.skipped)} run, "
                           f"{len(report.skipped)} not run"))
    if report.suppressed:
        facts.append(("baseline", f"{report.suppressed} findings suppressed"))
    return facts


def render_html(report: Report, max_cards: int = MAX_CARDS, max_rows: int = MAX_ROWS) -> str:
    """The whole report as one HTML document (str)."""
    ordered = report.sorted_findings()
    numbered = list(enumerate(ordered, 1))       # #N is the same in every reporter
    origin = trace_origin(report)
    s = report.summary()
    ctx = {
        "version": __version__, "source": clean(report.source), "facts": _facts(report),
        "summary": s, "has_gpu": s["has_gpu_activity"],
        "notes": [clean(n) for n in s["notes"]],
        "devices": _devices(report, numbered) if s["has_gpu_activity"] else [],
        "plots": _plots(report) + memory_plots(report),
        "efficiency": efficiency_section(report),
        "critical_path": _critical_path(report),
        "cards": [_card(n, f, origin) for n, f in numbered[:max_cards]],
        "rows": [_row(n, f, origin) for n, f in numbered[max_cards:max_cards + max_rows]],
        "rows_dropped": max(len(ordered) - max_cards - max_rows, 0),
        "total": len(ordered), "by_sev": s["findings_by_severity"],
        "rules": [{"id": clean(r.id), "slug": clean(r.slug), "title": clean(r.title),
                   "severity": r.severity, "doc": r.doc, "layers": ", ".join(r.layers),
                   "skipped": report.skipped.get(r.id)} for r in report.rules],
        "skipped": sorted(report.skipped.items()),
    }
    return environment().get_template("report.html.j2").render(**ctx)

"""Formatting shared by every reporter, so a duration or a location reads the same everywhere.

Nothing here escapes for a target format: each reporter escapes for its own (rich markup,
HTML, Markdown). `clean` only removes control characters, which no output should carry.
"""
from __future__ import annotations

import math
import re
from typing import Any

from ..engine.finding import Finding, Measure, Where
from ..engine.report import Report
from .escape import clean  # noqa: F401  (one escaping path: reporters.escape)

#: The section names of a rule docstring (engine/rule.py), in order.
DOC_SECTIONS = ("What it detects", "Why it hurts", "Evidence", "Fix",
                "Counter-example (when it does not apply)", "Options", "References")
_DOC_SECTION = re.compile(r"^(" + "|".join(re.escape(x) for x in DOC_SECTIONS) + r"):\s*")

STATUS_MARK = {"measured": "✓", "not_captured": "✗", "not_applicable": "–", "estimated": "≈"}
STATUS_WORDS = {"measured": "measured", "not_captured": "not captured",
                "not_applicable": "not applicable", "estimated": "estimated"}


def num(x: Any) -> float:
    """A plain float for numpy scalars and ints alike; NaN when not a number."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def fmt_ns(ns: Any) -> str:
    """A duration in the unit that suits it, with 3-4 significant digits: 820 ns, 45.60 µs,
    1.23 ms, 382.5 ms, 10.03 s (never 10033725 µs). n/a for no number."""
    v = num(ns)
    if math.isnan(v):
        return "n/a"
    a = abs(v)
    if a < 1e3:
        return f"{v:.0f} ns"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if a >= scale:
            x = v / scale
            return f"{x:,.0f} {unit}" if abs(x) >= 1000 else \
                f"{x:.1f} {unit}" if abs(x) >= 100 else f"{x:.2f} {unit}"
    return f"{v:.0f} ns"


def fmt_ms(ns: Any) -> str:
    """Milliseconds with three decimals: the unit findings are compared in."""
    v = num(ns)
    return "n/a" if math.isnan(v) else f"{v / 1e6:,.3f} ms"


def fmt_share(x: Any) -> str:
    v = num(x)
    if math.isnan(v):
        return "n/a"
    return f"{v * 100:.1f}%" if abs(v) >= 0.001 or v == 0 else f"{v * 100:.2g}%"


def fmt_bytes(b: Any) -> str:
    v = num(b)
    if math.isnan(v):
        return "n/a"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.0f} B"


def fmt_count(c: Any) -> str:
    v = num(c)
    if math.isnan(v):
        return "n/a"
    return f"{int(v):,}" if v == int(v) else f"{v:,.3g}"


def short_name(name: Any, n: int = 100) -> str:
    """A name cut to n characters (an ellipsis marks the cut), for messages and evidence."""
    name = str(name)
    return name if len(name) <= n else name[: n - 1] + "…"


def fmt_measure(m: Measure) -> str:
    """A Measure with its unit made readable (ns -> µs/ms, ratio -> %, bytes -> MB)."""
    unit = (m.unit or "").strip()
    v = m.value
    if unit == "ns":
        return fmt_ns(v)
    if unit == "bytes":
        return fmt_bytes(v)
    if unit in ("ratio", "share", "fraction"):
        return fmt_share(v)
    if unit == "count":
        return fmt_count(v)
    x = num(v)
    if math.isnan(x):
        return f"{clean(v)} {clean(unit)}".strip()
    text = f"{x:,.0f}" if x == int(x) and abs(x) < 1e15 else f"{x:,.4g}"
    if unit in ("%", "percent"):
        return f"{text}%"
    return f"{text} {clean(unit)}".strip()


def fact_label(key: str) -> str:
    """'median_gap_ns' -> 'median gap': the unit is shown with the value."""
    for suffix in ("_ns", "_bytes", "_share", "_count"):
        if key.endswith(suffix) and len(key) > len(suffix):
            key = key[: -len(suffix)] + (" share" if suffix == "_share" else "")
            break
    return key.replace("_", " ")


def rel_ms(t_ns: int | None, origin_ns: int) -> str:
    """A time as offset from the trace start, in ms: '+12.345 ms'."""
    if t_ns is None:
        return "?"
    return f"+{(int(t_ns) - origin_ns) / 1e6:,.3f} ms"


def window_text(start: int | None, end: int | None, origin_ns: int) -> str:
    if start is None and end is None:
        return ""
    return f"{rel_ms(start, origin_ns)} … {rel_ms(end, origin_ns)}"


def where_parts(w: Where, origin_ns: int, name_limit: int | None = 80,
                nvtx_depth: int | None = None) -> list[tuple[str, str]]:
    """(label, text) pairs for every location fact the finding has, most specific last.

    nvtx_depth keeps only the innermost ranges of a deep NVTX path. Texts are cleaned of
    control characters but not escaped.
    """
    out: list[tuple[str, str]] = []
    if w.rank is not None:
        out.append(("rank", f"rank {w.rank}"))
    if w.device is not None:
        out.append(("device", f"GPU {w.device}"))
    if w.stream is not None:
        out.append(("stream", f"stream {w.stream}"))
    if w.start_ns is not None or w.end_ns is not None:
        out.append(("window", window_text(w.start_ns, w.end_ns, origin_ns)))
    if w.iteration is not None:
        out.append(("iteration", f"iter {w.iteration}"))
    if w.pid is not None or w.tid is not None:
        out.append(("thread", f"pid {w.pid if w.pid is not None else '?'} / tid "
                              f"{w.tid if w.tid is not None else '?'}"))
    if w.nvtx_path:
        path = [clean(p, 60) for p in w.nvtx_path]
        if nvtx_depth and len(path) > nvtx_depth:
            path = ["…"] + path[-nvtx_depth:]
        out.append(("nvtx", " › ".join(path)))
    if w.file:
        out.append(("source", clean(w.source_text(), 200)))
    if getattr(w, "module_path", None):
        out.append(("module", " › ".join(clean(m, 60) for m in w.module_path)))
    if w.kernel:
        out.append(("kernel", clean(w.kernel, name_limit)))
    return out


def trace_origin(report: Report) -> int:
    return int(report.timeline.span[0])


def severity_counts_text(counts: dict[str, int]) -> str:
    parts = []
    for sev, word in (("error", "error"), ("warning", "warning"), ("info", "info")):
        n = counts.get(sev, 0)
        if n:
            parts.append(f"{n} {word}{'s' if n != 1 and word != 'info' else ''}")
    return ", ".join(parts) if parts else "no findings"


def finding_windows(f: Finding) -> list[tuple[int, int]]:
    """The finding's instance windows, or its where-window when it lists none."""
    if f.windows:
        return [(int(s), int(e)) for s, e in f.windows]
    w = f.where
    if w.start_ns is not None and w.end_ns is not None:
        return [(int(w.start_ns), int(w.end_ns))]
    return []


def doc_markdown(doc: str) -> str:
    """A rule docstring as Markdown: the summary line bold, then each section ("What it
    detects:", "Fix:", ...) a paragraph of its own with its name in bold, wrapped lines joined."""
    lines = doc.strip().splitlines()
    if not lines:
        return ""
    paras: list[str] = [f"**{lines[0].strip()}**"]
    current: list[str] = []
    for ln in lines[1:]:
        m = _DOC_SECTION.match(ln.strip())
        if m or not ln.strip():
            if current:
                paras.append(" ".join(current))
            current = [f"**{m.group(1)}:** {ln.strip()[m.end():]}"] if m else []
        else:
            current.append(ln.strip())
    if current:
        paras.append(" ".join(current))
    return "\n\n".join(paras)

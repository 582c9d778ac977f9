"""Text for compared numbers, shared by the diff and gate renderers: times, changes with
their intervals, and Markdown-safe cells (names come from traces)."""
from __future__ import annotations

import re

import numpy as np

from ..reporters.fmt import fmt_ns as _fmt_ns
from .stats import Comparison


def fmt_ns(ns) -> str:
    """A duration in the one style of reporters/fmt.py; '–' for none."""
    if ns is None or (isinstance(ns, float) and np.isnan(ns)):
        return "–"
    return _fmt_ns(ns)


def fmt_change(c: Comparison | None, unit: str = "ns") -> str:
    if c is None:
        return "–"
    f = fmt_ns if unit == "ns" else (lambda x: f"{x:g}")
    if c.change is None:
        return f"{f(c.a)} → {f(c.b)}"
    mark = {"worse": " ▲", "better": " ▼"}.get(c.verdict, "")
    ch = "∞" if not np.isfinite(c.change) else f"{c.change:+.1%}"
    return f"{f(c.a)} → {f(c.b)} ({ch}{mark})"


def fmt_interval(c: Comparison | None) -> str:
    """The confidence interval of the change, or why there is none."""
    if c is None:
        return "–"
    if c.verdict == "not gated":
        m = re.match(r"(P[\d.]+ needs >= \d+ samples)", c.why)
        return f"not gated: {m.group(1) if m else c.why}"
    if c.low is None or not np.isfinite(c.low) or not np.isfinite(c.high):
        return "–"
    return f"[{c.low:+.1%}, {c.high:+.1%}]"




def md_cell(s) -> str:
    """Markdown-safe text (names from traces): specials escaped, no line breaks."""
    from ..reporters.escape import md_escape      # the one escaping path (HTML, mentions, controls)
    return md_escape(s)

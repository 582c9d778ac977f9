"""Tiny inline-SVG plotting for the HTML report: no plotting library, no scripts, no fonts.

Every function takes already-downsampled numpy data (a few hundred to a thousand points at
most), returns an SVG string, and escapes every text it writes, so trace names are safe to
embed. Colours and fonts come from CSS classes the report's stylesheet defines.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
from markupsafe import escape

from .fmt import fmt_ns

W, H = 640, 260                       # default viewBox of a plot
ML, MR, MT, MB = 64, 16, 30, 48       # margins: left, right, top, bottom


def _f(x: float) -> str:
    """Coordinates with at most 2 decimals keep the file small."""
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _open(w: int, h: int, title: str, cls: str = "plot") -> list[str]:
    return [f'<svg class="{cls}" viewBox="0 0 {w} {h}" role="img" '
            f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
            f'<text class="ptitle" x="{ML}" y="18">{escape(title)}</text>']


def nice_ticks(hi: float, n: int = 5) -> list[float]:
    """0 and round steps up to at least hi (1, 2, 2.5, 5 x 10^k)."""
    if not hi > 0 or not math.isfinite(hi):
        return [0.0, 1.0]
    raw = hi / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(math.ceil(hi / step - 1e-9)) + 1)]


def log_ticks(lo10: float, hi10: float) -> list[float]:
    """Decade ticks; 1-2-5 ticks when the range spans under about two decades."""
    mults = (1, 2, 5) if hi10 - lo10 < 2.2 else (1,)
    ticks = [m * 10.0 ** k for k in range(math.floor(lo10), math.ceil(hi10) + 1) for m in mults]
    return [t for t in ticks if lo10 - 1e-9 <= math.log10(t) <= hi10 + 1e-9]


def _count_label(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def _y_axis(out: list[str], ticks: Sequence[float], y_of: Callable[[float], float], w: int,
            label: str, fmt: Callable[[float], str], h: int) -> None:
    for t in ticks:
        y = y_of(t)
        out.append(f'<line class="grid" x1="{ML}" x2="{w - MR}" y1="{_f(y)}" y2="{_f(y)}"/>')
        out.append(f'<text class="tick" x="{ML - 6}" y="{_f(y + 4)}" text-anchor="end">'
                   f'{escape(fmt(t))}</text>')
    out.append(f'<text class="axis" transform="translate(14 {_f((MT + h - MB) / 2)}) rotate(-90)" '
               f'text-anchor="middle">{escape(label)}</text>')


def empty_plot(title: str, why: str, w: int = W, h: int = 120) -> str:
    out = _open(w, h, title)
    out.append(f'<text class="empty" x="{w / 2}" y="{h / 2 + 10}" text-anchor="middle">'
               f'{escape(why)}</text></svg>')
    return "".join(out)


def log_histogram(values: np.ndarray, title: str, x_label: str, y_label: str = "count",
                  what: str = "items", bins: int = 40, w: int = W, h: int = H) -> str:
    """Histogram of positive durations (ns) on logarithmic bins, x ticks at decades."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v) & (v > 0)]
    if len(v) == 0:
        return empty_plot(title, f"no {what}")
    lo, hi = float(v.min()), float(v.max())
    if hi <= lo * 1.01:
        lo, hi = lo / 1.5, hi * 1.5
    edges = np.logspace(math.log10(lo), math.log10(hi * 1.0001), bins + 1)
    counts, _ = np.histogram(v, bins=edges)
    ticks = nice_ticks(float(counts.max()))
    x0, x1, y0, y1 = ML, w - MR, h - MB, MT
    lx = np.log10(edges)
    x_of = lambda t: x0 + (math.log10(t) - lx[0]) / (lx[-1] - lx[0]) * (x1 - x0)  # noqa: E731
    y_of = lambda c: y0 - c / ticks[-1] * (y0 - y1)  # noqa: E731
    out = _open(w, h, title)
    _y_axis(out, ticks, y_of, w, y_label, _count_label, h)
    for i, c in enumerate(counts):
        if c == 0:
            continue
        xa, xb = x_of(edges[i]), x_of(edges[i + 1])
        ya = min(y_of(c), y0 - 1.5)        # a single long gap must stay visible
        out.append(f'<rect class="bar" x="{_f(xa)}" y="{_f(ya)}" width="{_f(max(xb - xa - 1, 1))}" '
                   f'height="{_f(y0 - ya)}"><title>{escape(fmt_ns(edges[i]))} – '
                   f'{escape(fmt_ns(edges[i + 1]))}: {int(c):,} {escape(what)}</title></rect>')
    for t in log_ticks(lx[0], lx[-1]):
        x = x_of(t)
        out.append(f'<line class="tickline" x1="{_f(x)}" x2="{_f(x)}" y1="{y0}" y2="{y0 + 5}"/>')
        out.append(f'<text class="tick" x="{_f(x)}" y="{y0 + 18}" text-anchor="middle">'
                   f'{escape(fmt_ns(t))}</text>')
    out.append(f'<line class="axisline" x1="{x0}" x2="{x1}" y1="{y0}" y2="{y0}"/>')
    out.append(f'<text class="axis" x="{(x0 + x1) / 2}" y="{h - 8}" text-anchor="middle">'
               f'{escape(x_label)}</text>')
    out.append(f'<text class="note" x="{x1}" y="18" text-anchor="end">n = {len(v):,}</text></svg>')
    return "".join(out)


def series_plot(x: np.ndarray, y_ns: np.ndarray, title: str, x_label: str, y_label: str,
                refs: dict[str, float], max_points: int = 1000, w: int = W, h: int = H) -> str:
    """A line of durations (ns, drawn in ms) over x, with labelled horizontal reference lines.

    More than max_points values are binned to the per-bin maximum, so the tail stays visible.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y_ns, dtype=np.float64) / 1e6
    if len(y) == 0:
        return empty_plot(title, "no data")
    note = f"n = {len(y):,}"
    if len(y) > max_points:
        edges = np.linspace(0, len(y), max_points + 1).astype(np.int64)
        y = np.maximum.reduceat(y, edges[:-1])
        x = x[edges[:-1]]
        note += f" (max per bin of {math.ceil(len(y_ns) / max_points)})"
    top = max(float(y.max()), *(v / 1e6 for v in refs.values())) if refs else float(y.max())
    ticks = nice_ticks(top)
    x0, x1, y0, y1 = ML, w - MR, h - MB, MT
    xlo, xhi = float(x.min()), float(x.max())
    span = xhi - xlo if xhi > xlo else 1.0
    x_of = lambda t: x0 + (t - xlo) / span * (x1 - x0)  # noqa: E731
    y_of = lambda v: y0 - v / ticks[-1] * (y0 - y1)  # noqa: E731
    out = _open(w, h, title)
    _y_axis(out, ticks, y_of, w, y_label, lambda t: f"{t:g}", h)
    pts = " ".join(f"{_f(x_of(a))},{_f(y_of(b))}" for a, b in zip(x.tolist(), y.tolist()))
    out.append(f'<polyline class="line" points="{pts}"/>')
    if len(y) <= 120:
        out += [f'<circle class="dot" cx="{_f(x_of(a))}" cy="{_f(y_of(b))}" r="2.5">'
                f'<title>{escape(f"{a:g}")}: {b:.3f} ms</title></circle>'
                for a, b in zip(x.tolist(), y.tolist())]
    for i, (name, v) in enumerate(refs.items()):
        yy = y_of(v / 1e6)
        # Labels alternate right/left ends so equal references (P50 == P99) stay readable.
        lx_, anchor = (x1 - 4, "end") if i % 2 else (x0 + 4, "start")
        out.append(f'<line class="ref ref{i}" x1="{x0}" x2="{x1}" y1="{_f(yy)}" y2="{_f(yy)}"/>')
        out.append(f'<text class="reflabel ref{i}" x="{lx_}" y="{_f(yy - 5)}" '
                   f'text-anchor="{anchor}">{escape(name)} {v / 1e6:.3f} ms</text>')
    step = nice_ticks(span)[1] if span > 1 else 1.0
    for t in np.arange(math.ceil(xlo / step) * step, xhi + step * 1e-9, step):
        out.append(f'<text class="tick" x="{_f(x_of(t))}" y="{y0 + 18}" text-anchor="middle">'
                   f'{t:g}</text>')
    out.append(f'<line class="axisline" x1="{x0}" x2="{x1}" y1="{y0}" y2="{y0}"/>')
    out.append(f'<text class="axis" x="{(x0 + x1) / 2}" y="{h - 8}" text-anchor="middle">'
               f'{escape(x_label)}</text>')
    out.append(f'<text class="note" x="{x1}" y="18" text-anchor="end">{escape(note)}</text></svg>')
    return "".join(out)


def hbar_chart(labels: Sequence[str], values_ns: Sequence[float], notes: Sequence[str],
               title: str, x_label: str, w: int = 1000, label_chars: int = 120) -> str:
    """Horizontal bars with the (long, untrusted) label above each bar; full label as tooltip."""
    if len(values_ns) == 0:
        return empty_plot(title, "no kernels")
    row = 34
    h = MT + row * len(values_ns) + 40
    vmax = float(max(values_ns)) or 1.0
    x0, x1 = 12, w - 200
    out = _open(w, h, title, cls="plot hbar")
    out[1] = f'<text class="ptitle" x="{x0}" y="18">{escape(title)}</text>'
    for i, (lab, v, note) in enumerate(zip(labels, values_ns, notes)):
        y = MT + i * row
        short = lab if len(lab) <= label_chars else lab[: label_chars - 1] + "…"
        out.append(f'<g><title>{escape(lab)}</title>'
                   f'<text class="barlabel" x="{x0}" y="{y + 11}">{escape(short)}</text>'
                   f'<rect class="bar" x="{x0}" y="{y + 15}" height="12" '
                   f'width="{_f(max(v / vmax * (x1 - x0), 1))}"/>'
                   f'<text class="tick" x="{_f(x0 + max(v / vmax * (x1 - x0), 1) + 6)}" '
                   f'y="{y + 25}">{escape(fmt_ns(v))} · {escape(note)}</text></g>')
    out.append(f'<text class="axis" x="{x0}" y="{h - 10}">{escape(x_label)}</text></svg>')
    return "".join(out)


def busy_strip(fractions: np.ndarray, t0: int, t1: int, label: str,
               marks: Sequence[tuple[int, int, str, str, str]], w: int = 1000,
               levels: int = 20) -> str:
    """One device's busy share per pixel column as shaded rectangles, with finding windows.

    fractions: busy share (0..1) of each column of [t0, t1]. marks: (start_ns, end_ns,
    severity, href, tooltip). Equal adjacent columns (after quantising to `levels` shades) are
    drawn as one rectangle, so a mostly-busy or mostly-idle device costs a few elements.
    """
    lane, mark_h, h = 26, 10, 72
    top = 16 + mark_h + 2
    ncol = max(len(fractions), 1)
    cw = w / ncol
    q = np.round(np.clip(np.asarray(fractions, dtype=np.float64), 0, 1) * levels).astype(np.int64)
    out = [f'<svg class="strip" viewBox="0 0 {w} {h}" role="img" '
           f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">',
           f'<rect class="idle" x="0" y="{top}" width="{w}" height="{lane}"/>']
    if len(q):
        change = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
        ends = np.r_[change[1:], len(q)]
        for a, b in zip(change.tolist(), ends.tolist()):
            lvl = int(q[a])
            if lvl == 0:
                continue
            out.append(f'<rect class="busy" x="{_f(a * cw)}" y="{top}" width="{_f((b - a) * cw)}" '
                       f'height="{lane}" fill-opacity="{lvl / levels:.2f}"/>')
    dur = max(t1 - t0, 1)
    for s, e, sev, href, tip in marks:
        xa = (s - t0) / dur * w
        xb = (e - t0) / dur * w
        wd = max(xb - xa, 2.0)
        out.append(f'<a href="{escape(href)}"><rect class="mark sev-{escape(sev)}" x="{_f(xa)}" '
                   f'y="16" width="{_f(wd)}" height="{mark_h}"><title>{escape(tip)}</title></rect>'
                   f'<rect class="markspan sev-{escape(sev)}" x="{_f(xa)}" y="{top}" '
                   f'width="{_f(wd)}" height="{lane}"/></a>')
    for i in range(6):
        x = i / 5 * w
        anchor = "start" if i == 0 else "end" if i == 5 else "middle"
        out.append(f'<text class="tick" x="{_f(x)}" y="{h - 4}" text-anchor="{anchor}">'
                   f'+{(dur * i / 5) / 1e6:,.3f} ms</text>')
    out.append(f'<text class="striplabel" x="0" y="11">{escape(label)}</text></svg>')
    return "".join(out)


#: Fill per critical-path class (GPU classes share blues, host classes oranges, idle grey).
PATH_COLOURS = {"communication": "#7b3fa0", "copies": "#2a9d8f", "host launch": "#e08a00",
                "host blocked in sync": "#c0392b", "host other": "#f2b880", "idle": "#c9d1d9"}
_GPU_BLUES = ("#1f5f9e", "#3f7fbf", "#6a9fd4", "#94bde6", "#b9d4ef", "#2c4f73", "#5778a0")


def path_colour(cls: str, gpu_seen: dict) -> str:
    if cls in PATH_COLOURS:
        return PATH_COLOURS[cls]
    return gpu_seen.setdefault(cls, _GPU_BLUES[len(gpu_seen) % len(_GPU_BLUES)])


def stacked_bars(rows: Sequence[tuple[str, dict]], title: str, w: int = 1000) -> str:
    """One horizontal bar per row (label, {class: ns}), stacked by class, with a legend.

    Bars share one scale (the longest row), so iterations compare at a glance."""
    if not rows:
        return empty_plot(title, "no critical path")
    row, x0, x1 = 26, 90, w - 110
    classes = list(dict.fromkeys(c for _, parts in rows for c in parts))
    legend_rows = (len(classes) + 3) // 4
    h = MT + row * len(rows) + 18 * legend_rows + 16
    vmax = max(sum(parts.values()) for _, parts in rows) or 1
    seen: dict = {}
    colour = {c: path_colour(c, seen) for c in classes}
    out = _open(w, h, title, cls="plot hbar")
    out[1] = f'<text class="ptitle" x="12" y="18">{escape(title)}</text>'
    for i, (label, parts) in enumerate(rows):
        y = MT + i * row
        out.append(f'<text class="barlabel" x="12" y="{y + 14}">{escape(label)}</text>')
        x = float(x0)
        for c, v in parts.items():
            wd = v / vmax * (x1 - x0)
            out.append(f'<rect x="{_f(x)}" y="{y + 3}" width="{_f(max(wd, 0.5))}" height="16" '
                       f'fill="{colour[c]}"><title>{escape(c)}: {escape(fmt_ns(v))}</title></rect>')
            x += wd
        out.append(f'<text class="tick" x="{_f(x + 6)}" y="{y + 15}">{escape(fmt_ns(sum(parts.values())))}</text>')
    y = MT + row * len(rows) + 8
    for k, c in enumerate(classes):
        lx, ly = 12 + (k % 4) * 240, y + (k // 4) * 18
        out.append(f'<rect x="{lx}" y="{ly}" width="12" height="12" fill="{colour[c]}"/>'
                   f'<text class="note" x="{lx + 18}" y="{ly + 10}">{escape(c)}</text>')
    out.append("</svg>")
    return "".join(out)

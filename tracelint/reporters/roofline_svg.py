"""The roofline plot for the HTML report: log-log, arithmetic intensity against achieved
FLOP/s, one point per (op, kernel) sized by its time, under the device's roofs.

Inline SVG like svg.py (same helpers and CSS classes); every label is escaped. The data are
estimates (work from op shapes, peaks from the device table), and the title says so.
"""
from __future__ import annotations

import math

from markupsafe import escape

from .svg import H, MB, ML, MR, MT, W, _f, _open, empty_plot, log_ticks

MAX_POINTS = 200


def _si(v: float, unit: str) -> str:
    for k, p in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= p:
            return f"{v / p:g}{k}{unit}"
    return f"{v:g}{unit}"


def roofline_plot(rows, peaks: dict[str, float], bandwidth: float, title: str) -> str:
    """rows: DataFrame with intensity, achieved_flops, kernel_ns, op, main_kernel, pct_of_bound;
    peaks: math type -> FLOP/s roofs to draw; bandwidth: bytes/s."""
    pts = rows[(rows["flops"] > 0) & (rows["bytes"] > 0) & (rows["kernel_ns"] > 0)]
    pts = pts.sort_values("kernel_ns", ascending=False).head(MAX_POINTS)
    if len(pts) == 0 or not peaks or not bandwidth:
        return empty_plot(title, "no kernel with modelled FLOPs to place on the roofline")
    w, h = W, H + 60
    ai = pts["intensity"].to_numpy(dtype=float)
    fl = pts["achieved_flops"].to_numpy(dtype=float)
    top = max(peaks.values())
    x_lo = max(math.floor(math.log10(ai.min())), -2)
    x_hi = math.log10(max(ai.max(), top / bandwidth) * 3)
    y_hi = math.log10(top) + 0.3
    y_lo = max(math.floor(math.log10(max(fl.min(), 1.0))), math.floor(y_hi) - 6)
    X = lambda v: ML + (math.log10(v) - x_lo) / (x_hi - x_lo) * (w - ML - MR)      # noqa: E731
    Y = lambda v: h - MB - (math.log10(v) - y_lo) / (y_hi - y_lo) * (h - MT - MB)  # noqa: E731
    out = _open(w, h, title)
    for t in log_ticks(y_lo, y_hi):
        out.append(f'<line class="grid" x1="{ML}" x2="{w - MR}" y1="{_f(Y(t))}" y2="{_f(Y(t))}"/>')
        out.append(f'<text class="tick" x="{ML - 6}" y="{_f(Y(t) + 4)}" text-anchor="end">{escape(_si(t, ""))}</text>')
    for t in log_ticks(x_lo, x_hi):
        out.append(f'<line class="grid" x1="{_f(X(t))}" x2="{_f(X(t))}" y1="{MT}" y2="{h - MB}"/>')
        out.append(f'<text class="tick" x="{_f(X(t))}" y="{h - MB + 16}" text-anchor="middle">{escape(f"{t:g}")}</text>')
    out.append(f'<text class="axis" x="{_f((ML + w - MR) / 2)}" y="{h - 10}" text-anchor="middle">'
               'arithmetic intensity (FLOP/byte, log scale)</text>')
    out.append(f'<text class="axis" transform="translate(14 {_f((MT + h - MB) / 2)}) rotate(-90)" '
               'text-anchor="middle">achieved FLOP/s (log scale)</text>')
    for name, peak in sorted(peaks.items(), key=lambda kv: -kv[1]):
        ridge = peak / bandwidth
        x0 = 10.0 ** x_lo
        y0 = max(bandwidth * x0, 10.0 ** y_lo)
        x0 = y0 / bandwidth
        out.append(f'<polyline class="roof" fill="none" stroke="currentColor" stroke-width="1.5" '
                   f'points="{_f(X(x0))},{_f(Y(y0))} {_f(X(ridge))},{_f(Y(peak))} {_f(X(10.0 ** x_hi))},{_f(Y(peak))}"/>')
        out.append(f'<text class="tick" x="{_f(w - MR - 4)}" y="{_f(Y(peak) - 4)}" text-anchor="end">'
                   f'{escape(name.upper())} peak {escape(_si(peak, "FLOP/s"))}</text>')
    share = pts["kernel_ns"].to_numpy(dtype=float) / max(float(rows["kernel_ns"].sum()), 1.0)
    for (_, r), a, f, s in zip(pts.iterrows(), ai, fl, share):
        rad = 2.5 + 14 * math.sqrt(max(s, 0.0))
        label = (f"{r['op']} · {str(r['main_kernel'])[:90]} · {s:.1%} of modelled time · "
                 f"{_si(f, 'FLOP/s')} · AI {a:.3g} · {r['pct_of_bound']:.0%} of bound ({r['bound']})")
        out.append(f'<circle class="pt" cx="{_f(X(max(a, 10.0 ** x_lo)))}" cy="{_f(Y(max(f, 10.0 ** y_lo)))}" r="{_f(rad)}" '
                   f'fill="currentColor" fill-opacity="0.35"><title>{escape(label)}</title></circle>')
    out.append(f'<text class="tick" x="{ML + 4}" y="{MT + 12}">{escape(_si(bandwidth, "B/s"))} memory roof</text>')
    out.append("</svg>")
    return "".join(out)


def roofs_for(spec, maths) -> dict[str, float]:
    """Roofs to draw: the math types the kernels used, plus FP32, where the device lists them."""
    out = {}
    for m in list(dict.fromkeys([*maths, "fp32"])):
        p = spec.peak(m)
        if p:
            out[m] = p
    return out


def plot_for_device(eff, device: int) -> str | None:
    """The roofline SVG for one device, or None when it cannot be drawn (unknown device)."""
    dev = next((d for d in eff.devices if d.device == device), None)
    if dev is None or dev.match.spec is None or len(eff.kernels) == 0:
        return None
    rows = eff.kernels[eff.kernels["device"] == device]
    maths = rows.groupby("math")["kernel_ns"].sum().sort_values(ascending=False).index.tolist()
    spec = dev.match.spec
    title = f"Roofline (estimated from op shapes): GPU {device} {spec.name}"
    return roofline_plot(rows, roofs_for(spec, maths[:2]), spec.memory_bps, title)

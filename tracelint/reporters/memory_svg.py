"""The memory timeline plot for the HTML report: allocated and reserved bytes over time, one
plot per device, with the device's memory size when the trace records it.

Inline SVG like svg.py (same helpers and CSS classes, no scripts, no external resources);
every text is escaped. Data: timeline/memory.py (step curves, downsampled keeping each
bucket's maximum so the peak stays visible).
"""
from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

from ..timeline.memory import DeviceMemory, device_memory, series_points
from .svg import H, MB, ML, MR, MT, W, _f, _open, _y_axis, nice_ticks

GIB = 1 << 30
POINTS = 400


def _size(v: float) -> str:
    for unit, p in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= p:
            return f"{v / p:.3g} {unit}"
    return f"{v:.0f} B"


def memory_plot(dm: DeviceMemory, t0: int, points: int = POINTS, w: int = W, h: int = H) -> str:
    s = series_points(dm, points)
    title = f"Memory over time: {dm.label}"
    ts = [t - t0 for t in s["ts"]]
    curves = [(name, cls, vals) for name, cls, vals in
              (("allocated", "line", s["allocated"]), ("reserved", "line mres", s["reserved"]))
              if any(v >= 0 for v in vals) and (name == "allocated" or max(vals) > 0)]
    top = max([max(v) for _, _, v in curves] + [dm.capacity or 0] * bool(
        dm.capacity and dm.peak and dm.peak > 0.5 * dm.capacity) + [1])
    unit = next((p for p in (1 << 30, 1 << 20, 1 << 10) if top >= p), 1)
    uname = {1 << 30: "GiB", 1 << 20: "MiB", 1 << 10: "KiB", 1: "B"}[unit]
    ticks = nice_ticks(top / unit)
    x0, x1, y0, y1 = ML, w - MR, h - MB, MT
    span = max(ts[-1] - ts[0], 1) if ts else 1
    x_of = lambda t: x0 + (t - ts[0]) / span * (x1 - x0)          # noqa: E731
    y_of = lambda v: y0 - v / ticks[-1] * (y0 - y1)                 # noqa: E731
    out = _open(w, h, title)
    _y_axis(out, ticks, y_of, w, f"bytes ({uname})", lambda t: f"{t:g}", h)
    for name, cls, vals in curves:      # step curve: the total holds until the next event
        pts, prev = [], None
        for t, v in zip(ts, vals):
            if v < 0:
                continue
            if prev is not None:
                pts.append(f"{_f(x_of(t))},{_f(y_of(prev / unit))}")
            pts.append(f"{_f(x_of(t))},{_f(y_of(v / unit))}")
            prev = v
        out.append(f'<polyline class="{cls}" points="{" ".join(pts)}"><title>{escape(name)}</title></polyline>')
    if dm.capacity and dm.capacity / unit <= ticks[-1]:
        yy = y_of(dm.capacity / unit)
        out.append(f'<line class="ref ref1" x1="{x0}" x2="{x1}" y1="{_f(yy)}" y2="{_f(yy)}"/>')
        out.append(f'<text class="reflabel ref1" x="{x1 - 4}" y="{_f(yy - 5)}" text-anchor="end">'
                   f'device memory {escape(_size(dm.capacity))}</text>')
    legend = " · ".join(f"{n}{' (dashed)' if 'mres' in c else ''}" for n, c, _ in curves)
    peak = f"peak {_size(dm.peak)}" if dm.peak else ""
    frag = (f" · reserved − allocated at the peak {_size(dm.fragmentation_at_peak)}"
            if dm.fragmentation_at_peak is not None else "")
    out.append(f'<text class="note" x="{x1}" y="18" text-anchor="end">{escape(peak + frag)}</text>')
    out.append(f'<line class="axisline" x1="{x0}" x2="{x1}" y1="{y0}" y2="{y0}"/>')
    out.append(f'<text class="axis" x="{(x0 + x1) / 2}" y="{h - 8}" text-anchor="middle">'
               f'{escape(f"time since trace start ({_f(span / 1e6)} ms shown) · {legend}")}</text></svg>')
    return "".join(out)


def memory_plots(report) -> list[dict[str, Any]]:
    """One wide plot per device with memory events (nothing when the trace has none)."""
    tl = report.timeline
    if not len(tl.memory):
        return []
    t0 = int(tl.span[0])
    return [{"svg": Markup(memory_plot(dm, t0)), "wide": True} for dm in device_memory(tl)]

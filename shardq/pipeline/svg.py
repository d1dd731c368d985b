"""Two small SVG chart makers (lines over time, grouped horizontal bars) for report.html.

Hand-rolled on purpose: the data is a few hundred points, and a plotting library would be
a large dependency for two chart shapes. Every label is escaped (tube names are user data).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape

WIDTH = 1000


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """0 and round steps (1, 2, 5 x 10^k) up to at least `top`."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


def _num(v: float) -> str:
    return f"{v:,.0f}" if v >= 10 or v == 0 else f"{v:.3g}"


def line_chart(
    lines: dict[str, list[tuple[float, float]]],
    colors: dict[str, str],
    label: Callable[[float], str],
    step: float,
    height: int = 280,
) -> str:
    """One polyline per name over a shared time axis; missing buckets count as 0."""
    left, right, top, bottom = 60, 170, 10, 30
    xs = sorted({t for pts in lines.values() for t, _ in pts})
    lo, last = xs[0], xs[-1]
    hi = last if last > lo else lo + step  # one bucket: draw it at the left edge
    buckets = int((last - lo) // step) + 1
    ymax = max((v for pts in lines.values() for _, v in pts), default=0)
    ticks = nice_ticks(ymax)
    plot_w, plot_h = WIDTH - left - right, height - top - bottom

    def x(t: float) -> float:
        return left + (t - lo) / (hi - lo) * plot_w

    def y(v: float) -> float:
        return top + plot_h - v / ticks[-1] * plot_h

    out = [f"<svg width='{WIDTH}' height='{height}' role='img'>"]
    for v in ticks:
        out.append(
            f"<line x1='{left}' x2='{left + plot_w}' y1='{y(v):.1f}' y2='{y(v):.1f}' "
            "stroke='#e5e5e5'/>"
        )
        out.append(f"<text x='{left - 6}' y='{y(v) + 4:.1f}' text-anchor='end'>{_num(v)}</text>")
    for i in sorted({round(k * (buckets - 1) / 4) for k in range(5)}):  # on bucket starts
        t = lo + i * step
        out.append(
            f"<text x='{x(t):.1f}' y='{height - 8}' text-anchor='middle'>{escape(label(t))}</text>"
        )
    for n, (name, pts) in enumerate(sorted(lines.items())):
        values = dict(pts)
        points = [(x(lo + i * step), y(values.get(lo + i * step, 0.0))) for i in range(buckets)]
        color = colors.get(name, "#888")
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
        out.append(f"<polyline fill='none' stroke='{color}' stroke-width='1.8' points='{path}'/>")
        if buckets <= 60:  # few points: mark them; a lone point has no line to show it
            out.extend(
                f"<circle cx='{px:.1f}' cy='{py:.1f}' r='3' fill='{color}'/>" for px, py in points
            )
        ly = top + 14 + 18 * n
        out.append(
            f"<rect x='{WIDTH - right + 14}' y='{ly - 9}' width='12' height='10' fill='{color}'/>"
        )
        out.append(f"<text x='{WIDTH - right + 32}' y='{ly}'>{escape(name[:22])}</text>")
    out.append("</svg>")
    return "".join(out)


def bar_chart(
    bars: list[tuple[str, list[float]]], series: tuple[str, ...], colors: tuple[str, ...]
) -> str:
    """Horizontal bars, one group per name, one bar per series, value written at the end."""
    left, right, top, bar_h, gap = 170, 90, 24, 12, 10
    group_h = bar_h * len(series) + gap
    height = top + group_h * len(bars) + 24
    ticks = nice_ticks(max((v for _, vals in bars for v in vals if v is not None), default=0))
    plot_w = WIDTH - left - right

    def x(v: float) -> float:
        return left + v / ticks[-1] * plot_w

    out = [f"<svg width='{WIDTH}' height='{height}' role='img'>"]
    for i, (name, color) in enumerate(zip(series, colors, strict=True)):
        out.append(
            f"<rect x='{left + 80 * i}' y='4' width='12' height='10' fill='{color}'/>"
            f"<text x='{left + 80 * i + 18}' y='13'>{escape(name)}</text>"
        )
    for v in ticks:
        out.append(
            f"<line x1='{x(v):.1f}' x2='{x(v):.1f}' y1='{top}' y2='{height - 20}' "
            "stroke='#e5e5e5'/>"
        )
        out.append(f"<text x='{x(v):.1f}' y='{height - 6}' text-anchor='middle'>{_num(v)}</text>")
    for g, (name, values) in enumerate(bars):
        gy = top + g * group_h
        out.append(
            f"<text x='{left - 8}' y='{gy + bar_h + 4}' text-anchor='end'>"
            f"{escape(name[:24])}</text>"
        )
        for i, (v, color) in enumerate(zip(values, colors, strict=True)):
            if v is None:
                continue
            by = gy + i * bar_h
            out.append(
                f"<rect x='{left}' y='{by}' width='{max(x(v) - left, 1):.1f}' "
                f"height='{bar_h - 2}' fill='{color}'/>"
            )
            out.append(f"<text x='{x(v) + 4:.1f}' y='{by + bar_h - 3}'>{_num(v)}</text>")
    out.append("</svg>")
    return "".join(out)

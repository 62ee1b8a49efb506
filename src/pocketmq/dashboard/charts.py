"""Line charts as inline SVG, drawn from (time, value) samples. No I/O here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 640
HEIGHT = 160
_PAD_LEFT = 64
_PAD = 12
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf")


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    points: Sequence[tuple[float, float]]  # (unix seconds, value)


def _label(value: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.1f}{unit}"
    return f"{value:.0f}" if value == int(value) else f"{value:.2f}"


def line_chart(title: str, series: Sequence[Series], unit: str = "") -> str:
    """An SVG line chart of every series over their common time span; a note when empty."""
    points = [p for s in series for p in s.points]
    head = (
        f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT + 24}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'
    )
    if len(points) < 2:
        return (
            f'{head}<text x="{_PAD_LEFT}" y="{HEIGHT // 2}">{escape(title)}: '
            "waiting for a second sample</text></svg>"
        )
    t0 = min(t for t, _ in points)
    t1 = max(t for t, _ in points)
    top = max(max(v for _, v in points), 1.0)
    span = max(t1 - t0, 1e-9)
    plot_w = WIDTH - _PAD_LEFT - _PAD
    plot_h = HEIGHT - 2 * _PAD

    def xy(t: float, v: float) -> str:
        x = _PAD_LEFT + (t - t0) / span * plot_w
        y = _PAD + plot_h - v / top * plot_h
        return f"{x:.1f},{y:.1f}"

    parts = [
        head,
        f'<text x="{_PAD_LEFT}" y="10" class="chart-title">{escape(title)}</text>',
        f'<text x="4" y="{_PAD + 8}">{_label(top)}{escape(unit)}</text>',
        f'<text x="4" y="{_PAD + plot_h}">0</text>',
        f'<line x1="{_PAD_LEFT}" y1="{_PAD + plot_h}" x2="{WIDTH - _PAD}" '
        f'y2="{_PAD + plot_h}" stroke="#999"/>',
    ]
    for i, s in enumerate(series):
        colour = _COLOURS[i % len(_COLOURS)]
        if s.points:
            path = " ".join(xy(t, v) for t, v in s.points)
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{path}"/>'
            )
        parts.append(
            f'<text x="{_PAD_LEFT + 150 * i}" y="{HEIGHT + 18}" fill="{colour}">'
            f"{escape(s.name)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)

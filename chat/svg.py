"""Server-rendered SVG for the session page (no chart library, no JavaScript).

``utilisation_chart`` draws a session's utilisation per assembled turn: the dynamic budget
used (the layout's estimate over it), one point per turn joined by a line, over the severity
bands of ``recall.layout.monitor`` (elevated above 70 %, warning above 85 %, critical above
95 %, overage above 100 %), each boundary drawn and labelled. A reading off the top (a zero
budget holding anything, or far over) is drawn at the top edge and says so. The page shows
the same numbers in a table beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from recall.layout.monitor import (
    CRITICAL_ABOVE_PCT,
    ELEVATED_ABOVE_PCT,
    OVERAGE_ABOVE_PCT,
    WARNING_ABOVE_PCT,
)

WIDTH = 720
HEIGHT = 300
LEFT = 48
RIGHT = 96  # room for the band labels
TOP = 16
BOTTOM = 36
TOP_PCT = 120.0  # the chart's ceiling; a reading above it is drawn on the edge
INK = "#1c2430"
MUTED = "#5b6778"
LINE = "#2459c8"
# (lower bound, upper bound, fill, label), bottom up.
BANDS: tuple[tuple[float, float, str, str], ...] = (
    (0.0, ELEVATED_ABOVE_PCT, "#f4f8f5", "normal"),
    (ELEVATED_ABOVE_PCT, WARNING_ABOVE_PCT, "#fbf7e6", "elevated"),
    (WARNING_ABOVE_PCT, CRITICAL_ABOVE_PCT, "#fdf0dd", "warning"),
    (CRITICAL_ABOVE_PCT, OVERAGE_ABOVE_PCT, "#fde4df", "critical"),
    (OVERAGE_ABOVE_PCT, TOP_PCT, "#f8d4cf", "overage"),
)
SEVERITY_COLOURS = {
    "normal": "#137a4b",
    "elevated": "#8a5a00",
    "warning": "#b5520f",
    "critical": "#b42318",
    "overage": "#7a1212",
}


@dataclass(frozen=True)
class Reading:
    """One assembled turn's budget status."""

    turn: int
    pct: float | None  # None: a zero budget holding anything (always overage)
    severity: str


def _y(pct: float) -> float:
    span = HEIGHT - TOP - BOTTOM
    return TOP + span * (1 - min(max(pct, 0.0), TOP_PCT) / TOP_PCT)


def utilisation_chart(readings: Sequence[Reading], *, dom_id: str = "utilisation") -> SafeString:
    """The readings, in turn order, as an accessible SVG."""
    span = WIDTH - LEFT - RIGHT
    parts: list[str] = []
    for low, high, fill, label in BANDS:
        top, bottom = _y(high), _y(low)
        parts.append(
            f'<rect x="{LEFT}" y="{top:.1f}" width="{span}" height="{bottom - top:.1f}"'
            f' fill="{fill}"/>'
        )
        parts.append(
            f'<text x="{LEFT + span + 6}" y="{(top + bottom) / 2 + 4:.1f}" fill="{MUTED}"'
            f' font-size="11">{escape(label)}</text>'
        )
    for boundary in (ELEVATED_ABOVE_PCT, WARNING_ABOVE_PCT, CRITICAL_ABOVE_PCT, OVERAGE_ABOVE_PCT):
        y = _y(boundary)
        parts.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + span}" y2="{y:.1f}" stroke="{MUTED}"'
            ' stroke-width="1" stroke-dasharray="4 3"/>'
        )
        parts.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" fill="{INK}" font-size="11"'
            f' text-anchor="end">{boundary:g}%</text>'
        )
    base = _y(0.0)
    parts.append(f'<text x="{LEFT - 6}" y="{base + 4:.1f}" fill="{INK}" font-size="11"'
                 ' text-anchor="end">0%</text>')  # fmt: skip
    count = len(readings)
    step = span / max(count, 1)
    points: list[tuple[float, float]] = []
    marks: list[str] = []
    for n, reading in enumerate(readings):
        x = LEFT + step * (n + 0.5)
        off_top = reading.pct is None or reading.pct > TOP_PCT
        y = _y(TOP_PCT if reading.pct is None else reading.pct)
        points.append((x, y))
        shown = "no budget left" if reading.pct is None else f"{reading.pct:.1f}%"
        note = " (off the chart)" if off_top else ""
        colour = SEVERITY_COLOURS.get(reading.severity, INK)
        marks.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="{colour}">'
            f"<title>Turn {reading.turn}: {escape(shown)}, {escape(reading.severity)}"
            f"{note}</title></circle>"
        )
        if count <= 24 or n % max(count // 12, 1) == 0:
            marks.append(
                f'<text x="{x:.1f}" y="{base + 16:.1f}" fill="{MUTED}" font-size="11"'
                f' text-anchor="middle">{reading.turn}</text>'
            )
    if len(points) > 1:  # under the points
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{LINE}" stroke-width="2"/>')
    parts += marks
    parts.append(
        f'<text x="{LEFT + span / 2:.1f}" y="{HEIGHT - 6}" fill="{INK}" font-size="12"'
        ' text-anchor="middle">turn</text>'
    )
    if readings:
        desc = "; ".join(
            f"turn {r.turn}: "
            + ("no budget left" if r.pct is None else f"{r.pct:.1f}%")
            + f" ({r.severity})"
            for r in readings
        )
    else:
        desc = "No turn has been assembled yet."
    return format_html(
        '<svg class="utilisation-chart" id="{id}" role="img" viewBox="0 0 {w} {h}" width="100%"'
        ' aria-labelledby="{id}-title {id}-desc" xmlns="http://www.w3.org/2000/svg"'
        ' font-family="system-ui, sans-serif" font-size="12">'
        '<title id="{id}-title">Utilisation of the dynamic budget per turn</title>'
        '<desc id="{id}-desc">{desc}</desc>{body}</svg>',
        id=dom_id,
        w=WIDTH,
        h=HEIGHT,
        desc=desc,
        body=mark_safe("".join(parts)),  # noqa: S308 - every value above is escaped
    )

"""Server-rendered SVG for the session page and the dashboard (no chart library, no
JavaScript).

``utilisation_chart`` draws a session's utilisation per assembled turn: the dynamic budget
used (the layout's estimate over it), one point per turn joined by a line, over the severity
bands of ``recall.layout.monitor`` (elevated above 70 %, warning above 85 %, critical above
95 %, overage above 100 %), each boundary drawn and labelled. A reading off the top (a zero
budget holding anything, or far over) is drawn at the top edge and says so. The page shows
the same numbers in a table beside it.

``outcomes_chart`` draws a workspace's compaction runs per day (the dashboard's panel): one
stacked bar a day, a segment per outcome (target met, target missed, time budget exhausted,
failed, still running), so that missed targets stand out; each bar says its counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date

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


# --- the dashboard's compaction panel -------------------------------------------------------------

OUTCOMES: tuple[tuple[str, str, str], ...] = (  # (outcome, words, colour), bottom up
    ("target_met", "target met", "#137a4b"),
    ("target_missed", "target missed", "#d08a00"),
    ("time_budget_exhausted", "time budget exhausted", "#b5520f"),
    ("failed", "failed", "#b42318"),
    ("pending", "still running", "#8a94a3"),
)
BARS_WIDTH = 560
BARS_HEIGHT = 170
BARS_TOP = 18
BARS_BOTTOM = 22


def outcomes_chart(
    counts: Mapping[date, Mapping[str, int]], days: Sequence[date], *, dom_id: str = "compaction"
) -> SafeString:
    """Runs per day by outcome, ``days`` in order (today last), scaled to the busiest day."""
    totals = [sum(counts.get(day, {}).values()) for day in days]
    peak = max([*totals, 1])
    slot = BARS_WIDTH / max(len(days), 1)
    plot = BARS_HEIGHT - BARS_TOP - BARS_BOTTOM
    base = BARS_TOP + plot
    parts = [f'<line x1="0" x2="{BARS_WIDTH}" y1="{base}" y2="{base}" stroke="#d5dbe3"/>']
    for n, day in enumerate(days):
        x = n * slot + slot * 0.15
        width = slot * 0.7
        top = float(base)
        words = []
        for outcome, label, colour in OUTCOMES:
            value = counts.get(day, {}).get(outcome, 0)
            if not value:
                continue
            height = plot * value / peak
            top -= height
            parts.append(
                f'<rect x="{x:.1f}" y="{top:.1f}" width="{width:.1f}" height="{height:.1f}"'
                f' fill="{colour}" data-outcome="{outcome}"/>'
            )
            words.append(f"{value} {label}")
        total = totals[n]
        title = f"{day:%a %b} {day.day}: " + (", ".join(words) if words else "no run")
        parts.append(f"<title>{escape(title)}</title>")
        centre = n * slot + slot / 2
        if total:
            parts.append(
                f'<text x="{centre:.1f}" y="{top - 4:.1f}" fill="{INK}" font-size="11"'
                f' text-anchor="middle" font-weight="600">{total}</text>'
            )
        parts.append(
            f'<text x="{centre:.1f}" y="{BARS_HEIGHT - 6}" fill="{MUTED}" font-size="11"'
            f' text-anchor="middle">{day.day}</text>'
        )
    overall = {outcome: sum(c.get(outcome, 0) for c in counts.values()) for outcome, *_ in OUTCOMES}
    desc = (
        ", ".join(f"{overall[o]} {label}" for o, label, _ in OUTCOMES if overall[o])
        or "No compaction run"
    ) + f" from {days[0]:%b} {days[0].day} to {days[-1]:%b} {days[-1].day}."
    return format_html(
        '<svg class="outcomes" id="{id}" role="img" viewBox="0 0 {w} {h}" width="100%"'
        ' aria-labelledby="{id}-title {id}-desc" xmlns="http://www.w3.org/2000/svg"'
        ' font-family="system-ui, sans-serif">'
        '<title id="{id}-title">Compaction runs per day by outcome</title>'
        '<desc id="{id}-desc">{desc}</desc>{body}</svg>',
        id=dom_id,
        w=BARS_WIDTH,
        h=BARS_HEIGHT,
        desc=desc,
        body=mark_safe("".join(parts)),  # noqa: S308 - every value above is escaped
    )

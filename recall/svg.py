"""Server-rendered SVG for the recall pages (no chart library, no JavaScript).

``budget_bar`` draws an envelope's ``budget``: one stacked bar of the tokens each segment kind
used against ``totalTokenBudget``, then one row per kind with its allocation, its reservation
(dashed marker) and its ceiling (solid marker), each labelled with numbers, and a legend. The
page shows the same numbers in a table next to it for screen readers.

``layout_bar`` draws the layout sandbox's context window split into fixed costs, history,
supporting context, query and free space, with the same accessible table beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from policies.labels import value_label
from recall.planner import SEGMENT_KINDS

KIND_COLOURS: dict[str, str] = {
    "system_policy": "#6d4bc3",
    "memory": "#2459c8",
    "retrieval": "#137a4b",
    "tool_result": "#b5520f",
}
WIDTH = 760
LEFT = 120  # room for the kind labels
RIGHT = 24
BAR_H = 18
ROW_H = 50
INK = "#1c2430"
MUTED = "#5b6778"
TRACK = "#eef1f5"
CAP = "#b42318"


def _n(value: int) -> str:
    return f"{value:,}"


def _text(x: float, y: float, content: str, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{escape(v)}"' for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}"{extra}>{escape(content)}</text>'


def _rect(x: float, y: float, w: float, h: float, fill: str, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{escape(v)}"' for k, v in attrs.items())
    return (
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{h:.1f}"'
        f' fill="{fill}"{extra}/>'
    )


def _line(x: float, y1: float, y2: float, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{escape(v)}"' for k, v in attrs.items())
    return f'<line x1="{x:.1f}" y1="{y1:.1f}" x2="{x:.1f}" y2="{y2:.1f}"{extra}/>'


def kind_summary(kind: str, alloc: Mapping[str, Any]) -> str:
    ceiling = alloc.get("ceiling")
    cap = f"ceiling {_n(ceiling)}" if ceiling is not None else "no ceiling"
    return (
        f"used {_n(alloc['used'])} · allocated {_n(alloc['allocated'])} · "
        f"reserved {_n(alloc['reserved'])} · {cap} · demand {_n(alloc['demand'])}"
    )


def budget_bar(
    budget: Mapping[str, Any], *, dom_id: str = "budget", width: int = WIDTH
) -> SafeString:
    """The budget allocation of one envelope as an accessible SVG, ``width`` user units wide.

    Draw it at about the width it is shown at (narrower side by side), so its text stays at
    its nominal size rather than being scaled down.
    """
    total = int(budget["totalTokenBudget"])
    used_total = int(budget["usedTokens"])
    per_kind: Mapping[str, Mapping[str, Any]] = budget["perKind"]
    kinds = [k for k in SEGMENT_KINDS if k in per_kind] + [
        k for k in per_kind if k not in SEGMENT_KINDS
    ]
    span = width - LEFT - RIGHT
    scale = span / total if total > 0 else 0.0

    def x_at(tokens: int) -> float:
        return LEFT + min(tokens * scale, span)

    parts: list[str] = []
    title = f"Token budget: {_n(used_total)} of {_n(total)} tokens used"
    pct = f" ({used_total * 100 / total:.0f}%)" if total else ""

    # The stacked total bar.
    y = 34
    summary = f"used {_n(used_total)} of {_n(total)} tokens{pct}"
    parts.append(_text(LEFT, 20, summary, font_weight="600", fill=INK))
    parts.append(_text(LEFT - 10, y + 13, "all kinds", text_anchor="end", fill=INK))
    parts.append(_rect(LEFT, y, span, BAR_H, TRACK, stroke="#c3cad5"))
    x = float(LEFT)
    for kind in kinds:
        segment = per_kind[kind]["used"] * scale
        if segment > 0:
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{segment:.1f}" height="{BAR_H}"'
                f' fill="{KIND_COLOURS.get(kind, MUTED)}">'
                f"<title>{escape(value_label(kind))}: {_n(per_kind[kind]['used'])} tokens used"
                "</title></rect>"
            )
            x += segment

    # One row per kind: allocation, use, reservation and ceiling.
    y = 76
    for kind in kinds:
        alloc = per_kind[kind]
        colour = KIND_COLOURS.get(kind, MUTED)
        # The kind in words, as every other place on the page names it.
        parts.append(_text(LEFT - 10, y + 13, value_label(kind), text_anchor="end", fill=INK))
        parts.append(_rect(LEFT, y, span, BAR_H, TRACK))
        parts.append(_rect(LEFT, y, x_at(alloc["allocated"]) - LEFT, BAR_H, colour, opacity=".28"))
        parts.append(_rect(LEFT, y, x_at(alloc["used"]) - LEFT, BAR_H, colour))
        if alloc["reserved"]:
            parts.append(
                _line(
                    x_at(alloc["reserved"]),
                    y - 4,
                    y + BAR_H + 4,
                    stroke=INK,
                    stroke_width="2",
                    stroke_dasharray="3 2",
                )
            )
        if alloc.get("ceiling") is not None:
            ceiling_x = x_at(alloc["ceiling"])
            parts.append(_line(ceiling_x, y - 4, y + BAR_H + 4, stroke=CAP, stroke_width="2.5"))
        summary = kind_summary(kind, alloc)
        parts.append(_text(LEFT, y + BAR_H + 16, summary, fill=MUTED, font_size="12"))
        y += ROW_H

    # Legend.
    y += 4
    lx = float(LEFT)
    legend = [
        ("swatch", INK, "used (colour of its kind)"),
        ("tint", INK, "allocated, unused"),
        ("dash", INK, "reserved (floor)"),
        ("cap", CAP, "ceiling"),
    ]
    for shape, colour, label in legend:
        room = 40 + len(label) * 7
        if lx > LEFT and lx + room > width:
            lx, y = float(LEFT), y + 20
        if shape == "swatch":
            parts.append(_rect(lx, y, 14, 12, "#2459c8"))
        elif shape == "tint":
            parts.append(_rect(lx, y, 14, 12, "#2459c8", opacity=".28"))
        elif shape == "dash":
            parts.append(
                _line(
                    lx + 7, y - 2, y + 14, stroke=colour, stroke_width="2", stroke_dasharray="3 2"
                )
            )
        else:
            parts.append(_line(lx + 7, y - 2, y + 14, stroke=colour, stroke_width="2.5"))
        parts.append(_text(lx + 20, y + 11, label, fill=INK, font_size="12"))
        lx += room
    height = y + 24
    desc = "; ".join(f"{value_label(kind)}: {kind_summary(kind, per_kind[kind])}" for kind in kinds)
    svg = format_html(
        '<svg class="budget-bar" id="{id}" role="img" viewBox="0 0 {w} {h}" width="100%"'
        ' aria-labelledby="{id}-title {id}-desc" xmlns="http://www.w3.org/2000/svg"'
        ' font-family="system-ui, sans-serif" font-size="13">'
        '<title id="{id}-title">{title}</title><desc id="{id}-desc">{desc}</desc>{body}</svg>',
        id=dom_id,
        w=width,
        h=height,
        title=title,
        desc=desc,
        body=mark_safe("".join(parts)),  # noqa: S308 - every value above is escaped
    )
    return svg


# --- the layout sandbox: the context window split into its parts --------------------------------

# (key, label, fill, text colour on the fill). "free" is drawn as the empty track.
LAYOUT_PARTS: tuple[tuple[str, str, str, str], ...] = (
    ("fixed", "Fixed costs", "#4a5568", "#fff"),
    ("history", "Current history", "#2459c8", "#fff"),
    ("prior_history", "Prior-session history", "#8fb0ea", INK),
    ("supporting", "Supporting context", "#137a4b", "#fff"),
    ("query", "Query & formatting", "#b5520f", "#fff"),
    ("free", "Free", TRACK, INK),
)
DYNAMIC_PARTS = ("history", "prior_history", "supporting", "query")
LAYOUT_WIDTH = 680
LAYOUT_BAR_H = 30
LAYOUT_PAD = 12
OVER = "#b42318"
ZOOM = "#e3e8f0"
CHAR_W = 7.2  # average width of a 12px label character, for "does the label fit" checks


def _segments(
    tokens: Mapping[str, int], keys: tuple[str, ...], x0: float, y: float, scale: float
) -> tuple[list[str], float]:
    """Adjacent segments for ``keys`` from ``x0``, each numbered when its label fits inside."""
    styles = {key: (label, fill, ink) for key, label, fill, ink in LAYOUT_PARTS}
    parts: list[str] = []
    x = x0
    for key in keys:
        value = tokens.get(key, 0)
        if value <= 0:
            continue
        label, fill, ink = styles[key]
        w = value * scale
        if key != "free":  # free space is the track showing through
            parts.append(
                f'<rect class="part part-{key}" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}"'
                f' height="{LAYOUT_BAR_H}" fill="{fill}" stroke="#fff" stroke-width="1">'
                f"<title>{escape(label)}: {_n(value)} tokens</title></rect>"
            )
        text = _n(value)
        if w >= len(text) * CHAR_W + 10:
            parts.append(
                _text(x + w / 2, y + 20, text, text_anchor="middle", fill=ink, font_size="12")
            )
        x += w
    return parts, x


def _axis(y: float, left: float, right: float, end_label: str) -> list[str]:
    return [
        _text(left, y, "0", fill=MUTED, font_size="12"),
        _text(right, y, end_label, text_anchor="end", fill=MUTED, font_size="12"),
    ]


def _overage(edge: float, y: float, label: str, over: int, right: float) -> list[str]:
    """The budget's edge as a red line, and how far past it the parts go."""
    return [
        _line(edge, y - 5, y + LAYOUT_BAR_H + 5, stroke=OVER, stroke_width="2.5"),
        _text(
            right,
            y + LAYOUT_BAR_H + 14,
            f"{label} · over by {_n(over)}",
            text_anchor="end",
            fill=OVER,
            font_weight="600",
            font_size="12",
        ),
    ]


def layout_bar(
    tokens: Mapping[str, int],
    *,
    context_window: int,
    dynamic_budget: int,
    supporting_budget: int,
    dom_id: str = "layout-bar",
    width: int = LAYOUT_WIDTH,
) -> SafeString:
    """The context window as two stacked bars and a legend.

    The first bar is the whole window: fixed costs, then what the prompt uses and what is
    free. The second zooms into the dynamic budget, which the fixed costs often dwarf, so the
    history / supporting / query split stays readable. ``tokens`` maps each ``LAYOUT_PARTS``
    key to its tokens. When the parts exceed a budget (an emergency overage) the bar is drawn
    to their total with the budget's edge marked in red: an overage is shown, never clipped.
    """
    fixed = tokens.get("fixed", 0)
    estimated = sum(tokens.get(key, 0) for key in DYNAMIC_PARTS)
    free = tokens.get("free", 0)
    left, span = float(LAYOUT_PAD), float(width - 2 * LAYOUT_PAD)
    right = left + span
    parts: list[str] = []
    head = f"{_n(context_window)}-token context window"
    # Of the whole window (the page's utilization figure is of the dynamic budget).
    summary = f"{_n(fixed + estimated)} of the window used · {_n(free)} free"
    parts.append(_text(left, 16, head, font_weight="600", fill=INK))
    parts.append(_text(right, 16, summary, text_anchor="end", fill=MUTED))

    # The whole window, and a light funnel from its dynamic slice down to the zoomed bar
    # (drawn first, so the axis labels sit on top of it).
    y1 = 26.0
    y2 = y1 + LAYOUT_BAR_H + 48
    total = max(context_window, fixed + estimated + free, 1)
    scale = span / total
    dyn_left = left + min(fixed, total) * scale
    dyn_right = left + min(fixed + max(dynamic_budget, estimated), total) * scale
    parts.append(
        f'<polygon points="{dyn_left:.1f},{y1 + LAYOUT_BAR_H + 1:.1f} '
        f"{dyn_right:.1f},{y1 + LAYOUT_BAR_H + 1:.1f} {right:.1f},{y2 - 18:.1f} "
        f'{left:.1f},{y2 - 18:.1f}" fill="{ZOOM}" opacity=".7"/>'
    )
    parts.append(_rect(left, y1, span, LAYOUT_BAR_H, TRACK, stroke="#c3cad5"))
    row, _ = _segments(tokens, ("fixed", *DYNAMIC_PARTS, "free"), left, y1, scale)
    parts += row
    if fixed + estimated > context_window:
        edge = left + context_window * scale
        over = fixed + estimated - context_window
        parts += _overage(edge, y1, f"window {_n(context_window)}", over, right)
        parts.append(_text(left, y1 + LAYOUT_BAR_H + 14, "0", fill=MUTED, font_size="12"))
    else:
        parts += _axis(y1 + LAYOUT_BAR_H + 14, left, right, _n(context_window))

    # The dynamic budget, zoomed in.
    zoom_label = f"Dynamic budget {_n(dynamic_budget)}, zoomed in"
    parts.append(_text(left, y2 - 5, zoom_label, font_weight="600", fill=INK, font_size="12"))
    supporting = f"supporting {_n(tokens.get('supporting', 0))} of its {_n(supporting_budget)}"
    parts.append(_text(right, y2 - 5, supporting, text_anchor="end", fill=MUTED, font_size="12"))
    dyn_total = max(dynamic_budget, estimated, 1)
    dyn_scale = span / dyn_total
    parts.append(_rect(left, y2, span, LAYOUT_BAR_H, TRACK, stroke="#c3cad5"))
    row, _ = _segments(tokens, (*DYNAMIC_PARTS, "free"), left, y2, dyn_scale)
    parts += row
    if estimated > dynamic_budget:
        edge = left + dynamic_budget * dyn_scale
        over = estimated - dynamic_budget
        parts += _overage(edge, y2, f"budget {_n(dynamic_budget)}", over, right)
        parts.append(_text(left, y2 + LAYOUT_BAR_H + 14, "0", fill=MUTED, font_size="12"))
    else:
        parts += _axis(y2 + LAYOUT_BAR_H + 14, left, right, _n(dynamic_budget))

    # Legend: three columns, each entry with its tokens.
    y = y2 + LAYOUT_BAR_H + 30
    column = span / 3
    for index, (key, label, fill, _ink) in enumerate(LAYOUT_PARTS):
        lx = left + (index % 3) * column
        ly = y + (index // 3) * 22
        stroke = {"stroke": "#c3cad5"} if key == "free" else {}
        parts.append(_rect(lx, ly, 14, 14, fill, **stroke))
        entry = f"{label} {_n(tokens.get(key, 0))}"
        parts.append(_text(lx + 20, ly + 12, entry, fill=INK, font_size="12"))
    height = y + 2 * 22 + 2
    desc = "; ".join(f"{label}: {_n(tokens.get(key, 0))} tokens" for key, label, *_ in LAYOUT_PARTS)
    desc += f"; dynamic budget {_n(dynamic_budget)}, supporting budget {_n(supporting_budget)}"
    return format_html(
        '<svg class="layout-bar" id="{id}" role="img" viewBox="0 0 {w} {h}" width="100%"'
        ' aria-labelledby="{id}-title {id}-desc" xmlns="http://www.w3.org/2000/svg"'
        ' font-family="system-ui, sans-serif" font-size="13">'
        '<title id="{id}-title">{title}</title><desc id="{id}-desc">{desc}</desc>{body}</svg>',
        id=dom_id,
        w=width,
        h=round(height),
        title=f"{head}: {summary}",
        desc=desc,
        body=mark_safe("".join(parts)),  # noqa: S308 - every value above is escaped
    )

"""Policy words for people (plain Python): axis labels, values and durations as an operator
reads them, the same on every page. The API names stay the contract; pages show these, with
the API name as a secondary hint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.algebra import VOCABULARIES
from policies.axes import AXES

AXIS_LABELS: dict[str, str] = {
    "memoryTypeAllowed": "Memory types allowed",
    "sourceKindAllowed": "Sources allowed",
    "confirmationStatusAllowed": "Confirmation statuses allowed",
    "consentPolicyAllowed": "Consent bases allowed",
    "confidenceMin": "Minimum confidence",
    "sensitivityCeiling": "Sensitivity ceiling",
    "maxAgeSeconds": "Maximum age",
    "similarityMin": "Minimum similarity to the query",
    "totalTokenBudget": "Total token budget",
    "perSegmentCeiling": "Token ceiling per segment kind",
    "perSegmentReservation": "Tokens reserved per segment kind",
    "forbiddenSegmentKinds": "Forbidden segment kinds",
    "pinned": "Pinned segment kinds",
    "dropOrder": "Drop order under budget pressure",
    "diagnosticsVerbosity": "Diagnostics detail",
}
assert set(AXIS_LABELS) == set(AXES), "every axis has a label"

# The recall funnel's counts, as the envelope names them, in its order (recall.envelope.FUNNEL).
COUNT_LABELS: dict[str, str] = {
    "candidates": "Candidates",
    "afterPolicy": "After policy",
    "afterRanking": "After ranking",
    "afterBudgetAllocation": "After budget",
}

# Terms of the envelope and the trail, in a sentence each (pages show them as hints).
TERM_HINTS: dict[str, str] = {
    "prefixFingerprint": "A hash of the pinned entries and the effective policy and budget: "
    "while it stays the same, a model provider's prompt cache for that prefix can be reused.",
    "digest": "A hash of exactly what entered the context (each entry's and truncated ref's "
    "id and content hash, in order): equal digests mean identical contexts.",
    "reused": "Whether this recall's prefix fingerprint equals the previous recall's for the "
    "same actor, workload and environment.",
    "effectivePolicyHash": "A hash of the whole effective policy: equal hashes, equal rules.",
    "effectiveBudgetHash": "A hash of the budget part of the effective policy alone.",
    "truncatedRef": "A memory sent as its id and metadata only, without its content, because "
    "the budget had no room for it.",
    "queryHash": "A salted hash of the query text: “Run again now” checks a pasted query "
    "against it, without the trail keeping the query.",
}

# Largest first: what a duration input offers and how a duration is spelled out.
DURATION_UNITS: tuple[tuple[str, int], ...] = (
    ("day", 86_400),
    ("hour", 3_600),
    ("minute", 60),
    ("second", 1),
)

# Names beside the axes that pages show as if they were one (the floor's relaxable list).
OTHER_LABELS: dict[str, str] = {"relaxableAxes": "Relaxable axes"}

# Where an axis's registry description speaks the API's language (seconds, null), the words a
# page shows instead.
AXIS_HINTS: dict[str, str] = {
    "maxAgeSeconds": "Oldest a recalled memory may be; empty means no limit.",
    "similarityMin": "Lowest cosine similarity (0 to 1) between a memory and the query for the"
    " memory to be recalled; empty means no floor. It depends on each query, so it is checked"
    " when ranking.",
}


def axis_label(name: str) -> str:
    """``confidenceMin`` → "Minimum confidence"; an unknown name is returned as it is."""
    return AXIS_LABELS.get(name) or OTHER_LABELS.get(name, name)


def axis_hint(name: str) -> str:
    """What an axis means, in a page's words."""
    axis = AXES.get(name)
    return AXIS_HINTS.get(name) or (axis.description if axis is not None else "")


def value_label(value: Any) -> str:
    """A vocabulary value as words: ``legitimate_interest`` → "legitimate interest"."""
    return str(value).replace("_", " ")


def duration_label(seconds: Any) -> str:
    """Seconds as the largest whole unit(s): 2592000 → "30 days", 5400 → "1 hour 30 minutes";
    None → "no limit"."""
    if seconds is None:
        return "no limit"
    remaining = int(seconds)
    if remaining == 0:
        return "0 seconds"
    parts = []
    for unit, size in DURATION_UNITS:
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count} {unit}{'' if count == 1 else 's'}")
        if len(parts) == 2:
            break
    return " ".join(parts)


def query_dependent(similarity_min: Any) -> str:
    """What a page without a query (the memory browser, the impact preview) says of a
    similarity floor, which depends on each query: "" when there is none."""
    if similarity_min is None:
        return ""
    return f"depends on each query: similarity floor {axis_value('similarityMin', similarity_min)}"


def axis_rows(document: Any) -> list[tuple[str, str, str]]:
    """``(API name, label, value in words)`` per axis of a partial document (an override), in
    the registry's order; anything but a mapping has none."""
    if not isinstance(document, Mapping):
        return []
    return [
        (name, axis_label(name), axis_value(name, document[name]))
        for name in AXES
        if name in document
    ]


def _in_vocabulary_order(vocabulary: str | None, items: Any) -> list[Any]:
    """Labels in their vocabulary's order, as the forms list them (unknown ones last)."""
    known = VOCABULARIES.get(vocabulary or "", ())
    return sorted(items, key=lambda v: (known.index(v) if v in known else len(known), str(v)))


def axis_value(name: str, value: Any) -> str:
    """An axis value as a page shows it, the same everywhere."""
    axis = AXES.get(name)
    if axis is None:
        if name in OTHER_LABELS and isinstance(value, (list, tuple)):  # a list of axis names
            return ", ".join(axis_label(v) for v in value) or "none"
        return "—" if value is None else str(value)
    if axis.kind == "max_age":
        return duration_label(value)
    if axis.kind == "optional_min":
        return "no floor" if value is None else f"{value:g}"
    if value is None:
        return "—"
    if isinstance(value, Mapping):
        if not value:
            return "none"
        keys = _in_vocabulary_order(axis.vocabulary, value)
        return ", ".join(f"{value_label(k)}: {value[k]:,}" for k in keys)
    if isinstance(value, (list, tuple)):
        if not value:
            return "none"
        if axis.kind == "ordered_list":  # the order is the value
            return " → ".join(value_label(v) for v in value)
        return ", ".join(value_label(v) for v in _in_vocabulary_order(axis.vocabulary, value))
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:g}"
    return value_label(value)

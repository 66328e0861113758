"""Policy words for people (plain Python): axis labels, values and durations as an operator
reads them, the same on every page. The API names stay the contract; pages show these, with
the API name as a secondary hint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.algebra import AXES

AXIS_LABELS: dict[str, str] = {
    "memoryTypeAllowed": "Memory types allowed",
    "sourceKindAllowed": "Sources allowed",
    "confirmationStatusAllowed": "Confirmation statuses allowed",
    "consentPolicyAllowed": "Consent bases allowed",
    "confidenceMin": "Minimum confidence",
    "sensitivityCeiling": "Sensitivity ceiling",
    "maxAgeSeconds": "Maximum age",
    "totalTokenBudget": "Total token budget",
    "perSegmentCeiling": "Token ceiling per segment kind",
    "perSegmentReservation": "Tokens reserved per segment kind",
    "forbiddenSegmentKinds": "Forbidden segment kinds",
    "pinned": "Pinned segment kinds",
    "dropOrder": "Drop order under budget pressure",
    "diagnosticsVerbosity": "Diagnostics detail",
}
assert set(AXIS_LABELS) == set(AXES), "every axis has a label"

# The recall funnel's counts, as the envelope names them.
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
}

_UNITS = (("day", 86_400), ("hour", 3_600), ("minute", 60), ("second", 1))


def axis_label(name: str) -> str:
    """``confidenceMin`` → "Minimum confidence"; an unknown name is returned as it is."""
    return AXIS_LABELS.get(name, name)


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
    for unit, size in _UNITS:
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count} {unit}{'' if count == 1 else 's'}")
        if len(parts) == 2:
            break
    return " ".join(parts)


def axis_value(name: str, value: Any) -> str:
    """An axis value as a page shows it, the same everywhere."""
    axis = AXES.get(name)
    if axis is None:
        return "—" if value is None else str(value)
    if axis.kind == "max_age":
        return duration_label(value)
    if value is None:
        return "—"
    if isinstance(value, Mapping):
        if not value:
            return "none"
        return ", ".join(f"{value_label(k)}: {v:,}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        if not value:
            return "none"
        joiner = " → " if axis.kind == "ordered_list" else ", "
        return joiner.join(value_label(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:g}"
    return value_label(value)

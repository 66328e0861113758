"""The policy axes: the registry every other part is driven by (plain Python).

Each axis has a name (the API's), a group (recall or budget), a kind (how it is written,
narrowed and shown) and, for labelled axes, its vocabulary. ``PolicyDocument`` is a complete
document: one key per axis, in registry order. An axis of an *optional* kind may be left out
of a stored floor: absent is null, no bound (so floors saved before the axis existed keep
working, and keep their hashes). ``policies.algebra`` narrows, overrides and
hashes documents; ``policies.axis_fields`` turns an axis into form inputs; the recall
engine's SQL checks the recall axes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict, TypeGuard


@dataclass(frozen=True)
class Axis:
    name: str
    group: str
    kind: str
    vocabulary: str | None
    description: str

    @property
    def optional(self) -> bool:
        """Absent from a floor means null (no bound); left out of the canonical form when null."""
        return self.kind in OPTIONAL_KINDS


# ``optional_min``: a number 0..1 or null (no floor); narrowing raises it.
OPTIONAL_KINDS = frozenset({"optional_min"})

_AXIS_LIST: tuple[Axis, ...] = (
    Axis(
        "memoryTypeAllowed", "recall", "set", "memoryType", "Memory types that recall may return."
    ),
    Axis(
        "sourceKindAllowed",
        "recall",
        "set",
        "sourceKind",
        "Sources a recalled memory may come from.",
    ),
    Axis(
        "confirmationStatusAllowed",
        "recall",
        "set",
        "confirmationStatus",
        "Confirmation statuses a recalled memory may have.",
    ),
    Axis(
        "consentPolicyAllowed",
        "recall",
        "set",
        "consentPolicy",
        "Consent bases under which a memory may be recalled.",
    ),
    Axis(
        "confidenceMin",
        "recall",
        "min_number",
        None,
        "Lowest confidence (0 to 1) an inferred or observed memory may have to be recalled;"
        " other confirmation statuses are not held to it.",
    ),
    Axis(
        "sensitivityCeiling",
        "recall",
        "ordered_max",
        "sensitivity",
        "Most sensitive level a recalled memory may carry.",
    ),
    Axis(
        "maxAgeSeconds",
        "recall",
        "max_age",
        None,
        "Oldest a recalled memory may be, in seconds; null means no limit.",
    ),
    Axis(
        "similarityMin",
        "recall",
        "optional_min",
        None,
        "Lowest cosine similarity (0 to 1) to the query a recalled memory may have; null or"
        " absent means no floor. Checked when ranking, since it depends on the query.",
    ),
    Axis(
        "totalTokenBudget",
        "budget",
        "max_int",
        None,
        "Total tokens the assembled context may use.",
    ),
    Axis(
        "perSegmentCeiling",
        "budget",
        "ceiling_map",
        "segmentKind",
        "Most tokens each segment kind may use; a kind left out has no cap.",
    ),
    Axis(
        "perSegmentReservation",
        "budget",
        "reservation_map",
        "segmentKind",
        "Tokens set aside for each segment kind; a kind left out reserves none.",
    ),
    Axis(
        "forbiddenSegmentKinds",
        "budget",
        "superset",
        "segmentKind",
        "Segment kinds never placed in the context.",
    ),
    Axis(
        "pinned",
        "budget",
        "superset",
        "segmentKind",
        "Segment kinds never dropped when the budget is tight.",
    ),
    Axis(
        "dropOrder",
        "budget",
        "ordered_list",
        "segmentKind",
        "Order in which segment kinds are trimmed when over budget.",
    ),
    Axis(
        "diagnosticsVerbosity",
        "budget",
        "ordered_max",
        "diagnosticsVerbosity",
        "How much budget-planning detail is reported: none, summary or full.",
    ),
)

AXES: dict[str, Axis] = {axis.name: axis for axis in _AXIS_LIST}
RECALL_AXES: tuple[str, ...] = tuple(a.name for a in _AXIS_LIST if a.group == "recall")
BUDGET_AXES: tuple[str, ...] = tuple(a.name for a in _AXIS_LIST if a.group == "budget")


class PolicyDocument(TypedDict):
    """A complete policy (a floor, an effective policy) in normalized form: every axis, in
    registry order. A workload policy or an override may leave axes out: a plain dict."""

    memoryTypeAllowed: list[str]
    sourceKindAllowed: list[str]
    confirmationStatusAllowed: list[str]
    consentPolicyAllowed: list[str]
    confidenceMin: float
    sensitivityCeiling: str
    maxAgeSeconds: int | None
    similarityMin: float | None
    totalTokenBudget: int
    perSegmentCeiling: dict[str, int]
    perSegmentReservation: dict[str, int]
    forbiddenSegmentKinds: list[str]
    pinned: list[str]
    dropOrder: list[str]
    diagnosticsVerbosity: str


assert list(PolicyDocument.__annotations__) == list(AXES), "one key per axis, in registry order"


def policy_copy(policy: PolicyDocument) -> PolicyDocument:
    """A copy that shares nothing mutable with ``policy``: its values are scalars, lists of
    strings or dicts of strings to integers, so copying each container is a deep copy (a
    tenth of ``copy.deepcopy``'s time, on every recall)."""
    copied = {k: v.copy() if isinstance(v, list | dict) else v for k, v in policy.items()}
    return copied  # type: ignore[return-value]


def is_complete(doc: Mapping[str, object]) -> TypeGuard[PolicyDocument]:
    """Every axis and nothing else, in registry order (the values as the normalizers give)."""
    return list(doc) == list(AXES)

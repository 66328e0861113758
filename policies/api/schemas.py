"""JSON Schemas of policy documents, built from the axis registry, for the OpenAPI schema.

The policy algebra validates every document; these schemas state the same per-axis rules
(types, vocabularies, bounds, no unknown axis) so a client, or the fuzzer, can read them.
What no schema can state stays the algebra's: a budget the planner cannot honour and a
workload policy wider than the floor, each a 422 (:data:`BUDGET_NOT_HONOURABLE_RESPONSE`).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse

from policies.algebra import MAX_AGE_SECONDS, MAX_TOKENS, RELAXABLE_KEY
from policies.axes import AXES, Axis
from policies.services import COMMENT_MAX
from policies.vocabulary import SEGMENT_KINDS, VOCABULARIES
from portal.api.errors import ErrorSerializer
from portal.api.versioning import BASE_VERSION_SCHEMA

COMMENT_SCHEMA = {
    "type": "string",
    "maxLength": COMMENT_MAX,
    "nullable": True,
    "description": "Change comment.",
}
# The floor's comment is required (``policies.services.floor_change_comment``).
FLOOR_COMMENT_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": COMMENT_MAX,
    "description": "Change comment: required, why the floor changes (blank is refused with "
    "400 INVALID_REQUEST naming `comment`).",
}


BUDGET_NOT_HONOURABLE = (
    "BUDGET_NOT_HONOURABLE: the planner cannot honour the budget (reservations past "
    "`totalTokenBudget`, a reservation above its ceiling, a kind both pinned and forbidden); "
    "`details.fields` names the axes"
)
# For the operations that take a budget (a floor, an override): the body is well formed.
BUDGET_NOT_HONOURABLE_RESPONSE = OpenApiResponse(
    ErrorSerializer, description=BUDGET_NOT_HONOURABLE + "; nothing was saved or run."
)


def _labels(axis: Axis) -> dict[str, Any]:
    return {"type": "string", "enum": list(VOCABULARIES[axis.vocabulary or ""])}


def axis_schema(axis: Axis) -> dict[str, Any]:
    tokens = {"type": "integer", "minimum": 0, "maximum": MAX_TOKENS}
    kinds: dict[str, dict[str, Any]] = {
        "set": {"type": "array", "items": _labels(axis)} if axis.vocabulary else {},
        "superset": {"type": "array", "items": _labels(axis)} if axis.vocabulary else {},
        "ordered_list": {"type": "array", "items": _labels(axis), "uniqueItems": True}
        if axis.vocabulary
        else {},
        "min_number": {"type": "number", "minimum": 0, "maximum": 1},
        "optional_min": {"type": "number", "minimum": 0, "maximum": 1, "nullable": True},
        "ordered_max": _labels(axis) if axis.vocabulary else {},
        "max_age": {"type": "integer", "minimum": 1, "maximum": MAX_AGE_SECONDS, "nullable": True},
        "max_int": {"type": "integer", "minimum": 1, "maximum": MAX_TOKENS},
        "ceiling_map": {
            "type": "object",
            "properties": {kind: tokens for kind in SEGMENT_KINDS},
            "additionalProperties": False,
        },
    }
    kinds["reservation_map"] = kinds["ceiling_map"]
    return {**kinds[axis.kind], "description": axis.description}


def policy_axes_schema(*, every_axis: bool) -> dict[str, Any]:
    """The axes as an object: all required but the optional ones (a floor), or any subset (a
    workload, an override)."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: axis_schema(axis) for name, axis in AXES.items()},
        "additionalProperties": False,
    }
    if every_axis:
        schema["required"] = [name for name, axis in AXES.items() if not axis.optional]
    return schema


def policy_save_schema(*, floor: bool) -> dict[str, Any]:
    """A save's body: the flat document with ``comment`` (and ``relaxableAxes`` for the
    floor), or GET's envelope ``{"policy": {...}, ...}`` sent back."""
    axes = policy_axes_schema(every_axis=floor)
    comment = FLOOR_COMMENT_SCHEMA if floor else COMMENT_SCHEMA
    extra: dict[str, Any] = {"comment": comment, "baseVersion": BASE_VERSION_SCHEMA}
    if floor:
        extra[RELAXABLE_KEY] = {
            "type": "array",
            "items": {"type": "string", "enum": list(AXES)},
            "description": "Axes a recall request may override.",
        }
    flat = {**axes, "properties": {**axes["properties"], **extra}}
    required = ["comment"] if floor else []
    if floor:
        flat["required"] = [*flat.get("required", []), *required]
    # GET's read-only keys may come back with the envelope; they are ignored. (A workload's
    # envelope may also carry its workloadId and environment, which must then be the URL's.)
    read_only = ["version", "author", "createdAt"]
    envelope = {
        "type": "object",
        "properties": {
            "policy": axes,
            **extra,
            **{key: {"description": "Read-only; ignored."} for key in read_only},
        },
        "required": ["policy", *required],
        "additionalProperties": False,
    }
    return {"oneOf": [flat, envelope]}

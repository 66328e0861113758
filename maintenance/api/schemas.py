"""The JSON Schema of a lifecycle settings document, built from the settings registry.

``maintenance.lifecycle.normalize_settings`` checks every document; this states the same
per-key rules for the OpenAPI schema. That the promotion weights add up to 1 is the one rule
it cannot state (a 422 PROMOTION_WEIGHTS_UNBALANCED naming promotionWeights).
"""

from __future__ import annotations

from typing import Any

from maintenance.lifecycle import SCHEDULE_MODES, SETTINGS, SWEEPS, WEIGHT_NAMES, Setting
from policies.api.schemas import COMMENT_SCHEMA


def setting_schema(setting: Setting) -> dict[str, Any]:
    schema: dict[str, Any]
    if setting.kind in ("number", "integer"):
        schema = {"type": setting.kind}
        if setting.minimum is not None:
            schema["minimum"] = setting.minimum
            if setting.exclusive_minimum:
                schema["exclusiveMinimum"] = True
        if setting.maximum is not None:
            schema["maximum"] = setting.maximum
    elif setting.kind == "bool":
        schema = {"type": "boolean"}
    elif setting.kind == "weights":
        schema = {
            "type": "object",
            "properties": {
                name: {"type": "number", "minimum": 0, "maximum": 1} for name in WEIGHT_NAMES
            },
            "required": list(WEIGHT_NAMES),
            "additionalProperties": False,
        }
    else:  # schedule
        schema = {
            "type": "object",
            "properties": {
                sweep: {"type": "string", "enum": list(SCHEDULE_MODES)} for sweep in SWEEPS
            },
            "additionalProperties": False,
        }
    return {**schema, "description": setting.help}


def lifecycle_settings_schema() -> dict[str, Any]:
    """A PUT's or PATCH's body: the settings with an optional ``comment``, or GET's envelope
    ``{"settings": {...}, "comment": ...}`` sent back. Missing keys: defaults (PUT), the
    current values (PATCH)."""
    settings: dict[str, Any] = {
        "type": "object",
        "properties": {setting.name: setting_schema(setting) for setting in SETTINGS},
        "additionalProperties": False,
    }
    flat = {**settings, "properties": {**settings["properties"], "comment": COMMENT_SCHEMA}}
    envelope = {
        "type": "object",
        "properties": {
            "settings": settings,
            "comment": COMMENT_SCHEMA,
            # GET's read-only keys may come back with the envelope; they are ignored.
            **{
                key: {"description": "Read-only; ignored."}
                for key in ("version", "author", "createdAt")
            },
        },
        "required": ["settings"],
        "additionalProperties": False,
    }
    return {"oneOf": [flat, envelope]}

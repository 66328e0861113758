"""The JSON Schema of a ``memory:`` layout configuration, read off the parser's own tables.

``recall.layout.config`` parses every configuration with a checker per key; mapping each checker to
its schema keeps the OpenAPI schema from restating (and drifting from) those rules. YAML text
is a string to JSON Schema: what it must hold is checked once it is parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from recall.layout import config
from recall.layout.vocabulary import KNOWN_SECTIONS, MAX_COUNT

_COUNT = {"type": "integer", "minimum": 0, "maximum": MAX_COUNT}
_CHECKERS: dict[Any, dict[str, Any]] = {
    config.check_bool: {"type": "boolean"},
    config.check_count: _COUNT,
    config.check_ratio: {"type": "number", "minimum": 0, "maximum": 1},
    config.check_text: {"type": "string", "pattern": r"\S"},
}
_NESTED: dict[Any, dict[str, Any]] = {
    config.parse_section_priority: {
        "type": "array",
        "items": {"type": "string", "enum": list(KNOWN_SECTIONS)},
        "uniqueItems": True,
    },
    config.parse_max_items: {
        "type": "object",
        "properties": {name: {**_COUNT, "nullable": True} for name in KNOWN_SECTIONS},
        "additionalProperties": False,
        "nullable": True,
        "description": "Items per section (null: uncapped), over the defaults.",
    },
}


def _no_effect(section: str, key: str, schema: dict[str, Any], stored: bool) -> dict[str, Any]:
    """A key nothing reads yet (``config.NO_EFFECT``) takes its default only; so does, in a
    workload's stored configuration, a key no session reads (``config.SESSION_NO_EFFECT``)."""
    reason = config.NO_EFFECT.get(f"{section}.{key}")
    if reason is None and stored:
        reason = config.SESSION_NO_EFFECT.get(f"{section}.{key}")
    if reason is None:
        return schema
    default = getattr(getattr(config.LayoutConfig(), section), key)
    return {**schema, "enum": [default], "description": f"{reason[0].upper()}{reason[1:]}."}


def _section(
    scalars: Mapping[str, Any],
    nested: Mapping[str, Any] | None = None,
    *,
    name: str = "",
    stored: bool = False,
) -> dict[str, Any]:
    properties = {
        key: _no_effect(name, key, _CHECKERS[check], stored) for key, check in scalars.items()
    }
    properties.update({key: _NESTED[parse] for key, parse in (nested or {}).items()})
    return {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        "nullable": True,
    }


def memory_config_schema(*, services: list[str] | None = None) -> dict[str, Any]:
    """The ``memory:`` section: any subset of its keys (the rest take the seed's defaults).
    ``services``: the names a saved ``compaction.llm_service`` may take; given, the schema is
    a workload's stored configuration's (``SESSION_NO_EFFECT`` keys at their default)."""
    stored = services is not None
    compaction = _section(config.COMPACTION_SCALARS, name="compaction", stored=stored)
    if services is not None:
        compaction["properties"]["llm_service"] = {
            "type": "string",
            "enum": services,
            "description": "A compaction service of COMPACTION_SERVICES.",
        }
    sections = {
        "supporting_context": _section(
            config.SUPPORTING_SCALARS,
            config.SUPPORTING_NESTED,
            name="supporting_context",
            stored=stored,
        ),
        "priming": _section(config.PRIMING_SCALARS, name="priming", stored=stored),
        "compaction": compaction,
    }
    schema = _section(config.MEMORY_SCALARS, stored=stored)
    schema["properties"].update(sections)
    assert set(schema["properties"]) == {*config.MEMORY_SCALARS, *config.MEMORY_NESTED}
    return schema


def layout_config_schema(
    *, extra: Mapping[str, Any] | None = None, services: list[str] | None = None
) -> dict[str, Any]:
    """A configuration as an object, with or without its ``memory`` root (plus ``extra``
    keys beside it), or as YAML text."""
    memory = memory_config_schema(services=services)
    bare = {**memory, "properties": {**memory["properties"], **(extra or {})}}
    del bare["nullable"]  # null stands for "the defaults" under the root alone
    rooted = {
        "type": "object",
        "properties": {"memory": memory, **(extra or {})},
        "required": ["memory"],
        "additionalProperties": False,
    }
    return {"oneOf": [bare, rooted]}


YAML_TEXT = {"type": "string", "description": "The configuration as YAML text."}


def layout_config_field_schema(*, services: list[str] | None = None) -> dict[str, Any]:
    """A ``config`` value: the configuration as an object or as YAML text."""
    return {"oneOf": [*layout_config_schema(services=services)["oneOf"], YAML_TEXT]}


def layout_config_save_schema(
    *, comment: dict[str, Any], base_version: dict[str, Any], read_only: list[str]
) -> dict[str, Any]:
    """A save's body: the configuration itself (with ``comment`` and ``baseVersion``), or
    ``{"config": <object or YAML text>, ...}``, GET's response included. A save names one of
    the configured compaction services (``COMPACTION_SERVICES``)."""
    extra = {"comment": comment, "baseVersion": base_version}
    services = sorted(settings.COMPACTION_SERVICES)
    wrapped = {
        "type": "object",
        "properties": {
            "config": layout_config_field_schema(services=services),
            **extra,
            **{key: {"description": "Read-only; ignored."} for key in sorted(read_only)},
        },
        "required": ["config"],
        "additionalProperties": False,
    }
    return {"oneOf": [*layout_config_schema(extra=extra, services=services)["oneOf"], wrapped]}

"""Strict request objects for the whole API: a key the endpoint does not know is an error that
names the key meant (a typo must not quietly drop data), reported with every other error.

One home for the rule. The layout planner's serializers add their vocabulary's earlier names
(``recall.api.layout_serializers``); every other endpoint suggests the closest spelling.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from rest_framework import serializers
from rest_framework.exceptions import ValidationError


class Suggestion(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def legacy(self) -> bool: ...


@dataclass(frozen=True)
class ClosestName:
    name: str
    legacy: bool = False


def closest_name(name: object, known: Iterable[str]) -> Suggestion | None:
    """The known name closest in spelling to ``name`` (``difflib``), if one is close enough."""
    if not isinstance(name, str):
        return None
    close = difflib.get_close_matches(name, list(known), n=1)
    return ClosestName(close[0]) if close else None


Suggest = Callable[[object, Iterable[str]], Suggestion | None]


def unknown_name_message(
    name: Any, known: Iterable[str], what: str = "field", suggest: Suggest = closest_name
) -> str:
    known = list(known)
    suggestion = suggest(name, known)
    if suggestion is None:
        return f"Unknown {what}; expected one of: {', '.join(known)}."
    if suggestion.legacy:
        return f"Unknown {what}; use {suggestion.name!r} ({name!r} is an earlier name)."
    return f"Unknown {what}; did you mean {suggestion.name!r}?"


def json_type(value: Any) -> str:
    """What a JSON value is, in JSON's words, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, Mapping) else type(value).__name__


class StrictListSerializer(serializers.ListSerializer):
    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, list):
            raise ValidationError([f"Expected a list, got {json_type(data)}."])
        try:
            return super().to_internal_value(data)
        except ValidationError as exc:
            # DRF reports {index: errors}; as a list they flatten to ``history[2].role``.
            if isinstance(exc.detail, dict):
                detail: dict[Any, Any] = exc.detail
                raise ValidationError([detail.get(i, {}) for i in range(len(data))]) from exc
            raise


class StrictSerializer(serializers.Serializer):
    """An object whose unknown keys are reported, each with the name it probably meant,
    together with every other error."""

    object_name = "an object"
    # How an unknown key's intended name is found (a subclass may know earlier names).
    suggest: Suggest = staticmethod(closest_name)

    class Meta:
        list_serializer_class = StrictListSerializer

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise ValidationError([f"Expected {self.object_name}, got {json_type(data)}."])
        errors: dict[str, Any] = {
            str(key): [unknown_name_message(key, self.fields, suggest=self.suggest)]
            for key in data
            if key not in self.fields
        }
        try:
            value = super().to_internal_value({k: v for k, v in data.items() if k in self.fields})
        except ValidationError as exc:
            errors = {**exc.detail, **errors}  # type: ignore[dict-item]
        if errors:
            raise ValidationError(errors)
        return value

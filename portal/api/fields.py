"""Strict DRF fields: a value of the wrong JSON type is an error, never quietly converted.

DRF's own fields read the string "5" as 5, 12 as "12", ``true`` as 1.0 and 5 as a UUID; an API
whose errors name the offending field should refuse those instead.
"""

from __future__ import annotations

import math
from typing import Any

from rest_framework import serializers


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer: no strings, no 12.0, no booleans."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return data


class StrictFloatField(serializers.FloatField):
    """A finite JSON number: no strings, no booleans."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        try:
            value = float(data)
        except OverflowError:
            self.fail("invalid")
        if not math.isfinite(value):
            self.fail("invalid")
        return value


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictCharField(serializers.CharField):
    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictChoiceField(serializers.ChoiceField):
    def __init__(self, choices: Any, **kwargs: Any) -> None:
        super().__init__(choices, **kwargs)
        listed = ", ".join(str(choice) for choice in self.choices)
        self.error_messages["invalid_choice"] = f'"{{input}}" is not one of: {listed}.'

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)


class StrictUUIDField(serializers.UUIDField):
    """A UUID string; DRF would otherwise read the integer 5 as a UUID."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid", value=data)
        return super().to_internal_value(data)


class StrictRegexField(StrictCharField, serializers.RegexField):
    pass

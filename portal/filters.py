"""Filters that check a query parameter the way the database will read it.

- ``IdFilter``: an id is a whole number that fits a bigint, where ``NumberFilter`` takes any
  decimal (``1.5``, ``1e308``).
- ``UtcDateTimeFilter``: an ISO 8601 time, handed to the database in UTC. Python reads
  offsets up to ±23:59 that PostgreSQL refuses (past ±15:59): without this, ``...-23:12`` was
  a 500; a time that leaves the calendar once in UTC is a 400.
- ``ChoiceFilter``: a value outside the choices is refused naming the choices, as the API's
  serializers do (``portal.api.fields.StrictChoiceField``), where Django says only "Select a
  valid choice"; its blank choice reads "Any".
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from django import forms
from django_filters.fields import ChoiceField, IsoDateTimeField

BIGINT_MAX = 2**63 - 1


class IdFilter(django_filters.NumberFilter):
    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", BIGINT_MAX)
        super().__init__(*args, **kwargs)


class UtcIsoDateTimeField(IsoDateTimeField):
    def to_python(self, value: Any) -> datetime | None:
        parsed = super().to_python(value)
        if parsed is None:
            return None
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            raise forms.ValidationError("Not a time the calendar holds in UTC.") from None


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


class ListedChoiceField(ChoiceField):
    def validate(self, value: Any) -> None:
        try:
            super().validate(value)
        except forms.ValidationError as exc:
            if exc.code != "invalid_choice":
                raise
            listed = ", ".join(str(key) for key, _ in self.choices if key != "")
            raise forms.ValidationError(
                f'"{value}" is not one of: {listed}.', code="invalid_choice"
            ) from None


class ChoiceFilter(django_filters.ChoiceFilter):
    """A choice filter whose blank choice reads "Any" (Django's is "---------")."""

    field_class = ListedChoiceField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("empty_label", "Any")
        super().__init__(*args, **kwargs)

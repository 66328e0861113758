"""Shared pieces of the API views: the caller, and reading JSON bodies strictly."""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request
from rest_framework.views import APIView

from portal.access import Caller, caller_of
from portal.api.pagination import Pagination
from portal.api.strict import unknown_name_message
from portal.errors import ValidationFailed
from portal.schema import ApiAutoSchema

# The ?workspace= parameter of endpoints whose path names no workspace (SPEC section 10).
WORKSPACE_PARAM = OpenApiParameter(
    "workspace", str, description="Workspace slug (session callers; tokens imply their workspace)."
)


def _or_empty(schema: dict[str, Any]) -> dict[str, Any]:
    # An empty value filters nothing, as on the pages' forms.
    return {"anyOf": [schema, {"type": "string", "maxLength": 0}]}


def filter_parameters(
    filterset: type[django_filters.FilterSet], descriptions: dict[str, str] | None = None
) -> list[OpenApiParameter]:
    """The query parameters of a FilterSet, typed as the FilterSet checks them."""
    parameters = []
    for name, field in filterset.base_filters.items():
        schema: dict[str, Any]
        extra: dict[str, Any] = {}
        if isinstance(field, django_filters.MultipleChoiceFilter):
            # Repeated (?type=a&type=b): each value one of the choices.
            choices = [str(v) for v, _ in field.extra["choices"]]
            schema = {"type": "array", "items": {"type": "string", "enum": choices}}
            extra = {"style": "form", "explode": True}
        elif isinstance(field, django_filters.ChoiceFilter):  # noqa: TID251 (any subclass)
            schema = {"type": "string", "enum": ["", *(str(v) for v, _ in field.extra["choices"])]}
        elif isinstance(field, django_filters.UUIDFilter):
            schema = _or_empty({"type": "string", "format": "uuid"})
        elif isinstance(field, django_filters.IsoDateTimeFilter):
            schema = _or_empty({"type": "string", "format": "date-time"})
        elif isinstance(field, django_filters.NumberFilter):
            kind = "integer" if issubclass(field.field_class, forms.IntegerField) else "number"
            bounds = {
                key: field.extra[name]
                for key, name in (("minimum", "min_value"), ("maximum", "max_value"))
                if name in field.extra
            }
            schema = _or_empty({"type": kind, **bounds})
        else:
            schema = {"type": "string"}
        description = (descriptions or {}).get(name, f"Filter by {name}.")
        parameters.append(OpenApiParameter(name, schema, description=description, **extra))
    return parameters


class ApiView(APIView):
    pagination_class = Pagination
    # Every operation documents the error responses it can answer (portal.schema).
    schema = ApiAutoSchema()

    def caller(self, request: Request) -> Caller:
        return caller_of(request)


def json_object(request: Request) -> dict[str, Any]:
    data = request.data
    if not isinstance(data, dict):
        raise ValidationFailed({"body": "Send a JSON object."})
    return data


def json_object_or_empty(request: Request) -> dict[str, Any]:
    """``json_object`` for endpoints whose body is optional: no body reads as ``{}``.

    Only a missing body: one that is there but is not an object (``[]``, ``null``, ``0``)
    is refused like any other.
    """
    if request.META.get("CONTENT_LENGTH") in (None, "", "0"):
        return {}
    return json_object(request)


def reject_unknown(data: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        known = sorted(allowed)
        raise ValidationFailed({key: unknown_name_message(key, known) for key in unknown})

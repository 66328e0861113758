"""Shared pieces of the API views: the caller, and reading JSON bodies strictly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import django_filters
from django import forms
from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.access import Caller, caller_of
from portal.api.pagination import Pagination
from portal.api.strict import unknown_name_message
from portal.authentication import TokenUser, token_refused
from portal.errors import ValidationFailed
from portal.schema import ApiAutoSchema
from portal.tokens import TokenChanged, TokenCheck

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


class RememberedTokenView(ApiView):
    """An endpoint of the hot path whose POST takes a token this process looked up before as
    remembered, without a statement of its own (``portal.authentication``): the first
    statement the call runs checks the token, and the connection's scope, in its own snapshot
    (``portal.tokens.TokenCheck``, ``request.user.token_check``, handed to the call).

    A token refused since (revoked, expired, a secret rotated out) is refused as a lookup
    would refuse it, with nothing written; a token or workspace changed since runs the call
    again as the token is now. A call refused before its first statement (a body not valid,
    a role short, throttled) is answered so only once the token is confirmed.
    """

    token_remembered = True

    def remembered(
        self, request: Request, call: Callable[[TokenCheck | None], Response]
    ) -> Response:
        """``call(check)``, with the token's check pending, or again without one (the token
        looked up) if the token is not as remembered."""
        check = getattr(request.user, "token_check", None)
        try:
            return call(check)
        except TokenChanged as changed:
            return self._as_token_is_now(request, call, changed)
        except Exception:
            now = None if check is None else check.changed()
            if now is None:
                raise
            return self._as_token_is_now(request, call, now)

    def _as_token_is_now(
        self, request: Request, call: Callable[[TokenCheck | None], Response], changed: TokenChanged
    ) -> Response:
        if changed.token is None:
            raise token_refused(changed.key_hash) from None
        token = changed.token
        request.user, request.auth = TokenUser(token), token  # type: ignore[assignment]
        return call(None)

    def handle_exception(self, exc: Exception) -> Response:
        # Refused before the view ran (throttled): a remembered token is confirmed first, so a
        # revoked one is answered as revoked. DRF's _user: reading request.user would
        # authenticate a call refused before that.
        check = getattr(getattr(getattr(self, "request", None), "_user", None), "token_check", None)
        changed = None if check is None else check.changed()
        if changed is not None and changed.token is None:
            exc = token_refused(changed.key_hash)
        return super().handle_exception(exc)


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

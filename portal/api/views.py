"""Shared pieces of the API views: the caller, and reading JSON bodies strictly."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request
from rest_framework.views import APIView

from portal.access import Caller, caller_of
from portal.api.pagination import Pagination
from portal.errors import ValidationFailed

# The ?workspace= parameter of endpoints whose path names no workspace (SPEC section 10).
WORKSPACE_PARAM = OpenApiParameter(
    "workspace", str, description="Workspace slug (session callers; tokens imply their workspace)."
)


class ApiView(APIView):
    pagination_class = Pagination

    def caller(self, request: Request) -> Caller:
        return caller_of(request)


def json_object(request: Request) -> dict[str, Any]:
    data = request.data
    if not isinstance(data, dict):
        raise ValidationFailed({"body": "Send a JSON object."})
    return data


def json_object_or_empty(request: Request) -> dict[str, Any]:
    """``json_object`` for endpoints whose body is optional: no body reads as ``{}``."""
    return json_object(request) if request.data else {}


def reject_unknown(data: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ValidationFailed({key: "Unknown field." for key in unknown})

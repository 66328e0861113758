"""One exception handler: every API error is ``{"error": {"code", "message", "details"}}``."""

from __future__ import annotations

import sys
from typing import Any

from django import db
from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, HttpRequest, JsonResponse
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from portal.errors import as_domain_error

_DRF_CODES = {
    exceptions.ParseError: "MALFORMED_REQUEST",
    exceptions.NotAuthenticated: "NOT_AUTHENTICATED",
    exceptions.AuthenticationFailed: "AUTHENTICATION_FAILED",
    exceptions.PermissionDenied: "PERMISSION_DENIED",
    exceptions.NotFound: "NOT_FOUND",
    exceptions.MethodNotAllowed: "METHOD_NOT_ALLOWED",
    exceptions.NotAcceptable: "NOT_ACCEPTABLE",
    exceptions.UnsupportedMediaType: "UNSUPPORTED_MEDIA_TYPE",
    exceptions.Throttled: "THROTTLED",
    exceptions.ValidationError: "INVALID_REQUEST",
}


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.DictField()


class ErrorSerializer(serializers.Serializer):
    """The one error shape, for the schema: ``{"error": {"code", "message", "details"}}``."""

    error = ErrorDetailSerializer()


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or {}}}


# While the database is unreachable (restarting, failing over), callers are told to come
# back: a 503 with Retry-After, never a 500. One statement or one transaction per change, so
# nothing was half-written.
RETRY_AFTER_SECONDS = 5
UNAVAILABLE_MESSAGE = (
    "The database is not reachable right now, so nothing was read or saved. Try again in a "
    f"few seconds (Retry-After: {RETRY_AFTER_SECONDS})."
)


def is_database_unavailable(exc: BaseException | None) -> bool:
    """A lost or refused database connection (not a constraint or a bad query)."""
    return isinstance(exc, (db.OperationalError, db.InterfaceError))


def json_unavailable() -> JsonResponse:
    response = JsonResponse(
        error_body("DATABASE_UNAVAILABLE", UNAVAILABLE_MESSAGE),
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
    )
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if is_database_unavailable(exc):
        return Response(
            error_body("DATABASE_UNAVAILABLE", UNAVAILABLE_MESSAGE),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    domain = as_domain_error(exc)
    if domain is not None:
        # A service that is down for a moment (the task queue): say when to try again.
        retry = {"Retry-After": str(RETRY_AFTER_SECONDS)} if domain.status == 503 else None
        return Response(
            error_body(domain.code, domain.message, domain.details),
            status=domain.status,
            headers=retry,
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    # An exception of ours may say its own code and details (portal.authentication's
    # TokenExpired, a 401 TOKEN_EXPIRED).
    code = getattr(exc, "error_code", None) or next(
        (c for cls, c in _DRF_CODES.items() if isinstance(exc, cls)), "ERROR"
    )
    if isinstance(exc, exceptions.ValidationError):
        response.data = error_body(
            code, "The request is not valid.", {"fields": _flatten(exc.detail)}
        )
    else:
        detail = getattr(exc, "detail", str(exc))
        response.data = error_body(code, str(detail), getattr(exc, "error_details", None))
    return response


def _flatten(detail: Any, prefix: str = "") -> dict[str, str]:
    """Turn DRF's nested error lists into ``{"field.sub": "message"}``."""
    if isinstance(detail, dict):
        flat: dict[str, str] = {}
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            flat.update(_flatten(value, name))
        return flat
    if isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            return {prefix or "nonFieldErrors": " ".join(str(item) for item in detail)}
        flat = {}
        for index, item in enumerate(detail):
            flat.update(_flatten(item, f"{prefix}[{index}]"))
        return flat
    return {prefix or "nonFieldErrors": str(detail)}


API_PREFIX = "/v1/"
UNKNOWN_API_PATH = "api-unknown-path"  # the name of the catch-all route (console.urls)


def is_api_path(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_PREFIX)


@csrf_exempt  # it changes nothing; a session POST to a wrong path is told so, not "CSRF"
def unknown_api_path(request: HttpRequest) -> JsonResponse:
    """The catch-all under /v1/: a JSON 404 in every configuration.

    It also stands in for ``APPEND_SLASH``, whose redirect would drop a POST's body (and raise
    in DEBUG): a path that only lacks, or only has an extra, trailing slash is told which.
    """
    other = request.path_info[:-1] if request.path_info.endswith("/") else request.path_info + "/"
    try:
        match = resolve(other, getattr(request, "urlconf", None))
    except Resolver404:
        match = None
    if match is None or match.url_name == UNKNOWN_API_PATH:
        return json_not_found(request)
    fixed = request.path[:-1] if request.path.endswith("/") else request.path + "/"
    needs = "needs its trailing slash" if fixed.endswith("/") else "takes no trailing slash"
    return JsonResponse(
        error_body(
            "NOT_FOUND",
            f"No resource at {request.path}: the path {needs}, {fixed}",
            {"path": request.path, "suggestedPath": fixed},
        ),
        status=status.HTTP_404_NOT_FOUND,
    )


def json_not_found(request: Any, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse(
        error_body("NOT_FOUND", "No such resource."), status=status.HTTP_404_NOT_FOUND
    )


def json_bad_request(request: Any, exception: Exception | None = None) -> JsonResponse:
    if isinstance(exception, RequestDataTooBig):
        limit_mb = settings.DATA_UPLOAD_MAX_MEMORY_SIZE // (1024 * 1024)
        return JsonResponse(
            error_body(
                "REQUEST_TOO_LARGE",
                f"The request body is over {limit_mb} MB; send the memories in smaller batches.",
            ),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    return JsonResponse(
        error_body("MALFORMED_REQUEST", "The request could not be read."),
        status=status.HTTP_400_BAD_REQUEST,
    )


def json_server_error(request: Any) -> JsonResponse:
    if is_database_unavailable(sys.exc_info()[1]):
        return json_unavailable()
    return JsonResponse(
        error_body("SERVER_ERROR", "The server failed to handle this request."),
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
    )

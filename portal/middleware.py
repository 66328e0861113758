"""Every response under /v1/ is JSON: errors in the one shape, in DEBUG and production alike.

DRF's exception handler covers errors inside API views, and the catch-all route covers
unknown paths. What is left is Django's own error pages, which ignore the ``handler*`` views
in DEBUG (technical 404 and 500 pages) or come from outside any view (a bad Host, a failing
middleware). This middleware, first in the stack, answers an unhandled view exception itself
and turns any other non-JSON error response into the JSON error for its status.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.template.loader import render_to_string

from portal.api.errors import (
    RETRY_AFTER_SECONDS,
    error_body,
    is_api_path,
    is_database_unavailable,
    json_server_error,
    json_unavailable,
)
from portal.error_pages import PRODUCT_PAGE, forbidden_page, not_found_page

# Django's own logger for failed requests, so 500s land where they always did. The record
# carries the method, the path and the traceback; never the request (its body can hold
# memory content) or its headers (Authorization).
request_logger = logging.getLogger("django.request")

# Exceptions Django itself answers with a 4xx page; that page is converted below.
_HANDLED_BY_DJANGO = (
    Http404,
    PermissionDenied,
    BadRequest,
    SuspiciousOperation,
    MultiPartParserError,
)

_ERRORS = {
    400: ("MALFORMED_REQUEST", "The request could not be read."),
    401: ("NOT_AUTHENTICATED", "Authentication credentials were not provided."),
    403: ("PERMISSION_DENIED", "You do not have permission to perform this action."),
    404: ("NOT_FOUND", "No such resource."),
    405: ("METHOD_NOT_ALLOWED", "This method is not allowed here."),
    406: ("NOT_ACCEPTABLE", "This resource answers in JSON only."),
    413: ("REQUEST_TOO_LARGE", "The request body is too large."),
    415: ("UNSUPPORTED_MEDIA_TYPE", "Send the body as application/json."),
    429: ("THROTTLED", "Too many requests; try again later."),
    503: ("DATABASE_UNAVAILABLE", "The service is unavailable right now; try again shortly."),
    500: ("SERVER_ERROR", "The server failed to handle this request."),
}
# Headers an error response must keep: what to do next.
_KEPT_HEADERS = ("Allow", "Retry-After", "WWW-Authenticate")


class ApiJsonErrorsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if response.status_code >= 400 and is_api_path(request) and not _is_json(response):
            return _json_error(request, response)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        unavailable = database_unavailable_response(request, exception)
        if unavailable is not None:
            return unavailable
        if not is_api_path(request) or isinstance(exception, _HANDLED_BY_DJANGO):
            return None
        request_logger.error(
            "Internal Server Error: %s %s",
            request.method,
            request.path,
            exc_info=exception,
            extra={"status_code": 500},
        )
        response = json_server_error(request)
        # Logged above: Django would log it again, with the request attached.
        response._has_been_logged = True  # type: ignore[attr-defined]
        return response


class PageErrorsMiddleware:
    """The portal's own error pages where Django would answer a person otherwise: a refusal
    (``PermissionDenied``, e.g. a page needing a higher role) is a page that says why and who
    may, logged in one line (it is expected, not a fault: no traceback); and in DEBUG
    (``make run``), where Django answers a 404 with its technical page, the product's 404."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if (
            settings.DEBUG
            and response.status_code == 404
            and not is_api_path(request)
            and not getattr(response, PRODUCT_PAGE, False)
            and response.get("Content-Type", "").startswith("text/html")
        ):
            return not_found_page(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if is_api_path(request) or not isinstance(exception, PermissionDenied):
            return None
        request_logger.warning("Forbidden: %s %s (%s)", request.method, request.path, exception)
        response = forbidden_page(request, exception)
        # Logged above, without the traceback Django would add for it.
        response._has_been_logged = True  # type: ignore[attr-defined]
        return response


def database_unavailable_response(
    request: HttpRequest, exception: BaseException
) -> HttpResponse | None:
    """The 503 for a request that met an unreachable database (JSON under /v1/, the static
    page elsewhere, in DEBUG too: Django's technical 500 page would answer); None for any
    other error."""
    if not is_database_unavailable(exception):
        return None
    request_logger.warning(
        "Database unavailable: %s %s (%s)",
        request.method,
        request.path,
        type(exception).__name__,
    )
    return json_unavailable() if is_api_path(request) else unavailable_page(request)


def unavailable_page(request: HttpRequest) -> HttpResponse:
    """The 503 page: a static template rendered without the request, since its context
    processors (the caller's workspaces) would read the database."""
    response = HttpResponse(render_to_string("503.html"), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def _is_json(response: HttpResponseBase) -> bool:
    media_type = response.get("Content-Type", "").split(";")[0].strip().lower()
    return media_type == "application/json" or media_type.endswith("+json")


def _json_error(request: HttpRequest, response: HttpResponseBase) -> JsonResponse:
    status = response.status_code
    code, message = _ERRORS.get(status, ("ERROR", response.reason_phrase or "Request failed."))
    details = {}
    if status == 405:
        message = f"{request.method} is not allowed here."
        details["allowed"] = [m.strip() for m in response.get("Allow", "").split(",") if m.strip()]
    converted = JsonResponse(error_body(code, message, details), status=status)
    for header in _KEPT_HEADERS:
        if header in response:
            converted[header] = response[header]
    return converted

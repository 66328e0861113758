"""The ground floor's own answers: liveness, readiness, and the error pages (HTML or JSON)."""

from __future__ import annotations

import sys

from django.core.exceptions import BadRequest
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import defaults
from django.views.decorators.http import require_GET

from portal.api.errors import (
    is_database_unavailable,
    json_bad_request,
    json_not_found,
    json_server_error,
)
from portal.error_pages import forbidden_page, not_found_page
from portal.middleware import unavailable_page


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: 200 while the process answers (restarting it would not help), and the truth
    about the database in the body: ``ok``, or ``degraded`` while it is unreachable."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:  # noqa: BLE001 - any database failure means "unreachable"
        return JsonResponse({"status": "degraded", "process": "ok", "database": "unreachable"})
    return JsonResponse({"status": "ok", "process": "ok", "database": "ok"})


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
    except Exception:  # noqa: BLE001 - any database failure means "not ready"
        return JsonResponse({"status": "unavailable", "database": "unreachable"}, status=503)
    if row is None:
        return JsonResponse({"status": "unavailable", "database": "no pgvector"}, status=503)
    return JsonResponse({"status": "ok", "pgvector": row[0]})


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/v1/"):
        return json_not_found(request, exception)
    return not_found_page(request)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return forbidden_page(request, exception)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/v1/"):
        return json_bad_request(request, exception)
    return defaults.bad_request(request, exception or BadRequest())


def server_error(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/v1/"):
        return json_server_error(request)
    if is_database_unavailable(sys.exc_info()[1]):
        return unavailable_page(request)
    return render(request, "500.html", status=500)

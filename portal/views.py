from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from audit.models import AuditEvent
from portal.access import caller_of, workspaces_for
from portal.api.errors import json_not_found, json_server_error
from portal.pages import workspace_page


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


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


@login_required
def home(request: HttpRequest) -> HttpResponse:
    workspaces = list(workspaces_for(caller_of(request)))
    if len(workspaces) == 1:
        return redirect("dashboard", slug=workspaces[0].slug)
    return render(request, "portal/home.html", {"workspaces": workspaces})


@login_required
def dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    access = workspace_page(request, slug)
    workspace = access.workspace
    context = {
        **access.context(),
        "workloads": workspace.workloads.order_by("name"),
        "events": AuditEvent.objects.filter(workspace=workspace).order_by("-id")[:10],
    }
    return render(request, "portal/dashboard.html", context)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/v1/"):
        return json_not_found(request, exception)
    return render(request, "404.html", status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/v1/"):
        return json_server_error(request)
    return render(request, "500.html", status=500)

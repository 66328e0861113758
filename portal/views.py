from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views import defaults
from django.views.decorators.http import require_GET

from audit.models import AuditEvent
from audit.selectors import assembled_per_day
from policies.selectors import workload_compliance, workspace_policy_current
from portal.access import caller_of, workspaces_for
from portal.api.errors import (
    is_database_unavailable,
    json_bad_request,
    json_not_found,
    json_server_error,
)
from portal.middleware import unavailable_page
from portal.pages import workspace_page


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


@login_required
def home(request: HttpRequest) -> HttpResponse:
    workspaces = list(workspaces_for(caller_of(request)))
    if len(workspaces) == 1:
        return redirect("dashboard", slug=workspaces[0].slug)
    return render(request, "portal/home.html", {"workspaces": workspaces})


CHART_DAYS = 14
CHART_WIDTH = 560
CHART_HEIGHT = 150
CHART_TOP = 18  # room for the value above the tallest bar
CHART_BOTTOM = 22  # room for the day labels


@dataclass(frozen=True)
class Bar:
    day: date
    count: int
    x: float
    y: float
    width: float
    height: float
    label_x: float
    value_y: float


def volume_chart(counts: dict[date, int], today: date) -> dict[str, Any]:
    """Bars for the last ``CHART_DAYS`` days (today last), scaled to the busiest day."""
    days = [today - timedelta(days=offset) for offset in range(CHART_DAYS - 1, -1, -1)]
    peak = max([counts.get(day, 0) for day in days] + [1])
    slot = CHART_WIDTH / CHART_DAYS
    plot = CHART_HEIGHT - CHART_TOP - CHART_BOTTOM
    bars = []
    for i, day in enumerate(days):
        n = counts.get(day, 0)
        height = plot * n / peak if n else 0
        bars.append(
            Bar(
                day=day,
                count=n,
                x=round(i * slot + slot * 0.15, 1),
                y=round(CHART_TOP + plot - height, 1),
                width=round(slot * 0.7, 1),
                height=round(height, 1),
                label_x=round(i * slot + slot / 2, 1),
                value_y=round(CHART_TOP + plot - height - 4, 1),
            )
        )
    return {
        "bars": bars,
        "total": sum(bar.count for bar in bars),
        "peak": peak,
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "baseline": CHART_HEIGHT - CHART_BOTTOM,
        "label_y": CHART_HEIGHT - 6,
        "first": days[0],
        "last": days[-1],
    }


@login_required
def dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    access = workspace_page(request, slug)
    workspace = access.workspace
    floor = workspace_policy_current(workspace=workspace)
    environments, compliance = workload_compliance(workspace=workspace, floor=floor.document)
    today = timezone.now().astimezone(UTC).date()
    since = datetime.combine(today - timedelta(days=CHART_DAYS - 1), time.min, tzinfo=UTC)
    context = {
        **access.context(),
        "floor": floor,
        "environments": environments,
        "compliance": compliance,
        "non_compliant": sum(1 for row in compliance if row.status == "non-compliant"),
        "adjusted": sum(1 for row in compliance if row.status == "adjusted"),
        "events": AuditEvent.objects.filter(workspace=workspace)
        .only("id", "type", "author", "occurred_at", "environment", "actor_id")
        .order_by("-id")[:10],
        "chart": volume_chart(assembled_per_day(workspace=workspace, since=since), today),
    }
    return render(request, "portal/dashboard.html", context)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/v1/"):
        return json_not_found(request, exception)
    return render(request, "404.html", status=404)


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

"""The dashboard: a workspace at a glance (its floor, workload compliance, recent events, the
recall volume chart, the compaction runs by outcome), and the home page that lists the
caller's workspaces.

The top floor: it reads policies, audit and chat alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from audit.models import AuditEvent
from audit.selectors import assembled_per_day
from chat.selectors import compaction_outcomes_per_day
from chat.svg import OUTCOMES, outcomes_chart
from policies.selectors import workload_compliance, workspace_policy_current
from portal.access import caller_of, workspaces_for
from portal.pages import workspace_page


@login_required
def home(request: HttpRequest) -> HttpResponse:
    workspaces = list(workspaces_for(caller_of(request)))
    if len(workspaces) == 1:
        return redirect("dashboard", slug=workspaces[0].slug)
    return render(request, "console/home.html", {"workspaces": workspaces})


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


def compaction_panel(workspace: Any, since: datetime, today: date) -> dict[str, Any]:
    """The compaction runs of the last ``CHART_DAYS`` days by outcome: the chart and totals."""
    counts = compaction_outcomes_per_day(workspace=workspace, since=since)
    days = [today - timedelta(days=offset) for offset in range(CHART_DAYS - 1, -1, -1)]
    totals: dict[str, int] = {}
    for by_outcome in counts.values():
        for outcome, n in by_outcome.items():
            totals[outcome] = totals.get(outcome, 0) + n
    return {
        "compaction_chart": outcomes_chart(counts, days),
        "compaction_legend": OUTCOMES,
        "compaction_totals": totals,
        "compaction_runs": sum(totals.values()),
        "compaction_missed": totals.get("target_missed", 0)
        + totals.get("time_budget_exhausted", 0)
        + totals.get("failed", 0),
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
        **compaction_panel(workspace, since, today),
    }
    return render(request, "console/dashboard.html", context)

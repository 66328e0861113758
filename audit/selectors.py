from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from django.db.models import Count, QuerySet
from django.db.models.functions import TruncDate

from audit.filtersets import AuditEventFilterSet
from audit.models import AuditEvent, EventType
from policies.models import Workspace
from portal.errors import ValidationFailed


def audit_events(*, workspace: Workspace, filters: Any) -> QuerySet[AuditEvent]:
    """The workspace's events narrowed by ``filters`` (a QueryDict); bad filters are a 400."""
    filterset = AuditEventFilterSet(
        filters, queryset=AuditEvent.objects.filter(workspace=workspace).select_related("workspace")
    )
    if not filterset.is_valid():
        raise ValidationFailed(
            {field: " ".join(errors) for field, errors in filterset.errors.items()},
            "The audit filters are not valid.",
        )
    return filterset.qs.order_by("-id")


def assembled_per_day(*, workspace: Workspace, since: datetime) -> dict[date, int]:
    """``context.assembled`` events per UTC day since ``since``: one aggregate query."""
    rows = (
        AuditEvent.objects.filter(
            workspace=workspace, type=EventType.ASSEMBLED, occurred_at__gte=since
        )
        .annotate(day=TruncDate("occurred_at", tzinfo=UTC))
        .values("day")
        .annotate(n=Count("id"))
        .order_by("day")
    )
    return {row["day"]: row["n"] for row in rows}

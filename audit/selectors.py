from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from audit.filtersets import AuditEventFilterSet
from audit.models import AuditEvent
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

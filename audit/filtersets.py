from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet

from audit.models import AuditEvent, EventType, Injection
from portal.filters import ChoiceFilter, IdFilter, UtcDateTimeFilter


class AuditEventFilterSet(django_filters.FilterSet):
    """One filterset for the audit page, its export and the API."""

    type = ChoiceFilter(choices=EventType.choices)
    workload = django_filters.UUIDFilter(field_name="workload_id")
    actor = django_filters.CharFilter(field_name="actor_id")
    environment = django_filters.CharFilter(field_name="environment")
    author = django_filters.CharFilter(field_name="author")
    since = UtcDateTimeFilter(field_name="occurred_at", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="occurred_at", lookup_expr="lte")
    # A memory id: a whole number (a bigint), as the path of a memory's own page takes it.
    memory = IdFilter(method="filter_memory")

    workspace: Any = None  # set by audit.selectors.audit_events: the events' workspace

    def filter_memory(self, queryset: QuerySet[AuditEvent], name: str, value: Any) -> Any:
        """The contexts that carried this memory (as an entry or a truncated ref)."""
        # Naming the workspace lets the injection index (workspace, memory, event) answer.
        carried = Injection.objects.filter(memory_id=int(value))
        if self.workspace is not None:
            carried = carried.filter(workspace=self.workspace)
        return queryset.filter(id__in=carried.values("event_id"))

    class Meta:
        model = AuditEvent
        fields = ["type", "workload", "actor", "environment", "author", "since", "until", "memory"]

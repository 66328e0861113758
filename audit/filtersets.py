from __future__ import annotations

import django_filters

from audit.models import AuditEvent, EventType


class AuditEventFilterSet(django_filters.FilterSet):
    """One filterset for the audit page, its export and the API."""

    type = django_filters.ChoiceFilter(choices=EventType.choices)
    workload = django_filters.UUIDFilter(field_name="workload_id")
    actor = django_filters.CharFilter(field_name="actor_id")
    environment = django_filters.CharFilter(field_name="environment")
    author = django_filters.CharFilter(field_name="author")
    since = django_filters.IsoDateTimeFilter(field_name="occurred_at", lookup_expr="gte")
    until = django_filters.IsoDateTimeFilter(field_name="occurred_at", lookup_expr="lte")

    class Meta:
        model = AuditEvent
        fields = ["type", "workload", "actor", "environment", "author", "since", "until"]

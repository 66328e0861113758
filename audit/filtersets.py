from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django.db.models import QuerySet
from django_filters.fields import MultipleChoiceField

from audit.memory_events import memory_event_ids
from audit.models import AuditEvent, EventType
from portal.filters import IdFilter, UtcDateTimeFilter


class EventTypesField(MultipleChoiceField):
    """Event types, the parameter repeated (``type=a&type=b``) or a comma list (``type=a,b``);
    an empty value filters nothing."""

    def to_python(self, value: Any) -> list[str]:
        parts = (part.strip() for item in super().to_python(value) for part in item.split(","))
        return [part for part in parts if part]

    def validate(self, value: list[str]) -> None:
        known = set(EventType.values)
        unknown = [item for item in dict.fromkeys(value) if item not in known]
        if unknown:
            raise forms.ValidationError(
                f"Not an event type: {', '.join(unknown)}. The event types are: "
                f"{', '.join(sorted(known))}.",
                code="invalid_choice",
            )


class EventTypesFilter(django_filters.MultipleChoiceFilter):
    """Events of any of the types given."""

    field_class = EventTypesField

    def filter(self, qs: QuerySet[AuditEvent], value: list[str]) -> QuerySet[AuditEvent]:
        # One IN list (the (workspace, type) index answers it), not an OR of lookups.
        return qs.filter(type__in=value) if value else qs


class AuditEventFilterSet(django_filters.FilterSet):
    """One filterset for the audit page, its export and the API."""

    type = EventTypesFilter(choices=EventType.choices)
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
        """The memory's history: the contexts that carried it (as an entry or a truncated
        ref) and the events that changed it (``audit.memory_events``)."""
        workspace = self.workspace
        if workspace is None:  # a filterset used without audit_events: the events' own
            return queryset.none()
        return queryset.filter(id__in=memory_event_ids(workspace=workspace, memory_id=int(value)))

    class Meta:
        model = AuditEvent
        fields = ["type", "workload", "actor", "environment", "author", "since", "until", "memory"]

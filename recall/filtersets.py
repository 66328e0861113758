from __future__ import annotations

import django_filters

from portal.filters import ChoiceFilter, UtcDateTimeFilter
from recall.models import LifecycleStatus, MemoryRecord


class MemoryFilterSet(django_filters.FilterSet):
    """One filterset for the memory browser and the API list."""

    type = ChoiceFilter(
        field_name="memory_type", choices=MemoryRecord._meta.get_field("memory_type").choices
    )
    source = ChoiceFilter(
        field_name="source_kind", choices=MemoryRecord._meta.get_field("source_kind").choices
    )
    status = ChoiceFilter(field_name="lifecycle_status", choices=LifecycleStatus.choices)
    sensitivity = ChoiceFilter(choices=MemoryRecord._meta.get_field("sensitivity").choices)
    segment = ChoiceFilter(
        field_name="segment_kind", choices=MemoryRecord._meta.get_field("segment_kind").choices
    )
    q = django_filters.CharFilter(field_name="content", lookup_expr="icontains")
    createdAfter = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte")
    createdBefore = UtcDateTimeFilter(field_name="created_at", lookup_expr="lte")

    class Meta:
        model = MemoryRecord
        fields = ["type", "source", "status", "sensitivity", "segment", "q"]

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet

from chat.models import Session, SessionStatus
from portal.filters import ChoiceFilter
from recall.actor_ids import ActorIdError, split_actor_id


class SessionFilterSet(django_filters.FilterSet):
    """One filterset for the Sessions page and the API list."""

    actor = django_filters.CharFilter(method="filter_actor")
    workload = django_filters.UUIDFilter(field_name="workload_id")
    environment = django_filters.CharFilter(field_name="environment")
    status = ChoiceFilter(choices=SessionStatus.choices)

    def filter_actor(self, queryset: QuerySet[Session], name: str, value: Any) -> Any:
        try:
            kind, actor_name = split_actor_id(value)
        except ActorIdError:
            return queryset.none()  # no actor has an id that is not valid
        return queryset.filter(actor__kind=kind, actor__name=actor_name)

    class Meta:
        model = Session
        fields = ["actor", "workload", "environment", "status"]

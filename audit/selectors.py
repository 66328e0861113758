from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from django.db import connection
from django.db.models import Count, QuerySet
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import TruncDate

from audit.filtersets import AuditEventFilterSet
from audit.models import AuditEvent, EventType, Injection
from portal.errors import ValidationFailed
from portal.models import Workspace


def audit_events(*, workspace: Workspace, filters: Any) -> QuerySet[AuditEvent]:
    """The workspace's events narrowed by ``filters`` (a QueryDict); bad filters are a 400."""
    filterset = AuditEventFilterSet(
        filters,
        queryset=AuditEvent.objects.filter(workspace=workspace).select_related(
            "workspace", "stored_query"
        ),
    )
    filterset.workspace = workspace
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


def memory_injections(*, workspace: Workspace, memory_id: int) -> QuerySet[Injection]:
    """The envelopes that carried a memory, newest first (the primary key's order): the
    index's rows alone, so that counting them never touches the events. ``with_events`` then
    reads the events of one page."""
    return (
        Injection.objects.filter(workspace=workspace, memory_id=memory_id)
        .only("memory_id", "event_id", "workspace_id", "truncated")
        .order_by("-event_id")
    )


def with_events(rows: Sequence[Injection]) -> list[Injection]:
    """Attach each row's event (when, workload, environment, caller) and ``envelope_id`` (read
    out of the payload by the database, not the whole payload decoded), in one query."""
    rows = list(rows)
    events = {
        event.pk: event
        for event in AuditEvent.objects.filter(pk__in=[row.event_id for row in rows])
        .only("id", "occurred_at", "author", "workload_id", "environment")
        .annotate(envelope_id=KeyTextTransform("envelopeId", "payload"))
    }
    for row in rows:
        event = events.get(row.event_id)
        if event is not None:
            row.event = event
            row.envelope_id = event.envelope_id  # type: ignore[attr-defined]
    return rows


_SUMMARY_SQL = f"""
SELECT a.entries, a.truncated, a.dry_runs, e.occurred_at
FROM (
    SELECT count(*) FILTER (WHERE NOT truncated AND NOT dry_run) AS entries,
           count(*) FILTER (WHERE truncated AND NOT dry_run) AS truncated,
           count(*) FILTER (WHERE dry_run) AS dry_runs,
           max(event_id) AS last
    FROM {Injection._meta.db_table}
    WHERE memory_id = %s AND workspace_id = %s
) a
LEFT JOIN {AuditEvent._meta.db_table} e ON e.id = a.last
"""


@dataclass(frozen=True)
class InjectionSummary:
    """The contexts that carried a memory, as its hits count them and not."""

    entries: int  # as an entry, by a recall: each one is a hit
    truncated: int  # as a truncated reference only: no hit
    dry_runs: int  # by a sandbox dry run: no hit
    last: datetime | None  # when the latest of them all was assembled

    @property
    def total(self) -> int:
        return self.entries + self.truncated + self.dry_runs


def memory_injection_summary(*, workspace: Workspace, memory_id: int) -> InjectionSummary:
    """How the envelopes that carried a memory split (entries, truncated refs, dry runs),
    and when the last was assembled: one query on the key."""
    with connection.cursor() as cursor:
        cursor.execute(_SUMMARY_SQL, [memory_id, workspace.pk])
        entries, truncated, dry_runs, last = cursor.fetchone()
    return InjectionSummary(entries, truncated, dry_runs, last)

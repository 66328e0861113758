"""The events about one memory: the contexts that carried it and the events that changed it.

The audit trail's memory filter (page, exports and API) reads a memory's history through
``memory_event_ids``: the event ids of
- the ``context.assembled`` events that carried it (the injection index);
- the events whose payload names it among the memories they changed or erased
  (``memory.changed``: created, updated, suppressed, restored, reactivated, deleted;
  ``memory.erased``);
- the events the floors above know touched it by rows of their own (maintenance: the runs
  that changed it, and their reverts that put it back), which they register here with
  ``memory_events_register``: audit imports nothing above it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.db.models import QuerySet

from audit.models import AuditEvent, EventType, Injection
from portal.models import Workspace

# (workspace, memory id) -> querysets of one column each: the ids of events that changed it.
MemoryEventSource = Callable[[Workspace, int], Iterable[QuerySet[Any]]]
_SOURCES: list[MemoryEventSource] = []

# The event types whose payload lists the memories they changed, as strings, under ``ids``.
NAMING_TYPES = (EventType.MEMORY_CHANGED, EventType.MEMORY_ERASED)


def memory_events_register(source: MemoryEventSource) -> MemoryEventSource:
    """Add the events a floor above records about a memory to its history."""
    _SOURCES.append(source)
    return source


def memory_change_ids(*, workspace: Workspace, memory_id: int) -> list[int]:
    """The ids of the workspace's events that changed the memory, oldest first: one query."""
    # Naming the types lets the (workspace, type) index find the candidates; the payload's
    # containment is checked on each (an index on it could not serve: row-level security
    # keeps a non-leakproof operator such as @> out of index conditions).
    named = AuditEvent.objects.filter(
        workspace=workspace, type__in=NAMING_TYPES, payload__ids__contains=[str(memory_id)]
    ).values("id")
    parts = [part for source in _SOURCES for part in source(workspace, memory_id)]
    # Unordered: a part sorted by its model's default ordering is read in that order rather
    # than through its own index.
    rows = named.order_by().union(*(part.order_by() for part in parts), all=True)
    return sorted({row["id"] for row in rows})  # each row named as the first part's column


def memory_event_ids(*, workspace: Workspace, memory_id: int) -> QuerySet[Any]:
    """The ids of the workspace's events about the memory, carried or changed: one subquery
    of the injection index's rows and the changes' ids, read first (they are few). The list's
    plan may run the subquery once per event it reads: each run is then two index lookups,
    not a scan of the workspace's memory events."""
    # Naming the workspace lets the injection index (workspace, memory, event) answer.
    carried = (
        Injection.objects.filter(workspace=workspace, memory_id=memory_id)
        .values("event_id")
        .order_by()
    )
    changed = memory_change_ids(workspace=workspace, memory_id=memory_id)
    if not changed:
        return carried
    own = AuditEvent.objects.filter(pk__in=changed).values("id").order_by()
    return carried.union(own, all=True)


def memory_relation(event: AuditEvent) -> str:
    """How an event of a memory's history concerns it, as the list labels the row."""
    return "in a context" if event.type == EventType.ASSEMBLED else "changed"

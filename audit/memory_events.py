"""The events about one memory: the contexts that carried it and the events that changed it.

The audit trail's memory filter (page, exports and API) reads a memory's history through
``memory_event_ids``: one subquery of event ids, the union of
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


def memory_event_ids(*, workspace: Workspace, memory_id: int) -> QuerySet[Any]:
    """The ids of the workspace's events about the memory, carried or changed: one subquery
    (a UNION, so each part is answered by its own index)."""
    # Naming the workspace lets the injection index (workspace, memory, event) answer.
    carried = Injection.objects.filter(workspace=workspace, memory_id=memory_id).values("event_id")
    named = AuditEvent.objects.filter(
        workspace=workspace, type__in=NAMING_TYPES, payload__ids__contains=[str(memory_id)]
    ).values("id")
    parts = [named, *(part for source in _SOURCES for part in source(workspace, memory_id))]
    return carried.union(*parts)


def memory_relation(event: AuditEvent) -> str:
    """How an event of a memory's history concerns it, as the list labels the row."""
    return "in a context" if event.type == EventType.ASSEMBLED else "changed"

"""Erasure of an actor: a data-subject request.

Every memory of the actor goes, with what was derived from them (the cached recall funnels,
the labels their deletes logged for them) and their lines in retention archives, and so do
the query texts kept for the actor's recalls, and what the floors above keep about the actor
(chat's sessions and their turns); the actor stays as a tombstone (``erased_at``)
so the erasure is remembered and nothing is added back for it. One ``memory.erased`` event
records the counts and the ids, never content. The audit trail's events hold no content
(they name memories by id, and a query by its salted hash; its text lives beside the event),
so they are left whole and the chain still verifies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from audit.models import EventType
from audit.services import audit_event_record, stored_queries_erase
from portal.errors import ConflictError, NotFoundError
from portal.models import Workspace
from portal.registry import function_key, registry_put
from recall.models import Actor, FunnelCache, MemoryChange, MemoryRecord
from recall.services import actor_parse


@dataclass(frozen=True)
class Erasure:
    actor_id: str
    erased_at: datetime
    erased_by: str
    count: int  # memories erased by this call (0 when the actor was erased before)
    archive_lines: int  # retention-archive lines removed
    queries: int  # stored query texts removed
    event_id: int | None  # the memory.erased event (None when the actor was erased before)
    # What the floors above deleted of the actor (``erasure_actor_data_register``), by the
    # name the answer and the event give it: {"sessionsRemoved": 2, "turnsRemoved": 14}.
    removed: dict[str, int] = field(default_factory=dict)


# Copies of memories kept by the floors above (maintenance's retention archives) are purged
# by functions they register here: (workspace, actor id) -> {archive id: lines removed}.
# They run inside the erasure's transaction, so an erasure removes every copy or none.
CopyPurge = Callable[[Workspace, str], dict[int, int]]
_COPY_PURGES: dict[str, CopyPurge] = {}


def erasure_copies_register(purge: CopyPurge) -> CopyPurge:
    return registry_put(_COPY_PURGES, function_key(purge), purge, what="erasure copy purge")


# Data about the actor that the floors above keep (chat's sessions and turns) is deleted by
# functions they register here: (workspace, actor) -> {count name: n}, each name a key of the
# erase answer and of the memory.erased event. They run inside the erasure's transaction.
ActorDataErase = Callable[[Workspace, Actor], dict[str, int]]
_ACTOR_DATA: dict[str, ActorDataErase] = {}


def erasure_actor_data_register(erase: ActorDataErase) -> ActorDataErase:
    return registry_put(_ACTOR_DATA, function_key(erase), erase, what="erasure of actor data")


def actor_erase_preview(*, workspace: Workspace, actor_id: str) -> tuple[Actor, int]:
    """The actor and how many memories an erasure would delete (what the confirmation asks)."""
    actor = _actor(workspace, actor_id)
    return actor, MemoryRecord.objects.filter(actor=actor).count()


@transaction.atomic
def actor_erase(
    *, workspace: Workspace, actor_id: str, author: str, expected_count: int | None = None
) -> Erasure:
    """Delete every memory of the actor, its caches and its archive lines; tombstone it.

    ``expected_count``, when given, must be the number of memories the actor has now (what
    the operator confirmed); otherwise nothing is erased (409 ``COUNT_CHANGED``). Erasing an
    actor erased before changes nothing and records nothing.
    """
    actor = _actor(workspace, actor_id, lock=True)
    if actor.erased_at is not None:
        return Erasure(actor.external_id, actor.erased_at, actor.erased_by, 0, 0, 0, None)
    memories = MemoryRecord.objects.filter(actor=actor)
    ids = sorted(memories.values_list("pk", flat=True))
    if expected_count is not None and expected_count != len(ids):
        raise ConflictError(
            f"{actor.external_id} has {len(ids)} memories now, not the {expected_count} "
            "confirmed; nothing was erased. Check the count and confirm again.",
            {"count": len(ids), "expectedCount": expected_count},
            code="COUNT_CHANGED",
        )
    # Through the ORM: a memory of another actor may name one of these as superseding it
    # (supersededBy is SET_NULL), which a plain DELETE would refuse.
    memories.delete()
    # What recall derived from them: its cached funnels, and the labels the deletes just logged.
    FunnelCache.objects.filter(actor=actor).delete()
    MemoryChange.objects.filter(actor=actor).delete()
    removed: dict[int, int] = {}
    for purge in _COPY_PURGES.values():
        removed.update(purge(workspace, actor.external_id))
    data: dict[str, int] = {}
    for erase in _ACTOR_DATA.values():
        data.update(erase(workspace, actor))
    queries = stored_queries_erase(workspace=workspace, actor_id=actor.external_id)
    actor.erased_at = timezone.now()
    actor.erased_by = author
    actor.save(update_fields=["erased_at", "erased_by"])
    event = audit_event_record(
        workspace=workspace,
        type=EventType.MEMORY_ERASED,
        author=author,
        actor_id=actor.external_id,
        payload={
            "count": len(ids),
            "ids": [str(pk) for pk in ids],
            "archiveLinesRemoved": sum(removed.values()),
            "archivesRewritten": sorted(removed),
            "queriesRemoved": queries,
            **data,
        },
    )
    lines = sum(removed.values())
    return Erasure(
        actor.external_id, actor.erased_at, author, len(ids), lines, queries, event.pk, data
    )


def _actor(workspace: Workspace, actor_id: str, *, lock: bool = False) -> Actor:
    kind, name = actor_parse(actor_id)
    actors = Actor.objects.filter(workspace=workspace, kind=kind, name=name)
    actor = (actors.select_for_update() if lock else actors).first()
    if actor is None:
        raise NotFoundError(f"No actor {actor_id} in workspace {workspace.slug!r}.")
    return actor

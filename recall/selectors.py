"""Reads of actors and memories through the ORM, for the API and the pages.

The recall read itself (the funnel and the ranking, in SQL) is the engine's: ``recall.engine``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import QuerySet, Value
from django.db.models.functions import Concat

from portal.errors import ValidationFailed
from portal.models import Workspace
from recall.actor_ids import ActorIdError, split_actor_id
from recall.filtersets import MemoryFilterSet
from recall.hits import with_hits
from recall.models import Actor, MemoryRecord


def actor_lookup(*, workspace: Workspace, actor_id: str) -> Actor | None:
    """The actor with this id (in its canonical form); None if there is none or the id is not
    a valid one."""
    try:
        kind, name = split_actor_id(actor_id)
    except ActorIdError:
        return None
    return Actor.objects.filter(workspace=workspace, kind=kind, name=name).first()


def actors_erased(*, workspace_id: int, actor_ids: Iterable[str]) -> set[str]:
    """Which of the actors (``kind:name``) are erased tombstones of the workspace."""
    wanted = set(actor_ids)
    if not wanted:
        return set()
    return set(
        Actor.objects.filter(workspace_id=workspace_id, erased_at__isnull=False)
        .annotate(external=Concat("kind", Value(":"), "name"))
        .filter(external__in=wanted)
        .values_list("external", flat=True)
    )


def memory_list(
    *, filters: Any, actor: Actor | None = None, workspace: Workspace | None = None
) -> QuerySet[MemoryRecord]:
    """An actor's memories, or (no actor) every memory of ``workspace``, narrowed by
    ``filters``, newest first; bad filters are a ``ValidationFailed``."""
    if actor is not None:
        rows = MemoryRecord.objects.filter(actor=actor)
    else:
        assert workspace is not None, "an actor or a workspace"
        rows = MemoryRecord.objects.filter(workspace=workspace)
    filterset = MemoryFilterSet(filters, queryset=rows.select_related("actor"))
    if not filterset.is_valid():
        raise ValidationFailed(
            {field: " ".join(errors) for field, errors in filterset.errors.items()},
            "The memory filters are not valid.",
        )
    return with_hits(filterset.qs.defer("embedding").order_by("-created_at", "-id"))


def memory_tiers(*, workspace: Workspace, ids: list[int]) -> dict[int, str]:
    """The tier (short- or long-term) of each of these memories of the workspace."""
    if not ids:
        return {}
    return dict(
        MemoryRecord.objects.filter(workspace=workspace, pk__in=ids).values_list("pk", "tier")
    )


def memories_by_id(*, workspace: Workspace, ids: list[int]) -> dict[int, MemoryRecord]:
    """These memories of the workspace that still exist, by id, without their embeddings."""
    if not ids:
        return {}
    rows = MemoryRecord.objects.filter(workspace=workspace, pk__in=ids).defer("embedding")
    return {row.pk: row for row in rows}

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from policies.models import Workspace
from portal.errors import ValidationFailed
from recall.models import ACTOR_KINDS, Actor, MemoryRecord
from recall.runtime import embedder, token_estimator


def actor_parse(actor_id: str) -> tuple[str, str]:
    kind, sep, name = actor_id.partition(":")
    if not sep or not name or kind not in ACTOR_KINDS or len(name) > 200:
        raise ValidationFailed(
            {
                "actorId": f"Use kind:name with a kind among {', '.join(ACTOR_KINDS)} "
                f"(for example user:ada); got {actor_id!r}."
            }
        )
    return kind, name


def actor_get_or_create(*, workspace: Workspace, actor_id: str) -> Actor:
    kind, name = actor_parse(actor_id)
    actor, _ = Actor.objects.get_or_create(workspace=workspace, kind=kind, name=name)
    return actor


def memory_records_build(
    *, workspace: Workspace, actor: Actor, items: Sequence[dict[str, Any]]
) -> list[MemoryRecord]:
    """Unsaved rows with embeddings and token counts filled in (one embedder call per batch)."""
    vectors = embedder().embed([item["content"] for item in items])
    count = token_estimator()
    now = timezone.now()
    model = embedder().model_name
    return [
        MemoryRecord(
            workspace=workspace,
            actor=actor,
            embedding=vector,
            embedding_model=model,
            token_count=count(item["content"]),
            created_at=item.get("created_at") or now,
            **{k: v for k, v in item.items() if k != "created_at"},
        )
        for item, vector in zip(items, vectors, strict=True)
    ]


@transaction.atomic
def memory_create_many(
    *, workspace: Workspace, actor: Actor, items: Sequence[dict[str, Any]]
) -> list[MemoryRecord]:
    rows = memory_records_build(workspace=workspace, actor=actor, items=items)
    return MemoryRecord.objects.bulk_create(rows, batch_size=500)

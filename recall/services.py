from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from audit.models import EventType
from audit.services import (
    audit_event_record,
)
from portal.db.cursors import StoredVector
from portal.errors import ConflictError, DomainError, UnprocessableError, ValidationFailed
from portal.models import Workspace
from portal.tasks import eager, enqueue
from recall.actor_ids import ActorIdError, normalize_actor_id, split_actor_id
from recall.engine.vectors import memory_vectors_write
from recall.models import Actor, LifecycleStatus, MemoryRecord
from recall.runtime import embedder, embedder_model, token_estimator


def actor_parse(actor_id: str) -> tuple[str, str]:
    """The canonical (kind, name) of an actor id (``recall.actor_ids``), or a 400 naming it."""
    try:
        return split_actor_id(actor_id)
    except ActorIdError as exc:
        raise ValidationFailed({"actorId": f"{exc} Got {actor_id!r}."}) from None


def actor_normalize(actor_id: str) -> str:
    """The canonical ``kind:name`` of an actor id, or a 400 naming it."""
    kind, name = actor_parse(actor_id)
    return f"{kind}:{name}"


def actor_get_or_create(*, workspace: Workspace, actor_id: str) -> Actor:
    kind, name = actor_parse(actor_id)
    actor, _ = Actor.objects.get_or_create(workspace=workspace, kind=kind, name=name)
    return actor


def actor_check_not_erased(actor: Actor) -> None:
    """Refuse to add memories to an erased actor (a tombstone stays empty)."""
    if actor.erased_at is not None:
        raise ConflictError(
            f"{actor.external_id} was erased on {actor.erased_at:%Y-%m-%d %H:%M} UTC; "
            "no memory can be added for it.",
            {"actorId": actor.external_id, "erasedAt": actor.erased_at.isoformat()},
            code="ACTOR_ERASED",
        )


def memory_records_build(
    *, workspace: Workspace, actor: Actor, items: Sequence[dict[str, Any]]
) -> list[MemoryRecord]:
    """Unsaved rows with token counts filled in, not embedded yet (``memory_create_many``)."""
    count = token_estimator()
    now = timezone.now()
    return [
        MemoryRecord(
            workspace=workspace,
            actor=actor,
            embedding=None,
            embedding_model="",
            token_count=count(item["content"]),
            created_at=item.get("created_at") or now,
            # An imported stale memory starts its retention period now unless it says when.
            stale_since=(item.get("stale_since") or now)
            if item.get("lifecycle_status") == "stale"
            else None,
            **{k: v for k, v in item.items() if k not in ("created_at", "stale_since")},
        )
        for item in items
    ]


@transaction.atomic
def memory_create_many(
    *, workspace: Workspace, actor: Actor, items: Sequence[dict[str, Any]]
) -> list[MemoryRecord]:
    """Write the rows and have them embedded: by the embedding job (a worker) once they are
    committed, or, without a broker, here before they are written, so each row is written
    once with its vector (the job would rewrite every row, and every index entry, to add it).
    """
    rows = memory_records_build(workspace=workspace, actor=actor, items=items)
    if eager():
        _embedded(rows)
        return MemoryRecord.objects.bulk_create(rows, batch_size=500)
    rows = MemoryRecord.objects.bulk_create(rows, batch_size=500)
    memories_embed_later(rows)
    return rows


def _embedded(rows: Sequence[MemoryRecord]) -> None:
    """Give unsaved rows their vectors from the configured embedder (each element the float4
    PostgreSQL stores, as ``memory_embed`` writes it)."""
    current = embedder()
    for start in range(0, len(rows), EMBED_BATCH):
        chunk = rows[start : start + EMBED_BATCH]
        vectors = current.embed([row.content for row in chunk])
        for row, vector in zip(chunk, vectors, strict=True):
            row.embedding = StoredVector(vector)
            row.embedding_model = current.model_name


# --- embedding ----------------------------------------------------------------------------------

EMBED_BATCH = 100


def memories_embed_later(rows: Sequence[MemoryRecord]) -> None:
    """Queue the embedding job for freshly written rows (see ``portal.tasks.enqueue``).

    In eager mode the job has run when this returns, so the rows are refreshed with the
    model that embedded them.
    """
    ids = [row.pk for row in rows]
    if not ids:
        return
    # An unreachable queue does not fail the write: the memories stay pending, and the
    # reembed sweep embeds them (a client's retry must not save them twice).
    enqueue(
        "recall.embed_memories", ids, deferred="the reembed sweep embeds the memories left pending"
    )
    if eager():
        models = dict(MemoryRecord.objects.filter(pk__in=ids).values_list("pk", "embedding_model"))
        for row in rows:
            row.embedding_model = models.get(row.pk, row.embedding_model)


def memory_embed(*, ids: Sequence[int]) -> int:
    """Embed, with the configured embedder, those of ``ids`` it has not embedded; idempotent.

    Rows are read, embedded outside any transaction (a semantic model takes its time), then
    written one statement per batch, guarded so that only the content that was embedded gets
    its vector. Returns how many rows were written.
    """
    model = embedder_model()
    written = 0
    for start in range(0, len(ids), EMBED_BATCH):
        chunk = list(ids[start : start + EMBED_BATCH])
        rows = list(
            MemoryRecord.objects.filter(pk__in=chunk)
            .exclude(embedding_model=model)
            .values_list("pk", "content")
        )
        if not rows:
            continue
        vectors = embedder().embed([content for _, content in rows])
        with transaction.atomic():
            written += memory_vectors_write(model=model, rows=rows, vectors=vectors)
    return written


# --- memory writes ------------------------------------------------------------------------------


ACTOR_KEY = "actor_external_id"  # an item's own actorId (import lines may name theirs)


@transaction.atomic
def memory_import(
    *,
    workspace: Workspace,
    actor_id: str | None,
    items: Sequence[dict[str, Any]],
    author: str,
) -> list[MemoryRecord]:
    """Create a batch of already-validated memories, all or nothing, one audit event per actor.

    An item may name its actor (``actorId``, as archive lines do): it must then be
    ``actor_id``, or, with ``actor_id`` None, it picks the actor. An item with an ``id`` is
    restored under that id (an archive written by the retention sweep), which must be free
    and one the database issued before; a new memory never chooses its id.
    """
    if actor_id is not None:
        actor_id = actor_normalize(actor_id)
    groups: dict[str, list[dict[str, Any]]] = {}
    errors: dict[str, str] = {}
    for index, item in enumerate(items):
        named = item.get(ACTOR_KEY)
        if named is not None:
            try:
                named = normalize_actor_id(named)
            except ActorIdError as exc:
                errors[f"memories[{index}].actorId"] = str(exc)
                continue
        if named is not None and actor_id is not None and named != actor_id:
            errors[f"memories[{index}].actorId"] = (
                f"This memory belongs to {named}, not to {actor_id}."
            )
        owner = actor_id if actor_id is not None else named
        if owner is None:
            errors[f"memories[{index}].actorId"] = "Name the actor (kind:name) of this memory."
            continue
        groups.setdefault(owner, []).append({k: v for k, v in item.items() if k != ACTOR_KEY})
    if errors:
        raise ValidationFailed(errors, "Some memories name the wrong actor; nothing was saved.")
    _check_restorable_ids([item["id"] for item in items if item.get("id") is not None])
    created: list[MemoryRecord] = []
    for owner, group in groups.items():
        actor = actor_get_or_create(workspace=workspace, actor_id=owner)
        # Locked, then checked: an erasure committing meanwhile is seen, not raced.
        actor = Actor.objects.select_for_update(no_key=True).get(pk=actor.pk)
        actor_check_not_erased(actor)
        rows = memory_create_many(workspace=workspace, actor=actor, items=group)
        audit_event_record(
            workspace=workspace,
            type=EventType.MEMORY_CHANGED,
            author=author,
            actor_id=actor.external_id,
            payload={
                "action": "created",
                "count": len(rows),
                "ids": [str(r.pk) for r in rows][:1000],
            },
        )
        created += rows
    return created


def _check_restorable_ids(ids: Sequence[int]) -> None:
    """Ids an import may restore: distinct within the batch (else 400), held by no memory now
    (else 409 MEMORY_ID_TAKEN), and issued by the database before (else 422
    MEMORY_ID_NOT_ISSUED: an id beyond the sequence would collide with a memory created
    later)."""
    if not ids:
        return

    def listed(refused: Iterable[int]) -> list[int]:
        return sorted(set(refused))[:20]

    def words(refused: list[int]) -> str:
        return ", ".join(str(pk) for pk in refused)

    leave_out = "Leave id out to import these as new memories."
    repeated = listed(pk for pk, n in Counter(ids).items() if n > 1)
    if repeated:
        raise ValidationFailed(
            {"id": f"Id {words(repeated)} is named more than once in this batch."},
            "Some memories name the same id; nothing was saved.",
        )
    taken = listed(MemoryRecord.objects.filter(pk__in=ids).values_list("pk", flat=True))
    if taken:
        raise ConflictError(
            f"A memory holds id {words(taken)} now; nothing was saved. {leave_out}",
            {"ids": taken, "fields": {"id": f"Id {words(taken)} is in use. {leave_out}"}},
            code="MEMORY_ID_TAKEN",
        )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT last_value, is_called FROM {MemoryRecord._meta.db_table}_id_seq")
        last_value, is_called = cursor.fetchone()
    issued = last_value if is_called else last_value - 1
    never = listed(pk for pk in ids if pk > issued)
    if never:
        raise UnprocessableError(
            "MEMORY_ID_NOT_ISSUED",
            f"This database never issued id {words(never)}: a memory restored under it would"
            f" collide with one created later; nothing was saved. {leave_out}",
            {"ids": never, "fields": {"id": f"Id {words(never)} was never issued. {leave_out}"}},
        )


def _check_status_change(memory: MemoryRecord, status: str) -> None:
    """Making a memory active again only undoes a suppression: a stale, disabled or expired
    memory reached that state for a reason (decay, an operator, its expiry) that an edit must
    not silently override."""
    if status == "active" and memory.lifecycle_status not in ("active", "suppressed"):
        raise ConflictError(
            f"Only a suppressed memory can be restored; this one is {memory.lifecycle_status}.",
            {"lifecycleStatus": memory.lifecycle_status},
        )


@transaction.atomic
def memory_update(*, memory: MemoryRecord, changes: dict[str, Any], author: str) -> MemoryRecord:
    """Apply a validated partial edit; content edits re-embed and re-count tokens.

    Only the edited columns are written, so hits recorded by concurrent recalls survive.
    """
    changed = {f: v for f, v in changes.items() if getattr(memory, f) != v}
    if not changed:
        return memory
    if "lifecycle_status" in changed:
        _check_status_change(memory, changed["lifecycle_status"])
    status = changed.get("lifecycle_status")
    columns = [field for field in changed if field != "lifecycle_status"]
    for field in columns:
        setattr(memory, field, changed[field])
    columns.append("updated_at")
    if status is not None:
        columns += _status_set(memory, status)
    if "content" in changed:
        # The old vector describes the old content: the memory waits for its embedding job.
        memory.embedding = None
        memory.embedding_model = ""
        memory.token_count = token_estimator()(memory.content)
        columns += ["embedding", "embedding_model", "token_count"]
    memory.save(update_fields=columns)
    _memory_event(memory, "updated", author, sorted(changed))
    if "content" in changed:
        memories_embed_later([memory])
    return memory


SUPPRESS_REASON_MAX = 500


def suppress_reason_clean(reason: str) -> str:
    """A suppression's reason as the event keeps it: trimmed, at most ``SUPPRESS_REASON_MAX``
    characters (a longer one is refused, not cut)."""
    reason = reason.strip()
    if len(reason) > SUPPRESS_REASON_MAX:
        raise ValidationFailed(
            {"reason": f"Keep the reason under {SUPPRESS_REASON_MAX} characters."},
            "The reason is too long; nothing was changed.",
        )
    return reason


@transaction.atomic
def memory_set_status(
    *, memory: MemoryRecord, status: str, author: str, reason: str = ""
) -> MemoryRecord:
    """Suppress a memory, or restore a suppressed one. A suppression's ``reason`` (why it must
    not be recalled) is kept in its ``memory.changed`` event."""
    _check_status_change(memory, status)
    reason = suppress_reason_clean(reason)
    if memory.lifecycle_status != status:
        columns = _status_set(memory, status)
        memory.save(update_fields=[*columns, "updated_at"])
        action = "suppressed" if status == "suppressed" else "restored"
        extra: dict[str, Any] = {"reason": reason} if reason else {}
        if action == "suppressed" and memory.suppressed_from:
            extra["previousStatus"] = memory.suppressed_from
        if action == "restored" and memory.lifecycle_status != "active":
            extra["restoredTo"] = memory.lifecycle_status
        _memory_event(memory, action, author, [], extra)
    return memory


def _status_set(memory: MemoryRecord, status: str) -> list[str]:
    """Put ``memory`` in ``status`` (``_check_status_change`` allowed it); the columns set.

    A suppression notes the status it hides when that is not active, and restoring gives it
    back: a stale or expired memory suppressed and restored is stale or expired again (its
    retention clock, ``stale_since``, kept), so suppressing cannot stand in for an operator's
    reactivation. Any other status clears the retention clock, but stale, which starts it."""
    previous = memory.lifecycle_status
    if status == "active" and previous == "suppressed":
        status = memory.suppressed_from or "active"
    memory.lifecycle_status = status
    memory.suppressed_from = previous if status == "suppressed" and previous != "active" else ""
    if status == "stale":
        memory.stale_since = memory.stale_since or timezone.now()
    elif status != "suppressed":
        memory.stale_since = None
    return ["lifecycle_status", "suppressed_from", "stale_since"]


class ExpiryPast(DomainError):
    """A new expiry that is not in the future: well formed, but it would undo the reactivation
    at once (a fact of the clock, not of the request's shape)."""

    status = 422

    def __init__(self) -> None:
        super().__init__(
            "EXPIRY_PAST",
            "The new expiry is not in the future; nothing was changed.",
            {
                "fields": {
                    "expiresAt": "Give a time in the future: a memory past its expiry is not"
                    " recalled, and the next expiry sweep would expire it again."
                }
            },
        )


# The statuses the lifecycle sweeps leave a memory in, which an operator may undo one by one.
REACTIVATABLE = (LifecycleStatus.STALE, LifecycleStatus.EXPIRED)


@transaction.atomic
def memory_reactivate(
    *,
    memory: MemoryRecord,
    author: str,
    expires_at: datetime | None = None,
    clear_expiry: bool = False,
) -> MemoryRecord:
    """Make a stale or expired memory active again (operators): its retention clock
    (``stale_since``) is cleared, and so is an expiry already past, unless ``expires_at``
    gives a new one (in the future) or ``clear_expiry`` clears any. Left past, the expiry
    would keep it out of recall and the next expiry sweep would expire it again at once; an
    expiry still ahead is kept.

    Any other status is a 409 naming it (a suppressed memory is restored, not reactivated).
    """
    # Locked and read again: a sweep or another operator may have moved it since it was read.
    locked = MemoryRecord.objects.select_for_update(no_key=True).get(pk=memory.pk)
    previous = locked.lifecycle_status
    if previous not in REACTIVATABLE:
        raise ConflictError(
            f"Only a stale or expired memory can be reactivated; memory {memory.pk} is"
            f" {previous}."
            + (" Restore it instead." if previous == LifecycleStatus.SUPPRESSED else ""),
            {"lifecycleStatus": previous},
            code="NOT_REACTIVATABLE",
        )
    now = timezone.now()
    if expires_at is not None and expires_at <= now:
        raise ExpiryPast()
    expiry = locked.expires_at
    if expires_at is not None:
        expiry = expires_at
    elif clear_expiry or (expiry is not None and expiry <= now):
        expiry = None
    changed = ["lifecycle_status"]
    if locked.stale_since is not None:
        changed.append("stale_since")
    if expiry != locked.expires_at:
        changed.append("expires_at")
    # Through an UPDATE of the filtered columns: the funnel cache's triggers see the change
    # (recall.engine.funnel_cache), so no cached recall leaves the memory out.
    # Its decay clock starts again now, or the next decay sweep would make it stale at once.
    changed.append("reactivated_at")
    memory.lifecycle_status = LifecycleStatus.ACTIVE
    memory.stale_since = None
    memory.expires_at = expiry
    memory.reactivated_at = now
    memory.save(
        update_fields=[
            "lifecycle_status", "stale_since", "expires_at", "reactivated_at", "updated_at",
        ]
    )  # fmt: skip
    _memory_event(memory, "reactivated", author, changed, {"previousStatus": previous})
    return memory


@transaction.atomic
def memory_delete(*, memory: MemoryRecord, author: str) -> None:
    _memory_event(memory, "deleted", author, [])
    memory.delete()


def _memory_event(
    memory: MemoryRecord,
    action: str,
    author: str,
    fields: list[str],
    extra: dict[str, Any] | None = None,
) -> None:
    # The event names the memory and what changed, never its content: the trail is exported.
    audit_event_record(
        workspace=memory.workspace,
        type=EventType.MEMORY_CHANGED,
        author=author,
        actor_id=memory.actor.external_id,
        payload={"action": action, "ids": [str(memory.pk)], "fields": fields, **(extra or {})},
    )

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.utils import timezone

from audit.chain import GENESIS_HASH, ChainLink, ChainVerdict, event_hash, verify_links
from audit.models import AuditChainHead, AuditEvent
from policies.models import Workspace


def _hashed_fields(
    *,
    workspace_slug: str,
    type: str,
    occurred_at: Any,
    author: str,
    workload_id: uuid.UUID | None,
    environment: str,
    actor_id: str,
    payload: dict[str, Any],
) -> dict[str, Any]:
    return {
        "type": type,
        "occurredAt": occurred_at.isoformat(),
        "workspace": workspace_slug,
        "author": author,
        "workloadId": str(workload_id) if workload_id else None,
        "environment": environment,
        "actorId": actor_id,
        "payload": payload,
    }


def audit_event_record(
    *,
    workspace: Workspace,
    type: str,
    author: str,
    payload: dict[str, Any],
    workload_id: uuid.UUID | None = None,
    environment: str = "",
    actor_id: str = "",
) -> AuditEvent:
    """Append one event to the workspace's chain.

    Must run inside the caller's transaction, so the event commits (or not) with the change it
    records. The chain head's row lock orders concurrent appends within a workspace.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit_event_record must be called inside transaction.atomic()")
    head = AuditChainHead.objects.select_for_update().filter(workspace=workspace).first()
    if head is None:
        AuditChainHead.objects.get_or_create(
            workspace=workspace, defaults={"last_hash": GENESIS_HASH}
        )
        head = AuditChainHead.objects.select_for_update().get(workspace=workspace)
    occurred_at = timezone.now()
    fields = _hashed_fields(
        workspace_slug=workspace.slug,
        type=type,
        occurred_at=occurred_at,
        author=author,
        workload_id=workload_id,
        environment=environment,
        actor_id=actor_id,
        payload=payload,
    )
    digest = event_hash(head.last_hash, fields)
    event = AuditEvent(
        workspace=workspace,
        type=type,
        occurred_at=occurred_at,
        author=author,
        workload_id=workload_id,
        environment=environment,
        actor_id=actor_id,
        payload=payload,
        prev_hash=head.last_hash,
        hash=digest,
    )
    # The event and the new chain tip in one statement: one round trip on the recall hot path.
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH ins AS (
                INSERT INTO {AuditEvent._meta.db_table}
                    (workspace_id, type, occurred_at, author, workload_id, environment, actor_id,
                     payload, prev_hash, hash)
                VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s)
                RETURNING id
            )
            UPDATE {AuditChainHead._meta.db_table} SET last_hash = %s, length = length + 1
            WHERE id = %s
            RETURNING (SELECT id FROM ins)
            """,
            [
                workspace.pk, type, occurred_at, author, workload_id, environment, actor_id,
                json.dumps(payload, cls=DjangoJSONEncoder), head.last_hash, digest, digest, head.pk,
            ],
        )  # fmt: skip
        event.pk = cursor.fetchone()[0]
    return event


def _links(workspace: Workspace) -> Iterator[ChainLink]:
    events = AuditEvent.objects.filter(workspace=workspace).order_by("id")
    for event in events.iterator(chunk_size=2000):
        yield ChainLink(
            id=event.pk,
            prev_hash=event.prev_hash,
            hash=event.hash,
            fields=_hashed_fields(
                workspace_slug=workspace.slug,
                type=event.type,
                occurred_at=event.occurred_at,
                author=event.author,
                workload_id=event.workload_id,
                environment=event.environment,
                actor_id=event.actor_id,
                payload=event.payload,
            ),
        )


def audit_chain_verify(*, workspace: Workspace) -> ChainVerdict:
    verdict = verify_links(_links(workspace))
    if not verdict.ok:
        return verdict
    # A deleted tail leaves a valid-looking chain; the head remembers where it should end.
    head = AuditChainHead.objects.filter(workspace=workspace).first()
    if head is not None and (head.length != verdict.checked):
        return ChainVerdict(False, verdict.checked, None, "events are missing from the end")
    return verdict

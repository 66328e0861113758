"""Migration ``audit.0018``: the query texts that older recalls kept inside their hashed
payloads move out, beside their events, and the chain still verifies (its hashes, and so its
anchors, unchanged); the sealed events stay as tamper-evident as any.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.db import transaction

from audit.anchors import audit_anchor_record
from audit.models import AuditChainHead, AuditEvent, EventType, StoredQuery
from audit.services import ChainTip, audit_chain_verify, audit_event_append, audit_event_record
from recall.models import Actor
from tests.helpers import database_owner, owner_execute

pytestmark = pytest.mark.django_db

MIGRATION = import_module("audit.migrations.0018_queries_beside_events")


def legacy_recall(workspace: Any, actor_id: str, query: str, *, lane: int) -> AuditEvent:
    """A context.assembled event as recalls recorded them before: its query in the payload."""
    tip = AuditChainHead.objects.filter(workspace=workspace, lane=lane).first()
    return audit_event_append(
        workspace=workspace,
        tip=ChainTip.of(tip.last_hash if tip else None, lane),
        type=EventType.ASSEMBLED,
        author="token:agent",
        actor_id=actor_id,
        environment="prod",
        payload={"envelopeId": f"env-{query}", "topK": 5, "query": query, "queryHash": "h"},
    )


def migrate() -> None:
    with database_owner():
        MIGRATION.move_queries_out(apps, None)


@pytest.fixture
def anchors(tmp_path: Path, settings: Any) -> Path:
    path = tmp_path / "anchors.jsonl"
    settings.AUDIT_ANCHOR_FILE = str(path)
    return path


@pytest.fixture
def legacy(operator: Any) -> list[AuditEvent]:
    workspace = operator.workspace
    Actor.objects.create(workspace=workspace, kind="user", name="ada")
    Actor.objects.create(workspace=workspace, kind="user", name="gone")
    events = [
        legacy_recall(workspace, "user:ada", "ada asks on lane 1", lane=1),
        legacy_recall(workspace, "user:gone", "gone asked once", lane=1),
        legacy_recall(workspace, "user:ada", "ada asks on lane 2", lane=2),
    ]
    with transaction.atomic():
        events.append(
            audit_event_record(workspace=workspace, type="workload.created", author="t", payload={})
        )
    events.append(legacy_recall(workspace, "user:ada", "ada asks again", lane=1))
    Actor.objects.filter(name="gone").update(erased_at="2026-01-01T00:00:00Z")
    assert audit_chain_verify(workspace=workspace).ok
    return events


class QueriesMovedOutTests:
    def test_texts_leave_the_payloads_and_the_chain_and_its_anchors_hold(
        self, operator, legacy, anchors
    ):
        audit_anchor_record()
        hashes = dict(AuditEvent.objects.values_list("pk", "hash"))

        migrate()

        assert audit_chain_verify(workspace=operator.workspace).ok
        assert dict(AuditEvent.objects.values_list("pk", "hash")) == hashes
        assert not AuditEvent.objects.filter(payload__has_key="query").exists()
        sealed = AuditEvent.objects.exclude(seal="")
        assert sorted(sealed.values_list("pk", flat=True)) == sorted(
            e.pk for e in legacy if e.type == EventType.ASSEMBLED
        )
        assert dict(StoredQuery.objects.values_list("event_id", "text")) == {
            legacy[0].pk: "ada asks on lane 1",
            legacy[2].pk: "ada asks on lane 2",
            legacy[4].pk: "ada asks again",
        }  # the erased actor's query is dropped

    def test_it_can_run_again(self, operator, legacy):
        migrate()
        migrate()

        assert audit_chain_verify(workspace=operator.workspace).ok
        assert StoredQuery.objects.count() == 3

    def test_a_sealed_event_changed_without_the_key_breaks_the_chain(self, operator, legacy):
        migrate()
        owner_execute(
            "UPDATE audit_auditevent SET payload = payload || '{\"topK\": 50}' WHERE id = %s",
            [legacy[2].pk],
        )

        verdict = audit_chain_verify(workspace=operator.workspace)

        assert (verdict.ok, verdict.first_broken_id) == (False, legacy[2].pk)

    def test_a_sealed_events_seal_removed_breaks_the_chain(self, operator, legacy):
        migrate()
        owner_execute("UPDATE audit_auditevent SET seal = '' WHERE id = %s", [legacy[0].pk])

        verdict = audit_chain_verify(workspace=operator.workspace)

        assert (verdict.ok, verdict.first_broken_id) == (False, legacy[0].pk)

    def test_a_lane_that_does_not_hold_is_left_as_it_is(self, operator, legacy):
        owner_execute(
            "UPDATE audit_auditevent SET author = 'mallory' WHERE id = %s", [legacy[1].pk]
        )

        migrate()

        lane_1 = AuditEvent.objects.filter(lane=1)
        assert all("query" in e.payload and not e.seal for e in lane_1)
        moved = AuditEvent.objects.get(pk=legacy[2].pk)  # lane 2 holds
        assert "query" not in moved.payload and moved.seal
        verdict = audit_chain_verify(workspace=operator.workspace)
        assert (verdict.ok, verdict.first_broken_id) == (False, legacy[1].pk)

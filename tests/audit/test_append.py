from __future__ import annotations

import pytest
from django.db import transaction
from django.utils import timezone

from audit.models import AuditChainHead, AuditEvent, Injection
from audit.services import (
    ChainTip,
    Injections,
    audit_chain_verify,
    audit_event_append,
    audit_event_record,
)
from tests.recall import factories

pytestmark = pytest.mark.django_db


def tip_of(workspace) -> ChainTip:
    return ChainTip(AuditChainHead.objects.get(workspace=workspace, lane=0).last_hash)


class CompareAndSwapAppendTests:
    def test_it_appends_on_the_current_tip(self, workspace_a):
        before = AuditEvent.objects.filter(workspace=workspace_a).count()

        event = audit_event_append(
            workspace=workspace_a, tip=tip_of(workspace_a), type="context.assembled",
            author="token:agent", payload={"n": 1},
        )  # fmt: skip

        assert AuditEvent.objects.filter(workspace=workspace_a).count() == before + 1
        assert tip_of(workspace_a).last_hash == event.hash
        assert audit_chain_verify(workspace=workspace_a).ok

    def test_a_stale_tip_is_retried_and_the_guarded_statement_runs_once(self, workspace_a):
        memory = factories.memory(workspace_a, content="counted once")
        stale = tip_of(workspace_a)
        with transaction.atomic():
            audit_event_record(
                workspace=workspace_a, type="memory.changed", author="user:x", payload={}
            )

        audit_event_append(
            workspace=workspace_a, tip=stale, type="context.assembled", author="token:agent",
            payload={"n": 2}, work=[Injections([memory.pk])],
        )  # fmt: skip

        assert Injection.objects.filter(memory_id=memory.pk).count() == 1
        assert audit_chain_verify(workspace=workspace_a).ok

    def test_a_lost_race_writes_nothing_for_that_attempt(self, workspace_a):
        memory = factories.memory(workspace_a, content="not counted")
        stale = ChainTip("f" * 64)
        events = AuditEvent.objects.filter(workspace=workspace_a).count()

        from audit.services import _append

        result = _append(
            stale, workspace=workspace_a, type="context.assembled", author="token:agent",
            payload={}, workload_id=None, environment="", actor_id="",
            work=[Injections([memory.pk])],
        )  # fmt: skip

        assert result == tip_of(workspace_a)  # nothing written; the tip it lost to, for the retry
        assert not Injection.objects.filter(memory_id=memory.pk).exists()
        assert AuditEvent.objects.filter(workspace=workspace_a).count() == events


class PayloadEncodingTests:
    def test_a_payload_with_a_uuid_and_a_datetime_is_stored_and_verifies(self, workspace_a):
        import uuid

        with transaction.atomic():
            audit_event_record(
                workspace=workspace_a, type="memory.changed", author="user:x",
                payload={"id": uuid.uuid4(), "at": timezone.now()},
            )  # fmt: skip

        assert audit_chain_verify(workspace=workspace_a).ok

"""Recording a workspace's events at a past time (audit_backdated, for the demo's history)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from audit.models import AuditChainHead, AuditEvent
from audit.services import audit_backdated, audit_chain_verify, audit_event_record
from tests.helpers import database_owner

pytestmark = pytest.mark.django_db


def record(workspace, n: int) -> AuditEvent:
    with transaction.atomic():
        return audit_event_record(
            workspace=workspace, type="workspace.renamed", author="system:test", payload={"n": n}
        )


def empty_chain(workspace) -> None:
    """workspace_create recorded the floor now; the tests start their chains in the past."""
    with database_owner():  # the application may not delete audit rows
        AuditEvent.objects.filter(workspace=workspace).delete()
        AuditChainHead.objects.filter(workspace=workspace).delete()


class AuditBackdatedTests:
    def test_events_inside_the_block_occur_at_its_time(self, workspace_a):
        empty_chain(workspace_a)
        at = timezone.now() - timedelta(days=2)

        with audit_backdated(slug=workspace_a.slug, at=at):
            inside = record(workspace_a, 1)
        after = record(workspace_a, 2)

        assert inside.occurred_at == at
        assert AuditEvent.objects.get(pk=inside.pk).occurred_at == at
        assert after.occurred_at > timezone.now() - timedelta(minutes=1)

    def test_the_chain_of_backdated_events_verifies(self, workspace_b):
        empty_chain(workspace_b)
        start = timezone.now() - timedelta(days=5)

        for day in range(3):
            with audit_backdated(slug=workspace_b.slug, at=start + timedelta(days=day)):
                record(workspace_b, day)

        assert audit_chain_verify(workspace=workspace_b).ok

    def test_another_workspace_s_events_keep_the_real_time(self, workspace_a, workspace_b):
        empty_chain(workspace_a)
        at = timezone.now() - timedelta(days=1)

        with audit_backdated(slug=workspace_a.slug, at=at):
            other = record(workspace_b, 1)

        assert other.occurred_at > at

    def test_it_refuses_a_time_before_the_chain_s_latest_event(self, workspace_a):
        with pytest.raises(ValueError, match="before the chain's latest event"):
            with audit_backdated(slug=workspace_a.slug, at=timezone.now() - timedelta(days=1)):
                pass

    def test_it_refuses_a_time_in_the_future(self, workspace_a):
        with pytest.raises(ValueError, match="future"):
            with audit_backdated(slug=workspace_a.slug, at=timezone.now() + timedelta(hours=1)):
                pass

"""Reactivating a stale or expired memory (operators): it becomes active, its retention clock
and a past expiry are cleared (or a new expiry set), one ``memory.changed`` event records
it, recall carries it again though it had cached its absence, and nothing else is
reactivated."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from audit.models import AuditEvent
from maintenance.services import maintenance_start
from recall.engine import read as recall_read
from recall.models import FunnelCache, MemoryRecord
from tests.helpers import error_of, recall
from tests.maintenance.helpers import ago, memory
from tests.module_personas import module_scoped

# The personas the tests here act as, made once per module.
workspace_a, operator, made_first = module_scoped("workspace_a", "operator")

pytestmark = pytest.mark.django_db


def reactivate(persona: Any, pk: Any, body: Any = None) -> Any:
    return persona.api().post(f"/v1/memory/memories/{pk}/reactivate", body, format="json")


def state(workspace: Any) -> tuple[Any, ...]:
    rows = MemoryRecord.objects.filter(workspace=workspace).order_by("pk")
    return (
        list(rows.values_list("pk", "lifecycle_status", "stale_since", "expires_at", "updated_at")),
        AuditEvent.objects.count(),
    )


def last_event(workspace: Any) -> AuditEvent:
    return AuditEvent.objects.filter(workspace=workspace).order_by("-id").first()


class ReactivateTests:
    def test_a_stale_memory_becomes_active_and_its_retention_clock_is_cleared(
        self, operator, workspace_a
    ):
        pk = memory(workspace_a, "always answer in French", lifecycle_status="stale",
                    stale_since=ago(days=20))  # fmt: skip

        response = reactivate(operator, pk)

        assert response.status_code == 200, response.content
        body = response.json()
        assert (body["lifecycleStatus"], body["staleSince"], body["expiresAt"]) == (
            "active", None, None,
        )  # fmt: skip
        row = MemoryRecord.objects.get(pk=pk)
        assert (row.lifecycle_status, row.stale_since) == ("active", None)
        event = last_event(workspace_a)
        assert (event.type, event.author, event.actor_id) == (
            "memory.changed", "token:olga-token", "user:ada",
        )  # fmt: skip
        assert event.payload == {
            "action": "reactivated",
            "ids": [str(pk)],
            "fields": ["lifecycle_status", "stale_since", "reactivated_at"],
            "previousStatus": "stale",
        }
        assert "French" not in str(event.payload)

    def test_its_decay_clock_starts_again(self, operator, workspace_a):
        pk = memory(workspace_a, "always answer in French", lifecycle_status="stale",
                    stale_since=ago(days=20), created_at=ago(days=30))  # fmt: skip
        reactivate(operator, pk)

        def decay_lists() -> set[int]:
            run = maintenance_start(
                workspace=workspace_a, sweep="decay", mode="preview", author="system:test"
            )
            return set(run.items.values_list("memory_id", flat=True))

        # never recalled in thirty days, yet not due: the clock starts at the reactivation
        assert pk not in decay_lists()
        # a week later, not recalled meanwhile, its score has fallen below the threshold again
        MemoryRecord.objects.filter(pk=pk).update(reactivated_at=ago(days=7))
        assert pk in decay_lists()

    def test_an_expired_memory_past_its_expiry_loses_it_so_it_is_not_expired_again_at_once(
        self, operator, workspace_a
    ):
        pk = memory(workspace_a, "offer", lifecycle_status="expired", expires_at=ago(hours=2))

        body = reactivate(operator, pk).json()

        assert (body["lifecycleStatus"], body["expiresAt"]) == ("active", None)
        assert last_event(workspace_a).payload["fields"] == [
            "lifecycle_status", "expires_at", "reactivated_at",
        ]  # fmt: skip

    def test_a_new_expiry_replaces_it_and_one_still_ahead_is_kept(self, operator, workspace_a):
        later = timezone.now() + timedelta(days=30)
        expired = memory(workspace_a, "offer", lifecycle_status="expired", expires_at=ago(hours=2))
        ahead = memory(workspace_a, "note", lifecycle_status="stale", stale_since=ago(days=1),
                       expires_at=later)  # fmt: skip

        renewed = reactivate(operator, expired, {"expiresAt": later.isoformat()})
        kept = reactivate(operator, ahead)

        assert MemoryRecord.objects.get(pk=expired).expires_at == later
        assert renewed.json()["lifecycleStatus"] == "active"
        assert MemoryRecord.objects.get(pk=ahead).expires_at == later
        assert "expires_at" not in last_event(workspace_a).payload["fields"]
        assert kept.status_code == 200

    def test_null_clears_an_expiry_still_ahead(self, operator, workspace_a):
        pk = memory(workspace_a, "note", lifecycle_status="stale",
                    expires_at=timezone.now() + timedelta(days=3))  # fmt: skip
        assert reactivate(operator, pk, {"expiresAt": None}).json()["expiresAt"] is None

    @pytest.mark.parametrize("status", ["active", "inactive", "suppressed", "disabled"])
    def test_any_other_status_is_a_409_naming_it(self, operator, workspace_a, status):
        pk = memory(workspace_a, "note", lifecycle_status=status)
        before = state(workspace_a)
        error = error_of(reactivate(operator, pk), 409, "NOT_REACTIVATABLE")
        assert f"memory {pk} is {status}" in error["message"]
        assert error["details"] == {"lifecycleStatus": status}
        assert state(workspace_a) == before

    @pytest.mark.parametrize(
        "body",
        [
            {"expiresAt": "yesterday"},
            {"expires_at": None},
            ["expiresAt"],
        ],
    )
    def test_a_bad_body_is_a_400_and_changes_nothing(self, operator, workspace_a, body):
        pk = memory(workspace_a, "offer", lifecycle_status="expired", expires_at=ago(hours=2))
        before = state(workspace_a)
        error_of(reactivate(operator, pk, body), 400, "INVALID_REQUEST")
        assert state(workspace_a) == before

    def test_a_new_expiry_in_the_past_is_a_422_and_changes_nothing(self, operator, workspace_a):
        pk = memory(workspace_a, "offer", lifecycle_status="expired", expires_at=ago(hours=2))
        before = state(workspace_a)
        error = error_of(reactivate(operator, pk, {"expiresAt": "2001-01-01T00:00:00Z"}), 422,
                         "EXPIRY_PAST")  # fmt: skip
        assert "in the future" in error["details"]["fields"]["expiresAt"]
        assert state(workspace_a) == before

    @pytest.mark.parametrize("who", ["editor", "viewer"])
    def test_only_operators_reactivate_and_others_are_told_the_role(
        self, request, who, workspace_a
    ):
        persona = request.getfixturevalue(who)
        pk = memory(workspace_a, "note", lifecycle_status="stale", stale_since=ago(days=1))
        before = state(workspace_a)
        error = error_of(reactivate(persona, pk), 403, "PERMISSION_DENIED")
        assert "operator role" in error["message"] and f"you are {who}" in error["message"]
        assert state(workspace_a) == before

    def test_an_outsider_gets_404(self, outsider, workspace_a):
        pk = memory(workspace_a, "note", lifecycle_status="stale", stale_since=ago(days=1))
        before = state(workspace_a)
        error_of(reactivate(outsider, pk), 404, "NOT_FOUND")
        error_of(reactivate(outsider, "abc"), 404, "NOT_FOUND")
        assert state(workspace_a) == before

    def test_recall_carries_it_again_though_it_cached_its_absence(
        self, operator, editor, workload_a, workspace_a, monkeypatch
    ):
        monkeypatch.setattr(recall_read, "FUNNEL_CACHE_MIN", 1)  # every recall keeps its funnel
        stale = memory(workspace_a, "release summary preferences: bullet points",
                       lifecycle_status="stale", stale_since=ago(days=1))  # fmt: skip
        expired = memory(workspace_a, "release summary every Friday",
                         lifecycle_status="expired", expires_at=ago(hours=1))  # fmt: skip
        memory(workspace_a, "release summary preferences, active")

        def carried() -> set[int]:
            return {int(entry["id"]) for entry in recall(editor, workload_a)["entries"]}

        assert not carried() & {stale, expired}
        assert FunnelCache.objects.filter(actor__name="ada").exists()
        for pk in (stale, expired):
            assert reactivate(operator, pk).status_code == 200

        assert {stale, expired} <= carried()

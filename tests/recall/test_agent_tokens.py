"""An agent's token on the recall path: its binding (workloads, environments), its expiry, its
revocation and its rotation hold for the token the process remembers (RecallView's) as for
one it looks up, with nothing recorded for a refused call; its scopes, and its own rate
limits.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit.models import AuditEvent, EventType
from policies.services import workload_create
from portal.models import ApiToken, Role
from recall.models import MemoryRecord
from team.services import api_token_create, api_token_revoke, api_token_rotate
from tests.helpers import error_of, recall_body
from tests.module_personas import module_scoped
from tests.recall import factories

# The personas and workload the tests here act as and on, made once per module.
workspace_a, agent, workload_a, made_first = module_scoped("workspace_a", "agent", "workload_a")

RECALL = "/v1/memory/actors/user:ada/recall"
MEMORIES = "/v1/memory/actors/user:ada/memories"
MEMORY = {"content": "Prefers short answers", "memoryType": "preference", "sourceKind": "user"}


def _assembled() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM audit_auditevent WHERE type = %s", [EventType.ASSEMBLED]
        )
        return int(cursor.fetchone()[0])


def _client(raw: str) -> Any:
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def other_workload(workspace_a: Any) -> Any:
    return workload_create(workspace=workspace_a, name="billing-bot", author="system:test")


@pytest.fixture
def bound(workspace_a: Any, workload_a: Any) -> tuple[ApiToken, str]:
    """An agent token of workspace A bound to workload A in prod, and its secret; ada has
    memories to recall."""
    factories.memories(workspace_a, {"content": "release summary"}, {"content": "notes"})
    return api_token_create(
        workspace=workspace_a,
        name="support-agent",
        role=Role.AGENT,
        workloads=[workload_a.id],
        environments=["prod"],
        author="user:olga",
    )


class Remembering:
    """Recalls sent as the agent's process sends them, after its first: its token
    remembered, the connection left scoped to its workspace."""

    def post(self, raw: str, body: Any) -> Any:
        return _client(raw).post(RECALL, body, format="json")


@pytest.fixture
def taught(scope_kept: None, hits_fold_unasked: None, bound: Any, workload_a: Any) -> Remembering:
    """After the bound agent's first recall: its token remembered."""
    remembering = Remembering()
    first = remembering.post(bound[1], recall_body(workload_a))
    assert first.status_code == 200, first.content
    return remembering


class BindingTests:
    def test_a_bound_agent_recalls_its_workload_in_its_environment(self, bound, workload_a):
        response = _client(bound[1]).post(RECALL, recall_body(workload_a), format="json")

        assert response.status_code == 200, response.content
        assert response.json()["entries"]

    def test_another_workload_is_refused_naming_the_binding_and_nothing_is_recorded(
        self, bound, workload_a, other_workload
    ):
        before = _assembled()

        response = _client(bound[1]).post(RECALL, recall_body(other_workload), format="json")

        error = error_of(response, 403, "OUTSIDE_TOKEN_BINDING")
        assert str(workload_a.id) in error["message"] and "prod" in error["message"]
        assert "support-agent" in error["message"]
        assert error["details"]["boundWorkloads"] == [str(workload_a.id)]
        assert error["details"]["boundEnvironments"] == ["prod"]
        assert error["details"]["outside"] == ["workload"]
        assert _assembled() == before

    def test_another_environment_is_refused(self, bound, workload_a):
        before = _assembled()

        response = _client(bound[1]).post(
            RECALL, recall_body(workload_a, environment="staging"), format="json"
        )

        error = error_of(response, 403, "OUTSIDE_TOKEN_BINDING")
        assert error["details"]["outside"] == ["environment"]
        assert error["details"]["environment"] == "staging"
        assert _assembled() == before

    def test_with_its_token_remembered_a_call_outside_is_refused_with_nothing_recorded(
        self, taught, bound, workload_a, other_workload
    ):
        before = _assembled()

        outside = taught.post(bound[1], recall_body(other_workload))
        staging = taught.post(bound[1], recall_body(workload_a, environment="staging"))

        error_of(outside, 403, "OUTSIDE_TOKEN_BINDING")
        error_of(staging, 403, "OUTSIDE_TOKEN_BINDING")
        assert _assembled() == before

    def test_a_bound_agents_usual_recall_is_its_read_and_its_write_alone(
        self, taught, bound, workload_a
    ):
        with CaptureQueriesContext(connection) as queries:
            answer = taught.post(bound[1], recall_body(workload_a))

        assert answer.status_code == 200, answer.content
        assert len(queries.captured_queries) == 2, [q["sql"] for q in queries]

    def test_a_memory_write_names_no_workload_and_is_allowed(self, bound):
        response = _client(bound[1]).post(MEMORIES, MEMORY, format="json")

        assert response.status_code == 201, response.content
        assert response.json()["content"] == MEMORY["content"]


class ExpiryTests:
    def test_an_expired_token_is_a_401_token_expired(self, bound, workload_a):
        ApiToken.objects.filter(pk=bound[0].pk).update(expires_at=timezone.now())

        response = _client(bound[1]).post(RECALL, recall_body(workload_a), format="json")

        error = error_of(response, 401, "TOKEN_EXPIRED")
        assert "support-agent" in error["message"] and "expired" in error["message"]
        assert error["details"]["expiredAt"].endswith("Z")
        assert response["WWW-Authenticate"] == "Bearer"

    def test_a_token_that_expires_while_remembered_is_refused_at_its_next_call(
        self, taught, bound, workload_a
    ):
        before = _assembled()
        ApiToken.objects.filter(pk=bound[0].pk).update(expires_at=timezone.now())

        answer = taught.post(bound[1], recall_body(workload_a))

        error_of(answer, 401, "TOKEN_EXPIRED")
        assert _assembled() == before

    def test_a_token_not_expired_yet_works(self, bound, workload_a):
        later = timezone.now() + timedelta(days=1)
        ApiToken.objects.filter(pk=bound[0].pk).update(expires_at=later)

        response = _client(bound[1]).post(RECALL, recall_body(workload_a), format="json")

        assert response.status_code == 200, response.content

    def test_every_endpoint_refuses_an_expired_token(self, bound):
        ApiToken.objects.filter(pk=bound[0].pk).update(expires_at=timezone.now())

        error_of(_client(bound[1]).post(MEMORIES, MEMORY, format="json"), 401, "TOKEN_EXPIRED")
        assert not MemoryRecord.objects.filter(content=MEMORY["content"]).exists()


class RevocationTests:
    def test_a_revoked_agent_token_is_refused_at_its_next_call_while_remembered(
        self, taught, bound, workload_a
    ):
        before = _assembled()
        api_token_revoke(token=bound[0], author="user:olga")

        answer = taught.post(bound[1], recall_body(workload_a))

        error_of(answer, 401, "AUTHENTICATION_FAILED")
        assert _assembled() == before


class RotationTests:
    def test_the_old_secret_works_for_the_grace_then_is_refused(self, bound, workload_a):
        token, old = bound
        _, new = api_token_rotate(token=token, grace=timedelta(hours=1), author="user:olga")

        during = _client(old).post(RECALL, recall_body(workload_a), format="json")
        ApiToken.objects.filter(pk=token.pk).update(previous_valid_until=timezone.now())
        after = _client(old).post(RECALL, recall_body(workload_a), format="json")
        fresh = _client(new).post(RECALL, recall_body(workload_a), format="json")

        assert during.status_code == 200, during.content
        error = error_of(after, 401, "TOKEN_EXPIRED")
        assert "rotated" in error["message"] and error["details"]["rotated"] is True
        assert fresh.status_code == 200, fresh.content
        # both recalls by the old secret and the new are the same token's
        events = AuditEvent.objects.filter(type=EventType.ASSEMBLED).order_by("-pk")[:2]
        assert {event.author for event in events} == {"token:support-agent"}

    def test_while_remembered_the_old_secret_stops_at_the_end_of_its_grace(
        self, taught, bound, workload_a
    ):
        token, old = bound
        _, new = api_token_rotate(token=token, grace=timedelta(hours=1), author="user:olga")
        assert taught.post(old, recall_body(workload_a)).status_code == 200
        before = _assembled()
        ApiToken.objects.filter(pk=token.pk).update(previous_valid_until=timezone.now())

        after = taught.post(old, recall_body(workload_a))

        error_of(after, 401, "TOKEN_EXPIRED")
        assert _assembled() == before
        assert taught.post(new, recall_body(workload_a)).status_code == 200

    def test_no_grace_stops_the_old_secret_at_once(self, bound, workload_a):
        token, old = bound
        api_token_rotate(token=token, grace=timedelta(0), author="user:olga")

        error_of(_client(old).post(RECALL, recall_body(workload_a), format="json"), 401)

    def test_revoking_a_rotated_token_stops_both_secrets(self, bound, workload_a):
        token, old = bound
        _, new = api_token_rotate(token=token, grace=timedelta(hours=1), author="user:olga")
        api_token_revoke(token=token, author="user:olga")

        for secret in (old, new):
            response = _client(secret).post(RECALL, recall_body(workload_a), format="json")
            error_of(response, 401, "AUTHENTICATION_FAILED")


class ScopeTests:
    def test_an_agent_token_without_the_scope_is_refused_naming_it(self, workspace_a):
        _, raw = api_token_create(
            workspace=workspace_a, name="reader", role=Role.AGENT, scopes=["recall"]
        )

        response = _client(raw).post(MEMORIES, MEMORY, format="json")

        error = error_of(response, 403, "PERMISSION_DENIED")
        assert error["details"] == {
            "requiredScope": "memory.create",
            "scopes": ["recall"],
            "role": "agent",
        }
        assert not MemoryRecord.objects.exists()

    def test_a_recall_only_agent_still_recalls(self, workspace_a, workload_a):
        factories.memories(workspace_a, {"content": "release summary"})
        _, raw = api_token_create(
            workspace=workspace_a, name="reader", role=Role.AGENT, scopes=["recall"]
        )

        response = _client(raw).post(RECALL, recall_body(workload_a), format="json")

        assert response.status_code == 200, response.content


class AgentMemoryWriteTests:
    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("id", "123"),
            ("createdAt", "2020-01-01T00:00:00Z"),
            ("hitCount", 40),
            ("lastAccessedAt", "2020-01-01T00:00:00Z"),
        ],
    )
    def test_an_agent_writes_new_memories_never_restores_one(self, agent, field, value):
        body = {"memories": [MEMORY, {**MEMORY, field: value}]}

        response = agent.api().post(MEMORIES, body, format="json")

        error = error_of(response, 403, "PERMISSION_DENIED")
        assert error["details"]["fields"] == [field]
        assert not MemoryRecord.objects.exists()

    def test_an_editor_may_restore_what_an_agent_may_not(self, editor):
        response = editor.api().post(
            MEMORIES, {**MEMORY, "createdAt": "2020-01-01T00:00:00Z"}, format="json"
        )

        assert response.status_code == 201, response.content

    def test_an_agents_memory_is_written_under_its_tokens_name(self, agent):
        response = agent.api().post(MEMORIES, MEMORY, format="json")

        assert response.status_code == 201, response.content
        event = AuditEvent.objects.filter(type=EventType.MEMORY_CHANGED).latest("pk")
        assert event.author == "token:ada-agent"


class TokenRateLimitTests:
    def test_a_tokens_own_recall_limit_comes_before_its_workspaces(
        self, workspace_a, workload_a, settings
    ):
        factories.memories(workspace_a, {"content": "release summary"})
        workspace_a.recall_rate_per_minute = 100
        workspace_a.save(update_fields=["recall_rate_per_minute"])
        _, raw = api_token_create(
            workspace=workspace_a, name="slow", role=Role.AGENT, recall_rate_per_minute=1
        )
        client = _client(raw)

        first = client.post(RECALL, recall_body(workload_a), format="json")
        second = client.post(RECALL, recall_body(workload_a), format="json")

        assert first.status_code == 200, first.content
        error_of(second, 429, "THROTTLED")

    def test_without_its_own_it_has_the_workspaces(self, workspace_a, workload_a):
        factories.memories(workspace_a, {"content": "release summary"})
        workspace_a.recall_rate_per_minute = 1
        workspace_a.save(update_fields=["recall_rate_per_minute"])
        _, raw = api_token_create(workspace=workspace_a, name="plain", role=Role.AGENT)
        client = _client(raw)

        assert client.post(RECALL, recall_body(workload_a), format="json").status_code == 200
        error_of(client.post(RECALL, recall_body(workload_a), format="json"), 429)

    def test_a_tokens_own_call_limit_counts_every_call(self, workspace_a, settings):
        settings.API_RATE_PER_MINUTE = 100
        _, raw = api_token_create(
            workspace=workspace_a, name="chatty", role=Role.AGENT, api_rate_per_minute=2
        )
        client = _client(raw)

        answers = [client.post(MEMORIES, MEMORY, format="json") for _ in range(3)]

        assert [a.status_code for a in answers] == [201, 201, 429]

"""Agent tokens with sessions: an agent starts sessions, posts turns and reads them (the
``session.use`` and ``session.read`` permissions), never a turn's prompt, and a bound agent
only within its binding: a session of another workload or environment is refused naming it,
and nothing is written."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from chat.models import Session, Turn
from policies.services import workload_create
from portal.models import Role
from team.services import api_token_create
from tests.helpers import error_of
from tests.recall import factories

pytestmark = pytest.mark.django_db

TURN = {"messages": [{"role": "user", "content": "release summary"}]}


def client(raw: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def session_body(workload: Any, environment: str = "prod") -> dict[str, str]:
    return {"actorId": "user:ada", "workloadId": str(workload.id), "environment": environment}


@pytest.fixture
def bound(workspace_a: Any, workload_a: Any) -> str:
    """The secret of an agent token bound to workload A in prod."""
    factories.memories(workspace_a, {"content": "release summary"})
    _, raw = api_token_create(
        workspace=workspace_a,
        name="support-agent",
        role=Role.AGENT,
        workloads=[workload_a.id],
        environments=["prod"],
        author="user:olga",
    )
    return raw


class AgentSessionTests:
    def test_an_agent_starts_a_session_posts_a_turn_and_reads_it(self, agent, workload_a):
        api = client(agent.token)

        session = api.post("/v1/sessions", session_body(workload_a), format="json")
        assert session.status_code == 201, session.content
        pk = session.json()["id"]
        turn = api.post(f"/v1/sessions/{pk}/turns", TURN, format="json")

        assert turn.status_code == 201, turn.content
        assert turn.json()["prompt"]["messages"][-1]["content"] == "release summary"
        assert api.get(f"/v1/sessions/{pk}").json()["turnCount"] == 1
        error_of(api.get(f"/v1/sessions/{pk}/turns/1/prompt"), 403, "PERMISSION_DENIED")

    def test_a_bound_agent_may_not_start_a_session_outside_its_binding(
        self, bound, workspace_a, workload_a
    ):
        other = workload_create(workspace=workspace_a, name="billing-bot", author="t")
        api = client(bound)

        for body, outside in (
            (session_body(other), ["workload"]),
            (session_body(workload_a, "staging"), ["environment"]),
        ):
            error = error_of(
                api.post("/v1/sessions", body, format="json"), 403, "OUTSIDE_TOKEN_BINDING"
            )
            assert error["details"]["outside"] == outside
        assert not Session.objects.exists()

    def test_a_bound_agent_may_not_post_to_another_workloads_session(
        self, bound, editor, workspace_a
    ):
        other = workload_create(workspace=workspace_a, name="billing-bot", author="t")
        pk = editor.api().post("/v1/sessions", session_body(other), format="json").json()["id"]

        response = client(bound).post(f"/v1/sessions/{pk}/turns", TURN, format="json")

        error_of(response, 403, "OUTSIDE_TOKEN_BINDING")
        assert not Turn.objects.exists()

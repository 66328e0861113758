"""Who may call what, all of it in one table: every operation of the OpenAPI schema, called by
an API token of each role (agent, viewer, editor, operator of workspace A) and by the outsider
(the operator of workspace B), aimed at workspace A and its objects, with the status each gets.

An operation the schema gains without a row here fails ``test_every_operation_has_a_row``:
a new endpoint states who may call it. Adding one is a row (its method and path as the schema
writes them, what to send, the five statuses); the ids in the path are the fixture's
(``{workload_id}``, ``{memory_id}``, ...). People signed in get the same answers as a token of
their role (``portal.access`` decides both); an agent is a token's role only.

For a role allowed to make a call, the status is what the call does with the fixture's
objects: a 409, or a 404 that names no missing workspace, refuses the state of the object
(a preview run, which is finished and has no archive), not the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from drf_spectacular.generators import SchemaGenerator

from audit.models import AuditEvent, EventType
from maintenance.services import maintenance_start
from policies import algebra
from policies.services import workload_policy_save
from portal.models import Role
from team.services import api_token_create
from tests.helpers import QUERY, recall_body
from tests.recall import factories

pytestmark = pytest.mark.django_db

ROLES = ("agent", "viewer", "editor", "operator", "outsider")
FLOOR = {**algebra.default_floor(), "relaxableAxes": [], "totalTokenBudget": 3000}
MEMORY = {"content": "Prefers short answers", "memoryType": "preference", "sourceKind": "user"}
LAYOUT = {
    "contextWindow": 32000,
    "systemPromptTokens": 1500,
    "toolSchemaTokens": 500,
    "outputBuffer": 2500,
    "budgetRatio": 0.3,
    "history": [{"role": "user", "content": "hello"}],
}
A = "workspace=team-a"


@dataclass(frozen=True)
class Op:
    method: str
    path: str  # as the schema writes it
    query: str
    body: Any
    agent: int
    viewer: int
    editor: int
    operator: int
    outsider: int

    def expected(self, role: str) -> int:
        return int(getattr(self, role))


# fmt: off
#            method    path (the schema's)                                   query                  body            agent viewer editor operator outsider
MATRIX = [
    # --- recall and memories: what an agent does
    Op("POST",   "/v1/memory/actors/{actor_id}/recall",                      A,                     "recall",         200, 403, 200, 200, 404),
    Op("POST",   "/v1/memory/actors/{actor_id}/memories",                    A,                     MEMORY,           201, 403, 201, 201, 404),
    Op("GET",    "/v1/memory/actors/{actor_id}/memories",                    A,                     None,             403, 200, 200, 200, 404),
    Op("POST",   "/v1/memory/actors/{actor_id}/erase",                       A,                     {},               403, 403, 403, 200, 404),
    Op("GET",    "/v1/memory/memories/{memory_id}",                          "",                    None,             403, 200, 200, 200, 404),
    Op("PATCH",  "/v1/memory/memories/{memory_id}",                          "",                    {"confidence": 0.5}, 403, 403, 200, 200, 404),
    Op("DELETE", "/v1/memory/memories/{memory_id}",                          "",                    None,             403, 403, 204, 204, 404),
    Op("GET",    "/v1/memory/memories/{memory_id}/injections",               "",                    None,             403, 200, 200, 200, 404),
    Op("GET",    "/v1/memory/memories/{memory_id}/lifecycle",                "",                    None,             403, 200, 200, 200, 404),
    Op("POST",   "/v1/memory/memories/{memory_id}/suppress",                 "",                    None,             403, 403, 200, 200, 404),
    Op("POST",   "/v1/memory/memories/{memory_id}/restore",                  "",                    None,             403, 403, 200, 200, 404),
    Op("POST",   "/v1/memory/memories/{memory_id}/reactivate",               "",                    {},               403, 403, 403, 409, 404),
    Op("POST",   "/v1/context/layout",                                       A,                     LAYOUT,           403, 200, 200, 200, 404),
    # --- audit
    Op("GET",    "/v1/audit/events/",                                        A,                     None,             403, 200, 200, 200, 404),
    Op("GET",    "/v1/audit/events/{event_id}",                              A,                     None,             403, 200, 200, 200, 404),
    Op("POST",   "/v1/audit/events/{event_id}/replay",                       A,                     {"query": QUERY}, 403, 403, 200, 200, 404),
    Op("GET",    "/v1/audit/verify",                                         A,                     None,             403, 200, 200, 200, 404),
    # --- workspaces, workloads, policies
    Op("GET",    "/v1/workspaces/",                                          "",                    None,             403, 200, 200, 200, 200),
    Op("POST",   "/v1/workspaces/",                                          "",                    {"slug": "new-ws", "name": "New"}, 403, 403, 403, 403, 403),
    Op("GET",    "/v1/workspaces/{slug}/",                                   "",                    None,             403, 200, 200, 200, 404),
    Op("PATCH",  "/v1/workspaces/{slug}/",                                   "",                    {"name": "Renamed"}, 403, 403, 403, 200, 404),
    Op("GET",    "/v1/workspaces/{slug}/policy",                             "",                    None,             403, 200, 200, 200, 404),
    Op("PUT",    "/v1/workspaces/{slug}/policy",                             "",                    FLOOR,            403, 403, 403, 200, 404),
    Op("GET",    "/v1/workspaces/{slug}/policy/versions/",                   "",                    None,             403, 200, 200, 200, 404),
    Op("GET",    "/v1/workspaces/{slug}/policy/versions/{version}",          "",                    None,             403, 200, 200, 200, 404),
    Op("GET",    "/v1/workspaces/{slug}/workloads/",                         "",                    None,             403, 200, 200, 200, 404),
    Op("POST",   "/v1/workspaces/{slug}/workloads/",                         "",                    {"name": "new-bot"}, 403, 403, 201, 201, 404),
    Op("GET",    "/v1/workloads/{workload_id}/",                             "",                    None,             403, 200, 200, 200, 404),
    Op("PATCH",  "/v1/workloads/{workload_id}/",                             "",                    {"description": "Edited"}, 403, 403, 200, 200, 404),
    Op("DELETE", "/v1/workloads/{workload_id}/",                             "",                    None,             403, 403, 403, 204, 404),
    Op("GET",    "/v1/workloads/{workload_id}/policy",                       "environment=prod",    None,             403, 200, 200, 200, 404),
    Op("PUT",    "/v1/workloads/{workload_id}/policy",                       "environment=prod",    {"confidenceMin": 0.4}, 403, 403, 200, 200, 404),
    Op("GET",    "/v1/workloads/{workload_id}/policy/versions/",             "environment=prod",    None,             403, 200, 200, 200, 404),
    Op("GET",    "/v1/workloads/{workload_id}/effective-policy",             "environment=prod",    None,             403, 200, 200, 200, 404),
    Op("GET",    "/v1/workloads/{workload_id}/layout-config",                "",                    None,             403, 200, 200, 200, 404),
    Op("PUT",    "/v1/workloads/{workload_id}/layout-config",                "",                    {},               403, 403, 200, 200, 404),
    Op("GET",    "/v1/workloads/{workload_id}/layout-config/versions/",      "",                    None,             403, 200, 200, 200, 404),
    Op("GET",    "/v1/policy/axes",                                          "",                    None,             403, 200, 200, 200, 200),
    # --- lifecycle settings and maintenance
    Op("GET",    "/v1/workspaces/{slug}/lifecycle",                          "",                    None,             403, 200, 200, 200, 404),
    Op("PUT",    "/v1/workspaces/{slug}/lifecycle",                          "",                    {"settings": {"decayThreshold": 0.3}}, 403, 403, 403, 200, 404),
    Op("PATCH",  "/v1/workspaces/{slug}/lifecycle",                          "",                    {"decayThreshold": 0.25}, 403, 403, 403, 200, 404),
    Op("GET",    "/v1/workspaces/{slug}/lifecycle/versions/",                "",                    None,             403, 200, 200, 200, 404),
    Op("POST",   "/v1/workspaces/{slug}/maintenance/{sweep}",                "",                    None,             403, 403, 200, 200, 404),
    Op("GET",    "/v1/workspaces/{slug}/maintenance/runs/",                  "",                    None,             403, 200, 200, 200, 404),
    Op("GET",    "/v1/maintenance/runs/{run_id}",                            "",                    None,             403, 200, 200, 200, 404),
    Op("GET",    "/v1/maintenance/runs/{run_id}/items",                      "",                    None,             403, 200, 200, 200, 404),
    Op("POST",   "/v1/maintenance/runs/{run_id}/cancel",                     "",                    None,             403, 403, 403, 409, 404),
    Op("GET",    "/v1/maintenance/runs/{run_id}/archive",                    "",                    None,             403, 403, 403, 404, 404),
    Op("GET",    "/v1/maintenance/runs/{run_id}/archive/manifest",           "",                    None,             403, 404, 404, 404, 404),
    Op("POST",   "/v1/maintenance/runs/{run_id}/restore",                    "",                    None,             403, 403, 403, 404, 404),
    Op("POST",   "/v1/maintenance/runs/{run_id}/revert",                     "",                    {},               403, 403, 403, 409, 404),
    # --- tokens and members: operators only
    Op("GET",    "/v1/workspaces/{slug}/tokens/",                            "",                    None,             403, 403, 403, 200, 404),
    Op("POST",   "/v1/workspaces/{slug}/tokens/",                            "",                    {"name": "bot", "role": "agent"}, 403, 403, 403, 201, 404),
    Op("GET",    "/v1/workspaces/{slug}/tokens/{token_id}",                  "",                    None,             403, 403, 403, 200, 404),
    Op("POST",   "/v1/workspaces/{slug}/tokens/{token_id}/rotate",           "",                    {"graceSeconds": 60}, 403, 403, 403, 200, 404),
    Op("POST",   "/v1/workspaces/{slug}/tokens/{token_id}/revoke",           "",                    None,             403, 403, 403, 200, 404),
    Op("GET",    "/v1/workspaces/{slug}/members/",                           "",                    None,             403, 403, 403, 200, 404),
    Op("POST",   "/v1/workspaces/{slug}/members/",                           "",                    {"username": "nina", "role": "viewer"}, 403, 403, 403, 201, 404),
    Op("PATCH",  "/v1/workspaces/{slug}/members/{username}",                 "",                    {"role": "editor"}, 403, 403, 403, 200, 404),
    Op("DELETE", "/v1/workspaces/{slug}/members/{username}",                 "",                    None,             403, 403, 403, 204, 404),
]
# fmt: on


def schema_operations() -> set[tuple[str, str]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return {
        (method.upper(), path)
        for path, operations in schema["paths"].items()
        for method in operations
        if method in ("get", "post", "put", "patch", "delete")
    }


@pytest.fixture
def world(operator, editor, viewer, agent, outsider, workload_a) -> dict[str, str]:
    """Workspace A with one of everything a path can name; the values for the paths."""
    workspace = operator.workspace
    workload_policy_save(
        workload=workload_a, environment="prod", document={"confidenceMin": 0.5}, author="t"
    )
    [memory] = factories.memories(workspace, {"content": "release summary preferences"})
    recalled = editor.api().post(
        "/v1/memory/actors/user:ada/recall", recall_body(workload_a), format="json"
    )
    assert recalled.status_code == 200, recalled.content
    event = AuditEvent.objects.filter(workspace=workspace, type=EventType.ASSEMBLED).get()
    run = maintenance_start(workspace=workspace, sweep="expiry", mode="preview", author="t")
    spare, _ = api_token_create(workspace=workspace, name="spare", role=Role.EDITOR)
    get_user_model().objects.create_user(username="nina", password="pw-nina")
    return {
        "actor_id": "user:ada",
        "memory_id": str(memory.pk),
        "event_id": str(event.pk),
        "slug": "team-a",
        "version": "1",
        "workload_id": str(workload_a.id),
        "sweep": "expiry",
        "run_id": str(run.pk),
        "token_id": str(spare.pk),
        "username": "vera",
    }


def _url(op: Op, values: dict[str, str]) -> str:
    url = op.path
    for name, value in values.items():
        url = url.replace("{" + name + "}", value)
    assert "{" not in url, f"no value for a parameter of {op.path}"
    return url + (f"?{op.query}" if op.query else "")


class PermissionMatrixTests:
    def test_every_operation_has_a_row(self):
        rows = [(op.method, op.path) for op in MATRIX]

        assert len(rows) == len(set(rows)), "an operation has two rows"
        assert set(rows) == schema_operations()

    @pytest.mark.parametrize("role", ROLES)
    @pytest.mark.parametrize("op", MATRIX, ids=lambda op: f"{op.method} {op.path}")
    def test_each_role_gets_its_status(self, request, world, workload_a, op, role):
        who = request.getfixturevalue(role)
        body = recall_body(workload_a) if op.body == "recall" else op.body

        response = getattr(who.api(), op.method.lower())(_url(op, world), body, format="json")

        assert response.status_code == op.expected(role), (
            f"{role} {op.method} {op.path}: {response.status_code} {response.content[:300]!r}"
        )
        if op.expected(role) in (401, 403, 404):
            assert response.json()["error"]["code"] in (
                "PERMISSION_DENIED",
                "NOT_FOUND",
                "WORKSPACE_CREATION_RESTRICTED",
            )

    def test_an_agent_tokens_refusal_names_what_it_lacks(self, world, agent):
        response = agent.api().get("/v1/audit/events/?workspace=team-a")

        error = response.json()["error"]
        assert error["code"] == "PERMISSION_DENIED"
        assert error["details"] == {"requiredRole": "viewer", "role": "agent"}

    def test_a_viewers_refused_recall_names_the_roles_that_may(self, world, viewer, workload_a):
        response = viewer.api().post(
            "/v1/memory/actors/user:ada/recall?workspace=team-a",
            recall_body(workload_a),
            format="json",
        )

        assert response.status_code == 403
        assert response.json()["error"]["details"] == {
            "requiredPermission": "recall",
            "allowedRoles": ["agent", "editor", "operator"],
            "role": "viewer",
        }

"""Who may call what, all of it in one table: every operation of the OpenAPI schema, called by
an API token of each role (agent, viewer, editor, operator of workspace A) and by the outsider
(the operator of workspace B), aimed at workspace A and its objects, with the status each gets.

An operation the schema gains without a row here fails ``test_every_operation_has_a_row``:
a new endpoint states who may call it. Adding one is a line of ``MATRIX_TABLE``: its method
and path as the schema writes them (after ``/v1``; ``?ws`` and ``?env`` add the query
parameters of ``QUERIES``), what it sends (a name in ``BODIES``), and the five statuses; the
ids in the path are the ``world`` fixture's (``{workload_id}``, ``{memory_id}``, ...).
People signed in get the same answers as a token of their role (``portal.access`` decides
both); an agent is a token's role only.

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
from chat.models import CompactionRun
from maintenance.services import maintenance_start
from policies import algebra
from policies.services import workload_policy_save
from portal.models import Role
from team.services import api_token_create
from tests.helpers import QUERY, recall_body
from tests.module_personas import module_scoped
from tests.recall import factories

pytestmark = pytest.mark.django_db

ROLES = ("agent", "viewer", "editor", "operator", "outsider")
QUERIES = {"ws": "workspace=team-a", "env": "environment=prod"}
# What each row sends, by the name in its body column ("-": nothing).
BODIES: dict[str, Any] = {
    "-": None,
    "{}": {},
    "recall": "recall",  # recall_body(the fixture's workload)
    "session": "session",  # a session of user:ada with the fixture's workload, in prod
    "turn": {"messages": [{"role": "user", "content": "release summary"}]},
    "memory": {
        "content": "Prefers short answers",
        "memoryType": "preference",
        "sourceKind": "user",
    },
    "patch": {"confidence": 0.5},
    "layout": {
        "contextWindow": 32000,
        "systemPromptTokens": 1500,
        "toolSchemaTokens": 500,
        "outputBuffer": 2500,
        "budgetRatio": 0.3,
        "history": [{"role": "user", "content": "hello"}],
    },
    "replay": {"query": QUERY},
    "ws": {"slug": "new-ws", "name": "New"},
    "rename": {"name": "Renamed"},
    "floor": {
        **algebra.default_floor(),
        "relaxableAxes": [],
        "totalTokenBudget": 3000,
        "comment": "Trim the budget",
    },
    "workload": {"name": "new-bot"},
    "describe": {"description": "Edited"},
    "policy": {"confidenceMin": 0.4},
    "settings": {"settings": {"decayThreshold": 0.3}},
    "setting": {"decayThreshold": 0.25},
    "token": {"name": "bot", "role": "agent"},
    "grace": {"graceSeconds": 60},
    "member": {"username": "nina", "role": "viewer"},
    "role": {"role": "editor"},
}


@dataclass(frozen=True)
class Op:
    method: str
    path: str  # as the schema writes it
    query: str
    body: Any
    statuses: dict[str, int]


MATRIX_TABLE = """
method path (the schema’s, after /v1; ?ws, ?env: below)  body     agent view  edit  oper  outsider
# recall and memories: what an agent does
POST   /memory/actors/{actor_id}/recall?ws               recall   200   403   200   200   404
POST   /memory/actors/{actor_id}/memories?ws             memory   201   403   201   201   404
GET    /memory/actors/{actor_id}/memories?ws             -        403   200   200   200   404
POST   /memory/actors/{actor_id}/erase?ws                {}       403   403   403   200   404
GET    /memory/memories/{memory_id}                      -        403   200   200   200   404
PATCH  /memory/memories/{memory_id}                      patch    403   403   200   200   404
DELETE /memory/memories/{memory_id}                      -        403   403   204   204   404
GET    /memory/memories/{memory_id}/injections           -        403   200   200   200   404
GET    /memory/memories/{memory_id}/lifecycle            -        403   200   200   200   404
POST   /memory/memories/{memory_id}/suppress             -        403   403   200   200   404
POST   /memory/memories/{memory_id}/restore              -        403   403   200   200   404
POST   /memory/memories/{memory_id}/reactivate           {}       403   403   403   409   404
POST   /context/layout?ws                                layout   403   200   200   200   404
# sessions and turns: what an agent does too
POST   /sessions?ws                                      session  201   403   201   201   404
GET    /sessions/?ws                                     -        200   200   200   200   404
GET    /sessions/{session_id}                            -        200   200   200   200   404
POST   /sessions/{session_id}/turns                      turn     201   403   201   201   404
GET    /sessions/{session_id}/turns/{turn}               -        200   200   200   200   404
GET    /sessions/{session_id}/turns/{turn}/prompt        -        403   403   403   200   404
POST   /sessions/{session_id}/compact                    -        422   403   422   422   404
GET    /compaction/runs/{compaction_run_id}              -        200   200   200   200   404
POST   /sessions/{session_id}/end                        -        200   403   200   200   404
# audit
GET    /audit/events/?ws                                 -        403   200   200   200   404
GET    /audit/events/{event_id}?ws                       -        403   200   200   200   404
POST   /audit/events/{event_id}/replay?ws                replay   403   403   200   200   404
GET    /audit/verify?ws                                  -        403   200   200   200   404
# workspaces, workloads, policies
GET    /workspaces/                                      -        403   200   200   200   200
POST   /workspaces/                                      ws       403   403   403   403   403
GET    /workspaces/{slug}/                               -        403   200   200   200   404
PATCH  /workspaces/{slug}/                               rename   403   403   403   200   404
GET    /workspaces/{slug}/policy                         -        403   200   200   200   404
PUT    /workspaces/{slug}/policy                         floor    403   403   403   200   404
GET    /workspaces/{slug}/policy/versions/               -        403   200   200   200   404
GET    /workspaces/{slug}/policy/versions/{version}      -        403   200   200   200   404
GET    /workspaces/{slug}/workloads/                     -        403   200   200   200   404
POST   /workspaces/{slug}/workloads/                     workload 403   403   201   201   404
GET    /workloads/{workload_id}/                         -        403   200   200   200   404
PATCH  /workloads/{workload_id}/                         describe 403   403   200   200   404
DELETE /workloads/{workload_id}/                         -        403   403   403   204   404
GET    /workloads/{workload_id}/policy?env               -        403   200   200   200   404
PUT    /workloads/{workload_id}/policy?env               policy   403   403   200   200   404
GET    /workloads/{workload_id}/policy/versions/?env     -        403   200   200   200   404
GET    /workloads/{workload_id}/effective-policy?env     -        403   200   200   200   404
GET    /workloads/{workload_id}/layout-config            -        403   200   200   200   404
PUT    /workloads/{workload_id}/layout-config            {}       403   403   200   200   404
GET    /workloads/{workload_id}/layout-config/versions/  -        403   200   200   200   404
GET    /policy/axes                                      -        403   200   200   200   200
# lifecycle settings and maintenance
GET    /workspaces/{slug}/lifecycle                      -        403   200   200   200   404
PUT    /workspaces/{slug}/lifecycle                      settings 403   403   403   200   404
PATCH  /workspaces/{slug}/lifecycle                      setting  403   403   403   200   404
GET    /workspaces/{slug}/lifecycle/versions/            -        403   200   200   200   404
POST   /workspaces/{slug}/maintenance/{sweep}            -        403   403   200   200   404
GET    /workspaces/{slug}/maintenance/runs/              -        403   200   200   200   404
GET    /maintenance/runs/{run_id}                        -        403   200   200   200   404
GET    /maintenance/runs/{run_id}/items                  -        403   200   200   200   404
POST   /maintenance/runs/{run_id}/cancel                 -        403   403   403   409   404
GET    /maintenance/runs/{run_id}/archive                -        403   403   403   404   404
GET    /maintenance/runs/{run_id}/archive/manifest       -        403   404   404   404   404
POST   /maintenance/runs/{run_id}/restore                -        403   403   403   404   404
POST   /maintenance/runs/{run_id}/revert                 {}       403   403   403   409   404
# tokens and members: operators only
GET    /workspaces/{slug}/tokens/                        -        403   403   403   200   404
POST   /workspaces/{slug}/tokens/                        token    403   403   403   201   404
GET    /workspaces/{slug}/tokens/{token_id}              -        403   403   403   200   404
POST   /workspaces/{slug}/tokens/{token_id}/rotate       grace    403   403   403   200   404
POST   /workspaces/{slug}/tokens/{token_id}/revoke       -        403   403   403   200   404
GET    /workspaces/{slug}/members/                       -        403   403   403   200   404
POST   /workspaces/{slug}/members/                       member   403   403   403   201   404
PATCH  /workspaces/{slug}/members/{username}             role     403   403   403   200   404
DELETE /workspaces/{slug}/members/{username}             -        403   403   403   204   404
"""


def _parse(table: str) -> list[Op]:
    ops = []
    for line in table.strip().splitlines()[1:]:
        if line.startswith("#"):
            continue
        method, path, body, *statuses = line.split()
        path, _, query = path.partition("?")
        assert len(statuses) == len(ROLES), line
        ops.append(
            Op(
                method,
                "/v1" + path,
                QUERIES[query] if query else "",
                BODIES[body],
                dict(zip(ROLES, map(int, statuses), strict=True)),
            )
        )
    return ops


MATRIX = _parse(MATRIX_TABLE)


def schema_operations() -> set[tuple[str, str]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return {
        (method.upper(), path)
        for path, operations in schema["paths"].items()
        for method in operations
        if method in ("get", "post", "put", "patch", "delete")
    }


# The ~350 tests here each make one call: what they call on is made once per module, each
# test's writes rolled back at its end, as every test's are.
(
    workspace_a,
    workspace_b,
    operator,
    editor,
    viewer,
    outsider,
    agent,
    workload_a,
    made_first,
) = module_scoped(
    "workspace_a", "workspace_b", "operator", "editor", "viewer", "outsider", "agent", "workload_a"
)


@pytest.fixture(scope="module")
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
    session = editor.api().post("/v1/sessions", session_body(workload_a), format="json").json()
    turn = BODIES["turn"]
    posted = editor.api().post(f"/v1/sessions/{session['id']}/turns", turn, format="json")
    assert posted.status_code == 201, posted.content
    compaction = CompactionRun.objects.create(
        workspace=workspace, session_id=session["id"], trigger="manual", reason="manual",
        severity="warning", status="succeeded", config={}, service="compaction",
        time_budget_ms=15000, target_utilization=0.7,
    )  # fmt: skip
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
        "session_id": str(session["id"]),
        "compaction_run_id": str(compaction.pk),
        "turn": "1",
        "username": "vera",
    }


def session_body(workload: Any) -> dict[str, str]:
    return {"actorId": "user:ada", "workloadId": str(workload.id), "environment": "prod"}


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
        built = {"recall": recall_body, "session": session_body}
        body = built[op.body](workload_a) if op.body in ("recall", "session") else op.body

        response = getattr(who.api(), op.method.lower())(_url(op, world), body, format="json")

        assert response.status_code == op.statuses[role], (
            f"{role} {op.method} {op.path}: {response.status_code} {response.content[:300]!r}"
        )
        if op.statuses[role] in (401, 403, 404):
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

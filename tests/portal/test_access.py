"""Who may call what: authentication, CSRF, roles, and isolation between workspaces."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.urls import URLPattern
from django.utils.crypto import get_random_string
from rest_framework.test import APIClient

from audit.api import urls as audit_urls
from audit.models import AuditChainHead, AuditEvent
from policies import algebra
from policies.api import urls as policies_urls
from policies.models import Workload, WorkloadPolicyVersion, WorkspacePolicyVersion
from policies.services import workload_policy_save
from portal.models import ApiToken, Workspace
from team.services import api_token_create, api_token_revoke
from tests.helpers import csrf_session, error_of
from tests.module_personas import module_scoped

# The personas the tests here act as, made once per module.
workspace_a, operator, editor, made_first = module_scoped("workspace_a", "operator", "editor")


def state(workspace: Workspace) -> dict[str, Any]:
    """A fingerprint of everything in a workspace that an API call could change."""
    workspace.refresh_from_db()
    return {
        "workspace": (workspace.slug, workspace.name),
        "environments": sorted(workspace.environments.values_list("slug", flat=True)),
        "floors": list(
            WorkspacePolicyVersion.objects.filter(workspace=workspace).values_list(
                "version", "document", "relaxable_axes"
            )
        ),
        "workloads": sorted(
            Workload.objects.filter(workspace=workspace).values_list("id", "name", "description")
        ),
        "policies": sorted(
            WorkloadPolicyVersion.objects.filter(workload__workspace=workspace).values_list(
                "id", "environment", "version"
            )
        ),
        "events": AuditEvent.objects.filter(workspace=workspace).count(),
        "head": AuditChainHead.objects.filter(workspace=workspace).values_list(
            "last_hash", flat=True
        )[0],
    }


def floor_body() -> dict[str, Any]:
    return {
        **algebra.default_floor(),
        "relaxableAxes": [],
        "totalTokenBudget": 3000,
        "comment": "Test change",
    }


@dataclass(frozen=True)
class Call:
    name: str  # URL name, to prove every route is covered
    method: str
    url: str
    body: Any = None


def calls_on_workspace_a(workload: Workload, event: AuditEvent) -> list[Call]:
    """Every workspace-scoped API call, aimed at workspace A's slug, workload and event."""
    wl = f"/v1/workloads/{workload.id}"
    return [
        Call("api-workspace", "get", "/v1/workspaces/team-a/"),
        Call("api-workspace", "patch", "/v1/workspaces/team-a/", {"name": "Pwned"}),
        Call("api-workspace-policy", "get", "/v1/workspaces/team-a/policy"),
        Call("api-workspace-policy", "put", "/v1/workspaces/team-a/policy", floor_body()),
        Call("api-workspace-policy-versions", "get", "/v1/workspaces/team-a/policy/versions/"),
        Call("api-workspace-policy-version", "get", "/v1/workspaces/team-a/policy/versions/1"),
        Call("api-workloads", "get", "/v1/workspaces/team-a/workloads/"),
        Call("api-workloads", "post", "/v1/workspaces/team-a/workloads/", {"name": "planted"}),
        Call("api-workload", "get", f"{wl}/"),
        Call("api-workload", "patch", f"{wl}/", {"name": "renamed"}),
        Call("api-workload", "delete", f"{wl}/"),
        Call("api-workload-policy", "get", f"{wl}/policy?environment=prod"),
        Call("api-workload-policy", "get", f"{wl}/policy"),
        Call("api-workload-policy", "put", f"{wl}/policy?environment=prod", {"pinned": []}),
        Call("api-workload-policy", "put", f"{wl}/policy", {"confidenceMin": 0.9}),
        Call("api-workload-policy-versions", "get", f"{wl}/policy/versions/?environment=prod"),
        Call("api-effective-policy", "get", f"{wl}/effective-policy?environment=prod"),
        Call("api-audit-events", "get", "/v1/audit/events/?workspace=team-a"),
        Call("api-audit-event", "get", f"/v1/audit/events/{event.pk}?workspace=team-a"),
        # The caller's own workspace named, but the id of an event in A.
        Call("api-audit-event", "get", f"/v1/audit/events/{event.pk}?workspace=team-b"),
        Call("api-audit-verify", "get", "/v1/audit/verify?workspace=team-a"),
    ]


# Routes that name no workspace: the list shows only the caller's own, the axis registry is
# the same for everyone, and creating a workspace cannot touch another one.
NOT_WORKSPACE_SCOPED = {
    ("api-workspaces", "get"),
    ("api-workspaces", "post"),
    ("api-policy-axes", "get"),
}


def routes() -> set[tuple[str, str]]:
    """Every (URL name, method) the policies and audit APIs serve."""
    found = set()
    for pattern in [*policies_urls.urlpatterns, *audit_urls.urlpatterns]:
        assert isinstance(pattern, URLPattern)
        view = pattern.callback.view_class
        for method in ("get", "post", "put", "patch", "delete"):
            if hasattr(view, method):
                found.add((pattern.name, method))
    return found


def send(client: APIClient, call: Call) -> Any:
    return getattr(client, call.method)(call.url, call.body, format="json")


@pytest.fixture
def populated_a(operator: Any, workload_a: Workload) -> tuple[Workload, AuditEvent]:
    workload_policy_save(
        workload=workload_a, environment="prod", document={"confidenceMin": 0.5}, author="a"
    )
    workload_policy_save(workload=workload_a, environment="", document={}, author="a")
    event = AuditEvent.objects.filter(workspace=operator.workspace).order_by("-id").first()
    return workload_a, event


class WorkspaceIsolationTests:
    def test_the_enumeration_covers_every_api_route(self, populated_a):
        enumerated = {(c.name, c.method) for c in calls_on_workspace_a(*populated_a)}

        assert enumerated | NOT_WORKSPACE_SCOPED == routes()

    @pytest.mark.parametrize("channel", ["token", "session"])
    def test_an_outsider_gets_404_on_every_route_and_changes_nothing(
        self, outsider, workload_b, populated_a, channel
    ):
        client = outsider.api() if channel == "token" else csrf_session(outsider)
        before_a = state(populated_a[0].workspace)
        before_b = state(outsider.workspace)

        for call in calls_on_workspace_a(*populated_a):
            response = send(client, call)
            error = error_of(response, 404, "NOT_FOUND")
            # The message must not leak A's data (the workload name or the event contents).
            assert "support-bot" not in error["message"], call
            assert "support-bot" not in str(error["details"]), call

        assert state(populated_a[0].workspace) == before_a
        assert state(outsider.workspace) == before_b

    def test_an_outsider_token_lists_only_its_own_workspace(self, outsider, populated_a):
        response = outsider.api().get("/v1/workspaces/")

        assert [w["slug"] for w in response.json()["results"]] == ["team-b"]

    def test_an_outsider_session_lists_only_its_own_workspace(self, outsider, populated_a):
        response = outsider.session().get("/v1/workspaces/")

        assert [w["slug"] for w in response.json()["results"]] == ["team-b"]

    def test_an_outsider_token_audit_trail_is_its_own(self, outsider, populated_a, workload_b):
        body = outsider.api().get("/v1/audit/events/").json()

        assert body["count"] >= 1
        assert {e["workspace"] for e in body["results"]} == {"team-b"}

    def test_a_superuser_acts_as_operator_of_every_workspace(self, populated_a, workspace_b):
        admin = get_user_model().objects.create_superuser("root", password="pw-root")
        client = APIClient()
        client.force_login(admin)

        listed = client.get("/v1/workspaces/")
        floor = client.put("/v1/workspaces/team-b/policy", floor_body(), format="json")

        assert [w["slug"] for w in listed.json()["results"]] == ["team-a", "team-b"]
        assert floor.status_code == 200, floor.content
        assert floor.json()["author"] == "user:root"


# (method, url, body, minimum role); {workload} is workspace A's workload id.
WRITES = [
    ("patch", "/v1/workspaces/team-a/", {"name": "Renamed"}, "operator"),
    ("put", "/v1/workspaces/team-a/policy", None, "operator"),
    ("delete", "/v1/workloads/{workload}/", None, "operator"),
    ("post", "/v1/workspaces/team-a/workloads/", {"name": "new-bot"}, "editor"),
    ("patch", "/v1/workloads/{workload}/", {"description": "Edited"}, "editor"),
    ("put", "/v1/workloads/{workload}/policy?environment=prod", {"confidenceMin": 0.4}, "editor"),
    ("put", "/v1/workloads/{workload}/policy", {"confidenceMin": 0.4}, "editor"),
]
RANK = {"viewer": 1, "editor": 2, "operator": 3}


class RoleTests:
    @pytest.mark.parametrize("persona", ["viewer", "editor", "operator"])
    @pytest.mark.parametrize(("method", "url", "body", "needed"), WRITES)
    def test_each_write_needs_its_role(
        self, request, workload_a, persona, method, url, body, needed
    ):
        who = request.getfixturevalue(persona)
        before = state(who.workspace)
        if body is None and method == "put":
            body = floor_body()

        response = getattr(who.api(), method)(
            url.format(workload=workload_a.id), body, format="json"
        )

        if RANK[persona] >= RANK[needed]:
            assert response.status_code in (200, 201, 204), response.content
            assert state(who.workspace) != before
        else:
            error = error_of(response, 403, "PERMISSION_DENIED")
            assert error["details"] == {"requiredRole": needed, "role": persona}
            assert state(who.workspace) == before

    @pytest.mark.parametrize("persona", ["viewer", "editor", "operator"])
    def test_every_role_can_read(self, request, populated_a, persona):
        who = request.getfixturevalue(persona)
        client = who.api()

        for call in calls_on_workspace_a(*populated_a):
            if call.method == "get":
                own = Call(call.name, "get", call.url.replace("=team-b", "=team-a"))
                assert send(client, own).status_code == 200, call

    def test_a_session_role_comes_from_the_membership(self, editor, workload_a):
        client = csrf_session(editor)

        allowed = client.put(
            f"/v1/workloads/{workload_a.id}/policy", {"confidenceMin": 0.4}, format="json"
        )
        denied = client.put("/v1/workspaces/team-a/policy", floor_body(), format="json")

        assert allowed.status_code == 200
        error_of(denied, 403, "PERMISSION_DENIED")


class AuthenticationTests:
    @pytest.mark.parametrize(
        "url", ["/v1/workspaces/", "/v1/workspaces/team-a/policy", "/v1/audit/events/"]
    )
    def test_no_credentials_is_a_json_401(self, workspace_a, url):
        response = APIClient().get(url)

        error_of(response, 401, "NOT_AUTHENTICATED")
        assert response["WWW-Authenticate"] == "Bearer"

    def test_an_anonymous_write_is_refused_and_changes_nothing(self, workspace_a):
        before = state(workspace_a)

        response = APIClient().post(
            "/v1/workspaces/team-a/workloads/", {"name": "anon"}, format="json"
        )

        error_of(response, 401, "NOT_AUTHENTICATED")
        assert state(workspace_a) == before

    @pytest.mark.parametrize(
        "header",
        [
            "Bearer garbage",
            "Bearer crp_" + "x" * 43,
            "Bearer ",
            "bearer crp_not-a-real-token",
        ],
    )
    def test_a_garbage_token_is_a_json_401(self, workspace_a, header):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=header)

        error_of(client.get("/v1/workspaces/"), 401, "AUTHENTICATION_FAILED")

    def test_another_scheme_is_not_authenticated(self, workspace_a):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION="Basic b2xnYTpwdw==")

        error_of(client.get("/v1/workspaces/"), 401, "NOT_AUTHENTICATED")

    def test_a_revoked_token_is_a_401(self, editor):
        client = editor.api()
        assert client.get("/v1/workspaces/").status_code == 200
        token = ApiToken.objects.get(name="eddie-token")

        api_token_revoke(token=token)

        error_of(client.get("/v1/workspaces/"), 401, "AUTHENTICATION_FAILED")
        error_of(
            client.post("/v1/workspaces/team-a/workloads/", {"name": "late"}, format="json"),
            401,
            "AUTHENTICATION_FAILED",
        )

    def test_replacing_a_token_revokes_the_old_one(self, workspace_a):
        _, first = api_token_create(workspace=workspace_a, name="ci", role="viewer")
        _, second = api_token_create(workspace=workspace_a, name="ci", role="viewer", replace=True)
        old, new = APIClient(), APIClient()
        old.credentials(HTTP_AUTHORIZATION=f"Bearer {first}")
        new.credentials(HTTP_AUTHORIZATION=f"Bearer {second}")

        error_of(old.get("/v1/workspaces/"), 401, "AUTHENTICATION_FAILED")
        assert new.get("/v1/workspaces/").status_code == 200

    def test_only_the_hash_of_a_token_is_stored(self, editor):
        token = ApiToken.objects.get(name="eddie-token")

        assert editor.token not in (token.key_hash, token.prefix)
        assert not ApiToken.objects.filter(key_hash=editor.token).exists()
        assert editor.token.startswith(token.prefix)

    def test_a_logged_out_session_is_refused(self, editor):
        client = editor.session()
        client.logout()

        error_of(client.get("/v1/workspaces/"), 401, "NOT_AUTHENTICATED")


class CsrfTests:
    @pytest.mark.parametrize(
        ("method", "url", "body"),
        [
            ("post", "/v1/workspaces/team-a/workloads/", {"name": "csrf-bot"}),
            ("post", "/v1/workspaces/", {"slug": "csrf-team", "name": "CSRF"}),
            ("put", "/v1/workspaces/team-a/policy", None),
            ("patch", "/v1/workspaces/team-a/", {"name": "CSRF"}),
        ],
    )
    def test_a_session_write_without_a_csrf_token_is_refused(self, operator, method, url, body):
        before = state(operator.workspace)
        workspaces_before = Workspace.objects.count()

        response = getattr(operator.session(), method)(url, body or floor_body(), format="json")

        error = error_of(response, 403, "PERMISSION_DENIED")
        assert "CSRF" in error["message"]
        assert state(operator.workspace) == before
        assert Workspace.objects.count() == workspaces_before

    def test_a_session_write_with_a_wrong_csrf_token_is_refused(self, operator):
        client = operator.session()
        client.cookies[settings.CSRF_COOKIE_NAME] = get_random_string(32)
        client.credentials(HTTP_X_CSRFTOKEN=get_random_string(32))
        before = state(operator.workspace)

        response = client.post(
            "/v1/workspaces/team-a/workloads/", {"name": "csrf-bot"}, format="json"
        )

        error_of(response, 403, "PERMISSION_DENIED")
        assert state(operator.workspace) == before

    def test_a_session_write_with_the_csrf_token_goes_through(self, operator):
        response = csrf_session(operator).post(
            "/v1/workspaces/team-a/workloads/", {"name": "csrf-bot"}, format="json"
        )

        assert response.status_code == 201

    def test_a_token_write_needs_no_csrf_token(self, operator):
        response = operator.api().post(
            "/v1/workspaces/team-a/workloads/", {"name": "token-bot"}, format="json"
        )

        assert response.status_code == 201

    def test_a_session_read_needs_no_csrf_token(self, operator):
        assert operator.session().get("/v1/workspaces/team-a/policy").status_code == 200


class NotFoundTests:
    def test_an_unknown_api_path_is_a_json_404(self, operator):
        error_of(operator.api().get("/v1/no/such/thing"), 404, "NOT_FOUND")

    def test_an_unknown_workload_id_is_a_json_404(self, operator):
        error_of(operator.api().get(f"/v1/workloads/{uuid.uuid4()}/policy"), 404, "NOT_FOUND")

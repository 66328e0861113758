"""The workspace endpoints: list/create, detail/rename, the operator floor and its history."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from audit.models import AuditEvent, EventType
from policies import algebra
from policies.axes import AXES
from policies.models import WorkspacePolicyVersion
from policies.services import workspace_create, workspace_policy_save
from portal.models import Membership, Role, Workspace
from tests.helpers import csrf_session, error_of
from tests.module_personas import module_scoped

# The personas the tests here act as, made once per module.
workspace_a, operator, editor, viewer, made_first = module_scoped(
    "workspace_a", "operator", "editor", "viewer"
)

FLOOR_URL = "/v1/workspaces/team-a/policy"
VERSIONS_URL = "/v1/workspaces/team-a/policy/versions/"


def state(workspace: Workspace) -> dict[str, Any]:
    """Everything a rejected write must leave untouched."""
    return {
        "workspaces": sorted(Workspace.objects.values_list("slug", "name")),
        "floors": list(
            WorkspacePolicyVersion.objects.filter(workspace=workspace).values_list(
                "version", "document", "relaxable_axes"
            )
        ),
        "events": AuditEvent.objects.filter(workspace=workspace).count(),
    }


def full_floor(**changes: Any) -> dict[str, Any]:
    return {**algebra.default_floor(), "relaxableAxes": [], **changes}


class WorkspaceListTests:
    def test_a_token_sees_only_its_own_workspace(self, operator, outsider):
        response = operator.api().get("/v1/workspaces/")

        assert response.status_code == 200
        assert response.json()["count"] == 1
        assert response.json()["results"] == [
            {
                "slug": "team-a",
                "name": "Team A",
                "environments": ["dev", "prod", "staging"],
                "storeQueries": False,
                "recallRatePerMinute": None,
                "createdAt": response.json()["results"][0]["createdAt"],
            }
        ]

    def test_a_session_user_sees_every_workspace_they_belong_to(self, editor, workspace_b):
        Membership.objects.create(user=editor.user, workspace=workspace_b, role=Role.VIEWER)
        workspace_create(slug="team-c", name="Team C", author="system:test")

        response = editor.session().get("/v1/workspaces/")

        assert response.status_code == 200
        assert [w["slug"] for w in response.json()["results"]] == ["team-a", "team-b"]

    def test_a_superuser_sees_every_workspace(self, workspace_a, workspace_b):
        admin = get_user_model().objects.create_superuser("root", password="pw-root")
        client = APIClient()
        client.force_login(admin)

        response = client.get("/v1/workspaces/")

        assert [w["slug"] for w in response.json()["results"]] == ["team-a", "team-b"]

    def test_it_lists_in_a_fixed_number_of_queries_however_many_workspaces(
        self, editor, django_assert_num_queries
    ):
        for n in range(5):
            extra = workspace_create(slug=f"extra-{n}", name=f"Extra {n}", author="system:test")
            Membership.objects.create(user=editor.user, workspace=extra, role=Role.VIEWER)
        client = editor.session()

        # session, user, the row-level security scope, the page's count, workspaces, their
        # environments
        with django_assert_num_queries(6):
            response = client.get("/v1/workspaces/")

        assert len(response.json()["results"]) == 6
        assert all(
            w["environments"] == ["dev", "prod", "staging"] for w in response.json()["results"]
        )

    def test_a_token_lists_in_three_queries(self, operator, django_assert_num_queries):
        client = operator.api()

        # token, the page's count, workspaces, their environments
        with django_assert_num_queries(4):
            client.get("/v1/workspaces/")


@pytest.fixture
def superuser(db: Any) -> Any:
    """A signed-in superuser, as a persona-like object for ``csrf_session``."""
    admin = get_user_model().objects.create_superuser("root", password="pw-root")

    class Root:
        user = admin

        def session(self) -> APIClient:
            client = APIClient(enforce_csrf_checks=True)
            client.force_login(admin)
            return client

    return Root()


class WorkspaceCreationRightsTests:
    def test_a_superuser_creates_a_workspace(self, superuser, viewer):
        response = csrf_session(superuser).post(
            "/v1/workspaces/", {"slug": "new-team", "name": "New Team"}, format="json"
        )

        assert response.status_code == 201, response.content
        workspace = Workspace.objects.get(slug="new-team")
        # Superusers operate every workspace already: no membership is needed.
        assert not Membership.objects.filter(workspace=workspace).exists()
        event = AuditEvent.objects.get(workspace=workspace)
        assert event.author == "user:root"

    @pytest.mark.parametrize("persona", ["operator", "editor", "viewer"])
    def test_without_self_service_a_member_cannot_create_a_workspace(self, request, persona):
        who = request.getfixturevalue(persona)
        before = state(who.workspace)

        response = csrf_session(who).post(
            "/v1/workspaces/", {"slug": "new-team", "name": "New Team"}, format="json"
        )

        error = error_of(response, 403, "WORKSPACE_CREATION_RESTRICTED")
        assert "superuser" in error["message"]
        assert state(who.workspace) == before
        assert not Workspace.objects.filter(slug="new-team").exists()

    def test_a_user_of_no_workspace_cannot_create_one_either(self, db):
        user = get_user_model().objects.create_user("newcomer", password="pw-newcomer")
        client = APIClient()
        client.force_login(user)

        response = client.post("/v1/workspaces/", {"slug": "mine", "name": "Mine"}, format="json")

        error_of(response, 403, "WORKSPACE_CREATION_RESTRICTED")
        assert not Workspace.objects.filter(slug="mine").exists()

    def test_self_service_is_off_by_default(self):
        from portal import settings as portal_settings

        assert portal_settings.WORKSPACE_SELF_SERVICE is False


class WorkspaceCreateTests:
    @pytest.fixture(autouse=True)
    def self_service(self, settings):
        settings.WORKSPACE_SELF_SERVICE = True

    def test_a_session_user_creates_a_workspace_and_becomes_its_operator(self, viewer):
        response = csrf_session(viewer).post(
            "/v1/workspaces/", {"slug": "new-team", "name": "New Team"}, format="json"
        )

        assert response.status_code == 201, response.content
        body = response.json()
        assert body["slug"] == "new-team"
        assert body["name"] == "New Team"
        assert body["environments"] == ["dev", "prod", "staging"]
        workspace = Workspace.objects.get(slug="new-team")
        assert Membership.objects.get(user=viewer.user, workspace=workspace).role == Role.OPERATOR
        floor = WorkspacePolicyVersion.objects.get(workspace=workspace)
        assert floor.version == 1
        assert floor.document == algebra.default_floor()
        event = AuditEvent.objects.get(workspace=workspace)
        assert event.type == EventType.WORKSPACE_POLICY_SET
        assert event.author == "user:vera"

    def test_an_api_token_cannot_create_a_workspace_even_with_self_service(self, operator):
        before = Workspace.objects.count()

        response = operator.api().post(
            "/v1/workspaces/", {"slug": "new-team", "name": "New Team"}, format="json"
        )

        error_of(response, 403, "PERMISSION_DENIED")
        assert Workspace.objects.count() == before

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"slug": "Bad Slug!", "name": "X"}, "slug"),
            ({"slug": "-leading-dash", "name": "X"}, "slug"),
            ({"slug": "x" * 51, "name": "X"}, "slug"),
            ({"slug": 12, "name": "X"}, "slug"),
            ({"name": "X"}, "slug"),
            ({"slug": "ok"}, "name"),
            ({"slug": "ok", "name": ["a list"]}, "name"),
            ({"slug": "ok", "name": "n" * 201}, "name"),
            ({"slug": "ok", "name": "X", "owner": "me"}, "owner"),
        ],
    )
    def test_it_rejects_a_bad_workspace_and_creates_nothing(self, editor, body, field):
        before = state(editor.workspace)

        response = csrf_session(editor).post("/v1/workspaces/", body, format="json")

        error = error_of(response, 400)
        assert field in error["details"]["fields"]
        assert state(editor.workspace) == before

    def test_a_taken_slug_is_a_conflict(self, editor):
        response = csrf_session(editor).post(
            "/v1/workspaces/", {"slug": "team-a", "name": "Again"}, format="json"
        )

        error_of(response, 409, "CONFLICT")

    def test_it_rejects_a_body_that_is_not_an_object(self, editor):
        before = state(editor.workspace)

        response = csrf_session(editor).post(
            "/v1/workspaces/", [{"slug": "x", "name": "X"}], format="json"
        )

        error = error_of(response, 400, "INVALID_REQUEST")
        assert "body" in error["details"]["fields"]
        assert state(editor.workspace) == before

    def test_it_rejects_malformed_json(self, editor):
        before = state(editor.workspace)

        response = csrf_session(editor).post(
            "/v1/workspaces/", data='{"slug": "x",', content_type="application/json"
        )

        error_of(response, 400, "MALFORMED_REQUEST")
        assert state(editor.workspace) == before


class WorkspaceDetailTests:
    def test_it_shows_a_workspace(self, viewer):
        response = viewer.api().get("/v1/workspaces/team-a/")

        assert response.status_code == 200
        assert set(response.json()) == {
            "slug", "name", "environments", "storeQueries", "recallRatePerMinute", "createdAt",
        }  # fmt: skip
        assert response.json()["slug"] == "team-a"

    def test_an_operator_renames_the_workspace(self, operator):
        response = operator.api().patch("/v1/workspaces/team-a/", {"name": "A Team"}, format="json")

        assert response.status_code == 200
        assert response.json()["name"] == "A Team"
        assert Workspace.objects.get(slug="team-a").name == "A Team"
        event = AuditEvent.objects.filter(type=EventType.WORKSPACE_RENAMED).get()
        assert event.payload == {"before": "Team A", "after": "A Team"}
        assert event.author.startswith("token:")

    @pytest.mark.parametrize("persona", ["editor", "viewer"])
    def test_only_an_operator_may_rename_the_workspace(self, request, persona):
        who = request.getfixturevalue(persona)

        response = who.api().patch("/v1/workspaces/team-a/", {"name": "Mine"}, format="json")

        error = error_of(response, 403, "PERMISSION_DENIED")
        assert error["details"] == {"requiredRole": "operator", "role": persona}
        assert Workspace.objects.get(slug="team-a").name == "Team A"

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"name": ""}, "name"),
            ({"name": None}, "name"),
            ({"name": {"nested": 1}}, "name"),
            ({"name": "n" * 201}, "name"),
            ({"name": "ok", "slug": "renamed"}, "slug"),
            ({}, "name"),
        ],
    )
    def test_it_rejects_a_bad_rename_and_changes_nothing(self, operator, body, field):
        before = state(operator.workspace)

        response = operator.api().patch("/v1/workspaces/team-a/", body, format="json")

        error = error_of(response, 400, "INVALID_REQUEST")
        assert field in error["details"]["fields"]
        assert state(operator.workspace) == before

    def test_an_unknown_workspace_is_not_found(self, operator):
        error_of(operator.api().get("/v1/workspaces/no-such/"), 404, "NOT_FOUND")


class WorkspacePolicyTests:
    def test_it_shows_the_current_floor(self, viewer):
        response = viewer.api().get(FLOOR_URL)

        assert response.status_code == 200
        body = response.json()
        assert set(body) == {"version", "policy", "relaxableAxes", "author", "comment", "createdAt"}
        assert body["version"] == 1
        assert set(body["policy"]) == set(AXES)
        assert body["relaxableAxes"] == []
        assert body["author"] == "system:test"

    def test_an_operator_replaces_the_floor_as_a_new_version(self, operator):
        floor = full_floor(sensitivityCeiling="internal", relaxableAxes=["confidenceMin"])

        response = operator.api().put(
            FLOOR_URL, {**floor, "comment": "Internal only"}, format="json"
        )

        assert response.status_code == 200, response.content
        body = response.json()
        assert body["version"] == 2
        assert body["policy"]["sensitivityCeiling"] == "internal"
        assert body["relaxableAxes"] == ["confidenceMin"]
        assert body["author"] == "token:olga-token"
        assert body["comment"] == "Internal only"
        assert operator.api().get(FLOOR_URL).json()["version"] == 2

    def test_saving_the_floor_writes_exactly_one_audit_event(self, operator):
        events_before = AuditEvent.objects.filter(workspace=operator.workspace).count()

        operator.api().put(
            FLOOR_URL,
            {**full_floor(totalTokenBudget=3000), "comment": "Tighter"},
            format="json",
        )

        events = AuditEvent.objects.filter(workspace=operator.workspace).order_by("id")
        assert events.count() == events_before + 1
        event = events.last()
        assert event.type == EventType.WORKSPACE_POLICY_SET
        assert event.author == "token:olga-token"
        assert event.payload["version"] == 2
        assert event.payload["comment"] == "Tighter"
        assert event.payload["before"]["policy"]["totalTokenBudget"] == 3200
        assert event.payload["after"]["policy"]["totalTokenBudget"] == 3000
        assert event.payload["diff"] == {"totalTokenBudget": {"before": 3200, "after": 3000}}

    def test_it_accepts_the_envelope_that_get_returns(self, operator):
        current = operator.api().get(FLOOR_URL).json()
        current["policy"]["confidenceMin"] = 0.4
        current["relaxableAxes"] = ["diagnosticsVerbosity"]
        current["comment"] = "Round trip"

        response = operator.api().put(FLOOR_URL, current, format="json")

        assert response.status_code == 200, response.content
        assert response.json()["policy"]["confidenceMin"] == 0.4
        assert response.json()["relaxableAxes"] == ["diagnosticsVerbosity"]
        assert response.json()["comment"] == "Round trip"

    @pytest.mark.parametrize("comment", [None, "", "   "])
    def test_a_floor_without_a_change_comment_is_a_400_naming_the_field(self, operator, comment):
        before = state(operator.workspace)
        body = full_floor(sensitivityCeiling="internal")
        if comment is not None:
            body["comment"] = comment

        response = operator.api().put(FLOOR_URL, body, format="json")

        error = error_of(response, 400, "INVALID_REQUEST")
        assert list(error["details"]["fields"]) == ["comment"]
        assert "a change comment (comment) is required" in error["details"]["fields"]["comment"]
        assert "a change comment (comment) is required" in error["message"]
        assert state(operator.workspace) == before

    def test_a_workload_policy_still_saves_without_a_comment(self, editor, workload_a):
        response = editor.api().put(
            f"/v1/workloads/{workload_a.id}/policy", {"confidenceMin": 0.4}, format="json"
        )

        assert response.status_code == 200, response.content
        assert response.json()["comment"] == ""

    @pytest.mark.parametrize("persona", ["editor", "viewer"])
    def test_only_an_operator_may_put_the_floor(self, request, persona):
        who = request.getfixturevalue(persona)
        before = state(who.workspace)

        response = who.api().put(FLOOR_URL, full_floor(), format="json")

        error_of(response, 403, "PERMISSION_DENIED")
        assert state(who.workspace) == before

    @pytest.mark.parametrize(
        ("body", "code", "fields"),
        [
            (
                {k: v for k, v in full_floor().items() if k != "pinned"},
                "INVALID_POLICY",
                ["pinned"],
            ),
            (full_floor(colour="blue"), "INVALID_POLICY", ["colour"]),
            (full_floor(confidenceMin="high"), "INVALID_POLICY", ["confidenceMin"]),
            (full_floor(confidenceMin=1.5), "INVALID_POLICY", ["confidenceMin"]),
            (full_floor(memoryTypeAllowed="fact"), "INVALID_POLICY", ["memoryTypeAllowed"]),
            (
                full_floor(memoryTypeAllowed=["fact", "gossip"]),
                "INVALID_POLICY",
                ["memoryTypeAllowed"],
            ),
            (full_floor(sensitivityCeiling="secret"), "INVALID_POLICY", ["sensitivityCeiling"]),
            (full_floor(totalTokenBudget=-1), "INVALID_POLICY", ["totalTokenBudget"]),
            (full_floor(totalTokenBudget=True), "INVALID_POLICY", ["totalTokenBudget"]),
            (full_floor(maxAgeSeconds=0), "INVALID_POLICY", ["maxAgeSeconds"]),
            (
                full_floor(perSegmentCeiling={"memory": -5}),
                "INVALID_POLICY",
                ["perSegmentCeiling"],
            ),
            (
                full_floor(perSegmentReservation={"attachments": 10}),
                "INVALID_POLICY",
                ["perSegmentReservation"],
            ),
            (full_floor(relaxableAxes=["colour"]), "INVALID_POLICY", ["relaxableAxes"]),
            ({**full_floor(), "comment": "c" * 501}, "INVALID_REQUEST", ["comment"]),
            ({**full_floor(), "comment": 42}, "INVALID_REQUEST", ["comment"]),
            ({"policy": "everything", "comment": "x"}, "INVALID_REQUEST", ["policy"]),
            ({"policy": full_floor(), "extra": 1}, "INVALID_REQUEST", ["extra"]),
            ({}, "INVALID_POLICY", ["totalTokenBudget"]),
        ],
    )
    def test_it_rejects_a_bad_floor_and_changes_nothing(self, operator, body, code, fields):
        before = state(operator.workspace)

        response = operator.api().put(FLOOR_URL, body, format="json")

        error = error_of(response, 400, code)
        for field in fields:
            assert field in error["details"]["fields"], error
        assert state(operator.workspace) == before

    @pytest.mark.parametrize(
        ("body", "fields"),
        [
            (full_floor(totalTokenBudget=1000), ["perSegmentReservation"]),  # past the total
            (full_floor(perSegmentCeiling={"memory": 100}), ["perSegmentReservation"]),
            (
                full_floor(forbiddenSegmentKinds=["system_policy"]),
                ["pinned", "forbiddenSegmentKinds"],
            ),
        ],
    )
    def test_a_well_formed_floor_whose_budget_cannot_be_honoured_is_a_422(
        self, operator, body, fields
    ):
        before = state(operator.workspace)

        response = operator.api().put(FLOOR_URL, body, format="json")

        error = error_of(response, 422, "BUDGET_NOT_HONOURABLE")
        assert set(error["details"]["fields"]) == set(fields)
        assert state(operator.workspace) == before

    def test_it_rejects_a_body_that_is_not_an_object(self, operator):
        before = state(operator.workspace)

        response = operator.api().put(FLOOR_URL, [full_floor()], format="json")

        error = error_of(response, 400, "INVALID_REQUEST")
        assert "body" in error["details"]["fields"]
        assert state(operator.workspace) == before

    def test_it_rejects_malformed_json(self, operator):
        before = state(operator.workspace)

        response = operator.api().put(
            FLOOR_URL, data="{'single': 'quotes'}", content_type="application/json"
        )

        error_of(response, 400, "MALFORMED_REQUEST")
        assert state(operator.workspace) == before

    def test_it_rejects_a_body_that_is_not_json(self, operator):
        response = operator.api().put(
            FLOOR_URL, data="totalTokenBudget=1", content_type="text/plain"
        )

        error_of(response, 415, "UNSUPPORTED_MEDIA_TYPE")


class WorkspacePolicyVersionTests:
    def test_it_lists_floor_versions_newest_first(self, operator):
        workspace_policy_save(
            workspace=operator.workspace,
            document=full_floor(totalTokenBudget=3000),
            author="user:olga",
            comment="Second",
        )

        response = operator.api().get(VERSIONS_URL)

        assert response.status_code == 200
        body = response.json()
        assert set(body) == {"count", "next", "previous", "results"}
        assert body["count"] == 2
        assert [v["version"] for v in body["results"]] == [2, 1]
        assert body["results"][0]["comment"] == "Second"
        assert body["results"][0]["author"] == "user:olga"
        assert set(body["results"][0]) == {
            "version",
            "policy",
            "relaxableAxes",
            "author",
            "comment",
            "createdAt",
        }

    def test_it_pages_the_history(self, operator):
        for budget in (3100, 3000, 2900):
            workspace_policy_save(
                workspace=operator.workspace,
                document=full_floor(totalTokenBudget=budget),
                author="user:olga",
                comment="Test floor",
            )

        body = operator.api().get(VERSIONS_URL + "?pageSize=2&page=2").json()

        assert body["count"] == 4
        assert [v["version"] for v in body["results"]] == [2, 1]

    def test_it_lists_versions_in_a_fixed_number_of_queries(
        self, operator, django_assert_num_queries
    ):
        for budget in range(3100, 2500, -100):
            workspace_policy_save(
                workspace=operator.workspace,
                document=full_floor(totalTokenBudget=budget),
                author="user:olga",
                comment="Test floor",
            )
        client = operator.api()

        # token, workspace, count, page
        with django_assert_num_queries(4):
            response = client.get(VERSIONS_URL)

        assert response.json()["count"] == 7

    def test_it_shows_one_old_version(self, operator):
        workspace_policy_save(
            workspace=operator.workspace,
            document=full_floor(totalTokenBudget=3000),
            author="user:olga",
            comment="Test floor",
        )

        response = operator.api().get("/v1/workspaces/team-a/policy/versions/1")

        assert response.status_code == 200
        assert response.json()["version"] == 1
        assert response.json()["policy"]["totalTokenBudget"] == 3200

    def test_an_unknown_version_is_not_found(self, operator):
        error_of(operator.api().get("/v1/workspaces/team-a/policy/versions/9"), 404, "NOT_FOUND")


class PolicyAxesTests:
    def test_it_lists_the_axis_registry(self, viewer):
        response = viewer.api().get("/v1/policy/axes")

        assert response.status_code == 200
        axes = {axis["name"]: axis for axis in response.json()["axes"]}
        assert list(axes) == list(AXES)
        assert axes["sensitivityCeiling"]["vocabulary"] == list(algebra.SENSITIVITY_ORDER)
        assert axes["totalTokenBudget"]["vocabulary"] is None
        assert set(axes["pinned"]) == {"name", "group", "kind", "vocabulary", "description"}

    def test_it_needs_a_caller(self, db):
        error_of(APIClient().get("/v1/policy/axes"), 401, "NOT_AUTHENTICATED")


class StoreQueriesTests:
    """Whether assembled events keep the query text: an operator's switch, audited."""

    def patch(self, persona, **body):
        return persona.api().patch("/v1/workspaces/team-a/", body, format="json")

    def test_a_misspelt_key_names_the_one_meant_and_changes_nothing(self, operator):
        response = self.patch(operator, storeQuery=True)

        fields = error_of(response, 400)["details"]["fields"]
        assert fields == {"storeQuery": "Unknown field; did you mean 'storeQueries'?"}
        operator.workspace.refresh_from_db()
        assert operator.workspace.store_queries is False

    def test_a_misspelt_key_is_reported_with_a_bad_value_and_changes_nothing(self, operator):
        response = self.patch(operator, storeQuery=True, recallRatePerMinute=0)

        fields = error_of(response, 400)["details"]["fields"]
        assert set(fields) == {"storeQuery", "recallRatePerMinute"}
        assert fields["storeQuery"] == "Unknown field; did you mean 'storeQueries'?"
        operator.workspace.refresh_from_db()
        assert operator.workspace.recall_rate_per_minute is None

    def test_an_operator_turns_it_on_and_off_and_each_change_is_audited(self, operator):
        from audit.models import AuditEvent, EventType

        response = self.patch(operator, storeQueries=True)

        assert response.status_code == 200, response.content
        assert response.json()["storeQueries"] is True
        operator.workspace.refresh_from_db()
        assert operator.workspace.store_queries is True

        def payloads():
            events = AuditEvent.objects.filter(type=EventType.WORKSPACE_SETTINGS_SET)
            return [e.payload["storeQueries"] for e in events.order_by("id")]

        assert payloads() == [{"before": False, "after": True}]
        self.patch(operator, storeQueries=True)  # unchanged: no second event
        assert len(payloads()) == 1
        assert self.patch(operator, storeQueries=False).json()["storeQueries"] is False
        assert payloads()[-1] == {"before": True, "after": False}

    @pytest.mark.parametrize("who", ["editor", "viewer"])
    def test_only_operators_change_it(self, request, who):
        response = self.patch(request.getfixturevalue(who), storeQueries=True)
        assert response.status_code == 403
        from portal.models import Workspace

        assert Workspace.objects.get(slug="team-a").store_queries is False

    @pytest.mark.parametrize("value", ["yes", 1, None])
    def test_only_a_boolean_is_accepted(self, operator, value):
        response = self.patch(operator, storeQueries=value)
        assert response.status_code == 400
        assert "storeQueries" in response.json()["error"]["details"]["fields"]

"""The workload endpoints: list/create within a workspace, and detail/rename/delete by id."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from audit.models import AuditEvent, EventType
from policies.models import Workload, WorkloadPolicyVersion
from policies.services import workload_create, workload_policy_save
from tests.helpers import csrf_session, error_of
from tests.module_personas import module_scoped

# The personas the tests here act as, made once per module (a workload is made per test:
# some tests count the workspace's workloads).
workspace_a, operator, editor, viewer, made_first = module_scoped(
    "workspace_a", "operator", "editor", "viewer"
)

LIST_URL = "/v1/workspaces/team-a/workloads/"


def state(workspace: Any) -> dict[str, Any]:
    """Everything a rejected write must leave untouched."""
    return {
        "workloads": sorted(
            Workload.objects.filter(workspace=workspace).values_list("id", "name", "description")
        ),
        "versions": WorkloadPolicyVersion.objects.filter(workload__workspace=workspace).count(),
        "events": AuditEvent.objects.filter(workspace=workspace).count(),
    }


def detail_url(workload: Workload) -> str:
    return f"/v1/workloads/{workload.id}/"


class WorkloadListTests:
    def test_it_lists_the_workspace_workloads_by_name(self, viewer, workload_a, workload_b):
        workload_create(workspace=viewer.workspace, name="alpha-bot", author="system:test")

        response = viewer.api().get(LIST_URL)

        assert response.status_code == 200
        body = response.json()
        assert set(body) == {"count", "next", "previous", "results"}
        assert body["count"] == 2
        assert [w["name"] for w in body["results"]] == ["alpha-bot", "support-bot"]
        support = body["results"][1]
        assert support == {
            "id": str(workload_a.id),
            "workspace": "team-a",
            "name": "support-bot",
            "description": "",
            "createdAt": support["createdAt"],
            "archivedAt": None,
        }

    def test_it_lists_in_a_fixed_number_of_queries_however_many_workloads(
        self, viewer, django_assert_num_queries
    ):
        for n in range(8):
            workload_create(workspace=viewer.workspace, name=f"bot-{n}", author="system:test")
        client = viewer.api()

        # token, workspace, count, page
        with django_assert_num_queries(4):
            response = client.get(LIST_URL)

        assert response.json()["count"] == 8

    def test_a_session_lists_in_a_fixed_number_of_queries(self, viewer, django_assert_num_queries):
        for n in range(8):
            workload_create(workspace=viewer.workspace, name=f"bot-{n}", author="system:test")
        client = viewer.session()

        # session, user, the row-level security scope, workspace with the caller's role,
        # count, page
        with django_assert_num_queries(6):
            client.get(LIST_URL)


class WorkloadCreateTests:
    def test_an_editor_creates_a_workload(self, editor):
        response = editor.api().post(
            LIST_URL, {"name": "triage-bot", "description": "Sorts tickets"}, format="json"
        )

        assert response.status_code == 201, response.content
        body = response.json()
        workload = Workload.objects.get(pk=body["id"])
        assert uuid.UUID(body["id"]) == workload.id
        assert body["workspace"] == "team-a"
        assert body["name"] == "triage-bot"
        assert body["description"] == "Sorts tickets"
        assert workload.workspace == editor.workspace

    def test_creating_a_workload_is_audited(self, editor):
        response = editor.api().post(LIST_URL, {"name": "triage-bot"}, format="json")

        event = AuditEvent.objects.filter(workspace=editor.workspace).order_by("-id").first()
        assert event.type == EventType.WORKLOAD_CREATED
        assert str(event.workload_id) == response.json()["id"]
        assert event.author == "token:eddie-token"
        assert event.payload == {"name": "triage-bot"}

    def test_a_session_editor_creates_a_workload_with_a_csrf_token(self, editor):
        response = csrf_session(editor).post(LIST_URL, {"name": "triage-bot"}, format="json")

        assert response.status_code == 201, response.content
        event = AuditEvent.objects.filter(workspace=editor.workspace).order_by("-id").first()
        assert event.author == "user:eddie"

    def test_a_viewer_cannot_create_a_workload(self, viewer):
        before = state(viewer.workspace)

        response = viewer.api().post(LIST_URL, {"name": "triage-bot"}, format="json")

        error_of(response, 403, "PERMISSION_DENIED")
        assert state(viewer.workspace) == before

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({}, "name"),
            ({"name": ""}, "name"),
            ({"name": None}, "name"),
            ({"name": 42}, "name"),
            ({"name": ["bot"]}, "name"),
            ({"name": "n" * 201}, "name"),
            ({"name": "bot", "description": 7}, "description"),
            ({"name": "bot", "colour": "red"}, "colour"),
        ],
    )
    def test_it_rejects_a_bad_workload_and_creates_nothing(self, editor, workload_a, body, field):
        before = state(editor.workspace)

        response = editor.api().post(LIST_URL, body, format="json")

        error = error_of(response, 400)
        assert field in error["details"]["fields"], error
        assert state(editor.workspace) == before

    def test_a_misspelt_key_is_reported_with_every_other_error(self, editor):
        # One answer names everything to fix: the key meant and the field left out.
        response = editor.api().post(LIST_URL, {"descripton": "triage"}, format="json")

        fields = error_of(response, 400)["details"]["fields"]
        assert fields == {
            "descripton": "Unknown field; did you mean 'description'?",
            "name": "This field is required.",
        }

    def test_a_taken_name_is_a_conflict(self, editor, workload_a):
        response = editor.api().post(LIST_URL, {"name": "support-bot"}, format="json")

        error_of(response, 409, "CONFLICT")

    def test_it_rejects_a_body_that_is_not_an_object(self, editor):
        before = state(editor.workspace)

        response = editor.api().post(LIST_URL, "triage-bot", format="json")

        error = error_of(response, 400, "INVALID_REQUEST")
        assert "body" in error["details"]["fields"]
        assert state(editor.workspace) == before

    def test_it_rejects_malformed_json(self, editor):
        before = state(editor.workspace)

        response = editor.api().post(
            LIST_URL, data='{"name": triage}', content_type="application/json"
        )

        error_of(response, 400, "MALFORMED_REQUEST")
        assert state(editor.workspace) == before


class WorkloadDetailTests:
    def test_it_shows_a_workload(self, viewer, workload_a):
        response = viewer.api().get(detail_url(workload_a))

        assert response.status_code == 200
        assert response.json()["id"] == str(workload_a.id)
        assert set(response.json()) == {
            "id",
            "workspace",
            "name",
            "description",
            "createdAt",
            "archivedAt",
        }

    def test_an_unknown_workload_is_not_found(self, viewer):
        error_of(viewer.api().get(f"/v1/workloads/{uuid.uuid4()}/"), 404, "NOT_FOUND")

    def test_a_malformed_workload_id_is_not_found_as_json(self, viewer):
        error_of(viewer.api().get("/v1/workloads/not-a-uuid/"), 404, "NOT_FOUND")

    def test_an_editor_renames_a_workload_and_keeps_its_description(self, editor):
        workload = workload_create(
            workspace=editor.workspace, name="bot", author="system:test", description="Keeps"
        )

        response = editor.api().patch(detail_url(workload), {"name": "renamed"}, format="json")

        assert response.status_code == 200, response.content
        assert response.json()["name"] == "renamed"
        workload.refresh_from_db()
        assert (workload.name, workload.description) == ("renamed", "Keeps")
        event = AuditEvent.objects.filter(type=EventType.WORKLOAD_UPDATED).get()
        assert event.workload_id == workload.id
        assert event.author.startswith("token:")
        assert event.payload == {"changes": {"name": {"before": "bot", "after": "renamed"}}}

    def test_a_patch_that_changes_nothing_records_nothing(self, editor, workload_a):
        response = editor.api().patch(
            detail_url(workload_a), {"name": "support-bot"}, format="json"
        )

        assert response.status_code == 200, response.content
        assert not AuditEvent.objects.filter(type=EventType.WORKLOAD_UPDATED).exists()

    def test_an_editor_changes_only_the_description(self, editor, workload_a):
        response = editor.api().patch(
            detail_url(workload_a), {"description": "Now documented"}, format="json"
        )

        assert response.status_code == 200, response.content
        workload_a.refresh_from_db()
        assert (workload_a.name, workload_a.description) == ("support-bot", "Now documented")

    def test_a_viewer_cannot_rename_a_workload(self, viewer, workload_a):
        before = state(viewer.workspace)

        response = viewer.api().patch(detail_url(workload_a), {"name": "mine"}, format="json")

        error_of(response, 403, "PERMISSION_DENIED")
        assert state(viewer.workspace) == before

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"name": ""}, "name"),
            ({"name": 3}, "name"),
            ({"name": "n" * 201}, "name"),
            ({"description": ["x"]}, "description"),
            ({"workspace": "team-b"}, "workspace"),
        ],
    )
    def test_it_rejects_a_bad_rename_and_changes_nothing(self, editor, workload_a, body, field):
        before = state(editor.workspace)

        response = editor.api().patch(detail_url(workload_a), body, format="json")

        error = error_of(response, 400)
        assert field in error["details"]["fields"], error
        assert state(editor.workspace) == before

    def test_renaming_onto_a_taken_name_is_a_conflict(self, editor, workload_a):
        other = workload_create(workspace=editor.workspace, name="other", author="system:test")
        before = state(editor.workspace)

        response = editor.api().patch(detail_url(other), {"name": "support-bot"}, format="json")

        error_of(response, 409, "CONFLICT")
        assert state(editor.workspace) == before

    def test_it_rejects_a_patch_that_is_not_an_object(self, editor, workload_a):
        before = state(editor.workspace)

        response = editor.api().patch(detail_url(workload_a), ["renamed"], format="json")

        error = error_of(response, 400, "INVALID_REQUEST")
        assert "body" in error["details"]["fields"]
        assert state(editor.workspace) == before

    def test_delete_archives_the_workload_and_it_is_audited(self, operator, workload_a):
        workload_policy_save(
            workload=workload_a, environment="prod", document={}, author="system:test"
        )

        response = operator.api().delete(detail_url(workload_a))

        assert response.status_code == 204
        archived = Workload.objects.get(pk=workload_a.pk)
        assert archived.archived_at is not None
        event = AuditEvent.objects.filter(workspace=operator.workspace).order_by("-id").first()
        assert event.type == EventType.WORKLOAD_ARCHIVED
        assert event.workload_id == workload_a.id
        assert event.payload == {"name": "support-bot"}
        # still readable, with its policy versions; out of the list unless asked for
        body = operator.api().get(detail_url(workload_a)).json()
        assert body["archivedAt"] is not None
        versions = (
            operator.api()
            .get(f"/v1/workloads/{workload_a.id}/policy/versions/", {"environment": "prod"})
            .json()
        )
        assert versions["count"] == 1
        assert operator.api().get(LIST_URL).json()["count"] == 0
        assert operator.api().get(LIST_URL, {"archived": "true"}).json()["count"] == 1
        # archiving again changes nothing and records nothing
        events = AuditEvent.objects.count()
        assert operator.api().delete(detail_url(workload_a)).status_code == 204
        assert AuditEvent.objects.count() == events

    def test_an_archived_workload_refuses_recall_and_changes(self, operator, editor, workload_a):
        operator.api().delete(detail_url(workload_a))
        before = state(editor.workspace)

        recall = editor.api().post(
            "/v1/memory/actors/user:ada/recall",
            {"workloadId": str(workload_a.id), "environment": "prod", "query": "q"},
            format="json",
        )
        put = editor.api().put(
            f"/v1/workloads/{workload_a.id}/policy?environment=prod",
            {"policy": {"topK": 3}},
            format="json",
        )
        patch = editor.api().patch(detail_url(workload_a), {"name": "x"}, format="json")

        for response in (recall, put, patch):
            error_of(response, 409, "WORKLOAD_ARCHIVED")
        assert "archived" in recall.json()["error"]["message"]
        assert state(editor.workspace) == before
        effective = editor.api().get(f"/v1/workloads/{workload_a.id}/effective-policy")
        assert effective.status_code == 200, effective.content

    def test_an_archived_workloads_name_may_be_used_again(self, operator, editor, workload_a):
        operator.api().delete(detail_url(workload_a))

        response = editor.api().post(LIST_URL, {"name": "support-bot"}, format="json")

        assert response.status_code == 201, response.content
        assert response.json()["id"] != str(workload_a.id)

    @pytest.mark.parametrize("persona", ["editor", "viewer"])
    def test_only_an_operator_may_delete_a_workload(self, request, persona, workload_a):
        who = request.getfixturevalue(persona)
        before = state(who.workspace)

        response = who.api().delete(detail_url(workload_a))

        error = error_of(response, 403, "PERMISSION_DENIED")
        assert error["details"]["requiredRole"] == "operator"
        assert state(who.workspace) == before

    def test_an_unsupported_method_is_a_json_405(self, operator, workload_a):
        error_of(operator.api().put(detail_url(workload_a), {}, format="json"), 405)

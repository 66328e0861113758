"""Workload policies per environment, their history, and the effective policy."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.db import connection

from audit.models import AuditEvent, EventType
from policies import algebra
from policies.axes import AXES
from policies.models import WorkloadPolicyVersion
from policies.services import workload_policy_save, workspace_policy_save
from portal.models import Environment
from tests.helpers import database_owner, error_of
from tests.module_personas import module_scoped

# The personas and workload the tests here act as and on, made once per module.
workspace_a, editor, viewer, workload_a, made_first = module_scoped(
    "workspace_a", "editor", "viewer", "workload_a"
)


def state(workspace: Any) -> dict[str, Any]:
    """Everything a rejected policy write must leave untouched."""
    return {
        "versions": list(
            WorkloadPolicyVersion.objects.filter(workload__workspace=workspace)
            .order_by("id")
            .values_list("workload_id", "environment", "version", "document")
        ),
        "floors": workspace.policy_versions.count(),
        "events": AuditEvent.objects.filter(workspace=workspace).count(),
    }


def policy_url(workload: Any, environment: str | None = "prod") -> str:
    query = f"?environment={environment}" if environment else ""
    return f"/v1/workloads/{workload.id}/policy{query}"


def versions_url(workload: Any, environment: str | None = "prod") -> str:
    query = f"?environment={environment}" if environment else ""
    return f"/v1/workloads/{workload.id}/policy/versions/{query}"


def effective_url(workload: Any, environment: str | None = "prod") -> str:
    query = f"?environment={environment}" if environment else ""
    return f"/v1/workloads/{workload.id}/effective-policy{query}"


def floor(**changes: Any) -> dict[str, Any]:
    return {**algebra.default_floor(), "relaxableAxes": [], **changes}


HEX64 = re.compile(r"^[0-9a-f]{64}$")


class WorkloadPolicySaveTests:
    def test_an_editor_saves_a_policy_for_an_environment(self, editor, workload_a):
        response = editor.api().put(
            policy_url(workload_a),
            {"sensitivityCeiling": "internal", "memoryTypeAllowed": ["fact", "decision"]},
            format="json",
        )

        assert response.status_code == 200, response.content
        body = response.json()
        assert body == {
            "workloadId": str(workload_a.id),
            "environment": "prod",
            "version": 1,
            "policy": {"memoryTypeAllowed": ["decision", "fact"], "sensitivityCeiling": "internal"},
            "author": "token:eddie-token",
            "comment": "",
            "createdAt": body["createdAt"],
        }

    def test_without_an_environment_it_saves_the_all_environments_default(self, editor, workload_a):
        response = editor.api().put(
            policy_url(workload_a, None), {"totalTokenBudget": 3000}, format="json"
        )

        assert response.status_code == 200, response.content
        assert response.json()["environment"] is None
        assert WorkloadPolicyVersion.objects.get(workload=workload_a).environment == ""

    def test_versions_increment_per_environment(self, editor, workload_a):
        client = editor.api()
        for budget in (3000, 2900):
            client.put(policy_url(workload_a), {"totalTokenBudget": budget}, format="json")
        staging = client.put(
            policy_url(workload_a, "staging"), {"totalTokenBudget": 2800}, format="json"
        )
        third = client.put(policy_url(workload_a), {"totalTokenBudget": 2700}, format="json")

        assert staging.json()["version"] == 1
        assert third.json()["version"] == 3
        assert client.get(policy_url(workload_a)).json()["policy"] == {"totalTokenBudget": 2700}

    def test_each_save_writes_exactly_one_audit_event_with_before_and_after(
        self, editor, workload_a
    ):
        client = editor.api()
        client.put(policy_url(workload_a), {"totalTokenBudget": 3000}, format="json")
        events_before = AuditEvent.objects.filter(workspace=editor.workspace).count()

        client.put(
            policy_url(workload_a),
            {"totalTokenBudget": 2500, "comment": "  Smaller prompts  "},
            format="json",
        )

        events = AuditEvent.objects.filter(workspace=editor.workspace).order_by("id")
        assert events.count() == events_before + 1
        event = events.last()
        assert event.type == EventType.WORKLOAD_POLICY_SET
        assert event.workload_id == workload_a.id
        assert event.environment == "prod"
        assert event.author == "token:eddie-token"
        assert event.payload["version"] == 2
        assert event.payload["before"] == {"totalTokenBudget": 3000}
        assert event.payload["after"] == {"totalTokenBudget": 2500}
        assert event.payload["comment"] == "Smaller prompts"
        assert event.payload["diff"] == {"totalTokenBudget": {"before": 3000, "after": 2500}}
        assert event.payload["floorVersion"] == 1

    def test_it_accepts_the_envelope_that_get_returns(self, editor, workload_a):
        client = editor.api()
        client.put(policy_url(workload_a), {"confidenceMin": 0.3}, format="json")
        current = client.get(policy_url(workload_a)).json()
        current["policy"]["confidenceMin"] = 0.6
        current["comment"] = "Round trip"

        response = client.put(policy_url(workload_a), current, format="json")

        assert response.status_code == 200, response.content
        assert response.json()["version"] == 2
        assert response.json()["policy"] == {"confidenceMin": 0.6}
        assert response.json()["comment"] == "Round trip"

    def test_an_envelope_from_another_environment_or_workload_is_refused(self, editor, workload_a):
        client = editor.api()
        client.put(policy_url(workload_a, "staging"), {"confidenceMin": 0.3}, format="json")
        staging = client.get(policy_url(workload_a, "staging")).json()
        before = state(editor.workspace)

        wrong_env = client.put(policy_url(workload_a, "prod"), staging, format="json")
        wrong_workload = client.put(
            policy_url(workload_a, "staging"),
            {**staging, "workloadId": str(uuid.uuid4())},
            format="json",
        )

        assert "environment" in error_of(wrong_env, 400)["details"]["fields"]
        assert "workloadId" in error_of(wrong_workload, 400)["details"]["fields"]
        assert state(editor.workspace) == before

    def test_an_operator_may_save_a_workload_policy(self, operator, workload_a):
        response = operator.api().put(policy_url(workload_a), {}, format="json")

        assert response.status_code == 200
        assert response.json()["policy"] == {}

    def test_a_viewer_cannot_save_a_workload_policy(self, viewer, workload_a):
        before = state(viewer.workspace)

        response = viewer.api().put(policy_url(workload_a), {"confidenceMin": 0.5}, format="json")

        error_of(response, 403, "PERMISSION_DENIED")
        assert state(viewer.workspace) == before

    def test_a_failing_audit_write_rolls_the_policy_version_back(self, editor, workload_a):
        # A real database failure inside the audit insert (no mocks): the version row written
        # just before it in the same transaction must disappear with it. The trigger is the
        # owner's to create (tests/policies/test_policy_change_faults.py goes further).
        with database_owner(), connection.cursor() as cursor:
            cursor.execute(
                "CREATE FUNCTION test_refuse_audit() RETURNS trigger AS $$ "
                "BEGIN RAISE EXCEPTION 'audit refused'; END $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                "CREATE TRIGGER test_refuse_audit BEFORE INSERT ON audit_auditevent "
                "FOR EACH ROW EXECUTE FUNCTION test_refuse_audit()"
            )
        before = state(editor.workspace)

        response = editor.api().put(policy_url(workload_a), {"confidenceMin": 0.5}, format="json")

        error = error_of(response, 500, "SERVER_ERROR")
        assert "audit refused" not in error["message"]  # no internals on the wire
        assert state(editor.workspace) == before


class WorkloadPolicyValidationTests:
    @pytest.mark.parametrize(
        ("body", "code", "fields"),
        [
            ({"colour": "blue"}, "INVALID_POLICY", ["colour"]),
            ({"confidenceMin": "0.5"}, "INVALID_POLICY", ["confidenceMin"]),
            ({"confidenceMin": -0.1}, "INVALID_POLICY", ["confidenceMin"]),
            ({"memoryTypeAllowed": "fact"}, "INVALID_POLICY", ["memoryTypeAllowed"]),
            ({"memoryTypeAllowed": ["fact", "rumour"]}, "INVALID_POLICY", ["memoryTypeAllowed"]),
            ({"sensitivityCeiling": "secret"}, "INVALID_POLICY", ["sensitivityCeiling"]),
            ({"diagnosticsVerbosity": 2}, "INVALID_POLICY", ["diagnosticsVerbosity"]),
            ({"totalTokenBudget": -100}, "INVALID_POLICY", ["totalTokenBudget"]),
            ({"totalTokenBudget": 0}, "INVALID_POLICY", ["totalTokenBudget"]),
            ({"totalTokenBudget": 12.5}, "INVALID_POLICY", ["totalTokenBudget"]),
            ({"maxAgeSeconds": -1}, "INVALID_POLICY", ["maxAgeSeconds"]),
            ({"perSegmentCeiling": {"memory": -1}}, "INVALID_POLICY", ["perSegmentCeiling"]),
            ({"perSegmentCeiling": [1, 2]}, "INVALID_POLICY", ["perSegmentCeiling"]),
            (
                {"perSegmentReservation": {"scratchpad": 10}},
                "INVALID_POLICY",
                ["perSegmentReservation"],
            ),
            ({"dropOrder": ["memory", "memory"]}, "INVALID_POLICY", ["dropOrder"]),
            ({"comment": "c" * 501}, "INVALID_REQUEST", ["comment"]),
            ({"comment": ["not", "text"]}, "INVALID_REQUEST", ["comment"]),
            ({"policy": ["memory"]}, "INVALID_REQUEST", ["policy"]),
            (
                {"policy": {}, "relaxableAxes": ["confidenceMin"]},
                "INVALID_REQUEST",
                ["relaxableAxes"],
            ),
            ({"relaxableAxes": ["confidenceMin"]}, "INVALID_POLICY", ["relaxableAxes"]),
        ],
    )
    def test_it_rejects_a_bad_policy_and_changes_nothing(
        self, editor, workload_a, body, code, fields
    ):
        before = state(editor.workspace)

        response = editor.api().put(policy_url(workload_a), body, format="json")

        error = error_of(response, 400, code)
        for field in fields:
            assert field in error["details"]["fields"], error
        assert state(editor.workspace) == before

    @pytest.mark.parametrize(
        ("body", "fields"),
        [
            (
                {
                    "pinned": ["system_policy", "tool_result"],
                    "forbiddenSegmentKinds": ["tool_result"],
                },
                ["pinned", "forbiddenSegmentKinds"],
            ),
            ({"totalTokenBudget": 2000}, ["perSegmentReservation"]),  # reservations past it
        ],
    )
    def test_a_well_formed_policy_whose_budget_cannot_be_honoured_is_a_422(
        self, editor, workload_a, body, fields
    ):
        before = state(editor.workspace)

        response = editor.api().put(policy_url(workload_a), body, format="json")

        error = error_of(response, 422, "BUDGET_NOT_HONOURABLE")
        assert set(error["details"]["fields"]) == set(fields)
        assert state(editor.workspace) == before

    @pytest.mark.parametrize(
        ("body", "axes"),
        [
            ({"sensitivityCeiling": "restricted"}, ["sensitivityCeiling"]),
            ({"totalTokenBudget": 5000}, ["totalTokenBudget"]),
            ({"consentPolicyAllowed": ["explicit", "withdrawn"]}, ["consentPolicyAllowed"]),
            ({"pinned": []}, ["pinned"]),
            ({"perSegmentCeiling": {"retrieval": 1200}}, ["perSegmentCeiling"]),
            (
                {"perSegmentReservation": {"system_policy": 500, "memory": 1300}},
                ["perSegmentReservation"],
            ),
            ({"diagnosticsVerbosity": "full", "confidenceMin": 0.0}, ["diagnosticsVerbosity"]),
            (
                {"sensitivityCeiling": "restricted", "totalTokenBudget": 9999},
                ["sensitivityCeiling", "totalTokenBudget"],
            ),
        ],
    )
    def test_it_rejects_a_workload_that_relaxes_the_floor(self, editor, workload_a, body, axes):
        before = state(editor.workspace)

        response = editor.api().put(policy_url(workload_a), body, format="json")

        error = error_of(response, 422, "WORKLOAD_RELAXES_OPERATOR_FLOOR")
        assert error["details"]["axes"] == axes
        assert set(error["details"]["floor"]) == set(axes)
        assert state(editor.workspace) == before

    def test_it_rejects_a_body_that_is_not_an_object(self, editor, workload_a):
        before = state(editor.workspace)

        response = editor.api().put(policy_url(workload_a), [1, 2, 3], format="json")

        error = error_of(response, 400, "INVALID_REQUEST")
        assert "body" in error["details"]["fields"]
        assert state(editor.workspace) == before

    def test_it_rejects_malformed_json(self, editor, workload_a):
        before = state(editor.workspace)

        response = editor.api().put(
            policy_url(workload_a), data="{confidenceMin: 0.5}", content_type="application/json"
        )

        error_of(response, 400, "MALFORMED_REQUEST")
        assert state(editor.workspace) == before

    def test_it_rejects_an_unknown_environment(self, editor, workload_a):
        before = state(editor.workspace)

        response = editor.api().put(
            policy_url(workload_a, "qa"), {"confidenceMin": 0.5}, format="json"
        )

        error = error_of(response, 400, "INVALID_REQUEST")
        assert "environment" in error["details"]["fields"]
        assert "qa" in error["details"]["fields"]["environment"]
        assert state(editor.workspace) == before

    def test_a_workspace_defined_environment_is_accepted(self, editor, workload_a):
        Environment.objects.create(workspace=editor.workspace, slug="qa")

        response = editor.api().put(policy_url(workload_a, "qa"), {}, format="json")

        assert response.status_code == 200
        assert response.json()["environment"] == "qa"

    def test_it_rejects_an_unknown_workload(self, editor):
        before = state(editor.workspace)

        response = editor.api().put(
            f"/v1/workloads/{uuid.uuid4()}/policy?environment=prod", {}, format="json"
        )

        error_of(response, 404, "NOT_FOUND")
        assert state(editor.workspace) == before

    def test_another_workspaces_workload_is_not_found(self, editor, workload_b):
        before_b = state(workload_b.workspace)

        response = editor.api().put(policy_url(workload_b), {}, format="json")

        error_of(response, 404, "NOT_FOUND")
        assert state(workload_b.workspace) == before_b


class WorkloadPolicyReadTests:
    def test_a_policy_not_saved_yet_is_not_found_as_json(self, viewer, workload_a):
        error = error_of(viewer.api().get(policy_url(workload_a)), 404, "NOT_FOUND")

        assert "floor applies" in error["message"]

    def test_the_default_and_the_environment_policy_are_separate(self, viewer, workload_a):
        workload_policy_save(
            workload=workload_a, environment=None, document={"confidenceMin": 0.2}, author="a"
        )
        workload_policy_save(
            workload=workload_a, environment="prod", document={"confidenceMin": 0.7}, author="a"
        )

        client = viewer.api()

        assert client.get(policy_url(workload_a, None)).json()["policy"] == {"confidenceMin": 0.2}
        assert client.get(policy_url(workload_a)).json()["policy"] == {"confidenceMin": 0.7}
        error_of(client.get(policy_url(workload_a, "staging")), 404, "NOT_FOUND")

    def test_reading_an_unknown_environment_is_a_400(self, viewer, workload_a):
        error = error_of(viewer.api().get(policy_url(workload_a, "nowhere")), 400)

        assert "environment" in error["details"]["fields"]

    def test_it_lists_versions_newest_first_for_one_environment(self, viewer, workload_a):
        for budget in (3000, 2900, 2800):
            workload_policy_save(
                workload=workload_a,
                environment="prod",
                document={"totalTokenBudget": budget},
                author="user:eddie",
                comment=f"to {budget}",
            )
        workload_policy_save(
            workload=workload_a, environment="staging", document={}, author="user:eddie"
        )

        body = viewer.api().get(versions_url(workload_a)).json()

        assert set(body) == {"count", "next", "previous", "results"}
        assert body["count"] == 3
        assert [v["version"] for v in body["results"]] == [3, 2, 1]
        assert [v["comment"] for v in body["results"]] == ["to 2800", "to 2900", "to 3000"]
        assert {v["environment"] for v in body["results"]} == {"prod"}

    def test_it_lists_versions_in_a_fixed_number_of_queries(
        self, viewer, workload_a, django_assert_num_queries
    ):
        for budget in range(3100, 2500, -100):
            workload_policy_save(
                workload=workload_a,
                environment="prod",
                document={"totalTokenBudget": budget},
                author="user:eddie",
            )
        client = viewer.api()

        # token, workload, environment check, count, page
        with django_assert_num_queries(5):
            response = client.get(versions_url(workload_a))

        assert response.json()["count"] == 6

    def test_listing_versions_of_an_unknown_environment_is_a_400(self, viewer, workload_a):
        error = error_of(viewer.api().get(versions_url(workload_a, "nowhere")), 400)

        assert "environment" in error["details"]["fields"]


class EffectivePolicyTests:
    def test_with_no_workload_policy_it_is_the_floor(self, viewer, workload_a):
        response = viewer.api().get(effective_url(workload_a))

        assert response.status_code == 200
        body = response.json()
        assert set(body) == {
            "workloadId",
            "environment",
            "policy",
            "relaxableAxes",
            "effectivePolicyHash",
            "effectiveBudgetHash",
            "compliant",
            "relaxingAxes",
            "conflicts",
            "floorVersion",
            "workloadPolicyVersion",
        }
        assert body["policy"] == algebra.default_floor()
        assert body["compliant"] is True
        assert body["relaxingAxes"] == []
        assert body["conflicts"] == []
        assert body["floorVersion"] == 1
        assert body["workloadPolicyVersion"] is None
        assert body["environment"] == "prod"

    def test_it_returns_every_axis_and_the_hashes_of_the_effective_policy(self, viewer, workload_a):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"sensitivityCeiling": "internal", "totalTokenBudget": 3000},
            author="user:eddie",
        )

        body = viewer.api().get(effective_url(workload_a)).json()

        assert set(body["policy"]) == set(AXES)
        assert body["policy"]["sensitivityCeiling"] == "internal"
        assert body["policy"]["totalTokenBudget"] == 3000
        assert HEX64.match(body["effectivePolicyHash"])
        assert HEX64.match(body["effectiveBudgetHash"])
        assert (body["effectivePolicyHash"], body["effectiveBudgetHash"]) == (
            algebra.policy_hashes(body["policy"])
        )
        assert body["workloadPolicyVersion"] == 1

    def test_the_environment_policy_wins_over_the_default(self, viewer, workload_a):
        workload_policy_save(
            workload=workload_a, environment=None, document={"confidenceMin": 0.2}, author="a"
        )
        workload_policy_save(
            workload=workload_a, environment="prod", document={"confidenceMin": 0.7}, author="a"
        )
        client = viewer.api()

        prod = client.get(effective_url(workload_a, "prod")).json()
        staging = client.get(effective_url(workload_a, "staging")).json()
        default = client.get(effective_url(workload_a, None)).json()

        assert prod["policy"]["confidenceMin"] == 0.7
        assert staging["policy"]["confidenceMin"] == 0.2
        assert default["policy"]["confidenceMin"] == 0.2
        assert default["environment"] is None
        assert prod["effectivePolicyHash"] != staging["effectivePolicyHash"]
        assert prod["effectiveBudgetHash"] == staging["effectiveBudgetHash"]

    def test_a_narrowed_floor_makes_an_older_workload_policy_non_compliant_and_clamped(
        self, operator, workload_a
    ):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"sensitivityCeiling": "confidential", "totalTokenBudget": 3000},
            author="user:eddie",
        )
        operator.api().put(
            "/v1/workspaces/team-a/policy",
            {
                **floor(sensitivityCeiling="internal", totalTokenBudget=2600),
                "comment": "Narrow the floor",
            },
            format="json",
        )

        body = operator.api().get(effective_url(workload_a)).json()

        assert body["compliant"] is False
        assert body["relaxingAxes"] == ["sensitivityCeiling", "totalTokenBudget"]
        assert body["policy"]["sensitivityCeiling"] == "internal"
        assert body["policy"]["totalTokenBudget"] == 2600
        assert body["floorVersion"] == 2
        assert body["workloadPolicyVersion"] == 1

    def test_a_narrowed_total_budget_clamps_an_older_workload_policy(self, operator, workload_a):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={
                "perSegmentReservation": {
                    "system_policy": 500,
                    "memory": 1000,
                    "retrieval": 900,
                    "tool_result": 300,
                }
            },
            author="user:eddie",
        )
        workspace_policy_save(
            workspace=operator.workspace,
            document=floor(
                totalTokenBudget=2600,
                perSegmentReservation={
                    "system_policy": 500,
                    "memory": 700,
                    "retrieval": 800,
                    "tool_result": 300,
                },
            ),
            author="user:olga",
            comment="Test floor",
        )

        response = operator.api().get(effective_url(workload_a))

        assert response.status_code == 200, response.content
        policy = response.json()["policy"]
        assert sum(policy["perSegmentReservation"].values()) <= policy["totalTokenBudget"]

    def test_an_unknown_environment_is_a_400(self, viewer, workload_a):
        error = error_of(viewer.api().get(effective_url(workload_a, "moon")), 400)

        assert "environment" in error["details"]["fields"]

    def test_an_unknown_workload_is_not_found(self, viewer):
        error_of(
            viewer.api().get(f"/v1/workloads/{uuid.uuid4()}/effective-policy"), 404, "NOT_FOUND"
        )

    def test_relaxable_axes_come_from_the_floor(self, viewer, workload_a):
        workspace_policy_save(
            workspace=viewer.workspace,
            document=floor(relaxableAxes=["confidenceMin", "memoryTypeAllowed"]),
            author="user:olga",
            comment="Test floor",
        )

        body = viewer.api().get(effective_url(workload_a)).json()

        assert body["relaxableAxes"] == ["confidenceMin", "memoryTypeAllowed"]


class FloorAuditDiffTests:
    def test_a_change_of_relaxable_axes_alone_shows_in_the_diff(self, operator):
        workspace_policy_save(
            workspace=operator.workspace,
            document=floor(relaxableAxes=["confidenceMin"]),
            author="user:olga",
            comment="Test floor",
        )

        event = AuditEvent.objects.filter(
            workspace=operator.workspace, type=EventType.WORKSPACE_POLICY_SET
        ).latest("id")
        assert event.payload["diff"] == {
            "relaxableAxes": {"before": [], "after": ["confidenceMin"]}
        }


class OvercommittedWorkloadTests:
    def test_reservations_raised_past_the_total_are_refused_not_silently_fitted(
        self, editor, workload_a
    ):
        response = editor.api().put(
            f"/v1/workloads/{workload_a.id}/policy?environment=prod",
            {"perSegmentReservation": {"system_policy": 500, "memory": 1200, "retrieval": 1200,
                                       "tool_result": 800}},
            format="json",
        )  # fmt: skip

        error_of(response, 422, "BUDGET_NOT_HONOURABLE")
        assert not workload_a.policy_versions.exists()

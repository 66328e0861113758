"""Concurrent policy edits never silently undo each other: ETag, If-Match / baseVersion, 409.

And a save identical to the current version records nothing, in the API and the forms.
"""

from __future__ import annotations

from typing import Any

import pytest

from audit.models import AuditEvent
from policies import algebra
from policies.models import WorkloadPolicyVersion, WorkspacePolicyVersion
from policies.services import workload_policy_save, workspace_policy_save
from portal.errors import VersionConflict
from portal.models import Workspace
from tests.helpers import error_of, run_in_threads
from tests.policies.test_pages import client_for, floor_post, floor_url, workload_post, workload_url

pytestmark = pytest.mark.django_db

FLOOR_URL = "/v1/workspaces/team-a/policy"


def floor(**changes: Any) -> dict[str, Any]:
    return {**algebra.default_floor(), "relaxableAxes": [], **changes}


def floor_body(**changes: Any) -> dict[str, Any]:
    """A floor as the API saves it: with its change comment (required)."""
    return {**floor(**changes), "comment": "Test change"}


def axes(**changes: Any) -> dict[str, Any]:
    """A floor's axes as the form posts them (relaxable axes are checkboxes of their own)."""
    return {**algebra.default_floor(), **changes}


def policy_url(workload: Any, environment: str = "prod") -> str:
    return f"/v1/workloads/{workload.id}/policy?environment={environment}"


def state(workspace: Workspace) -> dict[str, Any]:
    """Everything a refused or empty save must leave untouched."""
    return {
        "floors": list(
            WorkspacePolicyVersion.objects.filter(workspace=workspace)
            .order_by("version")
            .values_list("version", "document", "relaxable_axes", "comment")
        ),
        "workloads": list(
            WorkloadPolicyVersion.objects.filter(workload__workspace=workspace)
            .order_by("id")
            .values_list("environment", "version", "document", "comment")
        ),
        "events": AuditEvent.objects.filter(workspace=workspace).count(),
    }


def save_workload(workload: Any, document: dict[str, Any], **kwargs: Any) -> Any:
    return workload_policy_save(
        workload=workload, environment="prod", document=document, author="user:olga", **kwargs
    )


# --- the API ---------------------------------------------------------------------------------


class FloorApiTests:
    def test_get_carries_the_version_as_its_etag(self, viewer):
        response = viewer.api().get(FLOOR_URL)

        assert response.status_code == 200
        assert response["ETag"] == '"1"'
        assert response.json()["version"] == 1

    def test_a_save_answers_with_the_new_versions_etag(self, operator):
        response = operator.api().put(
            FLOOR_URL, floor_body(totalTokenBudget=3000), format="json", HTTP_IF_MATCH='"1"'
        )

        assert response.status_code == 200, response.content
        assert response.json()["version"] == 2
        assert response["ETag"] == '"2"'

    @pytest.mark.parametrize("how", ["if-match", "base-version"])
    def test_the_second_of_two_saves_from_the_same_base_is_a_409_and_changes_nothing(
        self, operator, how
    ):
        def put(document: dict[str, Any]) -> Any:
            if how == "if-match":
                return operator.api().put(FLOOR_URL, document, format="json", HTTP_IF_MATCH='"1"')
            return operator.api().put(FLOOR_URL, {**document, "baseVersion": 1}, format="json")

        first = put(floor_body(totalTokenBudget=3000))
        assert first.status_code == 200, first.content
        after_first = state(operator.workspace)

        second = put(floor_body(sensitivityCeiling="internal"))

        error = error_of(second, 409, "VERSION_CONFLICT")
        assert error["details"] == {"currentVersion": 2, "baseVersion": 1}
        assert "version 2" in error["message"] and "version 1" in error["message"]
        assert state(operator.workspace) == after_first
        current = operator.api().get(FLOOR_URL).json()
        assert current["policy"]["totalTokenBudget"] == 3000
        assert current["policy"]["sensitivityCeiling"] == "confidential"

    def test_the_envelope_from_get_with_its_etag_saves(self, operator):
        read = operator.api().get(FLOOR_URL)
        body = read.json()
        body["policy"]["confidenceMin"] = 0.3

        response = operator.api().put(FLOOR_URL, body, format="json", HTTP_IF_MATCH=read["ETag"])

        assert response.status_code == 200, response.content
        assert response.json()["version"] == 2

    def test_a_weak_etag_is_accepted_too(self, operator):
        response = operator.api().put(
            FLOOR_URL, floor_body(totalTokenBudget=3000), format="json", HTTP_IF_MATCH='W/"1"'
        )

        assert response.status_code == 200, response.content

    def test_a_save_without_a_base_version_is_not_checked(self, operator):
        workspace_policy_save(
            workspace=operator.workspace,
            document=floor(totalTokenBudget=3000),
            author="x",
            comment="Test floor",
        )

        response = operator.api().put(FLOOR_URL, floor_body(totalTokenBudget=2800), format="json")

        assert response.status_code == 200, response.content
        assert response.json()["version"] == 3

    def test_an_identical_save_records_nothing_and_answers_the_current_version(self, operator):
        before = state(operator.workspace)

        response = operator.api().put(
            FLOOR_URL, {**floor_body(), "comment": "just saving again"}, format="json"
        )

        assert response.status_code == 200, response.content
        assert response.json()["version"] == 1
        assert response.json()["comment"] == "Initial operator floor"
        assert response["ETag"] == '"1"'
        assert state(operator.workspace) == before

    def test_sets_in_another_order_are_still_identical(self, operator):
        before = state(operator.workspace)
        document = floor_body()
        document["memoryTypeAllowed"] = list(reversed(document["memoryTypeAllowed"]))

        response = operator.api().put(FLOOR_URL, document, format="json", HTTP_IF_MATCH='"1"')

        assert response.status_code == 200
        assert state(operator.workspace) == before

    def test_a_change_to_relaxable_axes_alone_is_a_change(self, operator):
        response = operator.api().put(
            FLOOR_URL, floor_body(relaxableAxes=["confidenceMin"]), format="json"
        )

        assert response.json()["version"] == 2

    def test_a_stale_save_is_refused_even_when_identical_to_the_current_version(self, operator):
        workspace_policy_save(
            workspace=operator.workspace,
            document=floor(totalTokenBudget=3000),
            author="x",
            comment="Test floor",
        )

        response = operator.api().put(
            FLOOR_URL, floor_body(totalTokenBudget=3000), format="json", HTTP_IF_MATCH='"1"'
        )

        error_of(response, 409, "VERSION_CONFLICT")

    @pytest.mark.parametrize(
        "header", ["1", '"one"', '"-1"', '"1", "2"', '"1', "", '"99999999999"', '"１"']
    )
    def test_a_malformed_if_match_is_a_400(self, operator, header):
        before = state(operator.workspace)

        response = operator.api().put(
            FLOOR_URL, floor_body(totalTokenBudget=3000), format="json", HTTP_IF_MATCH=header
        )

        error = error_of(response, 400, "INVALID_REQUEST")
        assert "If-Match" in error["details"]["fields"]
        assert state(operator.workspace) == before

    @pytest.mark.parametrize("value", ["1", 1.0, True, -1, [1], {"v": 1}])
    def test_a_malformed_base_version_is_a_400(self, operator, value):
        before = state(operator.workspace)

        response = operator.api().put(
            FLOOR_URL, {**floor_body(totalTokenBudget=3000), "baseVersion": value}, format="json"
        )

        error = error_of(response, 400, "INVALID_REQUEST")
        assert "baseVersion" in error["details"]["fields"]
        assert state(operator.workspace) == before

    def test_if_match_and_base_version_that_disagree_are_a_422(self, operator):
        """Each is a valid base version alone (the schema takes both); two different ones
        are a rule across the request's values, as this API's other 422s are."""
        before = state(operator.workspace)
        response = operator.api().put(
            FLOOR_URL,
            {**floor_body(totalTokenBudget=3000), "baseVersion": 1},
            format="json",
            HTTP_IF_MATCH='"2"',
        )

        error = error_of(response, 422, "BASE_VERSION_MISMATCH")
        assert error["details"]["fields"]["baseVersion"] == "Says 1 but If-Match says 2."
        assert state(operator.workspace) == before

    def test_if_match_star_checks_nothing(self, operator):
        response = operator.api().put(
            FLOOR_URL, floor_body(totalTokenBudget=3000), format="json", HTTP_IF_MATCH="*"
        )

        assert response.status_code == 200

    def test_an_outsider_learns_nothing_from_a_stale_if_match(self, outsider, workspace_a):
        response = outsider.api().put(
            FLOOR_URL, floor_body(totalTokenBudget=3000), format="json", HTTP_IF_MATCH='"7"'
        )

        error_of(response, 404, "NOT_FOUND")


class WorkloadPolicyApiTests:
    def test_get_carries_the_version_as_its_etag(self, viewer, workload_a):
        save_workload(workload_a, {"confidenceMin": 0.2})
        save_workload(workload_a, {"confidenceMin": 0.3})

        response = viewer.api().get(policy_url(workload_a))

        assert response.status_code == 200
        assert response["ETag"] == '"2"'

    def test_the_first_policy_can_be_based_on_version_0(self, editor, workload_a):
        response = editor.api().put(
            policy_url(workload_a), {"confidenceMin": 0.2}, format="json", HTTP_IF_MATCH='"0"'
        )

        assert response.status_code == 200, response.content
        assert response["ETag"] == '"1"'

    def test_creating_over_someone_elses_first_policy_is_a_409(self, editor, workload_a):
        save_workload(workload_a, {"confidenceMin": 0.5})
        before = state(editor.workspace)

        response = editor.api().put(
            policy_url(workload_a), {"confidenceMin": 0.2, "baseVersion": 0}, format="json"
        )

        error = error_of(response, 409, "VERSION_CONFLICT")
        assert error["details"] == {"currentVersion": 1, "baseVersion": 0}
        assert state(editor.workspace) == before

    @pytest.mark.parametrize("how", ["if-match", "base-version"])
    def test_the_second_of_two_saves_from_the_same_base_is_a_409_and_changes_nothing(
        self, editor, workload_a, how
    ):
        save_workload(workload_a, {"confidenceMin": 0.2})

        def put(document: dict[str, Any]) -> Any:
            if how == "if-match":
                return editor.api().put(
                    policy_url(workload_a), document, format="json", HTTP_IF_MATCH='"1"'
                )
            return editor.api().put(
                policy_url(workload_a), {**document, "baseVersion": 1}, format="json"
            )

        assert put({"confidenceMin": 0.4}).status_code == 200
        after_first = state(editor.workspace)

        error = error_of(put({"sensitivityCeiling": "internal"}), 409, "VERSION_CONFLICT")

        assert error["details"] == {"currentVersion": 2, "baseVersion": 1}
        assert "support-bot" in error["message"]
        assert state(editor.workspace) == after_first

    def test_versions_are_per_environment(self, editor, workload_a):
        save_workload(workload_a, {"confidenceMin": 0.2})  # prod v1

        response = editor.api().put(
            policy_url(workload_a, "dev"),
            {"confidenceMin": 0.3},
            format="json",
            HTTP_IF_MATCH='"0"',
        )

        assert response.status_code == 200, response.content

    def test_an_identical_save_records_nothing(self, editor, workload_a):
        save_workload(workload_a, {"memoryTypeAllowed": ["fact", "decision"]})
        before = state(editor.workspace)

        response = editor.api().put(
            policy_url(workload_a),
            {"memoryTypeAllowed": ["decision", "fact"], "comment": "again"},
            format="json",
            HTTP_IF_MATCH='"1"',
        )

        assert response.status_code == 200, response.content
        assert response.json()["version"] == 1
        assert response["ETag"] == '"1"'
        assert state(editor.workspace) == before

    def test_an_empty_first_policy_is_still_a_save(self, editor, workload_a):
        # {} for prod overrides the all-environments default: it is not "no policy".
        response = editor.api().put(policy_url(workload_a), {}, format="json")

        assert response.json()["version"] == 1

    def test_a_malformed_if_match_is_a_400(self, editor, workload_a):
        before = state(editor.workspace)

        response = editor.api().put(
            policy_url(workload_a), {"confidenceMin": 0.2}, format="json", HTTP_IF_MATCH="v1"
        )

        error_of(response, 400, "INVALID_REQUEST")
        assert state(editor.workspace) == before


# --- the services, with real concurrency ----------------------------------------------------------


class ServiceTests:
    def test_a_stale_base_raises_before_anything_is_written(self, workload_a):
        save_workload(workload_a, {"confidenceMin": 0.2})
        save_workload(workload_a, {"confidenceMin": 0.3})
        before = state(workload_a.workspace)

        with pytest.raises(VersionConflict) as raised:
            save_workload(workload_a, {"confidenceMin": 0.4}, base_version=1)

        assert (raised.value.current, raised.value.base) == (2, 1)
        assert state(workload_a.workspace) == before

    def test_an_identical_floor_returns_the_current_version(self, workspace_a):
        current = WorkspacePolicyVersion.objects.get(workspace=workspace_a)

        saved = workspace_policy_save(
            workspace=workspace_a, document=floor(), author="x", comment="Test floor"
        )

        assert saved.pk == current.pk


@pytest.mark.django_db(transaction=True)
class ConcurrentSaveTests:
    @pytest.mark.parametrize("target", ["floor", "workload"])
    def test_of_two_concurrent_saves_from_the_same_base_exactly_one_wins(self, target, workspace_a):
        from policies.services import workload_create

        workload = workload_create(workspace=workspace_a, name="racer", author="x")
        if target == "workload":
            save_workload(workload, {"confidenceMin": 0.1})

        def save(n: int) -> str:
            if target == "floor":
                workspace_policy_save(
                    workspace=workspace_a,
                    document=floor(totalTokenBudget=3000 - n * 100),
                    author=f"user:{n}",
                    base_version=1,
                    comment="Test floor",
                )
            else:
                save_workload(workload, {"confidenceMin": 0.2 + n / 10}, base_version=1)
            return "saved"

        outcomes = [
            (done.current, done.base) if isinstance(done, VersionConflict) else done
            for done in run_in_threads(save, 2, together=True)
        ]

        assert sorted(outcomes, key=str) == [(2, 1), "saved"]
        if target == "floor":
            assert workspace_a.policy_versions.count() == 2
        else:
            assert workload.policy_versions.count() == 2


# --- the portal forms --------------------------------------------------------------------------


class FloorFormTests:
    def test_the_form_carries_the_version_it_was_opened_at(self, operator):
        html = client_for(operator).get(floor_url()).content.decode()

        assert '<input type="hidden" name="base_version" value="1">' in html

    def test_a_save_from_a_stale_form_is_a_409_showing_what_changed(self, operator):
        client = client_for(operator)
        workspace_policy_save(
            workspace=operator.workspace,
            document=floor(totalTokenBudget=3000),
            author="user:otto",
            comment="Tighter budget",
        )
        before = state(operator.workspace)

        response = client.post(
            floor_url(), floor_post(axes(sensitivityCeiling="internal"), base_version="1")
        )

        assert response.status_code == 409
        assert state(operator.workspace) == before
        html = response.content.decode()
        assert "someone else saved version 2 since you opened this form" in html
        assert "user:otto" in html and "Tighter budget" in html
        rows = response.context["conflict"].rows
        assert [(r.axis, r.before, r.after) for r in rows] == [
            ("totalTokenBudget", "3,200", "3,000")
        ]
        # What the user typed is kept, and the next save is based on version 2.
        assert '<option value="internal" selected>' in html
        assert '<input type="hidden" name="base_version" value="2">' in html

    def test_saving_again_after_the_conflict_goes_through(self, operator):
        client = client_for(operator)
        workspace_policy_save(
            workspace=operator.workspace,
            document=floor(totalTokenBudget=3000),
            author="x",
            comment="Test floor",
        )

        response = client.post(
            floor_url(), floor_post(axes(sensitivityCeiling="internal"), base_version="2")
        )

        assert response.status_code == 302
        assert operator.workspace.policy_versions.count() == 3

    def test_an_unchanged_form_saves_nothing_and_says_so(self, operator):
        before = state(operator.workspace)

        response = client_for(operator).post(
            floor_url(), floor_post(axes(), base_version="1", comment="nothing"), follow=True
        )

        assert response.status_code == 200
        assert "No changes to save" in response.content.decode()
        assert state(operator.workspace) == before

    def test_a_form_without_a_base_version_still_saves(self, operator):
        response = client_for(operator).post(floor_url(), floor_post(axes(totalTokenBudget=3000)))

        assert response.status_code == 302
        assert operator.workspace.policy_versions.count() == 2

    def test_a_damaged_base_version_is_refused_and_saves_nothing(self, operator):
        before = state(operator.workspace)

        response = client_for(operator).post(
            floor_url(), floor_post(axes(totalTokenBudget=3000), base_version="two")
        )

        assert response.status_code == 422
        assert "version field was damaged" in response.content.decode()
        assert state(operator.workspace) == before


class WorkloadFormTests:
    def test_the_form_carries_0_when_no_policy_is_saved(self, editor, workload_a):
        html = client_for(editor).get(workload_url(workload_a, "prod")).content.decode()

        assert '<input type="hidden" name="base_version" value="0">' in html

    def test_two_saves_from_the_same_form_version_the_second_is_a_409(self, editor, workload_a):
        client = client_for(editor)
        first = client.post(
            workload_url(workload_a, "prod"),
            workload_post({"confidenceMin": 0.4}, base_version="0"),
        )
        assert first.status_code == 302
        before = state(editor.workspace)

        second = client.post(
            workload_url(workload_a, "prod"),
            workload_post({"sensitivityCeiling": "internal"}, base_version="0"),
        )

        assert second.status_code == 409
        assert state(editor.workspace) == before
        html = second.content.decode()
        assert "saved version 1" in html and "since you opened this form" in html
        assert "no policy was saved when you opened it" in html
        rows = second.context["conflict"].rows
        assert [(r.axis, r.before, r.after) for r in rows] == [
            ("confidenceMin", "inherits floor", "0.4")
        ]
        assert "No problems found" not in html

    def test_a_conflict_with_your_own_other_tab_says_so(self, editor, workload_a):
        client = client_for(editor)
        url = workload_url(workload_a, "prod")
        client.post(url, workload_post({"confidenceMin": 0.4}, base_version="0"))

        response = client.post(url, workload_post({"confidenceMin": 0.5}, base_version="0"))

        assert response.status_code == 409
        assert "you saved version 1 from another tab or window" in response.content.decode()

    def test_an_unchanged_form_saves_nothing_and_says_so(self, editor, workload_a):
        save_workload(workload_a, {"confidenceMin": 0.4})
        before = state(editor.workspace)

        response = client_for(editor).post(
            workload_url(workload_a, "prod"),
            workload_post({"confidenceMin": 0.4}, base_version="1"),
            follow=True,
        )

        assert "No changes to save" in response.content.decode()
        assert state(editor.workspace) == before

    def test_narrowing_from_the_compliance_table_checks_the_version_it_narrowed(
        self, operator, workload_a
    ):
        save_workload(workload_a, {"sensitivityCeiling": "confidential"})
        workspace_policy_save(
            workspace=operator.workspace,
            document=floor(sensitivityCeiling="internal"),
            author="x",
            comment="Test floor",
        )

        response = client_for(operator).post(
            f"/w/team-a/workloads/{workload_a.pk}/policy/narrow/",
            {"environment": "prod"},
            follow=True,
        )

        assert "Narrowed support-bot" in response.content.decode()
        assert workload_a.policy_versions.get(version=2).document == {
            "sensitivityCeiling": "internal"
        }


class HistoryRestoreTests:
    def history_url(self) -> str:
        return "/w/team-a/policies/history/"

    def test_restoring_from_a_stale_page_is_a_409_and_restores_nothing(self, operator):
        workspace_policy_save(
            workspace=operator.workspace,
            document=floor(totalTokenBudget=3000),
            author="x",
            comment="Test floor",
        )
        workspace_policy_save(
            workspace=operator.workspace,
            document=floor(totalTokenBudget=2800),
            author="user:otto",
            comment="Test floor",
        )
        before = state(operator.workspace)

        response = client_for(operator).post(
            self.history_url(), {"version": "1", "base_version": "2"}
        )

        assert response.status_code == 409
        assert "user:otto saved version 3 since this page was opened at version 2" in (
            response.content.decode()
        )
        assert state(operator.workspace) == before

    def test_restoring_a_version_identical_to_the_current_one_saves_nothing(self, operator):
        workspace_policy_save(
            workspace=operator.workspace,
            document=floor(totalTokenBudget=3000),
            author="x",
            comment="Test floor",
        )
        workspace_policy_save(
            workspace=operator.workspace, document=floor(), author="x", comment="Test floor"
        )
        before = state(operator.workspace)

        response = client_for(operator).post(
            self.history_url(), {"version": "1", "base_version": "3"}, follow=True
        )

        assert "No changes to save: version 1 is the same as the current version 3." in (
            response.content.decode()
        )
        assert state(operator.workspace) == before

    def test_the_restore_buttons_carry_the_current_version(self, operator):
        workspace_policy_save(
            workspace=operator.workspace,
            document=floor(totalTokenBudget=3000),
            author="x",
            comment="Test floor",
        )

        html = client_for(operator).get(self.history_url()).content.decode()

        assert '<input type="hidden" name="base_version" value="2">' in html

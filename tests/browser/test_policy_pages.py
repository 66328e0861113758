"""Policy pages in a real browser: live validation, saving, read-only views."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from policies.models import WorkloadPolicyVersion
from policies.selectors import workspace_policy_current
from policies.services import workload_policy_save, workspace_policy_save

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    # PBKDF2 costs over a second per persona here; these pages do not care how it is hashed.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


class WorkloadPolicyFormTests:
    def test_an_editor_sees_a_relaxing_axis_flagged_at_once_and_cannot_save_it(
        self, page, live_server, login, editor, workload_a, shot
    ):
        login(page, "eddie", "pw-eddie")
        page.goto(f"{live_server.url}/w/team-a/workloads/{workload_a.pk}/policy/?environment=prod")
        axis = page.locator("#axis-sensitivityCeiling")
        axis.get_by_label("Set for this workload").check()
        axis.get_by_label("sensitivityCeiling").select_option("restricted")
        error = page.locator("#err-sensitivityCeiling")
        error.filter(has_text="WORKLOAD_RELAXES_OPERATOR_FLOOR").wait_for()
        assert "floor: confidential" in error.inner_text()
        assert page.get_by_role("alert").filter(has_text="cannot be saved").is_visible()
        shot(page, "workload-policy-relaxes-floor")
        assert not WorkloadPolicyVersion.objects.filter(workload=workload_a).exists()

        page.get_by_role("button", name="Save workload policy").click()
        page.wait_for_load_state("networkidle")
        assert (
            "WORKLOAD_RELAXES_OPERATOR_FLOOR"
            in page.locator("#err-sensitivityCeiling").inner_text()
        )
        assert not WorkloadPolicyVersion.objects.filter(workload=workload_a).exists()

    def test_a_saved_workload_policy_shows_up_in_the_audit_trail(
        self, page, live_server, login, editor, workload_a, shot
    ):
        login(page, "eddie", "pw-eddie")
        page.goto(f"{live_server.url}/w/team-a/workloads/{workload_a.pk}/policy/?environment=prod")
        axis = page.locator("#axis-sensitivityCeiling")
        axis.get_by_label("Set for this workload").check()
        axis.get_by_label("sensitivityCeiling").select_option("internal")
        page.locator("#form-status").filter(has_text="No problems found").wait_for()
        page.get_by_label("Change comment").fill("Support sees internal only")
        page.get_by_role("button", name="Save workload policy").click()
        page.get_by_role("status").filter(has_text="as version 1").wait_for()
        saved = WorkloadPolicyVersion.objects.get(workload=workload_a)
        assert saved.document == {"sensitivityCeiling": "internal"}

        page.get_by_role("link", name="Audit trail", exact=True).click()
        page.get_by_label("Type").select_option("context.workload_policy_set")
        page.wait_for_url("**?type=context.workload_policy_set")
        expect(page.locator("table.events tbody tr")).to_have_count(1)
        expect(page.locator("#results")).to_contain_text("Support sees internal only")
        shot(page, "audit-trail-filtered")
        page.locator("table.events").get_by_role("link", name="context.workload_policy_set").click()
        page.get_by_role("heading", name="Workload policy version 1").wait_for()
        assert page.locator("table.diff").get_by_text("sensitivityCeiling").is_visible()
        shot(page, "audit-event-policy")


class FloorPageTests:
    def test_an_operator_previews_the_impact_and_sees_non_compliant_workloads(
        self, page, live_server, login, operator, workspace_a, workload_a, shot
    ):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"sensitivityCeiling": "confidential", "confidenceMin": 0.2},
            author="user:eddie",
        )
        floor = workspace_policy_current(workspace=workspace_a)
        workspace_policy_save(
            workspace=workspace_a,
            document={**floor.document, "sensitivityCeiling": "internal", "relaxableAxes": []},
            author="user:olga",
            comment="No confidential memories for now",
        )
        login(page, "olga", "pw-olga")
        page.get_by_role("link", name="Policies", exact=True).click()
        assert page.get_by_text("non-compliant").first.is_visible()
        page.locator("#id_ax-confidenceMin").fill("0.5")
        page.get_by_role("button", name="Preview impact").click()
        page.locator("#impact").get_by_text("Would stop being recallable").wait_for()
        shot(page, "policies-floor")
        page.get_by_role("button", name="Narrow to floor").click()
        page.get_by_role("status").filter(has_text="Narrowed support-bot").wait_for()
        latest = WorkloadPolicyVersion.objects.filter(workload=workload_a).first()
        assert latest.document["sensitivityCeiling"] == "internal"

        page.get_by_role("link", name="Floor history").click()
        page.get_by_role("link", name="diff with v1").click()
        page.wait_for_url("**?a=1&b=2")
        expect(page.locator("table.diff")).to_contain_text("sensitivityCeiling")
        shot(page, "policies-floor-history")


class ReadOnlyTests:
    def test_a_viewer_sees_no_edit_controls_on_the_policy_pages(
        self, page, live_server, login, viewer, workload_a, shot
    ):
        login(page, "vera", "pw-vera")
        for path in (
            "/w/team-a/policies/",
            f"/w/team-a/workloads/{workload_a.pk}/policy/?environment=prod",
            "/w/team-a/policies/history/",
        ):
            page.goto(live_server.url + path)
            main = page.locator("main")
            assert main.locator("form[method=post]").count() == 0
            assert main.locator("input[type=checkbox], input[type=radio]").count() == 0
            assert main.get_by_role("button", name="Save").count() == 0
            assert main.get_by_role("button", name="Restore this version").count() == 0
        page.goto(f"{live_server.url}/w/team-a/policies/")
        shot(page, "policies-floor-viewer")

"""Two people editing one workload policy in real browsers: the later save is stopped, not lost."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from audit.models import AuditEvent
from policies.models import WorkloadPolicyVersion
from policies.services import workload_policy_save

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def set_axis(page, name: str, value: str) -> None:
    axis = page.locator(f"#axis-{name}")
    axis.get_by_label("Set for this workload").check()
    field = axis.get_by_label(name)
    if field.evaluate("e => e.tagName") == "SELECT":
        field.select_option(value)
    else:
        field.fill(value)
        field.dispatch_event("change")
    page.locator("#form-status").filter(has_text="No problems found").wait_for()


class ConcurrentWorkloadEditTests:
    def test_a_form_opened_before_someone_elses_save_is_refused_with_what_changed(
        self, browser, page, live_server, login, editor, operator, workload_a, shot
    ):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"confidenceMin": 0.2},
            author="user:olga",
        )
        url = f"{live_server.url}/w/team-a/workloads/{workload_a.pk}/policy/?environment=prod"
        login(page, "eddie", "pw-eddie")
        page.goto(url)  # opened at version 1

        # Someone else, in their own browser, saves version 2 meanwhile.
        elsewhere = browser.new_context(viewport={"width": 1280, "height": 900})
        other = elsewhere.new_page()
        login(other, "olga", "pw-olga")
        other.goto(url)
        set_axis(other, "confidenceMin", "0.6")
        other.get_by_label("Change comment").fill("Only confident memories")
        other.get_by_role("button", name="Save workload policy").click()
        other.get_by_role("status").filter(has_text="as version 2").wait_for()
        elsewhere.close()
        events = AuditEvent.objects.count()

        # The first tab, still showing version 1, saves its own change.
        set_axis(page, "sensitivityCeiling", "internal")
        page.get_by_label("Change comment").fill("Internal only")
        page.get_by_role("button", name="Save workload policy").click()

        conflict = page.locator("#version-conflict")
        expect(conflict).to_contain_text(
            "Not saved: someone else saved version 2 since you opened this form"
        )
        expect(conflict).to_contain_text("you started from version 1")
        expect(conflict).to_contain_text("saved by user:olga")
        expect(conflict.locator("table.diff")).to_contain_text("confidenceMin")
        expect(conflict.locator("table.diff")).to_contain_text("0.6")
        # What was typed is still there, and nothing was written.
        expect(page.locator("#id_ax-sensitivityCeiling")).to_have_value("internal")
        expect(page.get_by_label("Change comment")).to_have_value("Internal only")
        assert WorkloadPolicyVersion.objects.filter(workload=workload_a).count() == 2
        assert AuditEvent.objects.count() == events
        conflict.scroll_into_view_if_needed()
        shot(page, "workload-policy-version-conflict")

        # Having seen the change, saving again replaces version 2 on purpose.
        page.get_by_role("button", name="Save workload policy").click()
        page.get_by_role("status").filter(has_text="as version 3").wait_for()
        latest = WorkloadPolicyVersion.objects.filter(workload=workload_a).first()
        assert latest.document == {"sensitivityCeiling": "internal", "confidenceMin": 0.2}

    def test_saving_an_unchanged_form_says_there_is_nothing_to_save(
        self, page, live_server, login, editor, workload_a, shot
    ):
        workload_policy_save(
            workload=workload_a, environment="prod", document={"confidenceMin": 0.2}, author="x"
        )
        login(page, "eddie", "pw-eddie")
        page.goto(f"{live_server.url}/w/team-a/workloads/{workload_a.pk}/policy/?environment=prod")

        page.get_by_role("button", name="Save workload policy").click()

        page.get_by_role("status").filter(has_text="No changes to save").wait_for()
        assert WorkloadPolicyVersion.objects.filter(workload=workload_a).count() == 1
        shot(page, "workload-policy-no-changes")

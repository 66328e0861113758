"""A floor change that overrules older workload policies, in a real browser: the impact
preview says so before saving, the compliance table shows the workloads as adjusted by the
floor, "narrow to floor" makes them compliant, and the workload page explains the rest.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from policies.models import WorkloadPolicyVersion
from policies.services import workload_policy_save

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


class FloorConflictPagesTests:
    def test_an_operator_sees_what_a_floor_change_overrules_and_narrows_a_workload_to_it(
        self, page, live_server, login, operator, workspace_a, workload_a, shot
    ):
        # Both valid under the default floor when saved.
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"pinned": ["system_policy", "tool_result"]},
            author="user:eddie",
        )
        workload_policy_save(
            workload=workload_a,
            environment="staging",
            document={"totalTokenBudget": 2500},
            author="user:eddie",
        )
        login(page, "olga", "pw-olga")
        page.get_by_role("link", name="Policies", exact=True).click()
        compliance = page.locator("table.compliance")
        expect(compliance.locator(".badge.warn")).to_have_count(0)

        page.locator("#axis-forbiddenSegmentKinds input[value=tool_result]").check()
        page.locator("#id_ax-perSegmentReservation-system_policy").fill("1500")
        page.get_by_role("button", name="Preview impact").click()
        impact = page.locator("#impact")
        impact.get_by_role("columnheader", name="Under the proposed floor").wait_for()
        expect(impact.locator("[data-code=FLOOR_FORBIDS_PINNED_KIND]")).to_have_count(1)
        expect(impact.locator("[data-code=RESERVATION_CUT_TO_FIT]")).to_have_count(1)
        impact.locator("[data-code=RESERVATION_CUT_TO_FIT]").scroll_into_view_if_needed()
        shot(page, "floor-conflicts-impact-preview")

        page.get_by_label("Change comment").fill("Tool results off; a bigger system prompt")
        page.get_by_role("button", name="Save floor").click()
        page.get_by_role("status").filter(has_text="as version 2").wait_for()
        expect(compliance.locator(".badge.warn")).to_have_count(2)
        expect(compliance).to_contain_text("forbidden by the floor, pinned → not pinned")
        expect(compliance).to_contain_text("cut to fit the total, 900 → 200")
        shot(page, "floor-conflicts-compliance")

        page.get_by_role("button", name="Narrow to floor").first.click()
        page.get_by_role("status").filter(has_text="Narrowed support-bot (prod)").wait_for()
        latest = WorkloadPolicyVersion.objects.filter(workload=workload_a, environment="prod")
        assert latest.order_by("-version")[0].document == {"pinned": ["system_policy"]}
        expect(compliance.locator(".badge.warn")).to_have_count(1)

        page.goto(
            f"{live_server.url}/w/team-a/workloads/{workload_a.pk}/policy/?environment=staging"
        )
        body = page.locator(".card-head")
        expect(body.locator(".badge.warn")).to_have_text("adjusted by the floor")
        expect(body).to_contain_text("the reservation for retrieval is cut from 900 to 200")
        shot(page, "floor-conflicts-workload-page")

        page.goto(f"{live_server.url}/w/team-a/")
        expect(page.locator(".page-head")).to_contain_text("1 workload adjusted by the floor")
        shot(page, "floor-conflicts-dashboard")

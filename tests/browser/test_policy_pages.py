"""Policy pages in a real browser: live validation, saving, read-only views."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from policies.models import WorkloadPolicyVersion
from policies.selectors import workspace_policy_current
from policies.services import workload_policy_save, workspace_policy_save
from tests.recall import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def open_prod_policy(page, login, live_server, workload) -> None:
    """The workload's policy page in prod, as the editor Eddie."""
    login(page, "eddie", "pw-eddie")
    page.goto(f"{live_server.url}/w/team-a/workloads/{workload.pk}/policy/?environment=prod")


class WorkloadPolicyFormTests:
    def test_an_editor_sees_a_relaxing_axis_flagged_at_once_and_cannot_save_it(
        self, page, live_server, login, editor, workload_a, shot
    ):
        open_prod_policy(page, login, live_server, workload_a)
        axis = page.locator("#axis-sensitivityCeiling")
        axis.get_by_label("Set for this workload").check()
        axis.get_by_label("sensitivityCeiling").select_option("restricted")
        error = page.locator("#err-sensitivityCeiling")
        error.filter(has_text="WORKLOAD_RELAXES_OPERATOR_FLOOR").wait_for()
        assert "floor: confidential" in error.inner_text()
        assert page.get_by_role("alert").filter(has_text="cannot be saved").is_visible()
        save = page.get_by_role("button", name="Save workload policy")
        expect(save).to_be_disabled()
        expect(page.locator("#save-actions")).to_contain_text("Saving is off")
        shot(page, "workload-policy-relaxes-floor")
        assert not WorkloadPolicyVersion.objects.filter(workload=workload_a).exists()

        # Back within the floor, Save comes back on.
        axis.get_by_label("sensitivityCeiling").select_option("internal")
        page.locator("#form-status").filter(has_text="No problems found").wait_for()
        expect(save).to_be_enabled()
        axis.get_by_label("sensitivityCeiling").select_option("restricted")
        expect(save).to_be_disabled()

        # The server still refuses it, whatever the button says (a form sent by a script).
        page.locator("form.policy-form").evaluate("form => form.submit()")
        page.wait_for_load_state("networkidle")
        assert (
            "WORKLOAD_RELAXES_OPERATOR_FLOOR"
            in page.locator("#err-sensitivityCeiling").inner_text()
        )
        assert not WorkloadPolicyVersion.objects.filter(workload=workload_a).exists()

    def test_a_saved_workload_policy_shows_up_in_the_audit_trail(
        self, page, live_server, login, editor, workload_a, shot
    ):
        open_prod_policy(page, login, live_server, workload_a)
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
        page.get_by_text("Event types:").click()
        page.get_by_label("Workload policy saved").check()
        page.wait_for_url("**?type=context.workload_policy_set")
        expect(page.locator("table.events tbody tr")).to_have_count(1)
        expect(page.locator("#results")).to_contain_text("Support sees internal only")
        shot(page, "audit-trail-filtered")
        page.locator("table.events").get_by_role("link", name="Workload policy saved").click()
        page.get_by_role("heading", name="Workload policy version 1").wait_for()
        assert page.locator("table.diff").get_by_text("sensitivityCeiling").is_visible()
        shot(page, "audit-event-policy")

    def test_a_save_pressed_as_the_live_check_answers_still_saves(
        self, page, live_server, login, editor, workload_a
    ):
        open_prod_policy(page, login, live_server, workload_a)
        axis = page.locator("#axis-confidenceMin")
        axis.get_by_label("Set for this workload").check()
        page.locator("#form-status").filter(has_text="No problems found").wait_for()
        axis.get_by_label("confidenceMin").fill("0.4")
        press_as_the_check_answers(page, page.get_by_role("button", name="Save workload policy"))
        page.get_by_role("status").filter(has_text="as version 1").wait_for()
        saved = WorkloadPolicyVersion.objects.get(workload=workload_a)
        assert saved.document == {"confidenceMin": 0.4}

    def test_set_to_the_floor_pressed_as_the_live_check_answers_still_sets_it(
        self, page, live_server, login, editor, workload_a
    ):
        open_prod_policy(page, login, live_server, workload_a)
        axis = page.locator("#axis-totalTokenBudget")
        axis.get_by_label("Set for this workload").check()
        axis.get_by_label("totalTokenBudget").fill("5000")
        axis.get_by_label("totalTokenBudget").press("Tab")
        error = page.locator("#err-totalTokenBudget")
        expect(error).to_contain_text("WORKLOAD_RELAXES_OPERATOR_FLOOR")
        axis.get_by_label("totalTokenBudget").fill("6000")
        press_as_the_check_answers(
            page, error.get_by_role("button", name="Set to the floor's value")
        )
        expect(axis.get_by_label("totalTokenBudget")).to_have_value("3200")
        expect(error).to_be_empty()


def press_as_the_check_answers(page, button) -> None:
    """Click ``button`` the slow way a person does, with the live check answering in between.

    Pressing a button blurs the field just typed in, whose change sends the live check; its
    answer swaps the button's part of the form. A click pressed before the swap and released
    after it must still count (it did not when the swap replaced the button itself).
    """
    page.wait_for_load_state("networkidle")
    button.evaluate("b => { b.scrollIntoView({block: 'center'}); window.pressed = b; }")

    def pointer_on_button() -> None:
        box = button.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)

    pointer_on_button()
    with page.expect_response(lambda r: r.request.method == "POST") as checked:
        page.mouse.down()
    assert "_validate=1" in (checked.value.request.post_data or "")
    page.wait_for_load_state("networkidle")
    assert button.evaluate("b => b === window.pressed"), "the swap replaced the pressed button"
    pointer_on_button()  # the page below may have changed height: follow the button
    page.mouse.up()


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


class FloorSaveTests:
    def test_the_floor_needs_a_comment_and_its_preview_says_when_it_is_out_of_date(
        self, page, live_server, login, operator, workspace_a, workload_a, shot
    ):
        factories.memories(
            workspace_a,
            {"content": "sure", "confirmation_status": "inferred", "confidence": 0.9},
            {"content": "unsure", "confirmation_status": "inferred", "confidence": 0.55},
        )
        login(page, "olga", "pw-olga")
        page.goto(f"{live_server.url}/w/team-a/policies/")
        page.locator("#id_ax-confidenceMin").fill("0.6")
        page.get_by_role("button", name="Preview impact").click()
        impact = page.locator("#impact")
        impact.get_by_text("Would stop being recallable").wait_for()
        stale = impact.locator(".stale-note")
        expect(stale).to_be_empty()
        # The comment changes nothing the preview counts; another value does.
        page.get_by_label("Change comment").fill("Trust inferred memories less")
        expect(stale).to_be_empty()
        page.locator("#id_ax-confidenceMin").fill("0.7")
        expect(stale).to_have_text(
            "Out of date: the form has changed since this preview; press Preview impact again."
        )
        assert "stale" in (impact.locator("section.preview").get_attribute("class") or "")
        impact.scroll_into_view_if_needed()
        shot(page, "floor-preview-out-of-date")
        page.get_by_role("button", name="Preview impact").click()
        expect(stale).to_be_empty()

        # Saved without a comment: refused on the comment, the change kept to add one.
        page.get_by_label("Change comment").fill("")
        page.get_by_role("button", name="Save floor").click()
        error = page.locator("#err-comment")
        expect(error).to_contain_text("a change comment (comment) is required")
        expect(page.get_by_label("Change comment")).to_have_attribute("aria-invalid", "true")
        expect(page.locator("#id_ax-confidenceMin")).to_have_value("0.7")
        assert workspace_policy_current(workspace=workspace_a).version == 1
        page.get_by_label("Change comment").scroll_into_view_if_needed()
        shot(page, "floor-comment-required")
        page.get_by_label("Change comment").fill("Trust inferred memories less")
        page.get_by_role("button", name="Save floor").click()
        page.get_by_role("status").filter(has_text="as version 2").wait_for()
        saved = workspace_policy_current(workspace=workspace_a)
        assert (saved.version, saved.comment) == (2, "Trust inferred memories less")
        page.set_viewport_size({"width": 390, "height": 844})
        shot(page, "floor-saved-390")

    def test_every_restore_button_lines_up_in_the_floor_history(
        self, page, live_server, login, operator, workspace_a, shot
    ):
        for budget in (3000, 2800):
            floor = workspace_policy_current(workspace=workspace_a)
            workspace_policy_save(
                workspace=workspace_a,
                document={**floor.document, "totalTokenBudget": budget, "relaxableAxes": []},
                author="user:olga",
                comment=f"Budget {budget}",
            )
        login(page, "olga", "pw-olga")
        page.goto(f"{live_server.url}/w/team-a/policies/history/")
        buttons = page.get_by_role("button", name="Restore this version")
        assert buttons.count() == 2  # v2 (with a diff link beside it) and v1 (without)
        left = {round(box["x"]) for box in (b.bounding_box() for b in buttons.all()) if box}
        assert len(left) == 1, left
        shot(page, "floor-history-aligned")


class WorkloadImpactTests:
    def test_a_preview_that_arrives_after_more_edits_says_it_is_out_of_date(
        self, page, live_server, login, editor, workspace_a, workload_a
    ):
        factories.memories(workspace_a, {"content": "fact 1", "memory_type": "fact"})
        open_prod_policy(page, login, live_server, workload_a)
        impact = page.locator("#impact")
        expect(impact).to_contain_text("Change an axis")
        # A slow network: the check's answer comes back after the next edit.
        cdp = page.context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send(
            "Network.emulateNetworkConditions",
            {"offline": False, "latency": 1500, "downloadThroughput": -1, "uploadThroughput": -1},
        )
        budget = page.locator("#axis-totalTokenBudget")
        budget.get_by_label("Set for this workload").check()  # its check leaves now
        budget.get_by_label("totalTokenBudget").fill("3000")  # typed while it travels
        expect(impact).not_to_contain_text("Change an axis", timeout=15000)  # it arrived

        expect(impact.locator(".stale-note")).to_contain_text("Out of date")

    def test_narrowing_a_workload_says_what_it_takes_out_of_recall_before_saving(
        self, page, live_server, login, editor, workspace_a, workload_a, shot
    ):
        factories.memories(
            workspace_a,
            *({"content": f"fact {i}", "memory_type": "fact"} for i in range(5)),
            *({"content": f"decision {i}", "memory_type": "decision"} for i in range(2)),
        )
        open_prod_policy(page, login, live_server, workload_a)
        impact = page.locator("#impact")
        expect(impact).to_contain_text("Change an axis")
        axis = page.locator("#axis-memoryTypeAllowed")
        axis.get_by_label("Set for this workload").check()
        axis.get_by_label("fact", exact=True).uncheck()
        row = impact.locator("tbody tr").first
        expect(row).to_contain_text("prod")
        expect(row.locator("td").nth(1)).to_have_text("2")  # with this policy: 7 -> 2
        assert row.locator("td").nth(0).inner_text() == "7"
        assert row.locator("td").nth(2).inner_text() == "5"  # would stop being recallable
        # Typing in a box marks it out of date until the box is left; the note keeps its line
        # either way, so Save below it never moves (a press on it as it moved would miss).
        budget = page.locator("#axis-totalTokenBudget")
        budget.get_by_label("Set for this workload").check()
        note = impact.locator(".stale-note")
        expect(note).to_have_text("Counted for the form as it stands.")
        save = page.get_by_role("button", name="Save workload policy")
        # Scrolled to the end, where a page that gets shorter moves what is left in view.
        at_end = "b => { window.scrollTo(0, 1e6); return b.getBoundingClientRect().top; }"
        fresh_at = save.evaluate(at_end)
        budget.get_by_label("totalTokenBudget").fill("3000")
        expect(note).to_contain_text("Out of date")
        stale_at = save.evaluate(at_end)
        budget.get_by_label("totalTokenBudget").press("Tab")
        expect(note).to_have_text("Counted for the form as it stands.")
        assert fresh_at == stale_at == save.evaluate(at_end)
        impact.scroll_into_view_if_needed()
        shot(page, "workload-impact-preview")

        # A value wider than the floor leads with the words, then the code, and one click sets
        # it to the floor's value.
        ceiling = page.locator("#axis-sensitivityCeiling")
        ceiling.get_by_label("Set for this workload").check()
        ceiling.get_by_label("sensitivityCeiling").select_option("restricted")
        error = page.locator("#err-sensitivityCeiling")
        expect(error).to_contain_text("WORKLOAD_RELAXES_OPERATOR_FLOOR")
        assert error.inner_text().startswith("Wider than the operator floor (floor: confidential).")
        ceiling.scroll_into_view_if_needed()
        shot(page, "workload-set-to-the-floor")
        error.get_by_role("button", name="Set to the floor's value").click()
        expect(ceiling.get_by_label("sensitivityCeiling")).to_have_value("confidential")
        expect(error).to_be_empty()
        page.locator("#form-status").filter(has_text="No problems found").wait_for()
        expect(page.get_by_role("button", name="Save workload policy")).to_be_enabled()
        page.set_viewport_size({"width": 390, "height": 844})
        impact.scroll_into_view_if_needed()
        shot(page, "workload-impact-preview-390")


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


class PolicyWordsTests:
    def test_axes_read_as_labels_and_the_maximum_age_is_typed_as_a_duration(
        self, page, live_server, login, operator, viewer, workspace_a, shot
    ):
        login(page, "olga", "pw-olga")
        page.goto(f"{live_server.url}/w/team-a/policies/")
        axis = page.locator("#axis-maxAgeSeconds")
        expect(axis.locator("legend")).to_have_text("Maximum age")
        expect(axis.locator("code.api-name")).to_have_text("maxAgeSeconds")
        expect(axis.locator(".hint")).not_to_contain_text("seconds")
        expect(page.locator("#axis-perSegmentReservation")).to_contain_text("system policy")

        axis.get_by_label("Maximum age").fill("-2")
        axis.get_by_label("Unit").select_option("day")
        page.get_by_role("button", name="Save floor").click()
        page.get_by_role("alert").filter(has_text="fix Maximum age").wait_for()
        expect(page.locator("#err-maxAgeSeconds")).to_have_text(
            "Enter a duration above zero, or leave it empty for no limit."
        )
        page.locator("#axis-maxAgeSeconds").scroll_into_view_if_needed()
        shot(page, "policies-floor-duration-error")

        page.locator("#axis-maxAgeSeconds").get_by_label("Maximum age").fill("30")
        page.get_by_label("Change comment").fill("Forget after a month")
        page.get_by_role("button", name="Save floor").click()
        page.get_by_role("status").filter(has_text="as version 2").wait_for()
        assert workspace_policy_current(workspace=workspace_a).document["maxAgeSeconds"] == (
            30 * 86_400
        )
        axis = page.locator("#axis-maxAgeSeconds")
        expect(axis.get_by_label("Maximum age")).to_have_value("30")
        expect(axis.get_by_label("Unit")).to_have_value("day")
        axis.scroll_into_view_if_needed()
        shot(page, "policies-floor-labels")

        page.get_by_role("link", name="Floor history").click()
        page.get_by_role("link", name="diff with v1").click()
        page.wait_for_url("**?a=1&b=2")
        row = page.locator("table.diff tbody tr")
        expect(row).to_have_count(1)
        expect(row.locator("th")).to_contain_text("Maximum age")
        expect(row.locator("td.before")).to_have_text("no limit")
        expect(row.locator("td.after")).to_have_text("30 days")
        shot(page, "policies-floor-history-duration")

        page.context.clear_cookies()
        login(page, "vera", "pw-vera")
        page.goto(f"{live_server.url}/w/team-a/policies/")
        table = page.locator("table.axis-table")
        expect(table.locator("tr", has_text="Maximum age")).to_contain_text("30 days")
        expect(table.locator("tr", has_text="Consent bases allowed")).to_contain_text(
            "legitimate interest"
        )
        expect(table).not_to_contain_text("legitimate_interest")
        shot(page, "policies-floor-viewer-labels")

    def test_a_workload_policy_axis_reads_as_a_label_with_its_floor_as_words(
        self, page, live_server, login, editor, workload_a, shot
    ):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"maxAgeSeconds": 7 * 86_400, "consentPolicyAllowed": ["explicit"]},
            author="user:eddie",
        )
        open_prod_policy(page, login, live_server, workload_a)
        axis = page.locator("#axis-maxAgeSeconds")
        expect(axis.get_by_label("Maximum age")).to_have_value("7")
        expect(axis.get_by_label("Unit")).to_have_value("day")
        expect(axis.locator(".floor-value")).to_have_text("no limit")
        expect(page.locator("#axis-consentPolicyAllowed .floor-value")).to_contain_text(
            "legitimate interest"
        )

        axis.get_by_label("Maximum age").fill("36")
        axis.get_by_label("Unit").select_option("hour")
        page.locator("#form-status").filter(has_text="No problems found").wait_for()
        page.get_by_role("button", name="Save workload policy").click()
        page.get_by_role("status").filter(has_text="as version 2").wait_for()
        latest = WorkloadPolicyVersion.objects.filter(workload=workload_a).first()
        assert latest.document["maxAgeSeconds"] == 36 * 3600
        page.locator("details.card summary").click()
        effective = page.locator("details.card table")
        expect(effective.locator("tr", has_text="Maximum age")).to_contain_text("1 day 12 hours")
        expect(effective).not_to_contain_text("_")
        page.locator("#axis-maxAgeSeconds").scroll_into_view_if_needed()
        shot(page, "workload-policy-labels")


class WorkloadEnvironmentTests:
    def test_a_workload_with_only_a_prod_policy_opens_on_prod_and_its_history_lists_all(
        self, page, live_server, login, editor, workload_a, shot
    ):
        for budget in (3000, 2800, 2600):
            workload_policy_save(
                workload=workload_a,
                environment="prod",
                document={"totalTokenBudget": budget},
                author="user:eddie",
                comment=f"Budget {budget}",
            )
        login(page, "eddie", "pw-eddie")
        page.goto(f"{live_server.url}/w/team-a/workloads/{workload_a.pk}/policy/")
        tabs = page.get_by_role("navigation", name="Environments")
        expect(tabs.locator("[aria-current=page]")).to_have_text("prod · v3")
        expect(tabs.get_by_role("link", name="dev")).to_contain_text("no policy")
        expect(page.locator("#wp-h")).to_contain_text("Environment prod")
        expect(page.locator(".env-note")).to_contain_text("saved there most recently")
        expect(page.get_by_text("No versions yet")).to_have_count(0)
        shot(page, "workload-opens-on-prod")

        # The default policy is one tab away, and saving there makes it the newest.
        tabs.get_by_role("link", name="All environments").click()
        page.wait_for_url("**/policy/?environment=")
        expect(page.locator("#wp-h")).to_contain_text("All environments (default)")
        expect(tabs.locator("[aria-current=page]")).to_contain_text("All environments")
        axis = page.locator("#axis-confidenceMin")
        axis.get_by_label("Set for this workload").check()
        axis.get_by_label("confidenceMin").fill("0.3")
        axis.get_by_label("confidenceMin").dispatch_event("change")
        page.locator("#form-status").filter(has_text="No problems found").wait_for()
        page.get_by_role("button", name="Save workload policy").click()
        page.get_by_role("status").filter(has_text="for all environments as version 1").wait_for()
        assert WorkloadPolicyVersion.objects.get(workload=workload_a, environment="").document == {
            "confidenceMin": 0.3
        }

        page.get_by_role("link", name="version history").click()
        versions = page.locator("table.versions")
        expect(versions.locator("tbody tr")).to_have_count(4)
        expect(versions.locator("thead")).to_contain_text("Environment")
        expect(versions.locator("tbody tr").first).to_contain_text("All environments (default)")
        expect(versions.locator("tbody tr", has_text="prod")).to_have_count(3)
        shot(page, "workload-history-all-environments")

        # Compare prod's versions: the section switches to prod's list.
        versions.locator("tbody tr", has_text="Budget 2600").get_by_role(
            "link", name="diff with v2"
        ).click()
        page.wait_for_url("**environment=prod&a=2&b=3")
        compare = page.locator("#compare")
        expect(compare.locator("h2")).to_contain_text("prod")
        expect(compare.locator("table.diff")).to_contain_text("2,800")
        expect(compare.locator("table.diff")).to_contain_text("2,600")
        compare.scroll_into_view_if_needed()
        shot(page, "workload-history-compare-prod")

        # Restoring from a prod row restores prod, whatever else the page shows.
        versions.locator("tbody tr", has_text="Budget 3000").get_by_role(
            "button", name="Restore this version"
        ).click()
        page.get_by_role("status").filter(
            has_text="Restored version 1 of prod as version 4"
        ).wait_for()
        latest = WorkloadPolicyVersion.objects.filter(workload=workload_a, environment="prod")
        assert latest.order_by("-version")[0].document == {"totalTokenBudget": 3000}


class ComplianceWordsTests:
    def test_the_compliance_table_the_impact_preview_and_the_dashboard_name_axes_as_labels(
        self, page, live_server, login, operator, workspace_a, workload_a, shot
    ):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"sensitivityCeiling": "confidential", "pinned": ["system_policy", "memory"]},
            author="user:eddie",
        )
        floor = workspace_policy_current(workspace=workspace_a)
        workspace_policy_save(
            workspace=workspace_a,
            document={
                **floor.document,
                "sensitivityCeiling": "internal",
                "forbiddenSegmentKinds": ["memory"],
                "relaxableAxes": [],
            },
            author="user:olga",
            comment="Test floor",
        )
        login(page, "olga", "pw-olga")
        page.get_by_role("link", name="Policies", exact=True).click()
        compliance = page.locator("table.compliance")
        expect(compliance).to_contain_text("relaxes: Sensitivity ceiling")
        expect(compliance).to_contain_text("Pinned segment kinds · memory: forbidden by the floor")
        expect(compliance).not_to_contain_text("sensitivityCeiling")

        page.locator("#axis-confidenceMin").get_by_label("confidenceMin").fill("2")
        page.get_by_role("button", name="Preview impact").click()
        impact = page.locator("#impact")
        impact.get_by_text("cannot be computed").wait_for()
        expect(impact.locator(".error-list")).to_contain_text("Minimum confidence")
        page.locator("#axis-confidenceMin").get_by_label("confidenceMin").fill("0.5")
        page.get_by_role("button", name="Preview impact").click()
        impact.get_by_text("Would stop being recallable").wait_for()
        expect(impact).to_contain_text("would relax: Sensitivity ceiling (clamped)")
        expect(impact).to_contain_text("Pinned segment kinds · memory")
        shot(page, "policies-floor-compliance-labels")

        page.get_by_role("link", name="Dashboard").click()
        expect(page.locator("table.compliance")).to_contain_text("relaxes: Sensitivity ceiling")
        shot(page, "dashboard-compliance-labels")

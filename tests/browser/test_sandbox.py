"""The recall sandbox in a real browser: run a recall, read the budget bar and the decisions."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from audit.models import AuditEvent, EventType
from tests.recall.test_pages import seed, set_floor

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def scene(workspace_a, workload_a):
    set_floor(workspace_a, diagnosticsVerbosity="full")
    long = " with the full changelog, the migration notes and every known issue listed" * 3
    return seed(
        workspace_a,
        {"content": "Ada prefers concise release summaries", "memory_type": "preference"},
        {"content": "Ada decided release notes go out on Fridays", "memory_type": "decision"},
        {"content": "Ada salary band and release bonus", "sensitivity": "restricted"},
        {"content": "Ada's old release summary preference", "lifecycle_status": "suppressed"},
        {"content": "Release pipeline tool output" + long, "segment_kind": "tool_result"},
        {"content": "Release system policy: never share salaries", "segment_kind": "system_policy"},
        {"content": "Ada attended the release retro", "memory_type": "episode"},
        {"content": "Retrieved doc: release summary template" + long, "segment_kind": "retrieval"},
    )


def run(page, live_server, *, query: str = "release summary preferences") -> None:
    page.goto(f"{live_server.url}/w/team-a/sandbox/")
    page.locator("#id_actor").fill("user:ada")
    page.get_by_label("Query").fill(query)
    page.get_by_label("Top K").fill("6")


class SandboxBrowserTests:
    def test_an_editor_runs_a_recall_and_reads_the_budget_bar_and_the_decisions(
        self, page, live_server, login, editor, scene, shot
    ):
        login(page, "eddie", "pw-eddie")
        run(page, live_server)
        page.get_by_role("button", name="Run recall").click()
        result = page.locator("#sandbox-result")
        result.wait_for()
        event = AuditEvent.objects.get(type=EventType.ASSEMBLED)
        used = event.payload["tokenCounts"]["used"]
        bar = page.locator("svg.budget-bar")
        assert bar.is_visible()
        labels = bar.locator("text").all_text_contents()
        assert f"used {used:,} of 3,200 tokens ({used * 100 / 3200:.0f}%)" in labels
        per_kind = event.payload["tokenCounts"]["perKind"]
        assert any(label.startswith(f"used {per_kind['memory']:,} ·") for label in labels)
        assert page.locator("#decisions-included tbody tr").count() >= 4
        restricted = page.locator("#decisions-sensitivity_above_ceiling tbody tr")
        assert restricted.count() == 1
        assert restricted.locator("td.why").inner_text() == "sensitivity restricted > confidential"
        link = result.get_by_role("link", name=f"context.assembled #{event.pk}").first
        assert link.get_attribute("href") == f"/w/team-a/audit/{event.pk}/"
        shot(page, "sandbox-result")

    def test_compare_shows_which_memories_leave_under_a_draft_override(
        self, page, live_server, login, editor, scene, shot
    ):
        login(page, "eddie", "pw-eddie")
        run(page, live_server)
        page.get_by_text("Policy override (draft)").click()
        axis = page.locator("#axis-memoryTypeAllowed")
        axis.get_by_label("Override this axis").check()
        for label in ("fact", "episode"):
            axis.get_by_label(label, exact=True).uncheck()
        page.get_by_label("Compare: run the saved policy").check()
        page.get_by_role("button", name="Run recall").click()
        page.locator(".compare-grid").wait_for()
        leaving = page.locator("tr.change-leaves")
        assert leaving.count() >= 2
        assert page.locator("svg#budget-draft").is_visible()
        assert AuditEvent.objects.filter(type=EventType.ASSEMBLED).count() == 1
        shot(page, "sandbox-compare")


@pytest.fixture
def crowd(workspace_a, workload_a):
    """Ada with a few memories that pass and many that fail one policy axis each."""
    set_floor(workspace_a, diagnosticsVerbosity="full", confidenceMin=0.5)
    return seed(
        workspace_a,
        {"content": "Ada prefers concise release summaries", "memory_type": "preference"},
        {"content": "Ada decided release notes go out on Fridays", "memory_type": "decision"},
        {"content": "Ada attended the release retro", "memory_type": "episode"},
        *(
            {
                "content": f"Ada might like release note {i}",
                "confidence": 0.38,
                "confirmation_status": "inferred",
            }
            for i in range(40)
        ),
        *({"content": f"Ada's payroll note {i}", "sensitivity": "restricted"} for i in range(3)),
        {"content": "Ada's old release summary preference", "lifecycle_status": "suppressed"},
    )


class SandboxRequestBrowserTests:
    def test_changing_workload_and_environment_keeps_what_was_typed(
        self, page, live_server, login, editor, workspace_a, workload_a, scene, shot
    ):
        from policies.services import workload_create, workload_policy_save

        other = workload_create(workspace=workspace_a, name="triage-bot", author="system:test")
        workload_policy_save(
            workload=other,
            environment="dev",
            document={"memoryTypeAllowed": ["preference", "decision"]},
            author="system:test",
        )
        login(page, "eddie", "pw-eddie")
        run(page, live_server, query="what does Ada want in a release summary?")
        page.get_by_text("Policy override (draft)").click()
        verbosity = page.locator("#axis-diagnosticsVerbosity")
        verbosity.get_by_label("Override this axis").check()
        verbosity.locator("select").select_option("summary")

        page.get_by_label("Workload").select_option(label="triage-bot")
        # expect(), not wait_for_function: the page's CSP forbids evaluating strings
        expect(page.locator("#saved-policy")).to_contain_text("triage-bot")
        page.get_by_label("Environment").select_option("dev")
        saved = page.locator("#saved-policy")
        expect(saved).to_contain_text("in dev")
        assert "narrowed by workload policy v1" in saved.inner_text()
        # what was typed is untouched, the ticked axis too; the others follow the dev policy
        assert (
            page.get_by_label("Query").input_value() == "what does Ada want in a release summary?"
        )
        assert page.locator("#id_actor").input_value() == "user:ada"
        assert page.get_by_label("Top K").input_value() == "6"
        assert verbosity.get_by_label("Override this axis").is_checked()
        assert verbosity.locator("select").input_value() == "summary"
        types = page.locator("#axis-memoryTypeAllowed")
        assert "Saved: preference, decision" in types.inner_text()
        assert page.locator("details.overrides").get_attribute("open") is not None
        shot(page, "sandbox-redrawn-for-another-workload")

        page.get_by_role("button", name="Run recall").click()
        result = page.locator("#sandbox-result")
        result.wait_for()
        assert "for triage-bot in dev" in result.locator("h2").inner_text()
        event = AuditEvent.objects.get(type=EventType.ASSEMBLED)
        assert event.environment == "dev" and event.workload_id == other.id
        assert event.payload["counts"]["afterPolicy"] == 2

    def test_an_empty_query_is_refused_next_to_the_field(
        self, page, live_server, login, editor, scene, shot
    ):
        login(page, "eddie", "pw-eddie")
        run(page, live_server, query="   ")
        page.get_by_role("button", name="Run recall").click()
        error = page.locator("#query-err")
        error.wait_for()
        assert error.inner_text().startswith("Enter a query:")
        # Marked once htmx has settled the swap (portal.js follows the error slots then).
        expect(page.get_by_label("Query")).to_have_attribute("aria-invalid", "true")
        assert page.locator("#sandbox-result").count() == 0
        assert not AuditEvent.objects.filter(type=EventType.ASSEMBLED).exists()
        shot(page, "sandbox-empty-query")

    def test_the_override_panel_shows_only_the_relaxable_axes(
        self, page, live_server, login, editor, scene, shot
    ):
        login(page, "eddie", "pw-eddie")
        page.goto(f"{live_server.url}/w/team-a/sandbox/")
        page.get_by_text("Policy override (draft)").click()
        axes = page.locator("details.overrides fieldset.axis")
        assert axes.count() == 3
        legends = [legend.strip() for legend in axes.locator("legend").all_inner_texts()]
        assert legends == ["Memory types allowed", "Total token budget", "Diagnostics detail"]
        names = axes.locator("code.api-name").all_inner_texts()
        assert names == ["memoryTypeAllowed", "totalTokenBudget", "diagnosticsVerbosity"]
        note = page.locator("#locked-axes").inner_text()
        assert note.startswith("Not relaxable in this workspace's floor")
        assert "Sensitivity ceiling" in note and "Drop order under budget pressure" in note
        assert page.get_by_text("Not relaxable in this workspace's floor.").count() == 0
        shot(page, "sandbox-override-panel")


class SandboxDecisionsBrowserTests:
    def test_decisions_are_grouped_with_the_value_that_failed(
        self, page, live_server, login, editor, crowd, shot
    ):
        login(page, "eddie", "pw-eddie")
        run(page, live_server)
        page.get_by_role("button", name="Run recall").click()
        page.locator("#sandbox-result").wait_for()

        included = page.locator("#decisions-included")
        assert included.locator("tbody tr").count() == 3
        low = page.locator("#decisions-confidence_below_min")
        assert "Filtered by policy: Minimum confidence" in low.locator("h4").inner_text()
        assert low.locator("h4 .group-count").inner_text() == "40"
        visible = low.locator("tbody tr:visible")
        assert visible.count() == 5
        assert visible.first.locator("td.why").inner_text() == "inferred, confidence 0.38 < 0.5"
        restricted = page.locator("#decisions-sensitivity_above_ceiling td.why")
        assert restricted.all_inner_texts() == ["sensitivity restricted > confidential"] * 3
        counted = page.locator("#decisions-counted").inner_text()
        assert "1 excluded by the fail-closed rules" in counted
        # the page stays short: the 35 other low-confidence rows wait behind one summary
        height = page.evaluate("document.documentElement.scrollHeight")
        assert height < 4200, height
        shot(page, "sandbox-decisions-grouped")

        low.get_by_text("Show the other 35").click()
        assert low.locator("tbody tr:visible").count() == 40

    def test_counts_and_fingerprints_are_in_words_with_their_hints(
        self, page, live_server, login, editor, scene, shot
    ):
        login(page, "eddie", "pw-eddie")
        run(page, live_server)
        page.get_by_role("button", name="Run recall").click()
        result = page.locator("#sandbox-result")
        result.wait_for()
        labels = result.locator("ol.funnel .label").all_inner_texts()
        assert labels == ["Candidates", "After policy", "After ranking", "After budget"]
        hashes = result.locator("dl.hashes")
        terms = [t.strip() for t in hashes.locator("dt").all_inner_texts()]
        assert terms[:5] == [
            "Effective policy hash effectivePolicyHash",
            "Effective budget hash effectiveBudgetHash",
            "Prefix fingerprint prefixFingerprint",
            "Digest digest",
            "Reused reused",
        ]
        fingerprint = hashes.locator("abbr", has_text="Prefix fingerprint")
        assert "prompt cache" in fingerprint.get_attribute("title")
        assert "equal digests mean identical contexts" in hashes.inner_text()
        hashes.scroll_into_view_if_needed()
        shot(page, "sandbox-fingerprints")


class SandboxRunBrowserTests:
    def test_what_is_typed_while_a_slow_run_is_in_flight_is_kept(
        self, page, live_server, login, editor, scene, shot
    ):
        # The result swaps in on its own: the form is not redrawn, so text typed into the
        # query while the recall runs stays, and Run is off until the result is in.
        login(page, "eddie", "pw-eddie")
        run(page, live_server, query="release summary")
        cdp = page.context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send(
            "Network.emulateNetworkConditions",
            {"offline": False, "latency": 1500, "downloadThroughput": -1, "uploadThroughput": -1},
        )
        button = page.get_by_role("button", name="Run recall")
        button.click()
        expect(button).to_be_disabled()
        expect(page.locator("#run-busy")).to_be_visible()
        query = page.get_by_label("Query")
        query.press("End")
        query.press_sequentially(" preferences")
        assert page.locator("#sandbox-result").count() == 0  # typed while it ran
        page.locator("#sandbox-result").wait_for()
        assert query.input_value() == "release summary preferences"
        expect(button).to_be_enabled()
        assert AuditEvent.objects.filter(type=EventType.ASSEMBLED).count() == 1
        # A later run with an error fills its slot; the run after that clears it again.
        query.fill("   ")
        button.click()
        expect(page.locator("#query-err")).to_contain_text("Enter a query")
        expect(query).to_have_attribute("aria-invalid", "true")
        assert page.locator("#sandbox-result").count() == 0
        query.fill("release summary")
        button.click()
        page.locator("#sandbox-result").wait_for()
        expect(page.locator("#query-err")).to_be_empty()
        assert query.get_attribute("aria-invalid") is None
        shot(page, "sandbox-kept-while-running")

    def test_show_every_decision_runs_the_same_recall_at_full_verbosity(
        self, page, live_server, login, editor, workspace_a, scene, shot
    ):
        set_floor(workspace_a, diagnosticsVerbosity="summary")
        login(page, "eddie", "pw-eddie")
        run(page, live_server)
        page.get_by_role("button", name="Run recall").click()
        result = page.locator("#sandbox-result")
        result.wait_for()
        assert page.locator("#decisions-included").count() == 0
        assert "Per-memory decisions are not in this response" in result.inner_text()
        page.get_by_role("button", name="Show every decision").click()
        included = page.locator("#decisions-included")
        included.wait_for()
        assert included.locator("tbody tr").count() >= 4
        restricted = page.locator("#decisions-sensitivity_above_ceiling td.why")
        assert restricted.all_inner_texts() == ["sensitivity restricted > confidential"]
        note = page.locator("#every-decision-note").inner_text()
        assert "this workload's agents get summary" in note
        events = AuditEvent.objects.filter(type=EventType.ASSEMBLED).order_by("pk")
        assert [e.payload["topK"] for e in events] == [6, 6]  # the same request, run again
        shot(page, "sandbox-every-decision")


class SandboxCompareBrowserTests:
    def test_compare_shows_each_memorys_decision_on_both_sides_with_the_differences_marked(
        self, page, live_server, login, editor, workload_a, scene, shot
    ):
        # As the issue found it: the workload's saved policy reports a summary (the floor
        # allows full), and the draft overrides it to full.
        from policies.services import workload_policy_save

        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"diagnosticsVerbosity": "summary"},
            author="system:test",
        )
        preference, _, restricted, _, tool_output, _, episode, _ = scene
        login(page, "eddie", "pw-eddie")
        run(page, live_server)
        page.get_by_text("Policy override (draft)").click()
        axis = page.locator("#axis-memoryTypeAllowed")
        axis.get_by_label("Override this axis").check()
        for label in ("fact", "episode"):
            axis.get_by_label(label, exact=True).uncheck()
        verbosity = page.locator("#axis-diagnosticsVerbosity")
        verbosity.get_by_label("Override this axis").check()
        verbosity.locator("select").select_option("full")
        page.get_by_label("Compare: run the saved policy").check()
        page.get_by_role("button", name="Run recall").click()
        result = page.locator("#sandbox-result")
        result.locator(".compare-grid").wait_for()

        leaving = page.locator(f"#compare-{episode.pk}")
        assert leaving.locator("td").nth(1).inner_text() == "leaves"
        assert "Included in the context" in leaving.locator("td.side.saved").inner_text()
        draft = leaving.locator("td.side.draft")
        assert "changed" in (draft.get_attribute("class") or "")
        assert "Filtered: memory type not allowed" in draft.inner_text()
        assert "memory type episode; allowed:" in draft.inner_text()
        other = page.locator(f"#compare-{restricted.pk}")
        assert other.locator("td").nth(1).inner_text() == "other reason"
        assert (
            "sensitivity restricted > confidential" in other.locator("td.side.saved").inner_text()
        )
        assert "memory type not allowed" in other.locator("td.side.draft").inner_text()
        assert other.locator("td.content").inner_text() == ""  # never a filtered one's content
        # What both sides decide alike is folded under the differences.
        alike = page.locator("details.compare-alike")
        assert not page.locator(f"#compare-{preference.pk}").is_visible()
        alike.locator("summary").click()
        kept = page.locator(f"#compare-{preference.pk}")
        assert kept.is_visible() and kept.locator("td").nth(1).inner_text() == "stays"
        # The banner that told to override the verbosity to full is gone: both sides show
        # their decisions.
        assert "override it to" not in result.inner_text()
        assert "Per-memory decisions are not in this response" not in result.inner_text()
        assert tool_output.pk  # the tool result is a fact too: it leaves as well
        assert page.locator(f"#compare-{tool_output.pk} td").nth(1).inner_text() == "leaves"
        shot(page, "sandbox-compare-both-sides")
        page.set_viewport_size({"width": 390, "height": 844})
        shot(page, "sandbox-compare-both-sides-390")

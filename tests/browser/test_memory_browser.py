"""The memory browser in a real browser: search across actors, the workload chooser
remembered, suppress a row in place (with its reason), the memory page's actions, import a JSON
Lines file."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from policies.services import workload_create
from recall.models import MemoryRecord
from tests.browser.pages import wider_than_its_card, wider_than_the_screen
from tests.recall.test_pages import seed, set_floor

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def memories(workspace_a, workload_a):
    set_floor(workspace_a)
    return seed(
        workspace_a,
        {"content": "Ada prefers tea in the afternoon", "memory_type": "preference"},
        {"content": "Ada's medical note", "sensitivity": "restricted"},
        {"content": "Ada works from Lisbon", "memory_type": "fact"},
        {"content": "Ada used to like coffee", "lifecycle_status": "suppressed"},
    )


class MemoryBrowserBrowserTests:
    def test_an_editor_suppresses_a_memory_and_sees_its_status_change(
        self, page, live_server, login, editor, memories, shot
    ):
        tea = memories[0]
        login(page, "eddie", "pw-eddie")
        page.goto(f"{live_server.url}/w/team-a/memories/?actor=user:ada")
        row = page.locator(f"#memory-{tea.pk}")
        assert row.locator(".status-badge").inner_text() == "active"
        row.get_by_role("link", name=f"Suppress memory {tea.pk}…").click()
        row = page.locator(f"#memory-{tea.pk}")
        row.get_by_role("button", name=f"Suppress memory #{tea.pk}").click()
        # The browser asks for the reason first (required); then the server would too.
        row.get_by_label("Reason").fill("Ada switched to coffee.")
        shot(page, "memory-row-suppress")
        row.get_by_role("button", name=f"Suppress memory #{tea.pk}").click()
        page.get_by_role("button", name=f"Restore memory {tea.pk}").wait_for()
        row = page.locator(f"#memory-{tea.pk}")
        assert row.locator(".status-badge").inner_text() == "suppressed"
        assert "lifecycle status is not active (suppressed)" in row.inner_text()
        tea.refresh_from_db()
        assert tea.lifecycle_status == "suppressed"
        shot(page, "memory-browser")

    def test_an_import_with_a_bad_line_reports_the_line_number(
        self, page, live_server, login, editor, memories, shot
    ):
        login(page, "eddie", "pw-eddie")
        page.goto(f"{live_server.url}/w/team-a/memories/?actor=user:ada")
        lines = [
            '{"content": "Ada likes jazz", "memoryType": "preference", "sourceKind": "user"}',
            '{"content": "Ada owns a cat", "memoryType": "pet", "sourceKind": "user"}',
        ]
        panel = page.locator("#import-panel")
        panel.get_by_label("Actor").fill("user:ada")
        panel.get_by_label("JSON Lines file").set_input_files(
            files=[
                {
                    "name": "ada.jsonl",
                    "mimeType": "application/jsonl",
                    "buffer": "\n".join(lines).encode(),
                }
            ]
        )
        panel.get_by_role("button", name="Import").click()
        report = page.locator("#import-panel .report")
        report.wait_for()
        assert "1 line has errors; nothing was imported." in report.inner_text()
        line = report.locator("tr", has_text="Line 2")
        assert line.locator("code").inner_text() == "memoryType"
        assert '"pet" is not one of: fact, preference,' in line.inner_text()
        assert MemoryRecord.objects.count() == 4
        report.scroll_into_view_if_needed()
        shot(page, "memory-import-report")

    @pytest.mark.parametrize("width", [1280, 1024])
    def test_the_table_fits_its_card(
        self, page, live_server, login, editor, workspace_a, workload_a, shot, width
    ):
        # The longest words of the meta columns, in one row, with the recall column and the
        # editor's actions: the row's buttons must stay in view without scrolling sideways.
        set_floor(workspace_a)
        seed(
            workspace_a,
            {
                "content": "Ada reads release notes much faster when they open with the deadline",
                "memory_type": "preference",
                "source_kind": "assistant",
                "confirmation_status": "user_confirmed",
                "consent_policy": "contractual",
            },
        )
        page.set_viewport_size({"width": width, "height": 900})
        login(page, "eddie", "pw-eddie")
        page.goto(f"{live_server.url}/w/team-a/memories/?actor=user:ada")
        assert wider_than_its_card(page) == 0
        shot(page, f"memory-browser-{width}")

    @pytest.mark.parametrize("width", [1280, 390])
    def test_a_search_finds_memories_of_every_actor_without_choosing_one(
        self, page, live_server, login, viewer, workspace_a, memories, shot, width
    ):
        seed(workspace_a, {"content": "Bob prefers tea with milk"}, actor_id="user:bob")
        page.set_viewport_size({"width": width, "height": 900})
        login(page, "vera", "pw-vera")
        page.goto(f"{live_server.url}/w/team-a/memories/")
        page.get_by_label("Search content").fill("tea")
        page.get_by_role("button", name="Show memories").click()
        heading = page.locator("#list-h")
        expect(heading).to_contain_text("All actors")
        expect(heading).to_contain_text("2 memories")
        rows = page.locator("table.memories tbody tr")
        assert sorted(r.locator("td").nth(0).inner_text().split()[-1] for r in rows.all()) == [
            "user:ada",
            "user:bob",
        ]
        assert "q=tea" in page.url
        assert wider_than_the_screen(page) == []
        shot(page, f"memory-search-{width}")

    def test_the_workload_chosen_is_remembered_on_the_next_visit(
        self, page, live_server, login, viewer, workspace_a, workload_a, memories, shot
    ):
        other = workload_create(workspace=workspace_a, name="zz-planner", author="system:test")
        login(page, "vera", "pw-vera")
        page.goto(f"{live_server.url}/w/team-a/memories/")
        expect(page.locator("#recall-scope")).to_contain_text("the first workload by name")
        page.get_by_label("Recallable for workload").select_option(label="zz-planner")
        page.get_by_label("in environment").select_option("dev")
        page.get_by_role("button", name="Show memories").click()
        expect(page.locator("#recall-scope")).to_contain_text("zz-planner in dev")
        page.goto(f"{live_server.url}/w/team-a/memories/")
        scope = page.locator("#recall-scope")
        expect(scope).to_contain_text("zz-planner in dev")
        expect(scope).to_contain_text("your last choice in this workspace")
        assert page.get_by_label("Recallable for workload").input_value() == str(other.pk)
        page.goto(f"{live_server.url}/w/team-a/memories/{memories[0].pk}/")
        expect(page.locator("#memory-state #recall-scope")).to_contain_text("zz-planner in dev")

    @pytest.mark.parametrize("width", [1280, 390])
    def test_an_editor_suppresses_and_restores_on_the_memory_page(
        self, page, live_server, login, editor, memories, shot, width
    ):
        tea = memories[0]
        page.set_viewport_size({"width": width, "height": 900})
        login(page, "eddie", "pw-eddie")
        page.goto(f"{live_server.url}/w/team-a/memories/{tea.pk}/")
        card = page.locator("#memory-state")
        expect(card.locator("#memory-verdict")).to_contain_text("yes")
        card.get_by_label("Reason to suppress").fill("Ada switched to coffee.")
        shot(page, f"memory-page-{width}")
        card.get_by_role("button", name=f"Suppress memory #{tea.pk}").click()
        expect(page.locator("#memory-state [role=status]")).to_have_text(
            f"Suppressed memory {tea.pk}."
        )
        card = page.locator("#memory-state")
        expect(card.locator("#memory-verdict")).to_contain_text("not active (suppressed)")
        # The whole page came back: the lifecycle card beside it says so too.
        expect(page.locator("section[aria-labelledby=life-h] .badge").first).to_have_text(
            "suppressed"
        )
        shot(page, f"memory-page-suppressed-{width}")
        tea.refresh_from_db()
        assert tea.lifecycle_status == "suppressed"
        card.get_by_role("button", name=f"Restore memory #{tea.pk}").click()
        expect(page.locator("#memory-state [role=status]")).to_have_text(
            f"Restored memory {tea.pk}."
        )
        expect(page.locator("#memory-verdict")).to_contain_text("yes")
        assert wider_than_the_screen(page) == []

    def test_a_viewer_sees_the_verdict_and_no_buttons(
        self, page, live_server, login, viewer, memories, shot
    ):
        login(page, "vera", "pw-vera")
        page.goto(f"{live_server.url}/w/team-a/memories/{memories[1].pk}/")
        card = page.locator("#memory-state")
        expect(card.locator("#memory-verdict")).to_contain_text("more sensitive than the ceiling")
        assert card.locator("form[method=post]").count() == 0

    @pytest.mark.parametrize("width", [1280, 390])
    def test_the_import_form_s_fields_line_up(
        self, page, live_server, login, editor, memories, shot, width
    ):
        page.set_viewport_size({"width": width, "height": 900})
        login(page, "eddie", "pw-eddie")
        page.goto(f"{live_server.url}/w/team-a/memories/import/")
        actor = page.locator("label[for=id_import_actor]").bounding_box()
        upload = page.locator("label[for=id_import_file]").bounding_box()
        if width >= 1280:
            assert abs(actor["y"] - upload["y"]) < 2  # side by side, labels on one line
        else:
            assert abs(actor["x"] - upload["x"]) < 2  # stacked, left edges aligned
        assert wider_than_the_screen(page) == []
        shot(page, f"memory-import-{width}")

"""The memory browser in a real browser: suppress a row in place, import a JSON Lines file."""

from __future__ import annotations

import pytest

from recall.models import MemoryRecord
from tests.browser.pages import wider_than_its_card
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
        page.get_by_role("button", name=f"Suppress memory {tea.pk}").click()
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
        assert report.locator("tr", has_text="Line 2").locator("code").inner_text() == "memoryType"
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

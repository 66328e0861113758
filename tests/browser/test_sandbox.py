"""The recall sandbox in a real browser: run a recall, read the budget bar and the decisions."""

from __future__ import annotations

import pytest

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
        decisions = page.locator("table.decisions")
        assert decisions.locator("tr", has_text="Included in the context").count() >= 4
        assert decisions.locator("tr", has_text="more sensitive than the ceiling").count() == 1
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

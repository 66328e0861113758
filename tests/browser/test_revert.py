"""Undoing maintenance in a real browser: revert an executed decay run from its page after
seeing what comes back, then reactivate a memory from its own page."""

from __future__ import annotations

import pytest

from maintenance import services
from recall.models import MemoryRecord
from tests.maintenance.helpers import ago, memory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


class RevertBrowserTests:
    def test_an_operator_reverts_a_decay_run_then_reactivates_a_memory(
        self, page, live_server, login, operator, workspace_a, shot
    ):
        kept = [
            memory(workspace_a, f"Always answer Ada in French ({n})", created_at=ago(days=10))
            for n in range(3)
        ]
        run = services.maintenance_start(
            workspace=workspace_a, sweep="decay", mode="execute", author="user:olga"
        )
        assert (run.status, run.applied) == ("succeeded", 3)
        MemoryRecord.objects.filter(pk=kept[2]).delete()
        login(page, "olga", "pw-olga")

        page.goto(f"{live_server.url}/w/team-a/maintenance/runs/{run.pk}/")
        page.get_by_role("link", name="Revert this run…").click()
        main = page.locator("main")
        assert "Put back 2 of the 3 memories it changed" in main.inner_text()
        assert "stale → active" in main.inner_text()
        assert f"#{kept[2]}" in main.inner_text() and "deleted since the run" in main.inner_text()
        assert "Can it be undone?" in main.inner_text()
        shot(page, "maintenance-revert-confirm")
        page.get_by_role("button", name="Put back 2 memories").click()

        page.get_by_text("2 memories put back, 1 skipped").wait_for()
        shot(page, "maintenance-reverted")
        statuses = MemoryRecord.objects.filter(pk__in=kept[:2]).values_list(
            "lifecycle_status", flat=True
        )
        assert set(statuses) == {"active"}
        assert page.get_by_role("link", name="Revert this run…").count() == 0

        MemoryRecord.objects.filter(pk=kept[0]).update(
            lifecycle_status="stale", stale_since=ago(days=1)
        )
        page.goto(f"{live_server.url}/w/team-a/memories/{kept[0]}/")
        page.get_by_role("link", name="Reactivate…").click()
        assert "Make this stale memory active again" in page.locator("main").inner_text()
        shot(page, "memory-reactivate-confirm")
        page.get_by_role("button", name=f"Reactivate memory #{kept[0]}").click()
        page.get_by_text(f"Reactivated memory {kept[0]}.").wait_for()
        assert MemoryRecord.objects.get(pk=kept[0]).lifecycle_status == "active"

"""Maintenance in a real browser, with a real Celery worker: preview a sweep, execute it
after confirming the count, and watch the progress bar until the run has finished."""

from __future__ import annotations

import pytest

from maintenance.models import MaintenanceRun
from recall.models import MemoryRecord
from tests.maintenance.helpers import ago
from tests.recall import factories

pytestmark = [
    pytest.mark.browser,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    # Slow batches, so that the bar is seen part-way.
    pytest.mark.worker_env(MAINTENANCE_BATCH_SIZE="10", MAINTENANCE_BATCH_PAUSE_MS="100"),
]

COUNT = 300


class MaintenanceBrowserTests:
    def test_an_operator_previews_executes_with_confirmation_and_watches_the_progress(
        self, page, live_server, login, operator, workspace_a, celery_workers, shot
    ):
        rows = factories.memories(
            workspace_a, *[{"content": f"Spring offer {n} for Ada"} for n in range(COUNT)]
        )
        MemoryRecord.objects.filter(pk__in=[r.pk for r in rows]).update(expires_at=ago(days=2))
        celery_workers.start()
        login(page, "olga", "pw-olga")

        page.goto(f"{live_server.url}/w/team-a/maintenance/")
        shot(page, "maintenance-index")
        page.get_by_role("button", name="Preview expiry").click()
        # Queued for the worker: the status polls until the preview is done, then the page
        # reloads with what it would change.
        execute = page.get_by_role("link", name=f"Execute: expire {COUNT} memories…")
        execute.wait_for(timeout=30_000)
        assert "nothing was changed" in page.locator("#run-progress").inner_text()
        assert "Spring offer" in page.locator("table.items").inner_text()
        shot(page, "maintenance-preview")
        assert MemoryRecord.objects.filter(lifecycle_status="expired").count() == 0

        execute.click()
        assert f"This changes exactly the {COUNT} memories" in page.inner_text("main")
        shot(page, "maintenance-confirm")
        page.get_by_role("button", name=f"Expire {COUNT} memories").click()

        bar = page.locator("#run-progress progress")
        bar.wait_for()
        seen: list[int] = []
        for _ in range(200):
            if page.locator("#run-progress").count() == 0:
                break
            text = page.locator("#run-progress").inner_text()
            value = page.locator("#run-progress progress").get_attribute("value")
            if value is not None:
                seen.append(int(value))
            if "changed" in text and "of" in text and "done" not in text:
                break
            if 0 < seen[-1] < COUNT and len([v for v in seen if 0 < v < COUNT]) == 1:
                shot(page, "maintenance-progress")
            page.wait_for_timeout(150)
        page.get_by_text(f"changed {COUNT} of {COUNT}").wait_for(timeout=30_000)
        shot(page, "maintenance-executed")

        assert any(0 < value < COUNT for value in seen), seen  # the bar moved part-way
        assert page.locator("#run-progress progress").get_attribute("value") == str(COUNT)
        run = MaintenanceRun.objects.get(mode="execute")
        assert (run.status, run.applied) == ("succeeded", COUNT)
        assert MemoryRecord.objects.filter(lifecycle_status="expired").count() == COUNT
        page.locator("dl.facts").get_by_role("link", name=f"#{run.event_id}").click()
        assert "maintenance.executed" in page.inner_text("main")

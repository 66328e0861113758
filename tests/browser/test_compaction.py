"""Compaction in a real browser: an editor presses "Compact now" on a session, the run's
outcome appears in the session's runs and its turns are marked summarised, and the
dashboard's panel counts it; at a desktop's width and a phone's."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from chat.models import CompactionRun
from tests.chat.compaction_support import ANSWER, QUESTION, compacting, post, start
from tests.chat.helpers import roomy_floor

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def session(editor: Any, workload_a: Any) -> Any:
    """Seven exchanges: 80.5 % of the window, elevated, below any automatic trigger."""
    roomy_floor(editor.workspace)
    compacting(workload_a)
    found = start(workload_a)
    for _ in range(7):
        posted = post(found, ("assistant", ANSWER), ("user", QUESTION))
        assert posted.run is None
    return found


class CompactNowBrowserTests:
    def test_compact_now_shows_the_outcome_and_the_dashboard_counts_it(
        self, page, live_server, login, editor, session, shot
    ):
        login(page, "eddie", "pw-eddie")
        page.goto(f"{live_server.url}/w/team-a/sessions/{session.pk}/")
        expect(page.locator("#compaction")).to_contain_text("No compaction run yet")

        page.get_by_role("button", name="Compact now").click()
        page.wait_for_url(f"**/w/team-a/sessions/{session.pk}/#compaction")

        run = CompactionRun.objects.get()
        expect(page.locator(".messages")).to_contain_text(
            f"Compaction run {run.pk} finished: target met."
        )
        row = page.locator(f"#run-{run.pk}")
        expect(row).to_contain_text("manual")
        expect(row).to_contain_text("target met")
        expect(row).to_contain_text(f"{run.tokens_before} ({run.utilization_before:.1f}%)")
        expect(row).to_contain_text("not a language model")
        expect(page.locator("#turn-1")).to_contain_text(f"summarised by run #{run.pk}")
        expect(page.locator("#turn-14")).not_to_contain_text("summarised")
        shot(page, "compaction-session-1280")
        page.set_viewport_size(PHONE)
        extra = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert extra <= 0, f"the session page is {extra} px wider than a phone"
        shot(page, "compaction-session-390")

        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(f"{live_server.url}/w/team-a/")
        panel = page.locator("#compaction-panel")
        expect(panel.locator("svg.outcomes")).to_be_visible()
        assert panel.locator('rect[data-outcome="target_met"]').count() == 1
        expect(panel).to_contain_text("1 run: 1 met the target")
        shot(page, "compaction-dashboard-1280")
        page.set_viewport_size(PHONE)
        extra = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert extra <= 0, f"the dashboard is {extra} px wider than a phone"
        shot(page, "compaction-dashboard-390")

    def test_a_viewer_sees_the_runs_without_the_button(
        self, page, live_server, login, editor, viewer, session
    ):
        login(page, "vera", "pw-vera")
        page.goto(f"{live_server.url}/w/team-a/sessions/{session.pk}/")

        expect(page.locator("#compaction")).to_be_visible()
        assert page.get_by_role("button", name="Compact now").count() == 0
